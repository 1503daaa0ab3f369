"""Table maintenance's executor units, as rows: what the Spark job fans out.

The Spark job (``jobs/table_maintenance.py``) keeps its sets as DataFrames and runs these units
in ``mapInArrow``; they are engine-neutral (plain tuples) and picklable:

    held        (version, namespace, table, definition)       a version's table keys
    defined     (definition, table_format, table_type, metadata, checked, problem)
    planned     one ``Planned`` per in-scope table of the latest version: its metadata read, its
                expiry planned (``run.plan_table``), its facts (``TableInfo``)
    walked      (kind, path, size, owner, payload) for one table's units: the files its
                retained metadata names (``R``), the files only its expired snapshots or its
                purge named (``E``, with their owner), the files that could not be read (``P``,
                an ``Unreadable`` with the metadata that met it), the facts of each metadata
                file (``I``, a ``TableInfo``), and the reads made (``C``)

A table's units are walked in one task with one ``FileGraph``, so every metadata file, manifest
list and manifest of a table is read once however many snapshots and lakehouse versions share
it; a file named by several tables (rare: ``add_files``, a register) is read by each.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache
from lakecore.maintenance.roots import load_root
from lakecore.maintenance.tables.commits import PlannedExpiry
from lakecore.maintenance.tables.graph import FileGraph, Unit
from lakecore.maintenance.tables.named import (
    Kind,
    MetadataFacts,
    PathForm,
    Unreadable,
    read_metadata,
)
from lakecore.maintenance.tables.policy import ExpiryDefaults, gc_disabled
from lakecore.maintenance.tables.rules import table_folders
from lakecore.maintenance.tables.run import plan_table
from lakecore.maintenance.tables.versions import (
    HeldTable,
    TableDefinition,
    read_definition,
    version_tables,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO


@dataclass(frozen=True)
class TableInfo:
    """What the driver needs of a table from one of its metadata files."""

    metadata: str
    table_uuid: str
    folders: tuple[str, ...]
    gc_disabled: bool
    snapshot_ids: tuple[int, ...]


def dumps(value: object) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def held_rows(storage: Storage, versions: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """Every table key of these versions (an executor unit: one node cache for all of them).
    A version that cannot be read raises: retained versions were read strictly already."""
    cache = NodeCache()
    for version in versions:
        root = load_root(storage, version)
        for held in version_tables(storage, root, cache):
            yield (held.version, held.namespace, held.table, held.definition)


def defined_rows(storage: Storage, items: Sequence[tuple[str, int]]) -> Iterator[tuple[Any, ...]]:
    """Each definition (with a version that names it), read (an executor unit)."""
    roots: dict[int, Any] = {}
    for definition, version in items:
        root = roots.get(version)
        if root is None:
            root = roots[version] = load_root(storage, version)
        found = read_definition(storage, root, definition)
        if isinstance(found, Unreadable):
            yield (definition, None, None, None, None, dumps(found))
        else:
            yield (
                definition,
                found.table_format,
                found.table_type,
                found.metadata_location,
                found.checked,
                None,
            )


@dataclass(frozen=True)
class Planned:
    """One in-scope table of the latest version, its metadata read and its expiry planned."""

    namespace: str
    table: str
    metadata: str
    plan: PlannedExpiry | str | None  # the expiry, a reason it is left alone, or nothing
    info: TableInfo | None
    problem: Unreadable | None = None


def plan_rows(
    io: FileIO,
    form: PathForm,
    tables: Sequence[tuple[str, str, str, str, str]],
    now_millis: int,
    defaults: ExpiryDefaults,
) -> Iterator[tuple[bytes]]:
    """Read each table's current metadata and plan its expiry (an executor unit); ``tables`` are
    (namespace, table, definition, metadata, table type). One pickled ``Planned`` each."""
    read: dict[str, Any] = {}
    for namespace, table, definition, location, table_type in tables:
        answer = read.get(location)
        if answer is None:
            answer = read[location] = read_metadata(io, location, form)
        held = HeldTable(0, namespace, table, definition)
        if isinstance(answer, Unreadable):
            yield (dumps(Planned(namespace, table, location, None, None, answer)),)
            continue
        metadata, facts = answer
        table_def = TableDefinition(definition, "ICEBERG", table_type, location, True)
        planned = plan_table(held, table_def, metadata, facts, now_millis, defaults)
        yield (dumps(Planned(namespace, table, location, planned, info_of(location, facts, form))),)


def info_of(location: str, facts: MetadataFacts, form: PathForm) -> TableInfo:
    return TableInfo(
        metadata=location,
        table_uuid=facts.table_uuid,
        folders=table_folders(facts.table_location, facts.properties, form),
        gc_disabled=gc_disabled(facts.properties),
        snapshot_ids=tuple(s.snapshot_id for s in facts.snapshots),
    )


RETAINED = "retained"
CURRENT = "current"  # retained, and held by the newest version: the table as it is now
EXPIRED = "expired"
PURGED = "purged"


@dataclass(frozen=True)
class WalkUnit:
    """What to walk in one metadata file: ``retained`` or ``current`` (whole, or only
    ``snapshots``: what a dry run assumes an expiry leaves; ``current`` when the newest version
    holds it), ``expired`` (only ``snapshots``, the expired ones) or ``purged`` (whole: a purge
    mark's table). ``owner`` names whose candidates ``E`` rows are."""

    metadata: str
    role: str
    snapshots: tuple[int, ...] | None = None
    owner: str | None = None


def walk_rows(
    io: FileIO, form: PathForm, units: Sequence[WalkUnit], threads: int = 1
) -> Iterator[tuple[Any, ...]]:
    """Walk one table's units (an executor unit; see the module doc for the rows)."""
    graph = FileGraph(form=form)
    graph.read(io, {u.metadata for u in units}, threads=threads)

    def unit(u: WalkUnit) -> Unit:
        return Unit(u.metadata, None if u.snapshots is None else frozenset(u.snapshots))

    reached = graph.reach([unit(u) for u in units if u.role in (RETAINED, CURRENT)])
    # A candidate is what the expired snapshots (or the purged table) named and the table as
    # it is now does not; whether other retained metadata names it is the global anti-join's.
    current = graph.reach([unit(u) for u in units if u.role == CURRENT]).files
    for path, (_kind, size) in reached.files.items():
        yield ("R", path, size, None, None)
    for problem, metadata_locations in reached.unreadable.values():
        for location in sorted(metadata_locations):
            yield ("P", problem.path, -1, location, dumps(problem))
    for walked in units:
        if walked.role in (RETAINED, CURRENT):
            continue
        candidates = graph.reach([unit(walked)])
        for path, (kind, size) in candidates.files.items():
            if path in current:
                continue  # the table as it is now names it
            if walked.role == EXPIRED and kind in (Kind.METADATA, Kind.METADATA_LOG):
                continue  # the metadata file stays in the new metadata's log
            yield ("E", path, size, walked.owner, None)
    for location in sorted({u.metadata for u in units}):
        facts = graph.metadata.get(location)
        if isinstance(facts, MetadataFacts):
            yield ("I", location, -1, None, dumps(info_of(location, facts, form)))
    yield ("C", None, -1, None, dumps(graph.reads))


__all__ = [
    "CURRENT",
    "EXPIRED",
    "PURGED",
    "RETAINED",
    "Planned",
    "TableInfo",
    "WalkUnit",
    "defined_rows",
    "dumps",
    "held_rows",
    "info_of",
    "plan_rows",
    "walk_rows",
]
