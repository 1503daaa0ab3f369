"""The re-check: what versions committed during a maintenance run reach, before it deletes.

A listing is no instant: a commit that lands after it may reach files the listing judged
unreachable. Before deleting, gc (and version compaction) walk every version newer than the
ones they judged (``reach_new_versions``) and keep whatever those reach.

Rules:

- The new roots are read whole and strictly (``roots.load_root``) and are the walk's first
  level; it goes on breadth first, one level at a time, over all new roots together.
- A node known reachable is not descended into: its whole subtree is reachable already. Nodes
  the caller's reach covers, or knows to be orphans, need no question; about the others one
  batch membership question is asked per level (``known_reachable``).
- Every node read, roots included, has its values and children checked once
  (``_checked_node``): an export source's full URIs are left out, any other full URI or a value
  that leaves the root is refused, like any unreadable new root or node.
- It runs again while new versions keep landing, up to ``MAX_RECHECK_ROUNDS`` rounds; each
  round narrows the window that only the grace period closes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from lakecore.core.locations import escaping_value, is_forged_pointer, is_full_uri
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.core.versions import latest_version
from lakecore.errors import LakecoreError
from lakecore.maintenance.listing import GcRefusedError
from lakecore.maintenance.reach import escape_reason
from lakecore.maintenance.roots import load_root

# Rounds of the new-version re-check before deleting; each round narrows the race window.
MAX_RECHECK_ROUNDS: Final = 3


@dataclass
class NewVersionsReach:
    """What the re-check found: the versions it walked, every path they reach that was not
    known reachable (the caller keeps these), and what the walk cost."""

    versions: list[int] = field(default_factory=list)  # committed during the run, walked
    paths: set[str] = field(default_factory=set)  # nodes, values and definitions they reach
    nodes_read: int = 0  # below the new roots
    rounds: int = 0  # walks while new versions kept landing


def reach_new_versions(
    storage: Storage,
    since: int,
    known_reachable: Callable[[set[str]], set[str]],
    *,
    cache: NodeCache | None = None,
    max_rounds: int = MAX_RECHECK_ROUNDS,
    refused: type[LakecoreError] = GcRefusedError,
    covered: set[str] | frozenset[str] = frozenset(),
    unreached: set[str] | frozenset[str] = frozenset(),
) -> NewVersionsReach:
    """Everything the versions after ``since`` reach that is not already known reachable.

    All new roots of a round are walked together, breadth first, one level at a time; a node
    that is known reachable is not descended into: its whole subtree is reachable already.
    ``covered`` nodes are known reachable and ``unreached`` ones (orphans) known not to be,
    without asking; about the others ``known_reachable`` is asked, one batch membership
    question per level. Runs again while new versions keep landing, up to ``max_rounds``
    times. Any unreadable new root or node is ``refused``."""
    out = NewVersionsReach()
    cache = cache if cache is not None else NodeCache()
    visited: set[str] = set()
    for _ in range(max_rounds):
        try:
            latest = latest_version(storage)
        except LakecoreError as exc:
            raise refused(f"could not re-read the latest version: {exc.one_line()}") from exc
        if latest <= since:
            break
        out.rounds += 1
        # The walk's first level: the new roots, read whole already (``load_root``).
        level: list[_NewNode] = []  # (location, node, its tree's store, where, for a refusal)
        for version in range(since + 1, latest + 1):
            root = load_root(storage, version, refused)
            out.versions.append(version)
            out.paths.add(root.info.lakehouse_def_path)
            store = NodeStore(
                storage, root.lakehouse_def.order, cache=cache, external_roots=root.external_roots
            )
            level.append((root.info.path, root.info.node, store, f"version {version}"))
        while level:
            frontier: dict[str, NodeStore] = {}  # node location -> the store to load it with
            for location, node, store, where in level:
                values, children = _checked_node(node, store.external_roots, where, refused)
                out.paths.add(location)
                out.paths.update(values)
                for child in children:
                    if child not in visited:
                        frontier.setdefault(child, store)
            visited.update(frontier)
            ask = {p for p in frontier if p not in covered and p not in unreached}
            known = (known_reachable(ask) if ask else set()) | (frontier.keys() & covered)
            level = []
            for location in sorted(frontier.keys() - known):
                store = frontier[location]
                try:
                    node = store.load(location)
                except LakecoreError as exc:
                    raise refused(
                        f"a version committed during the run (after {since}) cannot be walked: "
                        f"{exc.one_line()}"
                    ) from exc
                out.nodes_read += 1
                level.append((location, node, store, f"node {location}"))
        since = latest
    return out


# A node of a version committed during the run, read and waiting to be checked: its location,
# the node, the store of its version's tree (to read its children with) and, for a refusal,
# where it is ("version V" for a root, "node LOCATION" below).
_NewNode = tuple[str, Node, NodeStore, str]


def _checked_node(
    node: Node, external_roots: tuple[str, ...], where: str, refused: type[LakecoreError]
) -> tuple[list[str], list[str]]:
    """The node's values in this lakehouse and its children to walk, each checked once: an
    export source's full URIs are left out, and any other full URI, or a value that escapes
    the root, is ``refused``."""
    values = list(node.pvalues())
    escape = escaping_value(values, external_roots)
    if escape is not None:
        raise refused(escape_reason(f"a version committed during the run: {where}", escape))
    children = []
    for child in node.children:
        if not is_full_uri(child):
            children.append(child)
        elif is_forged_pointer(child, external_roots):
            raise refused(
                f"a version committed during the run: {where} points to {child!r}, outside "
                "the lakehouse root and not in an export's source; run validate"
            )
    return [value for value in values if not is_full_uri(value)], children
