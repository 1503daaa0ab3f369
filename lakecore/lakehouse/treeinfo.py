"""Describe a tree version: depth, fan-out and buffer fill per level, and a Graphviz rendering."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakecore.core.node import Node, encoded_size
from lakecore.core.tree.store import NodeStore

if TYPE_CHECKING:
    from lakecore.core.view import LakehouseView


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
            fills.append(
                (encoded_size(node, order) - encoded_size(empty, order)) / room if room > 0 else 1.0
            )
        keys = sum(len(n.keys) for _, n in level)
        messages = sum(len(n.buffer) for _, n in level)
        totals["nodes"] += len(level)
        totals["keys"] += keys
        totals["messages"] += messages
        out_levels.append(
            {
                "depth": depth,
                "nodes": len(level),
                "keys": keys,
                "messages": messages,
                "fanout_min": min(fanouts),
                "fanout_max": max(fanouts),
                "fanout_avg": sum(fanouts) / len(fanouts),
                "buffer_fill_avg": sum(fills) / len(fills),
                "buffer_fill_max": max(fills),
            }
        )
    return {
        "version": view.version,
        "depth": len(out_levels),
        "order": order,
        "levels": out_levels,
        **totals,
    }


def key_label(key: str | None, view: LakehouseView) -> str:
    """An object key as a reader knows it: ``ns`` or ``ns.table`` (quoted where ambiguous)."""
    if key is None:
        return ""
    from lakecore.core import keys as K
    from lakecore.lakehouse.history import display_name

    try:
        parsed = K.parse_key(key, view.lakehouse_def)
    except Exception:
        return key.rstrip()
    prefix = {"namespace": "ns ", "view": "view "}.get(parsed.kind, "")
    return prefix + display_name(parsed.namespace, parsed.view or parsed.table)


@dataclass
class TreeNode:
    """A node with its place in the tree: level (1 = root), key range and subtree totals."""

    path: str
    node: Node
    level: int
    low: str | None  # the separator key at or above which the node's keys sit (None: unbounded)
    high: str | None  # the separator key below which they sit
    children: list[TreeNode] = field(default_factory=list)
    subtree_nodes: int = 1
    subtree_keys: int = 0
    subtree_messages: int = 0


def tree_nodes(view: LakehouseView) -> TreeNode:
    """The whole tree of a version with key ranges and subtree totals (reads every node)."""
    root = TreeNode(view.root_info.path, view.root, 1, None, None)
    stack = [root]
    order: list[TreeNode] = []
    while stack:
        item = stack.pop()
        order.append(item)
        bounds = [item.low, *item.node.keys, item.high]
        for i, child in enumerate(item.node.children):
            entry = TreeNode(
                child, view.store.load(child), item.level + 1, bounds[i], bounds[i + 1]
            )
            item.children.append(entry)
            stack.append(entry)
    for item in reversed(order):
        item.subtree_keys = len(item.node.keys) + sum(c.subtree_keys for c in item.children)
        item.subtree_messages = len(item.node.buffer) + sum(
            c.subtree_messages for c in item.children
        )
        item.subtree_nodes = 1 + sum(c.subtree_nodes for c in item.children)
    return root


def range_label(item: TreeNode, view: LakehouseView) -> str:
    """``[a.t1 .. b.t9)``: the key range a node covers (``*`` for an open end)."""
    low = key_label(item.low, view) or "*"
    high = key_label(item.high, view) or "*"
    return f"[{low} .. {high})"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(
    view: LakehouseView,
    summary: dict[str, Any] | None = None,
    max_levels: int = 3,
    max_width: int = 24,
) -> str:
    """Graphviz: one box per node, ranked by level, with its key range, key count and buffer.

    Large trees are cut: the top ``max_levels`` levels are drawn node by node (fewer when a
    level would be wider than ``max_width`` nodes), and below the cut each node gets one box
    with the counts of its subtree."""
    root = tree_nodes(view)
    levels: list[list[TreeNode]] = [[root]]
    while levels[-1] and any(i.children for i in levels[-1]):
        levels.append([c for i in levels[-1] for c in i.children])
    drawn = 1
    while drawn < len(levels) and drawn < max(1, max_levels) and len(levels[drawn]) <= max_width:
        drawn += 1
    lines = [
        "digraph lakecore {",
        f'  label="version {view.version}: depth {len(levels)}, {root.subtree_nodes} nodes, '
        f"{root.subtree_keys} keys, {root.subtree_messages} buffered messages"
        + (f" (top {drawn} levels drawn)" if drawn < len(levels) else "")
        + '"; labelloc=t;',
        "  rankdir=TB; nodesep=0.15; ranksep=0.4;",
        '  node [shape=box, style="rounded,filled", fillcolor="#eef4fb", fontname="monospace", fontsize=10];',
        '  edge [arrowsize=0.5, color="#7a8ca3"];',
    ]
    ids: dict[int, str] = {}
    for depth in range(drawn):
        names = []
        for n, item in enumerate(levels[depth]):
            ident = f"n{depth + 1}_{n}"
            ids[id(item)] = ident
            names.append(ident)
            short = item.path.rsplit("/", 1)[-1]
            short = short if len(short) <= 18 else short[:8] + "…" + short[-8:]
            fill = "#fff3d6" if item.node.buffer else "#eef4fb"
            lines.append(
                f'  {ident} [label="{_dot_text(range_label(item, view))}\\nkeys {len(item.node.keys)}'
                f' · buffer {len(item.node.buffer)}\\n{_dot_text(short)}", fillcolor="{fill}", '
                f'tooltip="{_dot_text(item.path)}"];'
            )
        lines.append(f"  {{rank=same; {'; '.join(names)}}}")
    cut = []
    for n, item in enumerate(levels[drawn - 1]):
        if item.children and drawn < len(levels):
            ident = f"below_{n}"
            cut.append(ident)
            lines.append(
                f'  {ident} [shape=note, fillcolor="#f4f4f4", label="{len(item.children)} children, '
                f"{item.subtree_nodes - 1} nodes below\\n{item.subtree_keys - len(item.node.keys)} keys · "
                f'{item.subtree_messages - len(item.node.buffer)} buffered"];'
            )
            lines.append(f"  {ids[id(item)]} -> {ident} [style=dashed];")
    for depth in range(drawn - 1):
        for item in levels[depth]:
            for child in item.children:
                if id(child) in ids:
                    lines.append(f"  {ids[id(item)]} -> {ids[id(child)]};")
    if cut:
        lines.append(f"  {{rank=same; {'; '.join(cut)}}}")
    lines.append("}")
    return "\n".join(lines)
