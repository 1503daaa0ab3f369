"""flush: empty write buffers across the tree, with executors flushing subtrees.

    ./spark-submit.sh flush --lakehouse URI [--mode full | --mode threshold --fill 0.5]

The driver plans the flush over the top of the tree and cuts the rest into subtree tasks
(``lakecore.maintenance.flush``); executors flush their subtree and write its new nodes; the
driver assembles the new top, and alone commits the new root.

If another commit lands meanwhile and it only added root-buffer messages, those newer messages
go on top of the flushed tree and the commit is retried; any other change (another flush, a
rollback) means the job redoes its work from the new latest version, a bounded number of times.

The flush and its commit are ``lakecore.lakehouse.flush.flush_lakehouse``; this job hands it
the executors for the subtree tasks. The report describes what happened, once: ``base_version``
and the root-message counts are those of the version the last attempt flushed (a redo's, not
the first one's), ``root messages after`` is the committed root's buffer (with the other
commits' messages on top) or, for a noop, the buffer as found. Node files written by an attempt
that was not committed (it lost to another commit) are in no version: they are counted apart
(``node_files_not_committed``, with a sample) for gc to delete, not left out of the totals.

``--fill`` is checked as the command line is read (its range, and that only ``--mode threshold``
uses it), so spark-submit.sh refuses a bad one before the JVM starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from jobs.command_line import JobOptions, base_parser, checked_option
from jobs.context import JobContext
from jobs.frames import collect_objects, fan_out_objects
from jobs.run import run_job
from lakecore.contract.job_report import JobReport
from lakecore.contract.one_line_parser import ArgumentError, OneLineArgumentParser
from lakecore.contract.option_types import whole_number
from lakecore.core.tree import TreeShape
from lakecore.core.units import format_bytes, plural
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.flush import flush_lakehouse
from lakecore.maintenance.flush import (
    FlushOptions,
    FlushResult,
    FlushTask,
    FlushTaskResult,
    run_flush_task,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _parser() -> OneLineArgumentParser:
    parser = base_parser("flush", __doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["full", "threshold"], default="full")
    parser.add_argument(
        "--fill",
        type=checked_option(parse_fill),
        default=None,
        help="threshold mode: flush the buffers fuller than this share of their room, from 0 to 1 "
        "(0: every buffer that holds a message); default: flush_fill in the --env settings",
    )
    parser.add_argument(
        "--max-redos",
        type=whole_number(0),
        default=None,
        help="redo the job this often after a conflicting commit (default: flush_max_redos in "
        "the --env settings)",
    )
    # Checked as the command line is read, like --fill's range: spark-submit.sh's parse-only run
    # then refuses it in one line before the JVM starts, not after a second of Spark startup.
    parser.add_check(_fill_needs_threshold_mode)
    return parser


def parse_fill(text: str) -> float:
    """``--fill``: a share of a buffer's room, from 0 to 1."""
    try:
        fill = float(text)
    except ValueError:
        raise ArgumentError(
            f"{text!r} is not a number from 0 to 1 (a share of a buffer's room)"
        ) from None
    if not 0.0 <= fill <= 1.0:  # also refuses nan
        raise ArgumentError(
            f"{text} is outside 0..1 (a share of a buffer's room: 0.5 is half full)"
        )
    return fill


def _fill_needs_threshold_mode(args: argparse.Namespace) -> str | None:
    if args.fill is not None and args.mode != "threshold":
        return (
            f"--fill applies only to --mode threshold; --mode {args.mode} empties every buffer "
            f"(add --mode threshold, or drop --fill)"
        )
    return None


def flush_options(args: argparse.Namespace, common: JobOptions) -> FlushOptions:
    """The command line's, the settings filling what it leaves out (their own values were
    checked when they were loaded)."""
    settings = common.settings
    return FlushOptions(
        mode=args.mode,
        fill=args.fill if args.fill is not None else settings.flush_fill,
        max_redos=args.max_redos if args.max_redos is not None else settings.flush_max_redos,
    )


