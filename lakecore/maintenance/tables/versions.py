"""The lakehouse versions table maintenance must keep whole, and the Iceberg tables each holds.

Rules:

* **Retained** is what version compaction keeps at the same ``now``
  (``lakecore.maintenance.expire.plan_expiry``, docs/format.md#retention): the latest version,
  the newest ``minimum_versions_to_keep``, every version younger than its maximum age, and every
  version an export pins. A version past retention may still have its root file until
  compact-versions runs, but nothing may rely on it any more. Every file the Iceberg metadata
  of a table in a retained version names is kept, so that time travel to any retained version
  (``version=``, the REST server's ``lakecore@version=``) still reads and scans every table.
* **After the run's own commits** the retained set is read again: the commits are new versions,
  and they may push an old version out of the newest ``minimum_versions_to_keep``. A dry run
  commits nothing and answers what would be retained if its commits landed now
  (``retained_after``).
* **A version's tables** are its resolved table keys (merge-on-read, ``lakecore.core.view``), each
  with its definition file; a definition is read once however many versions name it (files
  are immutable). A definition that cannot be read is an ``Unreadable``: what its table names
  is unknown (see ``lakecore.maintenance.tables`` for what that blocks).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lakecore.core import keys as K
from lakecore.core.defs import decode_table_def
from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.core.versions import expired_versions
from lakecore.core.view import LakehouseView
from lakecore.errors import LakecoreError, NotFoundError
from lakecore.maintenance.expire import ExpiryPlan, plan_expiry
from lakecore.maintenance.roots import LoadedRoot
from lakecore.maintenance.tables.named import Kind, Unreadable
from lakecore.maintenance.tables.pointer_keys import CHECKED_PROPERTY, METADATA_LOCATION_PROPERTY


@dataclass(frozen=True)
class HeldTable:
    """A table key of one version and the definition file it points at."""

    version: int
    namespace: str
    table: str
    definition: str

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"


@dataclass(frozen=True)
class TableDefinition:
    """What table maintenance reads of a table definition."""

    definition: str
    table_format: str
    table_type: str
    metadata_location: str | None  # as the definition names it; None: no Iceberg metadata
    # False when other code (a client of an older lakecore) changed the table after the catalog
    # checked it: the location registry may not know where its files lie.
    checked: bool

    @property
    def is_iceberg(self) -> bool:
        return self.table_format == "ICEBERG" and self.metadata_location is not None


@dataclass
class Retention:
    """The retained versions at ``now`` (roots read strictly) and what decided them."""

    plan: ExpiryPlan

    @property
    def latest(self) -> int:
        return self.plan.latest

    @property
    def roots(self) -> list[LoadedRoot]:
        return self.plan.retained_roots

    @property
    def versions(self) -> list[int]:
        return self.plan.retained


def retention_at(storage: Storage, now_millis: int) -> Retention:
    """The versions compact-versions would keep at ``now_millis`` (fails closed: any root
    that cannot be read stops the run, ``ExpiryRefusedError``)."""
    return Retention(plan_expiry(storage, now_millis))


def retained_after(retention: Retention, new_versions: int, now_millis: int) -> set[int]:
    """The versions of ``retention`` still retained once ``new_versions`` more are committed at
    ``now_millis`` (what a dry run assumes its commits would do)."""
    plan = retention.plan
    created = {v: plan.roots[v].info.created_at_millis for v in plan.retained}
    latest = plan.latest + new_versions
    created.update({plan.latest + i: now_millis for i in range(1, new_versions + 1)})
    expired = set(expired_versions(created, latest, plan.lakehouse_def, now_millis))
    pinned = set(plan.pinned.values())
    return {v for v in plan.retained if v not in expired or v in pinned}


def version_tables(
    storage: Storage, root: LoadedRoot, cache: NodeCache | None = None
) -> list[HeldTable]:
    """Every table key of a version, with its definition file, in key order."""
    store = NodeStore(
        storage,
        root.lakehouse_def.order,
        cache=cache if cache is not None else NodeCache(),
        external_roots=root.external_roots,
    )
    view = LakehouseView(storage, root.info, root.lakehouse_def, store)
    out = []
    for key, location in view.items(K.TABLE_KEY_PREFIX):
        namespace, table = K.parse_table_key(key, root.lakehouse_def)
        out.append(HeldTable(root.version, namespace, table, location))
    return out


def read_definition(
    storage: Storage, root: LoadedRoot, location: str
) -> TableDefinition | Unreadable:
    """A table definition as maintenance reads it, or why it could not be read."""
    store = NodeStore(storage, root.lakehouse_def.order, external_roots=root.external_roots)
    view = LakehouseView(storage, root.info, root.lakehouse_def, store)
    try:
        definition = decode_table_def(view.read_location(location), location)
    except LakecoreError as exc:
        return Unreadable(location, Kind.METADATA, exc.one_line(), exc.exit_code == 6)
    metadata = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
    stamp = definition.format_properties.get(CHECKED_PROPERTY)
    return TableDefinition(
        definition=location,
        table_format=definition.table_format or "ICEBERG",
        table_type=definition.table_type or "MANAGED",
        metadata_location=str(metadata) if metadata else None,
        checked=stamp is None or stamp == metadata,
    )


def refuse_unknown_scope(storage: Storage, root: LoadedRoot, scope: str | None) -> None:
    """A ``--namespace`` that names no namespace of the latest version (nor one inside it) is
    a mistake, not an empty run: ``NotFoundError`` naming the nearest namespace there is."""
    if scope is None:
        return
    store = NodeStore(storage, root.lakehouse_def.order, external_roots=root.external_roots)
    view = LakehouseView(storage, root.info, root.lakehouse_def, store)
    if view.namespace_exists(scope) or view.has_child_namespaces(scope):
        return
    import difflib

    names = view.list_namespaces()
    close = difflib.get_close_matches(scope, names, n=1)
    hint = (
        f"; did you mean {close[0]!r}?"
        if close
        else f" (namespaces: {', '.join(names[:5]) or 'none'})"
    )
    raise NotFoundError(
        f"--namespace {scope!r}: no such namespace in the latest version {root.version}{hint}"
    )


def in_scope(namespace: str, scope: str | None) -> bool:
    """Whether a namespace is ``scope`` or lies inside it (None: every namespace)."""
    return scope is None or namespace == scope or namespace.startswith(scope + ".")


def held_in(roots: Iterable[LoadedRoot], storage: Storage) -> list[HeldTable]:
    """The tables of every version in ``roots``, one node cache for all (consecutive versions
    share almost every node)."""
    cache = NodeCache()
    return [held for root in roots for held in version_tables(storage, root, cache)]


__all__ = [
    "HeldTable",
    "Retention",
    "TableDefinition",
    "held_in",
    "in_scope",
    "read_definition",
    "refuse_unknown_scope",
    "retained_after",
    "retention_at",
    "version_tables",
]
