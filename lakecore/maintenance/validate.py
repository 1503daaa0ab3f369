"""Validating versions in pieces: the units behind the Spark ``validate`` job (no Spark here).

The single-process reference is ``lakecore.lakehouse.version_check.check_version``; this module computes
the same violations with the work cut into subtrees, so that executors can do it (the same steps
in one process, and a validation's result, are ``lakecore.maintenance.validate_run``; the node
rows for the expectation suite are ``node_rows``, the deep catalog checks ``catalog_check``):

1. **plan** (driver, ``plan_version``): ``partition.cut_tree`` loads the top of the tree and
   hands out the level below as ``SubtreeTask``\\ s. The top is then checked by the one invariant
   checker, ``TreeChecker.check_root``, stopped at the cut (``_TopChecker``): it checks every
   top node exactly as fsck would and records which subtree roots it would have entered, with
   the bounds and depth it would have entered them at. Only those become tasks, so a node that
   the checker refuses to enter (a cycle, a node reached twice, a parent with a broken key
   table) is not checked behind its back. If the top itself cannot be loaded (a missing or
   corrupt node near the root), the cut falls back to the root's children: the driver never
   needs anything but the root, which opening the version already decoded.
2. **subtrees** (executors, ``run_subtree_work``): ``TreeChecker.check_subtree`` per task,
   plus, on request, the rows of every node for the expectation suite (``node_rows``) and the
   deep catalog checks of the keys that resolve inside the subtree (``check_catalog_items``).
3. **combine** (driver, ``combine_version``): the reports are merged; leaf depths collected
   across subtrees must all be equal (a ``leaf-depth`` violation on the root otherwise, as
   ``check_root`` reports it); a node path met in two subtrees is a ``shared-node``; and the
   catalog parts are joined and checked for "every table's namespace exists".

The violations are fsck's, with one exception: a node shared by two *different subtree tasks*
is reported at the node itself (fsck names the parent that reaches it second), and both
copies are checked, so such a tree may show more violations than fsck lists. The verdict is
the same. Within the top, or within one subtree, the checker itself sees the second visit.

Work is shared between versions: retained versions share most of their nodes (copy-on-write),
so identical subtree tasks (same node, bounds, depth and tree shape) of several versions are
checked once (``merge_work``) and the result counts for each of them.

**Deep checks and merge-on-read.** The catalog is the *resolved* map: a message in an ancestor's
buffer overrides everything below it. The driver therefore resolves the keys held in the top's
key tables itself (``resolve_top``) and hands each subtree the ancestors' messages that fall in
its key range (its *overlay*, newest first wins). An executor scans its subtree
(``lakecore.core.tree.scan``) and applies the overlay on top, which yields exactly the part of
``LakehouseView.items()`` inside the subtree's range. Versions whose overlays differ share the
subtree scan and, within one task, every (key, location) check. As in fsck, catalog violations
only count for a version whose tree checks are clean.

**Counts travel, lists stay.** A broken tree can have a violation per key. The driver needs
only each subtree's counts by rule to combine the verdict (``SubtreeResult.counted_only``); the
violations themselves stay where they were found (``SubtreeResult.violation_entries``, rows an
engine keeps) and reach the driver as a capped sample, or a full list written elsewhere.

A node file that is missing, unreadable or corrupt is a violation (``unreadable-node``), never
an exception: the checker reports it, and every walk here skips what it cannot load.

Nodes are read through a fresh ``NodeCache`` per validation (``fresh_store``), never the
process-wide one: a validator must look at the bytes on storage, not at a node decoded before
the file was damaged.
"""

from __future__ import annotations

