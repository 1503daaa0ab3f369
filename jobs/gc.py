"""gc: delete orphan files, the lakecore files no retained version or export reaches.

    ./spark-submit.sh gc --lakehouse URI [--older-than 3d] [--now TIME] [--dry-run]
                         [--i-understand-grace-risk]

The design (what is live, what may be deleted, why the grace period) is in
``lakecore.maintenance.gc``; this entrypoint distributes it:

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
"""

from __future__ import annotations

if __package__ in (
    None,
    "",
):  # run as a file (spark-submit jobs/gc.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("gc")

import sys
from collections.abc import Iterator, Sequence
from typing import Any

from jobs.arguments import (
    add_full_list_option,
    base_parser,
    checked_option,
    full_list_dataset,
    parse_duration_seconds,
    parse_time_millis,
)
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.frames import Columns, driver_rows, fan_out_columns
from jobs.run import run_job
from jobs.spark_units import (
    REACH,
    delete_frame,
    driver_reach,
    membership_in,
    reach_frame,
    sample_paths,
)
from lakecore.cli.outputs import Output, OutputKind, refuse_foreign_target
from lakecore.errors import ExitCode, LakecoreError, UnsafeOptionError
from lakecore.locations import hash_directory_prefixes
from lakecore.maintenance.clock import Clocks, machine_clock_millis, read_clocks
from lakecore.maintenance.damage import DAMAGED_MARK, may_be_damage
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.gc import check_grace, refusal_for_damage
from lakecore.maintenance.listing import (
    DELETABLE_KIND_NAMES,
    ERROR_KEY,
    FOREIGN,
    GcRefusedError,
    ListedFile,
    list_directories_columns,
    list_small_root,
    list_top,
    listing_levels,
    stat_listed,
)
from lakecore.maintenance.reach import (
    NewVersionsReach,
    ReachPlan,
    ReachTask,
    plan_reach,
    reach_new_versions,
    reach_task_columns,
)
from lakecore.maintenance.roots import read_retained
from lakecore.maintenance.settings import load_settings
from lakecore.maintenance.side_by_side import side_by_side
from lakecore.storage import Storage, request_pool
from lakecore.tree.store import PREFETCH_THREADS, NodeCache
from lakecore.units import format_seconds, plural

# Retained versions listed in the report; beyond this only the count and the range.
VERSIONS_IN_REPORT = 1000
# Up to this many orphans, their paths, sizes and ages come to the driver in one query, which
# then answers the samples, the re-check's membership and the totals itself (a few hundred
# bytes each in Python: tens of MiB at most); beyond, those stay Spark queries.
KNOWN_ORPHANS_ON_DRIVER = 100_000
# --full-list's dataset: REPORT.orphans.parquet.
ORPHANS_DATASET = "orphans"


def _parser() -> Any:
    parser = base_parser("gc", __doc__.splitlines()[0])
    parser.add_argument(
        "--older-than",
        default=None,
        type=checked_option(parse_duration_seconds),
        help="delete only orphans last modified longer ago than this (90s, 15m, 6h, 3d); "
        "default: gc_older_than in the settings, else 3d. Must exceed the longest commit (at least "
        "one hour, or the commit timeout if longer, unless --i-understand-grace-risk); a plain number is seconds",
    )
    parser.add_argument(
        "--now",
        default=None,
        type=checked_option(parse_time_millis),
        help="the time the grace period counts back from: epoch millis or ISO-8601 "
        "(default: the earlier of this machine's clock and the store's)",
    )
    parser.add_argument("--dry-run", action="store_true", help="report the orphans; delete nothing")
    add_full_list_option(parser, "orphan", ORPHANS_DATASET)
    parser.add_argument(
        "--i-understand-grace-risk",
        action="store_true",
        help="allow a grace period under one hour (or under the commit timeout), or a --now more than "
        "5 min ahead of this machine's or the store's clock: files of a commit in flight may be deleted",
    )
    # The grace period's safety needs only the command line and the local settings file, so it
    # is judged as the command line is read: spark-submit.sh then refuses before the JVM starts.
    parser.add_check(_grace_is_safe)
    return parser


