"""gc's command line and report: shared by the Spark job (``jobs/gc.py``) and ``lakecore gc``.

Both read the same options (``add_gc_arguments``), build the same ``GcOptions`` from them and
the environment's settings (``gc_options``), refuse an unsafe grace period as the command line
is read (``grace_is_safe``: spark-submit.sh then refuses before the JVM starts), and write the
same report from a ``GcResult`` (``render_gc``, the only place gc's report keys are written).

The report's keys do not depend on ``--dry-run``: ``orphans_to_delete`` and
``orphan_bytes_to_delete`` count what the run chose to delete (a dry run deletes none of it;
the report's ``dry_run`` says which), ``orphans_deleted`` and ``freed_bytes`` what went.
"""

from __future__ import annotations

import argparse

from lakecore.contract.job_report import JobReport
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import duration_millis, time_millis
from lakecore.core.units import format_seconds, plural
from lakecore.errors import ExitCode, LakecoreError, UnsafeOptionError
from lakecore.maintenance.clock import Clocks, check_grace_options, machine_clock_millis
from lakecore.maintenance.gc import GcOptions, GcResult
from lakecore.maintenance.settings import DEFAULT_SETTINGS, MaintenanceSettings, load_settings

# Retained versions listed in the report; beyond this only the count and the range.
VERSIONS_IN_REPORT = 1000


def add_gc_arguments(parser: OneLineArgumentParser) -> None:
    """``--older-than``, ``--now``, ``--dry-run`` and ``--i-understand-grace-risk``, and the
    check of the grace period they give."""
    parser.add_argument(
        "--older-than",
        default=None,
        metavar="DURATION",
        type=duration_millis("duration", plain_unit="s"),
        help="delete only orphans last modified longer ago than this (90s, 15m, 6h, 3d); default: "
        f"gc_older_than in the --env settings (built in: {DEFAULT_SETTINGS.gc_older_than}). Must exceed "
        "the longest commit (at least one hour, or the commit timeout if longer, unless "
        "--i-understand-grace-risk); a plain number is seconds",
    )
    parser.add_argument(
        "--now",
        default=None,
        metavar="TIME",
        type=time_millis,
        help="the time the grace period counts back from: epoch millis or ISO-8601 "
        "(default: the earlier of this machine's clock and the store's)",
    )
    parser.add_argument("--dry-run", action="store_true", help="report the orphans; delete nothing")
    parser.add_argument(
        "--i-understand-grace-risk",
        action="store_true",
        help="allow a grace period under one hour (or under the commit timeout), or a --now more than "
        "5 min ahead of this machine's or the store's clock: files of a commit in flight may be deleted",
    )
    # The grace period's safety needs only the command line and the local settings file, so it
    # is judged as the command line is read: spark-submit.sh then refuses before the JVM starts.
    parser.add_check(grace_is_safe)


def gc_options(args: argparse.Namespace, settings: MaintenanceSettings) -> GcOptions:
    """The options ``add_gc_arguments`` read, the settings filling what they leave out."""
    return GcOptions.from_settings(
        settings,
        older_than_millis=args.older_than,
        now_millis=args.now,
        dry_run=args.dry_run,
        override_grace=args.i_understand_grace_risk,
    )


def grace_is_safe(args: argparse.Namespace) -> str | None:
    """``check_grace``'s refusal of the options given, or None; None too when the settings
    cannot be read (the run then says so itself, with its report). Before the run: this
    machine's clock alone (the run checks the store's too)."""
    try:
        check_grace_options(
            gc_options(args, load_settings(args.env)), Clocks(machine_clock_millis()), job="gc"
        )
    except UnsafeOptionError as exc:
        return str(exc)
    except LakecoreError:
        return None
    return None


