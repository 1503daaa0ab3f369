"""Bulk build, full and threshold flushes, subtree flush, reads and the node cache."""

from __future__ import annotations

import random

import pytest

from lakecore.core.node import Node
from lakecore.core.tree import (
    FlushMode,
    FlushPolicy,
    NodeCache,
    TreeShape,
    TreeWriter,
    bulk_build,
    flush_subtree,
    get,
    items,
    scan,
    scan_prefix,
)
from lakecore.core.tree.read import prefix_upper_bound
from lakecore.core.tree.write import WNode
from lakecore.errors import InvalidArgumentError, TreeStructureError
from lakecore.maintenance.tree_check import TreeChecker
from tests.core.tree.conftest import buffered_messages, make_store, random_tree


def _data(n: int, seed: int = 0) -> dict[str, str]:
    rnd = random.Random(seed)
    return {f"key{rnd.randrange(10**9):09d}": f"val{i}" for i in range(n)}


def _incremental(order: int, shape: TreeShape, data: dict[str, str], store_order_store=None):  # type: ignore[no-untyped-def]
    store = make_store(order)
    root = Node()
    keys = list(data)
    random.Random(1).shuffle(keys)
    for start in range(0, len(keys), 7):
        writer = TreeWriter(store, shape, root)
        for key in keys[start : start + 7]:
            writer.put(key, data[key])
        root = writer.finish()
    return store, root


@pytest.mark.parametrize("order", range(3, 129))
def test_bulk_build_passes_the_checker_and_equals_incremental_inserts(order: int) -> None:
    shape = TreeShape(order, 1 << 20)
    n = 4 * order + order // 2 + 3  # at least two levels at every order
    data = _data(n, order)
    store = make_store(order)
    root = bulk_build(store, shape, sorted(data.items()))
    report = TreeChecker(store, shape).check_root(root, "root")
    assert report.ok, [str(v) for v in report.violations]
    assert root.children, "a tree of 4N keys must have more than one level"
    assert len(report.leaf_depths) == 1
    bulk_map = dict(items(store, root))
    assert bulk_map == data
    if order in (3, 4, 5, 16, 128):
        inc_store, inc_root = _incremental(order, TreeShape(order, 64 * 1024), data)
        assert dict(items(inc_store, inc_root)) == bulk_map


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 26, 27, 28, 81, 82, 1000])
def test_bulk_build_small_counts_order_3(n: int) -> None:
    shape = TreeShape(3, 1 << 20)
    data = {f"k{i:05d}": str(i) for i in range(n)}
    store = make_store(3)
    root = bulk_build(store, shape, data.items())
    assert TreeChecker(store, shape).check_root(root, "root").ok
    assert dict(items(store, root)) == data
    for key, value in data.items():
        assert get(store, root, key) == value


def test_bulk_build_refuses_unsorted_and_duplicate_keys() -> None:
    store = make_store(4)
    shape = TreeShape(4, 1 << 20)
    with pytest.raises(InvalidArgumentError, match=r"'b'.*'c'"):
        bulk_build(store, shape, [("a", "1"), ("c", "2"), ("b", "3")])
    with pytest.raises(InvalidArgumentError, match="'a'"):
        bulk_build(store, shape, [("a", "1"), ("a", "2")])


def _buffered_tree(order: int = 5, n: int = 600):  # type: ignore[no-untyped-def]
    return random_tree(
        order, 3, steps=n, keyspace=400, max_batch=1, delete_share=0.25, slack=2500 - order * 40
    )


def test_full_flush_empties_every_buffer_and_keeps_the_map() -> None:
    store, shape, root, model = _buffered_tree()
    assert buffered_messages(store, root) > 0
    writer = TreeWriter(store, shape, root)
    writer.flush(FlushPolicy(FlushMode.FULL))
    flushed = writer.finish()
    assert buffered_messages(store, flushed) == 0
    assert dict(items(store, flushed)) == model
    assert TreeChecker(store, shape).check_root(flushed, "root").ok
    # The old version is untouched.
    assert dict(items(store, root)) == model and buffered_messages(store, root) > 0


def test_threshold_flush_only_touches_full_buffers() -> None:
    store, shape, root, model = _buffered_tree()
    fills = [WNode.from_node(root, None).buffer_fill(shape)]
    stack = list(root.children)
    while stack:
        node = store.load(stack.pop())
        fills.append(WNode.from_node(node, None).buffer_fill(shape))
        stack.extend(node.children)
    assert 0 < max(fills) < 1
    before = store.stats.files_written
    writer = TreeWriter(store, shape, root)
    writer.flush(FlushPolicy(FlushMode.THRESHOLD, fill=max(fills) + 1e-9))
    flushed = writer.finish()
    assert store.stats.files_written == before, (
        "no buffer is over the threshold: nothing may be rewritten"
    )
    assert dict(items(store, flushed)) == model
    writer = TreeWriter(store, shape, flushed)
    writer.flush(FlushPolicy(FlushMode.THRESHOLD, fill=0.0))
    emptied = writer.finish()
    assert buffered_messages(store, emptied) == 0
    assert dict(items(store, emptied)) == model
    assert TreeChecker(store, shape).check_root(emptied, "root").ok


