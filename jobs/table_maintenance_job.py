"""table-maintenance: expire Iceberg snapshots; delete what no retained version names.

Over every Iceberg table of a lakehouse (or of --namespace and the namespaces inside it): the
snapshots Iceberg's rules expire go, then every file no retained version of any table names
(the expired snapshots', old orphans', due purges').

    ./spark-submit.sh table-maintenance --lakehouse URI [--namespace NS] [--older-than 3d]
                      [--now TIME] [--dry-run] [--skip-expiry] [--skip-orphans]
                      [--i-understand-grace-risk] [--report PATH]

The rules (what is kept, what expires, what may be deleted, what an unreadable file blocks) are
``lakecore.maintenance.tables``'; ``run.table_maintenance_in_process`` runs the same steps in
one process (``lakecore table-maintenance``, the tests' oracle). This job distributes
them; the graph of files Iceberg metadata names is DataFrames, one row per edge
(``lakecore.maintenance.tables.rows``), and every set operation is a JVM join:

    retained    the versions retention keeps at --now, and the purge marks (driver)
    tables      executors read each retained version's table keys, then each definition once
    plan        executors read the current metadata of every table in scope and plan its
                expiry (Iceberg's rules); the plans come to the driver
    commit      the expirations, in batches of tables, each batch one lakehouse version through
                LakecoreCatalog.commit_tables (driver); a table that changed meanwhile is planned
                again or skipped
    recheck     the versions retained after the commits, and the tables they hold (the run's
                own new versions, anyone else's)
    walk        one task per table (mapInArrow over a DataFrame of its units, grouped by table):
                every metadata file, manifest list and manifest of the table read once; out come
                the files its retained metadata names (reachable), the files only its expired
                snapshots or its purge named (candidates), what could not be read, and each
                metadata file's facts
    reach       reachable is one DataFrame over the whole lakehouse; the candidates are
                anti-joined with it (a file another table names is kept) and judged by the rules
                on executors; unreadable files come to the driver, which blocks their folders
    marks       due purge marks are committed ``purging`` (driver)
    orphans     the folders of the tables in scope and of the due marks are listed (one flat
                listing when small, a task per folder when large), anti-joined with reachable
                and the candidates; older than the grace period is deleted
    delete      in batches on executors, each file judged again right before it goes; at most
                DRIVER_DELETE_MAX_FILES files are deleted on the driver by the same unit (ten
                DeleteObjects requests: less than a shuffle and a stage of Python tasks)
    finish      the marks whose files are gone are removed (driver)

Nothing is deleted before every commit has landed and the retained set has been read again.
Only counts, capped samples, the expiry plans and the unreadable files reach the driver, which
holds the tables in scope (O(tables), never O(files)).
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.command_line import JobOptions, base_parser
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.frames import PAYLOAD, Columns, collect_objects, driver_rows, fan_out
from jobs.persisted import Persisted
from jobs.run import run_job
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.table_maintenance import (
    add_table_maintenance_arguments,
    render_table_maintenance,
    table_maintenance_options,
)
from lakecore.core.storage import Storage, request_pool
from lakecore.core.units import plural
from lakecore.maintenance.clock import read_clocks
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.samples import SAMPLE_LIMIT
from lakecore.maintenance.tables.commits import ExpiryAnswer, PlannedExpiry
from lakecore.maintenance.tables.deletes import delete_table_files
from lakecore.maintenance.tables.fileio import file_io_properties
from lakecore.maintenance.tables.listing import ERROR as LISTING_ERROR
from lakecore.maintenance.tables.listing import list_flat, list_folder
from lakecore.maintenance.tables.marks import PurgeMark
from lakecore.maintenance.tables.named import Kind, PathForm, Unreadable, file_io_factory
from lakecore.maintenance.tables.result import (
    Blocked,
    TableMaintenanceOptions,
    TableMaintenanceResult,
    check_options,
)
from lakecore.maintenance.tables.rows import (
    CURRENT,
    EXPIRED,
    PURGED,
    RETAINED,
    TableInfo,
    WalkUnit,
    defined_rows,
    held_rows,
    plan_rows,
    walk_rows,
)
from lakecore.maintenance.tables.rules import DeletionRules, blocked_folders
from lakecore.maintenance.tables.run import scope_of
from lakecore.maintenance.tables.table_folders import FolderRegistry, overlaps
from lakecore.maintenance.tables.versions import (
    in_scope,
    retained_after,
    retention_at,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# At most this many files to delete are deleted on the driver (see the module doc).
DRIVER_DELETE_MAX_FILES = 10_000


HELD = Columns(
    (("version", "bigint"), ("namespace", "string"), ("table", "string"), ("definition", "string"))
)
DEFINED = Columns(
    (
        ("definition", "string"),
        ("table_format", "string"),
        ("table_type", "string"),
        ("metadata", "string"),
        ("checked", "boolean"),
        ("problem", "binary"),
    )
)
UNITS = Columns(
    (
        ("namespace", "string"),
        ("table", "string"),
        ("metadata", "string"),
        ("role", "string"),
        ("snapshots", "string"),
        ("owner", "string"),
    )
)
WALKED = Columns(
    (
        ("kind", "string"),
        ("path", "string"),
        ("size", "bigint"),
        ("owner", "string"),
        ("payload", "binary"),
    )
)
LISTING = Columns(
    (("path", "string"), ("size", "bigint"), ("mtime_millis", "bigint"), ("folder", "string"))
)
CANDIDATE = Columns((("path", "string"), ("size", "bigint"), ("owners", "string")))
VERDICT = Columns(
    (*CANDIDATE.fields, ("source", "string"), ("category", "string"), ("reason", "string"))
)
# Unreadable files and definitions the driver gathers at most (each names its file).
PROBLEMS_ON_DRIVER = 10_000
# Tables a walking task reads at once on an object store (each waits on the network).
TABLES_IN_FLIGHT = 8
# A verdict's category: kept (retained metadata names it), delete, refused by the rules,
# younger than the grace period, a folder that could not be listed.
KEPT = "kept"
DELETE = "delete"
REFUSED = "refused"
YOUNG = "young"
ERROR = "error"


def _parser() -> OneLineArgumentParser:
    parser = base_parser("table-maintenance", __doc__.splitlines()[0])
    add_table_maintenance_arguments(parser)
    return parser


def table_maintenance_job_options(
    args: argparse.Namespace, common: JobOptions
) -> TableMaintenanceOptions:
    return table_maintenance_options(args, common.settings)


def run_table_maintenance(
    options: TableMaintenanceOptions, job: JobContext
) -> TableMaintenanceResult:
    """Table maintenance on executors, in the stages of the module doc; returns the
    ``TableMaintenanceResult`` that ``table_maintenance_in_process`` returns, with capped
    samples where that one has full sets."""
    with Persisted() as persist, executor_errors():
        return _maintain(options, job, persist)


def _maintain(
    options: TableMaintenanceOptions, job: JobContext, persist: Persisted
) -> TableMaintenanceResult:
    from pyspark.sql import functions as F

    from lakecore.iceberg.expiry import CatalogCommitter, maintenance_catalog

    storage = job.storage
    clocks = read_clocks(storage)
    now = check_options(options, clocks)
    result = job.track(
        TableMaintenanceResult(
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
    )

    # -- retained -------------------------------------------------------------------------------
    # On the driver alone, without starting Spark: a lakehouse with no Iceberg table ends here.
    with job.driver_step("retained"):
        retention = retention_at(storage, now)
    scope = scope_of(storage, retention, options, result)
    if scope is None:
        return result
    registry, marks = scope.registry, scope.marks
    warehouse = str(registry.warehouse)
    form = PathForm(warehouse)
    io_properties = file_io_properties(storage.storage_options)
    registries = {r.version: FolderRegistry.of(r.lakehouse_def.properties) for r in retention.roots}

    # -- tables, plan ---------------------------------------------------------------------------
    with job.stage(
        "tables", f"read the tables of {plural(len(retention.versions), 'retained version')}"
    ):
        tables = _tables(job, storage, retention.versions, None, persist)
        definition_problems: list[Unreadable] = []
        latest = _version_tables(tables, retention.latest, options.namespace, definition_problems)
    result.tables_in_scope = len(latest)
    iceberg = [t for t in latest if t[3] is not None]
    result.iceberg_tables = len(iceberg)
    infos: dict[str, TableInfo] = {}
    with job.stage("plan", f"read the metadata of {plural(len(iceberg), 'table')} and plan expiry"):
        make_io = file_io_factory(io_properties)
        defaults = options.defaults
        tasks = [(ns, t, d, str(m), kind) for ns, t, d, m, kind in iceberg]
        plans = collect_objects(
            fan_out(
                job.spark,
                tasks,
                lambda items: plan_rows(make_io(), form, items, now, defaults),
                PAYLOAD,
                job.parallelism,
            )
        )
    for planned in sorted(plans, key=lambda p: (p.namespace, p.table)):
        name = f"{planned.namespace}.{planned.table}"
        if planned.info is not None:
            infos[planned.metadata] = planned.info
        if planned.problem is not None:
            result.skip("its metadata could not be read", name)
        elif isinstance(planned.plan, str):
            result.skip(planned.plan, name)
        elif isinstance(planned.plan, PlannedExpiry) and options.expire:
            result.planned.append(planned.plan)

    # -- commit ---------------------------------------------------------------------------------
    batches = [
        result.planned[i : i + options.commit_batch_tables]
        for i in range(0, len(result.planned), options.commit_batch_tables)
    ]
    committer = None
    if not options.dry_run and (batches or marks):
        committer = CatalogCommitter(lambda: maintenance_catalog(storage), now, options.defaults)
    if committer is not None and batches:
        with job.stage(
            "commit",
            f"commit the expiry of {plural(len(result.planned), 'table')} in "
            f"{plural(len(batches), 'lakehouse version')} (driver)",
            if_interrupted="the batches committed so far are whole lakehouse versions; no file was "
            "deleted; run again to finish",
        ):
            for batch in batches:
                answer = committer.commit_expirations(batch)
                result.answers.extend(answer.answers)
                if answer.version is not None:
                    result.versions_committed.append(answer.version)
    landed = [a for a in result.answers if a.landed]

    # -- recheck --------------------------------------------------------------------------------
    with job.stage("recheck", "read the versions retained after the commits"):
        if options.dry_run:
            after = retained_after(retention, len(batches), now)
            newest = retention.latest
            verified_latest = retention.latest
        else:
            fresh = retention_at(storage, now) if result.versions_committed else retention
            after = set(fresh.versions)
            newest = fresh.latest
            verified_latest = fresh.latest
            registries.update(
                {r.version: FolderRegistry.of(r.lakehouse_def.properties) for r in fresh.roots}
            )
            new = sorted(set(fresh.versions) - set(retention.versions))
            if new:
                tables = _tables(job, storage, new, tables, persist)
    result.retained_after = sorted(after)

    # -- walk, reach ------------------------------------------------------------------------------
    with job.stage("walk", "read every table's metadata, manifest lists and manifests once"):
        units = _units(job, tables, after, newest, options, result, landed, marks, infos)
        walked = _walk(job, storage, units, io_properties, form, persist)
        side = (
            walked.where(F.col("kind").isin("P", "I", "C"))
            .select("kind", "path", "owner", "payload")
            .collect()
        )
    retained_infos: dict[str, TableInfo] = {}
    problems: list[tuple[str, Unreadable]] = []
    reads: dict[str, int] = {}
    for row in side:
        value = pickle.loads(row["payload"])
        if row["kind"] == "I":
            infos[row["path"]] = value
            if row["owner"] == RETAINED:
                retained_infos[row["path"]] = value
        elif row["kind"] == "P":
            problems.append((row["owner"], value))
        else:
            for key, count in value.items():
                reads[key] = reads.get(key, 0) + count
    result.reads = reads
    result.blocked = _blocked(tables, definition_problems, problems, infos, registries, form, after)

    # -- marks ----------------------------------------------------------------------------------
    result.marks_due = _marks_due(marks, list(retained_infos.values()), form)
    purging = list(result.marks_due)
    if committer is not None and result.marks_due:
        with job.stage(
            "marks", f"mark {plural(len(result.marks_due), 'due purge')} purging (driver)"
        ):
            started = committer.start_purges(result.marks_due, verified_latest)
        purging = started if started is not None else []
        result.marks_started = purging

    # -- judge: expired and orphans against the reach, one verdict per file -----------------------
    rules = DeletionRules(
        warehouse=warehouse,
        lakehouse_root=storage.root_uri,
        blocked=frozenset(result.blocked.folders),
        blocked_everything=result.blocked.everything is not None,
    )
    owner_folders: dict[str, list[str]] = {}
    for expiry in result.planned if options.dry_run else landed:
        info = infos.get(expiry.metadata_location)
        if info is not None:
            owner_folders[f"table {expiry.name}"] = list(info.folders)
    for mark in purging:
        owner_folders[f"purge {mark.key}"] = [form(r).rstrip("/") for r in mark.folders]
    listing_folders = (
        _listing_folders(tables, infos, newest, options, purging, form)
        if options.orphans or purging
        else None
    )
    with job.stage(
        "judge",
        "reach minus expired and orphans, over the whole lakehouse"
        + (f"; list {plural(len(listing_folders), 'table folder')}" if listing_folders else ""),
    ):
        verdict = _verdict(
            job,
            storage,
            warehouse,
            form,
            walked,
            owner_folders,
            listing_folders,
            rules,
            result.cutoff_millis,
            persist,
        )
    result.reachable_files = verdict.reachable_files
    result.expired_files = verdict.expired_files
    result.expired_kept = verdict.expired_kept
    result.expired_refused = verdict.expired_refused
    result.listing = verdict.listing
    result.files_listed = verdict.files_listed
    result.orphans_found = verdict.orphans_found
    result.orphan_bytes = verdict.orphan_bytes
    result.too_young = verdict.too_young
    result.orphans_refused = verdict.orphans_refused
    result.to_delete = verdict.to_delete
    result.bytes_to_delete = verdict.bytes_to_delete
    result.unsized_to_delete = verdict.unsized_to_delete
    result.to_delete_sample = verdict.to_delete_sample
    result.too_young_sample = verdict.too_young_sample
    result.refused_sample = verdict.refused_sample
    result.blocked.problems.extend(verdict.unlisted_folders)
    chosen = verdict.frame.where(F.col("category") == DELETE).select(*CANDIDATE.names)

    # -- delete, finish -------------------------------------------------------------------------
    deleted = DeleteOutcome()
    if not options.dry_run and result.to_delete:
        with job.stage(
            "delete",
            f"delete {plural(result.to_delete, 'file')} in batches of {options.delete_batch_size}",
            if_interrupted="every commit had landed; some files may be deleted already (none that "
            "retained metadata names); run again to finish",
        ):
            deleted = _delete(
                job, storage, warehouse, rules, chosen, options.delete_batch_size, result.to_delete
            )
    result.deleted = deleted
    if committer is not None and purging and not (deleted.errors or deleted.refused):
        finished = [m for m in purging if not _touches_blocked(m, rules, form)]
        if finished:
            with job.stage("finish", "remove the finished purge marks (driver)"):
                result.marks_version = committer.finish_purges(finished)
            result.marks_finished = finished
    return result


# -- tables ---------------------------------------------------------------------------------------


def _tables(
    job: JobContext,
    storage: Storage,
    versions: Sequence[int],
    known: DataFrame | None,
    persist: Persisted,
) -> DataFrame:
    """The table keys of these versions with their definitions read (each definition once,
    those ``known`` already holds not again); ``known``'s rows and these, as one frame:
    (version, namespace, table, definition, table_format, table_type, metadata, checked,
    problem)."""
    from pyspark.sql import functions as F

    held = persist(
        fan_out(
            job.spark,
            list(versions),
            lambda items: held_rows(storage, items),
            HELD,
            job.parallelism,
        )
    )
    wanted = held.groupBy("definition").agg(F.min("version").alias("version"))
    if known is not None:
        wanted = wanted.join(known.select("definition").distinct(), "definition", "left_anti")

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        items: list[tuple[str, int]] = []
        for batch in batches:
            items.extend(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True))
        if items:
            yield from DEFINED.batches(defined_rows(storage, items))

    defined = (
        wanted.select("definition", "version")
        .repartition(max(1, job.parallelism))
        .mapInArrow(read, DEFINED.ddl)
    )
    if known is not None:
        defined = defined.unionByName(known.select(*DEFINED.names).dropDuplicates(["definition"]))
    joined = held.join(defined, "definition", "left")
    if known is not None:
        joined = known.unionByName(joined.select(*known.columns))
    return persist(joined)


def _version_tables(
    tables: DataFrame, version: int, namespace: str | None, problems: list[Unreadable] | None = None
) -> list[tuple[str, str, str, str | None, str]]:
    """(namespace, table, definition, metadata or None, table_type) of one version's tables in
    scope, to the driver (O(tables in scope)); in the same query, every definition of any
    version that could not be read goes into ``problems`` when given."""
    from pyspark.sql import functions as F

    wanted = F.col("version") == version
    if problems is not None:
        wanted = wanted | F.col("problem").isNotNull()
    rows = (
        tables.where(wanted)
        .select(
            "version",
            "namespace",
            "table",
            "definition",
            "metadata",
            "table_type",
            "table_format",
            "problem",
        )
        .collect()
    )
    out = []
    seen: set[str] = set()
    for row in rows:
        fresh_problem = row["definition"] not in seen
        if row["problem"] is not None and problems is not None and fresh_problem:
            seen.add(row["definition"])
            problems.append(pickle.loads(row["problem"]))
        if row["version"] != version or not in_scope(row["namespace"], namespace):
            continue
        metadata = row["metadata"] if row["table_format"] == "ICEBERG" else None
        out.append(
            (
                row["namespace"],
                row["table"],
                row["definition"],
                metadata,
                row["table_type"] or "MANAGED",
            )
        )
    return sorted(out)


# -- the walk -------------------------------------------------------------------------------------


def _units(
    job: JobContext,
    tables: DataFrame,
    after: set[int],
    newest: int,
    options: TableMaintenanceOptions,
    result: TableMaintenanceResult,
    landed: list[ExpiryAnswer],
    marks: list[PurgeMark],
    infos: dict[str, TableInfo],
) -> DataFrame:
    """Every table's units (``WalkUnit``'s fields by table): the metadata of the versions
    retained after the commits, whole; the newest version's as ``current`` (a dry run: its
    planned tables as their expiry would leave them); the expired snapshots; every purge mark's
    table."""
    from pyspark.sql import functions as F

    iceberg = tables.where((F.col("table_format") == "ICEBERG") & F.col("metadata").isNotNull())

    def as_units(frame: DataFrame, role: str) -> DataFrame:
        return frame.select(
            "namespace",
            "table",
            "metadata",
            F.lit(role).alias("role"),
            F.lit(None).cast("string").alias("snapshots"),
            F.lit(None).cast("string").alias("owner"),
        )

    retained = as_units(
        iceberg.where(F.col("version").isin(sorted(after)))
        .select("namespace", "table", "metadata")
        .distinct(),
        RETAINED,
    )
    newest_tables = iceberg.where(F.col("version") == newest).select(
        "namespace", "table", "metadata"
    )
    rows: list[tuple[Any, ...]] = []
    planned = {p.metadata_location: p for p in result.planned} if options.dry_run else {}
    if planned:
        newest_tables = newest_tables.where(~F.col("metadata").isin(sorted(planned)))
        for location, plan in sorted(planned.items()):
            info = infos.get(location)
            if info is None:
                continue
            gone = set(plan.expiry.snapshot_ids)
            kept = [s for s in info.snapshot_ids if s not in gone]
            rows.append((plan.namespace, plan.table, location, CURRENT, json.dumps(kept), None))
    expiries: Sequence[ExpiryAnswer | PlannedExpiry] = result.planned if options.dry_run else landed
    for expiry in expiries:
        ids = json.dumps(list(expiry.expiry.snapshot_ids))
        owner = f"table {expiry.name}"
        rows.append((expiry.namespace, expiry.table, expiry.metadata_location, EXPIRED, ids, owner))
    for mark in marks:
        owner = f"purge {mark.key}"
        rows.append((mark.namespace, mark.table, mark.metadata_location, PURGED, None, owner))
    return retained.unionByName(as_units(newest_tables, CURRENT)).unionByName(
        driver_rows(job.spark, rows, UNITS)
    )


def _walk(
    job: JobContext,
    storage: Storage,
    units: DataFrame,
    io_properties: dict[str, str],
    form: PathForm,
    persist: Persisted,
) -> DataFrame:
    """``walk_rows`` of every table's units: one task per group of tables, every unit of a
    table in the same task (``repartition`` by table)."""
    make_io = file_io_factory(io_properties)
    in_flight = TABLES_IN_FLIGHT if storage.waits_on_network else 1

    def walk(batches: Iterator[Any]) -> Iterator[Any]:
        groups: dict[tuple[str, str], list[WalkUnit]] = {}
        for batch in batches:
            columns = [batch.column(i).to_pylist() for i in range(len(UNITS.fields))]
            for ns, table, metadata, role, snapshots, owner in zip(*columns, strict=True):
                ids = None if snapshots is None else tuple(json.loads(snapshots))
                groups.setdefault((ns, table), []).append(WalkUnit(metadata, role, ids, owner))
        if not groups:
            return
        io = make_io()

        def one(units: list[WalkUnit]) -> list[tuple[Any, ...]]:
            return _tag_retained(list(walk_rows(io, form, units)), units)

        ordered = [groups[key] for key in sorted(groups)]
        if in_flight > 1 and len(ordered) > 1:
            for rows in request_pool(in_flight).map(one, ordered):
                yield from WALKED.batches(rows)
        else:
            for table_units in ordered:
                yield from WALKED.batches(one(table_units))

    walked = units.repartition(max(1, job.parallelism), "namespace", "table").mapInArrow(
        walk, WALKED.ddl
    )
    return persist(walked)


def _tag_retained(rows: list[tuple[Any, ...]], units: list[WalkUnit]) -> list[tuple[Any, ...]]:
    """Mark each metadata file's facts (``I``) with whether a retained unit reads it."""
    retained = {u.metadata for u in units if u.role in (RETAINED, CURRENT)}
    return [
        (kind, path, size, RETAINED if kind == "I" and path in retained else owner, payload)
        for kind, path, size, owner, payload in rows
    ]


