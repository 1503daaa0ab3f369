"""Which snapshots and refs of one Iceberg table expire: Iceberg's own rules, at a fixed ``now``.

This is Java Iceberg's ``RemoveSnapshots`` (``core/.../RemoveSnapshots.java``, the action
behind Spark's ``expire_snapshots`` procedure) applied to one table's metadata, so that a table
expires here exactly as it would there. pyiceberg 0.12's ``expire_snapshots()`` has no policy
of its own (``older_than``/``by_id`` only, branch and tag heads protected), so the rules are
Java's:

* **Refs.** ``main`` is always kept. Any other branch or tag is kept while its snapshot exists
  and ``now - snapshot.timestamp <= max-ref-age`` (the ref's own ``max-ref-age-ms``, else the
  table's ``history.expire.max-ref-age-ms``, else the lakehouse default ``table_max_ref_age``:
  never, as Iceberg's). A ref that is not kept is removed with the metadata change.
* **Branches keep their ancestry.** For each kept branch, its snapshot and its ancestors are
  kept, newest first, while fewer than ``min-snapshots-to-keep`` are kept *or* the ancestor is
  at least as young as ``now - max-snapshot-age`` (the branch's own ``min-snapshots-to-keep``
  and ``max-snapshot-age-ms``, else the table's ``history.expire.*`` properties, else the
  lakehouse defaults ``table_min_snapshots_to_keep`` (1) and ``table_max_snapshot_age``
  (5 days)); the walk stops at the first ancestor that fails both.
* **Tags keep their snapshot** (and only it).
* **Unreferenced snapshots** (no kept branch reaches them, no kept tag names them) are kept
  while younger than the table's ``max-snapshot-age``.
* Every other snapshot expires. ``gc.enabled=false`` on a table (Iceberg refuses to expire
  such a table: its files may be another's) leaves it alone; so does a table property that is
  not a number (refused, as Java's ``PropertyUtil`` would throw, never guessed).

The change is what ``RemoveSnapshots`` commits: the refs removed, then the snapshots; their
statistics and partition statistics files go with them (pyiceberg's ``RemoveSnapshotsUpdate``
drops the statistics; the partition statistics are removed explicitly here). It is guarded by
requirements on the table's UUID and on every ref it had, so a table that changed meanwhile
fails the commit instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakecore.core.units import parse_duration_millis
from lakecore.errors import InvalidArgumentError
from lakecore.maintenance.settings import NEVER, MaintenanceSettings

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate

MAX_SNAPSHOT_AGE_PROPERTY: Final = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP_PROPERTY: Final = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_PROPERTY: Final = "history.expire.max-ref-age-ms"
GC_ENABLED_PROPERTY: Final = "gc.enabled"
MAIN_BRANCH: Final = "main"
# Java's Long.MAX_VALUE: a ref that never ages out.
NEVER_MILLIS: Final = (1 << 63) - 1


@dataclass(frozen=True)
class ExpiryDefaults:
    """The lakehouse-wide defaults a table's own ``history.expire.*`` properties override."""

    max_snapshot_age_millis: int = 5 * 86_400_000
    min_snapshots_to_keep: int = 1
    max_ref_age_millis: int = NEVER_MILLIS

    @classmethod
    def from_settings(cls, settings: MaintenanceSettings) -> ExpiryDefaults:
        return cls(
            max_snapshot_age_millis=parse_duration_millis(
                settings.table_max_snapshot_age, what="table_max_snapshot_age"
            ),
            min_snapshots_to_keep=settings.table_min_snapshots_to_keep,
            max_ref_age_millis=NEVER_MILLIS
            if settings.table_max_ref_age == NEVER
            else parse_duration_millis(settings.table_max_ref_age, what="table_max_ref_age"),
        )

    def as_details(self) -> dict[str, int | None]:
        return {
            "max_snapshot_age_millis": self.max_snapshot_age_millis,
            "min_snapshots_to_keep": self.min_snapshots_to_keep,
            "max_ref_age_millis": None
            if self.max_ref_age_millis == NEVER_MILLIS
            else self.max_ref_age_millis,
        }


@dataclass(frozen=True)
class SnapshotExpiry:
    """What expires in one table: snapshot ids and ref names, both sorted; ``skipped`` says
    why nothing may expire (gc disabled, a bad property), else None."""

    snapshot_ids: tuple[int, ...] = ()
    refs: tuple[str, ...] = ()
    skipped: str | None = None

    @property
    def changes(self) -> bool:
        return bool(self.snapshot_ids or self.refs)


def _property(properties: Mapping[str, str], name: str, default: int) -> int:
    value = properties.get(name)
    if value is None:
        return default
    text = str(value).strip()
    if not text.lstrip("-").isdigit():
        raise InvalidArgumentError(f"table property {name}={value!r} is not a whole number")
    return int(text)


def gc_disabled(properties: Mapping[str, str]) -> bool:
    """Iceberg's ``gc.enabled`` (default true): false means no file of the table may be
    deleted by expiry or orphan removal."""
    return str(properties.get(GC_ENABLED_PROPERTY, "true")).strip().lower() == "false"


