"""``lakecore gc``, ``lakecore compact-versions`` and ``lakecore table-maintenance``: maintenance
of a small lakehouse in one process.

They run the engine-neutral units the Spark jobs distribute (``gc_in_process``,
``expire_in_process``, ``table_maintenance_in_process``) with the jobs' options, safety checks,
report and exit codes (``lakecore.contract.gc``, ``lakecore.contract.compact_versions``,
``lakecore.contract.table_maintenance``): the grace period and a ``--now``
ahead of the clocks are refused as the command line is read, ``--dry-run`` changes nothing,
``--report PATH`` writes the job's JSON report, and the summary is the job's. Everything is
held in this process's memory (every listed file, every reached path), so these suit a
lakehouse of up to some hundred thousand files; the Spark jobs (``spark-submit.sh gc``,
``spark-submit.sh compact-versions``) are for large ones.

A run that fails (a refusal: damage, an unreadable root) is one line on stderr and its exit
code, as every command's; with ``--report`` the report is written first, status ``failed``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from lakecore.cli.printing import emit, say
from lakecore.cli.shared_options import lakehouse_uri, storage_options_of
from lakecore.contract.compact_versions import (
    add_compact_versions_arguments,
    compact_versions_options,
    render_compact_versions,
)
from lakecore.contract.gc import add_gc_arguments, gc_options, render_gc
from lakecore.contract.job_report import JobReport, print_summary, write_report_or_fail
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import output_file
from lakecore.contract.outputs import Output, OutputKind, check_outputs
from lakecore.contract.table_maintenance import (
    add_table_maintenance_arguments,
    render_table_maintenance,
    table_maintenance_options,
)
from lakecore.core.storage import Storage
from lakecore.errors import LakecoreError
from lakecore.maintenance.damage import with_next_step
from lakecore.maintenance.expire import run_expire_in_process
from lakecore.maintenance.gc import run_gc_in_process
from lakecore.maintenance.settings import load_settings
from lakecore.maintenance.tables.result import TableMaintenanceResult

Result = TypeVar("Result")

SMALL = (
    "in this process, for a small lakehouse (everything it lists is held in memory); "
    "the Spark job, spark-submit.sh {job}, is for large ones"
)


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``gc`` and ``compact-versions`` commands; ``subcommand(sub, name, help, ...)`` makes
    a subparser with the command line's shared options (``--json``)."""
    p = subcommand(
        sub,
        "gc",
        "delete orphan files: the files no retained version or export reaches",
        description="gc: delete the lakecore files no retained version or export reaches, "
        "older than the grace period; " + SMALL.format(job="gc"),
    )
    _common_options(p)
    add_gc_arguments(cast(OneLineArgumentParser, p))
    p.set_defaults(func=cmd_gc)
    p = subcommand(
        sub,
        "compact-versions",
        "expire old versions and delete the files only they reach",
        description="compact-versions: expire the versions past the lakehouse's retention and "
        "delete the files only they reach; " + SMALL.format(job="compact-versions"),
    )
    _common_options(p)
    add_compact_versions_arguments(cast(OneLineArgumentParser, p))
    p.set_defaults(func=cmd_compact_versions)
    p = subcommand(
        sub,
        "table-maintenance",
        "expire Iceberg snapshots, delete what nothing retained names, carry out due purges",
        description="table-maintenance: expire the snapshots of every Iceberg table (or of --namespace) "
        "by its own history.expire.* properties, delete the files no retained version of any table "
        "names (expired, orphans older than the grace period), and the files of purged tables once "
        "no retained version holds them; " + SMALL.format(job="table-maintenance"),
    )
    _common_options(p)
    add_table_maintenance_arguments(cast(OneLineArgumentParser, p))
    p.set_defaults(func=cmd_table_maintenance)


def _common_options(p: argparse.ArgumentParser) -> None:
    """What the jobs take besides their own options, where it applies in one process."""
    p.add_argument(
        "--env",
        default=os.environ.get("LAKECORE_ENV", "local"),
        help="maintenance settings: conf/maintenance-<env>.json, as the jobs read them",
    )
    p.add_argument(
        "--report", type=output_file, metavar="PATH", help="write the job's JSON report here"
    )


def cmd_gc(args: argparse.Namespace) -> int:
    options = gc_options(args, load_settings(args.env))
    return _run(args, "gc", lambda storage: run_gc_in_process(storage, options), render_gc)


def cmd_compact_versions(args: argparse.Namespace) -> int:
    options = compact_versions_options(args, load_settings(args.env))
    return _run(
        args,
        "compact-versions",
        lambda storage: run_expire_in_process(storage, options),
        render_compact_versions,
    )


def cmd_table_maintenance(args: argparse.Namespace) -> int:
    options = table_maintenance_options(args, load_settings(args.env))

    def run(storage: Storage) -> TableMaintenanceResult:
        from lakecore.iceberg.expiry import run_table_maintenance_in_process

        return run_table_maintenance_in_process(storage, options)

    return _run(args, "table-maintenance", run, render_table_maintenance)


def _run(
    args: argparse.Namespace,
    job: str,
    run: Callable[[Storage], Result],
    render: Callable[[Result, JobReport], None],
) -> int:
    """Run, render and print the report as the job does; write it with ``--report``."""
    uri = lakehouse_uri(args)
    if args.report:
        check_outputs([Output("--report", args.report, OutputKind.JSON_REPORT)], uri)
    storage = Storage(uri, storage_options_of(args))
    report = JobReport(job, storage.root_uri)
    started = time.monotonic()
    try:
        render(run(storage), report)
    except LakecoreError as exc:
        if args.report:
            report.status, report.exit_code = "failed", exc.exit_code
            report.error = with_next_step(exc, storage.root_uri)
            report.durations_seconds["total"] = round(time.monotonic() - started, 3)
            write_report_or_fail(report, args.report)
        raise
    report.durations_seconds["total"] = round(time.monotonic() - started, 3)
    if args.report:
        write_report_or_fail(report, args.report)
    if getattr(args, "json", False):
        emit(args, "", report.as_dict())
    else:
        print_summary(report)
    if report.error:  # failed deletes, an unwritable report: after the summary, its one line
        say(f"lakecore: {report.error}", error=True)
    return report.exit_code


__all__ = ["add_commands", "cmd_compact_versions", "cmd_gc", "cmd_table_maintenance"]