import bisect
import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from lakecore.core import keys as K
from lakecore.core.defs import LakehouseDef
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree import prefix_upper_bound, scan, scan_prefix
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.errors import LakecoreError, StorageError
from lakecore.maintenance.catalog_check import (
    TABLES_PER_NAMESPACE_LIMIT,
    CatalogPart,
    EntryCheck,
    check_catalog_items,
    location_reader,
    namespace_violations,
)
from lakecore.maintenance.node_rows import KeySpan, NodeRows, subtree_node_rows
from lakecore.maintenance.partition import SubtreeTask, TreeCut, cut_tree, with_stores_reading_ahead
from lakecore.maintenance.tree_check import (
    CheckReport,
    TreeChecker,
    VersionCheck,
    Violation,
    add_counts,
    count_rules,
)

if TYPE_CHECKING:
    pass

# A validation's own node cache: big enough that the row walk after a subtree check reads
# every node from memory, small enough for an executor.
VALIDATE_CACHE_BYTES: Final = 64 << 20
# Whose rule a violation breaks: the invariant checker's, or the deep catalog checks'.
TREE_SCOPE: Final = "tree"
CATALOG_SCOPE: Final = "catalog"

Message = tuple[str, str | None]
Overlay = tuple[Message, ...]


# -- reading definitions ---------------------------------------------------------------------------


def fresh_store(storage: Storage, order: int, external_roots: Iterable[str] = ()) -> NodeStore:
    """A store with its own cache: reads what is on storage now."""
    return NodeStore(
        storage, order, cache=NodeCache(VALIDATE_CACHE_BYTES), external_roots=external_roots
    )


# -- plan (driver) ---------------------------------------------------------------------------------


class _TopChecker(TreeChecker):
    """``TreeChecker`` stopped at the cut: a subtree root is recorded instead of entered."""

    def __init__(self, store: NodeStore, shape: TreeShape, cut_locations: set[str]) -> None:
        super().__init__(store, shape, check_values=True, collect_paths=True)
        self._cut = cut_locations
        self.entered: list[str] = []

    def _load(self, location: str, report: CheckReport) -> tuple[Node | None, int]:
        if location in self._cut:
            self.entered.append(location)
            return None, 0
        return super()._load(location, report)

    def _read_ahead(self, locations: list[str]) -> None:
        # The subtree roots are read by their tasks, not here.
        super()._read_ahead([location for location in locations if location not in self._cut])


@dataclass
class VersionPlan:
    """One version, planned on the driver: its checked top and the subtree tasks below."""

    version: int
    root_location: str
    shape: TreeShape
    lakehouse_def: LakehouseDef
    external_roots: tuple[str, ...]
    top_report: CheckReport
    top_nodes: list[tuple[str, Node, int]]
    tasks: list[SubtreeTask]
    overlays: dict[str, Overlay] = field(default_factory=dict)
    top_catalog: CatalogPart | None = None
    catalog_error: str | None = None
    cut_fallback: str | None = None
    # The namespaces with a key in this version (deep only; empty when the scan failed), and
    # how to list a namespace's first tables in it (for ``namespace_violations``).
    keyed_namespaces: frozenset[str] = frozenset()
    list_tables: Callable[[str], list[tuple[str, str]]] | None = None


def _robust_cut(
    store: NodeStore, root: Node, root_location: str, target: int, max_depth: int
) -> tuple[TreeCut, str | None]:
    try:
        return cut_tree(store, root, root_location, max(1, target), max_depth), None
    except StorageError:
        raise  # the store failed, not the file: no verdict (see check.py)
    except LakecoreError as exc:
        # A node of the top is missing or corrupt: cut right below the root instead; the
        # subtree check of that node reports it.
        cut = TreeCut(top=[(root_location, root, 1)], cut_depth=2)
        n_keys = len(root.keys)
        cut.subtrees = [
            SubtreeTask(
                child,
                root.keys[i - 1] if i > 0 else None,
                root.keys[i] if i < n_keys else None,
                2,
                (root_location,),
            )
            for i, child in enumerate(root.children)
        ]
        return cut, " ".join(str(exc).split())