def _grace_is_safe(args: Any) -> str | None:
    """``check_grace``'s refusal of the options given, or None; None too when the settings
    cannot be read (the job then says so itself, with its report)."""
    try:
        settings = load_settings(args.env)
        grace_seconds = parse_duration_seconds(args.older_than or settings.gc_older_than)
        # Before the JVM starts: this machine's clock alone (the job checks the store's too).
        clocks = Clocks(machine_clock_millis())
        check_grace(
            grace_seconds,
            commit_timeout_seconds=settings.commit_timeout_seconds,
            now_millis=parse_time_millis(args.now) if args.now is not None else clocks.now_millis,
            clocks=clocks,
            override=args.i_understand_grace_risk,
            given=args.older_than,
        )
    except UnsafeOptionError as exc:
        return str(exc)
    except LakecoreError:
        return None
    return None


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
    ctx: JobContext, storage: Storage, top: list[ListedFile], plan: ReachPlan, cached: list[Any]
) -> tuple[Any, Any, str]:
    """DataFrames of every listed file and of every file the plan reaches, and how the
    lakehouse was listed.

    - small (the retained trees reach at most ``gc_flat_listing_max_files`` paths and the
      listing confirms it): one flat listing on the driver; the walk on executors.
    - large, on local disk: the directories at or above the hash directories, as many as the
      tasks can use (``listing.listing_levels``), listed in tasks of their own, and the walk in
      others.
    - large, on an object store: a task per core, each listing its share of the directories,
      with requests enough in flight for its threads, and walking its share of the subtrees at
      the same time (``side_by_side``): both wait on responses, so a task waits for the slower,
      not for the sum. On local[1] the two used to run one after the other. Their rows come as
      one persisted frame (in ``cached``), filled before the join reads it on each side.
    """
    top_rows = driver_rows(ctx.spark, top, LISTING)
    most = ctx.settings.gc_flat_listing_max_files
    # Every task reaches at least one file: a lower bound on the lakehouse's size.
    plan_size = len(plan.driver_paths) + len(plan.tasks)
    flat = list_small_root(storage, most) if plan_size <= most else None
    if flat is not None:
        return (
            top_rows.unionByName(driver_rows(ctx.spark, flat, LISTING)),
            reach_frame(ctx, storage, plan),
            "flat",
        )
    threads = ctx.settings.gc_list_threads_per_task
    if not storage.waits_on_network:
        tasks = ctx.parallelism
        directories = hash_directory_prefixes(listing_levels(tasks))
        ctx.report.details["listing_directories"] = len(directories)

        def list_dirs(items: list[str]) -> Iterator[tuple[list[Any], ...]]:
            return (
                listed.columns() for listed in list_directories_columns(storage, items, threads)
            )

        listed = fan_out_columns(ctx.spark, directories, list_dirs, LISTING, tasks)
        return listed.unionByName(top_rows), reach_frame(ctx, storage, plan), "hash-directories"

    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    # A task per core, each with its requests in flight: every task needs directories enough
    # for its threads, and more tasks would only split them thinner.
    tasks = ctx.default_parallelism
    directories = hash_directory_prefixes(listing_levels(tasks * threads))
    ctx.report.details["listing_directories"] = len(directories)

    def list_and_walk(items: list[tuple[str, Any]]) -> Iterator[tuple[list[Any] | None, ...]]:
        to_list = [item for kind, item in items if kind == _LIST]
        to_walk = [item for kind, item in items if kind == _WALK]
        # One pool serves both (``storage.request_pool``): wide enough that the walk's reads
        # need not wait for the listing's window.
        request_pool(threads + PREFETCH_THREADS)
        listed = (
            (*chunk.columns(), [False] * len(chunk))
            for chunk in list_directories_columns(storage, to_list, threads)
        )
        reached = (
            (paths, sizes, None, None, [True] * len(paths))
            for paths, sizes in reach_task_columns(storage, to_walk)
        )
        return side_by_side([listed, reached])

    both = fan_out_columns(
        ctx.spark, _shares(directories, plan.tasks), list_and_walk, LISTED_OR_REACHED, tasks
    ).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(both)
    # Filled before the join reads it: the join's two sides are two stages that both scan
    # these rows and may run at once. One executor's block lock makes a second task wait for
    # a block being computed, but on a cluster the other side's task runs on another executor,
    # which knows of no such block and lists and walks the same share again (a standalone
    # cluster on moto: 1,667 requests for gc where local[2] makes 1,217, and 1.5x its time).
    both.count()
    listing = both.where(~F.col("reached")).select(*LISTING.names).unionByName(top_rows)
    reach = both.where(F.col("reached")).select(*REACH.names).unionByName(driver_reach(ctx, plan))
    return listing, reach, "hash-directories, walked alongside"


_LIST = "list"
_WALK = "walk"


