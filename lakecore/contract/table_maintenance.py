"""table-maintenance's command line and report: shared by the Spark job
(``jobs/table_maintenance.py``) and ``lakecore table-maintenance``.

Both read the same options (``add_table_maintenance_arguments``), build the same
``TableMaintenanceOptions`` from them and the environment's settings, refuse an unsafe grace
period as the command line is read (``grace_is_safe``: spark-submit.sh then refuses before the
JVM starts), and write the same report from a ``TableMaintenanceResult``
(``render_table_maintenance``, the only place its report keys are written).

The report's keys do not depend on ``--dry-run``: ``files_to_delete`` and ``bytes_to_delete``
count what the run chose (a dry run deletes none of it; ``dry_run`` says which), and
``files_deleted``/``freed_bytes`` what went. A run whose reach met an unreadable file fails
(exit 6 when the file is damaged or missing, 4 when a read failed) after the deletes that
stayed safe, naming the file.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakecore.contract.job_report import JobReport
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import duration_millis, time_millis
from lakecore.core.units import format_bytes, format_seconds, plural
from lakecore.errors import ExitCode, LakecoreError, UnsafeOptionError
from lakecore.maintenance.clock import Clocks, machine_clock_millis
from lakecore.maintenance.samples import capped
from lakecore.maintenance.settings import DEFAULT_SETTINGS, MaintenanceSettings, load_settings
from lakecore.maintenance.tables.commits import REPLANNED, SKIPPED, UNCHANGED
from lakecore.maintenance.tables.result import (
    TableMaintenanceOptions,
    TableMaintenanceResult,
    check_options,
)

# Retained versions and purge marks listed in the report; beyond this only counts.
LISTED_IN_REPORT = 1000


def add_table_maintenance_arguments(parser: OneLineArgumentParser) -> None:
    """The job's own options, and the check of the grace period they give."""
    parser.add_argument(
        "--namespace",
        default=None,
        metavar="NS",
        help="maintain the tables of this namespace and of the namespaces inside it (a.b: b in a); "
        "default every table. What is kept is judged over the whole lakehouse all the same",
    )
    parser.add_argument(
        "--older-than",
        default=None,
        metavar="DURATION",
        type=duration_millis("duration", plain_unit="s"),
        help="the grace period: delete only orphan files last modified longer ago than this (90s, "
        "15m, 6h, 3d); default table_orphan_older_than in the --env settings (built in: "
        f"{DEFAULT_SETTINGS.table_orphan_older_than}). At least one hour, or the commit timeout if "
        "longer, unless --i-understand-grace-risk; a plain number is seconds",
    )
    parser.add_argument(
        "--now",
        default=None,
        metavar="TIME",
        type=time_millis,
        help="the time snapshot ages, retention and the grace period count from: epoch millis or "
        "ISO-8601 (default: the earlier of this machine's clock and the store's)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="report what would expire and be deleted; commit and delete nothing",
    )
    parser.add_argument(
        "--skip-expiry",
        action="store_true",
        help="expire no snapshot (orphan files and due purges only)",
    )
    parser.add_argument(
        "--skip-orphans",
        action="store_true",
        help="list no table folder for orphan files (expiry and due purges only)",
    )
    parser.add_argument(
        "--i-understand-grace-risk",
        action="store_true",
        help="allow a grace period under one hour (or under the commit timeout), or a --now more than "
        "5 min ahead of this machine's or the store's clock: files of a write in flight may be deleted",
    )
    parser.add_check(grace_is_safe)


def table_maintenance_options(
    args: argparse.Namespace, settings: MaintenanceSettings
) -> TableMaintenanceOptions:
    """The options ``add_table_maintenance_arguments`` read, the settings filling the rest."""
    return TableMaintenanceOptions.from_settings(
        settings,
        older_than_millis=args.older_than,
        now_millis=args.now,
        dry_run=args.dry_run,
        override_grace=args.i_understand_grace_risk,
        namespace=args.namespace,
        expire=not args.skip_expiry,
        orphans=not args.skip_orphans,
    )


def grace_is_safe(args: argparse.Namespace) -> str | None:
    """The refusal of an unsafe grace period or --now, or None (also when the settings cannot
    be read: the run says so itself). Before the run: this machine's clock alone."""
    try:
        check_options(
            table_maintenance_options(args, load_settings(args.env)),
            Clocks(machine_clock_millis()),
        )
    except UnsafeOptionError as exc:
        return str(exc)
    except LakecoreError:
        return None
    return None


