"""Table maintenance in one process: the same steps as the Spark job, with the sets in memory.

``table_maintenance_in_process`` is ``lakecore table-maintenance`` (a small lakehouse) and the
tests' oracle of ``jobs/table_maintenance.py``. The steps (the rules are in the package doc,
``lakecore.maintenance.tables``):

    retained   the versions retention keeps at ``now`` and the tables each holds; every table
               definition read once
    read       every metadata file those tables point at, every manifest list and manifest
               they name (each file once)
    plan       the snapshots and refs that expire in each table in scope (``policy``)
    commit     in batches of tables, each batch one lakehouse version (``Committer``); a
               table that changed meanwhile is planned again or skipped
    recheck    the versions retained after the commits and what they hold (new versions: the
               run's own and anyone else's) are read; what they name is kept
    marks      purge marks whose table no retained version holds any more: ``purging`` is
               committed before any file of theirs is deleted
    judge      expired = what the expired snapshots (and the due marks' tables) named; minus
               everything any retained metadata names; the folders of tables that could not
               be read are blocked
    orphans    the folders of the tables in scope (and of the due marks) are listed; a file no
               retained metadata names and no expiry accounts for is an orphan, deleted when
               older than the grace period
    delete     in batches, each file judged again by the rules right before it goes
    finish     the marks whose files are all gone are removed (one commit)

Nothing is deleted before every commit of the run has landed and the retained set has been
read again after them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakecore.core.storage import Storage
from lakecore.maintenance.clock import Clocks, read_clocks
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.roots import LoadedRoot
from lakecore.maintenance.samples import capped
from lakecore.maintenance.tables.commits import Committer, ExpiryAnswer, PlannedExpiry
from lakecore.maintenance.tables.deletes import delete_table_files
from lakecore.maintenance.tables.fileio import file_io_properties
from lakecore.maintenance.tables.graph import FileGraph, Reached, Unit
from lakecore.maintenance.tables.listing import Listed, is_error, list_flat, list_folders
from lakecore.maintenance.tables.marks import PurgeMark, marks_of
from lakecore.maintenance.tables.named import (
    Kind,
    MetadataFacts,
    PathForm,
    Unreadable,
    file_io_factory,
)
from lakecore.maintenance.tables.policy import (
    ExpiryDefaults,
    gc_disabled,
    plan_snapshot_expiry,
)
from lakecore.maintenance.tables.result import (
    Blocked,
    TableMaintenanceOptions,
    TableMaintenanceResult,
    check_options,
)
from lakecore.maintenance.tables.rules import DeletionRules, blocked_folders, table_folders
from lakecore.maintenance.tables.table_folders import FolderRegistry, overlaps
from lakecore.maintenance.tables.versions import (
    HeldTable,
    Retention,
    TableDefinition,
    held_in,
    in_scope,
    read_definition,
    refuse_unknown_scope,
    retained_after,
    retention_at,
)

# Why a table in scope is left alone.
EXTERNAL = "external (registered: its files were not written for it)"
NOT_ICEBERG = "no Iceberg metadata"
UNREADABLE = "its metadata could not be read"


@dataclass
class Catalogued:
    """The tables of a set of versions and their definitions (each read once)."""

    held: list[HeldTable] = field(default_factory=list)
    definitions: dict[str, TableDefinition | Unreadable] = field(default_factory=dict)

    def add(self, storage: Storage, roots: Sequence[LoadedRoot]) -> None:
        by_version = {r.version: r for r in roots}
        fresh = held_in(roots, storage)
        self.held.extend(fresh)
        for held in fresh:
            if held.definition not in self.definitions:
                self.definitions[held.definition] = read_definition(
                    storage, by_version[held.version], held.definition
                )

    def of_versions(self, versions: Iterable[int]) -> list[HeldTable]:
        wanted = set(versions)
        return [h for h in self.held if h.version in wanted]

    def metadata_of(self, held: HeldTable) -> str | None:
        definition = self.definitions[held.definition]
        if isinstance(definition, TableDefinition) and definition.is_iceberg:
            return definition.metadata_location
        return None


def plan_table(
    held: HeldTable,
    definition: TableDefinition | Unreadable,
    metadata: Any,
    facts: MetadataFacts | Unreadable | None,
    now_millis: int,
    defaults: ExpiryDefaults,
) -> PlannedExpiry | str | None:
    """One table's expiry; a skip reason; or None when nothing expires."""
    if isinstance(definition, Unreadable) or isinstance(facts, Unreadable):
        return UNREADABLE
    if not definition.is_iceberg or definition.metadata_location is None:
        return NOT_ICEBERG
    if definition.table_type == "EXTERNAL":
        return EXTERNAL
    expiry = plan_snapshot_expiry(metadata, now_millis, defaults)
    if expiry.skipped is not None:
        return expiry.skipped
    if not expiry.changes:
        return None
    return PlannedExpiry(
        namespace=held.namespace,
        table=held.table,
        metadata_location=definition.metadata_location,
        table_uuid=str(metadata.table_uuid),
        refs={name: ref.snapshot_id for name, ref in metadata.refs.items()},
        partition_statistics=tuple(s.snapshot_id for s in metadata.partition_statistics),
        expiry=expiry,
    )


