"""compact-versions: expire old versions (docs/format.md#retention) and delete the files only
they reach.

    ./spark-submit.sh compact-versions --lakehouse URI [--now TIME] [--dry-run]
                                     [--i-understand-expiry-risk]

The rules and the crash-safe order of effects are in ``lakecore.maintenance.expire``; this
job distributes the heavy part:

    plan        read every root and decide with the latest definition's settings at --now
                (a fixed --now, e.g. Airflow's data_interval_end, makes a retry decide the same)
    cut         the driver cuts the retained and the expired trees; expired subtrees that a
                retained version also has are skipped outright
    reach-diff  executors walk both sides; in the JVM, reach(expired) is anti-joined with
                reach(retained + exports) on a hash of the path (``unreached_only``) and what
                is left is kept if lakecore may delete its name; only counts and capped
                samples come back to the driver
    hint        the hint is pointed at the latest version
    roots       expired root files are deleted one at a time, oldest first (driver)
    recheck     versions committed meanwhile are walked; what they reach is kept
    delete      the difference minus what the re-check found, in batches on executors

Nothing is deleted before the plan and the difference are complete; a retained version that
cannot be walked stops the run there (exit 6 naming the damaged versions and the repair when
its files are damaged, exit 4 when a read failed). An expired version that cannot be walked
still expires: its root file goes, and what lies below is left to gc.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.command_line import JobOptions, base_parser
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.persisted import Persisted
from jobs.run import run_job
from jobs.spark_units import (
    deletable_only,
    delete_frame,
    membership_in,
    reach_errors,
    reach_frame,
    sample_paths,
    unreached_only,
)
from lakecore.contract.compact_versions import (
    add_compact_versions_arguments,
    compact_versions_options,
    render_compact_versions,
)
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.core.tree.store import NodeCache
from lakecore.core.units import plural
from lakecore.maintenance.clock import read_clocks
from lakecore.maintenance.damage import DAMAGED_MARK
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.expire import (
    ExpiryDifference,
    ExpiryOptions,
    ExpiryRefusedError,
    ExpiryResult,
    check_exports_unchanged,
    check_options,
    delete_expired_roots,
    ensure_hint,
    plan_expiry,
    plan_reaches,
    recheck,
    refusal_for_damage,
    unreadable_expired,
)
from lakecore.maintenance.listing import ERROR_KEY
from lakecore.maintenance.samples import SAMPLE_LIMIT, capped

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _parser() -> OneLineArgumentParser:
    parser = base_parser("compact-versions", __doc__.splitlines()[0])
    add_compact_versions_arguments(parser)  # --now, --dry-run, --i-understand-expiry-risk
    return parser


def compact_versions_job_options(args: argparse.Namespace, common: JobOptions) -> ExpiryOptions:
    return compact_versions_options(args, common.settings)


def run_compact_versions(options: ExpiryOptions, job: JobContext) -> ExpiryResult:
    """Version expiry on executors, in the steps of the module doc; returns the ``ExpiryResult``
    that ``expire_in_process`` returns, with capped samples where that one has full lists."""
    with Persisted() as persist, executor_errors():
        return _compact(options, job, persist)


def _compact(options: ExpiryOptions, job: JobContext, persist: Persisted) -> ExpiryResult:
    from pyspark.sql import functions as F

    storage = job.storage
    # Versions are aged by their writers' commit timestamps. A driver whose clock runs ahead
    # would see them older than they are, so "now" is the earlier of this machine's clock and
    # the store's, as gc's is (lakecore.maintenance.clock).
    clocks = read_clocks(storage)
    now, refused_ahead = check_options(options, clocks)
    result = job.track(
        ExpiryResult(
            now_millis=now,
            dry_run=options.dry_run,
            clocks=clocks,
            now_given=options.now_millis is not None,
            refused_ahead=refused_ahead,
        )
    )
    with job.stage("plan", "read every root and decide which versions expire (driver)"):
        plan = plan_expiry(storage, now)
    result.plan = plan
    if not plan.expired:
        if not options.dry_run:
            with job.stage("hint", "point the hint at the latest version (driver)"):
                result.hint = ensure_hint(storage, plan)
        result.end_without_deleting()
        return result

    with job.stage("cut", "cut the retained and the expired trees (driver)"):
        cache = NodeCache()
        kept_plan, gone_plan, tolerated = plan_reaches(storage, plan, job.parallelism, cache)
    result.retained_subtree_tasks = len(kept_plan.tasks)
    result.expired_subtree_tasks = len(gone_plan.tasks)
    result.expired_subtrees_shared = gone_plan.skipped_tasks
    with job.stage(
        "reach-diff",
        f"walk {len(kept_plan.tasks) + len(gone_plan.tasks)} subtrees; "
        "reach(expired) minus reach(retained + exports)",
    ):
        kept = persist(reach_frame(job, storage, kept_plan))  # for the recheck
        gone = persist(reach_frame(job, storage, gone_plan))
        retained_errors = [row[0] for row in reach_errors(kept).limit(3).collect()]
        if retained_errors:
            refusal = ExpiryRefusedError(
                "a retained version cannot be walked, so the files only expired versions reach cannot "
                f"be told apart: {'; '.join(retained_errors)}; nothing was deleted"
            )
            damaged = (
                reach_errors(kept).where(F.col("reason").startswith(DAMAGED_MARK)).limit(1).count()
                > 0
            )
            raise refusal_for_damage(storage, plan, refusal, damaged=damaged)
        expired_errors = [row[0] for row in reach_errors(gone).limit(SAMPLE_LIMIT).collect()]
        gone_paths = (
            gone.where(~F.col("path").startswith(ERROR_KEY))
            .groupBy("path")
            .agg(F.max("size").alias("size"))
        )
        only_gone = unreached_only(gone_paths, kept)
        candidates = persist(deletable_only(only_gone))
        expired_reach = gone_paths.count()
        # The count, and the bytes of the node files among them (the walk read those; a
        # definition's size is learnt only when it is deleted), in one query.
        totals = candidates.agg(
            F.count(F.lit(1)), F.sum(F.when(F.col("size") >= 0, F.col("size")))
        ).collect()[0]
        candidate_count, known_candidate_bytes = int(totals[0]), int(totals[1] or 0)
    # Expired versions whose tree (or a part of it) cannot be read still expire: the retained
    # side is complete, so knowing less of the expired side only deletes less. What lies below
    # the unreadable parts stays, and gc removes it once nothing retained reaches it.
    result.difference = ExpiryDifference(
        expired_reach=expired_reach,
        candidates=candidate_count,
        candidate_sample=sample_paths(candidates),
        candidate_node_bytes=known_candidate_bytes,
        walk_problems=capped(tolerated + expired_errors),
        unreadable_subtrees=len(expired_errors),
        unreadable_versions=unreadable_expired(plan, gone_plan),
    )
    if options.dry_run:
        result.end_without_deleting()
        return result

    with job.stage("hint", "point the hint at the latest version (driver)"):
        result.hint = ensure_hint(storage, plan)
    expired_roots = plural(len(plan.expired), "expired root file")
    with job.stage(
        "roots",
        f"delete {len(plan.expired)} expired root files, oldest first (driver)",
        if_interrupted=f"some of the {expired_roots} may be deleted already, oldest first (expired "
        "versions only); run compact-versions again to finish, and gc deletes the files only they reached",
    ):
        check_exports_unchanged(storage, plan)
        result.roots = delete_expired_roots(storage, plan)
    with job.stage(
        "recheck",
        "walk versions committed since the plan (driver)",
        if_interrupted=f"the {expired_roots} are deleted; the files only those versions reached are "
        "orphans now, which gc deletes",
    ):
        rechecked = recheck(storage, plan, membership_in(job, kept), cache, kept_plan.covered)
    files = candidates
    if rechecked.paths:
        rescued = job.spark.createDataFrame(
            [(p,) for p in sorted(rechecked.paths)], schema="path string"
        )
        files = candidates.join(rescued, "path", "left_anti")
    to_delete = files.count() if rechecked.paths else candidate_count
    result.kept_for_new_versions = candidate_count - to_delete
    result.rechecked = rechecked
    deleted = DeleteOutcome()
    if to_delete:
        with job.stage(
            "delete",
            f"delete {to_delete} files only expired versions reached",
            if_interrupted=f"the {expired_roots} are deleted, and some of the {plural(to_delete, 'file')} "
            "only those versions reached may be deleted already; the rest are orphans now, which gc deletes",
        ):
            deleted = delete_frame(job, storage, files, options.delete_batch_size)
    result.files = deleted
    return result


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "compact-versions",
        parser=_parser(),
        options=compact_versions_job_options,
        run=run_compact_versions,
        render=render_compact_versions,
        argv=argv,
        spark=spark,
    )
