"""The three-step flush (plan on the driver, subtree tasks, assemble) against the plain flush."""

from __future__ import annotations

import pickle

import pytest

from lakecore.core.tree import FlushMode, FlushPolicy, items
from lakecore.maintenance.flush import FlushTask, flush_in_process, run_flush_task
from lakecore.maintenance.tree_check import TreeChecker
from tests.core.tree.conftest import buffered_messages, random_tree


def _random_tree(order: int, seed: int, steps: int = 500, delete_share: float = 0.3):  # type: ignore[no-untyped-def]
    return random_tree(order, seed, steps=steps, delete_share=delete_share)


@pytest.mark.parametrize("order", [3, 4, 5, 8])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("targets", [1, 3, 50])
def test_distributed_full_flush_keeps_the_map_and_empties_buffers(
    order: int, seed: int, targets: int
) -> None:
    store, shape, root, model = _random_tree(order, seed)
    assert buffered_messages(store, root) > 0
    flushed, run, _results = flush_in_process(
        store, shape, root, FlushPolicy(FlushMode.FULL), target_tasks=targets
    )
    assert dict(items(store, flushed)) == model
    assert buffered_messages(store, flushed) == 0
    report = TreeChecker(store, shape).check_root(flushed, "root")
    assert report.ok, [str(v) for v in report.violations]
    if root.children and targets > 1:
        assert len(run.tasks) >= 2, "the tree was not cut into subtrees"


@pytest.mark.parametrize("seed", range(4))
def test_distributed_threshold_flush(seed: int) -> None:
    store, shape, root, model = _random_tree(4, seed, delete_share=0.5)
    flushed, _, _ = flush_in_process(
        store, shape, root, FlushPolicy(FlushMode.THRESHOLD, 0.3), target_tasks=4
    )
    assert dict(items(store, flushed)) == model
    assert TreeChecker(store, shape).check_root(flushed, "root").ok


def test_tasks_and_results_pickle_for_executors() -> None:
    store, shape, root, _ = _random_tree(4, 0)
    captured: list[FlushTask] = []

    def run_tasks(tasks):  # type: ignore[no-untyped-def]
        captured.extend(tasks)
        out = []
        for task in tasks:
            clone = pickle.loads(pickle.dumps(task))
            storage = pickle.loads(pickle.dumps(store.storage))
            out.append(pickle.loads(pickle.dumps(run_flush_task(storage, shape, clone))))
        return out

    flushed, _, _ = flush_in_process(store, shape, root, FlushPolicy(FlushMode.FULL), 4, run_tasks)
    assert captured
    assert buffered_messages(store, flushed) == 0
