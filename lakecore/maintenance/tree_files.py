"""Which files a version reaches: its node files and the definition files its keys point to.

The unit of work behind gc, version compaction and export. ``reachable_from_subtree`` needs
only a subtree's root location, so the Spark jobs run it on executors, one subtree each; the
single-process path walks the whole tree with the same function.

A walk never follows a pointer it cannot trust: the store refuses locations that leave the
root, a node met twice is a cycle or a shared subtree (reported, not entered), and the depth is
bounded by the order. Any failure raises: callers that delete files must fail closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakecore.core.node import Node
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import NodeStore
from lakecore.errors import TreeStructureError


@dataclass
class Reachable:
    nodes: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)
    node_bytes: int = 0

    @property
    def files(self) -> set[str]:
        return self.nodes | self.values


def reachable_from_subtree(
    store: NodeStore, location: str, depth: int = 1, *, include_values: bool = True
) -> Reachable:
    """Every node file and value location under (and including) the node at ``location``."""
    out = Reachable()
    _walk(store, location, None, depth, include_values, out, ())
    return out


def reachable_from_root(store: NodeStore, root: Node, *, include_values: bool = True) -> Reachable:
    """Every non-root node file and value location a root reaches."""
    out = Reachable()
    _walk(store, "root", root, 1, include_values, out, ())
    return out


def _walk(
    store: NodeStore,
    location: str,
    node: Node | None,
    depth: int,
    include_values: bool,
    out: Reachable,
    ancestors: tuple[str, ...],
) -> None:
    max_depth = TreeShape(store.order, 1).max_depth
    stack: list[tuple[str, Node | None, int, tuple[str, ...]]] = [
        (location, node, depth, ancestors)
    ]
    while stack:
        loc, loaded, level, path = stack.pop()
        if level > max_depth:
            raise TreeStructureError(
                loc, f"tree is deeper than order {store.order} allows: a cycle or a forged pointer"
            )
        if loaded is None:
            if loc in path:
                raise TreeStructureError(loc, "node points back to one of its ancestors (a cycle)")
            if loc in out.nodes:
                raise TreeStructureError(loc, "node is reached twice in one version")
            loaded, size = store.load_sized(loc)
            out.nodes.add(loc)
            out.node_bytes += size
        if include_values:
            out.values.update(loaded.pvalues())
        store.prefetch(loaded.children)  # on S3: the next reads in flight while this one is walked
        for child in reversed(loaded.children):
            stack.append((child, None, level + 1, (*path, loc)))
