"""Cutting a tree into subtrees, so that every executor gets work.

The driver loads the top of the tree level by level until a level has at least ``target``
nodes (or the next level would be the leaves of a small tree), and hands out the nodes of that
level as subtree tasks. Each task knows its key bounds and depth, which is all the checker and
the reachability walk need to work on the subtree alone.

Cutting many versions of one tree (gc, version compaction) repeats almost all of the work: a
node file is immutable, so a node met at the same depth in an earlier version's cut has the same
subtree below it. Such callers pass the placements of the cuts they accepted so far as
``known``: a node placed there is neither loaded nor handed out again (``TreeCut.shared``
counts them), and the caller adds the new cut's ``placements`` once it has checked the cut. A
commit that only rewrites the root then costs a cut of one node, not of the whole top.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from lakecore.core.node import Node
from lakecore.core.tree.store import PREFETCH_PENDING, NodeStore

Task = TypeVar("Task")
Kind = TypeVar("Kind", bound=Hashable)
Store = TypeVar("Store", bound=NodeStore)


@dataclass(frozen=True)
class SubtreeTask:
    """One subtree: where its root is, the key bounds its ancestors give it, its depth (the
    tree root is depth 1) and the chain of ancestors (for cycle detection)."""

    location: str
    low: str | None
    high: str | None
    depth: int
    ancestors: tuple[str, ...] = ()


# A node placed in a cut: its location and its depth (the root is depth 1).
Placement = tuple[str, int]


@dataclass
class TreeCut:
    """The top of a tree (nodes above the cut, loaded on the driver) and the subtrees below."""

    top: list[tuple[str, Node, int]] = field(default_factory=list)
    subtrees: list[SubtreeTask] = field(default_factory=list)
    cut_depth: int = 1
    shared: int = 0  # children left out because ``known`` already covers them

    @property
    def placements(self) -> list[Placement]:
        """Every node below the root this cut loaded or handed out, with its depth: what a
        caller adds to its ``known`` once it has checked the cut."""
        return [(location, depth) for location, _node, depth in self.top[1:]] + [
            (task.location, task.depth) for task in self.subtrees
        ]

    def finish(self, subtrees: list[SubtreeTask], cut_depth: int) -> TreeCut:
        """The cut with its subtrees and depth set."""
        self.subtrees, self.cut_depth = subtrees, cut_depth
        return self


def cut_tree(
    store: NodeStore,
    root: Node,
    root_location: str,
    target: int,
    max_depth: int = 64,
    *,
    known: set[Placement] | frozenset[Placement] = frozenset(),
) -> TreeCut:
    """Nodes of the first level with at least ``target`` nodes become subtree tasks; the
    levels above are returned as the loaded top. A leaf root gives no subtree at all.

    Children ``known`` places at the same depth (an earlier version's cut) are left out."""
    cut = TreeCut(top=[(root_location, root, 1)])
    level: list[tuple[str, Node, str | None, str | None, tuple[str, ...]]] = [
        (root_location, root, None, None, ())
    ]
    depth = 1
    while True:
        children: list[SubtreeTask] = []
        for location, node, low, high, ancestors in level:
            for i, child in enumerate(node.children):
                child_low = node.keys[i - 1] if i > 0 else low
                child_high = node.keys[i] if i < len(node.keys) else high
                if (child, depth + 1) in known:
                    cut.shared += 1
                    continue
                children.append(
                    SubtreeTask(child, child_low, child_high, depth + 1, (*ancestors, location))
                )
        if not children:
            return cut.finish([], depth)
        if len(children) >= target or depth + 1 >= max_depth:
            return cut.finish(children, depth + 1)
        loaded = [
            (t.location, store.load(t.location), t.low, t.high, t.ancestors) for t in children
        ]
        if any(not node.children for _, node, _, _, _ in loaded):
            # The next level is the leaves: hand out this level as it is.
            return cut.finish(children, depth + 1)
        cut.top.extend((loc, node, depth + 1) for loc, node, _, _, _ in loaded)
        level = loaded
        depth += 1


def with_stores_reading_ahead(
    tasks: Sequence[Task],
    kind_of: Callable[[Task], Kind],
    location_of: Callable[[Task], str],
    new_store: Callable[[Kind], Store],
) -> Iterator[tuple[Task, Store]]:
    """An executor's subtree tasks in order, each with the partition's store for its kind of
    tree (``kind_of``: its order and export roots), built on first use and shared by the tasks
    of that kind. Before a task is handed out, the reads of the next ``PREFETCH_PENDING``
    same-kind tasks' subtree roots are started (``NodeStore.prefetch``): a small lakehouse's
    tasks are single leaves, one round trip each on S3, which a partition otherwise paid one
    after another."""
    stores: dict[Kind, Store] = {}
    for index, task in enumerate(tasks):
        kind = kind_of(task)
        store = stores.get(kind)
        if store is None:
            store = stores[kind] = new_store(kind)
        store.prefetch(
            location_of(following)
            for following in tasks[index : index + PREFETCH_PENDING]
            if kind_of(following) == kind
        )
        yield task, store
