"""Node rows: every row of every node file as columns, what validate's expectation suite reads.

A node's rows are its system rows, its key table and its write buffer, in that order
(``SECTIONS``), each row as ``ROW_COLUMNS`` (the node's path and depth, the section, the row's
index, its key, pvalue and pnode). ``NodeRows`` keeps them as columns, so that an executor
hands them to Arrow without a tuple per row; ``unique_key_candidates`` finds, while the rows
are made, the only keys that can break "a key is in at most one leaf": keys repeated within one
subtree task, and keys where two tasks' key ranges overlap (``KeySpan``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lakecore.core.node import Node, system_rows
from lakecore.core.tree.store import NodeStore
from lakecore.errors import LakecoreError, StorageError
from lakecore.maintenance.partition import SubtreeTask

SECTION_SYSTEM: Final = "system"
SECTION_KEY_TABLE: Final = "key_table"
SECTION_BUFFER: Final = "buffer"
SECTIONS: Final = (SECTION_SYSTEM, SECTION_KEY_TABLE, SECTION_BUFFER)
ROW_COLUMNS: Final = ("node_path", "depth", "section", "row_index", "key", "pvalue", "pnode")

NodeRow = tuple[str, int, str, int, str | None, str | None, str | None]


class NodeRows:
    """Node rows as columns, in ``ROW_COLUMNS`` order: the form the expectation suite's
    DataFrame is built from. A million rows cost about a second less than as tuples, which
    Arrow would take apart into columns again."""

    __slots__ = ("depths", "keys", "node_paths", "pnodes", "pvalues", "row_indexes", "sections")

    def __init__(self) -> None:
        self.node_paths: list[str] = []
        self.depths: list[int] = []
        self.sections: list[str] = []
        self.row_indexes: list[int] = []
        self.keys: list[str | None] = []
        self.pvalues: list[str | None] = []
        self.pnodes: list[str | None] = []

    def __len__(self) -> int:
        return len(self.node_paths)

    def columns(self) -> tuple[list[Any], ...]:
        return (
            self.node_paths,
            self.depths,
            self.sections,
            self.row_indexes,
            self.keys,
            self.pvalues,
            self.pnodes,
        )

    def rows(self) -> list[NodeRow]:
        return list(zip(*self.columns(), strict=True))

    def add_node(self, node: Node, location: str, depth: int, order: int) -> None:
        """The rows of a node file as docs/format.md#node-files lays them out: its system rows, the
        key table of exactly ``order`` rows, then the buffer in the node's message order (the
        order ``encode_node`` writes; the decoder already refused any file whose rows break
        the layout). Row indexes count from 0 in each node."""
        system = system_rows(node)
        children = node.children
        key_count = len(node.keys)
        padding = max(0, order - 1 - key_count)
        buffered = len(node.buffer)
        table = 1 + key_count + padding
        total = len(system) + table + buffered
        self.node_paths.extend(itertools.repeat(location, total))
        self.depths.extend(itertools.repeat(depth, total))
        self.sections.extend(itertools.repeat(SECTION_SYSTEM, len(system)))
        self.sections.extend(itertools.repeat(SECTION_KEY_TABLE, table))
        self.sections.extend(itertools.repeat(SECTION_BUFFER, buffered))
        self.row_indexes.extend(range(total))
        self.keys.extend(key for key, _ in system)
        self.keys.append(None)
        self.keys.extend(node.keys)
        self.keys.extend(itertools.repeat(None, padding))
        self.keys.extend(node.buffer)
        self.pvalues.extend(value for _, value in system)
        self.pvalues.append(None)
        self.pvalues.extend(node.values)
        self.pvalues.extend(itertools.repeat(None, padding))
        self.pvalues.extend(node.buffer.values())
        self.pnodes.extend(itertools.repeat(None, len(system)))
        if children:
            self.pnodes.extend(children[: 1 + key_count])
        else:
            self.pnodes.extend(itertools.repeat(None, 1 + key_count))
        self.pnodes.extend(itertools.repeat(None, padding + buffered))

    def key_span(self) -> KeySpan:
        """Where these rows' key-table keys lie (``KeySpan``)."""
        return key_span(
            [
                key
                for section, key in zip(self.sections, self.keys, strict=True)
                if section == SECTION_KEY_TABLE and key is not None
            ]
        )