def render_gc(result: GcResult, report: JobReport) -> None:
    """``result`` into ``report``: what each stage that ran found, and once the run has ended
    its summary, its status and, when deletes failed, its error."""
    report.dry_run = result.dry_run
    report.details.update(
        {
            "now_millis": result.now_millis,
            "grace_seconds": result.grace_millis / 1000,
            "cutoff_millis": result.cutoff_millis,
            "delete_batch_size": result.delete_batch_size,
            "clocks": result.clocks.as_details(),
        }
    )
    clock_note = result.clocks.note(aged=None if result.now_given else "files")
    if clock_note is not None:
        report.summary.append(clock_note)
    if result.retained is not None:
        versions = result.retained.versions
        report.base_version = result.retained.latest
        report.counts["retained_versions"] = len(versions)
        report.details["retained_versions"] = versions[:VERSIONS_IN_REPORT]
        report.details["retained_version_range"] = [versions[0], versions[-1]]
        report.details["exported_snapshots"] = dict(sorted(result.retained.exports.items()))
    if result.subtree_tasks is not None:
        report.counts["subtree_tasks"] = result.subtree_tasks
        report.counts["subtree_tasks_shared_by_versions"] = result.subtree_tasks_shared
    if result.listing_directories is not None:
        report.details["listing_directories"] = result.listing_directories
    found = result.found
    if found is None:
        return
    report.details["listing"] = result.listing
    report.counts["files_listed"] = found.files_listed
    report.bytes["listed_bytes"] = found.listed_bytes
    if found.unsized:
        # A local listing reads no sizes: reached definitions are left out of listed_bytes,
        # and counted here.
        report.counts["files_listed_unsized"] = found.unsized
    report.details["listed_by_kind"] = dict(sorted(found.listed_by_kind.items()))
    report.counts["foreign_files"] = found.foreign
    report.sample("foreign", found.foreign_sample)
    report.counts["reachable_files"] = found.reachable
    if found.missing:
        # Reachable but not there: a dangling definition (fsck reports it). gc deletes nothing
        # because of it, but says so.
        report.counts["reachable_missing"] = found.missing
        report.sample("reachable_missing", found.missing_sample)
    report.counts["orphans_found"] = found.orphans
    report.bytes["orphan_bytes"] = found.orphan_bytes
    report.counts["skipped_too_young"] = found.too_young
    report.sample("too_young", found.too_young_sample)
    if result.orphans_dataset is not None:
        report.details["orphans_dataset"] = result.orphans_dataset
    if result.rechecked is None:
        return
    report.details["versions_rechecked"] = result.rechecked.versions
    report.counts["recheck_nodes_read"] = result.rechecked.nodes_read
    report.counts["orphans_rescued_by_new_versions"] = result.rescued
    if result.rechecked.versions:
        report.new_version = result.rechecked.versions[-1]
    report.counts["orphans_to_delete"] = result.to_delete
    report.bytes["orphan_bytes_to_delete"] = result.bytes_to_delete
    report.sample("would_delete", result.to_delete_sample)
    deleted = result.deleted
    if deleted is None:
        return
    report.record_deletes(deleted, "orphans")
    versions_retained = report.counts["retained_versions"]
    verb = "would delete" if result.dry_run else "deleted"
    too_young = found.too_young
    report.summary.append(
        f"{plural(versions_retained, 'retained version')}, {plural(found.files_listed, 'file')} listed, "
        f"{found.reachable:,} reachable{f' ({found.missing:,} missing)' if found.missing else ''}, "
        f"{plural(found.orphans, 'orphan')} ({too_young:,} younger than the grace period of "
        f"{format_seconds(result.grace_millis / 1000)}), "
        f"{verb} {result.to_delete if result.dry_run else deleted.deleted:,}"
        f"{f' ({deleted.already_gone} already gone: another run deleted them)' if deleted.already_gone else ''}, "
        f"{plural(found.foreign, 'foreign file')} left alone"
    )
    if found.missing:
        # Damage, though not gc's to repair: its own line, not a count among the others.
        example = (report.samples.get("reachable_missing") or ["?"])[0]
        one = found.missing == 1
        report.summary.append(
            f"{plural(found.missing, 'file')} that retained versions reach {'is' if one else 'are'} missing "
            f"(e.g. {example}); gc deleted nothing because of {'it' if one else 'them'}, but the lakehouse "
            f"is damaged: `lakecore -l {report.lakehouse} fsck --all --deep` names the versions"
        )
    if (
        not result.to_delete
    ):  # a dry run too, as compact-versions says of one with nothing to expire
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
