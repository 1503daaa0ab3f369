"""flush: empty write buffers across the tree, with executors flushing subtrees.

    ./spark-submit.sh flush --lakehouse URI [--mode full | --mode threshold --fill 0.5]

The driver plans the flush over the top of the tree and cuts the rest into subtree tasks
(``lakecore.maintenance.flush``); executors flush their subtree and write its new nodes; the
driver assembles the new top, and alone commits the new root.

If another commit lands meanwhile and it only added root-buffer messages, those newer messages
go on top of the flushed tree and the commit is retried; any other change (another flush, a
rollback) means the job redoes its work from the new latest version, a bounded number of times.

The report describes what happened, once: ``base_version`` and the root-message counts are
those of the version the last attempt flushed (a redo's, not the first one's), ``root messages
after`` is the committed root's buffer (with the other commits' messages on top) or, for a
noop, the buffer as found. Node files written by an attempt that was not committed (it lost to
another commit) are in no version: they are counted apart (``node_files_not_committed``, with
a sample) for gc to delete, not left out of the totals.

``--fill`` is checked as the command line is read (its range, and that only ``--mode threshold``
uses it), so spark-submit.sh refuses a bad one before the JVM starts.
"""

from __future__ import annotations

if __package__ in (
    None,
    "",
):  # run as a file (spark-submit jobs/flush.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("flush")

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.arguments import base_parser, checked_option
from jobs.context import JobContext
from jobs.frames import collect_objects, fan_out_objects
from jobs.run import run_untyped_job
from lakecore.cli.argparsing import ArgumentError
from lakecore.cli.job_report import JobReport
from lakecore.commit import RootPlan
from lakecore.errors import CommitConflictError, ExitCode
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.flush import (
    FlushTask,
    FlushTaskResult,
    newer_root_messages,
    only_root_buffer_changed,
    plan_flush,
    policy_from,
    run_flush_task,
)
from lakecore.node import Node
from lakecore.storage import Storage
from lakecore.tree import IOStats, TreeShape, TreeWriter
from lakecore.units import format_bytes, plural
from lakecore.versions import RootInfo


