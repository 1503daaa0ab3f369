"""Orphan-file removal ("gc"): delete lakecore files that no retained version reaches.

The units here are engine-neutral: the Spark job (``jobs/gc.py``) runs the listing, the
reachability walk and the deletes on executors and keeps the big sets distributed;
``gc_in_process`` composes the same units with plain Python sets for the CLI, the tests and
small lakes.

What is live
    Every retained version (every root file at the top of the root), every exported snapshot
    root named by one of their lakehouse definitions, and everything those roots reach: their
    node files, the definition files their keys point to, and each root's ``lakehouse_def``.

What may be deleted
    Only files whose *names* follow lakecore's rules (``locations.classify_path``): node files,
    namespace and table definitions, lakehouse definitions, and ``.lakecore-tmp-*`` leftovers of
    an interrupted write. Root files and ``_latest_hint.txt`` are never deleted here (expiring
    versions is ``compact-versions``' job). Any other file is *foreign*: reported, never touched.
    Only the top level and the 4,096 hash directories are listed (lakecore writes nowhere
    else), so files in other directories are neither reported nor deleted.

Steps
    1. list: the top level (driver) first, then the 4,096 hash directories (executors, a few
       requests in flight per task).
    2. retained: read every listed root strictly (with the order its definition gives), its
       definition, and the exports the definitions name. Any failure stops gc before it deletes
       anything (``GcRefusedError``, exit 4): gc only deletes what it can *prove* unreachable.
    3. reach: the driver cuts each retained tree into subtrees (``partition.cut_tree``) and
       de-duplicates subtree locations across versions (consecutive versions share almost every
       subtree); executors walk the subtrees (``reachable.reachable_from_subtree``); the
       driver adds the root files, definitions, top nodes and their values.
    4. orphans = deletable listed files minus reachable paths (``tally`` judges each path from
       its listing entries and its reach records: a cogroup in Spark, dicts in one process);
       only those older than the grace period (modification time before ``now - grace``) are
       deleted. Reachable paths that are not listed are reported as missing.
    5. re-check: versions committed since the listing are walked on the driver, descending only
       into nodes not already known reachable (a known-reachable node's subtree is reachable
       too), and whatever they reach is taken out of the orphans. Repeated while versions keep
       landing, a bounded number of rounds.
    6. delete in batches (executors); every name is classified again right before deleting.

Why a grace period
    A commit writes its nodes and definitions *before* its root: until the root lands they
    look like orphans. The grace period must exceed the longest commit (``commit_timeout``), so
    a grace under one hour, or under the configured commit timeout, is refused unless the
    caller says it understands the risk. The re-check in step 5 narrows the window further but
    cannot close it: a commit that started before the listing and lands after the deletes is
    only protected by the grace period.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from lakecore.defs import LakehouseDef
from lakecore.errors import (
    CorruptFileError,
    InvalidLocationError,
    LakecoreError,
    NotFoundError,
    UnsafeOptionError,
)
from lakecore.locations import (
    FileKind,
    check_relative_path,
    classify_path,
    external_root_for,
    hash_directories,
    is_full_uri,
    is_root_node_file_name,
    root_node_file_name,
    version_from_root_node_file_name,
)
from lakecore.maintenance.partition import TreeCut, cut_tree
from lakecore.maintenance.reachable import reachable_from_subtree
from lakecore.node import Node
from lakecore.storage import Storage
from lakecore.tree.shape import TreeShape
from lakecore.tree.store import NodeCache, NodeStore
from lakecore.versions import RootInfo, decode_root, latest_version

# Shorter than any sane commit: below it gc could delete the files of a commit in flight.
MIN_GRACE_SECONDS: Final = 3600
# How far --now may run ahead of this machine's clock before it counts as shortening the grace.
CLOCK_SKEW_TOLERANCE_MILLIS: Final = 5 * 60 * 1000
# Rounds of the new-version re-check before deleting; each round narrows the race window.
MAX_RECHECK_ROUNDS: Final = 3

DELETABLE_KINDS: Final = frozenset(
    {FileKind.NODE, FileKind.NAMESPACE_DEF, FileKind.TABLE_DEF, FileKind.LAKEHOUSE_DEF, FileKind.TEMP}
)
FOREIGN: Final = "foreign"
# Starts an error record in a stream of (path, size) records or a listing. Control characters
# never occur in a stored path (check_relative_path refuses them): it cannot be a real file.
ERROR_KEY: Final = "\x00error: "
UNKNOWN_SIZE: Final = -1
_DELETABLE_NAMES: Final = frozenset(kind.value for kind in DELETABLE_KINDS)


class GcRefusedError(LakecoreError):
    """gc cannot prove what is live (a retained root or node is missing or unreadable, the
    listing failed, ...); nothing was deleted. Repair the named file (or restore it) first."""

    exit_code = 4

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; nothing was deleted")


# ---------------------------------------------------------------------------------------------
# Options


def check_grace(
    grace_seconds: float,
    *,
    commit_timeout_seconds: float,
    now_millis: int,
    wall_clock_millis: int,
    override: bool,
) -> None:
    """Refuse a grace period (or a ``--now`` in the future, which shortens it) that could
    delete the files of a commit in flight, unless ``override``."""
    if grace_seconds < 0:
        raise UnsafeOptionError(f"--older-than {grace_seconds:g}s is negative")
    if override:
        return
    floor = max(float(MIN_GRACE_SECONDS), float(commit_timeout_seconds))
    if grace_seconds < floor:
        raise UnsafeOptionError(
            f"--older-than {grace_seconds:g}s is shorter than {floor:g}s (one hour, or the "
            f"commit timeout of {commit_timeout_seconds:g}s if longer): gc could delete the "
            "files of a commit in flight. Pass --i-understand-grace-risk to do it anyway"
        )
    if now_millis > wall_clock_millis + CLOCK_SKEW_TOLERANCE_MILLIS:
        raise UnsafeOptionError(
            f"--now {now_millis} is {(now_millis - wall_clock_millis) / 1000:.0f}s ahead of this "
            "machine's clock, which shortens the grace period by as much. Pass "
            "--i-understand-grace-risk to do it anyway"
        )


# ---------------------------------------------------------------------------------------------
# Listing


class ListedFile(NamedTuple):
    """One listed file and what its name says it is (a FileKind value, FOREIGN, or ERROR_KEY
    for a directory that could not be listed, with the reason as ``path``)."""

    path: str
    size: int
    mtime_millis: int
    kind: str


def kind_of(path: str) -> str:
    classified = classify_path(path)
    return FOREIGN if classified is None else classified.kind.value


def is_deletable(kind: str) -> bool:
    return kind in _DELETABLE_NAMES


def list_directory(storage: Storage, directory: str) -> list[ListedFile]:
    """Every file under one hash directory (an executor unit). A failure comes back as one
    ERROR_KEY record instead of an exception, so the driver can name it in one line."""
    try:
        infos = storage.list(directory)
    except LakecoreError as exc:
        return [ListedFile(f"listing {directory}/: {exc.one_line()}", 0, 0, ERROR_KEY)]
    return [ListedFile(i.path, i.size, i.mtime_millis, kind_of(i.path)) for i in infos]


def list_directories(storage: Storage, directories: Iterable[str], threads: int = 1) -> Iterator[ListedFile]:
    """``list_directory`` over many directories (an executor unit, one call per partition),
    ``threads`` requests in flight: on an object store a listing waits on the network, and
    most hash directories of a small lakehouse are empty."""
    directories = list(directories)
    if threads <= 1 or len(directories) <= 1:
        for directory in directories:
            yield from list_directory(storage, directory)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(directories))) as pool:
        for listed in pool.map(lambda d: list_directory(storage, d), directories):
            yield from listed


def list_top(storage: Storage) -> list[ListedFile]:
    """The files directly under the root (roots, definitions, hint, temp files, foreign)."""
    try:
        infos = storage.list_top_level()
    except LakecoreError as exc:
        raise GcRefusedError(f"could not list the top of {storage.root_uri}: {exc.one_line()}") from exc
    return [ListedFile(i.path, i.size, i.mtime_millis, kind_of(i.path)) for i in infos]


def is_error(path: str) -> bool:
    """True for the error records of ``run_reach_tasks``."""
    return path.startswith(ERROR_KEY)


def error_reason(path: str) -> str:
    return path[len(ERROR_KEY) :]


# ---------------------------------------------------------------------------------------------
# Retained versions


@dataclass(frozen=True)
class LoadedRoot:
    """A root read strictly, with its definition and the roots its nodes may point into."""

    info: RootInfo
    lakehouse_def: LakehouseDef
    external_roots: tuple[str, ...]

    @property
    def version(self) -> int:
        return self.info.version


@dataclass
class Retained:
    """The versions gc (or expiry) must keep whole: every listed root, and the exports."""

    roots: dict[int, LoadedRoot]
    exports: dict[str, int] = field(default_factory=dict)  # export name -> pinned version

    @property
    def versions(self) -> list[int]:
        return sorted(self.roots)

    @property
    def latest(self) -> int:
        return max(self.roots)


def is_forged_pointer(location: str, external_roots: tuple[str, ...]) -> bool:
    """A full URI that does not lead into an export's source root. An export source is read,
    never walked or deleted by gc; any other full URI is forged or damaged, and gc must refuse
    rather than skip it, or it would delete what lies below."""
    return is_full_uri(location) and external_root_for(location, external_roots) is None


def load_root(storage: Storage, version: int, refused: type[LakecoreError] = GcRefusedError) -> LoadedRoot:
    """Read root ``version`` and its definition strictly; any failure is ``refused``, naming
    the file and the reason."""
    from lakecore.view import external_roots_of, read_lakehouse_def

    path = root_node_file_name(version)
    uri = storage.uri(path)
    try:
        data = storage.read(path)
        loose = decode_root(data, version, uri)
        lakehouse_def = read_lakehouse_def(storage, loose.lakehouse_def_path)
        info = decode_root(data, version, uri, lakehouse_def.order)
    except LakecoreError as exc:
        raise refused(f"retained version {version} ({uri}) cannot be read: {exc.one_line()}") from exc
    return LoadedRoot(info, lakehouse_def, external_roots_of(lakehouse_def))


def load_roots(
    storage: Storage, versions: Iterable[int], refused: type[LakecoreError] = GcRefusedError
) -> tuple[dict[int, LoadedRoot], list[int]]:
    """Load these roots strictly, tolerating only *abandoned* ones: returns (loaded, abandoned).

    A root is abandoned when its bytes are damaged (not when storage failed to read it) and a
    newer readable root was committed by a repair that rolled forward from it or from a later
    version (``rollback_from_root`` at or above it). Such a root can never be read again, holds
    no reachable content, and only waits for version compaction to delete it. Any other
    unreadable root is ``refused``: what it reaches cannot be known, so nothing may be deleted."""
    loaded: dict[int, LoadedRoot] = {}
    damaged: dict[int, LakecoreError] = {}
    for version in sorted(set(versions)):
        try:
            loaded[version] = load_root(storage, version, refused)
        except LakecoreError as exc:
            if not isinstance(exc.__cause__, CorruptFileError):
                raise
            damaged[version] = exc
    rolled_past = [
        (root.version, version_from_root_node_file_name(root.info.rollback_from_root))
        for root in loaded.values() if root.info.rollback_from_root is not None
    ]
    abandoned = []
    for version, error in damaged.items():
        if not any(at > version and start >= version for at, start in rolled_past):
            raise error
        abandoned.append(version)
    return loaded, abandoned


def exports_of(roots: Iterable[LoadedRoot]) -> dict[str, int]:
    """Exports named by any of these roots' definitions that pin a root of this lakehouse
    (a root file name, as ``versions.exported_root_versions`` reads it)."""
    out: dict[str, int] = {}
    for root in roots:
        for name, location in root.lakehouse_def.exported_snapshots.items():
            base = location.rsplit("/", 1)[-1]
            if "://" not in location and is_root_node_file_name(base):
                out[name] = version_from_root_node_file_name(base)
    return out


def read_retained(
    storage: Storage, top: Sequence[ListedFile], refused: type[LakecoreError] = GcRefusedError
) -> Retained:
    """Read every root listed at the top level, strictly; check that every definition they
    name and every export root their definitions pin is there. Fails closed."""
    versions = sorted(v for v in (_root_version(f) for f in top) if v is not None)
    if not versions:
        raise NotFoundError(
            f"no lakehouse at {storage.root_uri}: no root node file at the top (create one with "
            "`lakecore init`); nothing was deleted"
        )
    listed = {f.path for f in top}
    roots, _abandoned = load_roots(storage, versions, refused)  # version compaction deletes those
    for root in roots.values():
        def_path = root.info.lakehouse_def_path
        if def_path not in listed:
            raise refused(
                f"retained version {root.version} names lakehouse definition "
                f"{storage.uri(def_path)}, which is not in the listing of the root"
            )
    exports = exports_of(roots.values())
    for name, version in sorted(exports.items()):
        if version not in roots:
            raise refused(
                f"export {name!r} pins version {version}, whose root "
                f"{storage.uri(root_node_file_name(version))} is missing: its files cannot be "
                "told apart from orphans. Restore the root or remove the export first"
            )
    return Retained(roots, exports)


def _root_version(f: ListedFile) -> int | None:
    if f.kind != FileKind.ROOT_NODE.value:
        return None
    classified = classify_path(f.path)
    return None if classified is None else classified.version


# ---------------------------------------------------------------------------------------------
# Reachability


@dataclass(frozen=True)
class ReachTask:
    """One subtree to walk on an executor (picklable)."""

    location: str
    depth: int
    order: int
    external_roots: tuple[str, ...]
    low: str | None = None
    high: str | None = None

    @property
    def sort_key(self) -> tuple[str, str, int, str]:
        # Tasks over the same key range (the same subtree in neighbouring versions) sit next to
        # each other, so they land in one partition and share its node cache.
        return (self.low or "", self.high if self.high is not None else "\U0010ffff", self.depth, self.location)


@dataclass
class ReachPlan:
    """What the driver knows after cutting the trees: tasks for executors, the paths it reached
    itself (with sizes where known), and the nodes whose whole subtree is covered."""

    tasks: list[ReachTask] = field(default_factory=list)
    driver_paths: dict[str, int] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)  # top nodes and task roots
    versions: list[int] = field(default_factory=list)
    shared_tasks: int = 0  # subtrees met again in another version: walked once
    skipped_tasks: int = 0  # subtrees covered elsewhere (``skip``) or in an export's source


def _add(paths: dict[str, int], path: str, size: int = UNKNOWN_SIZE) -> None:
    if is_full_uri(path):
        return  # in another lakehouse (an export's source): never ours to delete
    if paths.get(path, UNKNOWN_SIZE) == UNKNOWN_SIZE:
        paths[path] = size


def _values(node: Node) -> Iterator[str]:
    yield from node.values
    for value in node.buffer.values():
        if value is not None:
            yield value


def escaping_value(values: Iterable[str], external_roots: tuple[str, ...]) -> str | None:
    """A value that points out of the lakehouse root (``../x``, ``/abs``, a full URI
    not in an export's source), or None. gc refuses a version with one: such a pointer is
    forged or damaged, and a version gc cannot fully account for is not one to collect around."""
    for value in values:
        if is_full_uri(value):
            if is_forged_pointer(value, external_roots):
                return value
            continue
        try:
            check_relative_path(value)
        except InvalidLocationError:
            return value
    return None


def _escape_reason(where: str, value: str) -> str:
    return (f"{where}: value {value!r} points out of the lakehouse root and not into an export's source; "
            "the version is damaged (run validate, then repair)")


def _damage_in_cut(root: LoadedRoot, cut: TreeCut) -> str | None:
    """Why gc must not trust this version's cut: an escaping value in a node the driver read, or
    a subtree pointer out of the root (the executors would skip it as an export's source)."""
    for location, node, _depth in cut.top:
        value = escaping_value(_values(node), root.external_roots)
        if value is not None:
            return _escape_reason(f"version {root.version}, node {location}", value)
    for sub in cut.subtrees:
        if is_forged_pointer(sub.location, root.external_roots):
            return (f"version {root.version}: node pointer {sub.location!r} leaves the lakehouse root and "
                    "is not in an export's source; the version is damaged (run validate, then repair)")
    return None


def _node_store(storage: Storage, root: LoadedRoot, cache: NodeCache) -> _SizedStore:
    return _SizedStore(storage, root.lakehouse_def.order, cache, root.external_roots)


def plan_reach(
    storage: Storage,
    roots: Iterable[LoadedRoot],
    target_tasks: int,
    *,
    cache: NodeCache | None = None,
    skip: set[str] | frozenset[str] = frozenset(),
    refused: type[LakecoreError] = GcRefusedError,
    tolerated: list[str] | None = None,
) -> ReachPlan:
    """Cut every root's tree; de-duplicate subtrees across versions.

    ``skip``: subtree roots known to be covered elsewhere (expiry skips the expired side's
    subtrees that a retained version also has). The driver's reads go through ``cache`` (a
    fresh one per run, so that every node is really read, not remembered from before).
    A tree whose top cannot be read is ``refused``, or, when ``tolerated`` is a list, noted
    there and left out (expiry's side of what may go: knowing less only deletes less)."""
    cache = cache if cache is not None else NodeCache()
    plan = ReachPlan()
    tasks: dict[str, ReachTask] = {}
    for root in sorted(roots, key=lambda r: r.version):
        plan.versions.append(root.version)
        info = root.info
        _add(plan.driver_paths, info.path, info.size)
        _add(plan.driver_paths, info.lakehouse_def_path)
        store = _node_store(storage, root, cache)
        max_depth = TreeShape(root.lakehouse_def.order, 1).max_depth
        try:
            cut = cut_tree(store, info.node, info.path, target_tasks, max_depth)
            damage = _damage_in_cut(root, cut)
        except LakecoreError as exc:
            damage = f"version {root.version}: the top of its tree cannot be read: {exc.one_line()}"
        if damage is not None:
            if tolerated is None:
                raise refused(damage)
            tolerated.append(damage)
            continue
        for location, node, _depth in cut.top:
            if location != info.path:
                plan.covered.add(location)
                _add(plan.driver_paths, location, store.sizes.get(location, UNKNOWN_SIZE))
            for value in _values(node):
                _add(plan.driver_paths, value)
        for sub in cut.subtrees:
            if sub.location in skip or is_full_uri(sub.location):
                # Covered elsewhere, or in an export's source: nothing below is ours to judge.
                plan.skipped_tasks += 1
                continue
            plan.covered.add(sub.location)
            known = tasks.get(sub.location)
            if known is not None:
                plan.shared_tasks += 1
            if known is None or sub.depth > known.depth:
                # The deepest placement: walked from there, the depth bound is the strictest.
                tasks[sub.location] = ReachTask(
                    sub.location, sub.depth, root.lakehouse_def.order, root.external_roots, sub.low, sub.high
                )
    plan.tasks = sorted(tasks.values(), key=lambda t: t.sort_key)
    return plan


class _SizedStore(NodeStore):
    """A NodeStore that remembers the size of every node file it loads."""

    def __init__(self, storage: Storage, order: int, cache: NodeCache, external_roots: tuple[str, ...]) -> None:
        super().__init__(storage, order, cache=cache, external_roots=external_roots)
        self.sizes: dict[str, int] = {}

    def load_sized(self, location: str) -> tuple[Node, int]:
        node, size = super().load_sized(location)
        self.sizes[location] = size
        return node, size


def run_reach_tasks(storage: Storage, tasks: Iterable[ReachTask]) -> Iterator[tuple[str, int]]:
    """Walk subtrees (an executor unit, one call per partition); yields ``(path, size)`` for
    every node file (with its size) and value location (size unknown) reached, each path once
    per call, and ``(ERROR_KEY + reason, UNKNOWN_SIZE)`` for a subtree that could not be
    walked (see ``is_error``)."""
    cache = NodeCache()  # per partition: neighbouring versions' subtrees share most nodes
    seen: set[str] = set()
    for task in tasks:
        store = _SizedStore(storage, task.order, cache, task.external_roots)
        try:
            reach = reachable_from_subtree(store, task.location, task.depth)
            escape = escaping_value(reach.values, task.external_roots)
            if escape is not None:
                raise GcRefusedError(_escape_reason(f"subtree {task.location}", escape))
        except Exception as exc:  # any failure at all must fail the caller closed
            reason = exc.one_line() if isinstance(exc, LakecoreError) else f"{type(exc).__name__}: {exc}"
            yield f"{ERROR_KEY}subtree {storage.uri(task.location)}: {reason}", UNKNOWN_SIZE
            continue
        for path in reach.nodes:
            if path not in seen and not is_full_uri(path):
                seen.add(path)
                yield path, store.sizes.get(path, UNKNOWN_SIZE)
        for path in reach.values:
            if path not in seen and not is_full_uri(path):
                seen.add(path)
                yield path, UNKNOWN_SIZE


# ---------------------------------------------------------------------------------------------
# The anti-join: listed files against reachable paths, one key at a time


@dataclass
class Tally:
    """What the anti-join saw; one per partition, merged on the driver (``merge``)."""

    listed_by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [files, bytes]
    reachable: int = 0
    orphans: list[ListedFile] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # a sample
    missing: int = 0
    missing_sample: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a sample
    error_count: int = 0
    sample_limit: int = 50

    @property
    def files_listed(self) -> int:
        return sum(n for n, _ in self.listed_by_kind.values())

    @property
    def bytes_listed(self) -> int:
        return sum(b for _, b in self.listed_by_kind.values())

    def count(self, kind: str) -> int:
        return self.listed_by_kind.get(kind, [0, 0])[0]

    def merge(self, other: Tally) -> Tally:
        for kind, (n, b) in other.listed_by_kind.items():
            entry = self.listed_by_kind.setdefault(kind, [0, 0])
            entry[0] += n
            entry[1] += b
        self.reachable += other.reachable
        self.orphans.extend(other.orphans)
        self.foreign = sorted(self.foreign + other.foreign)[: self.sample_limit]
        self.missing += other.missing
        self.missing_sample = sorted(self.missing_sample + other.missing_sample)[: self.sample_limit]
        self.errors = (self.errors + other.errors)[: self.sample_limit]
        self.error_count += other.error_count
        return self


def tally(
    groups: Iterable[tuple[str, tuple[Iterable[ListedFile], Iterable[int]]]], sample_limit: int = 50
) -> Tally:
    """Judge each path from its listing entries and its reach records (a cogroup's output):
    a listed deletable file that nothing reaches is an orphan; a reached path that is not
    listed is *missing* (a dangling definition: reported, never a reason to delete);
    listing and walk errors are collected so that the caller refuses to delete."""
    out = Tally(sample_limit=sample_limit)
    for path, (listed_iter, reached_iter) in groups:
        listed = list(listed_iter)
        reached = any(True for _ in reached_iter)
        if is_error(path) or any(f.kind == ERROR_KEY for f in listed):
            out.error_count += 1
            if len(out.errors) < sample_limit:
                out.errors.append(error_reason(path) if is_error(path) else path)
            continue
        if reached:
            out.reachable += 1
            if not listed:
                out.missing += 1
                if len(out.missing_sample) < sample_limit:
                    out.missing_sample.append(path)
        for f in listed[:1]:  # a path is listed once; tolerate a double listing
            entry = out.listed_by_kind.setdefault(f.kind, [0, 0])
            entry[0] += 1
            entry[1] += f.size
            if f.kind == FOREIGN and len(out.foreign) < sample_limit:
                out.foreign.append(f.path)
            elif not reached and is_deletable(f.kind):
                out.orphans.append(f)
    out.foreign.sort()
    out.missing_sample.sort()
    return out


def tally_in_memory(listing: Iterable[ListedFile], reach: Iterable[tuple[str, int]], sample_limit: int = 50) -> Tally:
    """``tally`` over in-memory collections (what a cogroup does, with dicts)."""
    listed: dict[str, list[ListedFile]] = {}
    for f in listing:
        listed.setdefault(f.path, []).append(f)
    reached: dict[str, list[int]] = {}
    for path, size in reach:
        reached.setdefault(path, []).append(size)
    keys = sorted(listed.keys() | reached.keys())
    return tally(((k, (listed.get(k, []), reached.get(k, []))) for k in keys), sample_limit)


# ---------------------------------------------------------------------------------------------
# Re-check: versions that landed after the listing


@dataclass
class NewVersionsReach:
    versions: list[int] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    nodes_read: int = 0
    rounds: int = 0


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
        frontier: dict[str, _SizedStore] = {}  # node location -> the store to load it with
        for version in range(since + 1, latest + 1):
            root = load_root(storage, version, refused)
            out.versions.append(version)
            out.paths.update({root.info.path, root.info.lakehouse_def_path})
            out.paths.update(v for v in _values(root.info.node) if not is_full_uri(v))
            store = _node_store(storage, root, cache)
            for child in _checked_children(root.info.node, root.external_roots, f"version {version}", refused):
                if child not in visited:
                    frontier.setdefault(child, store)
        while frontier:
            visited.update(frontier)
            ask = {p for p in frontier if p not in covered and p not in unreached}
            known = (known_reachable(ask) if ask else set()) | (frontier.keys() & covered)
            next_frontier: dict[str, _SizedStore] = {}
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
                out.paths.add(location)
                out.paths.update(v for v in _values(node) if not is_full_uri(v))
                for child in _checked_children(node, store.external_roots, f"node {location}", refused):
                    if child not in visited:
                        next_frontier.setdefault(child, store)
            frontier = next_frontier
        since = latest
    return out


def _checked_children(node: Node, external_roots: tuple[str, ...], where: str,
                    refused: type[LakecoreError]) -> Iterator[str]:
    """The children to walk: relative paths; an export source's full URIs are left out, and
    any other full URI, or a value that escapes the root, is ``refused``."""
    escape = escaping_value(_values(node), external_roots)
    if escape is not None:
        raise refused(_escape_reason(f"a version committed during the run: {where}", escape))
    for child in node.children:
        if not is_full_uri(child):
            yield child
        elif is_forged_pointer(child, external_roots):
            raise refused(f"a version committed during the run: {where} points to {child!r}, outside the "
                          "lakehouse root and not in an export's source; run validate")


# ---------------------------------------------------------------------------------------------
# Selecting and deleting


@dataclass
class AgeSelection:
    old: list[ListedFile] = field(default_factory=list)
    too_young: list[ListedFile] = field(default_factory=list)


def select_by_age(orphans: Iterable[ListedFile], cutoff_millis: int) -> AgeSelection:
    """Orphans modified strictly before ``cutoff_millis`` are old enough to delete."""
    out = AgeSelection()
    for f in sorted(orphans, key=lambda f: f.path):
        (out.old if f.mtime_millis < cutoff_millis else out.too_young).append(f)
    return out


@dataclass
class DeleteOutcome:
    requested: int = 0
    deleted: int = 0
    bytes_freed: int = 0
    deleted_paths: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, other: DeleteOutcome) -> None:
        self.requested += other.requested
        self.deleted += other.deleted
        self.bytes_freed += other.bytes_freed
        self.deleted_paths.extend(other.deleted_paths)
        self.refused.extend(other.refused)
        self.errors.extend(other.errors)


def chunks(items: Sequence[tuple[str, int]], size: int) -> list[list[tuple[str, int]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def delete_files(storage: Storage, files: Sequence[tuple[str, int]], batch_size: int) -> DeleteOutcome:
    """Delete ``(path, size)`` files (an executor unit, one batch). Names are classified again
    here and anything but a deletable lakecore file is refused, whatever the caller sent. A
    size of ``UNKNOWN_SIZE`` is looked up first (for the bytes-freed figure)."""
    out = DeleteOutcome(requested=len(files))
    allowed: list[tuple[str, int]] = []
    for path, size in files:
        if is_deletable(kind_of(path)):
            allowed.append((path, size))
        else:
            out.refused.append(path)
    sized: list[tuple[str, int]] = []
    for path, size in allowed:
        if size == UNKNOWN_SIZE:
            try:
                size = storage.size(path)
            except NotFoundError:
                continue  # already gone
            except LakecoreError:
                size = 0
        sized.append((path, size))
    if not sized:
        return out
    try:
        out.deleted = storage.delete([p for p, _ in sized], batch_size)
    except LakecoreError as exc:
        out.errors.append(exc.one_line())
        return out
    out.deleted_paths = [p for p, _ in sized]
    out.bytes_freed = sum(s for _, s in sized)
    return out


# ---------------------------------------------------------------------------------------------
# The whole of gc in one process


@dataclass
class GcResult:
    """What a gc run saw and did (single-process runs; the job fills a JobReport instead)."""

    retained: Retained
    seen: Tally
    too_young: list[ListedFile]
    would_delete: list[ListedFile]
    rechecked: NewVersionsReach
    deleted: DeleteOutcome


def gc_in_process(
    storage: Storage,
    *,
    now_millis: int,
    grace_millis: int,
    dry_run: bool = False,
    batch_size: int = 1000,
    target_tasks: int = 8,
    list_threads: int = 8,
) -> GcResult:
    """gc without Spark: the same units, with the sets held in memory. The caller checks the
    grace period (``check_grace``) first."""
    top = list_top(storage)
    retained = read_retained(storage, top)
    listing = list(top) + list(list_directories(storage, hash_directories(), list_threads))
    cache = NodeCache()
    plan = plan_reach(storage, retained.roots.values(), target_tasks, cache=cache)
    reach = list(plan.driver_paths.items()) + list(run_reach_tasks(storage, plan.tasks))
    seen = tally_in_memory(listing, reach)
    if seen.error_count:
        raise GcRefusedError(f"a retained version cannot be walked or the root listed: {seen.errors[0]}")
    reachable = {path for path, _ in reach}
    selection = select_by_age(seen.orphans, now_millis - grace_millis)
    rechecked = NewVersionsReach()
    if selection.old:  # nothing to delete: nothing to protect
        rechecked = reach_new_versions(storage, retained.latest, lambda paths: paths & reachable, cache=cache,
                                       covered=plan.covered, unreached={f.path for f in seen.orphans})
    would_delete = [f for f in selection.old if f.path not in rechecked.paths]
    deleted = DeleteOutcome()
    if not dry_run:
        for batch in chunks([(f.path, f.size) for f in would_delete], batch_size):
            deleted.add(delete_files(storage, batch, batch_size))
    return GcResult(retained, seen, selection.too_young, would_delete, rechecked, deleted)
