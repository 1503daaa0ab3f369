"""Fixtures for tree tests: a fresh in-memory lakehouse root per test."""

from __future__ import annotations

import uuid

import pytest

from lakecore.storage import Storage
from lakecore.tree import NodeCache, NodeStore, TreeShape


def make_store(order: int, cache: bool = True) -> NodeStore:
    storage = Storage(f"memory://tree-tests/{uuid.uuid4()}")
    return NodeStore(storage, order, cache=NodeCache() if cache else None)


@pytest.fixture
def store_factory():  # type: ignore[no-untyped-def]
    return make_store


__all__ = ["TreeShape", "make_store"]