# -- reach, blocked, marks --------------------------------------------------------------------------


def _blocked(
    tables: DataFrame,
    definition_problems: list[Unreadable],
    problems: list[tuple[str, Unreadable]],
    infos: dict[str, TableInfo],
    registries: dict[int, FolderRegistry],
    form: PathForm,
    after: set[int],
) -> Blocked:
    """What the unreadable files stop (``lakecore.maintenance.tables.rules``); the tables that
    hold them are looked up for these few metadata files only."""
    from pyspark.sql import functions as F

    blocked = Blocked()
    for problem in definition_problems:
        blocked.problems.append(problem)
        blocked.everything = f"a table definition cannot be read ({problem.line()})"
    if not problems:
        return blocked
    locations = sorted({m for m, _ in problems})
    holders: dict[str, list[tuple[int, str, str, bool]]] = {}
    for row in (
        tables.where(F.col("version").isin(sorted(after)) & F.col("metadata").isin(locations))
        .select("metadata", "version", "namespace", "table", "checked")
        .collect()
    ):
        holders.setdefault(row[0], []).append((row[1], row[2], row[3], bool(row[4])))
    seen: set[str] = set()
    for location, problem in problems:
        if problem.path not in seen:
            seen.add(problem.path)
            blocked.problems.append(problem)
        for version, ns, table, checked in holders.get(location, []):
            blocked.tables.add(f"{ns}.{table}")
            info = infos.get(location)
            if info is None:
                blocked.everything = (
                    f"the metadata file of table {ns}.{table} cannot be read ({problem.line()}): "
                    "where its files lie is unknown"
                )
                continue
            if not checked:
                blocked.everything = (
                    f"table {ns}.{table} was written around the location registry, so the folders "
                    f"it names files in are unknown, and {problem.line()}"
                )
            registry = registries.get(version)
            folders, why = blocked_folders(
                info.folders, ns, table, [registry] if registry is not None else [], form
            )
            blocked.folders |= folders
            if why is not None:
                blocked.everything = f"{why}, and {problem.line()}"
    return blocked