def marks_due(
    marks: Sequence[PurgeMark],
    retained: Iterable[MetadataFacts | Unreadable | None],
    form: PathForm,
) -> list[PurgeMark]:
    """The purge marks whose time has come: no retained metadata is of a table with the mark's
    UUID (the dropped table, under any name), and none has a folder overlapping the mark's
    (a table of a lakehouse from before the location rule may share them)."""
    uuids: set[str] = set()
    retained_folders: set[str] = set()
    for facts in retained:
        if isinstance(facts, MetadataFacts):
            uuids.add(facts.table_uuid)
            retained_folders.update(table_folders(facts.table_location, facts.properties, form))
    due = []
    for mark in marks:
        folders = [form(f).rstrip("/") for f in mark.folders]
        if mark.table_uuid in uuids or any(
            overlaps(f, r) for f in folders for r in retained_folders
        ):
            continue
        due.append(mark)
    return due


def judge_blocked(
    reached: Reached,
    catalogued: Catalogued,
    holders_of: dict[str, list[HeldTable]],
    facts: dict[str, MetadataFacts | Unreadable],
    registries: dict[int, FolderRegistry],
    form: PathForm,
) -> Blocked:
    """What the unreadable files met on the way stop (``lakecore.maintenance.tables.rules``)."""
    blocked = Blocked()
    for definition in catalogued.definitions.values():
        if isinstance(definition, Unreadable):
            blocked.problems.append(definition)
            blocked.everything = f"a table definition cannot be read ({definition.line()})"
    for problem, metadata_locations in reached.unreadable.values():
        blocked.problems.append(problem)
        for location in sorted(metadata_locations):
            for held in holders_of.get(location, []):
                blocked.tables.add(held.name)
                known = facts.get(location)
                if isinstance(known, Unreadable) or known is None:
                    blocked.everything = (
                        f"the metadata file of table {held.name} cannot be read ({problem.line()}): "
                        "where its files lie is unknown"
                    )
                    continue
                definition = catalogued.definitions[held.definition]
                if isinstance(definition, TableDefinition) and not definition.checked:
                    blocked.everything = (
                        f"table {held.name} was written around the location registry, so the folders "
                        f"it names files in are unknown, and {problem.line()}"
                    )
                folders, why = blocked_folders(
                    table_folders(known.table_location, known.properties, form),
                    held.namespace,
                    held.table,
                    [registries[held.version]],
                    form,
                )
                blocked.folders |= folders
                if why is not None:
                    blocked.everything = f"{why}, and {problem.line()}"
    return blocked


@dataclass(frozen=True)
class Scope:
    """What a run works on: the latest retained root's folder registry, and the purge marks in
    the run's namespace scope."""

    registry: FolderRegistry
    marks: list[PurgeMark]


