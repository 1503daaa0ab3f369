"""Reachability for maintenance: which files the retained versions reach, walked in subtrees.

The driver cuts each retained tree into subtrees (``partition.cut_tree``) and de-duplicates
subtree locations across versions (consecutive versions share almost every subtree); workers
walk the subtrees (``tree_files.reachable_from_subtree``) and stream ``(path, size)`` records;
the driver adds the root files, definitions, top nodes and their values.

A value that escapes the lakehouse (a forged full URI outside the allowed export source, or a
relative path that leaves the root) is damage: it is reported, never followed.

The re-check of versions that land after a listing is ``recheck``."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from lakecore.core.locations import (
    escaping_value,
    is_forged_pointer,
    is_full_uri,
    not_plain_optimized,
)
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.errors import LakecoreError
from lakecore.maintenance.damage import mark_damage
from lakecore.maintenance.listing import ERROR_KEY, UNKNOWN_SIZE, GcRefusedError
from lakecore.maintenance.partition import Placement, TreeCut, cut_tree, with_stores_reading_ahead
from lakecore.maintenance.roots import LoadedRoot
from lakecore.maintenance.tree_files import reachable_from_subtree

# ---------------------------------------------------------------------------------------------
# Reachability


@dataclass(frozen=True)
class ReachTask:
    """One subtree to walk on an executor (picklable)."""

    location: str
    depth: int
    order: int
    external_roots: tuple[str, ...]
    low: str | None = None
    high: str | None = None

    @property
    def sort_key(self) -> tuple[str, str, int, str]:
        # Tasks over the same key range (the same subtree in neighbouring versions) sit next to
        # each other, so they land in one partition and share its node cache.
        return (
            self.low or "",
            self.high if self.high is not None else "\U0010ffff",
            self.depth,
            self.location,
        )


@dataclass
class ReachPlan:
    """What the driver knows after cutting the trees: tasks for executors, the paths it reached
    itself (with sizes where known), and the nodes whose whole subtree is covered."""

    tasks: list[ReachTask] = field(default_factory=list)
    driver_paths: dict[str, int] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)  # top nodes and task roots
    versions: list[int] = field(default_factory=list)
    shared_tasks: int = 0  # subtrees met again in another version: planned and walked once
    skipped_tasks: int = 0  # subtrees covered elsewhere (``skip``) or in an export's source
    unwalked: list[int] = field(default_factory=list)  # versions left out as ``tolerated``

    @property
    def files_at_least(self) -> int:
        """A lower bound on the files of the lakehouse: the driver's paths, and a file (at
        least) per task. How to list it is chosen by it (``listing.listing_way``)."""
        return len(self.driver_paths) + len(self.tasks)


def _add(paths: dict[str, int], path: str, size: int = UNKNOWN_SIZE) -> None:
    if is_full_uri(path):
        return  # in another lakehouse (an export's source): never ours to delete
    if paths.get(path, UNKNOWN_SIZE) == UNKNOWN_SIZE:
        paths[path] = size


def escape_reason(where: str, value: str) -> str:
    return (
        f"{where}: value {value!r} points out of the lakehouse root and not into an export's source; "
        "the version is damaged (run validate, then repair)"
    )


def _damage_in_cut(root: LoadedRoot, cut: TreeCut) -> str | None:
    """Why gc must not trust this version's cut: an escaping value in a node the driver read, or
    a subtree pointer out of the root (the executors would skip it as an export's source)."""
    for location, node, _depth in cut.top:
        value = escaping_value(node.pvalues(), root.external_roots)
        if value is not None:
            return escape_reason(f"version {root.version}, node {location}", value)
    for sub in cut.subtrees:
        if is_forged_pointer(sub.location, root.external_roots):
            return (
                f"version {root.version}: node pointer {sub.location!r} leaves the lakehouse root and "
                "is not in an export's source; the version is damaged (run validate, then repair)"
            )
    return None


def _node_store(storage: Storage, root: LoadedRoot, cache: NodeCache) -> _SizedStore:
    return _SizedStore(storage, root.lakehouse_def.order, cache, root.external_roots)


def plan_reach(
    storage: Storage,
    roots: Iterable[LoadedRoot],
    target_tasks: int,
    *,
    cache: NodeCache | None = None,
    skip: set[str] | frozenset[str] = frozenset(),
    refused: Callable[[str], LakecoreError] = GcRefusedError,
    tolerated: list[str] | None = None,
) -> ReachPlan:
    """Cut every root's tree; de-duplicate subtrees across versions.

    ``skip``: subtree roots known to be covered elsewhere (expiry skips the expired side's
    subtrees that a retained version also has). The driver's reads go through ``cache`` (a
    fresh one per run, so that every node is really read, not remembered from before).
    A tree whose top cannot be read is ``refused``, or, when ``tolerated`` is a list, noted
    there and left out (expiry's side of what may go: knowing less only deletes less)."""
    cache = cache if cache is not None else NodeCache()
    plan = ReachPlan()
    tasks: dict[str, ReachTask] = {}
    # What earlier versions' cuts placed, per set of export sources (which values are damage
    # depends on them): a node placed there was checked and its subtree is covered already.
    known_by_sources: dict[tuple[str, ...], set[Placement]] = {}
    for root in sorted(roots, key=lambda r: r.version):
        plan.versions.append(root.version)
        info = root.info
        _add(plan.driver_paths, info.path, info.size)
        _add(plan.driver_paths, info.lakehouse_def_path)
        store = _node_store(storage, root, cache)
        max_depth = TreeShape(root.lakehouse_def.order, 1).max_depth
        known = known_by_sources.setdefault(root.external_roots, set())
        failure: LakecoreError | None = None
        try:
            cut = cut_tree(store, info.node, info.path, target_tasks, max_depth, known=known)
            damage = _damage_in_cut(root, cut)
        except LakecoreError as exc:
            failure = exc
            damage = f"version {root.version}: the top of its tree cannot be read: {exc.one_line()}"
        if damage is not None:
            if tolerated is None:
                raise refused(damage) from failure  # the cause tells damage from a failed read
            tolerated.append(damage)
            plan.unwalked.append(root.version)
            continue
        known.update(cut.placements)
        plan.shared_tasks += cut.shared
        for location, node, _depth in cut.top:
            if location != info.path:
                plan.covered.add(location)
                _add(plan.driver_paths, location, store.sizes.get(location, UNKNOWN_SIZE))
            for value in node.pvalues():
                _add(plan.driver_paths, value)
        for sub in cut.subtrees:
            if sub.location in skip or is_full_uri(sub.location):
                # Covered elsewhere, or in an export's source: nothing below is ours to judge.
                plan.skipped_tasks += 1
                continue
            plan.covered.add(sub.location)
            placed = tasks.get(sub.location)
            if placed is None or sub.depth > placed.depth:
                # The deepest placement: walked from there, the depth bound is the strictest.
                tasks[sub.location] = ReachTask(
                    sub.location,
                    sub.depth,
                    root.lakehouse_def.order,
                    root.external_roots,
                    sub.low,
                    sub.high,
                )
    plan.tasks = sorted(tasks.values(), key=lambda t: t.sort_key)
    return plan


class _SizedStore(NodeStore):
    """A NodeStore that remembers the size of every node file it loads."""

    def __init__(
        self, storage: Storage, order: int, cache: NodeCache, external_roots: tuple[str, ...]
    ) -> None:
        super().__init__(storage, order, cache=cache, external_roots=external_roots)
        self.sizes: dict[str, int] = {}

    def load_sized(self, location: str) -> tuple[Node, int]:
        node, size = super().load_sized(location)
        self.sizes[location] = size
        return node, size


def run_reach_tasks(storage: Storage, tasks: Iterable[ReachTask]) -> Iterator[tuple[str, int]]:
    """Walk subtrees (an executor unit, one call per partition); yields ``(path, size)`` for
    every node file (with its size) and value location (size unknown) reached, each path once
    per call, and ``(ERROR_KEY + reason, UNKNOWN_SIZE)`` for a subtree that could not be
    walked (see ``is_error``)."""
    for paths, sizes in reach_task_columns(storage, tasks):
        yield from zip(paths, sizes, strict=True)


def reach_in_memory(storage: Storage, plan: ReachPlan) -> list[tuple[str, int]]:
    """Everything ``plan`` reaches, in one process: the driver's paths and every task's walk
    (``run_reach_tasks``, error records included). The in-process runs' reach; the Spark jobs
    walk the tasks on executors instead."""
    return list(plan.driver_paths.items()) + list(run_reach_tasks(storage, plan.tasks))


def reach_task_columns(
    storage: Storage, tasks: Iterable[ReachTask]
) -> Iterator[tuple[list[str], list[int]]]:
    """``run_reach_tasks`` as columns: one ``(paths, sizes)`` pair per task. A million paths
    cost a second less this way than as a million row tuples turned back into columns."""
    cache = NodeCache()  # per partition: neighbouring versions' subtrees share most nodes
    seen: set[str] = set()
    for task, store in with_stores_reading_ahead(
        list(tasks),
        lambda t: (t.order, t.external_roots),
        lambda t: t.location,
        lambda kind: _SizedStore(storage, kind[0], cache, kind[1]),
    ):
        try:
            reach = reachable_from_subtree(store, task.location, task.depth)
            # The values escaping_value must look at one by one: a handful, found as a column.
            unusual = not_plain_optimized(reach.values)
            escape = escaping_value(unusual, task.external_roots)
            if escape is not None:
                raise GcRefusedError(escape_reason(f"subtree {task.location}", escape))
        except Exception as exc:  # any failure at all must fail the caller closed
            store.drop_read_ahead()  # the failed walk's reads ahead would hold the store's slots
            reason = (
                exc.one_line() if isinstance(exc, LakecoreError) else f"{type(exc).__name__}: {exc}"
            )
            reason = mark_damage(f"subtree {storage.uri(task.location)}: {reason}", exc)
            yield [f"{ERROR_KEY}{reason}"], [UNKNOWN_SIZE]
            continue
        nodes = [path for path in reach.nodes - seen if not is_full_uri(path)]
        seen.update(nodes)
        # Values in another lakehouse (an export's source) are full URIs: never ours to delete.
        values = list(reach.values - seen - {value for value in unusual if is_full_uri(value)})
        seen.update(values)
        sizes = [store.sizes.get(path, UNKNOWN_SIZE) for path in nodes]
        sizes.extend(itertools.repeat(UNKNOWN_SIZE, len(values)))
        nodes.extend(values)
        yield nodes, sizes
