"""compact-versions: expire old versions (FORMAT.md section 7) and delete the files only they reach.

    ./spark-submit.sh compact-versions --lakehouse URI [--now TIME] [--dry-run]
                                     [--i-understand-expiry-risk]

The rules and the crash-safe order of effects are in ``lakecore.maintenance.expire``; this
entrypoint distributes the heavy part:

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

if __package__ in (
    None,
    "",
):  # run as a file (spark-submit jobs/compact_versions.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("compact-versions")

import sys
from collections.abc import Sequence
from typing import Any

from jobs.arguments import base_parser, checked_option, parse_time_millis
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.run import run_untyped_job
from jobs.spark_units import (
    deletable_only,
    delete_frame,
    membership_in,
    reach_errors,
    reach_frame,
    sample_paths,
    unreached_only,
)
from lakecore.errors import ExitCode, UnsafeOptionError
from lakecore.locations import root_node_file_name
from lakecore.maintenance.clock import Clocks, machine_clock_millis, read_clocks
from lakecore.maintenance.damage import DAMAGED_MARK
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.expire import (
    ExpiryRefusedError,
    check_expiry_now,
    check_exports_unchanged,
    delete_expired_roots,
    ensure_hint,
    plan_expiry,
    plan_reaches,
    recheck,
    refusal_for_damage,
    unreadable_expired,
)
from lakecore.maintenance.listing import ERROR_KEY
from lakecore.maintenance.samples import SAMPLE_LIMIT
from lakecore.tree.store import NodeCache
from lakecore.units import format_bytes, format_time_millis, plural


def _parser() -> Any:
    parser = base_parser("compact-versions", __doc__.splitlines()[0])
    parser.add_argument(
        "--now",
        default=None,
        type=checked_option(parse_time_millis),
        help="the time version ages are measured at: epoch millis or ISO-8601 (default: the earlier "
        "of this machine's clock and the store's; pass a fixed time so that retries decide the same)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="report what would expire; change nothing"
    )
    parser.add_argument(
        "--i-understand-expiry-risk",
        action="store_true",
        help="allow a --now more than 5 min ahead of this machine's or the store's clock: versions "
        "expire before their age, and time travel to them is lost for good (a dry run needs no permission)",
    )
    # Judged as the command line is read: spark-submit.sh refuses before the JVM starts.
    parser.add_check(_now_is_safe)
    return parser


def _now_is_safe(args: Any) -> str | None:
    """The refusal of a --now in the future for a run that would expire versions, or None.
    Before the JVM starts: this machine's clock alone (the job checks the store's too)."""
    if args.now is None or args.dry_run:
        return None
    try:
        check_expiry_now(
            parse_time_millis(args.now),
            Clocks(machine_clock_millis()),
            override=args.i_understand_expiry_risk,
        )
    except UnsafeOptionError as exc:
        return str(exc)
    return None


def _body(ctx: JobContext) -> None:
    cached: list[Any] = []
    try:
        with executor_errors():
            _compact(ctx, cached)
    finally:
        for frame in cached:
            frame.unpersist()


def _compact(ctx: JobContext, cached: list[Any]) -> None:
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    args, report, storage = ctx.args, ctx.report, ctx.storage
    # Versions are aged by their writers' commit timestamps. A driver whose clock runs ahead
    # would see them older than they are, so "now" is the earlier of this machine's clock and
    # the store's, as gc's is (lakecore.maintenance.clock).
    clocks = read_clocks(storage)
    now = parse_time_millis(args.now) if args.now is not None else clocks.now_millis
    allowed = check_expiry_now(now, clocks, override=args.dry_run or args.i_understand_expiry_risk)
    batch_size = ctx.settings.gc_delete_batch_size
    report.dry_run = args.dry_run
    report.details.update({"now_millis": now, "clocks": clocks.as_details()})
    clock_note = clocks.note(aged="versions" if args.now is None else None)
    if clock_note is not None:
        report.summary.append(clock_note)
    if allowed is not None and args.dry_run and not args.i_understand_expiry_risk:
        report.summary.append(
            f"{allowed}: a run without --dry-run refuses it unless --i-understand-expiry-risk"
        )

    with ctx.stage("plan", "read every root and decide which versions expire (driver)"):
        plan = plan_expiry(storage, now)
    definition = plan.lakehouse_def
    report.base_version = plan.latest
    report.details.update(
        {
            "expired_versions": plan.expired,
            "retained_versions": plan.retained,
            "exported_snapshots": dict(sorted(plan.pinned.items())),
            "maximum_version_age_millis": definition.maximum_version_age_millis,
            "minimum_versions_to_keep": definition.minimum_versions_to_keep,
        }
    )
    report.counts["versions_before"] = len(plan.roots)
    # Past retention is the plan; expired is what this run did (a failed run or a dry run
    # expired none, and its summary must not say otherwise).
    report.counts["versions_past_retention"] = len(plan.expired)
    report.counts["expired_versions"] = 0
    report.counts["root_files_deleted"] = 0
    report.counts["files_deleted"] = 0
    report.bytes["bytes_freed"] = 0
    if not plan.expired:
        if not args.dry_run:
            with ctx.stage("hint", "point the hint at the latest version (driver)"):
                ensure_hint(storage, plan)
        report.status = "noop"
        report.details["noop_reason"] = "no version is past its retention"
        report.summary.append(
            f"nothing to expire at {format_time_millis(now)}: {plural(len(plan.roots), 'version')} retained"
        )
        return

    with ctx.stage("cut", "cut the retained and the expired trees (driver)"):
        cache = NodeCache()
        kept_plan, gone_plan, tolerated = plan_reaches(storage, plan, ctx.parallelism, cache)
    report.counts["retained_subtree_tasks"] = len(kept_plan.tasks)
    report.counts["expired_subtree_tasks"] = len(gone_plan.tasks)
    report.counts["expired_subtrees_shared_with_retained"] = gone_plan.skipped_tasks
    with ctx.stage(
        "reach-diff",
        f"walk {len(kept_plan.tasks) + len(gone_plan.tasks)} subtrees; "
        "reach(expired) minus reach(retained + exports)",
    ):
        kept = reach_frame(ctx, storage, kept_plan).persist(
            StorageLevel.MEMORY_AND_DISK
        )  # for the recheck
        gone = reach_frame(ctx, storage, gone_plan).persist(StorageLevel.MEMORY_AND_DISK)
        cached.extend([kept, gone])
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
        candidates = deletable_only(only_gone).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(candidates)
        expired_reach = gone_paths.count()
        # The count, and the bytes of the node files among them (the walk read those; a
        # definition's size is learnt only when it is deleted), in one query.
        totals = candidates.agg(
            F.count(F.lit(1)), F.sum(F.when(F.col("size") >= 0, F.col("size")))
        ).collect()[0]
        candidate_count, known_candidate_bytes = int(totals[0]), int(totals[1] or 0)
    warnings = tolerated + expired_errors
    if warnings:
        # Parts of expired versions could not be walked: their files stay, as orphans for gc.
        report.sample("expired_walk_problems", warnings)
    # Expired versions whose tree (or a part of it) cannot be read still expire: the retained
    # side is complete, so knowing less of the expired side only deletes less. What lies below
    # the unreadable parts stays, and gc removes it once nothing retained reaches it.
    unreadable = unreadable_expired(plan, gone_plan)
    report.counts["unreadable_versions_expired"] = len(unreadable)
    report.counts["unreadable_expired_subtrees"] = len(expired_errors)  # capped at the sample limit
    report.details["unreadable_versions_expired"] = unreadable
    parts = (
        [f"{plural(len(unreadable), 'expired version')} ({', '.join(map(str, unreadable))})"]
        if unreadable
        else []
    ) + (
        [plural(len(expired_errors), "subtree") + " of expired versions"] if expired_errors else []
    )
    unreadable_note = (
        (
            f"; {' and '.join(parts)} could not be read: only root files go there, and the files below are left "
            "to gc, which removes those no retained version reaches"
        )
        if parts
        else ""
    )
    report.counts["files_reached_by_expired_versions"] = expired_reach
    report.counts["files_only_expired_versions_reach"] = candidate_count
    staying = (
        f"{plural(len(plan.retained), 'version')} {'stays' if len(plan.retained) == 1 else 'stay'}"
    )
    report.sample("would_delete_roots", [root_node_file_name(v) for v in plan.expired])
    report.sample("would_delete", sample_paths(candidates))
    if args.dry_run:
        # What the run would free, as far as a dry run knows: the roots' and the node files'
        # sizes, not the definitions' (a dry run reads no file it does not need).
        del report.bytes["bytes_freed"]
        report.bytes["would_free_at_least"] = known_candidate_bytes + sum(
            plan.roots[v].info.size for v in plan.expired if v in plan.roots
        )
        report.summary.append(
            f"would expire {plural(len(plan.expired), 'version')} ({plan.expired[0]}..{plan.expired[-1]}) and "
            f"delete {plural(candidate_count, 'file')} only they reach, freeing at least "
            f"{format_bytes(report.bytes['would_free_at_least'])} (root and node files; definition files' sizes "
            f"are read when they are deleted); {staying}{unreadable_note}"
        )
        return

    with ctx.stage("hint", "point the hint at the latest version (driver)"):
        report.details["hint"] = ensure_hint(storage, plan)
    expired_roots = plural(len(plan.expired), "expired root file")
    with ctx.stage(
        "roots",
        f"delete {len(plan.expired)} expired root files, oldest first (driver)",
        if_interrupted=f"some of the {expired_roots} may be deleted already, oldest first (expired "
        "versions only); run compact-versions again to finish, and gc deletes the files only they reached",
    ):
        check_exports_unchanged(storage, plan)
        roots = delete_expired_roots(storage, plan)
    report.counts["root_files_deleted"] = len(roots.deleted)
    report.counts["expired_versions"] = len(roots.deleted)
    # Expired, but deleted by another run racing this one: not this run's to count.
    report.counts["root_files_already_gone"] = len(roots.already_gone)
    report.sample("deleted_roots", [root_node_file_name(v) for v in roots.deleted])
    with ctx.stage(
        "recheck",
        "walk versions committed since the plan (driver)",
        if_interrupted=f"the {expired_roots} are deleted; the files only those versions reached are "
        "orphans now, which gc deletes",
    ):
        rechecked = recheck(storage, plan, membership_in(ctx, kept), cache, kept_plan.covered)
    report.details["versions_rechecked"] = rechecked.versions
    files = candidates
    if rechecked.paths:
        rescued = ctx.spark.createDataFrame(
            [(p,) for p in sorted(rechecked.paths)], schema="path string"
        )
        files = candidates.join(rescued, "path", "left_anti")
    to_delete = files.count() if rechecked.paths else candidate_count
    report.counts["files_kept_for_new_versions"] = candidate_count - to_delete
    deleted = DeleteOutcome()
    if to_delete:
        with ctx.stage(
            "delete",
            f"delete {to_delete} files only expired versions reached",
            if_interrupted=f"the {expired_roots} are deleted, and some of the {plural(to_delete, 'file')} "
            "only those versions reached may be deleted already; the rest are orphans now, which gc deletes",
        ):
            deleted = delete_frame(ctx, storage, files, batch_size)
    report.new_version = rechecked.versions[-1] if rechecked.versions else None
    report.counts["files_deleted"] = deleted.deleted
    report.counts["files_already_gone"] = deleted.already_gone
    report.bytes["root_bytes_freed"] = roots.bytes_freed
    report.bytes["file_bytes_freed"] = deleted.bytes_freed
    report.bytes["bytes_freed"] = roots.bytes_freed + deleted.bytes_freed
    report.sample("deleted", deleted.deleted_paths)
    report.summary.append(
        f"expired {plural(len(roots.deleted), 'version')} ({plan.expired[0]}..{plan.expired[-1]}), deleted "
        f"{plural(deleted.deleted, 'file')} only they reached, freed {format_bytes(report.bytes['bytes_freed'])}; "
        f"{staying}{unreadable_note}{_already_gone_note(roots.already_gone, deleted)}"
    )
    if deleted.errors or deleted.refused:
        report.sample("delete_errors", deleted.errors + deleted.refused)
        report.status = "failed"
        report.exit_code = ExitCode.FAILURE
        report.error = (
            f"the expired roots are gone, but {len(deleted.errors)} delete batches failed and "
            f"{len(deleted.refused)} paths were refused; what is left is orphaned and gc removes "
            f"it. E.g. {(deleted.errors + deleted.refused)[0]}"
        )


def _already_gone_note(roots: list[int], files: DeleteOutcome) -> str:
    """What a racing run deleted first: left out of this run's counts, and said so."""
    if not roots and not files.already_gone:
        return ""
    return (
        f"; {plural(len(roots), 'expired root file')} and {plural(files.already_gone, 'other file')} were "
        "already gone (another run deleted them)"
    )


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_untyped_job("compact-versions", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
