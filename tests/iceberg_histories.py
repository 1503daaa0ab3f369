"""Iceberg tables with real histories, and an oracle for table maintenance written apart from it.

Tables are written with pyiceberg through ``LakecoreCatalog`` (appends, overwrites, deletes,
branches and tags, partition specs that change, a file one table adds from another). The oracle
reads what they name with pyiceberg's own public API (``Snapshot.manifests``,
``ManifestFile.fetch_manifest_entry``, the metadata's log and statistics) and the file system,
never with ``lakecore.maintenance.tables``: it is what the tests compare the job and the
in-process run with.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.io import load_file_io
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "part", StringType(), required=False),
)
BY_PART = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part")
)
DAY = 86_400_000


def rows(ids: Iterable[int], part: str = "a") -> pa.Table:
    ids = list(ids)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "part": pa.array([part] * len(ids), pa.string())}
    )


def catalog_of(
    uri: str, storage_options: dict[str, Any] | None = None, **extra: Any
) -> LakecoreCatalog:
    catalog = load_catalog(
        "test",
        **{"py-catalog-impl": "lakecore.iceberg.LakecoreCatalog", "uri": uri, **extra},
        **({"storage_options": storage_options} if storage_options else {}),
    )
    assert isinstance(catalog, LakecoreCatalog)
    return catalog


def new_lake(root: Path, *, latest_only: bool = True) -> tuple[str, LakecoreCatalog]:
    """A lakehouse at ``root`` and its catalog; ``latest_only``: retention keeps the latest
    version alone (what was expired goes in the same run)."""
    uri = str(root)
    if latest_only:
        Lakehouse.create(uri, minimum_versions_to_keep=1, maximum_version_age_millis=0)
    else:
        Lakehouse.create(uri)
    catalog = catalog_of(uri)
    catalog.create_namespace("ns")
    return uri, catalog


def history(catalog: LakecoreCatalog, name: str, steps: Iterable[str], **properties: str) -> Table:
    """A table written step by step: ``append``, ``overwrite``, ``delete`` (the rows of part a),
    ``tag:NAME``, ``branch:NAME`` (at the current snapshot), ``append@NAME`` (to a branch),
    ``spec`` (partition by ``part`` from then on), ``append-b`` (rows of part b)."""
    table = catalog.create_table(f"ns.{name}", SCHEMA, properties=properties)
    for counter, step in enumerate(steps, start=1):
        table = catalog.load_table(f"ns.{name}")
        ids = range(counter * 10, counter * 10 + 3)
        if step == "append":
            table.append(rows(ids))
        elif step == "append-b":
            table.append(rows(ids, "b"))
        elif step == "overwrite":
            table.overwrite(rows(ids))
        elif step == "delete":
            table.delete("part == 'a'")
        elif step == "spec":
            with table.update_spec() as update:
                update.add_identity("part")
        elif step.startswith("tag:"):
            snapshot = table.current_snapshot()
            assert snapshot is not None
            table.manage_snapshots().create_tag(snapshot.snapshot_id, step[4:]).commit()
        elif step.startswith("branch:"):
            snapshot = table.current_snapshot()
            assert snapshot is not None
            table.manage_snapshots().create_branch(snapshot.snapshot_id, step[7:]).commit()
        elif step.startswith("append@"):
            table.append(rows(ids), branch=step[7:])
        else:
            raise ValueError(f"unknown step {step}")
    return catalog.load_table(f"ns.{name}")


def local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def age(path: Path, days: float = 10) -> None:
    """Make a file look written ``days`` ago."""
    when = time.time() - days * 86400
    os.utime(path, (when, when))


def files_under(folder: Path) -> set[str]:
    return {f"file://{p}" for p in folder.rglob("*") if p.is_file()}


@dataclass
class Named:
    """What metadata names, by the oracle's own reading."""

    files: set[str] = field(default_factory=set)
    snapshots: dict[str, set[int]] = field(default_factory=dict)  # table name -> snapshot ids


def named_by(table: Table, snapshot_ids: set[int] | None = None) -> set[str]:
    """Every file a table's metadata names (only the snapshots ``snapshot_ids``, None: all):
    the metadata file and its log, statistics, manifest lists, manifests, live entries."""
    metadata: TableMetadata = table.metadata
    io = table.io
    out = {table.metadata_location, *(log.metadata_file for log in metadata.metadata_log)}
    out |= {s.statistics_path for s in metadata.statistics}
    out |= {s.statistics_path for s in metadata.partition_statistics}
    for snapshot in metadata.snapshots:
        if snapshot_ids is not None and snapshot.snapshot_id not in snapshot_ids:
            continue
        out.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            out.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if entry.status != ManifestEntryStatus.DELETED:
                    out.add(entry.data_file.file_path)
    return out


def retained_named(uri: str, versions: Iterable[int], **catalog_properties: Any) -> Named:
    """What the Iceberg tables of these lakehouse versions name, through time-travel catalogs."""
    named = Named()
    for version in versions:
        catalog = catalog_of(uri, version=str(version), **catalog_properties)
        for namespace in catalog.list_namespaces():
            for identifier in catalog.list_tables(namespace):
                table = catalog.load_table(identifier)
                named.files |= named_by(table)
                key = ".".join(identifier)
                named.snapshots.setdefault(key, set()).update(
                    s.snapshot_id for s in table.metadata.snapshots
                )
    return named


def kept_by_icebergs_rules(table: Table, min_snapshots: int) -> set[int]:
    """The snapshots Iceberg keeps when every snapshot is older than the maximum age and no ref
    ages out: each branch's newest ``min_snapshots`` ancestors (its own
    ``min-snapshots-to-keep`` if set), each tag's snapshot; nothing unreferenced."""
    metadata = table.metadata
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    kept: set[int] = set()
    for ref in metadata.refs.values():
        if ref.snapshot_ref_type.value == "tag":
            kept.add(ref.snapshot_id)
            continue
        keep = ref.min_snapshots_to_keep or min_snapshots
        current = by_id.get(ref.snapshot_id)
        while current is not None and keep > 0:
            kept.add(current.snapshot_id)
            keep -= 1
            parent = current.parent_snapshot_id
            current = by_id.get(parent) if parent is not None else None
    return kept


def io_of(table: Table) -> Any:
    return load_file_io(table.properties, table.metadata_location)


__all__ = [
    "BY_PART",
    "DAY",
    "SCHEMA",
    "Named",
    "age",
    "catalog_of",
    "files_under",
    "history",
    "io_of",
    "kept_by_icebergs_rules",
    "local",
    "named_by",
    "new_lake",
    "retained_named",
    "rows",
]
