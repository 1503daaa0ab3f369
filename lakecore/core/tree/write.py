"""Copy-on-write changes to the B-epsilon tree: buffered writes, flushes, splits and merges.

Writes are messages in the root's write buffer. When a node would exceed
``node_file_max_size_bytes`` it is *settled*:

1. **self-apply**: messages for keys in the node's own key table are applied there (a set
   replaces the pvalue; a delete removes the key, see *demote* below). A leaf applies every
   message, since it has no children to pass them to.
2. **split** by count: a node with more than N-1 keys becomes ``m = ceil((K+1)/N)`` nodes of
   even size, the ``m-1`` separators (key and pvalue) move up.
3. **push down** while the node is over size: the messages for the child with the most
   pending bytes move into that child's buffer (appended: they are newer). A leaf child applies
   them; an internal child that no longer fits is settled in turn. Children that split give
   their parent new separators; children that underflow are merged with a sibling (the
   separator comes down between them) and the merged node is settled again, which re-splits it
   evenly when it is too full, so a merge doubles as a borrow.

**Demote** (deleting a key that an internal node holds, while messages are pending below):
merge the two children around the key with the key itself pulled down between them, put the
delete message into the merged node, and settle it. The key sinks one level at a time until it
reaches a leaf and is removed there; every level re-splits and re-merges as needed. No message
for the key can be below it (docs/format.md#messages-and-where-they-sit: a message never sits
below the node holding its key), so nothing is lost on the way down.

Self-apply before any split or merge keeps that rule: a key only moves up (a separator) or
down (a merge) after its own pending messages were applied, so it never ends up above its
messages or below them.

Nothing here changes a node in place: loaded nodes are copied into ``WNode`` working nodes,
and ``TreeWriter.finish`` writes every changed node to a new file, children first, and returns
the new root's content for the version layer to commit.

This module holds one concept, the settle algorithm, and stays one file: its steps call each
other (settle, push down, settle the child, merge, settle again, demote), the working node
``WNode`` is only its state, and the subtree flush (``flush_node``, the Spark flush job's unit)
runs the same steps on one subtree through the writer's own internals. Apart, each piece would
have to be read with the others open beside it.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from lakecore.core import keys as K
from lakecore.core.locations import new_node_file_path
from lakecore.core.node import Node, message_size, utf8_len, utf8_total
from lakecore.core.tree.shape import NODE_PATH_BYTES, TreeShape
from lakecore.core.tree.store import IOStats, NodeStore
from lakecore.errors import LakecoreError, TreeStructureError

Separator = tuple[str, str]


class SplicedSubtree(Protocol):
    """What became of a subtree flushed on its own (``flush_node``): the paths of the nodes
    that replace its root, the separators between them, and whether that single node came
    back underfull or changed."""

    paths: list[str]
    separators: list[Separator]
    underflow: bool
    changed: bool


_MISSING = object()


class FlushMode(Enum):
    FIT = "fit"  # push the biggest batches until the node fits (normal writes)
    FULL = "full"  # empty every buffer in the subtree
    THRESHOLD = "threshold"  # empty the buffers fuller than a fill ratio


@dataclass(frozen=True)
class FlushPolicy:
    mode: FlushMode = FlushMode.FIT
    fill: float = 0.5


FIT = FlushPolicy()


class WNode:
    """A node being worked on. ``children`` holds paths of untouched children and WNodes of
    loaded ones; ``origin`` is the file it was loaded from and ``dirty`` says it changed."""

    __slots__ = (
        "buf_key_bytes",
        "buf_value_bytes",
        "buffer",
        "children",
        "dirty",
        "keys",
        "origin",
        "values",
    )

    def __init__(
        self,
        keys: list[str],
        values: list[str],
        children: list[WNode | str],
        buffer: dict[str, str | None],
        origin: str | None,
        dirty: bool,
    ) -> None:
        self.keys = keys
        self.values = values
        self.children = children
        self.buffer = buffer
        self.origin = origin
        self.dirty = dirty
        self.buf_key_bytes = 0
        self.buf_value_bytes = 0
        for key, value in buffer.items():
            self.buf_key_bytes += utf8_len(key)
            if value is not None:
                self.buf_value_bytes += utf8_len(value)

    @classmethod
    def from_node(cls, node: Node, origin: str | None) -> WNode:
        return cls(
            list(node.keys),
            list(node.values),
            list(node.children),
            dict(node.buffer),
            origin,
            origin is None,
        )

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def set_message(self, key: str, value: str | None) -> None:
        old = self.buffer.pop(key, _MISSING)
        if old is not _MISSING:
            self.buf_key_bytes -= utf8_len(key)
            if old is not None:
                assert isinstance(old, str)
                self.buf_value_bytes -= utf8_len(old)
        self.buffer[key] = value
        self.buf_key_bytes += utf8_len(key)
        if value is not None:
            self.buf_value_bytes += utf8_len(value)
        self.dirty = True

    def take_messages(self, keys: Iterable[str]) -> list[tuple[str, str | None]]:
        out = []
        for key in keys:
            value = self.buffer.pop(key)
            self.buf_key_bytes -= utf8_len(key)
            if value is not None:
                self.buf_value_bytes -= utf8_len(value)
            out.append((key, value))
        self.dirty = True
        return out

    def clear_buffer(self) -> dict[str, str | None]:
        buffer = self.buffer
        self.buffer = {}
        self.buf_key_bytes = self.buf_value_bytes = 0
        self.dirty = True
        return buffer

    def size(self, shape: TreeShape) -> int:
        key_bytes = self.buf_key_bytes + utf8_total(self.keys)
        value_bytes = self.buf_value_bytes + utf8_total(self.values)
        paths = [c for c in self.children if isinstance(c, str)]
        pnode_bytes = utf8_total(paths) + (len(self.children) - len(paths)) * NODE_PATH_BYTES
        return shape.node_size(key_bytes, value_bytes, pnode_bytes, len(self.buffer))

    def buffer_fill(self, shape: TreeShape) -> float:
        """Buffer bytes as a share of the room the key table leaves in a node file."""
        if not self.buffer:
            return 0.0
        empty = WNode(self.keys, self.values, self.children, {}, None, True)
        room = shape.node_file_max_size_bytes - empty.size(shape)
        used = self.size(shape) - empty.size(shape)
        return used / room if room > 0 else math.inf


@dataclass
class TreeEvents:
    """Counts of structural changes, for tests and reports."""

    counts: Counter[str] = field(default_factory=Counter)

    def __getitem__(self, name: str) -> int:
        return self.counts[name]

    def bump(self, name: str, n: int = 1) -> None:
        self.counts[name] += n


class TreeWriter:
    """Applies messages to a tree version and writes the changed nodes (copy-on-write)."""

    def __init__(
        self,
        store: NodeStore,
        shape: TreeShape,
        root: Node | None,
        *,
        now_millis: int | None = None,
        defer_height: int | None = None,
    ) -> None:
        """``defer_height``: a distributed flush's cut. Nodes at that height (below the root)
        are set aside in ``deferred`` instead of being settled; ``splice_subtrees`` later puts
        what became of them back in place."""
        if shape.order != store.order:
            raise ValueError(f"store order {store.order} differs from shape order {shape.order}")
        self.store = store
        self.shape = shape
        self.events = TreeEvents()
        self.now_millis = now_millis
        self.root = WNode.from_node(root or Node(), None)
        self.root.dirty = True
        self.height = self._measure_height(self.root)
        self.defer_height = defer_height
        self.deferred: dict[int, WNode] = {}  # id(node) -> a node set aside at the cut
        # Changed nodes, their paths chosen, written together by ``_write_pending``: side by
        # side, one sync, where one at a time each cost a round trip to the store (a commit
        # that changes twenty leaves waited for twenty PUTs on S3).
        self._pending: list[tuple[str, Node]] = []

    # -- public API ----------------------------------------------------------------------------

    def put(self, key: str, value: str | None) -> None:
        """Add a set (value) or delete (None) message to the root buffer; flush on overflow."""
        if not isinstance(key, str) or key == "" or key in K.SYSTEM_KEYS:
            raise LakecoreError(f"tree key {key!r} is empty or a system key")
        self.root.set_message(key, value)
        if self.root.size(self.shape) > self.shape.node_file_max_size_bytes:
            self.events.bump("root_overflows")
            self._settle_root(FIT)

    def put_many(self, messages: Iterable[tuple[str, str | None]]) -> None:
        for key, value in messages:
            self.put(key, value)

    def flush(self, policy: FlushPolicy) -> None:
        """Flush the whole tree: FULL empties every buffer, THRESHOLD the ones over ``fill``."""
        if (
            policy.mode is FlushMode.THRESHOLD
            and self.root.is_leaf
            and self.root.buffer_fill(self.shape) <= policy.fill
        ):
            # A depth-1 tree's root is a leaf, and its buffer is the tree's only one. ``_settle``
            # applies a leaf's buffer unconditionally, which is right for a leaf below the root
            # (it holds messages only when its parent's buffer was over the threshold and was
            # pushed down into it in this very flush) but not for the root leaf: its buffer
            # obeys the threshold like any other, or a threshold flush empties it at any fill.
            return
        self._settle_root(policy)

    def splice_subtrees(self, results: Mapping[int, SplicedSubtree]) -> Node:
        """Put flushed subtrees in place of the nodes set aside at the cut, repair the top
        (merge underfull subtree roots, split top nodes that gained keys, grow or shrink the
        root), write the top nodes and return the new root's content.

        ``results`` maps ``id(node)`` of a node in ``deferred`` to what replaced it."""
        self.defer_height = None  # repairs below the cut now happen here, for real
        if not results:
            return self.finish()

        def place(w: WNode, height: int) -> tuple[list[WNode], list[Separator]]:
            i = 0
            while i < len(w.children):
                child = w.children[i]
                if isinstance(child, WNode) and id(child) in results:
                    result = results[id(child)]
                    new_children: list[WNode | str] = list(result.paths)
                    if result.underflow:
                        # Load the underfull node so that the repair below can merge it.
                        new_children = [
                            WNode.from_node(self.store.load(result.paths[0]), result.paths[0])
                        ]
                    w.children[i : i + 1] = new_children
                    w.keys[i:i] = [sep[0] for sep in result.separators]
                    w.values[i:i] = [sep[1] for sep in result.separators]
                    if result.changed:
                        w.dirty = True
                    i += len(new_children)
                    continue
                if isinstance(child, WNode) and child.children:
                    nodes, seps = place(child, height - 1)
                    if len(nodes) > 1 or nodes[0] is not child:
                        self._replace_child(w, i, nodes, seps)
                        i += len(nodes)
                        continue
                i += 1
            self._fix_children(w, FlushPolicy(), height)
            return self._split(w, FlushPolicy(), height)

        nodes, seps = place(self.root, self.height)
        self._install_root(nodes, seps, FlushPolicy())
        return self.finish()

    def finish(self) -> Node:
        """Write every changed non-root node; return the new root's content (not written)."""
        root = self.root
        children = [self._write(c) if isinstance(c, WNode) else c for c in root.children]
        self._write_pending()
        node = Node(list(root.keys), list(root.values), children, dict(root.buffer), {})
        size = root.size(self.shape)
        if size > self.shape.node_file_max_size_bytes:
            raise LakecoreError(
                f"root node would be {size} bytes, over node_file_max_size_bytes="
                f"{self.shape.node_file_max_size_bytes}: a key or pvalue is too long for this lakehouse"
            )
        return node

    @property
    def stats(self) -> IOStats:
        return self.store.stats

    # -- loading -------------------------------------------------------------------------------

    def _measure_height(self, node: WNode) -> int:
        height = 1
        child: WNode | str | None = node.children[0] if node.children else None
        seen: set[str] = set()
        while child is not None:
            height += 1
            if height > self.shape.max_depth:
                raise TreeStructureError(
                    str(child), f"tree is deeper than order {self.shape.order} allows"
                )
            if isinstance(child, WNode):
                child = child.children[0] if child.children else None
                continue
            if child in seen:
                raise TreeStructureError(
                    child, "node points back to one of its ancestors (a cycle)"
                )
            seen.add(child)
            loaded = self.store.load(child)
            child = loaded.children[0] if loaded.children else None
        return height

    def _child(self, parent: WNode, i: int) -> WNode:
        """Child ``i`` as a working node (loaded and copied on first use)."""
        child = parent.children[i]
        if isinstance(child, WNode):
            return child
        loaded = WNode.from_node(self.store.load(child), child)
        parent.children[i] = loaded
        return loaded

    # -- writing -------------------------------------------------------------------------------

    def _write(self, w: WNode) -> str:
        child_paths: list[str] = []
        for child in w.children:
            if isinstance(child, WNode):
                before = child.origin
                path = self._write(child)
                if path != before:
                    w.dirty = True
                child_paths.append(path)
            else:
                child_paths.append(child)
        if not w.dirty and w.origin is not None:
            return w.origin
        size = w.size(self.shape)
        if size > self.shape.node_file_max_size_bytes:
            raise LakecoreError(
                f"a node would be {size} bytes, over node_file_max_size_bytes="
                f"{self.shape.node_file_max_size_bytes}: a key or pvalue is too long for this lakehouse"
            )
        if len(w.keys) > self.shape.max_keys:
            raise AssertionError(
                f"writing a node with {len(w.keys)} keys at order {self.shape.order}"
            )
        created = self.now_millis if self.now_millis is not None else int(time.time() * 1000)
        node = Node(
            list(w.keys),
            list(w.values),
            child_paths,
            dict(w.buffer),
            {K.CREATED_AT_MILLIS_KEY: str(created)},
        )
        path = new_node_file_path()
        self._pending.append((path, node))
        w.children = list(child_paths)
        w.origin = path
        w.dirty = False
        return path

    def _write_pending(self) -> None:
        """Write the nodes ``_write`` chose paths for: before anything can name them (the
        caller's root)."""
        if self._pending:
            self.store.write_many(self._pending, cache=True)
            self._pending = []

    # -- the root ------------------------------------------------------------------------------

    def _settle_root(self, policy: FlushPolicy) -> None:
        nodes, seps = self._settle(self.root, policy, self.height)
        self._install_root(nodes, seps, policy)

    def _install_root(self, nodes: list[WNode], seps: list[Separator], policy: FlushPolicy) -> None:
        """Make one root of what the old root became: grow on a split, shrink while the root
        has a single child, and repair children left underfull."""
        while True:
            if len(nodes) > 1:
                # Root split: the tree grows by one level.
                self.events.bump("root_grows")
                self.height += 1
                new_root = WNode(
                    [s[0] for s in seps], [s[1] for s in seps], list(nodes), {}, None, True
                )
                nodes, seps = self._split(new_root, policy, self.height)
                continue
            root = nodes[0]
            if not root.is_leaf and not root.keys:
                # Root shrink: an internal root with one child hands over to that child; its
                # messages are newer than the child's and go on top of them.
                self.events.bump("root_shrinks")
                child = self._child(root, 0)
                for key, value in root.buffer.items():
                    child.set_message(key, value)
                child.dirty = True
                self.height -= 1
                if child.size(self.shape) > self.shape.node_file_max_size_bytes or (
                    policy.mode is not FlushMode.FIT and child.buffer
                ):
                    nodes, seps = self._settle(child, policy, self.height)
                else:
                    nodes, seps = [child], []
                continue
            if not root.is_leaf and any(
                isinstance(c, WNode) and self._underflows(c, self.height - 1) for c in root.children
            ):
                self._fix_children(root, policy, self.height)
                nodes, seps = self._split(root, policy, self.height)
                continue
            self.root = root
            self.root.dirty = True
            return

    # -- settle: self-apply, split, push down ----------------------------------------------------

    def _settle(
        self, w: WNode, policy: FlushPolicy, height: int
    ) -> tuple[list[WNode], list[Separator]]:
        """Bring ``w`` within its limits; return the nodes that replace it and the separators
        between them (one node and no separator when it did not split)."""
        if height == self.defer_height and height < self.height:
            self.deferred[id(w)] = w  # a distributed flush's cut: settled by a task instead
            return [w], []
        if height == 1:
            if w.buffer:
                self._apply_to_leaf(w)
            return self._split(w, policy, height)
        nodes, seps = self._split(w, policy, height)
        out_nodes: list[WNode] = []
        out_seps: list[Separator] = []
        for j, node in enumerate(nodes):
            if self._should_push(node, policy):
                self._push_down(node, policy, height)
            self._fix_children(node, policy, height)
            sub_nodes, sub_seps = self._split(node, policy, height)
            out_nodes.extend(sub_nodes)
            out_seps.extend(sub_seps)
            if j < len(seps):
                out_seps.append(seps[j])
        return out_nodes, out_seps

    def _should_push(self, w: WNode, policy: FlushPolicy) -> bool:
        if policy.mode is FlushMode.FIT:
            return w.size(self.shape) > self.shape.node_file_max_size_bytes
        return True  # FULL and THRESHOLD visit every internal node below

    def _self_apply(self, w: WNode, policy: FlushPolicy, height: int) -> None:
        """Apply the messages for keys in ``w``'s own key table, until none is left.

        A demote can bring a key up from below (a merged child that re-splits) whose message
        still waits in ``w``'s buffer, hence the loop."""
        if not w.buffer:
            return
        if height == 1:
            self._apply_to_leaf(w)
            return
        while True:
            hit = next((i for i, k in enumerate(w.keys) if k in w.buffer), None)
            if hit is None:
                return
            value = w.take_messages([w.keys[hit]])[0][1]
            if value is None:
                self._demote(w, hit, policy, height)
            else:
                w.values[hit] = value
                self.events.bump("internal_sets")

    @staticmethod
    def _index_of(w: WNode, key: str) -> int | None:
        i = bisect_left(w.keys, key)
        return i if i < len(w.keys) and w.keys[i] == key else None

    def _apply_to_leaf(self, w: WNode) -> None:
        buffer = w.clear_buffer()
        self.events.bump("leaf_applies")
        if len(buffer) <= 4:
            for key, value in buffer.items():
                i = bisect_left(w.keys, key)
                present = i < len(w.keys) and w.keys[i] == key
                if value is None:
                    if present:
                        del w.keys[i]
                        del w.values[i]
                elif present:
                    w.values[i] = value
                else:
                    w.keys.insert(i, key)
                    w.values.insert(i, value)
            return
        table = dict(zip(w.keys, w.values, strict=True))
        for key, value in buffer.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        w.keys = sorted(table)
        w.values = [table[k] for k in w.keys]

    def _demote(self, w: WNode, i: int, policy: FlushPolicy, height: int) -> None:
        """Delete key ``i`` of internal node ``w``: merge its two children around it, and let
        the delete message sink into the merged node."""
        self.events.bump("demotes")
        key = w.keys[i]
        merged = self._merge_children(w, i)
        merged.set_message(key, None)  # the delete now sits in the node that holds the key
        nodes, seps = self._settle(merged, policy, height - 1)
        self._replace_child(w, i, nodes, seps)
        if len(nodes) == 1:
            self._fix_underflow(w, i, policy, height)

    def _merge_children(self, w: WNode, i: int) -> WNode:
        """Replace children i and i+1 of ``w`` and the key between them by one merged node."""
        key = w.keys[i]
        pending = w.take_messages([key])[0][1] if key in w.buffer else _MISSING
        if isinstance(pending, str):
            w.values[i] = pending
        left = self._child(w, i)
        right = self._child(w, i + 1)
        buffer = dict(left.buffer)
        buffer.update(right.buffer)  # disjoint key ranges: nothing is overwritten
        merged = WNode(
            [*left.keys, w.keys[i], *right.keys],
            [*left.values, w.values[i], *right.values],
            left.children + right.children,
            buffer,
            None,
            True,
        )
        del w.keys[i]
        del w.values[i]
        del w.children[i + 1]
        w.children[i] = merged
        w.dirty = True
        if pending is None:
            merged.set_message(key, None)  # a pending delete goes down with its key
        return merged

    def _replace_child(self, w: WNode, i: int, nodes: list[WNode], seps: list[Separator]) -> None:
        w.children[i : i + 1] = nodes
        w.keys[i:i] = [s[0] for s in seps]
        w.values[i:i] = [s[1] for s in seps]
        w.dirty = True
        if len(nodes) > 1:
            self.events.bump("splits", len(nodes) - 1)

    def _underflows(self, w: WNode, height: int) -> bool:
        if height == 1:
            return len(w.keys) < 1
        return len(w.children) < self.shape.min_internal_children

    def _fix_underflow(self, w: WNode, i: int, policy: FlushPolicy, height: int) -> int:
        """Merge child ``i`` of ``w`` with a sibling while it underflows; return the index of
        the last node that replaced it."""
        while len(w.children) > 1:
            child = w.children[i]
            if not isinstance(child, WNode) or not self._underflows(child, height - 1):
                return i
            self.events.bump("merges")
            left = i - 1 if i > 0 else i
            merged = self._merge_children(w, left)
            nodes, seps = self._settle(merged, policy, height - 1)
            self._replace_child(w, left, nodes, seps)
            if len(nodes) > 1:
                self.events.bump("borrows")
                return left + len(nodes) - 1
            i = left
        return i

    def _fix_children(self, w: WNode, policy: FlushPolicy, height: int) -> None:
        """Merge every loaded child of ``w`` that underflows. A child can be left underfull
        where its parent had a single child to merge it with (a transient state inside a
        merge or a demote); once the parent has siblings again, this repairs it."""
        i = 0
        while i < len(w.children) and len(w.children) > 1:
            child = w.children[i]
            if isinstance(child, WNode) and self._underflows(child, height - 1):
                i = self._fix_underflow(w, i, policy, height)
            i += 1

    def _split(
        self, w: WNode, policy: FlushPolicy, height: int
    ) -> tuple[list[WNode], list[Separator]]:
        """Split a node with more than N-1 keys into evenly filled nodes."""
        if len(w.keys) <= self.shape.max_keys:
            return [w], []
        # Separators move up: their own messages must be applied first.
        self._self_apply(w, policy, height)
        n_keys = len(w.keys)
        if n_keys <= self.shape.max_keys:
            return [w], []
        parts = math.ceil((n_keys + 1) / self.shape.order)
        kept = n_keys - (parts - 1)
        base, extra = divmod(kept, parts)
        nodes: list[WNode] = []
        seps: list[Separator] = []
        start = 0
        message_keys = sorted(w.buffer)
        for p in range(parts):
            count = base + (1 if p < extra else 0)
            end = start + count
            keys = w.keys[start:end]
            values = w.values[start:end]
            children = w.children[start : end + 1] if w.children else []
            low = w.keys[start - 1] if start > 0 else None
            high = w.keys[end] if end < n_keys else None
            m_lo = 0 if low is None else bisect_right(message_keys, low)
            m_hi = len(message_keys) if high is None else bisect_left(message_keys, high)
            buffer = {k: w.buffer[k] for k in message_keys[m_lo:m_hi]}
            nodes.append(WNode(keys, values, children, buffer, None, True))
            if p < parts - 1:
                seps.append((w.keys[end], w.values[end]))
                if w.keys[end] in w.buffer:
                    raise AssertionError(f"separator {w.keys[end]!r} still has a pending message")
            start = end + 1
        return nodes, seps

    def _partition(self, w: WNode) -> dict[int, list[str]]:
        """Buffer keys grouped by the child whose range holds them."""
        groups: dict[int, list[str]] = {}
        keys = w.keys
        for key in w.buffer:
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                raise AssertionError(f"message for {key!r} would pass below the node holding it")
            groups.setdefault(i, []).append(key)
        return groups

    def _group_bytes(self, w: WNode, keys: list[str]) -> int:
        total = 0
        for key in keys:
            value = w.buffer[key]
            total += message_size(key, value)
        return total

    def _push_down(self, w: WNode, policy: FlushPolicy, height: int) -> None:
        if policy.mode is FlushMode.FIT:
            while w.buffer and w.size(self.shape) > self.shape.node_file_max_size_bytes:
                self._self_apply(w, policy, height)
                if not w.buffer:
                    break
                groups = self._partition(w)
                i = max(groups, key=lambda idx: self._group_bytes(w, groups[idx]))
                self._push_into_child(w, i, groups[i], policy, height)
            return
        # FULL / THRESHOLD: maybe empty this buffer, then visit every internal child.
        if policy.mode is FlushMode.FULL or w.buffer_fill(self.shape) > policy.fill:
            self._self_apply(w, policy, height)
            groups = self._partition(w)
            self._prefetch_children(w, groups)
            for i, group in groups.items():
                child = self._child(w, i)
                for key, value in w.take_messages(group):
                    child.set_message(key, value)
                self.events.bump("flushes")
        if height - 1 > 1:
            self._prefetch_children(w, range(len(w.children)))  # every internal child is visited
        i = 0
        while i < len(w.children):
            child_ref = w.children[i]
            if height - 1 == 1 and not (isinstance(child_ref, WNode) and child_ref.buffer):
                i += 1
                continue  # a leaf with nothing to apply
            child = self._child(w, i)
            nodes, seps = self._settle(child, policy, height - 1)
            if len(nodes) == 1 and nodes[0] is child and not child.dirty:
                i += 1  # visited, nothing to do: the old file stays
                continue
            self._replace_child(w, i, nodes, seps)
            last = i + len(nodes) - 1
            if len(nodes) == 1:
                last = self._fix_underflow(w, i, policy, height)
            i = last + 1

    def _prefetch_children(self, w: WNode, indexes: Iterable[int]) -> None:
        """Start reading the children of ``w`` at ``indexes`` that are still only paths: they
        are loaded one after another next, which on S3 is a round trip each."""
        self.store.prefetch(c for i in indexes if isinstance(c := w.children[i], str))

    def _push_into_child(
        self, w: WNode, i: int, group: list[str], policy: FlushPolicy, height: int
    ) -> None:
        self.events.bump("flushes")
        child = self._child(w, i)
        for key, value in w.take_messages(group):
            child.set_message(key, value)
        if height - 1 > 1 and child.size(self.shape) <= self.shape.node_file_max_size_bytes:
            return  # an internal child keeps the messages in its buffer
        nodes, seps = self._settle(child, policy, height - 1)
        self._replace_child(w, i, nodes, seps)
        if len(nodes) == 1:
            self._fix_underflow(w, i, policy, height)


