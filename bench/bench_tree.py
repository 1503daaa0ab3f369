"""Benchmark of the B-epsilon tree: write cost per single-key commit, point reads, bulk build.

Everything runs on local disk (a temporary directory behind a ``file://`` Storage, which
fsyncs every file it writes, as lakecore does for real lakehouses). Order 128, catalog-shaped
keys (204 bytes) and values (~93 bytes). Per size (``--keys``, default 10k, 100k, 1M):

1. **Bulk build** (``lakecore.core.tree.bulk_build``) of the initial tree, in keys/s. Baselines in
   the same run: the same number of bytes written as one file through the same Storage, and
   pyarrow writing the same keys and values to one Arrow IPC file (fsynced). For diagnosis, the
   same bulk build into ``memory://`` (no disk) and the fsync cost of one node-sized file.
2. **Write cost per single-key commit**: each commit is ``TreeWriter(store, shape, root)
   .put(key, value)``, ``finish()``, then the root file written with ``create_exclusive`` as
   ``lakecore.core.commit`` does (``encode_root`` with ``previous_root`` and ``created_at_millis``).
   80% updates of random existing tables, 20% inserts of new ones. Per commit: node files
   written (non-root + root), bytes written, latency (median, p90), and totals.
   Before measuring, a warm-up (``--warmup``, not measured) brings the tree to its steady state
   in one batched commit, so that every measured commit pays its share of flushes:
   ``root`` fills the root buffer (the first root overflow); ``deep`` (default) also fills the
   buffers of the level below the root (about ``capacity x (1 + 1.1 x root fan-out)``
   messages), so that pushes reach the leaves, as they do in a lakehouse that has been
   committed to for a long time.
   **Baseline**, interleaved with it in the same run on the same initial tree: a plain
   copy-on-write B-tree on the same node format with write buffers disabled (``cow_put``):
   every commit rewrites the path from the root to the leaf holding the key (splitting a node
   that goes over N-1 keys) and writes a new root. It runs on every ``--baseline-every``-th op
   of the same op stream (its cost per commit has no amortized part, so a sample gives the
   same means at a fraction of the run time).
   Both trees are checked at the end against a dict of what they should hold (the whole map
   and the tree invariants up to ``--verify-full-max`` keys, a sample of keys above).
3. **Point reads** on the tree after the commits: median latency and nodes read per lookup,
   warm (a NodeCache holding every node the lookups touch), cold (``cache=None``, the root
   already decoded in memory) and cold with the root file read and decoded per lookup (a fresh
   process); baseline: a plain dict lookup.

At ``--sweep-keys`` (default 100k) a sweep of ``node_file_max_size_bytes`` shows the
files/commit versus bytes/commit trade-off (B-epsilon tree only; the baseline's nodes do not
depend on it).

Prints one JSON document on stdout and tables on stderr. ``--quick`` is a small run (< 1 min).
Timings are never asserted; the JSON says whether each goal was met.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
import uuid
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import _common as C
import pyarrow as pa

from lakecore.core import keys as K
from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import new_lakehouse_def_path, root_node_file_name
from lakecore.core.node import Node, encoded_size
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeCache, NodeStore, TreeShape, TreeWriter, bulk_build, get, items
from lakecore.core.tree.shape import NODE_PATH_BYTES
from lakecore.core.versions import decode_root, encode_root
from lakecore.maintenance.tree_check import TreeChecker

ORDER = 128
DEFAULT_NODE_BYTES = 1 * C.MiB
GOAL_FILES_RATIO = 2.5
GOAL_FILES_RATIO_KEYS = 1_000_000
GOAL_BULK_KEYS_PER_S = 200_000


# ---------------------------------------------------------------------------------------------
# The baseline: a plain copy-on-write B-tree (no write buffers) on the same node files


def _split_node(node: Node, max_keys: int) -> tuple[list[Node], list[tuple[str, str]]]:
    """A node with one key too many becomes two halves and the separator between them."""
    if len(node.keys) <= max_keys:
        return [node], []
    mid = len(node.keys) // 2
    left = Node(
        node.keys[:mid], node.values[:mid], node.children[: mid + 1] if node.children else []
    )
    right = Node(
        node.keys[mid + 1 :],
        node.values[mid + 1 :],
        node.children[mid + 1 :] if node.children else [],
    )
    return [left, right], [(node.keys[mid], node.values[mid])]


def cow_put(
    store: NodeStore, root: Node, key: str, value: str, *, now_millis: int | None = None
) -> Node:
    """Set ``key`` to ``value`` in a buffer-free tree, copy-on-write; return the new root's
    content (not written; the caller commits it).

    Loads the path from the root to the node holding the key (a B-tree map: any level) or to
    the leaf where it belongs, changes that node, and writes every node of the path below the
    root as a new file. A node with more than N-1 keys splits in two and its middle key moves
    up; a root that splits makes the tree one level taller. Node files carry
    ``created_at_millis`` like the ones TreeWriter writes."""
    max_keys = store.order - 1
    created = {K.CREATED_AT_MILLIS_KEY: str(now_millis if now_millis is not None else C.now_ms())}
    path: list[tuple[Node, int]] = []
    node = root
    while True:
        if node.buffer:
            raise ValueError("cow_put needs a tree without write buffers")
        i = bisect_left(node.keys, key)
        if i < len(node.keys) and node.keys[i] == key:
            changed = Node(list(node.keys), list(node.values), list(node.children))
            changed.values[i] = value
            break
        if not node.children:
            changed = Node(list(node.keys), list(node.values))
            changed.keys.insert(i, key)
            changed.values.insert(i, value)
            break
        path.append((node, i))
        node = store.load(node.children[i])
        if len(path) > 64:
            raise ValueError("tree deeper than 64 levels: a cycle?")
    nodes, seps = _split_node(changed, max_keys)
    for parent, i in reversed(path):
        locations = [
            store.write(Node(n.keys, n.values, n.children, {}, dict(created))) for n in nodes
        ]
        up = Node(list(parent.keys), list(parent.values), list(parent.children))
        up.children[i : i + 1] = locations
        up.keys[i:i] = [s[0] for s in seps]
        up.values[i:i] = [s[1] for s in seps]
        nodes, seps = _split_node(up, max_keys)
    if len(nodes) == 1:
        return nodes[0]
    locations = [store.write(Node(n.keys, n.values, n.children, {}, dict(created))) for n in nodes]
    return Node([s[0] for s in seps], [s[1] for s in seps], locations)


# ---------------------------------------------------------------------------------------------
# Committing trees and measuring each commit


@dataclass
class CommitRecord:
    files: int  # node files written, root included
    bytes: int  # node file bytes written, root included
    seconds: float  # the whole commit
    tree_s: float  # put + finish (B-eps) or the path rewrite (baseline), non-root writes included
    encode_s: float  # encode_root
    root_write_s: float  # create_exclusive of the root file
    root_bytes: int
    files_read: int  # node files read from storage (cache misses)
    flushed: bool  # B-eps: the root overflowed (a flush); baseline: a node split


@dataclass
class Lake:
    """One lakehouse-shaped directory: storage, the definition file the roots name, the tree's
    initial root (from the bulk build) and its file."""

    storage: Storage
    def_path: str
    root: Node


class TreeRun:
    """One tree being committed to, its roots under ``roots/<name>/``. ``kind`` is ``beps``
    (TreeWriter) or ``cow`` (the baseline)."""

    def __init__(
        self, name: str, kind: str, lake: Lake, shape: TreeShape, cache_bytes: int
    ) -> None:
        self.name = name
        self.kind = kind
        self.lake = lake
        self.shape = shape
        self.store = NodeStore(lake.storage, shape.order, cache=NodeCache(cache_bytes))
        self.root = lake.root
        self.version = 0
        self.prefix = f"roots/{name}/"
        self.changes: dict[str, str] = {}
        self.records: list[CommitRecord] = []
        self.events: Counter[str] = Counter()
        self._write_root(self.root, first=True)

    def _write_root(self, node: Node, first: bool = False) -> tuple[int, float, float]:
        """Encode and exclusively create the next root file, as ``lakecore.core.commit`` does."""
        target = 0 if first else self.version + 1
        t0 = time.perf_counter()
        data = encode_root(
            node,
            self.shape.order,
            lakehouse_def_path=self.lake.def_path,
            previous_root=None if first else root_node_file_name(self.version),
            created_at_millis=C.now_ms(),
        )
        t1 = time.perf_counter()
        self.lake.storage.create_exclusive(self.prefix + root_node_file_name(target), data)
        t2 = time.perf_counter()
        self.version = target
        return len(data), t1 - t0, t2 - t1

    def commit(self, key: str, value: str) -> CommitRecord:
        stats = self.store.stats
        files0, bytes0, read0 = stats.files_written, stats.bytes_written, stats.files_read
        t0 = time.perf_counter()
        if self.kind == "beps":
            writer = TreeWriter(self.store, self.shape, self.root)
            writer.put(key, value)
            node = writer.finish()
            flushed = writer.events["root_overflows"] > 0
            self.events.update(writer.events.counts)
        else:
            node = cow_put(self.store, self.root, key, value)
        t1 = time.perf_counter()
        root_bytes, encode_s, write_s = self._write_root(node)
        t2 = time.perf_counter()
        self.changes[key] = value
        files_written = stats.files_written - files0
        files_read = stats.files_read - read0
        if self.kind != "beps":
            # More files than the path below the (old) root: a node split.
            flushed = files_written > self._height() - 1
        self.root = node
        record = CommitRecord(
            files=files_written + 1,
            bytes=stats.bytes_written - bytes0 + root_bytes,
            seconds=t2 - t0,
            tree_s=t1 - t0,
            encode_s=encode_s,
            root_write_s=write_s,
            root_bytes=root_bytes,
            files_read=files_read,
            flushed=flushed,
        )
        self.records.append(record)
        return record

    def _height(self) -> int:
        return tree_height(self.store, self.root)

    def batch(self, messages: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """Put many messages in one TreeWriter and commit them as one version (warm-up)."""
        stats = self.store.stats
        files0, bytes0 = stats.files_written, stats.bytes_written
        t0 = time.perf_counter()
        writer = TreeWriter(self.store, self.shape, self.root)
        for key, value in messages:
            writer.put(key, value)
            self.changes[key] = value
        node = writer.finish()
        root_bytes, _, _ = self._write_root(node)
        self.root = node
        return {
            "messages": len(messages),
            "seconds": round(time.perf_counter() - t0, 2),
            "files_written": stats.files_written - files0 + 1,
            "bytes_written": stats.bytes_written - bytes0 + root_bytes,
            "events": dict(writer.events.counts),
        }


def tree_height(store: NodeStore, root: Node) -> int:
    """Levels of the tree (a leaf root is 1), along the leftmost path."""
    height, node = 1, root
    while node.children:
        height += 1
        node = store.load(node.children[0])
    return height


def warmup_messages(
    shape: TreeShape, store: NodeStore, root: Node, mode: str, key_bytes: int, value_bytes: int
) -> int:
    """How many messages bring a tree to its steady state (see ``--warmup``)."""
    if mode == "none":
        return 0
    capacity = root_buffer_capacity(shape, key_bytes, value_bytes)
    if mode == "root" or tree_height(store, root) <= 2:
        # Height 2: the root's children are leaves, which apply what they get; a full root is
        # the steady state.
        return int(capacity * 1.05) + 1
    return int(capacity * (1 + 1.1 * len(root.children))) + 1


def commits_per_flush_estimate(
    shape: TreeShape, run: TreeRun, key_bytes: int, value_bytes: int
) -> float:
    """Single-key commits between two root flushes, roughly: a flush pushes the messages of the
    child with the most pending bytes (a bit more than an even share of the buffer)."""
    capacity = root_buffer_capacity(shape, key_bytes, value_bytes)
    fanout = max(1, len(run.root.children))
    return max(1.0, 1.5 * capacity / fanout)


def planned_commits(period: float, least: int, most: int, min_flushes: int) -> int:
    """Enough commits for ``min_flushes`` root flushes, within [least, most]."""
    return max(least, min(most, math.ceil(min_flushes * period)))


def root_buffer_capacity(shape: TreeShape, key_bytes: int, value_bytes: int) -> int:
    """Messages that fit in the buffer of a node whose key table is full."""
    n = shape.max_keys
    table = shape.node_size(n * key_bytes, n * value_bytes, (n + 1) * NODE_PATH_BYTES, 0)
    per_message = key_bytes + value_bytes + 12
    return max(0, (shape.node_file_max_size_bytes - table) // per_message)


def warm_up(
    run: TreeRun, ops: C.OpStream, mode: str, key_bytes: int, value_bytes: int
) -> dict[str, Any]:
    """Bring ``run`` (a B-eps tree) to a steady state with one batched, unmeasured commit."""
    if mode == "none":
        return {"mode": mode, "messages": 0}
    capacity = root_buffer_capacity(run.shape, key_bytes, value_bytes)
    fanout = len(run.root.children)
    height = run._height()
    target = warmup_messages(run.shape, run.store, run.root, mode, key_bytes, value_bytes)
    messages = [(k, v) for k, v, _ in ops.take(target)]
    result = run.batch(messages)
    return {
        "mode": mode,
        "root_buffer_capacity_messages": capacity,
        "root_fanout": fanout,
        "height": height,
        **result,
        "root_buffer_messages_after": len(run.root.buffer),
    }


def summarize_records(
    records: Sequence[CommitRecord], flag: str = "flush_commits"
) -> dict[str, Any]:
    """Per-commit means (amortized) and latency summaries. ``flag`` names the count of flagged
    commits: root flushes for B-eps, node splits for the baseline."""
    n = len(records)
    if n == 0:
        return {"commits": 0}
    files = [r.files for r in records]
    nbytes = [r.bytes for r in records]
    return {
        "commits": n,
        "files_per_commit": round(sum(files) / n, 4),
        "nonroot_files_per_commit": round((sum(files) - n) / n, 4),
        "bytes_per_commit": round(sum(nbytes) / n),
        "root_bytes_median": statistics.median(r.root_bytes for r in records),
        "files_total": sum(files),
        "bytes_total": sum(nbytes),
        "files_read_per_commit": round(sum(r.files_read for r in records) / n, 4),
        flag: sum(r.flushed for r in records),
        "latency_ms": C.summarize([r.seconds for r in records], 1e3),
        "phase_ms_median": {
            "tree": round(statistics.median(r.tree_s for r in records) * 1e3, 3),
            "encode_root": round(statistics.median(r.encode_s for r in records) * 1e3, 3),
            "write_root": round(statistics.median(r.root_write_s for r in records) * 1e3, 3),
        },
        "files_per_commit_max": max(files),
    }


# ---------------------------------------------------------------------------------------------
# Verification


def verify(
    run: TreeRun, keys: Sequence[str], values: Sequence[str], full: bool, rng: random.Random
) -> dict[str, Any]:
    """Compare the tree with what it should hold; raise SystemExit on any difference."""
    store = NodeStore(run.lake.storage, run.shape.order, cache=NodeCache())
    t0 = time.perf_counter()
    if full:
        expected = dict(zip(keys, values, strict=True))
        expected.update(run.changes)
        got = list(items(store, run.root))
        ok = got == sorted(expected.items())
        report = TreeChecker(store, run.shape).check_root(run.root, "root")
        if not report.ok:
            raise SystemExit(f"{run.name}: tree invariants broken: {report.violations[:3]}")
        checked = len(expected)
    else:
        sample = list(run.changes)
        sample += [keys[rng.randrange(len(keys))] for _ in range(2000)]
        base = dict(zip(keys, values, strict=True)) if len(keys) <= 2_000_000 else {}

        def want(key: str) -> str | None:
            if key in run.changes:
                return run.changes[key]
            return base.get(key)

        ok = all(get(store, run.root, key) == want(key) for key in sample)
        checked = len(sample)
    if not ok:
        raise SystemExit(f"{run.name}: the tree does not hold the expected map")
    return {
        "mode": "full map + invariants" if full else "sample",
        "keys_checked": checked,
        "ok": ok,
        "seconds": round(time.perf_counter() - t0, 2),
    }


# ---------------------------------------------------------------------------------------------
# Part 1: write cost


def write_cost(
    lake: Lake,
    keys: Sequence[str],
    values: Sequence[str],
    args: argparse.Namespace,
    key_bytes: int,
    value_bytes: int,
) -> tuple[dict[str, Any], TreeRun]:
    shape = TreeShape(ORDER, DEFAULT_NODE_BYTES)
    beps = TreeRun("beps", "beps", lake, shape, args.cache_bytes)
    cow = TreeRun("cow", "cow", lake, shape, args.cache_bytes)
    ops = C.OpStream(keys, args.insert_fraction, seed=args.seed + len(keys))
    warm = warm_up(beps, ops, args.warmup, key_bytes, value_bytes)
    C.log(f"  warm-up: {warm.get('messages', 0)} messages in {warm.get('seconds', 0)} s")
    period = commits_per_flush_estimate(shape, beps, key_bytes, value_bytes)
    planned = planned_commits(period, args.commits, args.max_commits, args.min_flushes)
    every = args.baseline_every or max(1, math.ceil(planned / args.baseline_commits))
    measured = ops.take(planned)
    t0 = time.perf_counter()
    for i, (key, value, _) in enumerate(measured):
        with_cow = i % every == 0
        # Alternate which tree goes first so that drift in machine load hits both alike.
        cow_first = with_cow and (i // every) % 2 == 1
        if cow_first:
            cow.commit(key, value)
        beps.commit(key, value)
        if with_cow and not cow_first:
            cow.commit(key, value)
        if (i + 1) % max(1, planned // 5) == 0:
            C.log(f"  {i + 1}/{planned} commits, {time.perf_counter() - t0:.0f} s")
    rng = random.Random(args.seed)
    full = len(keys) <= args.verify_full_max
    checks = {run.name: verify(run, keys, values, full, rng) for run in (beps, cow)}
    b = summarize_records(beps.records)
    c = summarize_records(cow.records, "split_commits")
    result = {
        "warmup": warm,
        "commits": planned,
        "baseline_every": every,
        "estimated_commits_per_root_flush": round(period, 1),
        "beps": {
            **b,
            "events": dict(beps.events),
            "root_buffer_messages_end": len(beps.root.buffer),
            "amortized_over_min_flushes": b["flush_commits"] >= args.min_flushes,
        },
        "baseline_cow": {**c, "height_end": cow._height()},
        "ratios": {
            "files_per_commit_baseline_over_beps": C.ratio(
                c["files_per_commit"], b["files_per_commit"]
            ),
            "bytes_per_commit_beps_over_baseline": C.ratio(
                b["bytes_per_commit"], c["bytes_per_commit"]
            ),
            "latency_median_beps_over_baseline": C.ratio(
                b["latency_ms"]["median"], c["latency_ms"]["median"]
            ),
            "latency_p90_beps_over_baseline": C.ratio(
                b["latency_ms"]["p90"], c["latency_ms"]["p90"]
            ),
            "latency_mean_beps_over_baseline": C.ratio(
                b["latency_ms"]["mean"], c["latency_ms"]["mean"]
            ),
        },
        "verify": checks,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return result, beps


def node_size_sweep(
    lake: Lake,
    keys: Sequence[str],
    args: argparse.Namespace,
    key_bytes: int,
    value_bytes: int,
    main: dict[str, Any] | None,
) -> dict[str, Any]:
    """B-eps commits at several node sizes on one bulk-built tree. ``main`` is the main run at
    this tree size (1 MiB nodes, with the baseline), reused for that node size."""
    out: dict[str, Any] = {
        "keys": len(keys),
        "commits_per_size": f"enough for {args.min_flushes} root flushes, within "
        f"[{args.sweep_commits}, {args.sweep_max_commits}], at most {args.sweep_seconds} s",
        "sizes": {},
    }
    baseline = main["baseline_cow"] if main else None
    biggest = max_node_bytes(lake)
    for size in args.sweep_sizes:
        label = C.format_size(size)
        shape = TreeShape(ORDER, size)
        capacity = root_buffer_capacity(shape, key_bytes, value_bytes)
        if biggest > size:
            out["sizes"][label] = {"skipped": f"bulk-built nodes are up to {biggest} bytes"}
            continue
        if main is not None and size == DEFAULT_NODE_BYTES:
            s = {k: v for k, v in main["beps"].items() if k != "root_buffer_messages_end"}
            entry: dict[str, Any] = {
                "from": "the main run at this size",
                "root_buffer_capacity_messages": capacity,
                "warmup_messages": main["warmup"].get("messages", 0),
                **s,
            }
        else:
            run = TreeRun(f"sweep-{label}", "beps", lake, shape, args.cache_bytes)
            ops = C.OpStream(keys, args.insert_fraction, seed=args.seed + size)
            period = commits_per_flush_estimate(shape, run, key_bytes, value_bytes)
            warm = warm_up(run, ops, args.warmup, key_bytes, value_bytes)
            planned = planned_commits(
                period, args.sweep_commits, args.sweep_max_commits, args.min_flushes
            )
            t0 = time.perf_counter()
            for key, value, _ in ops.take(planned):
                run.commit(key, value)
                if time.perf_counter() - t0 > args.sweep_seconds:
                    break
            s = summarize_records(run.records)
            entry = {
                "root_buffer_capacity_messages": capacity,
                "warmup_messages": warm.get("messages", 0),
                "estimated_commits_per_root_flush": round(period, 1),
                **s,
                "events": dict(run.events),
            }
            C.log(
                f"  sweep {label}: {s['commits']} commits, {s['flush_commits']} root flushes, "
                f"{s['files_per_commit']} files/commit"
            )
        entry["amortized_over_min_flushes"] = entry["flush_commits"] >= args.min_flushes
        if baseline is not None:
            entry["files_ratio_baseline_over_beps"] = C.ratio(
                baseline["files_per_commit"], entry["files_per_commit"]
            )
            entry["bytes_ratio_beps_over_baseline"] = C.ratio(
                entry["bytes_per_commit"], baseline["bytes_per_commit"]
            )
        out["sizes"][label] = entry
    if baseline is not None:
        out["baseline_cow"] = {
            k: baseline[k]
            for k in ("commits", "files_per_commit", "bytes_per_commit", "latency_ms")
        }
    return out


def max_node_bytes(lake: Lake) -> int:
    """The largest node directly under the root (bulk-built nodes are evenly filled)."""
    store = NodeStore(lake.storage, ORDER, cache=None)
    sizes = [encoded_size(lake.root, ORDER)]
    for child in lake.root.children[:4]:
        sizes.append(store.load_sized(child)[1])
    return max(sizes)


# ---------------------------------------------------------------------------------------------
# Part 2: reads


def _time_each(
    fn: Callable[[str], object], lookups: Sequence[str]
) -> tuple[list[float], list[object]]:
    samples, answers = [], []
    clock = time.perf_counter
    for key in lookups:
        start = clock()
        answers.append(fn(key))
        samples.append(clock() - start)
    return samples, answers


def reads(
    run: TreeRun, keys: Sequence[str], values: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    rng = random.Random(args.seed + 3)
    changed = list(run.changes)
    n = args.lookups

    def pick(count: int) -> list[str]:
        # 80% random catalog keys, 20% keys the commits wrote (some still in the root buffer).
        return [
            changed[rng.randrange(len(changed))]
            if changed and rng.random() < 0.2
            else keys[rng.randrange(len(keys))]
            for _ in range(count)
        ]

    expected = dict(zip(keys, values, strict=True))
    expected.update(run.changes)
    storage = run.lake.storage
    out: dict[str, Any] = {"lookups_warm": n, "root_buffer_messages": len(run.root.buffer)}

    lookups = pick(n)
    samples, answers = _time_each(expected.get, lookups)
    out["dict_lookup_us"] = C.summarize(samples, 1e6)

    warm_store = NodeStore(storage, ORDER, cache=NodeCache())
    for key in lookups:
        get(warm_store, run.root, key)
    before = warm_store.stats.as_dict()
    samples, answers = _time_each(lambda k: get(warm_store, run.root, k), lookups)
    after = warm_store.stats.as_dict()
    _check_answers(lookups, answers, expected, "warm")
    out["warm"] = {
        "latency_us": C.summarize(samples, 1e6),
        "nodes_read_from_storage_per_lookup": round(
            (after["files_read"] - before["files_read"]) / n, 3
        ),
        "nodes_visited_below_root_per_lookup": round(
            (
                after["cache_hits"]
                - before["cache_hits"]
                + after["files_read"]
                - before["files_read"]
            )
            / n,
            3,
        ),
    }

    cold_lookups = pick(max(1, n // 10))
    cold_store = NodeStore(storage, ORDER, cache=None)
    samples, answers = _time_each(lambda k: get(cold_store, run.root, k), cold_lookups)
    _check_answers(cold_lookups, answers, expected, "cold")
    out["cold_root_in_memory"] = {
        "lookups": len(cold_lookups),
        "latency_us": C.summarize(samples, 1e6),
        "nodes_read_per_lookup": round(cold_store.stats.files_read / len(cold_lookups), 3),
        "bytes_read_per_lookup": round(cold_store.stats.bytes_read / len(cold_lookups)),
    }

    root_path = run.prefix + root_node_file_name(run.version)
    fresh_lookups = pick(max(1, n // 50))
    fresh_store = NodeStore(storage, ORDER, cache=None)
    root_bytes = [0]

    def fresh_get(key: str) -> str | None:
        data = storage.read(root_path)
        root_bytes[0] += len(data)
        info = decode_root(data, run.version, root_path, ORDER)
        return get(fresh_store, info.node, key)

    samples, answers = _time_each(fresh_get, fresh_lookups)
    _check_answers(fresh_lookups, answers, expected, "cold with root")
    m = len(fresh_lookups)
    out["cold_root_from_disk"] = {
        "lookups": m,
        "latency_us": C.summarize(samples, 1e6),
        "nodes_read_per_lookup": round(1 + fresh_store.stats.files_read / m, 3),
        "bytes_read_per_lookup": round((root_bytes[0] + fresh_store.stats.bytes_read) / m),
    }
    out["ratios"] = {
        "warm_median_over_dict": C.ratio(
            out["warm"]["latency_us"]["median"], out["dict_lookup_us"]["median"]
        ),
        "cold_median_over_warm": C.ratio(
            out["cold_root_in_memory"]["latency_us"]["median"], out["warm"]["latency_us"]["median"]
        ),
    }
    return out


def _check_answers(
    lookups: Sequence[str], answers: Sequence[object], expected: dict[str, str], what: str
) -> None:
    for key, answer in zip(lookups, answers, strict=True):
        if answer != expected.get(key):
            raise SystemExit(
                f"{what} lookup of {key!r} gave {answer!r}, expected {expected.get(key)!r}"
            )


# ---------------------------------------------------------------------------------------------
# Part 3: bulk build


_WARMED: list[bool] = []


def _warm_code_paths(keys: list[str], values: list[str]) -> None:
    """One small untimed bulk build, so that the first timed one does not pay for imports and
    first-use set-up."""
    if _WARMED:
        return
    storage = Storage(f"memory://bench-tree-warm-{uuid.uuid4()}")
    store = NodeStore(storage, ORDER, cache=None)
    bulk_build(
        store, TreeShape(ORDER, DEFAULT_NODE_BYTES), zip(keys[:1000], values[:1000], strict=True)
    )
    storage.delete(store.stats.written_paths)
    _WARMED.append(True)


def bulk(
    directory: str, keys: list[str], values: list[str], args: argparse.Namespace
) -> tuple[Lake, dict[str, Any]]:
    _warm_code_paths(keys, values)
    storage = Storage("file://" + directory)
    def_path = new_lakehouse_def_path()
    storage.write(def_path, LakehouseDef(name="bench", order=ORDER).to_bytes())
    shape = TreeShape(ORDER, DEFAULT_NODE_BYTES)
    store = NodeStore(storage, ORDER, cache=NodeCache())
    n = len(keys)
    t0 = time.perf_counter()
    root = bulk_build(store, shape, zip(keys, values, strict=True))
    seconds = time.perf_counter() - t0
    files, nbytes = store.stats.files_written, store.stats.bytes_written
    result: dict[str, Any] = {
        "keys": n,
        "seconds": round(seconds, 3),
        "keys_per_s": round(n / seconds),
        "node_files": files,
        "bytes": nbytes,
        "root_fanout": len(root.children),
    }

    # Baseline 1: the same bytes as one file, through the same Storage (fsynced).
    blob = os.urandom(min(nbytes, 1 << 20)) * (nbytes // (1 << 20) + 1)
    blob = blob[:nbytes]
    t0 = time.perf_counter()
    storage.write("baseline/one-file.bin", blob)
    one_file = time.perf_counter() - t0
    os.unlink(os.path.join(directory, "baseline", "one-file.bin"))
    del blob

    # Baseline 2: pyarrow writing the same keys and values to one Arrow IPC file (fsynced).
    path = os.path.join(directory, "baseline", "one-file.arrow")
    t0 = time.perf_counter()
    table = pa.table({"key": pa.array(keys, pa.string()), "pvalue": pa.array(values, pa.string())})
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    arrow = time.perf_counter() - t0
    arrow_bytes = os.path.getsize(path)
    os.unlink(path)
    del table

    # Diagnosis: the same bulk build without a disk (memory://), and one node file's fsync cost.
    mem_storage = Storage(f"memory://bench-tree-{uuid.uuid4()}")
    mem_store = NodeStore(mem_storage, ORDER, cache=None)
    t0 = time.perf_counter()
    bulk_build(mem_store, shape, zip(keys, values, strict=True))
    memory = time.perf_counter() - t0
    mem_storage.delete(mem_store.stats.written_paths)
    per_file = []
    node_like = os.urandom(max(1, nbytes // max(1, files)))
    for i in range(args.fsync_probes):
        t0 = time.perf_counter()
        storage.write(f"baseline/probe-{i}.bin", node_like)
        per_file.append(time.perf_counter() - t0)
    storage.delete([f"baseline/probe-{i}.bin" for i in range(args.fsync_probes)])

    result["baseline_one_file_same_bytes"] = {
        "seconds": round(one_file, 3),
        "keys_per_s": round(n / one_file),
    }
    result["baseline_pyarrow_one_ipc_file"] = {
        "seconds": round(arrow, 3),
        "keys_per_s": round(n / arrow),
        "bytes": arrow_bytes,
    }
    result["diagnosis"] = {
        "memory_storage_keys_per_s": round(n / memory),
        "storage_write_one_node_file_ms_median": round(statistics.median(per_file) * 1e3, 3),
        "estimated_fsync_bound_seconds": round(files * statistics.median(per_file), 2),
    }
    result["ratios"] = {
        "bulk_over_one_file_rate": C.ratio(n / seconds, n / one_file),
        "bulk_over_pyarrow_rate": C.ratio(n / seconds, n / arrow),
    }
    return Lake(storage, def_path, root), result


# ---------------------------------------------------------------------------------------------
# Driver


def run_size(n: int, args: argparse.Namespace, doc: dict[str, Any]) -> None:
    label = str(n)
    C.log(f"\n== {n} keys ==")
    t0 = time.perf_counter()
    keys, values = C.catalog(n, args.seed)
    key_bytes = round(sum(map(len, keys)) / n)
    value_bytes = round(sum(map(len, values)) / n)
    C.log(
        f"  generated in {time.perf_counter() - t0:.1f} s (key {key_bytes} B, value {value_bytes} B)"
    )
    with C.temp_dir(f"bench_tree_{n}_", args.tmpdir, keep=args.keep) as directory:
        lake, bulk_result = bulk(directory, keys, values, args)
        doc["bulk_build"][label] = bulk_result
        C.log(
            f"  bulk build: {bulk_result['keys_per_s']:,} keys/s ({bulk_result['node_files']} files)"
        )
        writes, beps = write_cost(lake, keys, values, args, key_bytes, value_bytes)
        doc["write_cost"][label] = writes
        C.log(
            f"  commits: beps {writes['beps']['files_per_commit']} files/commit, "
            f"baseline {writes['baseline_cow']['files_per_commit']}"
        )
        doc["reads"][label] = reads(beps, keys, values, args)
        if n == args.sweep_keys and args.sweep_sizes:
            doc["node_size_sweep"] = node_size_sweep(
                lake, keys, args, key_bytes, value_bytes, writes
            )
    doc["sizes_seconds"][label] = round(time.perf_counter() - t0, 1)


def goals(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    writes = doc["write_cost"]
    if writes:
        at = (
            str(GOAL_FILES_RATIO_KEYS)
            if str(GOAL_FILES_RATIO_KEYS) in writes
            else max(writes, key=int)
        )
        value = writes[at]["ratios"]["files_per_commit_baseline_over_beps"]
        out.append(
            C.goal(
                f"node files per commit, baseline / B-epsilon, at {at} keys",
                f">= {GOAL_FILES_RATIO} (stated at {GOAL_FILES_RATIO_KEYS} keys)",
                value,
                value is not None and value >= GOAL_FILES_RATIO,
                measured_at_goal_size=at == str(GOAL_FILES_RATIO_KEYS),
            )
        )
    for label, result in doc["bulk_build"].items():
        out.append(
            C.goal(
                f"bulk build rate at {label} keys (local disk)",
                f">= {GOAL_BULK_KEYS_PER_S} keys/s",
                result["keys_per_s"],
                result["keys_per_s"] >= GOAL_BULK_KEYS_PER_S,
            )
        )
    return out


def print_tables(doc: dict[str, Any]) -> None:
    rows = []
    for label, w in doc["write_cost"].items():
        for name, key in (("B-eps", "beps"), ("baseline", "baseline_cow")):
            r = w[key]
            rows.append(
                [
                    label,
                    name,
                    r["commits"],
                    r["files_per_commit"],
                    r["bytes_per_commit"] / 1e3,
                    r["latency_ms"]["median"],
                    r["latency_ms"]["p90"],
                    r["latency_ms"]["mean"],
                    r.get("flush_commits", r.get("split_commits")),
                ]
            )
        rows.append(
            [
                label,
                "ratio",
                "",
                w["ratios"]["files_per_commit_baseline_over_beps"],
                w["ratios"]["bytes_per_commit_beps_over_baseline"],
                w["ratios"]["latency_median_beps_over_baseline"],
                w["ratios"]["latency_p90_beps_over_baseline"],
                w["ratios"]["latency_mean_beps_over_baseline"],
                "",
            ]
        )
    C.print_table(
        "write cost per single-key commit (ratio row: files base/beps, others beps/base)",
        [
            "keys",
            "tree",
            "commits",
            "files/c",
            "KB/c",
            "ms p50",
            "ms p90",
            "ms mean",
            "flush/split",
        ],
        rows,
    )
    sweep = doc.get("node_size_sweep")
    if sweep:
        rows = []
        for label, s in sweep["sizes"].items():
            if "skipped" in s:
                rows.append([label, "skipped", "", "", "", "", "", "", ""])
                continue
            rows.append(
                [
                    label,
                    s["commits"],
                    s["files_per_commit"],
                    s["bytes_per_commit"] / 1e3,
                    s["latency_ms"]["median"],
                    s["latency_ms"]["p90"],
                    s["flush_commits"],
                    s["amortized_over_min_flushes"],
                    s.get("files_ratio_baseline_over_beps"),
                ]
            )
        C.print_table(
            f"node_file_max_size_bytes sweep at {sweep['keys']} keys (B-eps)",
            [
                "node max",
                "commits",
                "files/c",
                "KB/c",
                "ms p50",
                "ms p90",
                "flushes",
                "amortized",
                "files base/beps",
            ],
            rows,
        )
    rows = []
    for label, r in doc["reads"].items():
        rows.append(
            [
                label,
                r["dict_lookup_us"]["median"],
                r["warm"]["latency_us"]["median"],
                r["warm"]["nodes_visited_below_root_per_lookup"],
                r["cold_root_in_memory"]["latency_us"]["median"],
                r["cold_root_in_memory"]["nodes_read_per_lookup"],
                r["cold_root_from_disk"]["latency_us"]["median"],
                r["cold_root_from_disk"]["nodes_read_per_lookup"],
            ]
        )
    C.print_table(
        "point lookups (median us; nodes per lookup)",
        ["keys", "dict", "warm", "nodes", "cold", "nodes", "cold+root", "nodes"],
        rows,
    )
    rows = []
    for label, b in doc["bulk_build"].items():
        rows.append(
            [
                label,
                b["keys_per_s"],
                b["baseline_one_file_same_bytes"]["keys_per_s"],
                b["baseline_pyarrow_one_ipc_file"]["keys_per_s"],
                b["diagnosis"]["memory_storage_keys_per_s"],
                b["node_files"],
                b["diagnosis"]["storage_write_one_node_file_ms_median"],
            ]
        )
    C.print_table(
        "bulk build (keys/s)",
        [
            "keys",
            "bulk",
            "1 file same B",
            "pyarrow 1 file",
            "bulk memory://",
            "files",
            "ms/file write",
        ],
        rows,
    )
    C.print_table(
        "goals", ["goal", "value", "met"], [[g["goal"], g["value"], g["met"]] for g in doc["goals"]]
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="10000,100000,1000000", help="comma-separated tree sizes")
    parser.add_argument(
        "--commits",
        type=int,
        default=None,
        help="least measured single-key commits per size (default 1200)",
    )
    parser.add_argument(
        "--max-commits",
        type=int,
        default=None,
        help="most measured commits per size (default 2500); between the two, enough "
        "for --min-flushes root flushes",
    )
    parser.add_argument("--min-flushes", type=int, default=10, help="root flushes to amortize over")
    parser.add_argument(
        "--baseline-every",
        type=int,
        default=None,
        help="run the baseline on every k-th op (default: about --baseline-commits in all)",
    )
    parser.add_argument(
        "--baseline-commits", type=int, default=None, help="baseline commits per size (default 400)"
    )
    parser.add_argument("--warmup", choices=("deep", "root", "none"), default="deep")
    parser.add_argument("--insert-fraction", type=float, default=0.2)
    parser.add_argument(
        "--lookups",
        type=int,
        default=None,
        help="warm lookups per size (cold: 1/10, fresh root: 1/50)",
    )
    parser.add_argument(
        "--sweep-keys",
        type=int,
        default=None,
        help="tree size of the node size sweep (default 100000)",
    )
    parser.add_argument(
        "--sweep-sizes",
        default="128K,256K,1M,4M",
        help="node_file_max_size_bytes values; '' to skip",
    )
    parser.add_argument(
        "--sweep-commits", type=int, default=None, help="least commits per sweep size (default 500)"
    )
    parser.add_argument(
        "--sweep-max-commits",
        type=int,
        default=None,
        help="most commits per sweep size (default 2000)",
    )
    parser.add_argument(
        "--sweep-seconds", type=float, default=None, help="time budget per sweep size (default 15)"
    )
    parser.add_argument(
        "--verify-full-max",
        type=int,
        default=100_000,
        help="check the whole map and the invariants up to this many keys (a sample above)",
    )
    parser.add_argument(
        "--cache-bytes",
        type=C.parse_size,
        default=C.parse_size("256M"),
        help="NodeCache per tree during commits (lakecore's default 256M)",
    )
    parser.add_argument("--fsync-probes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--tmpdir", default=None, help="where the scratch lakehouses go (default: system temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and counts, under a minute"
    )
    args = parser.parse_args(argv)
    if args.quick:
        if args.keys == parser.get_default("keys"):
            args.keys = "10000,20000"
        args.commits = args.commits or 250
        args.max_commits = args.max_commits or 600
        args.baseline_commits = args.baseline_commits or 120
        args.sweep_keys = args.sweep_keys or 20000
        args.sweep_commits = args.sweep_commits or 150
        args.sweep_max_commits = args.sweep_max_commits or 400
        args.sweep_seconds = args.sweep_seconds or 4
        args.lookups = args.lookups or 1000
        if args.sweep_sizes == parser.get_default("sweep_sizes"):
            args.sweep_sizes = "128K,1M"
        args.fsync_probes = min(args.fsync_probes, 5)
    args.commits = args.commits or 1200
    args.max_commits = max(args.commits, args.max_commits or 2500)
    args.baseline_commits = args.baseline_commits or 400
    args.sweep_keys = args.sweep_keys or 100_000
    args.sweep_commits = args.sweep_commits or 500
    args.sweep_max_commits = max(args.sweep_commits, args.sweep_max_commits or 2000)
    args.sweep_seconds = args.sweep_seconds or 15.0
    args.lookups = args.lookups or 5000
    args.sizes = C.parse_int_list(args.keys)
    args.sweep_sizes = [C.parse_size(s) for s in args.sweep_sizes.split(",") if s.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    doc: dict[str, Any] = {
        "benchmark": "bench_tree",
        "config": {
            "sizes": args.sizes,
            "order": ORDER,
            "node_file_max_size_bytes": DEFAULT_NODE_BYTES,
            "commits_per_size": f"enough for {args.min_flushes} root flushes within "
            f"[{args.commits}, {args.max_commits}]",
            "baseline_commits_per_size": args.baseline_commits if not args.baseline_every else None,
            "baseline_every": args.baseline_every,
            "warmup": args.warmup,
            "insert_fraction": args.insert_fraction,
            "storage": "file:// (local disk, every file fsynced)",
            "tmpdir": args.tmpdir or "system temp dir",
            "sweep_keys": args.sweep_keys,
            "sweep_sizes": [C.format_size(s) for s in args.sweep_sizes],
            "seed": args.seed,
            "quick": args.quick,
        },
        "environment": C.environment(),
        "notes": [
            "files/bytes per commit are means over all measured commits (amortized); latencies are "
            "median/p90 of individually timed commits",
            "ratios: files = baseline/beps (>1: B-eps writes fewer files); bytes and latency = beps/baseline "
            "(>1: B-eps writes more bytes / is slower)",
            "the B-eps root file holds the root write buffer (up to node_file_max_size_bytes) and is "
            "rewritten in full on every commit; the baseline's root holds only its key table",
        ],
        "bulk_build": {},
        "write_cost": {},
        "reads": {},
        "sizes_seconds": {},
    }
    for n in args.sizes:
        run_size(n, args, doc)
    if args.sweep_sizes and args.sweep_keys not in args.sizes:
        C.log(f"\n== sweep at {args.sweep_keys} keys ==")
        keys, values = C.catalog(args.sweep_keys, args.seed)
        with C.temp_dir("bench_tree_sweep_", args.tmpdir, keep=args.keep) as directory:
            lake, _ = bulk(directory, keys, values, args)
            doc["node_size_sweep"] = node_size_sweep(
                lake,
                keys,
                args,
                round(sum(map(len, keys)) / len(keys)),
                round(sum(map(len, values)) / len(values)),
                None,
            )
    doc["goals"] = goals(doc)
    doc["total_seconds"] = round(time.perf_counter() - started, 1)
    C.print_json(doc)
    print_tables(doc)
    C.log(f"\ntotal {doc['total_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
