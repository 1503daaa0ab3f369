"""Namespaces of any depth (docs/format.md#nested-namespaces).

A nested namespace is stored under the name of its levels joined with ``.`` (``a.b.c``): the
namespace key is ``B===a.b.c`` padded, exactly as a flat name's, so files keep their bytes and
a lakehouse written before nesting reads the same (a name that held a ``.`` now also reads as
levels). Rules for a name being created (reading accepts any stored name):

* every level is 1 or more bytes and holds no ``.`` (the separator);
* the joined name obeys the name rule (docs/format.md#object-names), within
  ``namespace_name_max_size_bytes``;
* its parent need not exist (as in pyiceberg's SQL catalog, and as a lakehouse written before
  nesting may hold ``a.b`` without ``a``): a parent with no key of its own is *implied*, listed
  among its parent's children, with no properties and no tables. ``parents=True`` (the CLI's
  ``--parents``; the Iceberg catalog always) creates the missing ancestors instead. A
  namespace that still has a child (or a table) cannot be dropped.

Key order keeps a namespace's descendants in one contiguous range, the keys that start with
``B===<name>.``; its direct children are found in that range by a skip-scan: one seek per
child, stepping over each child's own subtree (``child_namespaces``), never a scan of every
namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from lakecore.core import keys as K
from lakecore.core.tree.read import prefix_upper_bound
from lakecore.errors import InvalidNameError

# seek(start, stop): the first key in [start, stop), or None.
Seek = Callable[[str, str | None], str | None]

SEPARATOR: Final = "."


def levels(name: str) -> list[str]:
    """The levels of a stored namespace name (``a.b`` -> ``["a", "b"]``)."""
    return name.split(SEPARATOR)


def join(parts: Sequence[str]) -> str:
    return SEPARATOR.join(parts)


def parent(name: str) -> str | None:
    """The parent's name; None for a top-level namespace."""
    head, sep, _ = name.rpartition(SEPARATOR)
    return head if sep and head else None


def descendants_prefix(name: str | None) -> str:
    """The name prefix every descendant of ``name`` has (``""``: every namespace)."""
    return "" if name is None else name + SEPARATOR


def check_new_name(name: str, max_bytes: int) -> None:
    """Refuse a name a new namespace may not have; the message names the offending level.

    Raises:
        InvalidNameError: an empty level, or the joined name breaks the name rule.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"namespace name must be a string, not {type(name).__name__}")
    for i, level in enumerate(levels(name)):
        if not level:
            raise InvalidNameError(
                f"namespace {name!r}: level {i + 1} is empty (levels are joined with "
                f"{SEPARATOR!r}, and none may be empty or hold {SEPARATOR!r})"
            )
    K.validate_name(name, max_bytes, "namespace")


def check_new_levels(parts: Sequence[str], max_bytes: int) -> str:
    """The stored name of a namespace given as levels (an Iceberg identifier), checked.

    Raises:
        InvalidNameError: a level is empty or holds the separator, or the joined name breaks
            the name rule.
    """
    for i, level in enumerate(parts):
        if not isinstance(level, str):
            raise InvalidNameError(f"namespace level {i + 1} must be a string, not {level!r}")
        if SEPARATOR in level:
            raise InvalidNameError(
                f"namespace level {level!r} holds {SEPARATOR!r}, which separates levels; "
                f"give the levels one by one, as {tuple(level.split(SEPARATOR))!r}"
            )
    name = join(parts)
    check_new_name(name, max_bytes)
    return name


def key_range(name: str | None) -> tuple[str, str | None]:
    """[start, stop) of the keys of ``name``'s descendants (every namespace for None)."""
    start = K.NAMESPACE_KEY_PREFIX + descendants_prefix(name)
    return start, prefix_upper_bound(start)


def skip_scan_children(name: str | None, seek: Seek, lakehouse_def: Any) -> list[str]:
    """Direct children of ``name`` (None: the top level): one ``seek`` per child, stepping over
    each child's own key and then its subtree. A stored name with an empty level (possible
    before nesting) is no child of anything; its subtree is stepped over all the same."""
    start, stop = key_range(name)
    base = descendants_prefix(name)
    children: set[str] = set()
    cursor: str | None = start
    while cursor is not None:
        key = seek(cursor, stop)
        if key is None:
            break
        found = K.parse_namespace_key(key, lakehouse_def)
        level, sep, _ = found[len(base) :].partition(SEPARATOR)
        child = base + level
        if level:
            children.add(child)
        if sep:  # a deeper descendant: step over the child's whole subtree
            cursor = prefix_upper_bound(K.NAMESPACE_KEY_PREFIX + child + SEPARATOR)
        else:  # the child's own key: the next key after it
            cursor = key + "\x00"
    return sorted(children)


__all__ = [
    "SEPARATOR",
    "Seek",
    "check_new_levels",
    "check_new_name",
    "descendants_prefix",
    "join",
    "key_range",
    "levels",
    "parent",
    "skip_scan_children",
]
