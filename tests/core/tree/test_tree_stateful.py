"""The tree against a plain dict, with the invariant checker after every commit.

Small orders (3, 4, 5) and node sizes of a few KiB make flushes, splits, merges, borrows,
demotes, root growth and root shrink all happen within a few hundred operations. Every earlier
root must still resolve to the dict as it was when it was committed: copy-on-write must never
change an old version.
"""

from __future__ import annotations

import random
from collections import Counter

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from lakecore.core.node import Node
from lakecore.core.tree import (
    FlushMode,
    FlushPolicy,
    TreeShape,
    TreeWriter,
    get,
    items,
    scan,
    scan_prefix,
)
from lakecore.maintenance.tree_check import TreeChecker
from tests.core.tree.conftest import make_store

EVENTS: Counter[str] = Counter()
KEYS = st.integers(min_value=0, max_value=79).map(lambda i: f"k{i:03d}")
VALUES = st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=12)


class TreeVersusDict(RuleBasedStateMachine):
    @initialize(order=st.sampled_from([3, 4, 5]), slack=st.integers(min_value=300, max_value=1500))
    def setup(self, order: int, slack: int) -> None:
        self.store = make_store(order)
        self.shape = TreeShape(
            order, TreeShape(order, 10**9).empty_node_size() + order * 40 + slack
        )
        self.checker = TreeChecker(self.store, self.shape)
        self.model: dict[str, str] = {}
        self.root: Node = Node()
        self.writer = TreeWriter(self.store, self.shape, self.root)
        self.history: list[tuple[Node, dict[str, str]]] = [(self.root, {})]
        self.pending = 0

    @rule(key=KEYS, value=VALUES)
    def set_key(self, key: str, value: str) -> None:
        self.writer.put(key, value)
        self.model[key] = value
        self.pending += 1

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete_existing(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.writer.put(key, None)
        del self.model[key]
        self.pending += 1

    @rule(key=KEYS)
    def delete_any(self, key: str) -> None:
        self.writer.put(key, None)
        self.model.pop(key, None)
        self.pending += 1

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), value=VALUES)
    def reset_existing(self, data: st.DataObject, value: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.writer.put(key, value)
        self.model[key] = value
        self.pending += 1

    @rule(mode=st.sampled_from([FlushMode.FULL, FlushMode.THRESHOLD]), fill=st.floats(0.0, 0.9))
    def flush(self, mode: FlushMode, fill: float) -> None:
        self.writer.flush(FlushPolicy(mode, fill))
        self.pending += 1

    @rule()
    def commit(self) -> None:
        self.root = self.writer.finish()
        EVENTS.update(self.writer.events.counts)
        report = self.checker.check_root(self.root, "root")
        assert report.ok, [str(v) for v in report.violations]
        assert dict(items(self.store, self.root)) == self.model
        self.history.append((self.root, dict(self.model)))
        self.writer = TreeWriter(self.store, self.shape, self.root)
        self.pending = 0

    @invariant()
    def reads_see_pending_writes(self) -> None:
        # Merge-on-read over the uncommitted working tree is not exposed; check the last
        # committed root with point reads instead, plus one old version at random.
        if not hasattr(self, "history"):
            return
        root, snapshot = self.history[-1]
        for key in ("k000", "k040", "k079"):
            assert get(self.store, root, key) == snapshot.get(key)
        old_root, old_snapshot = random.Random(len(self.history)).choice(self.history)
        assert dict(items(self.store, old_root)) == old_snapshot

    def teardown(self) -> None:
        if not hasattr(self, "history"):
            return
        self.commit()
        for root, snapshot in self.history:
            assert dict(items(self.store, root)) == snapshot
            ordered = sorted(snapshot.items())
            assert list(scan(self.store, root, "k020", "k060")) == [
                kv for kv in ordered if "k020" <= kv[0] < "k060"
            ]
            assert list(scan_prefix(self.store, root, "k01")) == [
                kv for kv in ordered if kv[0].startswith("k01")
            ]


TreeVersusDict.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_tree_versus_dict = TreeVersusDict.TestCase


def test_every_structural_change_was_exercised() -> None:
    """Every structural path must be exercised: the stateful run above (same module, runs
    first) adds its counts to those of a deterministic grow-then-shrink workload, so a change
    that stops reaching one of them (say, root shrink) fails here instead of going unnoticed."""
    _deterministic_workload()
    for event in (
        "root_overflows",
        "flushes",
        "splits",
        "merges",
        "borrows",
        "demotes",
        "root_grows",
        "root_shrinks",
        "leaf_applies",
        "internal_sets",
    ):
        assert EVENTS[event] > 0, f"no {event} happened: {dict(EVENTS)}"


def _deterministic_workload() -> None:
    rnd = random.Random(7)
    for order in (3, 4, 5):
        store = make_store(order)
        shape = TreeShape(order, TreeShape(order, 10**9).empty_node_size() + order * 40 + 600)
        root = Node()
        model: dict[str, str] = {}
        for phase in ("grow", "shrink"):
            for step in range(400):
                writer = TreeWriter(store, shape, root)
                for _ in range(3):
                    key = f"k{rnd.randrange(300):03d}"
                    if phase == "shrink" or rnd.random() < 0.3:
                        writer.put(key, None)
                        model.pop(key, None)
                    else:
                        writer.put(key, f"v{step}")
                        model[key] = f"v{step}"
                if step % 50 == 49:
                    writer.flush(FlushPolicy(FlushMode.FULL))
                root = writer.finish()
                EVENTS.update(writer.events.counts)
            assert dict(items(store, root)) == model


class HeavyTreeVersusDict(TreeVersusDict):
    """The same machine, longer: run by hand with ``pytest -m slow``."""


HeavyTreeVersusDict.TestCase.settings = settings(
    max_examples=1500,
    stateful_step_count=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_tree_versus_dict_heavy = pytest.mark.slow(HeavyTreeVersusDict.TestCase)
