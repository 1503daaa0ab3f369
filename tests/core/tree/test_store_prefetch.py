"""``NodeStore.prefetch``: on storage that waits on the network a walk reads ahead, with the
same results and the same errors as reading one node after another."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lakecore.core.locations import new_node_file_path
from lakecore.core.storage import Storage
from lakecore.core.tree import FlushMode, FlushPolicy, TreeShape, TreeWriter, items
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.core.view import read_root_and_def
from lakecore.errors import NotFoundError
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.flush import flush_in_process, plan_flush
from lakecore.maintenance.tree_check import TreeChecker
from lakecore.maintenance.tree_files import reachable_from_root, reachable_from_subtree
from lakecore.maintenance.validate import (
    fresh_store,
    merge_work,
    plan_version,
    run_subtree_work,
    run_subtree_works,
)


class _ReadsByThread(Storage):
    """A local Storage that says it waits on the network and notes which thread read what."""

    readers: dict[str, str]

    @property
    def waits_on_network(self) -> bool:
        return True

    def read(self, path: str) -> bytes:
        self.readers[path] = threading.current_thread().name
        return super().read(path)


def _lake(path: Path) -> Lakehouse:
    lh = Lakehouse.create(str(path), order=4, node_file_max_size_bytes=4096)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(6):
        with lh.transaction() as tx:
            for j in range(8):
                tx.create_table("ns", f"t{i}_{j}")
    return lh


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    _lake(tmp_path / "lake")
    return tmp_path / "lake"


def test_a_walk_reads_ahead_and_reaches_the_same_files(lake: Path) -> None:
    plain = Storage(str(lake))
    root, lakehouse_def = read_root_and_def(plain, None)
    expected = reachable_from_root(
        NodeStore(plain, lakehouse_def.order, cache=NodeCache()), root.node
    )
    assert len(expected.nodes) > 4

    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    walked = reachable_from_root(
        NodeStore(storage, lakehouse_def.order, cache=NodeCache()), root.node
    )
    assert walked.nodes == expected.nodes and walked.values == expected.values
    node_readers = {storage.readers[path] for path in walked.nodes}
    assert all(name.startswith("lakecore-requests") for name in node_readers), node_readers


def test_a_prefetched_read_that_fails_fails_the_load_as_before(lake: Path) -> None:
    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    missing = new_node_file_path()
    store = NodeStore(storage, 4, cache=NodeCache())
    store.prefetch([missing])
    with pytest.raises(NotFoundError, match=f"node file {storage.uri(missing)} is missing"):
        store.load(missing)
    assert storage.readers[missing].startswith("lakecore-requests")


def test_local_storage_reads_in_the_walking_thread(lake: Path) -> None:
    class Local(_ReadsByThread):
        @property
        def waits_on_network(self) -> bool:
            return False

    storage = Local(str(lake))
    storage.readers = {}
    root, lakehouse_def = read_root_and_def(storage, None)
    walked = reachable_from_root(
        NodeStore(storage, lakehouse_def.order, cache=NodeCache()), root.node
    )
    assert {storage.readers[path] for path in walked.nodes} == {threading.current_thread().name}


def test_the_checker_reads_ahead_and_judges_the_same(lake: Path) -> None:
    plain = Storage(str(lake))
    root, lakehouse_def = read_root_and_def(plain, None)
    shape = TreeShape.of(lakehouse_def)
    expected = TreeChecker(NodeStore(plain, shape.order, cache=NodeCache()), shape).check_root(
        root.node, root.path
    )

    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    report = TreeChecker(NodeStore(storage, shape.order, cache=NodeCache()), shape).check_root(
        root.node, root.path
    )
    assert report.ok and expected.ok
    assert (report.nodes_checked, report.keys_seen, report.leaf_depths) == (
        expected.nodes_checked,
        expected.keys_seen,
        expected.leaf_depths,
    )
    assert len(storage.readers) == report.nodes_checked - 1  # every node but the root, once
    assert all(name.startswith("lakecore-requests") for name in storage.readers.values()), (
        storage.readers
    )


def test_a_flush_reads_ahead_and_flushes_the_same(lake: Path) -> None:
    with Lakehouse.open(str(lake)).transaction() as tx:  # messages in the root's buffer
        for j in range(2):
            tx.create_table("ns", f"late_{j}")
    plain = Storage(str(lake))
    root, lakehouse_def = read_root_and_def(plain, None)
    assert root.node.buffer, "nothing to flush"
    shape = TreeShape.of(lakehouse_def)
    policy = FlushPolicy(FlushMode.FULL)
    plain_store = NodeStore(plain, shape.order, cache=NodeCache())
    expected, _, _ = flush_in_process(plain_store, shape, root.node, policy, target_tasks=2)

    height = TreeWriter(plain_store, shape, root.node).height

    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    store = NodeStore(storage, shape.order, cache=NodeCache())
    run = plan_flush(store, shape, root.node, policy, target_tasks=2)
    # Only the height probe (the first child at each level, one after another) reads in the
    # planning thread; the rest of the plan's reads were started ahead.
    walking = [
        path for path, name in storage.readers.items() if not name.startswith("lakecore-requests")
    ]
    assert len(walking) == height - 1 and len(storage.readers) > len(walking), storage.readers
    flushed, run, _ = flush_in_process(store, shape, root.node, policy, target_tasks=2)
    assert run.tasks, "the flush was not cut into subtrees"
    assert dict(items(store, flushed)) == dict(items(plain_store, expected))


def test_validate_plan_reads_ahead_but_never_a_subtree_root(lake: Path) -> None:
    # The driver checks the top of the tree; the subtree roots below its cut are its tasks'
    # to read, so reading them ahead would be requests for nothing.
    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    root, lakehouse_def = read_root_and_def(storage, None)
    store = NodeStore(storage, lakehouse_def.order, cache=NodeCache())
    plan = plan_version(
        storage, root.version, root.node, root.path, root.size, lakehouse_def, store, 4
    )
    assert plan.tasks and plan.top_report.ok
    assert not {task.location for task in plan.tasks} & set(storage.readers), storage.readers


def test_a_partition_of_subtree_checks_reads_the_next_roots_ahead(lake: Path) -> None:
    plain = Storage(str(lake))
    root, lakehouse_def = read_root_and_def(plain, None)
    plan = plan_version(
        plain,
        root.version,
        root.node,
        root.path,
        root.size,
        lakehouse_def,
        fresh_store(plain, lakehouse_def.order),
        8,
    )
    works = merge_work([plan], deep=False, rows=True)
    assert len(works) > 2
    expected = [run_subtree_work(plain, work) for work in works]

    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    results = list(run_subtree_works(storage, works))
    assert [
        (r.report.nodes_checked, r.report.keys_seen, r.report.violations, r.rows.rows())
        for r in results
    ] == [
        (r.report.nodes_checked, r.report.keys_seen, r.report.violations, r.rows.rows())
        for r in expected
    ]
    assert all(
        storage.readers[work.task.location].startswith("lakecore-requests") for work in works
    ), storage.readers


class _CountedReads(_ReadsByThread):
    """... and counts the reads of each path, and the most read ahead (on the request pool's
    threads) at once."""

    counts: dict[str, int]
    in_flight: int
    most_in_flight: int

    def read(self, path: str) -> bytes:
        ahead = threading.current_thread().name.startswith("lakecore-requests")
        with _COUNTING:
            self.counts[path] = self.counts.get(path, 0) + 1
            self.in_flight += ahead
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return super().read(path)
        finally:
            with _COUNTING:
                self.in_flight -= ahead


_COUNTING = threading.Lock()


def _counted(lake: Path) -> _CountedReads:
    storage = _CountedReads(str(lake))
    storage.readers, storage.counts, storage.in_flight, storage.most_in_flight = {}, {}, 0, 0
    return storage


def _parent_of_leaves(lake: Path) -> tuple[str, int, list[str]]:
    """A node whose children are all leaves, with at least three: its location, depth, children."""
    plain = Storage(str(lake))
    root, lakehouse_def = read_root_and_def(plain, None)
    store = NodeStore(plain, lakehouse_def.order, cache=NodeCache())
    level = [(child, 2) for child in root.node.children]
    while level:
        location, depth = level.pop(0)
        node = store.load(location)
        children = [store.load(child) for child in node.children]
        if len(children) >= 3 and all(not child.children for child in children):
            return location, depth, list(node.children)
        level += [(child, depth + 1) for child in node.children]
    raise AssertionError("no node with three leaf children")


@pytest.mark.parametrize("walk", ["reach", "check"])
def test_children_beyond_the_pending_bound_are_read_ahead_too(
    lake: Path, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A node of order 128 has up to 128 children, twice PREFETCH_PENDING: the ones past the
    # bound wait in a queue and start as the walk takes the started ones. They used to be
    # read one round trip after another in the walking thread. Here order 4 with a bound of 1.
    from lakecore.core.tree import store as store_module

    monkeypatch.setattr(store_module, "PREFETCH_PENDING", 1)
    location, depth, children = _parent_of_leaves(lake)
    storage = _counted(lake)
    store = NodeStore(storage, 4, cache=NodeCache())
    if walk == "reach":
        assert reachable_from_subtree(store, location, depth).nodes == {location, *children}
    else:
        shape = TreeShape.of(read_root_and_def(storage, None)[1])
        assert TreeChecker(store, shape).check_subtree(
            location, None, None, depth
        ).nodes_checked == 1 + len(children)
    assert all(storage.readers[child].startswith("lakecore-requests") for child in children), (
        storage.readers
    )
    assert set(storage.counts.values()) == {1}, storage.counts  # none read twice
    assert storage.most_in_flight <= 1


def test_a_node_loaded_before_its_queued_read_started_is_not_read_again(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakecore.core.tree import store as store_module

    monkeypatch.setattr(store_module, "PREFETCH_PENDING", 1)
    storage = _counted(lake)
    root, lakehouse_def = read_root_and_def(Storage(str(lake)), None)
    first, second, *rest = root.node.children
    store = NodeStore(storage, lakehouse_def.order, cache=None)  # no cache to remember it by
    store.prefetch([first, second, *rest])
    store.load(second)  # out of order: read here, while its read ahead waits behind the first
    store.load(first)  # its read ahead was started; taking it starts the next queued: not second
    for location in rest:
        store.load(location)
    assert storage.counts == {location: 1 for location in root.node.children}, storage.counts
    assert not storage.readers[second].startswith("lakecore-requests")


class _SlowReads(_CountedReads):
    """... whose reads take a few milliseconds, as a request to an object store does."""

    def read(self, path: str) -> bytes:
        time.sleep(0.005)
        return super().read(path)


def test_a_node_s_children_are_read_ahead_while_its_siblings_hold_their_reads(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A walk from the root, depth first: the root's children are read ahead, and while the
    # first is walked the others' reads are done and wait to be loaded. Those must not keep the
    # first's own children from being read ahead (a bound on reads started and not loaded
    # did: below the root of a big tree every leaf was read one round trip after another).
    from lakecore.core.tree import store as store_module

    monkeypatch.setattr(store_module, "PREFETCH_PENDING", 2)
    monkeypatch.setattr(store_module, "PREFETCH_HELD", 64, raising=False)
    storage = _SlowReads(str(lake))
    storage.readers, storage.counts, storage.in_flight, storage.most_in_flight = {}, {}, 0, 0
    root, lakehouse_def = read_root_and_def(Storage(str(lake)), None)
    walked = reachable_from_root(
        NodeStore(storage, lakehouse_def.order, cache=NodeCache()), root.node
    ).nodes
    below_the_first_level = walked - set(root.node.children) - {root.path}
    assert len(below_the_first_level) > 8
    ahead = [
        path
        for path in below_the_first_level
        if storage.readers[path].startswith("lakecore-requests")
    ]
    assert len(ahead) >= 0.75 * len(below_the_first_level), (len(ahead), len(below_the_first_level))
    assert set(storage.counts.values()) == {1}, storage.counts
    assert storage.most_in_flight <= 2
