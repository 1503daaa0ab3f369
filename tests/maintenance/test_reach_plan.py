"""The reach plan of many versions: cuts that skip what an earlier version's cut placed must
still cover every file every version reaches, at any target, also when the tree grows a level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakecore.core.storage import Storage
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.listing import ERROR_KEY, list_top
from lakecore.maintenance.partition import cut_tree
from lakecore.maintenance.reach import plan_reach, run_reach_tasks
from lakecore.maintenance.roots import LoadedRoot, read_retained
from lakecore.maintenance.tree_files import reachable_from_root

# Order 4 and tiny node files: a few dozen tables make a tree of several levels that grows as
# the commits land, and the root buffer flushes often (rewriting the path below it).
SMALL_TREE: dict[str, Any] = dict(
    order=4,
    node_file_max_size_bytes=4096,
    namespace_name_max_size_bytes=16,
    table_name_max_size_bytes=16,
    file_name_max_size_bytes=100,
)


def small_lake(path: Path) -> Lakehouse:
    lh = Lakehouse.create(str(path), **SMALL_TREE)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    return lh


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Storage:
    lh = small_lake(tmp_path_factory.mktemp("reach-plan") / "lake")
    for i in range(40):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i:02d}", properties={"i": str(i)})
            if i >= 3:
                tx.update_table("ns", f"t{i - 3:02d}", properties={"u": str(i)})
            if i >= 6 and i % 3 == 0:
                tx.drop_table("ns", f"t{i - 6:02d}")
    return lh.storage


def every_version_reaches(storage: Storage) -> set[str]:
    """Each version walked whole, on its own: the answer the plan must give."""
    retained = read_retained(storage, list_top(storage))
    out: set[str] = set()
    for root in retained.roots.values():
        store = NodeStore(storage, root.lakehouse_def.order, cache=NodeCache())
        out |= reachable_from_root(store, root.info.node).files
        out |= {root.info.path, root.info.lakehouse_def_path, *root.info.node.pvalues()}
    return out


@pytest.mark.parametrize("target", [1, 3, 16, 1000])
def test_the_plan_covers_every_version(storage: Storage, target: int) -> None:
    retained = read_retained(storage, list_top(storage))
    plan = plan_reach(storage, retained.roots.values(), target, cache=NodeCache())
    walked = {path for path, _size in run_reach_tasks(storage, plan.tasks)}
    assert set(plan.driver_paths) | walked == every_version_reaches(storage)
    assert plan.shared_tasks > 0  # the versions share subtrees: later cuts skipped them
    assert len({task.location for task in plan.tasks}) == len(plan.tasks)


def test_a_cut_skips_the_placements_it_is_given(storage: Storage) -> None:
    retained = read_retained(storage, list_top(storage))
    latest = retained.roots[retained.latest]
    store = NodeStore(storage, latest.lakehouse_def.order, cache=NodeCache())
    max_depth = TreeShape(latest.lakehouse_def.order, 1).max_depth
    whole = cut_tree(store, latest.info.node, latest.info.path, 3, max_depth)
    assert whole.subtrees and whole.shared == 0
    again = cut_tree(
        store, latest.info.node, latest.info.path, 3, max_depth, known=set(whole.placements)
    )
    # Everything below the root was placed: the same version cut again hands out nothing.
    assert again.subtrees == [] and len(again.top) == 1
    assert again.shared == len(latest.info.node.children)


def height(storage: Storage, root: LoadedRoot) -> int:
    store = NodeStore(storage, root.lakehouse_def.order, cache=NodeCache())
    node, levels = root.info.node, 1
    while node.children:
        node, levels = store.load(node.children[0]), levels + 1
    return levels


def test_the_deepest_placement_wins_when_the_tree_grows(tmp_path: Path) -> None:
    """A subtree met high in one version and deeper in a later one (the tree grew a level
    above it) is walked from the deeper placement, whose depth bound is the strictest."""
    lh = small_lake(tmp_path / "lake")
    for i in range(150):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i:03d}")
    storage = lh.storage
    retained = read_retained(storage, list_top(storage))
    heights = {height(storage, root) for root in retained.roots.values()}
    assert len(heights) >= 3, heights  # the tree grew at least twice over these versions
    plan = plan_reach(storage, retained.roots.values(), 1, cache=NodeCache())
    walked = {path for path, _size in run_reach_tasks(storage, plan.tasks)}
    assert not any(
        path.startswith(ERROR_KEY) for path in walked
    )  # no depth-bound error in any task
    assert set(plan.driver_paths) | walked == every_version_reaches(storage)
