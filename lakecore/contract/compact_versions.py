"""compact-versions' command line and report: shared by the Spark job
(``jobs/compact_versions.py``) and ``lakecore compact-versions``.

Both read the same options (``add_compact_versions_arguments``), build the same
``ExpiryOptions``, refuse a ``--now`` ahead of this machine's clock as the command line is read
(``now_is_safe``: spark-submit.sh then refuses before the JVM starts), and write the same report
from an ``ExpiryResult`` (``render_compact_versions``, the only place its report keys are
written).

The report's keys do not depend on ``--dry-run``: a dry run counts and samples what a run would
delete (``files_only_expired_versions_reach``, ``would_delete``, ``would_delete_roots``,
``bytes_to_free_at_least``) as a run does, and its deletes (``files_deleted``, ``bytes_freed``,
``deleted``, ...) are zero and empty; the report's ``dry_run`` says which it was.
"""

from __future__ import annotations

import argparse

from lakecore.contract.job_report import JobReport
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import time_millis
from lakecore.core.locations import root_node_file_name
from lakecore.core.units import format_bytes, format_time_millis, plural
from lakecore.errors import ExitCode, UnsafeOptionError
from lakecore.maintenance.clock import Clocks, machine_clock_millis
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.expire import ExpiryOptions, ExpiryResult, check_options
from lakecore.maintenance.settings import MaintenanceSettings