def render_table_maintenance(result: TableMaintenanceResult, report: JobReport) -> None:
    """``result`` into ``report``: what each stage that ran found and did; once the run has
    ended, its summary, its status and, when something could not be read or deleted, its
    error."""
    report.dry_run = result.dry_run
    report.details.update(
        {
            "now_millis": result.now_millis,
            "grace_seconds": result.grace_millis / 1000,
            "cutoff_millis": result.cutoff_millis,
            "namespace": result.namespace,
            "expiry_defaults": result.defaults.as_details(),
            "commit_batch_tables": result.commit_batch_tables,
            "delete_batch_size": result.delete_batch_size,
            "expire": result.expire,
            "orphans": result.orphans_enabled,
            "clocks": result.clocks.as_details(),
            "warehouse": result.warehouse,
        }
    )
    clock_note = result.clocks.note(aged=None if result.now_given else "snapshots and files")
    if clock_note is not None:
        report.summary.append(clock_note)
    if result.noop_reason is not None:
        report.status = "noop"
        report.details["noop_reason"] = result.noop_reason
        return
    if result.retained_versions is None:
        return
    versions = result.retained_versions
    report.base_version = versions[-1] if versions else None
    report.counts["retained_versions"] = len(versions)
    report.details["retained_versions"] = versions[-LISTED_IN_REPORT:]
    if result.retained_after is not None:
        report.details["retained_versions_after"] = result.retained_after[-LISTED_IN_REPORT:]
    if result.tables_in_scope is None:
        return  # stopped before the tables were read
    report.counts["tables_in_scope"] = result.tables_in_scope
    report.counts["iceberg_tables"] = result.iceberg_tables
    report.details["tables_left_alone"] = {
        reason: capped(sorted(names)) for reason, names in sorted(result.skipped.items())
    }
    report.counts["tables_left_alone"] = sum(len(n) for n in result.skipped.values())
    report.counts["tables_to_expire"] = len(result.planned)
    landed = [a for a in result.answers if a.landed]
    report.counts["tables_expired"] = len(landed) if not result.dry_run else 0
    report.counts["tables_replanned"] = sum(1 for a in result.answers if a.state == REPLANNED)
    report.counts["tables_changed_meanwhile"] = sum(
        1 for a in result.answers if a.state in (SKIPPED, UNCHANGED)
    )
    report.sample(
        "tables_changed_meanwhile",
        [f"{a.name}: {a.reason}" for a in result.answers if a.state in (SKIPPED, UNCHANGED)],
    )
    report.counts["snapshots_expired"] = result.snapshots_expired
    report.counts["refs_expired"] = result.refs_expired
    report.sample(
        "expired_tables",
        [f"{p.name}: {len(p.expiry.snapshot_ids)} snapshots" for p in result.planned]
        if result.dry_run
        else [f"{a.name}: {len(a.expiry.snapshot_ids)} snapshots" for a in landed],
    )
    report.counts["lakehouse_versions_committed"] = len(result.versions_committed)
    report.details["versions_committed"] = result.versions_committed
    if result.versions_committed:
        report.new_version = result.versions_committed[-1]
    for key, value in sorted(result.reads.items()):
        report.counts[key] = value
    if result.reachable_files is not None:
        report.counts["reachable_files"] = result.reachable_files
    report.counts["purge_marks"] = len(result.marks)
    report.counts["purge_marks_due"] = len(result.marks_due)
    report.counts["purge_marks_finished"] = len(result.marks_finished)
    report.details["purge_marks"] = [m.as_details() for m in result.marks[:LISTED_IN_REPORT]]
    if result.marks_version is not None:
        report.new_version = result.marks_version
    blocked = result.blocked
    report.counts["unreadable_files"] = len(blocked.problems)
    report.sample("unreadable", [p.line() for p in blocked.problems])
    report.counts["blocked_tables"] = len(blocked.tables)
    report.details["blocked"] = {
        "tables": capped(sorted(blocked.tables)),
        "folders": capped(sorted(blocked.folders)),
        "everything": blocked.everything,
    }
    report.counts["expired_files"] = result.expired_files
    report.counts["expired_files_still_named"] = result.expired_kept
    report.counts["expired_files_not_ours"] = result.expired_refused
    if result.listing is not None:
        report.details["listing"] = result.listing
        report.counts["files_listed"] = result.files_listed or 0
        report.counts["orphans_found"] = result.orphans_found
        report.bytes["orphan_bytes"] = result.orphan_bytes
        report.counts["skipped_too_young"] = result.too_young
        report.sample("too_young", result.too_young_sample)
    report.counts["files_refused"] = result.expired_refused + result.orphans_refused
    report.sample("refused", result.refused_sample)
    report.counts["files_to_delete"] = result.to_delete
    report.bytes["bytes_to_delete"] = result.bytes_to_delete
    report.sample("would_delete", result.to_delete_sample)
    deleted = result.deleted
    if deleted is None:
        return
    report.record_deletes(deleted, "files")
    if result.dry_run:
        report.unprinted.update({"files_deleted", "files_already_gone", "freed_bytes"})
    _summarize(result, report)
    _judge(result, report)


