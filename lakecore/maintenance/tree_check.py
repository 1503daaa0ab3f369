"""The invariant checker: every rule of docs/format.md#node-files and #the-tree, over a tree or
a subtree.

One checker serves ``lakecore fsck``, the Spark validate job (one call per subtree on the
executors, plus one for the top of the tree on the driver) and the tests. It reports every
violation it finds instead of stopping at the first, and it never follows a pointer it cannot
trust: a missing, unreadable, foreign or escaping node is one violation and its subtree is
skipped; a node reached twice (a cycle or a shared subtree) is reported and not entered again.
A ``StorageError`` (the store could not be asked: credentials, network, a timeout) is not a
violation: it propagates, so the check fails instead of judging files it could not read.

Rules checked at each node (``low`` and ``high`` are the exclusive key bounds inherited from
the ancestors; a message or key outside them would be invisible to merge-on-read):

    file     readable, Arrow IPC node schema, size <= node_file_max_size_bytes
    system   non-root nodes carry no root-only system key
    keys     sorted, unique, at most N-1, inside (low, high)
    buffer   every message key inside (low, high); pnode null (enforced by the decoder)
    shape    leaf: no children; internal: k+1 children; all leaves at one depth
    fill     root: >= 2 children unless a leaf; internal: >= ceil(N/2) children; leaf: >= 1 key
    depth    no deeper than the order allows
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from lakecore.core import keys as K
from lakecore.core.locations import check_relative_path, is_full_uri
from lakecore.core.node import Node
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import NodeStore
from lakecore.errors import LakecoreError, StorageError

# The rules for files that cannot be read at all: the damage a repair mends (the others are
# rules a readable file breaks).
UNREADABLE_ROOT: Final = "unreadable-root"
UNREADABLE_NODE: Final = "unreadable-node"
DAMAGE_RULES: Final = frozenset({UNREADABLE_ROOT, UNREADABLE_NODE})


@dataclass(frozen=True)
class Violation:
    location: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.location}: [{self.rule}] {self.detail}"

    def as_dict(self) -> dict[str, str]:
        return {"location": self.location, "rule": self.rule, "detail": self.detail}


@dataclass
class CheckReport:
    """What a check saw: violations, node and key counts, and the leaf depths it met."""

    violations: list[Violation] = field(default_factory=list)
    # Violations counted but not listed in ``violations``, by rule. A distributed check keeps
    # its executors' violations where they are (as rows, the full list) and sends the driver
    # only their counts, so that the driver's memory does not grow with a broken tree.
    unlisted: dict[str, int] = field(default_factory=dict)
    nodes_checked: int = 0
    keys_seen: int = 0
    messages_seen: int = 0
    bytes_checked: int = 0
    leaf_depths: set[int] = field(default_factory=set)
    node_paths: list[str] = field(default_factory=list)
    value_locations: list[str] = field(default_factory=list)

    @property
    def violation_count(self) -> int:
        """Every violation: the listed and the unlisted."""
        return len(self.violations) + sum(self.unlisted.values())

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    def merge(self, other: CheckReport) -> None:
        self.violations.extend(other.violations)
        add_counts(self.unlisted, other.unlisted)
        self.nodes_checked += other.nodes_checked
        self.keys_seen += other.keys_seen
        self.messages_seen += other.messages_seen
        self.bytes_checked += other.bytes_checked
        self.leaf_depths |= other.leaf_depths
        self.node_paths.extend(other.node_paths)
        self.value_locations.extend(other.value_locations)


@dataclass
class VersionCheck:
    """One version's verdict: the tree checker's report plus the catalog rules' violations."""

    version: int
    report: CheckReport
    catalog_violations: list[Violation] = field(default_factory=list)
    # The catalog's violations counted but not listed, by rule (see ``CheckReport.unlisted``).
    catalog_unlisted: dict[str, int] = field(default_factory=dict)

    @property
    def violations(self) -> list[Violation]:
        """The listed violations (all of them, unless ``unlisted`` counts some)."""
        return self.report.violations + self.catalog_violations

    @property
    def unlisted(self) -> dict[str, int]:
        return add_counts(dict(self.report.unlisted), self.catalog_unlisted)

    @property
    def violation_count(self) -> int:
        return len(self.violations) + sum(self.unlisted.values())

    def violations_by_rule(self) -> dict[str, int]:
        """How many violations of each rule, listed or not."""
        return add_counts(count_rules(self.violations), self.unlisted)

    @property
    def ok(self) -> bool:
        return self.violation_count == 0


def add_counts(into: dict[str, int], counts: Mapping[str, int]) -> dict[str, int]:
    """Add ``counts`` (rule -> count) into ``into``; returns ``into``."""
    for rule, count in counts.items():
        into[rule] = into.get(rule, 0) + count
    return into


def count_rules(violations: Iterable[Violation]) -> dict[str, int]:
    """Rule -> how many of ``violations`` break it."""
    counts: dict[str, int] = {}
    for violation in violations:
        counts[violation.rule] = counts.get(violation.rule, 0) + 1
    return counts


def _in_bounds(key: str, low: str | None, high: str | None) -> bool:
    return (low is None or key > low) and (high is None or key < high)


