"""Fixtures for tree tests: a fresh in-memory lakehouse root per test."""

from __future__ import annotations

import random
import uuid

import pytest

from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeCache, NodeStore, TreeShape, TreeWriter
from lakecore.lakehouse.treeinfo import buffered_messages


def make_store(order: int, cache: bool = True) -> NodeStore:
    storage = Storage(f"memory://tree-tests/{uuid.uuid4()}")
    return NodeStore(storage, order, cache=NodeCache() if cache else None)


@pytest.fixture
def store_factory():  # type: ignore[no-untyped-def]
    return make_store


def random_tree(
    order: int,
    seed: int,
    *,
    steps: int = 500,
    keyspace: int = 600,
    max_batch: int = 4,
    delete_share: float = 0.3,
    slack: int = 1200,
) -> tuple[NodeStore, TreeShape, Node, dict[str, str]]:
    """A tree built by many small commits of random sets and deletes, and the dict it equals.

    Nodes are only ``slack`` bytes bigger than an empty key table, so buffers fill and flush."""
    rnd = random.Random(seed)
    shape = TreeShape(order, TreeShape(order, 10**9).empty_node_size() + order * 40 + slack)
    store = make_store(order)
    root, model = Node(), {}
    for step in range(steps):
        writer = TreeWriter(store, shape, root)
        for _ in range(rnd.randint(1, max_batch)):
            key = f"k{rnd.randrange(keyspace):04d}"
            if rnd.random() < delete_share:
                writer.put(key, None)
                model.pop(key, None)
            else:
                writer.put(key, f"v{step}")
                model[key] = f"v{step}"
        root = writer.finish()
    return store, shape, root, model


__all__ = ["buffered_messages", "make_store", "random_tree"]