@dataclass(frozen=True)
class KeySpan:
    """Where some key-table keys lie, for the unique-keys expectation's candidates
    (``unique_key_candidates``): the least and the greatest, and every key among them that
    occurs more than once. A key in two key tables of a version is repeated within one span or
    lies in two spans whose ranges overlap; nothing else can break the rule."""

    low: str | None = None
    high: str | None = None
    repeated: tuple[str, ...] = ()


def key_span(keys: Sequence[str]) -> KeySpan:
    """The ``KeySpan`` of these keys (one set and a min and max over them: about 0.2 s per
    million keys of a subtree task)."""
    if not keys:
        return KeySpan()
    repeated: tuple[str, ...] = ()
    if len(set(keys)) != len(keys):
        seen: set[str] = set()
        again: set[str] = set()
        for key in keys:
            (again if key in seen else seen).add(key)
        repeated = tuple(sorted(again))
    return KeySpan(min(keys), max(keys), repeated)


@dataclass(frozen=True)
class UniqueCandidates:
    """The only (version, key) pairs where the unique-keys rule can fail: keys in the
    overlapping part of two spans of a version (``ranges``: version, low, high, inclusive) and
    keys repeated within one span (``keys``: version, key). Both are empty for a sound tree,
    whose subtrees hold disjoint key ranges."""

    ranges: tuple[tuple[int, str, str], ...] = ()
    keys: tuple[tuple[int, str], ...] = ()


def unique_key_candidates(
    spans: Iterable[tuple[int, KeySpan]], limit: int
) -> UniqueCandidates | None:
    """The candidates of these (version, span) pairs, or None when there are more than
    ``limit`` ranges and keys together (a tree broken that widely: judge every key).

    Per version, the spans sorted by their least key, with the greatest key seen so far: a
    span that starts at or below it overlaps an earlier one, and every key it shares with any
    earlier span lies between its own least key and the smaller of its greatest and that
    running greatest."""
    by_version: dict[int, list[KeySpan]] = {}
    for version, span in spans:
        by_version.setdefault(version, []).append(span)
    ranges: list[tuple[int, str, str]] = []
    keys: list[tuple[int, str]] = []
    for version, version_spans in sorted(by_version.items()):
        keys.extend((version, key) for span in version_spans for key in span.repeated)
        reach: str | None = None
        for low, high in sorted(
            (s.low, s.high) for s in version_spans if s.low is not None and s.high is not None
        ):
            if reach is not None and low <= reach:
                ranges.append((version, low, min(high, reach)))
            reach = high if reach is None else max(reach, high)
        if len(ranges) + len(keys) > limit:
            return None
    return UniqueCandidates(tuple(ranges), tuple(keys))


def node_rows(node: Node, location: str, depth: int, order: int) -> list[NodeRow]:
    """The rows of one node file, one tuple per row: (node path, depth, section, row index,
    key, pvalue, pnode); see ``NodeRows.add_node``."""
    rows = NodeRows()
    rows.add_node(node, location, depth, order)
    return rows.rows()


def subtree_node_rows(store: NodeStore, task: SubtreeTask, max_depth: int) -> NodeRows:
    """Rows of every node of a subtree that can be loaded (a walk, not a check: whatever it
    cannot load or would enter twice, the checker has already reported)."""
    rows = NodeRows()
    seen: set[str] = set()
    stack: list[tuple[str, int]] = [(task.location, task.depth)]
    while stack:
        location, depth = stack.pop()
        if location in seen or location in task.ancestors or depth > max_depth:
            continue
        seen.add(location)
        try:
            node = store.load(location)
        except StorageError:
            raise  # the store failed, not the file: no verdict (see check.py)
        except LakecoreError:
            continue
        rows.add_node(node, location, depth, store.order)
        stack.extend((child, depth + 1) for child in reversed(node.children))
    return rows
