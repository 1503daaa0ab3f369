"""``lakecore tree --html PATH``: the tree of one version as a collapsible page.

Each node is an HTML ``<details>`` element (collapsible without any script): its level, key
range, key count, buffer and subtree totals in the summary line, and inside it the node's
keys (the first ``KEYS_SHOWN``), its buffered messages and its children. The top two levels
start open. A tree larger than ``MAX_NODES`` nodes is cut with a note saying how much is left
out.
"""

from __future__ import annotations

from typing import Any

from lakecore.core.view import LakehouseView
from lakecore.lakehouse.report.html import banner, cards, esc, page, tree_levels_table
from lakecore.lakehouse.treeinfo import TreeNode, key_label, range_label, tree_nodes

KEYS_SHOWN = 40
MAX_NODES = 3000


def _node_html(item: TreeNode, view: LakehouseView, budget: list[int], out: list[str]) -> None:
    budget[0] -= 1
    node = item.node
    kind = "leaf" if not item.children else f"{len(item.children)} children"
    summary = (
        f"<b>L{item.level}</b> <code>{esc(range_label(item, view))}</code> · {len(node.keys)} keys · "
        f"buffer {len(node.buffer)} · {kind}"
        + (
            f" · subtree {item.subtree_nodes} nodes, {item.subtree_keys} keys"
            if item.children
            else ""
        )
        + f" <span class='muted'><code>{esc(item.path.rsplit('/', 1)[-1])}</code></span>"
    )
    out.append(f"<details{' open' if item.level <= 2 else ''}><summary>{summary}</summary>")
    if node.keys:
        shown = ", ".join(esc(key_label(k, view)) for k in node.keys[:KEYS_SHOWN])
        more = f" … {len(node.keys) - KEYS_SHOWN} more" if len(node.keys) > KEYS_SHOWN else ""
        out.append(f"<div class='muted' style='margin-left:1.1em'>keys: {shown}{esc(more)}</div>")
    if node.buffer:
        items = list(node.buffer.items())[:KEYS_SHOWN]
        shown = ", ".join(
            f"{esc(key_label(k, view))}{' (delete)' if v is None else ''}" for k, v in items
        )
        more = f" … {len(node.buffer) - KEYS_SHOWN} more" if len(node.buffer) > KEYS_SHOWN else ""
        out.append(f"<div style='margin-left:1.1em'>buffer: {shown}{esc(more)}</div>")
    for n, child in enumerate(item.children):
        if budget[0] <= 0:
            rest = item.children[n:]
            out.append(
                f"<p class='muted'>… {len(rest)} more children ({sum(c.subtree_nodes for c in rest)} nodes) "
                f"not shown: the page shows at most {MAX_NODES} nodes</p>"
            )
            break
        _node_html(child, view, budget, out)
    out.append("</details>")


def render_tree_page(view: LakehouseView, summary: dict[str, Any]) -> str:
    root = tree_nodes(view)
    out: list[str] = []
    _node_html(root, view, [MAX_NODES], out)
    body = [
        f"<h1>tree of version {esc(view.version)} <span class='muted'>{esc(view.uri)}</span></h1>",
        banner(
            "ok",
            f"depth {summary['depth']}, {summary['nodes']} nodes, {summary['keys']} keys, "
            f"{summary['messages']} buffered messages",
        ),
        cards(
            {
                "depth": summary["depth"],
                "nodes": summary["nodes"],
                "keys": summary["keys"],
                "buffered messages": summary["messages"],
                "order": summary["order"],
            }
        ),
        tree_levels_table(summary["levels"]),
        "<h2>Nodes <span class='muted'>(click a line to open or close it)</span></h2>",
        *out,
    ]
    return page(f"lakecore tree: version {view.version}", body)


__all__ = ["render_tree_page"]