def resolve_top(
    root: Node, top: Mapping[str, Node], task_locations: set[str]
) -> tuple[list[tuple[str, str]], dict[str, Overlay]]:
    """Merge-on-read over the top of a tree: the resolved (key, pvalue) pairs of the keys held
    in top key tables (or, for a leaf root, of the whole map), and for every subtree root the
    ancestors' messages inside its key range (the same ``pending`` ``tree.scan`` carries)."""
    items: dict[str, str] = {}
    overlays: dict[str, Overlay] = {}
    stack: list[tuple[Node, dict[str, str | None]]] = [(root, {})]
    entered: set[str] = set()  # a top with a cycle or a shared node is reported by the checker
    while stack:
        node, pending = stack.pop()
        merged: dict[str, str | None] = dict(node.buffer)
        merged.update(pending)  # ancestors' messages are newer
        if not node.children:
            out = dict(zip(node.keys, node.values, strict=True))
            for key, value in merged.items():
                if value is None:
                    out.pop(key, None)
                else:
                    out[key] = value
            items.update(out)
            continue
        keys = node.keys
        for i, key in enumerate(keys):
            value = merged[key] if key in merged else node.values[i]
            if value is not None:
                items[key] = value
        for i, child in enumerate(node.children):
            low = keys[i - 1] if i > 0 else None
            high = keys[i] if i < len(keys) else None
            child_pending = {
                k: v
                for k, v in merged.items()
                if (low is None or k > low) and (high is None or k < high)
            }
            if child in task_locations:
                overlays.setdefault(child, tuple(sorted(child_pending.items())))
            elif child in top and child not in entered:
                entered.add(child)
                stack.append((top[child], child_pending))
    return sorted(items.items()), overlays


def plan_version(
    storage: Storage,
    version: int,
    root: Node,
    root_location: str,
    root_size: int | None,
    lakehouse_def: LakehouseDef,
    store: NodeStore,
    target: int,
    *,
    deep: bool = False,
) -> VersionPlan:
    """Cut the version's tree, check its top with the invariant checker, and (``deep``)
    resolve the top's keys, check them, and work out each subtree's overlay."""
    shape = TreeShape.of(lakehouse_def)
    cut, fallback = _robust_cut(store, root, root_location, target, shape.max_depth)
    # A location both in the top and below the cut (a cycle, a shared node) is checked where
    # the checker meets it first, in the top.
    in_top = {location for location, _, _ in cut.top}
    checker = _TopChecker(store, shape, {t.location for t in cut.subtrees} - in_top)
    top_report = checker.check_root(root, root_location, root_size)
    top_report.value_locations.clear()
    entered = set(checker.entered)
    tasks: list[SubtreeTask] = []
    seen: set[str] = set()
    for task in cut.subtrees:
        if task.location in entered and task.location not in seen:
            seen.add(task.location)
            tasks.append(task)
    plan = VersionPlan(
        version,
        root_location,
        shape,
        lakehouse_def,
        tuple(store.external_roots),
        top_report,
        list(cut.top),
        tasks,
        cut_fallback=fallback,
    )
    if deep:
        top = {location: node for location, node, _ in cut.top}
        try:
            items, plan.overlays = resolve_top(root, top, seen)
            plan.keyed_namespaces = _keyed_namespaces(store, root, lakehouse_def)
            plan.list_tables = _table_lister(store, root, lakehouse_def)
            plan.top_catalog = check_catalog_items(
                items, lakehouse_def, location_reader(storage, plan.external_roots)
            )
        except StorageError:
            raise  # the store failed, not the file: no verdict (see check.py)
        except LakecoreError as exc:
            plan.catalog_error = " ".join(str(exc).split())
    return plan


# -- subtrees (executors) --------------------------------------------------------------------------