def test_threshold_flush_of_a_depth_1_tree_obeys_the_threshold() -> None:
    """A depth-1 tree's root is a leaf: its buffer used to be applied by any threshold flush,
    at any fill (the trial: 2 messages, fill 0.0%, ``--fill 0.9`` emptied it)."""
    order = 5
    shape = TreeShape(order, 4000)
    store = make_store(order)
    writer = TreeWriter(store, shape, None)
    writer.put_many([("a", "1"), ("b", "2")])
    root = writer.finish()
    assert not root.children and len(root.buffer) == 2
    fill = WNode.from_node(root, None).buffer_fill(shape)
    assert 0 < fill < 0.5
    for threshold in (0.5, 0.9, fill):  # "fuller than": a buffer exactly at the threshold stays
        writer = TreeWriter(store, shape, root)
        writer.flush(FlushPolicy(FlushMode.THRESHOLD, fill=threshold))
        kept = writer.finish()
        assert kept.buffer == root.buffer and kept.keys == root.keys, threshold
    # Over the threshold, the root leaf applies its buffer to its own key table.
    writer = TreeWriter(store, shape, root)
    writer.flush(FlushPolicy(FlushMode.THRESHOLD, fill=fill / 2))
    applied = writer.finish()
    assert applied.buffer == {} and applied.keys == ["a", "b"] and applied.values == ["1", "2"]
    assert TreeChecker(store, shape).check_root(applied, "root").ok


def test_flush_subtree_needs_only_the_subtree() -> None:
    # Sets only: a pending delete of a key the root holds is structural work for the driver
    # (see lakecore.maintenance.flush), not for a subtree.
    store, shape, root, model = random_tree(
        5, 3, steps=600, keyspace=400, max_batch=1, delete_share=0.0, slack=2500 - 5 * 40
    )
    assert root.children
    # Flush each child of the root with the root's messages for its range, as an executor would.
    new_children: list[str] = []
    new_keys: list[str] = []
    new_values: list[str] = []
    keys = root.keys
    for i, child in enumerate(root.children):
        low = keys[i - 1] if i else None
        high = keys[i] if i < len(keys) else None
        incoming = {
            k: v
            for k, v in root.buffer.items()
            if (low is None or k > low) and (high is None or k < high)
        }
        result = flush_subtree(store, shape, child, incoming)
        assert result.height >= 1
        new_children.extend(result.nodes)
        new_keys.extend(s[0] for s in result.separators)
        new_values.extend(s[1] for s in result.separators)
        if i < len(keys):
            own = root.buffer.get(keys[i], root.values[i])
            assert own is not None
            new_keys.append(keys[i])
            new_values.append(own)
    rebuilt = Node(new_keys, new_values, new_children)
    assert dict(items(store, rebuilt)) == model
    assert buffered_messages(store, rebuilt) == 0


def test_flush_subtree_of_a_clean_subtree_writes_nothing() -> None:
    store, shape, root, _ = _buffered_tree()
    writer = TreeWriter(store, shape, root)
    writer.flush(FlushPolicy(FlushMode.FULL))
    flushed = writer.finish()
    before = store.stats.files_written
    result = flush_subtree(store, shape, flushed.children[0])
    assert result.nodes == [flushed.children[0]] and not result.changed
    assert store.stats.files_written == before


def test_scans_match_a_sorted_dict() -> None:
    store, _, root, model = _buffered_tree()
    ordered = sorted(model.items())
    for start, stop in [
        (None, None),
        ("k0100", "k0200"),
        ("k0399", None),
        (None, "k0000"),
        ("k0250", "k0250"),
    ]:
        expected = [
            kv
            for kv in ordered
            if (start is None or kv[0] >= start) and (stop is None or kv[0] < stop)
        ]
        assert list(scan(store, root, start, stop)) == expected
    assert list(scan_prefix(store, root, "k01")) == [
        kv for kv in ordered if kv[0].startswith("k01")
    ]
    assert list(scan_prefix(store, root, "")) == ordered


def test_prefix_upper_bound() -> None:
    assert prefix_upper_bound("abc") == "abd"
    assert prefix_upper_bound("a\U0010ffff") == "b"
    assert prefix_upper_bound("\ud7ff") == "\ue000"
    assert prefix_upper_bound("") is None


def test_point_lookup_reads_at_most_one_node_per_level() -> None:
    order = 4
    shape = TreeShape(order, 1 << 20)
    data = {f"k{i:05d}": str(i) for i in range(2000)}
    store = make_store(order, cache=False)
    root = bulk_build(store, shape, data.items())
    depth = TreeChecker(store, shape).check_root(root, "root").leaf_depths.pop()
    for key in ["k00000", "k01999", "k01000", "missing"]:
        before = store.stats.files_read
        get(store, root, key)
        assert store.stats.files_read - before <= depth - 1


def test_cached_reads_do_not_touch_storage() -> None:
    order = 8
    shape = TreeShape(order, 1 << 20)
    store = make_store(order)
    store.cache = NodeCache()
    root = bulk_build(store, shape, ((f"k{i:05d}", "v") for i in range(3000)))
    list(items(store, root))
    reads = store.stats.files_read
    list(items(store, root))
    assert store.stats.files_read == reads
    assert store.stats.cache_hits > 0


def test_a_cycle_is_detected_not_followed() -> None:
    order = 3
    store = make_store(order)
    shape = TreeShape(order, 1 << 20)
    # A node whose child is itself.
    from lakecore.core.locations import new_node_file_path
    from lakecore.core.node import encode_node

    path = new_node_file_path()
    store.storage.write(path, encode_node(Node(["m"], ["1"], [path, path]), order))
    root = Node(["z"], ["2"], [path, path])
    with pytest.raises(TreeStructureError):
        get(store, root, "a")
    report = TreeChecker(store, shape).check_root(root, "root")
    assert any(v.rule in ("cycle", "shared-node") for v in report.violations)
