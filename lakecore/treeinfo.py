"""Describe a tree version: depth, fan-out and buffer fill per level, and a Graphviz rendering."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakecore.node import Node, encoded_size
from lakecore.tree.store import NodeStore

if TYPE_CHECKING:
    from lakecore.view import LakehouseView


def _levels(view: LakehouseView) -> list[list[tuple[str, Node]]]:
    levels: list[list[tuple[str, Node]]] = [[(view.root_info.path, view.root)]]
    while levels[-1] and levels[-1][0][1].children:
        nxt = []
        for _, node in levels[-1]:
            for child in node.children:
                nxt.append((child, view.store.load(child)))
        levels.append(nxt)
    return levels


def buffered_messages(store: NodeStore, root: Node) -> int:
    """Messages waiting in write buffers anywhere in the tree under ``root``."""
    total, stack = len(root.buffer), list(root.children)
    while stack:
        node = store.load(stack.pop())
        total += len(node.buffer)
        stack.extend(node.children)
    return total


def describe_tree(view: LakehouseView) -> dict[str, Any]:
    order = view.lakehouse_def.order
    max_bytes = view.lakehouse_def.node_file_max_size_bytes
    out_levels = []
    totals = {"nodes": 0, "keys": 0, "messages": 0}
    for depth, level in enumerate(_levels(view), start=1):
        fanouts = [len(n.children) for _, n in level if n.children] or [0]
        fills = []
        for _, node in level:
            if not node.buffer:
                fills.append(0.0)
                continue
            empty = Node(node.keys, node.values, node.children, {}, node.system)
            room = max_bytes - encoded_size(empty, order)
            fills.append((encoded_size(node, order) - encoded_size(empty, order)) / room if room > 0 else 1.0)
        keys = sum(len(n.keys) for _, n in level)
        messages = sum(len(n.buffer) for _, n in level)
        totals["nodes"] += len(level)
        totals["keys"] += keys
        totals["messages"] += messages
        out_levels.append({
            "depth": depth, "nodes": len(level), "keys": keys, "messages": messages,
            "fanout_min": min(fanouts), "fanout_max": max(fanouts), "fanout_avg": sum(fanouts) / len(fanouts),
            "buffer_fill_avg": sum(fills) / len(fills), "buffer_fill_max": max(fills),
        })
    return {"version": view.version, "depth": len(out_levels), "order": order, "levels": out_levels, **totals}


def to_dot(view: LakehouseView, summary: dict[str, Any] | None = None, max_nodes: int = 2000) -> str:
    """Graphviz: one box per node with its key count and buffer size."""
    lines = ["digraph lakecore {", "  node [shape=box, fontname=monospace];"]
    count = 0
    for level in _levels(view):
        for path, node in level:
            count += 1
            if count > max_nodes:
                lines.append('  truncated [label="... more nodes"];')
                lines.append("}")
                return "\n".join(lines)
            name = path.rsplit("/", 1)[-1][:24]
            lines.append(f'  "{path}" [label="{name}\\nkeys {len(node.keys)} buf {len(node.buffer)}"];')
            for child in node.children:
                lines.append(f'  "{path}" -> "{child}";')
    lines.append("}")
    return "\n".join(lines)