class TreeChecker:
    """Checks nodes of one tree shape; ``check_values`` also checks pvalues as locations."""

    def __init__(
        self,
        store: NodeStore,
        shape: TreeShape,
        *,
        check_values: bool = False,
        collect_paths: bool = False,
    ) -> None:
        self.store = store
        self.shape = shape
        self.check_values = check_values
        self.collect_paths = collect_paths

    def check_root(
        self, root: Node, root_location: str, root_size: int | None = None
    ) -> CheckReport:
        """Check a whole version from its (already decoded) root node."""
        report = CheckReport()
        self._check_node(
            root, root_location, root_size, None, None, 1, True, report, set(), (root_location,)
        )
        if len(report.leaf_depths) > 1:
            report.violations.append(
                Violation(
                    root_location,
                    "leaf-depth",
                    f"leaves at depths {sorted(report.leaf_depths)}; all must be equal",
                )
            )
        return report

    def check_subtree(
        self,
        location: str,
        low: str | None,
        high: str | None,
        depth: int,
        ancestors: tuple[str, ...] = (),
    ) -> CheckReport:
        """Check the subtree at ``location`` whose root sits at ``depth`` (root = 1) with the
        inherited bounds ``low`` < keys < ``high``. Leaf depths are reported, not judged: the
        caller compares them across subtrees."""
        report = CheckReport()
        node, size = self._load(location, report)
        if node is not None:
            self._check_node(
                node, location, size, low, high, depth, False, report, set(), (*ancestors, location)
            )
        return report

    def _load(self, location: str, report: CheckReport) -> tuple[Node | None, int]:
        try:
            node, size = self.store.load_sized(location)
        except StorageError:
            # The store failed (network, credentials, permissions, a timeout), not the file:
            # that is no verdict on the lakehouse. The caller fails (exit 4, retried) instead
            # of reporting a violation that would send an operator off to repair it.
            raise
        except LakecoreError as exc:
            report.violations.append(
                Violation(location, UNREADABLE_NODE, " ".join(str(exc).split()))
            )
            return None, 0
        return node, size

    def _read_ahead(self, locations: list[str]) -> None:
        """The check goes depth first, one child at a time: on S3 the siblings' reads start
        now instead of one round trip after another (``NodeStore.prefetch``; a failed read
        surfaces at its load, with the same verdict). A checker that will not load some of
        them leaves those out."""
        self.store.prefetch(locations)

    def _check_node(
        self,
        node: Node,
        location: str,
        size: int | None,
        low: str | None,
        high: str | None,
        depth: int,
        is_root: bool,
        report: CheckReport,
        visited: set[str],
        ancestors: tuple[str, ...],
    ) -> None:
        add: Callable[[str, str], None] = lambda rule, detail: report.violations.append(  # noqa: E731
            Violation(location, rule, detail)
        )
        report.nodes_checked += 1
        report.keys_seen += len(node.keys)
        report.messages_seen += len(node.buffer)
        if self.collect_paths and not is_root:
            report.node_paths.append(location)
        if size is not None:
            report.bytes_checked += size
            if size > self.shape.node_file_max_size_bytes:
                add(
                    "file-size",
                    f"{size} bytes, over node_file_max_size_bytes={self.shape.node_file_max_size_bytes}",
                )
        if depth > self.shape.max_depth:
            add(
                "depth",
                f"depth {depth} exceeds the {self.shape.max_depth} levels order {self.shape.order} allows",
            )
            return
        if not is_root:
            for key in K.ROOT_ONLY_SYSTEM_KEYS:
                if key in node.system:
                    add("system-rows", f"non-root node carries root-only system key {key!r}")
        n_keys = len(node.keys)
        if n_keys > self.shape.max_keys:
            add(
                "key-count", f"{n_keys} keys; order {self.shape.order} allows {self.shape.max_keys}"
            )
        for i in range(1, n_keys):
            if node.keys[i] <= node.keys[i - 1]:
                add("key-order", f"key {node.keys[i]!r} follows {node.keys[i - 1]!r}")
        for key in node.keys:
            if not _in_bounds(key, low, high):
                add(
                    "key-bounds",
                    f"key {key!r} outside the range ({low!r}, {high!r}) its ancestors give it",
                )
        for key in node.buffer:
            if not _in_bounds(key, low, high):
                add(
                    "buffer-bounds",
                    f"message for {key!r} outside the node's range ({low!r}, {high!r}); it would never be read",
                )
        if self.check_values:
            for value in [*node.values, *(v for v in node.buffer.values() if v is not None)]:
                self._check_value(value, add)
                if self.collect_paths:
                    report.value_locations.append(value)
        if node.children and len(node.children) != n_keys + 1:
            add("children", f"{len(node.children)} children for {n_keys} keys")
            return
        if not node.children:
            report.leaf_depths.add(depth)
            if not is_root and n_keys < 1:
                add("fill", "a non-root leaf holds no key")
            return
        n_children = len(node.children)
        if is_root and n_children < 2:
            add("fill", "an internal root needs at least 2 children")
        if not is_root and n_children < self.shape.min_internal_children:
            add(
                "fill",
                f"{n_children} children; a non-root internal node needs {self.shape.min_internal_children}",
            )
        self._read_ahead([c for c in node.children if c not in ancestors and c not in visited])
        for i, child in enumerate(node.children):
            if child in ancestors:
                add("cycle", f"child {child!r} is one of its own ancestors")
                continue
            if child in visited:
                add("shared-node", f"child {child!r} is reached twice in one version")
                continue
            visited.add(child)
            child_low = node.keys[i - 1] if i > 0 else low
            child_high = node.keys[i] if i < n_keys else high
            loaded, child_size = self._load(child, report)
            if loaded is None:
                continue
            self._check_node(
                loaded,
                child,
                child_size,
                child_low,
                child_high,
                depth + 1,
                False,
                report,
                visited,
                (*ancestors, child),
            )

    @staticmethod
    def _check_value(value: str, add: Callable[[str, str], None]) -> None:
        if is_full_uri(value):
            return  # only exports point outside; the catalog checks where they lead
        try:
            check_relative_path(value)
        except LakecoreError as exc:
            add("pvalue-location", " ".join(str(exc).split()))