@dataclass(frozen=True)
class SubtreeWork:
    """One subtree check, shared by every version in ``versions``; ``overlays`` groups those
    versions by the ancestors' messages that land in the subtree (deep checks only)."""

    task: SubtreeTask
    versions: tuple[int, ...]
    shape: TreeShape
    lakehouse_def: LakehouseDef
    external_roots: tuple[str, ...] = ()
    overlays: tuple[tuple[tuple[int, ...], Overlay], ...] = ()
    deep: bool = False
    rows: bool = False
    # Per overlay (same order): the namespaces keyed in every one of its versions whose tables
    # can fall in this subtree (deep only).
    keyed_namespaces: tuple[frozenset[str], ...] = ()

    @property
    def key(self) -> tuple[Any, ...]:
        t = self.task
        return (t.location, t.low, t.high, t.depth, self.shape, self.external_roots)


@dataclass
class SubtreeResult:
    task: SubtreeTask
    versions: tuple[int, ...]
    report: CheckReport
    catalog: list[tuple[tuple[int, ...], CatalogPart]] = field(default_factory=list)
    catalog_error: str | None = None
    rows: NodeRows = field(default_factory=NodeRows)
    # len(rows) and where their key-table keys lie, kept when the rows themselves are dropped
    # (they travel apart, as DataFrame rows).
    row_count: int = 0
    key_span: KeySpan = field(default_factory=KeySpan)

    def without_rows(self) -> SubtreeResult:
        return replace(
            self, rows=NodeRows(), row_count=len(self.rows), key_span=self.rows.key_span()
        )

    def violation_entries(self) -> Iterator[tuple[int, str, Violation]]:
        """Every violation this result lists, once per version it holds for, as (version,
        scope, violation): scope ``tree`` (the invariant checker's) or ``catalog`` (the deep
        checks', which count for a version only when its whole tree is clean: see
        ``combine_version``)."""
        for violation in self.report.violations:
            for version in self.versions:
                yield version, TREE_SCOPE, violation
        for versions, part in self.catalog:
            for violation in part.violations:
                for version in versions:
                    yield version, CATALOG_SCOPE, violation

    def counted_only(self) -> SubtreeResult:
        """This result with its violations counted by rule instead of listed: what the driver
        needs to combine (the verdict and the counts), while the list itself stays with the
        executors (``violation_entries``)."""
        report = replace(
            self.report,
            violations=[],
            unlisted=add_counts(count_rules(self.report.violations), self.report.unlisted),
        )
        catalog = [
            (
                versions,
                replace(
                    part,
                    violations=[],
                    unlisted=add_counts(count_rules(part.violations), part.unlisted),
                ),
            )
            for versions, part in self.catalog
        ]
        return replace(self, report=report, catalog=catalog)


def merge_work(plans: Sequence[VersionPlan], *, deep: bool, rows: bool) -> list[SubtreeWork]:
    """One ``SubtreeWork`` per distinct subtree task of all the plans."""
    grouped: dict[
        tuple[Any, ...], tuple[SubtreeTask, VersionPlan, list[int], dict[Overlay, list[int]]]
    ] = {}
    for plan in plans:
        for task in plan.tasks:
            key = (task.location, task.low, task.high, task.depth, plan.shape, plan.external_roots)
            entry = grouped.setdefault(key, (task, plan, [], {}))
            entry[2].append(plan.version)
            if deep:
                entry[3].setdefault(plan.overlays.get(task.location, ()), []).append(plan.version)
    keyed = {plan.version: plan.keyed_namespaces for plan in plans}
    # Per group of versions, once: the namespaces keyed in all of them, sorted by table-key prefix.
    by_prefix: dict[tuple[int, ...], _SortedNamespaces] = {}
    out = []
    for task, plan, versions, overlays in grouped.values():
        groups = tuple((tuple(vs), overlay) for overlay, vs in overlays.items())
        known = []
        for vs, _ in groups:
            if vs not in by_prefix:
                by_prefix[vs] = _SortedNamespaces(
                    frozenset.intersection(*(keyed[v] for v in vs)), plan.lakehouse_def
                )
            known.append(by_prefix[vs].in_range(task))
        out.append(
            SubtreeWork(
                task,
                tuple(versions),
                plan.shape,
                plan.lakehouse_def,
                plan.external_roots,
                groups,
                deep,
                rows,
                tuple(known),
            )
        )
    return out