def run_flush(options: FlushOptions, job: JobContext) -> FlushResult:
    """``flush_lakehouse`` with the subtree tasks on executors."""
    storage = job.storage
    lh = Lakehouse.open(storage.root_uri, storage_options=storage.storage_options)
    lh.require_writable("flush")  # before executors write new nodes into it
    shape = TreeShape.of(lh.lakehouse_def)

    def run_tasks(tasks: list[FlushTask]) -> list[FlushTaskResult]:
        def run_partition(items: list[FlushTask]) -> Iterator[FlushTaskResult]:
            from lakecore.core.tree import NodeStore

            store = NodeStore(storage, shape.order)
            for task in items:
                yield run_flush_task(storage, shape, task, store)

        results: list[FlushTaskResult] = collect_objects(
            fan_out_objects(job.spark, tasks, run_partition, job.parallelism)
        )
        return results

    return flush_lakehouse(
        lh,
        job.track(FlushResult(options)),
        target_tasks=job.parallelism,
        run_tasks=run_tasks,
        stage=job.stage,
    )


def render_flush(result: FlushResult, report: JobReport) -> None:
    """``result`` into ``report``: the only place flush's report keys are written."""
    options = result.options
    report.details["mode"] = options.mode
    if options.mode == "threshold":
        report.details["fill"] = options.fill
    if result.planned_from:
        # The version the last attempt flushed; the versions earlier attempts flushed are listed.
        report.base_version = result.base_version
        report.details["planned_from_versions"] = list(result.planned_from)
    if result.subtree_tasks is not None:
        report.counts["subtree_tasks"] = result.subtree_tasks
        report.counts["messages_sent_to_subtrees"] = result.messages_sent
    if result.tree_events is not None:
        report.details["tree_events"] = result.tree_events
        report.counts["redos"] = result.redos
    if result.conflicts:
        report.details["redos"] = list(result.conflicts)
    if result.ended is None:
        return
    if result.ended == "noop":
        report.status = "noop"
        report.details["noop_reason"] = result.noop_reason
        report.counts["root_messages_before"] = result.root_messages_before
        report.counts["root_messages_after"] = result.root_messages_after
        report.counts["root_messages_from_later_commits"] = 0
        report.summary.append(
            f"nothing to flush at version {result.base_version}: {result.noop_reason}; nothing committed"
        )
    elif result.ended == "conflict":
        report.status = "conflict"
        report.exit_code = ExitCode.CONFLICT
        report.error = (
            f"CommitConflictError: gave up after {len(result.planned_from)} attempts: "
            f"{result.conflicts[-1]}"
        )
    else:
        assert result.new_version is not None and result.base_version is not None
        base, committed = result.base_version, result.new_version
        report.new_version = committed
        report.counts["commit_retries"] = result.commit_retries
        report.counts["root_messages_before"] = result.root_messages_before
        report.counts["root_messages_after"] = result.root_messages_after
        report.counts["root_messages_from_later_commits"] = result.root_messages_from_later_commits
        line = (
            f"{options.mode} flush of version {base} ({plural(result.subtree_tasks or 0, 'subtree')}): "
            f"root buffer {result.root_messages_before} -> {result.root_messages_flushed} messages"
        )
        if committed > base + 1:
            landed = committed - base - 1
            line += (
                f"; {landed} commit{'s' if landed != 1 else ''} landed meanwhile, and "
                f"{result.root_messages_from_later_commits} newer root messages went on top: "
                f"version {committed}'s root buffer holds {result.root_messages_after}"
            )
        report.summary.append(line)
    # Node files written, and plainly those that no version references: an attempt that lost
    # to another commit wrote them, and only gc (after its grace period) removes them.
    written, lost = result.written, result.not_committed
    report.counts["node_files_written"] = written.files_written
    report.bytes["node_bytes_written"] = written.bytes_written
    report.counts["node_files_not_committed"] = lost.files_written
    report.bytes["node_bytes_not_committed"] = lost.bytes_written
    committed_paths = set(written.written_paths) - set(lost.written_paths)
    report.sample("written_node_files", [p for p in written.written_paths if p in committed_paths])
    if lost.files_written:
        report.sample("not_committed_node_files", lost.written_paths)
        report.summary.append(
            f"{plural(lost.files_written, 'node file')} ({format_bytes(lost.bytes_written)}) written by attempts that "
            "were not committed are in no version: gc deletes them once they are older than its grace period"
        )


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "flush",
        parser=_parser(),
        options=flush_options,
        run=run_flush,
        render=render_flush,
        argv=argv,
        spark=spark,
    )
