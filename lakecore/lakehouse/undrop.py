"""Undrop: bring a dropped table back as it was in the last retained version that held it.

Rules:

* **Only from a retained version.** The versions considered are those version compaction keeps
  at this moment (docs/format.md#retention: the latest, the newest
  ``minimum_versions_to_keep``, those younger than their maximum age, those an export pins),
  newest first; ``--version N`` names one of them. A version past retention may still have
  its root file, but table maintenance may already have deleted what only it named, so it is
  refused with the versions that would do.
* **The name must be free.** A table of that name in the latest version is refused ("the
  name is taken now"): drop or rename it first. Its namespace must exist.
* **As it was.** The definition is the one that version held, byte for byte in its fields
  (columns, type, format, properties, format properties). An Iceberg table comes back
  through ``LakecoreCatalog.undrop_table``, which also restores its location-registry entries,
  checks that no table has taken its folders since, that its metadata file is still there,
  and takes back its purge mark in the same commit; ``undrop_plain`` is everything else.
* One commit, retried on a lost race like any catalog change.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from lakecore.core.defs import LakehouseDef, decode_table_def, pb, table_fields
from lakecore.core.versions import expired_versions
from lakecore.core.view import LakehouseView, list_versions
from lakecore.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from lakecore.lakehouse.lakehouse import Lakehouse
from lakecore.maintenance.clock import read_clocks


@dataclass(frozen=True)
class DroppedTable:
    """A table found in a retained version: where, and as what."""

    version: int
    namespace: str
    table: str
    definition: pb.TableDef
    definition_location: str
    lakehouse_def: LakehouseDef  # that version's (its location registry, its marks)

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"


def retained_versions(lh: Lakehouse) -> list[int]:
    """The readable versions retention keeps now, newest first."""
    infos = [i for i in list_versions(lh.storage) if i.readable and i.created_at_millis is not None]
    if not infos:
        return []
    latest = infos[0].version
    created = {i.version: int(i.created_at_millis or 0) for i in infos}
    now = read_clocks(lh.storage).now_millis
    gone = set(expired_versions(created, latest, lh.lakehouse_def, now))
    pinned = {i.version for i in infos if i.pinned_by}
    return [v for v in sorted(created, reverse=True) if v not in gone or v in pinned]


def find_dropped(
    lh: Lakehouse, namespace: str, table: str, version: int | None = None
) -> DroppedTable:
    """The table as the newest retained version (or ``version``) held it; refused when the name
    is taken now, the version is not retained, or no retained version holds it."""
    latest = lh.refresh()
    name = f"{namespace}.{table}"
    if latest.table_exists(namespace, table):
        raise AlreadyExistsError(
            f"table {name} exists in the latest version {latest.version}: the name is taken now; "
            "drop or rename that table first, then undrop"
        )
    retained = retained_versions(lh)
    if version is not None:
        if version > latest.version or version < 0:
            raise NotFoundError(
                f"there is no version {version} (the latest is {latest.version}; retained now: "
                f"{_shown(retained)})"
            )
        if version not in retained:
            raise NotFoundError(
                f"version {version} is not retained (retained now: {_shown(retained)}): table "
                "maintenance may already have deleted what only it named; undrop from a retained version"
            )
        candidates = [version]
    else:
        candidates = retained
    seen: set[str] = set()
    for candidate in candidates:
        view = latest.open_version(candidate) if candidate != latest.version else latest
        if view.table_exists(namespace, table):
            return _held(view, namespace, table)
        if view.namespace_exists(namespace):
            seen.update(view.list_tables(namespace))
    close = difflib.get_close_matches(table, sorted(seen), n=1)
    hint = f"; did you mean {namespace}.{close[0]}?" if close else ""
    if version is not None:
        raise NotFoundError(f"version {version} holds no table {name}{hint}")
    raise NotFoundError(
        f"no retained version holds a table {name} (retained now: {_shown(retained)}){hint or ': '}"
        + (
            ""
            if hint
            else "dropped before the oldest retained version, and whatever it named may be gone"
        )
    )


def _held(view: LakehouseView, namespace: str, table: str) -> DroppedTable:
    from lakecore.core import keys as K

    location = view.get(K.table_key(namespace, table, view.lakehouse_def))
    if location is None:
        raise NotFoundError(f"table {namespace}.{table} is not in version {view.version}")
    definition = decode_table_def(view.read_definition(location, namespace, table), location)
    return DroppedTable(view.version, namespace, table, definition, location, view.lakehouse_def)


def _shown(versions: list[int]) -> str:
    if not versions:
        return "none"
    if len(versions) <= 8:
        return ", ".join(map(str, versions))
    return f"{versions[-1]}..{versions[0]} ({len(versions)} versions)"


def undrop_plain(lh: Lakehouse, found: DroppedTable) -> int:
    """Create the table again with the definition it had; returns the committed version.
    For tables without Iceberg metadata (an Iceberg table goes through its catalog)."""
    definition = found.definition
    if definition.table_format == "ICEBERG" and definition.format_properties.get(
        "metadata_location"
    ):
        raise InvalidArgumentError(
            f"table {found.name} is an Iceberg table: undrop it through its catalog "
            "(LakecoreCatalog.undrop_table, or `lakecore table undrop`), which checks its folders"
        )
    with lh.transaction() as tx:
        if not tx.namespace_exists(found.namespace):
            raise NotFoundError(
                f"namespace {found.namespace!r} does not exist: create it first, then undrop {found.name}"
            )
        tx.create_table(found.namespace, found.table, **table_fields(definition))
    return lh.version


__all__ = ["DroppedTable", "find_dropped", "retained_versions", "undrop_plain"]