def scope_of(
    storage: Storage,
    retention: Retention,
    options: TableMaintenanceOptions,
    result: TableMaintenanceResult,
) -> Scope | None:
    """The run's scope over ``retention``, recorded in ``result`` (retained versions, marks,
    warehouse); an unknown ``--namespace`` is refused. None, with ``result`` a noop, when no
    Iceberg table was ever made in the lakehouse. The in-process run and the Spark job both
    start here."""
    result.retained_versions = retention.versions
    latest = retention.plan.roots[retention.latest]
    registry = FolderRegistry.of(latest.lakehouse_def.properties)
    marks = [
        m
        for m in marks_of(latest.lakehouse_def.properties)
        if in_scope(m.namespace, options.namespace)
    ]
    result.marks = marks
    result.warehouse = registry.warehouse
    if not marks:
        refuse_unknown_scope(storage, latest, options.namespace)
    if registry.warehouse is None and not marks:
        result.noop_reason = (
            "no Iceberg table was ever made in this lakehouse (no warehouse recorded)"
        )
        result.deleted = DeleteOutcome()
        return None
    return Scope(registry, marks)


def table_maintenance_in_process(
    storage: Storage,
    committer: Committer,
    options: TableMaintenanceOptions,
    *,
    clocks: Clocks | None = None,
    threads: int | None = None,
) -> TableMaintenanceResult:
    """The whole run in this process (see the module doc). ``storage`` is the lakehouse's;
    the Iceberg files are read with pyiceberg's FileIO on the same storage options and deleted
    through a ``Storage`` rooted at the warehouse."""
    clocks = clocks if clocks is not None else read_clocks(storage)
    now = check_options(options, clocks)
    result = TableMaintenanceResult(
        now_millis=now,
        grace_millis=options.grace_millis,
        dry_run=options.dry_run,
        clocks=clocks,
        now_given=options.now_millis is not None,
        namespace=options.namespace,
        defaults=options.defaults,
        delete_batch_size=options.delete_batch_size,
        commit_batch_tables=options.commit_batch_tables,
        expire=options.expire,
        orphans_enabled=options.orphans,
    )
    threads = threads if threads is not None else (16 if storage.waits_on_network else 1)
    io = file_io_factory(file_io_properties(storage.storage_options))()

    # -- retained: the versions and their tables ---------------------------------------------
    retention = retention_at(storage, now)
    scope = scope_of(storage, retention, options, result)
    if scope is None:
        return result
    registry, marks = scope.registry, scope.marks
    catalogued = Catalogued()
    catalogued.add(storage, retention.roots)
    registries = {
        root.version: FolderRegistry.of(root.lakehouse_def.properties) for root in retention.roots
    }
    in_scope_latest = [
        h
        for h in catalogued.of_versions([retention.latest])
        if in_scope(h.namespace, options.namespace)
    ]
    result.tables_in_scope = len(in_scope_latest)

    # -- read: every metadata file, manifest list and manifest -------------------------------
    graph = FileGraph(form=PathForm(registry.warehouse))
    keep = {m for h in in_scope_latest if (m := catalogued.metadata_of(h)) is not None}
    all_metadata = {m for h in catalogued.held if (m := catalogued.metadata_of(h)) is not None}
    graph.read(io, all_metadata, keep=keep, threads=threads)

    # -- plan -------------------------------------------------------------------------------
    for held in in_scope_latest:
        location = catalogued.metadata_of(held)
        facts = graph.metadata.get(location) if location is not None else None
        if location is not None:
            result.iceberg_tables += 1
        planned = plan_table(
            held,
            catalogued.definitions[held.definition],
            graph.parsed.get(location) if location is not None else None,
            facts,
            now,
            options.defaults,
        )
        if isinstance(planned, str):
            if planned != NOT_ICEBERG:
                result.skip(planned, held.name)
        elif planned is not None and options.expire:
            result.planned.append(planned)

    # -- commit -----------------------------------------------------------------------------
    batches = [
        result.planned[i : i + options.commit_batch_tables]
        for i in range(0, len(result.planned), options.commit_batch_tables)
    ]
    if not options.dry_run:
        for batch in batches:
            answer = committer.commit_expirations(batch)
            result.answers.extend(answer.answers)
            if answer.version is not None:
                result.versions_committed.append(answer.version)
    landed = [a for a in result.answers if a.landed]

    # -- recheck: what is retained after the commits ------------------------------------------
    retained = _retained_units(
        storage, retention, catalogued, graph, io, result, batches, threads, now, options
    )
    units, holders_of, after, fresh = (
        retained.units,
        retained.holders_of,
        retained.versions,
        retained.retention,
    )
    registries.update(
        {r.version: FolderRegistry.of(r.lakehouse_def.properties) for r in fresh.roots}
    )
    result.retained_after = sorted(after)
    reached = graph.reach(units)
    result.reads = graph.reads
    reachable = set(reached.files)
    result.reachable = reachable
    result.reachable_files = len(reachable)
    facts_by_location = dict(graph.metadata)
    result.blocked = judge_blocked(
        reached, catalogued, holders_of, facts_by_location, registries, graph.form
    )

    # -- marks: dropped tables no retained version holds any more -----------------------------
    result.marks_due = marks_due(marks, [graph.metadata.get(u.metadata) for u in units], graph.form)
    purging = list(result.marks_due)
    if not options.dry_run and result.marks_due:
        started = committer.start_purges(result.marks_due, fresh.latest)
        purging = started if started is not None else []
        result.marks_started = purging
    graph.read(io, {m.metadata_location for m in purging}, threads=threads)

    # -- judge: the expired files ---------------------------------------------------------------
    # A candidate is what an expired snapshot (or a due purge's table) named and the table as it
    # is now does not; it is kept when any retained metadata names it (an older retained
    # version's, another table's).
    own_reach: dict[str, set[str]] = {}

    def own(name: str) -> set[str]:
        """What the table as it is now (the newest version's) names."""
        if name not in own_reach:
            own_reach[name] = set(graph.reach(retained.current.get(name, [])).files)
        return own_reach[name]

    expired: dict[str, tuple[set[str], int]] = {}
    expiries = landed if not options.dry_run else result.planned
    for unit, folders, name in _expired_units(expiries, graph, io, threads):
        for path, (kind, size) in graph.reach([unit]).files.items():
            if kind in (Kind.METADATA, Kind.METADATA_LOG) or path in own(name):
                continue  # the metadata file stays in the new metadata's log
            owners, _ = expired.setdefault(path, (set(), size))
            owners.update(folders)
    for mark in purging:
        mark_reach = graph.reach([Unit(mark.metadata_location)])
        for path, (_kind, size) in mark_reach.files.items():
            if path in own(mark.name):
                continue
            owners, _ = expired.setdefault(path, (set(), size))
            owners.update(graph.form(f).rstrip("/") for f in mark.folders)
    result.expired = {p: sorted(o) for p, (o, _) in expired.items()}
    result.expired_files = len(expired)
    rules = DeletionRules(
        warehouse=str(registry.warehouse or ""),
        lakehouse_root=storage.root_uri,
        blocked=frozenset(result.blocked.folders),
        blocked_everything=result.blocked.everything is not None,
    )
    chosen: dict[str, tuple[int, list[str]]] = {}
    for path, (owners, size) in sorted(expired.items()):
        if path in reachable:
            result.expired_kept += 1
            continue
        why = rules.allows(path, owners)
        if why is not None:
            result.expired_refused += 1
            result.refused_sample.append(f"{path} ({why})")
            continue
        chosen[path] = (size, sorted(owners))

    # -- orphans ----------------------------------------------------------------------------------
    if (options.orphans or purging) and registry.warehouse is not None:
        _orphans(
            storage,
            registry.warehouse,
            rules,
            catalogued,
            graph,
            result,
            reachable,
            expired,
            chosen,
            purging,
            options,
            fresh.latest,
        )
    result.chosen = set(chosen)
    result.to_delete = len(chosen)
    result.bytes_to_delete = sum(max(size, 0) for size, _ in chosen.values())
    result.unsized_to_delete = sum(1 for size, _ in chosen.values() if size < 0)
    result.to_delete_sample = capped(sorted(chosen))
    result.refused_sample = capped(result.refused_sample)

    # -- delete, then finish the marks ---------------------------------------------------------
    deleted = DeleteOutcome()
    if not options.dry_run and chosen and registry.warehouse is not None:
        warehouse_storage = Storage(registry.warehouse + "/", storage.storage_options)
        deleted = delete_table_files(
            warehouse_storage,
            rules,
            [(p, size, owners) for p, (size, owners) in sorted(chosen.items())],
            options.delete_batch_size,
        )
        deleted.deleted_paths = capped(sorted(deleted.deleted_paths))
    result.deleted = deleted
    if not options.dry_run and purging and not (deleted.errors or deleted.refused):
        finished = [m for m in purging if not _touches_blocked(m, rules)]
        if finished:
            result.marks_version = committer.finish_purges(finished)
            result.marks_finished = finished
    return result