def add_compact_versions_arguments(parser: OneLineArgumentParser) -> None:
    """``--now``, ``--dry-run`` and ``--i-understand-expiry-risk``, and the check of ``--now``."""
    parser.add_argument(
        "--now",
        default=None,
        metavar="TIME",
        type=time_millis,
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
    parser.add_check(now_is_safe)


def compact_versions_options(
    args: argparse.Namespace, settings: MaintenanceSettings
) -> ExpiryOptions:
    return ExpiryOptions(
        now_millis=args.now,
        dry_run=args.dry_run,
        override_now=args.i_understand_expiry_risk,
        delete_batch_size=settings.gc_delete_batch_size,
    )


def now_is_safe(args: argparse.Namespace) -> str | None:
    """The refusal of a --now in the future for a run that would expire versions, or None.
    Before the run: this machine's clock alone (the run checks the store's too)."""
    if args.now is None or args.dry_run:
        return None
    options = ExpiryOptions(now_millis=args.now, override_now=args.i_understand_expiry_risk)
    try:
        check_options(options, Clocks(machine_clock_millis()))
    except UnsafeOptionError as exc:
        return str(exc)
    return None


def render_compact_versions(result: ExpiryResult, report: JobReport) -> None:
    """``result`` into ``report``: what each step that ran found and did, and once the run has
    ended its summary, its status and, when deletes failed, its error."""
    report.dry_run = result.dry_run
    report.details.update({"now_millis": result.now_millis, "clocks": result.clocks.as_details()})
    clock_note = result.clocks.note(aged=None if result.now_given else "versions")
    if clock_note is not None:
        report.summary.append(clock_note)
    if result.refused_ahead is not None:
        report.summary.append(
            f"{result.refused_ahead}: a run without --dry-run refuses it unless --i-understand-expiry-risk"
        )
    plan = result.plan
    if plan is None:
        return
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
    roots, files = result.roots, result.files
    report.counts["versions_before"] = len(plan.roots)
    # Past retention is the plan; expired is what this run did (a failed run or a dry run
    # expired none, and its summary must not say otherwise).
    report.counts["versions_past_retention"] = len(plan.expired)
    report.counts["expired_versions"] = len(roots.deleted) if roots is not None else 0
    report.counts["root_files_deleted"] = len(roots.deleted) if roots is not None else 0
    report.counts["files_deleted"] = files.deleted if files is not None else 0
    freed = (roots.bytes_freed if roots is not None else 0) + (
        files.bytes_freed if files is not None else 0
    )
    report.bytes["bytes_freed"] = freed if files is not None else 0
    if not plan.expired:
        if files is not None:
            report.status = "noop"
            report.details["noop_reason"] = "no version is past its retention"
            report.summary.append(
                f"nothing to expire at {format_time_millis(result.now_millis)}: "
                f"{plural(len(plan.roots), 'version')} retained"
            )
        return
    if result.retained_subtree_tasks is not None:
        report.counts["retained_subtree_tasks"] = result.retained_subtree_tasks
        report.counts["expired_subtree_tasks"] = result.expired_subtree_tasks
        report.counts["expired_subtrees_shared_with_retained"] = result.expired_subtrees_shared
    found = result.difference
    if found is None:
        return
    if found.walk_problems:
        # Parts of expired versions could not be walked: their files stay, as orphans for gc.
        report.sample("expired_walk_problems", found.walk_problems)
    unreadable = found.unreadable_versions
    report.counts["unreadable_versions_expired"] = len(unreadable)
    report.counts["unreadable_expired_subtrees"] = found.unreadable_subtrees  # capped
    report.details["unreadable_versions_expired"] = unreadable
    report.counts["files_reached_by_expired_versions"] = found.expired_reach
    report.counts["files_only_expired_versions_reach"] = found.candidates
    report.sample("would_delete_roots", [root_node_file_name(v) for v in plan.expired])
    report.sample("would_delete", found.candidate_sample)
    report.bytes["bytes_to_free_at_least"] = result.bytes_to_free_at_least
    if result.hint is not None or roots is not None:
        report.details["hint"] = result.hint
    if roots is not None:
        report.counts["root_files_already_gone"] = len(roots.already_gone)
        report.sample("deleted_roots", [root_node_file_name(v) for v in roots.deleted])
    if result.rechecked is not None:
        report.details["versions_rechecked"] = result.rechecked.versions
        report.counts["files_kept_for_new_versions"] = result.kept_for_new_versions
    if roots is None or files is None or result.rechecked is None:
        return
    report.new_version = result.rechecked.versions[-1] if result.rechecked.versions else None
    report.counts["files_already_gone"] = files.already_gone
    report.bytes["root_bytes_freed"] = roots.bytes_freed
    report.bytes["file_bytes_freed"] = files.bytes_freed
    report.sample("deleted", files.deleted_paths)
    staying = (
        f"{plural(len(plan.retained), 'version')} {'stays' if len(plan.retained) == 1 else 'stay'}"
    )
    parts = (
        [f"{plural(len(unreadable), 'expired version')} ({', '.join(map(str, unreadable))})"]
        if unreadable
        else []
    ) + (
        [plural(found.unreadable_subtrees, "subtree") + " of expired versions"]
        if found.unreadable_subtrees
        else []
    )
    unreadable_note = (
        (
            f"; {' and '.join(parts)} could not be read: only root files go there, and the files below are left "
            "to gc, which removes those no retained version reaches"
        )
        if parts
        else ""
    )
    expired = f"({plan.expired[0]}..{plan.expired[-1]})"
    if result.dry_run:
        report.unprinted |= {
            "bytes_freed",
            "root_bytes_freed",
            "file_bytes_freed",
            "root_files_already_gone",
            "files_already_gone",
            "files_kept_for_new_versions",
        }
        report.summary.append(
            f"would expire {plural(len(plan.expired), 'version')} {expired} and "
            f"delete {plural(found.candidates, 'file')} only they reach, freeing at least "
            f"{format_bytes(result.bytes_to_free_at_least)} (root and node files; definition files' sizes "
            f"are read when they are deleted); {staying}{unreadable_note}"
        )
        return
    report.summary.append(
        f"expired {plural(len(roots.deleted), 'version')} {expired}, deleted "
        f"{plural(files.deleted, 'file')} only they reached, freed {format_bytes(freed)}; "
        f"{staying}{unreadable_note}{_already_gone_note(roots.already_gone, files)}"
    )
    if files.errors or files.refused:
        report.sample("delete_errors", files.errors + files.refused)
        report.status = "failed"
        report.exit_code = ExitCode.FAILURE
        report.error = (
            f"the expired roots are gone, but {len(files.errors)} delete batches failed and "
            f"{len(files.refused)} paths were refused; what is left is orphaned and gc removes "
            f"it. E.g. {(files.errors + files.refused)[0]}"
        )


def _already_gone_note(roots: list[int], files: DeleteOutcome) -> str:
    """What a racing run deleted first: left out of this run's counts, and said so."""
    if not roots and not files.already_gone:
        return ""
    return (
        f"; {plural(len(roots), 'expired root file')} and {plural(files.already_gone, 'other file')} were "
        "already gone (another run deleted them)"
    )
