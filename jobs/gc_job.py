"""gc: delete orphan files, the lakecore files no retained version or export reaches.

    ./spark-submit.sh gc --lakehouse URI [--older-than 3d] [--now TIME] [--dry-run]
                         [--i-understand-grace-risk]

The design (what is live, what may be deleted, why the grace period) is in
``lakecore.maintenance.gc``; this job distributes it:

    retained    the top level is listed and every root there read strictly (driver; fails
                closed)
    plan        the driver cuts each retained tree; subtrees are de-duplicated across versions
    list-reach-anti-join
                executors list the hash directories, 16, 256 or 4,096 directories at a time
                (or, for a small lakehouse, the driver lists the whole root in one flat paged
                listing: ``maintenance.listing``) and
                walk the subtrees (on an object store in the same tasks, side by side); the
                listing is joined with the reachable paths in the JVM
                (a full outer join on a hash of the path) and aggregated by kind: only counts and capped
                samples come back to the driver; the orphans stay a persisted DataFrame
    recheck     versions committed since the listing are walked on the driver (membership
                questions go to the reachable DataFrame); what they reach is no orphan
    delete      the old-enough orphans (an anti-join with the re-check's paths) are deleted in
                batches on executors (skipped with --dry-run)

With --full-list (and --report), every orphan goes to a Parquet dataset beside the report
(REPORT.orphans.parquet: path, size, mtime_millis, kind, old_enough).

Exit codes as in ``lakecore.errors.ExitCode``; a retained root or node that cannot be read is exit 6 with
nothing deleted when its bytes are damaged (the line names the damaged versions and the repair),
exit 4 when the read failed (storage; a rerun may succeed); an unsafe grace period is exit 2.

This module holds one concept, the gc job's Spark pipeline, and stays one file: its stages pass
each other DataFrames that stay cached until the run ends (the listing and reach, the judged
orphans), so the job reads top to bottom as the stages above; the DataFrame units it shares
with compact-versions are ``jobs.spark_units``, the design is ``lakecore.maintenance.gc``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.command_line import (
    JobOptions,
    add_full_list_option,
    base_parser,
    full_list_dataset,
    write_full_list,
)
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.frames import Columns, driver_rows, fan_out_columns
from jobs.persisted import Persisted
from jobs.run import run_job
from jobs.spark_units import (
    REACH,
    delete_frame,
    driver_reach,
    membership_in,
    sample_paths,
)
from lakecore.contract.gc import add_gc_arguments, gc_options, render_gc
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.core.storage import Storage, request_pool
from lakecore.core.tree.store import PREFETCH_THREADS, NodeCache
from lakecore.core.units import plural
from lakecore.maintenance.clock import check_grace_options, read_clocks
from lakecore.maintenance.damage import DAMAGED_MARK
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.gc import (
    GcFound,
    GcOptions,
    GcResult,
    over_retained_refusal,
    raise_explained,
)
from lakecore.maintenance.listing import (
    DELETABLE_KIND_NAMES,
    ERROR_KEY,
    FOREIGN,
    WALKED_ALONGSIDE,
    GcRefusedError,
    ListedFile,
    ListingWay,
    list_directories_columns,
    list_top,
    listing_way,
    stat_listed,
)
from lakecore.maintenance.reach import (
    ReachPlan,
    ReachTask,
    plan_reach,
    reach_task_columns,
)
from lakecore.maintenance.recheck import NewVersionsReach, reach_new_versions
from lakecore.maintenance.roots import read_retained
from lakecore.maintenance.samples import capped
from lakecore.maintenance.side_by_side import side_by_side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

# Up to this many orphans, their paths, sizes and ages come to the driver in one query, which
# then answers the samples, the re-check's membership and the totals itself (a few hundred
# bytes each in Python: tens of MiB at most); beyond, those stay Spark queries.
KNOWN_ORPHANS_ON_DRIVER = 100_000
# --full-list's dataset: REPORT.orphans.parquet.
ORPHANS_DATASET = "orphans"


def _parser() -> OneLineArgumentParser:
    parser = base_parser("gc", __doc__.splitlines()[0])
    add_gc_arguments(parser)  # --older-than, --now, --dry-run, --i-understand-grace-risk
    add_full_list_option(parser, "orphan", ORPHANS_DATASET)
    return parser


@dataclass(frozen=True)
class GcJobOptions:
    """gc's options (``GcOptions``, as ``lakecore gc`` takes them) and the job's own output."""

    gc: GcOptions
    full_list_dataset: str | None  # --full-list: every orphan to this Parquet dataset


def gc_job_options(args: argparse.Namespace, common: JobOptions) -> GcJobOptions:
    return GcJobOptions(
        gc_options(args, common.settings),
        full_list_dataset(args.report, ORPHANS_DATASET) if args.full_list else None,
    )


LISTING = Columns(
    (("path", "string"), ("size", "bigint"), ("mtime_millis", "bigint"), ("kind", "string"))
)
# An orphan statted after the join (``judge_listing``); ``error`` when it could not be.
STATTED = Columns(
    (
        ("path", "string"),
        ("size", "bigint"),
        ("mtime_millis", "bigint"),
        ("kind", "string"),
        ("error", "boolean"),
    )
)


# Listed and reached files in one frame, told apart by ``reached`` (``_listing_and_reach``).
LISTED_OR_REACHED = Columns((*LISTING.fields, ("reached", "boolean")))


def _listing_and_reach(
    job: JobContext,
    storage: Storage,
    top: list[ListedFile],
    plan: ReachPlan,
    way: ListingWay,
    persist: Persisted,
) -> tuple[DataFrame, DataFrame]:
    """DataFrames of every listed file (``top`` and what ``way`` lists) and of every file the
    plan reaches, from the tasks of ``_listed_and_walked``: on an object store one set of
    tasks lists and walks side by side, and their rows are one persisted frame, filled before
    the join reads it on each side; otherwise the listing (unless the lakehouse was listed flat
    on the driver) and the walk each have tasks of their own, and each frame is read once."""
    from pyspark.sql import functions as F

    if way.how == WALKED_ALONGSIDE:
        both = persist(_listed_and_walked(job, storage, way.directories, plan.tasks, way.tasks))
        # Filled before the join reads it: the join's two sides are two stages that both scan
        # these rows and may run at once. One executor's block lock makes a second task wait
        # for a block being computed, but on a cluster the other side's task runs on another
        # executor, which knows of no such block and lists and walks the same share again (a
        # standalone cluster on moto: 1,667 requests for gc where local[2] makes 1,217, and
        # 1.5x its time).
        both.count()
        listed, walked = both.where(~F.col("reached")), both.where(F.col("reached"))
    else:
        listed = (
            driver_rows(job.spark, way.flat, LISTING)
            if way.flat is not None
            else _listed_and_walked(job, storage, way.directories, [], way.tasks)
        )
        walked = _listed_and_walked(job, storage, [], plan.tasks, job.parallelism)
    listed = listed.select(*LISTING.names).unionByName(driver_rows(job.spark, top, LISTING))
    return listed, walked.select(*REACH.names).unionByName(driver_reach(job, plan))


def _listed_and_walked(
    job: JobContext,
    storage: Storage,
    directories: list[str],
    walks: list[ReachTask],
    tasks: int,
) -> DataFrame:
    """The files under ``directories`` and the files the subtrees ``walks`` reach, as rows of
    ``LISTED_OR_REACHED`` from ``tasks`` tasks: each lists its share of the directories and
    walks its share of the subtrees, side by side when it has both."""
    shares = _shares(directories, walks)
    threads = job.settings.gc_list_threads_per_task

    def list_and_walk(items: list[tuple[str, Any]]) -> Iterator[tuple[list[Any] | None, ...]]:
        to_list = [item for kind, item in items if kind == _LIST]
        to_walk = [item for kind, item in items if kind == _WALK]
        producers: list[Iterator[tuple[list[Any] | None, ...]]] = []
        if to_list:
            producers.append(
                (*chunk.columns(), [False] * len(chunk))
                for chunk in list_directories_columns(storage, to_list, threads)
            )
        if to_walk:
            producers.append(
                (paths, sizes, None, None, [True] * len(paths))
                for paths, sizes in reach_task_columns(storage, to_walk)
            )
        if len(producers) > 1:
            # One pool serves both (``storage.request_pool``): wide enough that the walk's
            # reads need not wait for the listing's window.
            request_pool(threads + PREFETCH_THREADS)
        return side_by_side(producers)

    return fan_out_columns(job.spark, shares, list_and_walk, LISTED_OR_REACHED, tasks)


_LIST = "list"
_WALK = "walk"


def _shares(directories: list[str], walks: list[ReachTask]) -> list[tuple[str, Any]]:
    """The directories and the subtrees as one task list in which every contiguous slice (a
    partition's tasks) holds its share of each, each kind in its own order (neighbouring
    subtrees share nodes, and so a partition's cache). Either may be empty."""
    placed: list[tuple[float, int, int, tuple[str, Any]]] = [
        ((i + 0.5) / len(directories), 0, i, (_LIST, d)) for i, d in enumerate(directories)
    ]
    placed += [((i + 0.5) / len(walks), 1, i, (_WALK, w)) for i, w in enumerate(walks)]
    return [task for *_, task in sorted(placed, key=lambda p: p[:3])]


def judge_listing(
    storage: Storage, listing: DataFrame, reach: DataFrame, cutoff: int, persist: Persisted
) -> DataFrame:
    """The full outer join of the listing and the reach, one row per listed or reached file,
    with what gc makes of it: ``reached``, ``orphan`` (listed, deletable, unreached), ``old``
    (modified before the cutoff) and ``error`` (a hash directory that could not be listed, a
    subtree that could not be walked or an orphan that could not be statted, its reason as the
    path: their control-character prefix matches no file).

    The join is on a 64-bit hash of the path (``path_hash``), not on the path: the reach then
    crosses the shuffle, is de-duplicated and is built into the join's hash table as longs
    (1M files: its shuffle 67 -> 13 MB, the hash table's build 1.1 -> 0.4-0.6 s). The listing
    keeps its paths, so every listed row has one; a reached file that is not listed (a dangling
    definition) has a null path, and ``missing_paths`` finds it. A collision of two paths' hashes
    can only make an orphan look reached, so kept: equal paths hash equal, so a reached file
    always meets its reach. A walk's error keeps its reason in ``reach_error``, part of the
    grouping key, so no collision can hide it.

    A local listing reads no size or time (``Storage.list_paths``): a stat costs four times
    the directory read, and only orphans need one (for the grace period). Those are statted
    after the join; a reached node file takes its size from the walk.

    The join is persisted, and so are the statted orphans, so that every query reads one
    listing, one walk and one stat; both live as long as the caller's ``persist`` scope. (Spark reuses no exchange across the statted and the other rows once it has
    pushed their filters down: unpersisted, the listing and the walk ran twice.)"""
    from pyspark.sql import functions as F

    reach_error = F.when(F.col("path").startswith(ERROR_KEY), F.col("path"))
    # Partitioned by the hash alone, the grouping (which keeps each error's reason) needs no
    # exchange of its own, and the join none either: one shuffle of the reach, not two.
    reached = (
        reach.select(
            F.xxhash64("path").alias("path_hash"), reach_error.alias("reach_error"), "size"
        )
        .repartition("path_hash")
        .groupBy("path_hash", "reach_error")
        .agg(F.max("size").alias("reach_size"))
        .withColumn("reached", F.lit(True))
    )
    joined = listing.withColumn("path_hash", F.xxhash64("path")).join(
        reached.hint("shuffle_hash"), "path_hash", "full_outer"
    )
    is_reached = F.coalesce(F.col("reached"), F.lit(False))
    judged = persist(
        joined.select(
            F.coalesce(F.col("reach_error"), F.col("path")).alias("path"),
            "path_hash",
            F.coalesce(F.col("size"), F.when(F.col("reach_size") >= 0, F.col("reach_size"))).alias(
                "size"
            ),
            "mtime_millis",
            "kind",
            is_reached.alias("reached"),
            # Never null: a reached file that is not listed has no kind.
            F.coalesce(F.col("kind").isin(*DELETABLE_KIND_NAMES) & ~is_reached, F.lit(False)).alias(
                "orphan"
            ),
            (
                F.coalesce(F.col("kind") == ERROR_KEY, F.lit(False))
                | F.col("reach_error").isNotNull()
            ).alias("error"),
        )
    )
    unstatted = F.col("orphan") & F.col("mtime_millis").isNull()

    def stat_orphans(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            files = zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
            rows = [
                (f.path, f.size, f.mtime_millis, f.kind, f.kind == ERROR_KEY)
                for f in stat_listed(storage, files)
            ]
            yield from STATTED.batches(rows)

    statted = persist(
        judged.where(unstatted)
        .select("path", "kind")
        .mapInArrow(stat_orphans, STATTED.ddl)
        .select(
            "path",
            F.xxhash64("path").alias("path_hash"),
            "size",
            "mtime_millis",
            "kind",
            F.lit(False).alias("reached"),
            (~F.col("error")).alias("orphan"),
            "error",
        )
    )
    return (
        judged.where(~unstatted)
        .unionByName(statted)
        .withColumn("old", F.col("mtime_millis") < F.lit(cutoff))
    )


def missing_paths(reach: DataFrame, judged: DataFrame) -> list[str]:
    """The first paths, in order, of files a retained version reaches that the listing did not
    find (``judge_listing`` knows them by hash only). It walks the reach again: a dangling
    definition is damage, rare enough to pay a second walk for its name."""
    from pyspark.sql import functions as F

    missing = judged.where(F.col("kind").isNull() & ~F.col("error")).select("path_hash")
    return sample_paths(
        reach.where(~F.col("path").startswith(ERROR_KEY))
        .withColumn("path_hash", F.xxhash64("path"))
        .join(missing, "path_hash", "left_semi")
        .select("path")
        .distinct()
    )


def run_gc(options: GcJobOptions, job: JobContext) -> GcResult:
    """gc on executors, in the stages of the module doc; returns the ``GcResult`` that
    ``gc_in_process`` returns, with capped samples where that one has full lists. A refusal
    leaves through here, told as ``gc_in_process`` tells its own (``gc.raise_explained``)."""
    with Persisted() as persist, executor_errors():
        try:
            return _gc(options, job, persist)
        except GcRefusedError as refusal:  # told here: damage, or a refusal that stands
            tracked = job.tracked
            retained = tracked.retained if isinstance(tracked, GcResult) else None
            raise_explained(job.storage, retained, refusal)


def _gc(options: GcJobOptions, job: JobContext, persist: Persisted) -> GcResult:
    """The stages in order. The result is filled here alone, stage by stage as each ends (a
    run stopped part-way reports what it had found); the helpers return what they compute."""
    from pyspark.sql import functions as F

    storage, gc = job.storage, options.gc
    clocks = read_clocks(storage)  # files are aged by the earlier of this machine's and the store's
    now = check_grace_options(gc, clocks, job="gc")
    result = job.track(
        GcResult(
            now_millis=now,
            grace_millis=gc.grace_millis,
            dry_run=gc.dry_run,
            clocks=clocks,
            now_given=gc.now_millis is not None,
            delete_batch_size=gc.delete_batch_size,
        )
    )

    # -- list the top, read what is retained, cut the trees (driver) ------------------------
    with job.stage("retained", "list the top level and read every retained root (driver)"):
        top = list_top(storage)  # first: a root committed after this is handled by the recheck
        retained = read_retained(storage, top)
    result.retained = retained
    with job.stage("plan", f"cut the trees of {len(retained.versions)} retained versions (driver)"):
        cache = NodeCache()
        plan = plan_reach(
            storage,
            retained.roots.values(),
            job.parallelism,
            cache=cache,
            refused=over_retained_refusal,
        )
    result.subtree_tasks, result.subtree_tasks_shared = len(plan.tasks), plan.shared_tasks

    # -- one pass: list, walk the subtrees, join in the JVM, aggregate ----------------------
    with job.stage(
        "list-reach-anti-join", f"list the lakehouse, walk {len(plan.tasks)} subtrees, anti-join"
    ):
        way = listing_way(
            storage,
            plan.files_at_least,
            max_flat_files=job.settings.gc_flat_listing_max_files,
            parallelism=job.parallelism,
            cores=lambda: job.default_parallelism,
            threads_per_task=job.settings.gc_list_threads_per_task,
        )
        result.listing_directories = way.directories_listed
        # The judged rows are kept (the listing and the reach are each computed once, into
        # them; on an object store the listing-and-walk rows are kept too): every count below,
        # the samples, the re-check's membership questions and the deletes read these caches.
        listing, reach = _listing_and_reach(job, storage, top, plan, way, persist)
        judged = judge_listing(storage, listing, reach, result.cutoff_millis, persist)
        groups = (
            judged.groupBy("kind", "reached", "orphan", "old", "error")
            .agg(
                F.count(F.lit(1)).alias("files"),
                F.sum(F.coalesce(F.col("size"), F.lit(0))).alias("bytes"),
                F.count_if(F.col("size").isNull()).alias("unsized"),
            )
            .collect()
        )
        failures = sum(int(row["files"]) for row in groups if row["error"])
        if failures:
            reasons = [
                row[0] for row in judged.where(F.col("error")).select("path").limit(3).collect()
            ]
            damaged = (
                judged.where(F.col("path").startswith(ERROR_KEY + DAMAGED_MARK)).limit(1).count()
                > 0
            )
            raise GcRefusedError(
                f"{failures} hash directories, subtrees of retained versions or orphans could not be "
                f"listed, walked or statted, so gc cannot tell live files from old orphans: "
                f"{'; '.join(reason.removeprefix(ERROR_KEY) for reason in reasons)}",
                over_retained=True,
                damage_marked=damaged,
            )
    result.listing = way.how
    found = _found(groups)
    if found.missing:
        found.missing_sample = missing_paths(reach, judged)
    found.foreign_sample = (
        sample_paths(judged.where(F.col("kind") == FOREIGN)) if found.foreign else []
    )
    orphan_frame = judged.where(F.col("orphan"))
    # A few orphans (the usual case) come to the driver in one query, which then answers the
    # samples, the re-check's "is it an orphan" and the totals itself: four Spark jobs fewer,
    # each a fixed cost (tens of milliseconds on local[1], more on a cluster).
    known: list[tuple[str, int, bool]] | None = None
    if 0 < found.orphans <= KNOWN_ORPHANS_ON_DRIVER:
        known = sorted(
            (row[0], int(row[1] or 0), bool(row[2]))
            for row in orphan_frame.select("path", "size", "old").collect()
        )
    if known is not None:
        found.too_young_sample = capped(path for path, _, old in known if not old)
    elif found.too_young:
        found.too_young_sample = sample_paths(orphan_frame.where(~F.col("old")))
    result.found = found
    if options.full_list_dataset is not None:
        target = options.full_list_dataset
        write_full_list(
            orphan_frame.select(
                "path", "size", "mtime_millis", "kind", F.col("old").alias("old_enough")
            ),
            target,
        )
        result.orphans_dataset = target

    # -- recheck versions that landed meanwhile --------------------------------------------
    old_orphans = found.orphans - found.too_young
    rechecked = NewVersionsReach()
    if old_orphans:  # nothing old enough to delete: nothing to protect
        # Known orphans need no membership question; a huge set is not worth the driver's memory.
        unreached = {path for path, _, _ in known} if known is not None else set()
        is_reached = membership_in(job, judged.where(F.col("reached")))
        with job.stage("recheck", "walk versions committed since the listing (driver)"):
            rechecked = reach_new_versions(
                storage,
                retained.latest,
                is_reached,
                cache=cache,
                covered=plan.covered,
                unreached=unreached,
            )
    chosen = _to_delete(job, judged, rechecked, known, old_orphans, persist)
    result.to_delete, result.bytes_to_delete = chosen.files, chosen.bytes
    result.to_delete_sample = chosen.sample
    result.rescued = old_orphans - chosen.files
    result.rechecked = rechecked

    # -- delete ----------------------------------------------------------------------------
    deleted = DeleteOutcome()
    if not gc.dry_run and chosen.files:
        with job.stage(
            "delete",
            f"delete {chosen.files} orphans in batches of {gc.delete_batch_size}",
            if_interrupted=f"some of the {plural(chosen.files, 'old orphan')} may be deleted already (orphans "
            "only: no file a retained version reaches); run gc again to finish, or with --dry-run to "
            "see what is left",
        ):
            deleted = delete_frame(job, storage, chosen.frame, gc.delete_batch_size)
    result.deleted = deleted
    return result


def _found(groups: list[Row]) -> GcFound:
    """The listing's verdict from the judged rows' groups: the counts and bytes (samples are
    filled in by the caller)."""
    found = GcFound(
        listed_by_kind={},
        listed_bytes=0,
        reachable=0,
        orphans=0,
        orphan_bytes=0,
        too_young=0,
        too_young_sample=[],
        foreign_sample=[],
    )
    for row in groups:
        kind, files, size = row["kind"], int(row["files"]), int(row["bytes"] or 0)
        if row["error"]:
            continue
        if row["reached"]:
            found.reachable += files
        if kind is None:
            found.missing += files  # reached, not listed
            continue
        found.listed_by_kind[kind] = found.listed_by_kind.get(kind, 0) + files
        found.listed_bytes += size
        found.unsized += int(row["unsized"])
        if row["orphan"]:
            found.orphans += files
            found.orphan_bytes += size
            if not row["old"]:
                found.too_young += files
    found.listed_by_kind = dict(sorted(found.listed_by_kind.items()))
    return found


@dataclass(frozen=True)
class ToDelete:
    """The old orphans that no version committed since the listing reaches (``_to_delete``)."""

    frame: DataFrame
    files: int = 0
    bytes: int = 0
    sample: list[str] = field(default_factory=list)


def _to_delete(
    job: JobContext,
    judged: DataFrame,
    rechecked: NewVersionsReach,
    known: list[tuple[str, int, bool]] | None,
    old_orphans: int,
    persist: Persisted,
) -> ToDelete:
    """The old orphans less what ``rechecked`` reaches: counted from ``known`` when the
    orphans came to the driver, else by a query over the persisted frame."""
    from pyspark.sql import functions as F

    deletable = judged.where(F.col("orphan") & F.col("old"))
    if rechecked.paths:
        rescued = job.spark.createDataFrame(
            [(p,) for p in sorted(rechecked.paths)], schema="path string"
        )
        deletable = deletable.join(rescued, "path", "left_anti")
    if known is not None:
        chosen = [(path, size) for path, size, old in known if old and path not in rechecked.paths]
        return ToDelete(
            deletable,
            len(chosen),
            sum(size for _, size in chosen),
            capped(path for path, _ in chosen),
        )
    if not old_orphans:
        return ToDelete(deletable)
    deletable = persist(deletable)
    totals = deletable.agg(F.count(F.lit(1)), F.sum("size")).collect()[0]
    files = int(totals[0])
    return ToDelete(deletable, files, int(totals[1] or 0), sample_paths(deletable) if files else [])


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "gc",
        parser=_parser(),
        options=gc_job_options,
        run=run_gc,
        render=render_gc,
        argv=argv,
        spark=spark,
    )