# ---------------------------------------------------------------------------------------------
# Subtree flush, the unit of work the Spark flush job runs on executors


@dataclass
class SubtreeFlushResult:
    """What a flushed subtree became: the nodes that replace its root (usually one) and the
    separators between them, with the I/O it took. ``height`` is the subtree's height."""

    nodes: list[str]
    separators: list[Separator]
    height: int
    changed: bool
    stats: IOStats
    events: dict[str, int]
    underflow: bool = False


def flush_subtree(
    store: NodeStore,
    shape: TreeShape,
    location: str,
    incoming: Mapping[str, str | None] | None = None,
    policy: FlushPolicy = FlushPolicy(FlushMode.FULL),
) -> SubtreeFlushResult:
    """Flush the subtree rooted at ``location``, after adding ``incoming`` messages (newer than
    anything in the subtree) to its root buffer. Needs nothing but the subtree itself.

    The subtree root may come back underfull or split: the caller, which owns the parent,
    fixes that. Its height never changes."""
    node = store.load(location)
    if incoming:
        node = node.copy()
        node.buffer.update(incoming)
    return flush_node(store, shape, node, location, bool(incoming), policy)


def flush_node(
    store: NodeStore,
    shape: TreeShape,
    node: Node,
    origin: str | None,
    dirty: bool,
    policy: FlushPolicy,
    height: int | None = None,
) -> SubtreeFlushResult:
    """Flush a subtree given its root's content (loaded from ``origin`` and, if ``dirty``,
    changed since). The unit of work of the Spark flush job."""
    writer = TreeWriter(store, shape, None)
    subtree = WNode.from_node(node, origin)
    subtree.dirty = dirty or origin is None
    if height is None:
        height = writer._measure_height(subtree)
    writer.height = height
    before = store.stats.as_dict()
    written_before = len(store.stats.written_paths)
    nodes, seps = writer._settle(subtree, policy, height)
    underflow = len(nodes) == 1 and writer._underflows(nodes[0], height)
    paths = [writer._write(n) for n in nodes]
    writer._write_pending()
    after = store.stats.as_dict()
    delta = IOStats(
        files_read=after["files_read"] - before["files_read"],
        bytes_read=after["bytes_read"] - before["bytes_read"],
        cache_hits=after["cache_hits"] - before["cache_hits"],
        files_written=after["files_written"] - before["files_written"],
        bytes_written=after["bytes_written"] - before["bytes_written"],
        written_paths=store.stats.written_paths[written_before:],
    )
    changed = paths != [origin]
    return SubtreeFlushResult(
        paths, seps, height, changed, delta, dict(writer.events.counts), underflow
    )
