"""Identifiers: the stored names of the namespaces, tables and views a catalog call names.

Rules:

* **A namespace identifier's levels are joined with ``.``** (``lakecore.core.namespaces``); an
  empty one is ``NoSuchNamespaceError``, as pyiceberg's catalogs say. Reads take any stored
  name, including one from before namespaces nested; a name to create is checked against the
  lakehouse's name rule (``new_namespace``).
* **A table or view identifier is its namespace's levels, then its name.** One without a
  namespace is ``NoSuchNamespaceError`` where the object is to be made, ``NoSuchTableError``
  (``NoSuchViewError``) where one is read, with pyiceberg's wording first.
"""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    ValidationError,
)
from pyiceberg.typedef import Identifier

from lakecore.core import namespaces as NS
from lakecore.errors import InvalidArgumentError


def namespace_of(namespace: str | Identifier) -> str:
    """The stored name of a namespace to read or change (its levels joined with ``.``).

    Raises:
        NoSuchNamespaceError: an empty identifier (pyiceberg's type for it).
    """
    parts = Catalog.identifier_to_tuple(namespace)
    if not parts or not any(p.strip() for p in parts):
        raise NoSuchNamespaceError(f"Empty namespace identifier: {namespace!r}")
    return NS.join(parts)


def new_namespace(namespace: str | Identifier, max_bytes: int) -> str:
    """The stored name of a namespace to create, whose name may take ``max_bytes``.

    Raises:
        NoSuchNamespaceError: an empty identifier or an empty level.
        ValidationError: a level holds ``.``, or the name breaks the name rule (too long,
            a space or a control character).
    """
    parts = Catalog.identifier_to_tuple(namespace)
    blank = [i + 1 for i, p in enumerate(parts) if not p.strip()]
    if not parts or blank:
        which = f"level {blank[0]} of {len(parts)} is empty; " if len(parts) > 1 else ""
        raise NoSuchNamespaceError(
            f"Empty namespace identifier: {namespace!r} ({which}every level needs a name)"
        )
    try:
        return NS.check_new_levels(parts, max_bytes)
    except InvalidArgumentError as exc:
        raise ValidationError(str(exc)) from exc


def table_of(
    identifier: str | Identifier, err: type[Exception] = NoSuchTableError
) -> tuple[str, str]:
    """(namespace, table) of an identifier: every level but the last is the namespace.

    Raises:
        ``err``: the identifier has no namespace (NoSuchNamespaceError where a table is
            to be made, NoSuchTableError where one is read).
    """
    parts = Catalog.identifier_to_tuple(identifier)
    if len(parts) < 2 or not all(p.strip() for p in parts[:-1]):
        detail = f"table identifier {'.'.join(parts)!r} has no namespace"
        if err is NoSuchTableError:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(parts)} ({detail})")
        raise err(f"{detail}: a table identifier is 'namespace.table'")
    return NS.join(parts[:-1]), parts[-1]


def view_of(
    identifier: str | Identifier, err: type[Exception] = NoSuchViewError
) -> tuple[str, str]:
    """(namespace, view) of an identifier: every level but the last is the namespace."""
    parts = Catalog.identifier_to_tuple(identifier)
    if len(parts) < 2 or not all(p.strip() for p in parts[:-1]):
        detail = f"view identifier {'.'.join(parts)!r} has no namespace"
        if err is NoSuchViewError:
            raise NoSuchViewError(f"View does not exist: {'.'.join(parts)} ({detail})")
        raise err(f"{detail}: a view identifier is 'namespace.view'")
    return NS.join(parts[:-1]), parts[-1]


__all__ = ["namespace_of", "new_namespace", "table_of", "view_of"]