def _parser() -> Any:
    parser = base_parser("flush", __doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["full", "threshold"], default="full")
    parser.add_argument(
        "--fill",
        type=checked_option(parse_fill),
        default=None,
        help="threshold mode: flush the buffers fuller than this share of their room, from 0 to 1 "
        "(0: every buffer that holds a message); default: flush_fill in the settings",
    )
    parser.add_argument(
        "--max-redos",
        type=int,
        default=None,
        help="redo the job this often after a conflicting commit",
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


def _fill_needs_threshold_mode(args: Any) -> str | None:
    if args.fill is not None and args.mode != "threshold":
        return (
            f"--fill applies only to --mode threshold; --mode {args.mode} empties every buffer "
            f"(add --mode threshold, or drop --fill)"
        )
    return None


def _run_tasks(
    ctx: JobContext, storage: Storage, shape: TreeShape, tasks: list[FlushTask]
) -> list[FlushTaskResult]:
    if not tasks:
        return []

    def run_partition(items: list[FlushTask]) -> Any:
        from lakecore.tree import NodeStore

        store = NodeStore(storage, shape.order)
        for task in items:
            yield run_flush_task(storage, shape, task, store)

    results: list[FlushTaskResult] = collect_objects(
        fan_out_objects(ctx.spark, tasks, run_partition, ctx.parallelism)
    )
    return results


def _body(ctx: JobContext) -> None:
    args = ctx.args
    # The command line's --fill was checked as it was read (_parser); the settings' own value
    # was checked when they were loaded.
    fill = parse_fill(args.fill) if args.fill is not None else ctx.settings.flush_fill
    policy = policy_from(args.mode, fill)
    max_redos = args.max_redos if args.max_redos is not None else ctx.settings.flush_max_redos
    report = ctx.report
    lh = Lakehouse.open(ctx.storage.root_uri, storage_options=ctx.storage.storage_options)
    lh.require_writable("flush")  # before executors write new nodes into it
    report.details["mode"] = args.mode
    if args.mode == "threshold":
        report.details["fill"] = fill
    shape = TreeShape.of(lh.lakehouse_def)
    written = IOStats()  # every node file this job wrote, committed or not
    lost = IOStats()  # ... and those no version references: attempts that were not committed
    planned_from: list[int] = []
    for attempt in range(max_redos + 1):
        base = lh.root_info
        # The report describes the version this attempt flushes (a redo starts from a newer
        # one); the versions earlier attempts flushed stay listed.
        report.base_version = base.version
        planned_from.append(base.version)
        report.details["planned_from_versions"] = list(planned_from)
        driver_mark = _mark(lh.store.stats)
        with ctx.stage("plan", f"plan the flush of version {base.version} (driver)"):
            run = plan_flush(lh.store, shape, base.node, policy, ctx.parallelism)
        report.counts["subtree_tasks"] = len(run.tasks)
        # Messages in the subtree roots handed out: their own plus those pushed down from above.
        report.counts["messages_sent_to_subtrees"] = sum(t.messages for t in run.tasks)
        with ctx.stage("flush", f"flush {len(run.tasks)} subtrees of version {base.version}"):
            results = _run_tasks(ctx, ctx.storage, shape, run.tasks)
        with ctx.stage("assemble", "assemble the new top of the tree (driver)"):
            flushed = run.assemble(results)
        this_attempt = _since(
            lh.store.stats, driver_mark
        )  # the driver's store counts across attempts
        for result in results:
            this_attempt.add(result.stats)
        events: dict[str, int] = {}
        for result in results:
            for name, count in result.events.items():
                events[name] = events.get(name, 0) + count
        report.details["tree_events"] = events
        report.counts["redos"] = attempt
        if base.node.same_tree_as(flushed):  # the flush changed nothing
            # Nothing over the threshold, an empty buffer, or another flush got there first: a
            # version that changes nothing would only push real history out of retention.
            written.add(this_attempt)
            lost.add(this_attempt)
            report.status = "noop"
            why = (
                "the root buffer is empty"
                if not base.node.buffer and not run.tasks
                else f"no buffer is fuller than {fill:.0%}"
                if args.mode == "threshold"
                else "no buffer holds messages"
            )
            if attempt:
                why += (
                    f" (redone on version {base.version}, which another commit made while this job "
                    f"flushed version {planned_from[-2]})"
                )
            report.details["noop_reason"] = why
            # The state found: nothing was flushed, so the root buffer is as it was.
            report.counts["root_messages_before"] = report.counts["root_messages_after"] = len(
                base.node.buffer
            )
            report.counts["root_messages_from_later_commits"] = 0
            report.summary.append(
                f"nothing to flush at version {base.version}: {why}; nothing committed"
            )
            _report_writes(report, written, lost)
            return
        rebase = _Rebase()
        try:
            with ctx.stage("commit", "commit the flushed root (driver)"):
                outcome = lh.commit_plan(
                    flushed_root_plan(lh, base, flushed, rebase), flush_still_valid(base)
                )
        except CommitConflictError as exc:
            this_attempt.add(rebase.written)
            this_attempt.add(rebase.superseded)
            written.add(this_attempt)
            lost.add(this_attempt)
            report.details.setdefault("redos", []).append(str(exc))
            if attempt == max_redos:
                report.status = "conflict"
                report.exit_code = ExitCode.CONFLICT
                report.error = f"CommitConflictError: gave up after {attempt + 1} attempts: {exc}"
                _report_writes(report, written, lost)
                return
            lh.refresh()
            continue
        # The commit's own plan may have run more than once (a rebase per commit that landed
        # first); only the last one's node files are in the committed version.
        this_attempt.add(rebase.written)
        this_attempt.add(rebase.superseded)
        written.add(this_attempt)
        lost.add(rebase.superseded)
        report.new_version = outcome.version
        # Rebases inside the commit plus whole redos after a conflicting commit.
        report.counts["commit_retries"] = outcome.conflicts + attempt
        committed_root = outcome.root.node
        report.counts["root_messages_before"] = len(base.node.buffer)
        report.counts["root_messages_after"] = len(committed_root.buffer)
        report.counts["root_messages_from_later_commits"] = rebase.newer_messages
        line = (
            f"{args.mode} flush of version {base.version} ({plural(len(run.tasks), 'subtree')}): root buffer "
            f"{len(base.node.buffer)} -> {len(flushed.buffer)} messages"
        )
        if outcome.version > base.version + 1:
            landed = outcome.version - base.version - 1
            line += (
                f"; {landed} commit{'s' if landed != 1 else ''} landed meanwhile, and "
                f"{rebase.newer_messages} newer root messages went on top: version {outcome.version}'s "
                f"root buffer holds {len(committed_root.buffer)}"
            )
        report.summary.append(line)
        _report_writes(report, written, lost)
        return


@dataclass
class _Rebase:
    """What the commit's plan did, for the report: it runs once per commit attempt, and each
    run after the first rebuilds the root on a newer version (writing nodes if it overflows)."""

    written: IOStats = field(default_factory=IOStats)  # node files of the last run
    superseded: IOStats = field(
        default_factory=IOStats
    )  # node files of earlier runs: in no version
    newer_messages: int = (
        0  # root-buffer messages of the commits that landed first, in the last run
    )


def _mark(stats: IOStats) -> tuple[int, int, int]:
    return stats.files_written, stats.bytes_written, len(stats.written_paths)


def _since(stats: IOStats, mark: tuple[int, int, int]) -> IOStats:
    """The writes counted in ``stats`` after ``mark`` was taken."""
    files, size, paths = mark
    return IOStats(
        files_written=stats.files_written - files,
        bytes_written=stats.bytes_written - size,
        written_paths=stats.written_paths[paths:],
    )


def _report_writes(report: JobReport, written: IOStats, lost: IOStats) -> None:
    """Node files written, and plainly those that no version references: an attempt that lost
    to another commit wrote them, and only gc (after its grace period) removes them."""
    report.counts["node_files_written"] = written.files_written
    report.bytes["node_bytes_written"] = written.bytes_written
    report.counts["node_files_not_committed"] = lost.files_written
    report.bytes["node_bytes_not_committed"] = lost.bytes_written
    committed = set(written.written_paths) - set(lost.written_paths)
    report.sample("written_node_files", [p for p in written.written_paths if p in committed])
    if lost.files_written:
        report.sample("not_committed_node_files", lost.written_paths)
        report.summary.append(
            f"{plural(lost.files_written, 'node file')} ({format_bytes(lost.bytes_written)}) written by attempts that "
            "were not committed are in no version: gc deletes them once they are older than its grace period"
        )


def flushed_root_plan(
    lh: Lakehouse, base: RootInfo, flushed: Node, rebase: _Rebase | None = None
) -> Any:
    """The commit's plan: ``flushed`` on ``base``, or with the root-buffer messages of the
    commits that landed since on top. ``rebase`` collects what each run did, for the report.
    Public for the reliability suites, which commit a flush the way this job does."""
    rebase = rebase if rebase is not None else _Rebase()

    def plan(current: RootInfo) -> RootPlan:
        rebase.superseded.add(rebase.written)  # an earlier run's root did not land
        rebase.written = IOStats()
        rebase.newer_messages = 0
        if current.version == base.version:
            return RootPlan(flushed, current.lakehouse_def_path)
        # Commits landed that only added root-buffer messages: keep them, newer, on top.
        mark = _mark(lh.store.stats)
        writer = TreeWriter(lh.store, TreeShape.of(lh.lakehouse_def), flushed)
        newer = newer_root_messages(base.node, current.node)
        for key, value in newer.items():
            writer.put(key, value)
        node = writer.finish()
        rebase.written = _since(lh.store.stats, mark)
        rebase.newer_messages = len(newer)
        return RootPlan(node, current.lakehouse_def_path)

    return plan


def flush_still_valid(base: RootInfo) -> Any:
    """The commit's check of a newer latest version: only root-buffer messages may have landed."""

    def still_valid(latest: RootInfo) -> str | None:
        if only_root_buffer_changed(base.node, latest.node):
            return None
        return f"version {latest.version} changed the tree below the root buffer; redoing the flush"

    return still_valid


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_untyped_job("flush", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