def plan_snapshot_expiry(
    metadata: TableMetadata, now_millis: int, defaults: ExpiryDefaults
) -> SnapshotExpiry:
    """The snapshots and refs that expire at ``now_millis`` (see the module docstring)."""
    properties = metadata.properties
    if gc_disabled(properties):
        return SnapshotExpiry(skipped="gc.enabled is false")
    try:
        max_age = _property(properties, MAX_SNAPSHOT_AGE_PROPERTY, defaults.max_snapshot_age_millis)
        min_keep = _property(
            properties, MIN_SNAPSHOTS_TO_KEEP_PROPERTY, defaults.min_snapshots_to_keep
        )
        max_ref_age = _property(properties, MAX_REF_AGE_PROPERTY, defaults.max_ref_age_millis)
    except InvalidArgumentError as exc:
        return SnapshotExpiry(skipped=str(exc))
    if not metadata.snapshots:
        return SnapshotExpiry()
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    expire_older_than = now_millis - max_age

    kept_refs = {}
    for name, ref in metadata.refs.items():
        if name == MAIN_BRANCH:
            kept_refs[name] = ref
            continue
        snapshot = by_id.get(ref.snapshot_id)
        ref_max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else max_ref_age
        if snapshot is not None and now_millis - snapshot.timestamp_ms <= ref_max_age:
            kept_refs[name] = ref

    def ancestors(snapshot_id: int) -> list[int]:
        chain: list[int] = []
        seen: set[int] = set()
        current = by_id.get(snapshot_id)
        while current is not None and current.snapshot_id not in seen:
            seen.add(current.snapshot_id)
            chain.append(current.snapshot_id)
            parent = current.parent_snapshot_id
            current = by_id.get(parent) if parent is not None else None
        return chain

    keep: set[int] = {ref.snapshot_id for ref in kept_refs.values()}
    referenced: set[int] = set()
    for ref in kept_refs.values():
        if ref.snapshot_ref_type.value == "branch":
            chain = ancestors(ref.snapshot_id)
            referenced.update(chain)
            older_than = (
                now_millis - ref.max_snapshot_age_ms
                if ref.max_snapshot_age_ms is not None
                else expire_older_than
            )
            branch_min = (
                ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else min_keep
            )
            kept_here = 0
            for snapshot_id in chain:
                if kept_here < branch_min or by_id[snapshot_id].timestamp_ms >= older_than:
                    keep.add(snapshot_id)
                    kept_here += 1
                else:
                    break
        else:
            referenced.add(ref.snapshot_id)
    for snapshot in metadata.snapshots:
        if snapshot.snapshot_id not in referenced and snapshot.timestamp_ms >= expire_older_than:
            keep.add(snapshot.snapshot_id)
    return SnapshotExpiry(
        snapshot_ids=tuple(sorted(s for s in by_id if s not in keep)),
        refs=tuple(sorted(name for name in metadata.refs if name not in kept_refs)),
    )


def expiry_change(
    table_uuid: str,
    refs: Mapping[str, int],
    partition_statistics: Iterable[int],
    expiry: SnapshotExpiry,
) -> tuple[tuple[TableRequirement, ...], tuple[TableUpdate, ...]]:
    """The requirements and updates that commit ``expiry`` to a table whose metadata has this
    UUID, these refs (name -> snapshot id) and partition statistics for these snapshots: the
    refs removed, then the snapshots (their statistics go with them) and their partition
    statistics; guarded by the table's UUID and the snapshot of every ref it had."""
    import uuid

    from pyiceberg.table.update import (
        AssertRefSnapshotId,
        AssertTableUUID,
        RemovePartitionStatisticsUpdate,
        RemoveSnapshotRefUpdate,
        RemoveSnapshotsUpdate,
    )

    # By the spec's (alias) names: the pydantic models take them, and mypy sees only those.
    requirements: list[TableRequirement] = [AssertTableUUID(uuid=uuid.UUID(table_uuid))]
    requirements += [
        AssertRefSnapshotId.model_validate({"ref": name, "snapshot-id": snapshot_id})
        for name, snapshot_id in sorted(refs.items())
    ]
    updates: list[TableUpdate] = [
        RemoveSnapshotRefUpdate.model_validate({"ref-name": name}) for name in expiry.refs
    ]
    if expiry.snapshot_ids:
        gone = set(expiry.snapshot_ids)
        updates.append(
            RemoveSnapshotsUpdate.model_validate({"snapshot-ids": list(expiry.snapshot_ids)})
        )
        updates += [
            RemovePartitionStatisticsUpdate.model_validate({"snapshot-id": snapshot_id})
            for snapshot_id in sorted(set(partition_statistics))
            if snapshot_id in gone
        ]
    return tuple(requirements), tuple(updates)


__all__ = [
    "GC_ENABLED_PROPERTY",
    "MAIN_BRANCH",
    "MAX_REF_AGE_PROPERTY",
    "MAX_SNAPSHOT_AGE_PROPERTY",
    "MIN_SNAPSHOTS_TO_KEEP_PROPERTY",
    "NEVER_MILLIS",
    "ExpiryDefaults",
    "SnapshotExpiry",
    "expiry_change",
    "gc_disabled",
    "plan_snapshot_expiry",
]
