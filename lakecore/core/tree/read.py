"""Merge-on-read: point lookups, ordered range and prefix scans, and the resolved map.

Resolution rule (docs/format.md#reading): walk from the root; at each node the newest buffer
message for the key decides (a set gives its pvalue, a delete gives absent); else the node's
key table decides; else descend into the child whose range holds the key. Messages higher up
are newer, so the first decision on the way down is final. A point lookup therefore reads at
most one node per level.

A scan carries the messages of the ancestors that fall in a child's range down into that
child (``pending``), where they override everything older: the child's own buffer, its key
table and its subtree.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from lakecore.core.node import Node
from lakecore.core.tree.store import NodeStore
from lakecore.errors import TreeStructureError


def _max_depth(store: NodeStore) -> int:
    from lakecore.core.tree.shape import TreeShape

    return TreeShape(store.order, 1).max_depth


def get(store: NodeStore, root: Node, key: str) -> str | None:
    """The resolved pvalue of ``key``, or None when it is absent."""
    node = root
    limit = _max_depth(store)
    location = "root"
    for _ in range(limit):
        if key in node.buffer:
            return node.buffer[key]
        keys = node.keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return node.values[i]
        if not node.children:
            return None
        location = node.children[i]
        node = store.load(location)
    raise TreeStructureError(
        location, f"tree is deeper than order {store.order} allows ({limit} levels): a cycle?"
    )


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix`` (None if none)."""
    trimmed = prefix
    while trimmed:
        last = ord(trimmed[-1])
        if last < 0x10FFFF:
            nxt = last + 1
            if 0xD800 <= nxt <= 0xDFFF:  # skip surrogates, never part of valid UTF-8
                nxt = 0xE000
            return trimmed[:-1] + chr(nxt)
        trimmed = trimmed[:-1]
    return None


def scan(
    store: NodeStore, root: Node, start: str | None = None, stop: str | None = None
) -> Iterator[tuple[str, str]]:
    """Resolved (key, pvalue) pairs with ``start <= key < stop``, in key order."""
    yield from _scan(store, root, start, stop, {}, 0, _max_depth(store), "root")


def scan_prefix(store: NodeStore, root: Node, prefix: str) -> Iterator[tuple[str, str]]:
    return scan(store, root, prefix or None, prefix_upper_bound(prefix) if prefix else None)


def items(store: NodeStore, root: Node) -> Iterator[tuple[str, str]]:
    """The whole resolved map, in key order."""
    return scan(store, root)


def _in_range(key: str, start: str | None, stop: str | None) -> bool:
    return (start is None or key >= start) and (stop is None or key < stop)


def _scan(
    store: NodeStore,
    node: Node,
    start: str | None,
    stop: str | None,
    pending: dict[str, str | None],
    depth: int,
    limit: int,
    location: str,
) -> Iterator[tuple[str, str]]:
    if depth >= limit:
        raise TreeStructureError(
            location, f"tree is deeper than order {store.order} allows: a cycle?"
        )
    # Ancestors' messages are newer than this node's buffer.
    merged: dict[str, str | None] = {
        k: v for k, v in node.buffer.items() if _in_range(k, start, stop)
    }
    merged.update(pending)
    keys = node.keys
    if not node.children:
        out: dict[str, str] = {}
        lo = 0 if start is None else bisect_left(keys, start)
        hi = len(keys) if stop is None else bisect_left(keys, stop)
        for i in range(lo, hi):
            out[keys[i]] = node.values[i]
        for key, value in merged.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        for key in sorted(out):
            yield key, out[key]
        return
    message_keys = sorted(merged)
    n_children = len(node.children)
    for i in range(n_children):
        low = keys[i - 1] if i > 0 else None
        high = keys[i] if i < len(keys) else None
        # Skip children entirely outside [start, stop).
        if not (
            (stop is None or low is None or low < stop)
            and (start is None or high is None or high > start)
        ):
            pass
        else:
            m_lo = 0 if low is None else bisect_right(message_keys, low)
            m_hi = len(message_keys) if high is None else bisect_left(message_keys, high)
            child_pending = {k: merged[k] for k in message_keys[m_lo:m_hi]}
            child_location = node.children[i]
            yield from _scan(
                store,
                store.load(child_location),
                start,
                stop,
                child_pending,
                depth + 1,
                limit,
                child_location,
            )
        if i < len(keys):
            key = keys[i]
            if _in_range(key, start, stop):
                if key not in merged:
                    yield key, node.values[i]
                else:
                    value = merged[key]
                    if value is not None:
                        yield key, value