def _touches_blocked(mark: PurgeMark, rules: DeletionRules) -> bool:
    return rules.blocked_everything or any(
        r in rules.blocked_index or r.rstrip("/") in rules.blocked for r in mark.folders
    )


@dataclass
class RetainedUnits:
    """What is retained after the run's commits (a dry run: as its commits would leave it)."""

    units: list[Unit]  # every metadata file a retained version's table points at
    holders_of: dict[str, list[HeldTable]]  # who holds each
    versions: set[int]
    retention: Retention  # read after the commits (a dry run's: the one before)
    current: dict[str, list[Unit]]  # table name -> the table as it is now (the newest version)


def _retained_units(
    storage: Storage,
    retention: Retention,
    catalogued: Catalogued,
    graph: FileGraph,
    io: Any,
    result: TableMaintenanceResult,
    batches: list[list[PlannedExpiry]],
    threads: int,
    now: int,
    options: TableMaintenanceOptions,
) -> RetainedUnits:
    """``RetainedUnits`` of the run: read again after the commits; a dry run assumes its
    commits landed now (``retained_after``), its planned tables' newest metadata being the
    current one less the expired snapshots."""
    holders_of: dict[str, list[HeldTable]] = {}
    units: dict[tuple[str, frozenset[int] | None], Unit] = {}
    current: dict[str, list[Unit]] = {}

    def hold(held: HeldTable, unit: Unit, newest: bool) -> None:
        units.setdefault((unit.metadata, unit.snapshots), unit)
        holders_of.setdefault(unit.metadata, []).append(held)
        if newest:
            current.setdefault(held.name, []).append(unit)

    if options.dry_run:
        after = retained_after(retention, len(batches), now)
        for held in catalogued.of_versions(after):
            location = catalogued.metadata_of(held)
            if location is not None:
                hold(held, Unit(location), newest=False)
        planned = {p.name: p for p in result.planned}
        for held in catalogued.of_versions([retention.latest]):
            location = catalogued.metadata_of(held)
            if location is None:
                continue
            plan = planned.get(held.name)
            facts = graph.metadata.get(location)
            if plan is not None and isinstance(facts, MetadataFacts):
                gone = set(plan.expiry.snapshot_ids)
                kept = frozenset(
                    s.snapshot_id for s in facts.snapshots if s.snapshot_id not in gone
                )
                hold(held, Unit(location, kept), newest=True)
            else:
                hold(held, Unit(location), newest=True)
        return RetainedUnits(list(units.values()), holders_of, after, retention, current)
    fresh = retention_at(storage, now) if result.versions_committed else retention
    new_roots = [r for r in fresh.roots if r.version not in set(retention.versions)]
    if new_roots:
        catalogued.add(storage, new_roots)
    after = set(fresh.versions)
    for held in catalogued.of_versions(after):
        location = catalogued.metadata_of(held)
        if location is not None:
            hold(held, Unit(location), newest=held.version == fresh.latest)
    graph.read(io, {u.metadata for u in units.values()}, threads=threads)
    return RetainedUnits(list(units.values()), holders_of, after, fresh, current)