def _keyed_namespaces(store: NodeStore, root: Node, lakehouse_def: LakehouseDef) -> frozenset[str]:
    """The namespaces with a key in the version (their keys sort first and are few), or none
    when the scan fails: the subtrees then list every table, as without this shortcut."""
    names: set[str] = set()
    try:
        for key, _ in scan_prefix(store, root, K.NAMESPACE_KEY_PREFIX):
            try:
                names.add(K.parse_namespace_key(key, lakehouse_def))
            except LakecoreError:
                continue  # a malformed key: its own violation, and no namespace
    except StorageError:
        raise  # the store failed, not the file: no verdict (see check.py)
    except LakecoreError:
        return frozenset()
    return frozenset(names)


def _table_lister(
    store: NodeStore, root: Node, lakehouse_def: LakehouseDef
) -> Callable[[str], list[tuple[str, str]]]:
    def list_tables(ns: str) -> list[tuple[str, str]]:
        """The namespace's tables, then its views (each counts as a table for "every table's
        namespace exists")."""
        found: list[tuple[str, str]] = []
        for prefix in (K.table_key_prefix(ns, lakehouse_def), K.view_key_prefix(ns, lakehouse_def)):
            for key, location in scan_prefix(store, root, prefix):
                with contextlib.suppress(LakecoreError):  # a malformed key has its own violation
                    found.append((K.parse_key(key, lakehouse_def).name, location))
                if len(found) >= TABLES_PER_NAMESPACE_LIMIT:
                    return found
        return found

    return list_tables


class _SortedNamespaces:
    """Namespaces sorted by their table-key and view-key prefixes (each namespace twice), so
    that the ones whose tables or views can fall in a subtree's key bounds are a bisection away
    (not a pass over every namespace per subtree). Missing one only costs its tables being
    listed: the answer errs on the safe side."""

    def __init__(self, names: frozenset[str], lakehouse_def: LakehouseDef) -> None:
        pairs = sorted(
            (prefix(ns, lakehouse_def), ns)
            for ns in names
            for prefix in (K.table_key_prefix, K.view_key_prefix)
        )
        self._prefixes = [prefix for prefix, _ in pairs]
        self._names = [ns for _, ns in pairs]

    def in_range(self, task: SubtreeTask) -> frozenset[str]:
        """The names whose table keys can fall within the task's bounds."""
        # One before the first prefix >= low: that prefix's keys may extend past low.
        start = 0 if task.low is None else max(0, bisect.bisect_left(self._prefixes, task.low) - 1)
        stop = (
            len(self._prefixes)
            if task.high is None
            else bisect.bisect_left(self._prefixes, task.high)
        )
        chosen = set()
        for prefix, ns in zip(self._prefixes[start:stop], self._names[start:stop], strict=True):
            upper = prefix_upper_bound(prefix)
            if task.low is None or upper is None or upper > task.low:
                chosen.add(ns)
        return frozenset(chosen)


def run_subtree_works(storage: Storage, works: Sequence[SubtreeWork]) -> Iterator[SubtreeResult]:
    """``run_subtree_work`` for each of an executor's works, in order, with one store per kind
    of tree for all of them, reading the next works' subtree roots ahead
    (``with_stores_reading_ahead``: 163 GETs at 20 ms were 3.3 s of a 20k-table check)."""
    for work, store in with_stores_reading_ahead(
        works,
        lambda w: (w.shape.order, w.external_roots),
        lambda w: w.task.location,
        lambda kind: fresh_store(storage, *kind),
    ):
        yield run_subtree_work(storage, work, store)


