"""gc: delete orphan files, the lakecore files no retained version or export reaches.

    ./spark-submit.sh gc --lakehouse URI [--older-than 3d] [--now TIME] [--dry-run]
                         [--i-understand-grace-risk]

The design (what is live, what may be deleted, why the grace period) is in
``lakecore.maintenance.gc``; this entrypoint distributes it:

    retained    the top level is listed and every root there read strictly (driver; fails
                closed)
    plan        the driver cuts each retained tree; subtrees are de-duplicated across versions
    list-reach-anti-join
                one shuffle: executors list the 4,096 hash directories and walk the subtrees;
                the listing (path -> file) is cogrouped with the reachable paths (an RDD that
                never leaves the executors) and each partition judges its paths: orphans
                (listed, deletable, unreached), reachable count, missing files, errors. Only
                the orphans and the counts come back to the driver
    recheck     versions committed since the listing are walked on the driver (membership
                questions go to the reachable RDD); what they reach is no orphan
    delete      batches of old-enough orphans on executors (skipped with --dry-run)

Exit codes as in ``jobs.common``; a retained root or node that cannot be read is exit 4 with
nothing deleted, an unsafe grace period is exit 2.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit jobs/gc.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from jobs.common import (
    EXIT_FAILURE,
    SAMPLE_LIMIT,
    JobContext,
    base_parser,
    parse_duration_seconds,
    parse_time_millis,
    run_job,
)
from jobs.spark_units import delete_in_batches, membership_in, reach_rdd, shuffle_partitions
from lakecore.humanize import format_seconds
from lakecore.locations import hash_directories
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.gc import check_grace
from lakecore.maintenance.listing import (
    FOREIGN,
    GcRefusedError,
    ListedFile,
    list_directories,
    list_top,
)
from lakecore.maintenance.reach import (
    NewVersionsReach,
    plan_reach,
    reach_new_versions,
)
from lakecore.maintenance.roots import read_retained
from lakecore.maintenance.tally import Tally, select_by_age, tally
from lakecore.storage import Storage
from lakecore.tree.store import NodeCache

# Retained versions listed in the report; beyond this only the count and the range.
VERSIONS_IN_REPORT = 1000


def _parser() -> Any:
    parser = base_parser("gc", __doc__.splitlines()[0])
    parser.add_argument(
        "--older-than", default=None,
        help="delete only orphans last modified longer ago than this (90s, 15m, 6h, 3d); "
        "default: gc_older_than in the settings, else 3d. Must exceed the longest commit",
    )
    parser.add_argument(
        "--now", default=None,
        help="the time the grace period counts back from: epoch millis or ISO-8601 "
        "(default: this machine's clock)",
    )
    parser.add_argument("--dry-run", action="store_true", help="report the orphans; delete nothing")
    parser.add_argument(
        "--i-understand-grace-risk", action="store_true",
        help="allow a grace period under one hour (or under the commit timeout), or a --now in "
        "the future: files of a commit in flight may be deleted",
    )
    return parser


def _listing(ctx: JobContext, storage: Storage, top: list[ListedFile]) -> Any:
    """RDD of every listed file: the hash directories listed on executors plus the top level."""
    directories = hash_directories()
    threads = ctx.settings.gc_list_threads_per_task

    def list_dirs(items: Iterable[str]) -> Iterator[ListedFile]:
        return list_directories(storage, items, threads)

    slices = min(len(directories), max(1, ctx.parallelism))
    listed = ctx.sc.parallelize(directories, slices).mapPartitions(list_dirs)
    return listed.union(ctx.sc.parallelize(top, 1))


def _tally(grouped: Any) -> Tally:
    """Judge every path where it lands after the shuffle; collect one Tally per partition."""

    def judge(items: Iterable[Any]) -> Iterator[Tally]:
        yield tally(items, SAMPLE_LIMIT)

    total = Tally(sample_limit=SAMPLE_LIMIT)
    for part in grouped.mapPartitions(judge).collect():
        total.merge(part)
    return total


def _body(ctx: JobContext) -> None:
    cached: list[Any] = []
    try:
        _gc(ctx, cached)
    finally:
        for rdd in cached:
            rdd.unpersist()


def _gc(ctx: JobContext, cached: list[Any]) -> None:
    args, report, storage = ctx.args, ctx.report, ctx.storage
    grace_seconds = parse_duration_seconds(args.older_than or ctx.settings.gc_older_than)
    wall_clock = int(time.time() * 1000)
    now = parse_time_millis(args.now) if args.now is not None else wall_clock
    check_grace(
        grace_seconds,
        commit_timeout_seconds=ctx.settings.commit_timeout_seconds,
        now_millis=now,
        wall_clock_millis=wall_clock,
        override=args.i_understand_grace_risk,
    )
    batch_size = ctx.settings.gc_delete_batch_size
    cutoff = now - int(grace_seconds * 1000)
    report.dry_run = args.dry_run
    report.details.update({"now_millis": now, "grace_seconds": grace_seconds, "cutoff_millis": cutoff,
                           "delete_batch_size": batch_size})

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
        plan = plan_reach(storage, retained.roots.values(), ctx.parallelism, cache=cache)
    report.counts["subtree_tasks"] = len(plan.tasks)
    report.counts["subtree_tasks_shared_by_versions"] = plan.shared_tasks

    # -- one pass: list the hash dirs, walk the subtrees, anti-join, collect the orphans ---
    with ctx.stage("list-reach-anti-join",
                   f"list 4096 hash directories, walk {len(plan.tasks)} subtrees, anti-join"):
        listing = _listing(ctx, storage, top).map(lambda f: (f.path, f))
        reach = reach_rdd(ctx, storage, plan).persist()  # kept for the recheck's questions
        cached.append(reach)
        seen = _tally(listing.cogroup(reach, shuffle_partitions(ctx)))
    if seen.error_count:
        raise GcRefusedError(
            f"{seen.error_count} hash directories or subtrees of retained versions could not be "
            f"listed or walked, so gc cannot tell live files from orphans: {'; '.join(seen.errors[:3])}"
        )
    report.counts["files_listed"] = seen.files_listed
    report.bytes["listed_bytes"] = seen.bytes_listed
    report.details["listed_by_kind"] = {k: n for k, (n, _) in sorted(seen.listed_by_kind.items())}
    report.counts["foreign_files"] = seen.count(FOREIGN)
    report.sample("foreign", seen.foreign)
    report.counts["reachable_files"] = seen.reachable
    if seen.missing:
        # Reachable but not there: a dangling definition (fsck reports it). gc deletes nothing
        # because of it, but says so.
        report.counts["reachable_missing"] = seen.missing
        report.sample("reachable_missing", seen.missing_sample)
    orphans = seen.orphans
    selection = select_by_age(orphans, cutoff)
    report.counts["orphans_found"] = len(orphans)
    report.bytes["orphan_bytes"] = sum(f.size for f in orphans)
    report.counts["skipped_too_young"] = len(selection.too_young)
    report.sample("too_young", [f.path for f in selection.too_young])

    # -- recheck versions that landed meanwhile --------------------------------------------
    rechecked = NewVersionsReach()
    if selection.old:  # nothing old enough to delete: nothing to protect
        with ctx.stage("recheck", "walk versions committed since the listing (driver)"):
            rechecked = reach_new_versions(
                storage, retained.latest, membership_in(reach), cache=cache,
                covered=plan.covered, unreached={f.path for f in orphans},
            )
    rescued = [f for f in selection.old if f.path in rechecked.paths]
    deletable = [f for f in selection.old if f.path not in rechecked.paths]
    report.details["versions_rechecked"] = rechecked.versions
    report.counts["recheck_nodes_read"] = rechecked.nodes_read
    report.counts["orphans_rescued_by_new_versions"] = len(rescued)
    if rechecked.versions:
        report.new_version = rechecked.versions[-1]
    report.counts["would_delete" if args.dry_run else "orphans_to_delete"] = len(deletable)
    report.bytes["would_free" if args.dry_run else "orphan_bytes_to_delete"] = sum(f.size for f in deletable)
    report.sample("would_delete", [f.path for f in deletable])

    # -- delete ----------------------------------------------------------------------------
    deleted = DeleteOutcome()
    if not args.dry_run and deletable:
        with ctx.stage("delete", f"delete {len(deletable)} orphans in batches of {batch_size}"):
            deleted = delete_in_batches(ctx, storage, [(f.path, f.size) for f in deletable], batch_size)
    report.counts["orphans_deleted"] = deleted.deleted
    report.bytes["freed_bytes"] = deleted.bytes_freed
    report.sample("deleted", deleted.deleted_paths)
    verb = "would delete" if args.dry_run else "deleted"
    report.summary.append(
        f"{len(versions)} retained versions, {report.counts['files_listed']} files listed, "
        f"{report.counts['reachable_files']} reachable, {len(orphans)} orphans "
        f"({len(selection.too_young)} younger than the grace period of {format_seconds(grace_seconds)}), "
        f"{verb} {len(deletable) if args.dry_run else deleted.deleted}, "
        f"{report.counts['foreign_files']} foreign files left alone"
    )
    if not deletable and not args.dry_run:
        report.status = "noop"
        report.details["noop_reason"] = (
            f"no orphan is older than the grace period ({len(selection.too_young)} younger ones wait)"
            if selection.too_young else "no orphans")
    if deleted.refused or deleted.errors:
        report.sample("delete_refused", deleted.refused)
        report.sample("delete_errors", deleted.errors)
        report.status = "failed"
        report.exit_code = EXIT_FAILURE
        report.error = (
            f"{len(deleted.errors)} delete batches failed and {len(deleted.refused)} paths were "
            f"refused; {deleted.deleted} files were deleted. E.g. {(deleted.errors + deleted.refused)[0]}"
        )


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_job("gc", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