def _shares(directories: list[str], walks: list[ReachTask]) -> list[tuple[str, Any]]:
    """The directories and the subtrees as one task list in which every contiguous slice (a
    partition's tasks) holds its share of each, each kind in its own order (neighbouring
    subtrees share nodes, and so a partition's cache)."""
    placed: list[tuple[float, int, int, tuple[str, Any]]] = [
        ((i + 0.5) / len(directories), 0, i, (_LIST, d)) for i, d in enumerate(directories)
    ]
    placed += [((i + 0.5) / len(walks), 1, i, (_WALK, w)) for i, w in enumerate(walks)]
    return [task for *_, task in sorted(placed, key=lambda p: p[:3])]


def judge_listing(
    storage: Storage, listing: Any, reach: Any, cutoff: int, cached: list[Any]
) -> Any:
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
    listing, one walk and one stat; both are appended to ``cached`` for the caller to
    unpersist. (Spark reuses no exchange across the statted and the other rows once it has
    pushed their filters down: unpersisted, the listing and the walk ran twice.)"""
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

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
    judged = joined.select(
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
            F.coalesce(F.col("kind") == ERROR_KEY, F.lit(False)) | F.col("reach_error").isNotNull()
        ).alias("error"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(judged)
    unstatted = F.col("orphan") & F.col("mtime_millis").isNull()

    def stat_orphans(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            files = zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
            rows = [
                (f.path, f.size, f.mtime_millis, f.kind, f.kind == ERROR_KEY)
                for f in stat_listed(storage, files)
            ]
            yield from STATTED.batches(rows)

    statted = (
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
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    cached.append(statted)
    return (
        judged.where(~unstatted)
        .unionByName(statted)
        .withColumn("old", F.col("mtime_millis") < F.lit(cutoff))
    )


def missing_paths(reach: Any, judged: Any) -> list[str]:
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


def _body(ctx: JobContext) -> None:
    cached: list[Any] = []
    try:
        with executor_errors():
            _gc(ctx, cached)
    finally:
        for frame in cached:
            frame.unpersist()


def _gc(ctx: JobContext, cached: list[Any]) -> None:
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    args, report, storage = ctx.args, ctx.report, ctx.storage
    grace_seconds = parse_duration_seconds(args.older_than or ctx.settings.gc_older_than)
    clocks = read_clocks(storage)  # files are aged by the earlier of this machine's and the store's
    now = parse_time_millis(args.now) if args.now is not None else clocks.now_millis
    check_grace(
        grace_seconds,
        commit_timeout_seconds=ctx.settings.commit_timeout_seconds,
        now_millis=now,
        clocks=clocks,
        override=args.i_understand_grace_risk,
        given=args.older_than,
    )
    batch_size = ctx.settings.gc_delete_batch_size
    cutoff = now - int(grace_seconds * 1000)
    report.dry_run = args.dry_run
    report.details.update(
        {
            "now_millis": now,
            "grace_seconds": grace_seconds,
            "cutoff_millis": cutoff,
            "delete_batch_size": batch_size,
            "clocks": clocks.as_details(),
        }
    )
    clock_note = clocks.note(aged="files" if args.now is None else None)
    if clock_note is not None:
        report.summary.append(clock_note)

    # -- list the top, read what is retained, cut the trees (driver) ------------------------
    with ctx.stage("retained", "list the top level and read every retained root (driver)"):
        top = list_top(storage)  # first: a root committed after this is handled by the recheck
        retained = read_retained(storage, top)
    report.base_version = retained.latest
    versions = retained.versions
    report.counts["retained_versions"] = len(versions)
    report.details["retained_versions"] = versions[:VERSIONS_IN_REPORT]
    report.details["retained_version_range"] = [versions[0], versions[-1]]
    report.details["exported_snapshots"] = dict(sorted(retained.exports.items()))
    with ctx.stage("plan", f"cut the trees of {len(versions)} retained versions (driver)"):
        cache = NodeCache()
        try:
            plan = plan_reach(storage, retained.roots.values(), ctx.parallelism, cache=cache)
        except GcRefusedError as exc:
            raise refusal_for_damage(storage, retained, exc, damaged=may_be_damage(exc)) from exc
    report.counts["subtree_tasks"] = len(plan.tasks)
    report.counts["subtree_tasks_shared_by_versions"] = plan.shared_tasks

    # -- one pass: list, walk the subtrees, join in the JVM, aggregate ----------------------
    with ctx.stage(
        "list-reach-anti-join", f"list the lakehouse, walk {len(plan.tasks)} subtrees, anti-join"
    ):
        # The judged rows are kept (the listing and the reach are each computed once, into
        # them; on an object store the listing-and-walk rows are kept too): every count below,
        # the samples, the re-check's membership questions and the deletes read these caches.
        listing, reach, how = _listing_and_reach(ctx, storage, top, plan, cached)
        judged = judge_listing(storage, listing, reach, cutoff, cached)
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
            refusal = GcRefusedError(
                f"{failures} hash directories, subtrees of retained versions or orphans could not be "
                f"listed, walked or statted, so gc cannot tell live files from old orphans: "
                f"{'; '.join(reason.removeprefix(ERROR_KEY) for reason in reasons)}"
            )
            damaged = (
                judged.where(F.col("path").startswith(ERROR_KEY + DAMAGED_MARK)).limit(1).count()
                > 0
            )
            raise refusal_for_damage(storage, retained, refusal, damaged=damaged)
    report.details["listing"] = how
    listed_by_kind: dict[str, int] = {}
    bytes_listed = unsized = reachable = missing = orphans = orphan_bytes = too_young = 0
    for row in groups:
        kind, files, size = row["kind"], int(row["files"]), int(row["bytes"] or 0)
        if row["error"]:
            continue
        if row["reached"]:
            reachable += files
        if kind is None:
            missing += files  # reached, not listed
            continue
        listed_by_kind[kind] = listed_by_kind.get(kind, 0) + files
        bytes_listed += size
        unsized += int(row["unsized"])
        if row["orphan"]:
            orphans += files
            orphan_bytes += size
            if not row["old"]:
                too_young += files
    report.counts["files_listed"] = sum(listed_by_kind.values())
    report.bytes["listed_bytes"] = bytes_listed
    if unsized:
        # A local listing reads no sizes (``judge_listing``): reached definitions are left out of
        # listed_bytes, and counted here.
        report.counts["files_listed_unsized"] = unsized
    report.details["listed_by_kind"] = dict(sorted(listed_by_kind.items()))
    report.counts["foreign_files"] = listed_by_kind.get(FOREIGN, 0)
    report.sample(
        "foreign",
        sample_paths(judged.where(F.col("kind") == FOREIGN))
        if report.counts["foreign_files"]
        else [],
    )
    report.counts["reachable_files"] = reachable
    if missing:
        # Reachable but not there: a dangling definition (fsck reports it). gc deletes nothing
        # because of it, but says so.
        report.counts["reachable_missing"] = missing
        report.sample("reachable_missing", missing_paths(reach, judged))
    orphan_frame = judged.where(F.col("orphan"))
    report.counts["orphans_found"] = orphans
    report.bytes["orphan_bytes"] = orphan_bytes
    report.counts["skipped_too_young"] = too_young
    # A few orphans (the usual case) come to the driver in one query, which then answers the
    # samples, the re-check's "is it an orphan" and the totals itself: four Spark jobs fewer,
    # each a fixed cost (tens of milliseconds on local[1], more on a cluster).
    known: list[tuple[str, int, bool]] | None = None
    if 0 < orphans <= KNOWN_ORPHANS_ON_DRIVER:
        known = sorted(
            (row[0], int(row[1] or 0), bool(row[2]))
            for row in orphan_frame.select("path", "size", "old").collect()
        )
    if known is not None:
        report.sample("too_young", [path for path, _, old in known if not old])
    else:
        report.sample(
            "too_young", sample_paths(orphan_frame.where(~F.col("old"))) if too_young else []
        )
    if args.full_list:
        target = full_list_dataset(args.report, ORPHANS_DATASET)
        # Checked as the command line was read; again now, as overwrite deletes what is there.
        refuse_foreign_target(Output("--full-list", target, OutputKind.PARQUET_DATASET))
        orphan_frame.select(
            "path", "size", "mtime_millis", "kind", F.col("old").alias("old_enough")
        ).write.mode("overwrite").parquet(target)
        report.details["orphans_dataset"] = target

    # -- recheck versions that landed meanwhile --------------------------------------------
    old_orphans = orphans - too_young
    rechecked = NewVersionsReach()
    if old_orphans:  # nothing old enough to delete: nothing to protect
        # Known orphans need no membership question; a huge set is not worth the driver's memory.
        unreached = {path for path, _, _ in known} if known is not None else set()
        with ctx.stage("recheck", "walk versions committed since the listing (driver)"):
            rechecked = reach_new_versions(
                storage,
                retained.latest,
                membership_in(ctx, judged.where(F.col("reached"))),
                cache=cache,
                covered=plan.covered,
                unreached=unreached,
            )
    deletable = orphan_frame.where(F.col("old"))
    if rechecked.paths:
        rescued = ctx.spark.createDataFrame(
            [(p,) for p in sorted(rechecked.paths)], schema="path string"
        )
        deletable = deletable.join(rescued, "path", "left_anti")
    deletable_sample: list[str] | None = None
    if known is not None:
        to_delete_known = [
            (path, size) for path, size, old in known if old and path not in rechecked.paths
        ]
        to_delete, bytes_to_delete = len(to_delete_known), sum(size for _, size in to_delete_known)
        deletable_sample = [path for path, _ in to_delete_known]
    elif old_orphans:
        deletable = deletable.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(deletable)
        totals = deletable.agg(F.count(F.lit(1)), F.sum("size")).collect()[0]
        to_delete, bytes_to_delete = int(totals[0]), int(totals[1] or 0)
    else:
        to_delete = bytes_to_delete = 0
    report.details["versions_rechecked"] = rechecked.versions
    report.counts["recheck_nodes_read"] = rechecked.nodes_read
    report.counts["orphans_rescued_by_new_versions"] = old_orphans - to_delete
    if rechecked.versions:
        report.new_version = rechecked.versions[-1]
    report.counts["would_delete" if args.dry_run else "orphans_to_delete"] = to_delete
    report.bytes["would_free" if args.dry_run else "orphan_bytes_to_delete"] = bytes_to_delete
    if deletable_sample is not None:
        report.sample("would_delete", deletable_sample)
    else:
        report.sample("would_delete", sample_paths(deletable) if to_delete else [])

    # -- delete ----------------------------------------------------------------------------
    deleted = DeleteOutcome()
    if not args.dry_run and to_delete:
        with ctx.stage(
            "delete",
            f"delete {to_delete} orphans in batches of {batch_size}",
            if_interrupted=f"some of the {plural(to_delete, 'old orphan')} may be deleted already (orphans "
            "only: no file a retained version reaches); run gc again to finish, or with --dry-run to "
            "see what is left",
        ):
            deleted = delete_frame(ctx, storage, deletable, batch_size)
    report.counts["orphans_deleted"] = deleted.deleted
    # Deleted by a run racing this one between the listing and the delete: not counted above.
    report.counts["orphans_already_gone"] = deleted.already_gone
    report.bytes["freed_bytes"] = deleted.bytes_freed
    report.sample("deleted", deleted.deleted_paths)
    verb = "would delete" if args.dry_run else "deleted"
    report.summary.append(
        f"{plural(len(versions), 'retained version')}, {plural(report.counts['files_listed'], 'file')} listed, "
        f"{report.counts['reachable_files']:,} reachable{f' ({missing:,} missing)' if missing else ''}, "
        f"{plural(orphans, 'orphan')} ({too_young:,} younger than the grace period of {format_seconds(grace_seconds)}), "
        f"{verb} {to_delete if args.dry_run else deleted.deleted:,}"
        f"{f' ({deleted.already_gone} already gone: another run deleted them)' if deleted.already_gone else ''}, "
        f"{plural(report.counts['foreign_files'], 'foreign file')} left alone"
    )
    if missing:
        # Damage, though not gc's to repair: its own line, not a count among the others.
        example = (report.samples.get("reachable_missing") or ["?"])[0]
        report.summary.append(
            f"{plural(missing, 'file')} that retained versions reach {'is' if missing == 1 else 'are'} missing "
            f"(e.g. {example}); gc deleted nothing because of {'it' if missing == 1 else 'them'}, but the lakehouse "
            f"is damaged: `lakecore -l {storage.root_uri} fsck --all --deep` names the versions"
        )
    if not to_delete:  # a dry run too, as compact-versions says of a dry run with nothing to expire
        report.status = "noop"
        report.details["noop_reason"] = (
            f"no orphan is older than the grace period ({too_young:,} younger {'one waits' if too_young == 1 else 'ones wait'})"
            if too_young
            else "no orphans"
        )
    if deleted.refused or deleted.errors:
        report.sample("delete_refused", deleted.refused)
        report.sample("delete_errors", deleted.errors)
        report.status = "failed"
        report.exit_code = ExitCode.FAILURE
        report.error = (
            f"{len(deleted.errors)} delete batches failed and {len(deleted.refused)} paths were "
            f"refused; {deleted.deleted} files were deleted. E.g. {(deleted.errors + deleted.refused)[0]}"
        )


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_job("gc", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
