"""Flushing a whole tree in three steps, so that the heavy middle step can be distributed.

1. **plan** (driver): run the flush over the top of the tree only. Messages in the top nodes are
   pushed down exactly as a normal flush would, but the nodes at the *cut height* are not
   flushed: they are set aside as tasks, each carrying its content (with the messages that just
   arrived) so that it needs nothing else. Rare structural work that reaches below the cut (a
   delete of a key held in a top node) is done on the driver.
2. **run** (executors): ``run_flush_task`` flushes one subtree (``lakecore.core.tree.flush_node``),
   writes its new nodes and returns the paths of what replaces its root, the separators between
   them, and whether that single node came back underfull.
3. **assemble** (driver): put the results in place of the tasks, repair the top (merge
   underfull subtree roots with a sibling, split top nodes that gained too many keys, grow or
   shrink the root) and write the top nodes. The driver alone writes the new root.

A flush of a lakehouse commits the new root, and redoes its work when another commit got in
the way (``lakecore.lakehouse.flush.flush_lakehouse``, with the tasks run here or on Spark
executors): its options are ``FlushOptions``, its result ``FlushResult``. The three steps alone
run in one process in ``flush_in_process``, the tests' oracle of the distributed steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import IOStats, NodeStore
from lakecore.core.tree.write import (
    FlushMode,
    FlushPolicy,
    Separator,
    SplicedSubtree,
    SubtreeFlushResult,
    TreeWriter,
    WNode,
    flush_node,
)
from lakecore.maintenance.settings import DEFAULT_SETTINGS


@dataclass(frozen=True)
class FlushOptions:
    """What a flush of a lakehouse is asked to do, typed."""

    mode: str = "full"  # full: every buffer; threshold: the buffers fuller than ``fill``
    fill: float = DEFAULT_SETTINGS.flush_fill
    max_redos: int = DEFAULT_SETTINGS.flush_max_redos  # after a conflicting commit

    @property
    def policy(self) -> FlushPolicy:
        return policy_from(self.mode, self.fill)


@dataclass
class FlushResult:
    """What a flush of a lakehouse did, filled attempt by attempt; ``ended`` says how it ended
    (None: it stopped part-way). ``base_version`` and the root-message counts are those of the
    version the last attempt flushed; node files written by attempts that were not committed
    are in no version (``not_committed``), for gc to delete."""

    options: FlushOptions
    planned_from: list[int] = field(default_factory=list)  # the version each attempt flushed
    subtree_tasks: int | None = None  # the last attempt's
    messages_sent: int = 0  # root-buffer messages handed to the subtree tasks (last attempt)
    tree_events: dict[str, int] | None = None  # the last attempt's flush, by event
    redos: int = 0  # attempts after the first (a conflicting commit landed)
    conflicts: list[str] = field(default_factory=list)  # why each redo
    written: IOStats = field(default_factory=IOStats)  # every node file this flush wrote
    not_committed: IOStats = field(default_factory=IOStats)  # ... and those in no version
    ended: str | None = None  # "committed", "noop" or "conflict" (gave up)
    noop_reason: str | None = None
    root_messages_before: int = 0
    root_messages_flushed: int = 0  # in the flushed root, before later commits' went on top
    root_messages_after: int = 0
    root_messages_from_later_commits: int = 0
    new_version: int | None = None
    commit_retries: int = 0  # rebases inside the commit plus whole redos

    @property
    def base_version(self) -> int | None:
        return self.planned_from[-1] if self.planned_from else None


@dataclass(frozen=True)
class FlushTask:
    """One subtree to flush: its root's content (picklable), where it came from, its height."""

    task_id: int
    node: Node
    origin: str | None
    dirty: bool
    height: int
    policy: FlushPolicy

    @property
    def messages(self) -> int:
        return len(self.node.buffer)


@dataclass
class FlushTaskResult:
    task_id: int
    paths: list[str]
    separators: list[Separator]
    underflow: bool
    changed: bool
    stats: IOStats
    events: dict[str, int]


@dataclass
class FlushRun:
    """The driver's side of a distributed flush: the top of the tree and the tasks below it."""

    store: NodeStore
    shape: TreeShape
    policy: FlushPolicy
    writer: TreeWriter
    tasks: list[FlushTask] = field(default_factory=list)
    _by_id: dict[int, WNode] = field(default_factory=dict)

    def assemble(self, results: Iterable[FlushTaskResult]) -> Node:
        """Put the task results in place and return the new root's content (top nodes written)."""
        by_task = {r.task_id: r for r in results}
        missing = [t.task_id for t in self.tasks if t.task_id not in by_task]
        if missing:
            raise RuntimeError(f"flush results missing for tasks {missing[:10]}")
        replacement: dict[int, SplicedSubtree] = {}
        for task in self.tasks:
            replacement[id(self._by_id[task.task_id])] = by_task[task.task_id]
        return self.writer.splice_subtrees(replacement)


