"""Flushing a lakehouse: empty its write buffers and commit the flushed tree as a new version.

The tree is flushed in three steps (``lakecore.maintenance.flush``): the driver plans over the
top of the tree, the subtree tasks run here or on Spark executors (``run_tasks``: the flush job
hands its own), and the driver assembles the new top and alone commits the new root.

Rules:
- If another commit lands meanwhile and it only added root-buffer messages, those newer messages
  go on top of the flushed tree and the commit is retried (``flushed_root_plan``,
  ``flush_still_valid``); any other change (another flush, a rollback) means the flush is
  redone from the new latest version, at most ``FlushOptions.max_redos`` times.
- A flush that changes nothing commits nothing: a version that changes nothing would only push
  real history out of retention.
- What every attempt wrote is counted (``FlushResult``): node files of an attempt that was not
  committed are in no version, and only gc (after its grace period) removes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from lakecore.core.commit import RootPlan
from lakecore.core.node import Node
from lakecore.core.tree import IOStats, TreeShape, TreeWriter
from lakecore.core.versions import RootInfo
from lakecore.errors import CommitConflictError
from lakecore.lakehouse.lakehouse import Lakehouse
from lakecore.maintenance.flush import (
    FlushResult,
    FlushTask,
    FlushTaskResult,
    newer_root_messages,
    only_root_buffer_changed,
    plan_flush,
    run_flush_task,
)

RunTasks = Callable[[list[FlushTask]], list[FlushTaskResult]]
# A stage of the flush: its name and what it does (the Spark job times them and shows them).
Stage = Callable[[str, str], AbstractContextManager[None]]


def flush_lakehouse(
    lh: Lakehouse,
    result: FlushResult,
    *,
    target_tasks: int = 8,
    run_tasks: RunTasks | None = None,
    stage: Stage | None = None,
) -> FlushResult:
    """Flush ``lh`` with ``result.options``, filling ``result`` as it goes (a caller that keeps
    it can report a flush stopped part-way), and return it."""
    options = result.options
    stage = stage or _no_stage
    lh.require_writable("flush")  # before the tasks write new nodes into it
    shape = TreeShape.of(lh.lakehouse_def)
    for attempt in range(options.max_redos + 1):
        base = lh.root_info
        # An attempt flushes the latest version (a redo starts from a newer one).
        result.planned_from.append(base.version)
        driver_mark = _mark(lh.store.stats)
        with stage("plan", f"plan the flush of version {base.version} (driver)"):
            run = plan_flush(lh.store, shape, base.node, options.policy, target_tasks)
        result.subtree_tasks = len(run.tasks)
        # Messages in the subtree roots handed out: their own plus those pushed down from above.
        result.messages_sent = sum(t.messages for t in run.tasks)
        with stage("flush", f"flush {len(run.tasks)} subtrees of version {base.version}"):
            if not run.tasks:
                results = []
            elif run_tasks is not None:
                results = run_tasks(run.tasks)
            else:
                results = [run_flush_task(lh.storage, shape, task, lh.store) for task in run.tasks]
        with stage("assemble", "assemble the new top of the tree (driver)"):
            flushed = run.assemble(results)
        # The driver's store counts across attempts: this attempt's writes are those since.
        this_attempt = _since(lh.store.stats, driver_mark)
        events: dict[str, int] = {}
        for task_result in results:
            this_attempt.add(task_result.stats)
            for name, count in task_result.events.items():
                events[name] = events.get(name, 0) + count
        result.tree_events = events
        result.redos = attempt
        if base.node.same_tree_as(flushed):  # the flush changed nothing
            # Nothing over the threshold, an empty buffer, or another flush got there first.
            result.written.add(this_attempt)
            result.not_committed.add(this_attempt)
            why = (
                "the root buffer is empty"
                if not base.node.buffer and not run.tasks
                else f"no buffer is fuller than {options.fill:.0%}"
                if options.mode == "threshold"
                else "no buffer holds messages"
            )
            if attempt:
                why += (
                    f" (redone on version {base.version}, which another commit made while this job "
                    f"flushed version {result.planned_from[-2]})"
                )
            # The state found: nothing was flushed, so the root buffer is as it was.
            result.root_messages_before = result.root_messages_after = len(base.node.buffer)
            result.root_messages_flushed = len(base.node.buffer)
            result.root_messages_from_later_commits = 0
            result.noop_reason, result.ended = why, "noop"
            return result
        rebase = Rebase()
        try:
            with stage("commit", "commit the flushed root (driver)"):
                outcome = lh.commit_plan(
                    flushed_root_plan(lh, base, flushed, rebase), flush_still_valid(base)
                )
        except CommitConflictError as exc:
            this_attempt.add(rebase.written)
            this_attempt.add(rebase.superseded)
            result.written.add(this_attempt)
            result.not_committed.add(this_attempt)
            result.conflicts.append(str(exc))
            if attempt == options.max_redos:
                result.ended = "conflict"
                return result
            lh.refresh()
            continue
        # The commit's own plan may have run more than once (a rebase per commit that landed
        # first); only the last one's node files are in the committed version.
        this_attempt.add(rebase.written)
        this_attempt.add(rebase.superseded)
        result.written.add(this_attempt)
        result.not_committed.add(rebase.superseded)
        result.new_version = outcome.version
        # Rebases inside the commit plus whole redos after a conflicting commit.
        result.commit_retries = outcome.conflicts + attempt
        result.root_messages_before = len(base.node.buffer)
        result.root_messages_flushed = len(flushed.buffer)
        result.root_messages_after = len(outcome.root.node.buffer)
        result.root_messages_from_later_commits = rebase.newer_messages
        result.ended = "committed"
        return result
    raise AssertionError("unreachable: the last attempt returns")  # pragma: no cover


@dataclass
class Rebase:
    """What the commit's plan did: it runs once per commit attempt, and each run after the first
    rebuilds the root on a newer version (writing nodes if it overflows)."""

    written: IOStats = field(default_factory=IOStats)  # node files of the last run
    superseded: IOStats = field(
        default_factory=IOStats
    )  # node files of earlier runs: in no version
    newer_messages: int = 0  # root-buffer messages of the commits that landed first, last run


def flushed_root_plan(
    lh: Lakehouse, base: RootInfo, flushed: Node, rebase: Rebase | None = None
) -> Callable[[RootInfo], RootPlan]:
    """The commit's plan: ``flushed`` on ``base``, or with the root-buffer messages of the
    commits that landed since on top. ``rebase`` collects what each run did."""
    rebase = rebase if rebase is not None else Rebase()

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


def flush_still_valid(base: RootInfo) -> Callable[[RootInfo], str | None]:
    """The commit's check of a newer latest version: only root-buffer messages may have landed."""

    def still_valid(latest: RootInfo) -> str | None:
        if only_root_buffer_changed(base.node, latest.node):
            return None
        return f"version {latest.version} changed the tree below the root buffer; redoing the flush"

    return still_valid


def _no_stage(_name: str, _description: str) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


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


__all__ = ["Rebase", "flush_lakehouse", "flush_still_valid", "flushed_root_plan"]