def _summarize(result: TableMaintenanceResult, report: JobReport) -> None:
    verb_expire = "would expire" if result.dry_run else "expired"
    verb_delete = "would delete" if result.dry_run else "deleted"
    deleted = result.deleted
    assert deleted is not None
    tables = len(result.planned) if result.dry_run else sum(1 for a in result.answers if a.landed)
    versions = len(result.versions_committed)
    report.summary.append(
        f"{plural(report.counts.get('iceberg_tables', 0), 'Iceberg table')} in scope, "
        f"{plural(len(result.retained_versions or []), 'retained version')}: {verb_expire} "
        f"{plural(result.snapshots_expired, 'snapshot')} and {plural(result.refs_expired, 'ref')} in "
        f"{plural(tables, 'table')}"
        + (f" ({plural(versions, 'lakehouse version')})" if versions else "")
    )
    listed = (
        f"{plural(result.files_listed or 0, 'file')} listed, {plural(result.orphans_found, 'orphan')} "
        f"({result.too_young:,} younger than the grace period of "
        f"{format_seconds(result.grace_millis / 1000)}), "
        if result.listing is not None
        else ""
    )
    count = result.to_delete if result.dry_run else deleted.deleted
    size = result.bytes_to_delete if result.dry_run else deleted.bytes_freed
    report.summary.append(
        f"{listed}{plural(result.expired_files, 'file')} named by expired snapshots or purged tables "
        f"({result.expired_kept:,} still named by retained versions): {verb_delete} {plural(count, 'file')}"
        + (
            f" ({format_bytes(size)}"
            + (
                f"; {result.unsized_to_delete:,} of unrecorded size"
                if result.unsized_to_delete
                else ""
            )
            + ")"
            if count
            else ""
        )
        + (
            f" ({deleted.already_gone} already gone: another run deleted them)"
            if deleted.already_gone
            else ""
        )
    )
    if result.marks:
        report.summary.append(
            f"{plural(len(result.marks), 'purge mark')}: {len(result.marks_due)} due"
            + (f", {len(result.marks_finished)} finished" if not result.dry_run else "")
            + f", {len(result.marks) - len(result.marks_due)} waiting for their table to leave retention"
        )


def _judge(result: TableMaintenanceResult, report: JobReport) -> None:
    deleted = result.deleted
    assert deleted is not None
    changed = bool(result.versions_committed or result.marks_version is not None)
    if result.dry_run:
        changed = bool(result.planned or result.marks_due)
    if not changed and not result.to_delete and not result.blocked.problems:
        report.status = "noop"
        report.details["noop_reason"] = _noop_reason(result)
    blocked = result.blocked
    if blocked.problems:
        first = blocked.problems[0]
        damaged = blocked.damaged
        report.status = "failed"
        report.exit_code = ExitCode.DAMAGED if damaged else ExitCode.FAILURE
        scope = (
            f"nothing was deleted ({blocked.everything})"
            if blocked.everything
            else f"nothing was deleted in the folders of {plural(len(blocked.tables), 'table')} "
            f"({', '.join(sorted(blocked.tables)[:3])}{', ...' if len(blocked.tables) > 3 else ''})"
        )
        report.error = (
            f"{plural(len(blocked.problems), 'file')} could not be read, e.g. {first.line()}; {scope}; "
            + (
                "restore the file (or drop the table: a drop reads no metadata) and run again"
                if damaged
                else "run again (a read failed)"
            )
        )
        return
    if deleted.refused or deleted.errors:
        report.sample("delete_refused", deleted.refused)
        report.sample("delete_errors", deleted.errors)
        report.status = "failed"
        report.exit_code = ExitCode.FAILURE
        report.error = (
            f"{len(deleted.errors)} delete batches failed and {len(deleted.refused)} paths were "
            f"refused; {deleted.deleted} files were deleted. E.g. {(deleted.errors + deleted.refused)[0]}"
        )


def _noop_reason(result: TableMaintenanceResult) -> str:
    parts: list[str] = []
    if result.expire:
        parts.append("no snapshot is past its table's retention")
    if result.too_young:
        parts.append(f"{plural(result.too_young, 'orphan')} younger than the grace period")
    elif result.orphans_enabled:
        parts.append("no orphan file")
    if result.marks and not result.marks_due:
        parts.append("no purge is due")
    if result.expired_kept and not result.to_delete:
        parts.append(
            f"{plural(result.expired_kept, 'expired file')} still named by retained versions"
        )
    return "; ".join(parts) or "nothing to do"


def as_json(result: TableMaintenanceResult) -> dict[str, Any]:
    """The report as the job writes it (for callers that want the dict without a job)."""
    report = JobReport("table-maintenance", "")
    render_table_maintenance(result, report)
    return report.as_dict()


__all__ = [
    "add_table_maintenance_arguments",
    "as_json",
    "grace_is_safe",
    "render_table_maintenance",
    "table_maintenance_options",
]