def run_subtree_work(
    storage: Storage, work: SubtreeWork, store: NodeStore | None = None
) -> SubtreeResult:
    """Check one subtree (and, as asked, collect its rows and run its deep catalog checks)."""
    store = store or fresh_store(storage, work.shape.order, work.external_roots)
    checker = TreeChecker(store, work.shape, check_values=True, collect_paths=True)
    task = work.task
    report = checker.check_subtree(task.location, task.low, task.high, task.depth, task.ancestors)
    report.value_locations.clear()
    result = SubtreeResult(task, work.versions, report)
    if work.rows:
        result.rows = subtree_node_rows(store, task, work.shape.max_depth)
    if work.deep and work.overlays:
        try:
            base = dict(scan(store, store.load(task.location)))
        except StorageError:
            raise  # the store failed, not the file: no verdict (see check.py)
        except LakecoreError as exc:
            result.catalog_error = " ".join(str(exc).split())
            return result
        read = location_reader(storage, work.external_roots)
        memo: dict[tuple[str, str], EntryCheck] = {}
        known = work.keyed_namespaces or (frozenset(),) * len(work.overlays)
        for (versions, overlay), keyed in zip(work.overlays, known, strict=True):
            resolved = dict(base)
            for key, value in overlay:
                if value is None:
                    resolved.pop(key, None)
                else:
                    resolved[key] = value
            result.catalog.append(
                (
                    versions,
                    check_catalog_items(
                        sorted(resolved.items()), work.lakehouse_def, read, memo, keyed
                    ),
                )
            )
    return result


# -- combine (driver) ------------------------------------------------------------------------------


@dataclass
class VersionResult(VersionCheck):
    """A version's verdict as fsck gives it, and what the distributed run did to reach it."""

    catalog_checked: bool = False
    catalog_keys: int = 0
    subtree_tasks: int = 0


def combine_version(
    plan: VersionPlan, results: Iterable[SubtreeResult], *, deep: bool = False
) -> VersionResult:
    """Join the top and the subtree results of one version into its verdict."""
    report = CheckReport()
    report.merge(plan.top_report)
    mine = [r for r in results if plan.version in r.versions]
    for result in mine:
        report.merge(result.report)
    if len(report.leaf_depths) > 1 and not any(
        v.rule == "leaf-depth" for v in plan.top_report.violations
    ):
        report.violations.append(
            Violation(
                plan.root_location,
                "leaf-depth",
                f"leaves at depths {sorted(report.leaf_depths)}; all must be equal",
            )
        )
    counts = Counter(report.node_paths)
    for path in sorted(p for p, n in counts.items() if n > 1):
        report.violations.append(
            Violation(path, "shared-node", f"node is reached {counts[path]} times in one version")
        )
    report.node_paths = []
    outcome = VersionResult(plan.version, report, subtree_tasks=len(plan.tasks))
    if deep and report.ok:
        parts: list[CatalogPart] = [plan.top_catalog] if plan.top_catalog is not None else []
        violations: list[Violation] = []
        if plan.catalog_error is not None:
            violations.append(Violation(plan.root_location, "catalog-scan", plan.catalog_error))
        for result in mine:
            if result.catalog_error is not None:
                violations.append(
                    Violation(result.task.location, "catalog-scan", result.catalog_error)
                )
            for versions, part in result.catalog:
                if plan.version in versions:
                    parts.append(part)
        for part in parts:
            violations.extend(part.violations)
            add_counts(outcome.catalog_unlisted, part.unlisted)
        violations.extend(namespace_violations(parts, plan.list_tables))
        outcome.catalog_violations = violations
        outcome.catalog_checked = True
        outcome.catalog_keys = sum(part.keys_checked for part in parts)
    return outcome


__all__ = [
    "CATALOG_SCOPE",
    "TREE_SCOPE",
    "SubtreeResult",
    "SubtreeWork",
    "VersionPlan",
    "VersionResult",
    "combine_version",
    "fresh_store",
    "merge_work",
    "plan_version",
    "resolve_top",
    "run_subtree_work",
    "run_subtree_works",
]