def plan_flush(
    store: NodeStore, shape: TreeShape, root: Node, policy: FlushPolicy, target_tasks: int
) -> FlushRun:
    """Flush the top of the tree on the driver and set the subtrees below the cut aside."""
    probe = TreeWriter(store, shape, root)
    height = probe.height
    defer_height = _defer_height(store, root, height, target_tasks)
    writer = TreeWriter(store, shape, root, defer_height=defer_height)
    writer.flush(policy)
    run = FlushRun(store, shape, policy, writer)
    for task_id, w in enumerate(writer.deferred.values()):
        # A deferred node that a later step replaced (merged away) is not in the tree any more.
        if not _in_tree(writer.root, w):
            continue
        node = Node(
            list(w.keys), list(w.values), [_child_path(c) for c in w.children], dict(w.buffer)
        )
        run.tasks.append(FlushTask(task_id, node, w.origin, w.dirty, defer_height, policy))
        run._by_id[task_id] = w
    return run


def _child_path(child: WNode | str) -> str:
    if isinstance(child, str):
        return child
    if child.origin is not None and not child.dirty:
        return child.origin
    raise RuntimeError("a subtree task below the cut holds a changed child; the cut is too high")


def _in_tree(root: WNode, target: WNode) -> bool:
    stack: list[WNode] = [root]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        stack.extend(c for c in node.children if isinstance(c, WNode))
    return False


def _defer_height(store: NodeStore, root: Node, height: int, target_tasks: int) -> int:
    """The height whose level first holds at least ``target_tasks`` nodes (never the root).
    A level is counted from its parents' pointers and loaded only to descend past it: the
    level the cut lands on is read by the flush itself, and only where it has work."""
    if height <= 1:
        return 0
    level = [root]
    level_height = height
    while level_height > 1:
        children = [c for node in level for c in node.children]
        level_height -= 1
        if len(children) >= target_tasks or level_height == 1:
            return level_height
        store.prefetch(children)
        level = [store.load(c) for c in children]
    return 1


def run_flush_task(
    storage: Storage, shape: TreeShape, task: FlushTask, store: NodeStore | None = None
) -> FlushTaskResult:
    """Executor side: flush one subtree and write its new nodes."""
    store = store or NodeStore(storage, shape.order)
    result: SubtreeFlushResult = flush_node(
        store, shape, task.node, task.origin, task.dirty, task.policy, task.height
    )
    return FlushTaskResult(
        task.task_id,
        result.nodes,
        result.separators,
        result.underflow,
        result.changed,
        result.stats,
        result.events,
    )


def flush_in_process(
    store: NodeStore,
    shape: TreeShape,
    root: Node,
    policy: FlushPolicy,
    target_tasks: int = 8,
    run_tasks: Callable[[list[FlushTask]], list[FlushTaskResult]] | None = None,
) -> tuple[Node, FlushRun, list[FlushTaskResult]]:
    """Plan, run every task (here, or with ``run_tasks``), assemble. Returns the new root content.
    A test oracle: the three steps of the distributed flush in one process, without a commit
    (``lakecore.lakehouse.flush.flush_lakehouse`` is the flush of a lakehouse)."""
    run = plan_flush(store, shape, root, policy, target_tasks)
    if run_tasks is None:
        results = [run_flush_task(store.storage, shape, task, store) for task in run.tasks]
    else:
        results = run_tasks(run.tasks)
    return run.assemble(results), run, results


def policy_from(mode: str, fill: float) -> FlushPolicy:
    if mode == "full":
        return FlushPolicy(FlushMode.FULL, fill)
    if mode == "threshold":
        return FlushPolicy(FlushMode.THRESHOLD, fill)
    raise ValueError(f"flush mode {mode!r} must be full or threshold")


def only_root_buffer_changed(base: Node, latest: Node) -> bool:
    """True when ``latest`` differs from ``base`` in its root buffer alone (commits that landed
    in between only added messages), so the flushed tree can take those messages on top."""
    return (
        base.keys == latest.keys
        and base.values == latest.values
        and base.children == latest.children
    )


def newer_root_messages(base: Node, latest: Node) -> dict[str, str | None]:
    missing = object()
    out: dict[str, str | None] = {}
    for key, value in latest.buffer.items():
        previous: Any = base.buffer.get(key, missing)
        if previous is missing or previous != value:
            out[key] = value
    return out
