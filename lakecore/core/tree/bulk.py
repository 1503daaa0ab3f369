"""Bulk build: a balanced tree written bottom-up from sorted items.

The fast path for loading a large catalog (and for making large test and benchmark lakes):
every node is written once, with no buffers and no flushes.

Shape for ``n`` items at order ``N``:

    leaves      m = ceil((n + 1) / N) leaves hold n - (m - 1) items, spread evenly;
                the m - 1 items between neighbouring leaves become their separators
    each level  p = ceil(c / N) nodes share the c children of the level below evenly; the
                separators between nodes move up; stop when one node (the root) remains

Spreading evenly keeps every node within the fill rules: ``m`` is the least count at which no
node exceeds N-1 keys, and at that count the average fill is at least ceil(N/2) - 1 keys.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from lakecore.core import keys as K
from lakecore.core.locations import new_node_file_path
from lakecore.core.node import Node, encoded_size
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import NodeStore
from lakecore.errors import InvalidArgumentError, LakecoreError

# Nodes handed to the parallel writer at a time: enough to keep its threads busy, few enough
# that memory stays bounded for very large builds.
_WRITE_BATCH = 256


def _collect_sorted(items: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    keys: list[str] = []
    values: list[str] = []
    previous: str | None = None
    for key, value in items:
        if previous is not None and key <= previous:
            raise InvalidArgumentError(
                f"bulk build needs strictly ascending keys: item {len(keys)} key {key!r} "
                f"is not after {previous!r}"
            )
        if not isinstance(value, str):
            raise InvalidArgumentError(f"bulk build: the pvalue of {key!r} must be a string")
        keys.append(key)
        values.append(value)
        previous = key
    return keys, values


def bulk_build(
    store: NodeStore,
    shape: TreeShape,
    items: Iterable[tuple[str, str]],
    *,
    now_millis: int | None = None,
) -> Node:
    """Write a balanced tree of ``items`` (strictly ascending keys); return the root's content,
    which the caller commits as a root node file."""
    keys, values = _collect_sorted(items)
    created = str(now_millis if now_millis is not None else int(time.time() * 1000))
    order = shape.order

    pending: list[tuple[str, Node]] = []

    def write(node: Node) -> str:
        node.system[K.CREATED_AT_MILLIS_KEY] = created
        size = encoded_size(node, order)
        if size > shape.node_file_max_size_bytes:
            raise LakecoreError(
                f"bulk build: a node of {len(node.keys)} keys would be {size} bytes, over "
                f"node_file_max_size_bytes={shape.node_file_max_size_bytes}; keys or pvalues are too long"
            )
        # Paths are chosen up front so that parents can point at children still being written.
        path = new_node_file_path()
        pending.append((path, node))
        if len(pending) >= _WRITE_BATCH:
            store.write_many(pending)
            pending.clear()
        return path

    n = len(keys)
    if n <= shape.max_keys:
        return Node(keys, values)
    leaves = math.ceil((n + 1) / order)
    base, extra = divmod(n - (leaves - 1), leaves)
    children: list[str] = []
    sep_keys: list[str] = []
    sep_values: list[str] = []
    start = 0
    for p in range(leaves):
        end = start + base + (1 if p < extra else 0)
        children.append(write(Node(keys[start:end], values[start:end])))
        if p < leaves - 1:
            sep_keys.append(keys[end])
            sep_values.append(values[end])
        start = end + 1
    while len(children) > order:
        count = len(children)
        parents = math.ceil(count / order)
        base, extra = divmod(count, parents)
        next_children: list[str] = []
        next_keys: list[str] = []
        next_values: list[str] = []
        c = 0
        for p in range(parents):
            take = base + (1 if p < extra else 0)
            node = Node(
                sep_keys[c : c + take - 1], sep_values[c : c + take - 1], children[c : c + take]
            )
            next_children.append(write(node))
            if p < parents - 1:
                next_keys.append(sep_keys[c + take - 1])
                next_values.append(sep_values[c + take - 1])
            c += take
        children, sep_keys, sep_values = next_children, next_keys, next_values
    store.write_many(pending)  # every node is written before the caller can commit the root
    return Node(sep_keys, sep_values, children)
