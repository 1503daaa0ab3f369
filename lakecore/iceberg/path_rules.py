"""Where one Iceberg path may lie: the rules checked of every location, metadata file and write
path on its own (``lakecore.iceberg.roots`` has the rules between tables).

Rules:

* **Comparable text.** Locations are compared as ``normalize_location`` writes them: ``s3a`` and
  ``s3n`` read as ``s3``, a bare path as ``file://``, no trailing ``/``.
* **Qualified.** No ``.``, ``..`` or empty segment: a ``..`` would lead out of a folder the path
  textually starts with.
* **Inside the warehouse, strictly.** Every table location, metadata file and write path, and
  every namespace ``location``, lies under the warehouse and is not the warehouse itself
  (``LakecoreCatalog.check_location``).
* **Out of lakecore's own directories.** Inside the lakehouse root, a path may not be the root
  itself nor lie in a first segment that is a lakecore name (a leading ``_`` or ``.``, or a
  4-binary-digit hash directory): lakecore's gc lists only the root's top level and its hash
  directories and deletes only files with lakecore's names, so Iceberg files kept elsewhere are
  never listed, let alone deleted.
"""

from __future__ import annotations

import re
from typing import Final

from lakecore.errors import InvalidLocationError
from lakecore.locations import normalize_root_uri

_HASH_SEGMENT_RE: Final = re.compile(r"^[01]{4}$")
_SCHEME_RE: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def normalize_location(location: str) -> str:
    """A location as comparable text: ``s3a``/``s3n`` read as ``s3``, a bare path as
    ``file://``, no trailing ``/``."""
    if _SCHEME_RE.match(location) is None:
        return normalize_root_uri(location).rstrip("/")
    scheme, rest = location.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    return f"{scheme}://{rest}".rstrip("/")


def check_qualified(location: str, what: str) -> None:
    body = location.split("://", 1)[-1]
    segments = body.split("/")[1:] if "://" in location else body.split("/")
    if any(s in ("", ".", "..") for s in segments[:-1]) or segments[-1] in (".", ".."):
        raise InvalidLocationError(
            f"{what} {location!r} is not qualified ('.', '..' or empty segments)"
        )


def refuse_lakecore_directory(location: str, root_uri: str, what: str) -> None:
    """Refuse a location inside the lakehouse root that is, or is inside, a place where
    lakecore keeps (and its gc lists) its own files."""
    root = root_uri.rstrip("/")
    if location == root:
        raise InvalidLocationError(
            f"{what} {location} is the lakehouse root itself; use a directory of its own such as {root}/warehouse"
        )
    if not location.startswith(root + "/"):
        return
    first = location[len(root) + 1 :].split("/", 1)[0]
    if first.startswith(("_", ".")) or _HASH_SEGMENT_RE.match(first):
        raise InvalidLocationError(
            f"{what} {location} lies in {root}/{first}, a name lakecore uses for its own files "
            f"(leading '_' or '.', or a 4-binary-digit hash directory); use a directory such as {root}/warehouse"
        )


def check_warehouse_location(location: str, what: str, warehouse: str, lakehouse_root: str) -> None:
    """Refuse a location outside the warehouse, the warehouse itself, or one inside lakecore's
    own directories.

    Raises:
        InvalidLocationError: with the reason.
    """
    normalized = normalize_location(location)
    check_qualified(normalized, what)
    if normalized == warehouse:
        raise InvalidLocationError(
            f"{what} {location} is the warehouse itself; a table's files go in a folder of "
            "their own inside it"
        )
    if not normalized.startswith(warehouse + "/"):
        raise InvalidLocationError(
            f"{what} {location} is outside the warehouse {warehouse}; tables of this catalog "
            "keep their files under it"
        )
    refuse_lakecore_directory(normalized, lakehouse_root, what)


__all__ = [
    "check_qualified",
    "check_warehouse_location",
    "normalize_location",
    "refuse_lakecore_directory",
]
