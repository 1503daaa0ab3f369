"""A fault-injecting ``Storage`` and the helpers the reliability suites share.

``FaultyStorage`` is a real ``Storage`` (same root, same backends) that counts the operations
of each *kind* and makes the k-th operation of a chosen kind fail:

    kind               Storage methods
    read               read, read_range
    stat               exists, size, info
    write              write
    create_exclusive   create_exclusive
    list               list, list_paths, list_top_level
    delete             delete

How it fails (``Fault.mode``):

    before   the operation does not happen; ``StorageError`` or ``StorageTimeoutError`` is raised
    after    the operation happens (the file lands, the delete deletes) and *then* the error is
             raised: the ambiguous outcome of a timed-out request whose effect landed
    late     like ``before``, but the operation takes effect ``late_ops`` operations later:
             a request that was still in flight when the client gave up

``on_fault`` runs right after the fault fires (before the error is raised), e.g. to let a
competing writer commit in the window. Every call is logged in ``ops`` (kind, method, path).

It pickles with its fault plan (counters start again in the new process), so it can travel to a
spawned process. Node and definition caches are process-wide and keyed by the root URI: call
``clear_caches`` before a run so that reads really reach storage.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakecore.core.storage import FileInfo, PathListing, Storage
from lakecore.errors import StorageError, StorageTimeoutError

KINDS = ("read", "stat", "write", "create_exclusive", "list", "delete")
_METHOD_KIND = {
    "read": "read",
    "read_range": "read",
    "exists": "stat",
    "size": "stat",
    "info": "stat",
    "write": "write",
    "create_exclusive": "create_exclusive",
    "list": "list",
    "list_paths": "list",
    "list_top_level": "list",
    "delete": "delete",
}


class InjectedFault(StorageError):
    """Marker base: an error this wrapper raised on purpose (never seen by lakecore as such)."""


class InjectedTimeout(StorageTimeoutError):
    """An injected timeout (a ``StorageTimeoutError``)."""


@dataclass
class Fault:
    """Fail the ``k``-th (1-based) operation of ``kind``."""

    kind: str
    k: int
    error: str = "error"  # "error" -> StorageError, "timeout" -> StorageTimeoutError
    mode: str = "before"  # "before" | "after" | "late"
    late_ops: int = 1
    path_contains: str | None = None  # only count operations whose path contains this

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}")
        if self.error not in ("error", "timeout"):
            raise ValueError(f"unknown error {self.error!r}")
        if self.mode not in ("before", "after", "late"):
            raise ValueError(f"unknown mode {self.mode!r}")

    def label(self) -> str:
        return f"{self.kind}#{self.k}:{self.error}:{self.mode}"


@dataclass
class OpRecord:
    kind: str
    method: str
    path: str


@dataclass
class _State:
    counts: dict[str, int] = field(default_factory=dict)
    fault_counts: dict[int, int] = field(default_factory=dict)
    fired: list[str] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    pending: list[tuple[int, Callable[[], None]]] = field(default_factory=list)


class FaultyStorage(Storage):
    """A ``Storage`` that injects the faults in ``faults`` (see the module doc)."""

    def __init__(
        self,
        root_uri: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        faults: Iterable[Fault] = (),
        on_fault: Callable[[Fault], None] | None = None,
    ) -> None:
        super().__init__(root_uri, storage_options)
        self.faults = list(faults)
        self.on_fault = on_fault
        self._state = _State()

    # -- pickling: the plan travels, the counters and the callback do not --------------------

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["faults"] = [f.__dict__ for f in self.faults]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.faults = [Fault(**f) for f in state.get("faults", [])]
        self.on_fault = None
        self._state = _State()

    # -- introspection ----------------------------------------------------------------------

    @property
    def ops(self) -> list[OpRecord]:
        return self._state.ops

    @property
    def fired(self) -> list[str]:
        return self._state.fired

    def counts(self) -> dict[str, int]:
        return dict(self._state.counts)

    def clean(self) -> Storage:
        """A plain Storage on the same root (for checking what really is there)."""
        return Storage(self.root_uri, self.storage_options)

    # -- the machinery ----------------------------------------------------------------------

    def _run_pending(self) -> None:
        state = self._state
        still: list[tuple[int, Callable[[], None]]] = []
        due: list[Callable[[], None]] = []
        for remaining, action in state.pending:
            if remaining <= 0:
                due.append(action)
            else:
                still.append((remaining - 1, action))
        state.pending = still
        for action in due:
            action()

    def _guard(self, method: str, path: str, effect: Callable[[], Any]) -> Any:
        kind = _METHOD_KIND[method]
        self._run_pending()
        self._state.ops.append(OpRecord(kind, method, path))
        fault = self._match(kind, path)
        if fault is None:
            return effect()
        self._state.fired.append(fault.label())
        if fault.mode == "after":
            effect()
        elif fault.mode == "late":
            self._state.pending.append((fault.late_ops, effect))
        if self.on_fault is not None:
            self.on_fault(fault)
        uri = self.root_uri + path
        if fault.error == "timeout":
            raise InjectedTimeout(f"injected timeout: {method} {uri} ({fault.label()})")
        raise InjectedFault(f"injected failure: {method} {uri} ({fault.label()})")

    def _match(self, kind: str, path: str) -> Fault | None:
        state = self._state
        state.counts[kind] = state.counts.get(kind, 0) + 1
        hit: Fault | None = None
        for i, fault in enumerate(self.faults):
            if fault.kind != kind or (
                fault.path_contains is not None and fault.path_contains not in path
            ):
                continue
            seen = state.fault_counts[i] = state.fault_counts.get(i, 0) + 1
            if seen == fault.k and hit is None:
                hit = fault
        return hit

    # -- the wrapped API --------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        result: bytes = self._guard("read", path, lambda: super(FaultyStorage, self).read(path))
        return result

    def read_range(self, path: str, start: int, end: int) -> bytes:
        result: bytes = self._guard(
            "read_range", path, lambda: super(FaultyStorage, self).read_range(path, start, end)
        )
        return result

    def exists(self, path: str) -> bool:
        return bool(self._guard("exists", path, lambda: super(FaultyStorage, self).exists(path)))

    def size(self, path: str) -> int:
        return int(self._guard("size", path, lambda: super(FaultyStorage, self).size(path)))

    def info(self, path: str) -> FileInfo:
        result: FileInfo = self._guard("info", path, lambda: super(FaultyStorage, self).info(path))
        return result

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        self._guard(
            "write", path, lambda: super(FaultyStorage, self).write(path, data, durable=durable)
        )

    def create_exclusive(self, path: str, data: bytes) -> None:
        self._guard(
            "create_exclusive",
            path,
            lambda: super(FaultyStorage, self).create_exclusive(path, data),
        )

    def list(self, prefix: str = "", limit: int | None = None) -> builtins.list[FileInfo]:
        result: builtins.list[FileInfo] = self._guard(
            "list", prefix, lambda: super(FaultyStorage, self).list(prefix, limit)
        )
        return result

    def list_paths(self, prefix: str = "") -> PathListing:
        result: PathListing = self._guard(
            "list_paths", prefix, lambda: super(FaultyStorage, self).list_paths(prefix)
        )
        return result

    def list_top_level(self) -> builtins.list[FileInfo]:
        result: builtins.list[FileInfo] = self._guard(
            "list_top_level", "", lambda: super(FaultyStorage, self).list_top_level()
        )
        return result

    def delete(
        self,
        paths: Iterable[str],
        batch_size: int = 1000,
        deleted: builtins.list[str] | None = None,
    ) -> int:
        paths = builtins.list(paths)
        label = paths[0] if paths else ""
        return int(
            self._guard(
                "delete",
                label,
                lambda: super(FaultyStorage, self).delete(paths, batch_size, deleted),
            )
        )


# ---------------------------------------------------------------------------------------------
# Shared helpers


def clear_caches() -> None:
    """Forget every process-wide cache of node files and definitions."""
    from lakecore import clear_caches as clear_all

    clear_all()


def open_lakehouse(storage: Storage) -> Any:
    """A ``Lakehouse`` at its latest version whose every I/O goes through ``storage``."""
    from lakecore.core.tree import NodeCache, NodeStore
    from lakecore.core.view import read_root_and_def
    from lakecore.lakehouse import Lakehouse

    root, lakehouse_def = read_root_and_def(storage, None)
    store = NodeStore(storage, lakehouse_def.order, cache=NodeCache())
    return Lakehouse(storage, root, lakehouse_def, store)


def tree_digest(root_dir: str | Path) -> dict[str, str]:
    """Every file under a local directory, relative path -> sha1 of its bytes."""
    out: dict[str, str] = {}
    base = Path(root_dir)
    if not base.exists():
        return out
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(base))] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def emit_summary(suite: str, **counts: Any) -> dict[str, Any]:
    """Print the suite's one-line JSON summary (``RELIABILITY {...}``) and append it to the file
    named by ``$LAKECORE_RELIABILITY_LOG`` if set."""
    record = {"suite": suite, **counts, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    line = json.dumps(record, sort_keys=True, default=str)
    print(f"RELIABILITY {line}", flush=True)
    log = os.environ.get("LAKECORE_RELIABILITY_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    return record


@dataclass
class ChainCheck:
    """What ``check_chain`` saw."""

    latest: int
    oldest: int
    versions_checked: int = 0
    files_checked: int = 0
    problems: list[str] = field(default_factory=list)


def check_chain(
    uri: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    versions: Iterable[int] | None = None,
    deep: bool = True,
) -> ChainCheck:
    """Check a lakehouse from scratch (fresh caches): the retained root files form one gap-free
    run ending at the latest version, and every version in ``versions`` (default: every
    retained one) passes ``check_version`` (deep: every definition file it reaches exists and
    decodes). Problems are collected, not raised."""
    from lakecore.core.versions import latest_version, list_root_versions
    from lakecore.lakehouse import Lakehouse
    from lakecore.lakehouse.version_check import check_version

    clear_caches()
    storage = Storage(uri, storage_options)
    latest = latest_version(storage)
    retained = list_root_versions(storage)
    result = ChainCheck(latest, retained[0] if retained else -1)
    if retained != list(range(retained[0], latest + 1)):
        result.problems.append(f"version chain has a gap: {retained}")
    lh = Lakehouse.open(uri, storage_options=storage_options)
    wanted = retained if versions is None else [v for v in versions if v in set(retained)]
    for version in wanted:
        view = lh if version == lh.version else lh.at_version(version)
        check = check_version(view, deep=deep)
        result.versions_checked += 1
        result.files_checked += check.report.nodes_checked + (
            sum(1 for _ in view.items()) if deep and check.report.ok else 0
        )
        result.problems.extend(f"v{version}: {v}" for v in check.violations)
    return result


def resolved_map(
    uri: str, storage_options: Mapping[str, Any] | None = None, version: int | None = None
) -> dict[str, str]:
    """The resolved key -> pvalue map of a version (default: the latest), read with fresh caches."""
    from lakecore.lakehouse import Lakehouse

    clear_caches()
    lh = Lakehouse.open(uri, storage_options=storage_options)
    view = lh if version is None else lh.at_version(version)
    return dict(view.items())


def gc_orphans(result: Any) -> list[Any]:
    """The orphans a ``gc_in_process`` result found (its shape moved between versions)."""
    seen = getattr(result, "seen", None)
    return list(seen.orphans if seen is not None else result.orphans)