def _expired_units(
    expiries: Sequence[ExpiryAnswer | PlannedExpiry], graph: FileGraph, io: Any, threads: int
) -> list[tuple[Unit, tuple[str, ...], str]]:
    """Each expiry as the unit of what it removed (its expired snapshots in the metadata it was
    planned on), the owning table's folders and its name."""
    graph.read(io, {e.metadata_location for e in expiries}, threads=threads)
    out = []
    for expiry in expiries:
        facts = graph.metadata.get(expiry.metadata_location)
        if not isinstance(facts, MetadataFacts) or not expiry.expiry.snapshot_ids:
            continue
        folders = table_folders(facts.table_location, facts.properties, graph.form)
        unit = Unit(expiry.metadata_location, frozenset(expiry.expiry.snapshot_ids))
        out.append((unit, folders, expiry.name))
    return out


def _orphans(
    storage: Storage,
    warehouse: str,
    rules: DeletionRules,
    catalogued: Catalogued,
    graph: FileGraph,
    result: TableMaintenanceResult,
    reachable: set[str],
    expired: dict[str, tuple[set[str], int]],
    chosen: dict[str, tuple[int, list[str]]],
    purging: list[PurgeMark],
    options: TableMaintenanceOptions,
    latest: int,
) -> None:
    """List the folders of the tables in scope in version ``latest`` (the newest after the
    commits) and of the due marks; choose the old orphans."""
    folders: set[str] = set()
    for held in catalogued.of_versions([latest] if options.orphans else []):
        if not in_scope(held.namespace, options.namespace):
            continue
        definition = catalogued.definitions[held.definition]
        location = catalogued.metadata_of(held)
        if location is None or not isinstance(definition, TableDefinition):
            continue
        facts = graph.metadata.get(location)
        if definition.table_type == "EXTERNAL" or not isinstance(facts, MetadataFacts):
            continue
        if gc_disabled(facts.properties):
            continue
        folders.update(table_folders(facts.table_location, facts.properties, graph.form))
    for mark in purging:
        folders.update(graph.form(f).rstrip("/") for f in mark.folders)
    warehouse_storage = Storage(warehouse + "/", storage.storage_options)
    listing = list_flat(
        warehouse_storage, warehouse, folders, graph.form, options.flat_listing_max_files
    )
    result.listing = "flat"
    if listing is None:
        listing = list(
            list_folders(warehouse_storage, warehouse, folders, graph.form, options.list_threads)
        )
        result.listing = "by table folder"
    files = [f for f in listing if not is_error(f)]
    result.files_listed = len(files)
    for failure in (f for f in listing if is_error(f)):
        result.blocked.problems.append(
            Unreadable(failure.folder, Kind.METADATA, failure.path.split(": ", 1)[-1], False)
        )
    cutoff = result.cutoff_millis
    young: list[str] = []
    for listed in _unique(files):
        if listed.path in reachable or listed.path in expired:
            continue
        result.orphans.add(listed.path)
        result.orphans_found += 1
        result.orphan_bytes += listed.size
        if listed.mtime_millis >= cutoff:
            result.too_young += 1
            young.append(listed.path)
            continue
        why = rules.allows(listed.path, [listed.folder])
        if why is not None:
            result.orphans_refused += 1
            result.refused_sample.append(f"{listed.path} ({why})")
            continue
        chosen[listed.path] = (listed.size, [listed.folder])
    result.too_young_sample = capped(sorted(young))


def _unique(files: Iterable[Listed]) -> list[Listed]:
    seen: dict[str, Listed] = {}
    for listed in files:
        seen.setdefault(listed.path, listed)
    return [seen[p] for p in sorted(seen)]


__all__ = [
    "Catalogued",
    "judge_blocked",
    "marks_due",
    "plan_table",
    "table_maintenance_in_process",
]
