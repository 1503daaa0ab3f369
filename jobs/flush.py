"""flush: empty write buffers across the tree, with executors flushing subtrees.

    ./spark-submit.sh flush --lakehouse URI [--mode full | --mode threshold --fill 0.5]

The driver plans the flush over the top of the tree and cuts the rest into subtree tasks
(``lakecore.maintenance.flush``); executors flush their subtree and write its new nodes; the
driver assembles the new top, and alone commits the new root.

If another commit lands meanwhile and it only added root-buffer messages, those newer messages
go on top of the flushed tree and the commit is retried; any other change (another flush, a
rollback) means the job redoes its work from the new latest version, a bounded number of times.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit jobs/flush.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("flush")

import sys
from collections.abc import Sequence
from typing import Any

from jobs.common import EXIT_CONFLICT, JobContext, base_parser, run_job
from jobs.frames import collect_objects, fan_out_objects
from lakecore.argparsing import ArgumentError
from lakecore.commit import RootPlan
from lakecore.errors import CommitConflictError
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
from lakecore.tree import TreeShape, TreeWriter
from lakecore.versions import RootInfo


def _parser() -> Any:
    parser = base_parser("flush", __doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["full", "threshold"], default="full")
    parser.add_argument("--fill", type=float, default=None, help="threshold mode: flush buffers fuller than this (0..1)")
    parser.add_argument("--max-redos", type=int, default=None, help="redo the job this often after a conflicting commit")
    return parser


def _run_tasks(ctx: JobContext, storage: Storage, shape: TreeShape, tasks: list[FlushTask]) -> list[FlushTaskResult]:
    if not tasks:
        return []

    def run_partition(items: list[FlushTask]) -> Any:
        from lakecore.tree import NodeStore

        store = NodeStore(storage, shape.order)
        for task in items:
            yield run_flush_task(storage, shape, task, store)

    results: list[FlushTaskResult] = collect_objects(fan_out_objects(ctx.spark, tasks, run_partition, ctx.parallelism))
    return results


def _body(ctx: JobContext) -> None:
    args = ctx.args
    fill = args.fill if args.fill is not None else ctx.settings.flush_fill
    if not 0.0 <= fill <= 1.0:
        raise ArgumentError(f"--fill {fill} must be between 0 and 1")
    if args.fill is not None and args.mode == "full":
        raise ArgumentError("--fill only applies to --mode threshold")
    policy = policy_from(args.mode, fill)
    max_redos = args.max_redos if args.max_redos is not None else ctx.settings.flush_max_redos
    report = ctx.report
    lh = Lakehouse.open(ctx.storage.root_uri, storage_options=ctx.storage.storage_options)
    lh.require_writable("flush")  # before executors write new nodes into it
    report.base_version = lh.version
    report.details["mode"] = args.mode
    if args.mode == "threshold":
        report.details["fill"] = fill
    shape = TreeShape.of(lh.lakehouse_def)
    for attempt in range(max_redos + 1):
        base = lh.root_info
        with ctx.stage("plan", f"plan the flush of version {base.version} (driver)"):
            run = plan_flush(lh.store, shape, base.node, policy, ctx.parallelism)
        report.counts["subtree_tasks"] = len(run.tasks)
        # Messages in the subtree roots handed out: their own plus those pushed down from above.
        report.counts["messages_sent_to_subtrees"] = sum(t.messages for t in run.tasks)
        with ctx.stage("flush", f"flush {len(run.tasks)} subtrees of version {base.version}"):
            results = _run_tasks(ctx, ctx.storage, shape, run.tasks)
        with ctx.stage("assemble", "assemble the new top of the tree (driver)"):
            flushed = run.assemble(results)
        executor_written = sum(r.stats.files_written for r in results)
        report.counts["node_files_written"] = executor_written + run.writer.stats.files_written
        report.bytes["node_bytes_written"] = sum(r.stats.bytes_written for r in results) + run.writer.stats.bytes_written
        report.counts["root_messages_before"] = len(base.node.buffer)
        report.counts["root_messages_after"] = len(flushed.buffer)
        events: dict[str, int] = {}
        for result in results:
            for name, count in result.events.items():
                events[name] = events.get(name, 0) + count
        report.details["tree_events"] = events
        report.sample("written_node_files", [p for r in results for p in r.stats.written_paths])
        report.counts["redos"] = attempt
        if _unchanged(base.node, flushed):
            # Nothing over the threshold, an empty buffer, or another flush got there first: a
            # version that changes nothing would only push real history out of retention.
            report.status = "noop"
            why = ("the root buffer is empty" if not base.node.buffer and not run.tasks
                   else f"no buffer is fuller than {fill:.0%}" if args.mode == "threshold"
                   else "no buffer holds messages")
            if attempt:
                why += f" (after another commit flushed version {base.version})"
            report.details["noop_reason"] = why
            report.summary.append(f"nothing to flush at version {base.version}: {why}; nothing committed")
            return
        try:
            with ctx.stage("commit", "commit the flushed root (driver)"):
                outcome = lh.commit_plan(_plan(lh, base, flushed), _still_valid(base))
        except CommitConflictError as exc:
            report.details.setdefault("redos", []).append(str(exc))
            if attempt == max_redos:
                report.status = "conflict"
                report.exit_code = EXIT_CONFLICT
                report.error = f"CommitConflictError: gave up after {attempt + 1} attempts: {exc}"
                return
            lh.refresh()
            continue
        report.new_version = outcome.version
        # Rebases inside the commit plus whole redos after a conflicting commit.
        report.counts["commit_retries"] = outcome.conflicts + attempt
        report.summary.append(
            f"{args.mode} flush of {len(run.tasks)} subtrees: {report.counts['node_files_written']} node files "
            f"written, root buffer {len(base.node.buffer)} -> {len(outcome.root.node.buffer)} messages"
        )
        return


def _unchanged(before: Node, after: Node) -> bool:
    """True when the flush changed nothing: the same keys, children and buffer."""
    return (before.keys == after.keys and before.values == after.values and before.children == after.children
            and before.buffer == after.buffer)


def _plan(lh: Lakehouse, base: RootInfo, flushed: Node) -> Any:
    def plan(current: RootInfo) -> RootPlan:
        if current.version == base.version:
            return RootPlan(flushed, current.lakehouse_def_path)
        # Commits landed that only added root-buffer messages: keep them, newer, on top.
        writer = TreeWriter(lh.store, TreeShape.of(lh.lakehouse_def), flushed)
        for key, value in newer_root_messages(base.node, current.node).items():
            writer.put(key, value)
        return RootPlan(writer.finish(), current.lakehouse_def_path)

    return plan


def _still_valid(base: RootInfo) -> Any:
    def still_valid(latest: RootInfo) -> str | None:
        if only_root_buffer_changed(base.node, latest.node):
            return None
        return f"version {latest.version} changed the tree below the root buffer; redoing the flush"

    return still_valid


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_job("flush", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