def _marks_due(
    marks: Sequence[PurgeMark], retained: Sequence[TableInfo], form: PathForm
) -> list[PurgeMark]:
    """``run.marks_due`` over the retained metadata files' facts."""
    uuids = {info.table_uuid for info in retained}
    kept_folders = {r for info in retained for r in info.folders}
    due = []
    for mark in marks:
        folders = [form(r).rstrip("/") for r in mark.folders]
        if mark.table_uuid in uuids or any(overlaps(f, r) for f in folders for r in kept_folders):
            continue
        due.append(mark)
    return due


def _touches_blocked(mark: PurgeMark, rules: DeletionRules, form: PathForm) -> bool:
    return rules.blocked_everything or any(
        form(r).rstrip("/") in rules.blocked or form(r) in rules.blocked_index for r in mark.folders
    )


# -- expired, orphans, deletes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What ``_verdict`` judged: the persisted frame and the report's counts and samples (the
    fields of ``TableMaintenanceResult`` of the same names; the orphans' stay at their defaults
    without a listing)."""

    frame: DataFrame
    reachable_files: int
    expired_files: int
    expired_kept: int
    expired_refused: int
    to_delete: int
    bytes_to_delete: int
    unsized_to_delete: int
    to_delete_sample: list[str]
    too_young_sample: list[str]
    refused_sample: list[str]
    unlisted_folders: list[Unreadable]  # folders that could not be listed
    listing: str | None = None
    files_listed: int | None = None
    orphans_found: int = 0
    orphan_bytes: int = 0
    too_young: int = 0
    orphans_refused: int = 0


def _verdict(
    job: JobContext,
    storage: Storage,
    warehouse: str,
    form: PathForm,
    walked: DataFrame,
    owner_folders: dict[str, list[str]],
    listing_folders: list[str] | None,
    rules: DeletionRules,
    cutoff: int,
    persist: Persisted,
) -> Verdict:
    """One verdict per candidate file (``VERDICT``), persisted: each file the expired
    snapshots and due purges named (``source`` expired: ``KEPT`` when retained metadata names
    it, else ``DELETE`` or ``REFUSED`` by the rules against its owners' folders), each file listed
    under ``listing_folders`` that neither retained metadata nor a candidate names (``source``
    orphan: ``YOUNG``, ``DELETE`` or ``REFUSED``), and each folder that could not be listed
    (``ERROR``). The reach and the candidates are anti-joined on a 64-bit hash of the path (a
    collision only keeps more). The counts and samples come with it: two queries."""
    from pyspark.sql import functions as F

    reach = persist(walked.where(F.col("kind") == "R").select("path").distinct())
    candidates = persist(
        walked.where((F.col("kind") == "E") & F.col("owner").isin(sorted(owner_folders)))
        .groupBy("path")
        .agg(
            F.to_json(F.array_sort(F.collect_set("owner"))).alias("owners"),
            F.max("size").alias("size"),
        )
    )
    reached = reach.select(F.xxhash64("path").alias("path_hash")).withColumn("reached", F.lit(True))
    marked = candidates.withColumn("path_hash", F.xxhash64("path")).join(
        reached, "path_hash", "left"
    )

    def judge_expired(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = []
            for path, size, owners, kept in zip(
                *(batch.column(i).to_pylist() for i in range(4)), strict=True
            ):
                folders = sorted({r for o in json.loads(owners) for r in owner_folders.get(o, [])})
                why = None if kept else rules.allows(path, folders)
                category = KEPT if kept else DELETE if why is None else REFUSED
                rows.append((path, size, json.dumps(folders), "expired", category, why))
            yield from VERDICT.batches(rows)

    frames = [
        marked.select(
            "path", "size", "owners", F.coalesce(F.col("reached"), F.lit(False))
        ).mapInArrow(judge_expired, VERDICT.ddl)
    ]
    listed_files: DataFrame | None = None
    how: str | None = None
    if listing_folders is not None:
        listing, how = _listing(job, storage, warehouse, form, listing_folders, persist)
        failed = F.col("path").startswith(LISTING_ERROR)
        frames.append(
            listing.where(failed).select(
                F.col("folder").alias("path"),
                F.lit(-1).cast("bigint").alias("size"),
                F.lit("[]").alias("owners"),
                F.lit("error").alias("source"),
                F.lit(ERROR).alias("category"),
                F.expr(f"substring(path, {len(LISTING_ERROR) + 1})").alias("reason"),
            )
        )
        listed_files = listing.where(~failed).dropDuplicates(["path"])
        orphans = _unreached(_unreached(listed_files, reach), candidates)

        def judge_orphans(batches: Iterator[Any]) -> Iterator[Any]:
            for batch in batches:
                rows = []
                for path, size, mtime, folder in zip(
                    *(batch.column(i).to_pylist() for i in range(4)), strict=True
                ):
                    why = None if mtime >= cutoff else rules.allows(path, [folder])
                    category = YOUNG if mtime >= cutoff else DELETE if why is None else REFUSED
                    rows.append((path, size, json.dumps([folder]), "orphan", category, why))
                yield from VERDICT.batches(rows)

        frames.append(
            orphans.select("path", "size", "mtime_millis", "folder").mapInArrow(
                judge_orphans, VERDICT.ddl
            )
        )
    verdict = frames[0]
    for frame in frames[1:]:
        verdict = verdict.unionByName(frame)
    verdict = persist(verdict)

    sized = F.when(F.col("size") >= 0, F.col("category")).otherwise(
        F.concat(F.col("category"), F.lit("-unsized"))
    )
    counted = verdict.select("source", sized.alias("category"), "size").unionByName(
        reach.select(
            F.lit("reach").alias("source"),
            F.lit("reachable").alias("category"),
            F.lit(-1).cast("bigint").alias("size"),
        )
    )
    if listed_files is not None:
        counted = counted.unionByName(
            listed_files.select(
                F.lit("listing").alias("source"), F.lit("listed").alias("category"), "size"
            )
        )
    totals: dict[tuple[str, str], tuple[int, int]] = {}
    for row in (
        counted.groupBy("source", "category")
        .agg(F.count(F.lit(1)), F.sum(F.when(F.col("size") > 0, F.col("size"))))
        .collect()
    ):
        totals[(row[0], row[1])] = (int(row[2]), int(row[3] or 0))

    def count(source: str, category: str) -> int:
        return sum(totals.get((source, c), (0, 0))[0] for c in (category, category + "-unsized"))

    def size(source: str, category: str) -> int:
        return totals.get((source, category), (0, 0))[1]

    def sample(category: str) -> list[tuple[str, str | None]]:
        if not any(key[1].startswith(category) for key in totals):
            return []
        return [
            (row[0], row[1])
            for row in verdict.where(F.col("category") == category)
            .select("path", "reason")
            .orderBy("path")
            .limit(SAMPLE_LIMIT)
            .collect()
        ]

    return Verdict(
        frame=verdict,
        reachable_files=count("reach", "reachable"),
        expired_files=sum(n for (src, _), (n, _) in totals.items() if src == "expired"),
        expired_kept=count("expired", KEPT),
        expired_refused=count("expired", REFUSED),
        to_delete=count("expired", DELETE) + count("orphan", DELETE),
        bytes_to_delete=size("expired", DELETE) + size("orphan", DELETE),
        unsized_to_delete=sum(
            totals.get((src, DELETE + "-unsized"), (0, 0))[0] for src in ("expired", "orphan")
        ),
        to_delete_sample=[path for path, _ in sample(DELETE)],
        too_young_sample=[path for path, _ in sample(YOUNG)],
        refused_sample=[f"{path} ({why})" for path, why in sample(REFUSED)],
        unlisted_folders=[
            Unreadable(path, Kind.METADATA, str(why), False) for path, why in sample(ERROR)
        ],
        # Without a listing there are no orphan rows: their counts are 0, as the result's defaults.
        listing=how,
        files_listed=count("listing", "listed") if listed_files is not None else None,
        orphans_found=sum(n for (src, _), (n, _) in totals.items() if src == "orphan"),
        orphan_bytes=sum(b for (src, _), (_, b) in totals.items() if src == "orphan"),
        too_young=count("orphan", YOUNG),
        orphans_refused=count("orphan", REFUSED),
    )


def _unreached(frame: DataFrame, known: DataFrame) -> DataFrame:
    """The rows of ``frame`` whose path ``known`` does not hold: a left anti join on a 64-bit
    hash of the path (a collision only keeps more). No join hint: on a small lakehouse the
    planner broadcasts the smaller side, on a large one it shuffles both."""
    from pyspark.sql import functions as F

    hashes = known.select(F.xxhash64("path").alias("path_hash")).distinct()
    return (
        frame.withColumn("path_hash", F.xxhash64("path"))
        .join(hashes, "path_hash", "left_anti")
        .drop("path_hash")
    )


def _listing_folders(
    tables: DataFrame,
    infos: dict[str, TableInfo],
    newest: int,
    options: TableMaintenanceOptions,
    purging: Sequence[PurgeMark],
    form: PathForm,
) -> list[str]:
    """The folders to list: those of the newest version's tables in scope (not external, gc
    enabled), and of the purging marks."""
    folders: set[str] = set()
    if options.orphans:
        for _ns, _table, _definition, metadata, table_type in _version_tables(
            tables, newest, options.namespace
        ):
            info = infos.get(str(metadata)) if metadata is not None else None
            if info is None or table_type == "EXTERNAL" or info.gc_disabled:
                continue
            folders.update(info.folders)
    for mark in purging:
        folders.update(form(r).rstrip("/") for r in mark.folders)
    return sorted(folders)


def _listing(
    job: JobContext,
    storage: Storage,
    warehouse: str,
    form: PathForm,
    folders: list[str],
    persist: Persisted,
) -> tuple[DataFrame, str]:
    """The files under ``folders`` (``LISTING``) and how they were listed: one flat listing of the
    warehouse on the driver when it is small (``flat``), else a task per folder (``by table
    folder``); a folder that cannot be listed is one row whose path is ``LISTING_ERROR`` and the
    reason."""
    warehouse_storage = Storage(warehouse + "/", storage.storage_options)
    flat = list_flat(
        warehouse_storage, warehouse, folders, form, job.settings.gc_flat_listing_max_files
    )
    if flat is not None:
        return persist(driver_rows(job.spark, [tuple(f) for f in flat], LISTING)), "flat"
    listing = fan_out(
        job.spark,
        folders,
        lambda items: (
            tuple(f)
            for folder in items
            for f in list_folder(warehouse_storage, warehouse, folder, form)
        ),
        LISTING,
        job.parallelism,
    )
    return persist(listing), "by table folder"


def _delete(
    job: JobContext,
    storage: Storage,
    warehouse: str,
    rules: DeletionRules,
    files: DataFrame,
    batch_size: int,
    count: int,
) -> DeleteOutcome:
    """Delete the candidates on executors, each batch judged again (``delete_table_files``);
    ``count`` of them, at most ``DRIVER_DELETE_MAX_FILES``, on the driver."""
    warehouse_storage = Storage(warehouse + "/", storage.storage_options)
    if count <= DRIVER_DELETE_MAX_FILES:
        items = [
            (row[0], int(row[1] if row[1] is not None else -1), json.loads(row[2]))
            for row in files.select("path", "size", "owners").collect()
        ]
        outcome = delete_table_files(warehouse_storage, rules, items, batch_size)
        outcome.deleted_paths = sorted(outcome.deleted_paths)[:SAMPLE_LIMIT]
        return outcome

    def run(batches: Any) -> Any:
        items: list[tuple[str, int, list[str]]] = []
        for batch in batches:
            for path, size, owners in zip(
                *(batch.column(i).to_pylist() for i in range(3)), strict=True
            ):
                items.append((path, int(size if size is not None else -1), json.loads(owners)))
        if not items:
            return
        outcome = delete_table_files(warehouse_storage, rules, items, batch_size)
        outcome.deleted_paths = sorted(outcome.deleted_paths)[:SAMPLE_LIMIT]
        yield from PAYLOAD.batches([(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL),)])

    frame = (
        files.select("path", "size", "owners")
        .repartition(max(1, job.parallelism))
        .mapInArrow(run, PAYLOAD.ddl)
    )
    total = DeleteOutcome()
    for part in collect_objects(frame):
        total.add(part)
    total.deleted_paths = sorted(total.deleted_paths)[:SAMPLE_LIMIT]
    return total


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "table-maintenance",
        parser=_parser(),
        options=table_maintenance_job_options,
        run=run_table_maintenance,
        render=render_table_maintenance,
        argv=argv,
        spark=spark,
    )
