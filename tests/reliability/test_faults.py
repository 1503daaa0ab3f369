"""Fault injection: every storage operation of a commit, a flush and a gc fails in turn.

For each operation kind (read, stat, write, create_exclusive, list, delete) and each k, the k-th
operation of that kind fails, once with ``StorageError`` and once with ``StorageTimeoutError``;
writes, exclusive creates and deletes also fail *after* taking effect (the ambiguous outcome of
a timed-out request), and exclusive creates also land *late* (after the committer looked).
After every run, from scratch:

* the retained versions form a gap-free chain and the checked versions pass ``check_version``
  deep (nothing a retained version reaches is gone);
* every acknowledged commit is there, exactly once; a commit that raised anything but
  ``CommitStateUnknownError`` did not land; nothing was committed twice;
* a rerun with healthy storage completes the work (the change is there, flush empties the
  buffers, gc leaves no orphan, compaction leaves only the versions it must keep) and the
  lakehouse still validates.

Version compaction (``lakecore.maintenance.expire.expire_in_process``, the compact-versions
job's steps in one process) is swept the same way: the chain stays gap-free from the oldest
retained version, every retained version stays deep-valid, and compaction plus gc rerun finish.

Standard runs sweep every k of a commit and a flush, and for gc every write, stat and delete
with a spread of its reads and its listings (the template is small, so gc lists the top and
the root flat: two listings); ``-m slow`` takes every read of gc and up to 200 of its listings.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import lakecore.lakehouse.lakehouse as lakehouse_module
from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import (
    new_lakehouse_def_path,
    new_table_def_path,
    new_temp_path,
    root_node_file_name,
)
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree import FlushMode, FlushPolicy, NodeCache, NodeStore, TreeShape
from lakecore.core.versions import latest_version, list_root_versions
from lakecore.errors import (
    CommitStateUnknownError,
    LakecoreError,
    StorageError,
    StorageTimeoutError,
)
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.flush import flush_still_valid
from lakecore.lakehouse.flush import flushed_root_plan as flush_plan
from lakecore.lakehouse.treeinfo import buffered_messages
from lakecore.maintenance.flush import flush_in_process
from lakecore.maintenance.gc import gc_in_process
from tests.reliability.faulty_storage import (
    KINDS,
    Fault,
    FaultyStorage,
    check_chain,
    clear_caches,
    emit_summary,
    gc_orphans,
    open_lakehouse,
    resolved_map,
)

pytestmark = pytest.mark.reliability

LAKE_DEF: dict[str, Any] = dict(
    order=4,
    node_file_max_size_bytes=2600,
    namespace_name_max_size_bytes=16,
    table_name_max_size_bytes=16,
    file_name_max_size_bytes=100,
)
NEW_TABLES = ("x1", "x2", "x3")
FOREIGN_FILE = "README.foreign"


# -- templates --------------------------------------------------------------------------------


def _build_catalog(uri: str, tables: int = 24) -> Lakehouse:
    lh = Lakehouse.create(uri, name="faults", **LAKE_DEF)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table("ns", "counter", properties={"n": "0"})
    for i in range(tables):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i:02d}", properties={"i": str(i)})
            if i % 4 == 3:
                tx.update_table("ns", "counter", properties={"n": str(i // 4 + 1)})
            if i % 7 == 6:
                tx.drop_table("ns", f"t{i - 3:02d}")
    return lh


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the sweeps keep their lakehouses: RAM-backed /dev/shm when there is one (a copy
    and a removal per run cost milliseconds instead of thousands of disk directory operations),
    else pytest's temporary directory. Either way the local file:// backend is exercised."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="lakecore-reliability-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("reliability")


@pytest.fixture(scope="module")
def template(scratch: Path) -> str:
    path = scratch / "faults-template"
    _build_catalog(str(path))
    return str(path)


@pytest.fixture(scope="module")
def gc_template(scratch: Path) -> str:
    """The catalog plus orphans of every deletable kind and one foreign file."""
    path = scratch / "faults-gc-template"
    lh = _build_catalog(str(path), tables=16)
    storage = Storage(lh.uri)
    store = NodeStore(storage, lh.lakehouse_def.order, cache=None)
    for i in range(7):
        store.write(Node([f"orphan{i}"], [f"v{i}"]))
    storage.write(new_table_def_path("ns", "ghost"), b"orphan definition")
    storage.write(new_lakehouse_def_path(), lh.lakehouse_def.to_bytes())
    storage.write(new_temp_path("0000/0000/0000"), b"torn")
    storage.write(FOREIGN_FILE, b"not ours")  # foreign: gc must never touch it
    old = time.time() - 86_400
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            os.utime(os.path.join(dirpath, name), (old, old))
    return str(path)


class Lakes:
    """Fresh private copies of a template lakehouse (a local directory)."""

    def __init__(self, template: str) -> None:
        self.template = Path(template)

    def fresh(self) -> str:
        target = self.template.parent / f"run-{uuid.uuid4().hex[:12]}"
        shutil.copytree(self.template, target)
        return str(target)

    def drop(self, uri: str) -> None:
        shutil.rmtree(uri, ignore_errors=True)


# -- sweeping ---------------------------------------------------------------------------------


@dataclass
class Tally:
    suite: str
    runs: int = 0
    faults_fired: int = 0
    acked: int = 0
    failed_cleanly: int = 0
    state_unknown: int = 0
    ambiguous_recognised: int = 0
    versions_validated: int = 0
    files_checked: int = 0
    lost: int = 0
    duplicated: int = 0
    problems: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def add_check(self, label: str, uri: str, versions: list[int] | None = None) -> None:
        check = check_chain(uri, versions=versions)
        self.versions_validated += check.versions_checked
        self.files_checked += check.files_checked
        self.problems.extend(f"{label}: {p}" for p in check.problems)

    def summary(self) -> dict[str, Any]:
        return emit_summary(
            self.suite,
            runs=self.runs,
            faults_injected=self.faults_fired,
            acked_commits=self.acked,
            failed_cleanly=self.failed_cleanly,
            state_unknown=self.state_unknown,
            ambiguous_writes_recognised=self.ambiguous_recognised,
            versions_validated=self.versions_validated,
            files_checked=self.files_checked,
            lost=self.lost,
            duplicated=self.duplicated,
            problems=len(self.problems),
            seconds=round(time.monotonic() - self.started, 1),
        )

    def assert_clean(self) -> None:
        self.summary()
        assert not self.problems, f"{len(self.problems)} problems, e.g.:\n" + "\n".join(
            self.problems[:25]
        )


def fault_plans(
    counts: dict[str, int], *, sample: dict[str, list[int]] | None = None
) -> Iterator[Fault]:
    """Every (kind, k, error, mode) for the operation counts of a healthy run."""
    for kind in KINDS:
        n = counts.get(kind, 0)
        ks = sample[kind] if sample and kind in sample else list(range(1, n + 1))
        modes = ["before"]
        if kind in ("write", "create_exclusive", "delete"):
            modes.append("after")
        if kind == "create_exclusive":
            modes.append("late")
        for k in ks:
            for error in ("error", "timeout"):
                for mode in modes:
                    yield Fault(kind, k, error, mode)


# -- the commit -------------------------------------------------------------------------------


def _tables(uri: str, version: int | None = None) -> tuple[set[str], int]:
    clear_caches()
    lh = Lakehouse.open(uri)
    view = lh if version is None else lh.at_version(version)
    return set(view.list_tables("ns")), int(view.load_table("ns", "counter").properties["n"])


def _commit_change(lh: Lakehouse, *, before_commit: Callable[[], None] | None = None) -> int:
    with lh.transaction() as tx:
        n = int(tx.load_table("ns", "counter").properties["n"])
        for name in NEW_TABLES:
            tx.create_table("ns", name, properties={"by": "faults"})
        tx.update_table("ns", "counter", properties={"n": str(n + 1)})
        if before_commit is not None:
            before_commit()
    assert tx.committed_version is not None
    return tx.committed_version


def _rival(uri: str) -> None:
    """Another writer commits an unrelated table (with healthy storage)."""
    other = Lakehouse.open(uri)
    with other.transaction() as tx:
        tx.create_table("ns", "rival")


@dataclass
class CommitRun:
    storage: FaultyStorage
    acked: int | None
    error: LakecoreError | None
    rival_committed: bool


def _commit_run(uri: str, scenario: str, faults: list[Fault]) -> CommitRun:
    """One commit of the change through faulty storage. ``raced``: a rival commits between
    the transaction's reads and its commit; ``cold``: the process's caches are emptied there."""
    clear_caches()
    storage = FaultyStorage(uri, faults=faults)
    rival = []

    def hook() -> None:
        if scenario == "raced":
            _rival(uri)
            rival.append(True)
        elif scenario == "cold":
            clear_caches()

    try:
        return CommitRun(
            storage, _commit_change(open_lakehouse(storage), before_commit=hook), None, bool(rival)
        )
    except LakecoreError as exc:
        return CommitRun(storage, None, exc, bool(rival))


def _judge_commit(
    tally: Tally, label: str, uri: str, base: int, base_counter: int, run: CommitRun
) -> None:
    """Check one faulted commit and then finish its work with healthy storage."""
    rival = 1 if run.rival_committed else 0
    acked, error = run.acked, run.error
    latest = latest_version(Storage(uri))
    tables, counter = _tables(uri)
    landed = set(NEW_TABLES) <= tables
    if set(NEW_TABLES) & tables and not landed:
        tally.problems.append(
            f"{label}: a partial commit is visible: {sorted(set(NEW_TABLES) & tables)}"
        )
    if rival and "rival" not in tables:
        tally.lost += 1
        tally.problems.append(f"{label}: the rival's acknowledged commit is lost")
    expected_latest = base + rival + (1 if landed else 0)
    if latest != expected_latest:
        tally.duplicated += latest > expected_latest
        tally.problems.append(
            f"{label}: latest is {latest}, expected {expected_latest} (landed={landed})"
        )
    if counter != base_counter + landed:
        tally.problems.append(f"{label}: counter is {counter}, expected {base_counter + landed}")
    if acked is not None:
        tally.acked += 1
        if not landed:
            tally.lost += 1
            tally.problems.append(
                f"{label}: acknowledged version {acked} but the change is not there"
            )
        elif not set(NEW_TABLES) <= _tables(uri, acked)[0]:
            tally.problems.append(f"{label}: the change is not in the acknowledged version {acked}")
    elif isinstance(error, CommitStateUnknownError):
        tally.state_unknown += 1
    else:
        tally.failed_cleanly += 1
        if landed:
            tally.problems.append(
                f"{label}: commit raised {type(error).__name__} ({error}) but its root landed: a caller "
                "that retries commits it twice"
            )
    tally.add_check(label, uri, versions=list(range(max(0, base - 1), latest + 1)))
    # Rerun with healthy storage: the work completes.
    if not landed:
        clear_caches()
        version = _commit_change(Lakehouse.open(uri))
        tables, counter = _tables(uri)
        if (
            not set(NEW_TABLES) <= tables
            or counter != base_counter + 1
            or version != base + rival + 1
        ):
            tally.problems.append(
                f"{label}: the rerun did not complete the change (v{version}, n={counter})"
            )
        tally.add_check(f"{label} (rerun)", uri, versions=[version])


@pytest.mark.parametrize("scenario", ["plain", "raced", "cold"])
def test_every_fault_of_a_commit(template: str, scenario: str) -> None:
    lakes = Lakes(template)
    base = latest_version(Storage(template))
    _, base_counter = _tables(template)
    # A healthy run counts the operations of each kind.
    uri = lakes.fresh()
    healthy = _commit_run(uri, scenario, [])
    assert healthy.error is None and healthy.acked == base + 1 + (scenario == "raced"), (
        healthy.error
    )
    counts = healthy.storage.counts()
    lakes.drop(uri)
    tally = Tally(f"faults.commit.{scenario}")
    for fault in fault_plans(counts):
        uri = lakes.fresh()
        run = _commit_run(uri, scenario, [fault])
        tally.runs += 1
        tally.faults_fired += len(run.storage.fired)
        if fault.kind == "create_exclusive" and fault.mode != "before" and run.acked is not None:
            tally.ambiguous_recognised += 1
        _judge_commit(tally, f"{scenario} {fault.label()}", uri, base, base_counter, run)
        lakes.drop(uri)
    assert tally.faults_fired == tally.runs, (
        "a planned fault never fired: the healthy count was off"
    )
    tally.assert_clean()


# -- the ambiguous root write, case by case ----------------------------------------------------


def _root_fault(mode: str, error: str = "timeout", **kw: Any) -> Fault:
    return Fault("create_exclusive", 1, error, mode, **kw)


@pytest.mark.parametrize("mode", ["after", "late"])
def test_ambiguous_root_write_that_landed_is_recognised(scratch: Path, mode: str) -> None:
    """The root lands and the create reports a timeout (``after``), or it lands
    only after the committer read back and found nothing (``late``). Either way: one commit,
    acknowledged, at the next version."""
    uri = str(scratch / f"ambiguous-{mode}")
    _build_catalog(uri, tables=6)
    base = latest_version(Storage(uri))
    run = _commit_run(uri, "plain", [_root_fault(mode)])
    assert run.error is None, run.error
    assert run.acked == base + 1 and latest_version(Storage(uri)) == base + 1, (
        "a duplicate or lost commit"
    )
    assert run.storage.fired == [f"create_exclusive#1:timeout:{mode}"]
    assert set(NEW_TABLES) <= _tables(uri)[0]
    assert not check_chain(uri).problems


def test_ambiguous_root_write_lost_to_a_competitor_rebases(template: str) -> None:
    """Our root write times out without landing; a competitor takes that version meanwhile. The
    read-back sees someone else's root: a lost race, not our commit; we rebase and land next."""
    lakes = Lakes(template)
    uri = lakes.fresh()
    base = latest_version(Storage(uri))
    clear_caches()
    storage = FaultyStorage(uri, faults=[_root_fault("before")], on_fault=lambda _f: _rival(uri))
    acked = _commit_change(open_lakehouse(storage))
    assert acked == base + 2
    assert set(NEW_TABLES) | {"rival"} <= _tables(uri)[0]
    at_rival = _tables(uri, base + 1)[0]
    assert "rival" in at_rival and not set(NEW_TABLES) & at_rival
    assert not check_chain(uri).problems


def test_ambiguous_root_write_with_an_unreadable_outcome_says_so(template: str) -> None:
    """The root write times out (and lands) and the read-back fails too: the committer must not
    guess, and reopening shows the commit exactly once."""
    uri = Lakes(template).fresh()
    base = latest_version(Storage(uri))
    faults = [
        _root_fault("after"),
        Fault("read", 1, "timeout", path_contains=root_node_file_name(base + 1)),
    ]
    run = _commit_run(uri, "plain", faults)
    assert run.acked is None and isinstance(run.error, CommitStateUnknownError), run.error
    assert latest_version(Storage(uri)) == base + 1
    assert set(NEW_TABLES) <= _tables(uri)[0]
    assert not check_chain(uri, versions=[base + 1]).problems


@pytest.mark.s3
def test_ambiguous_root_write_on_s3(s3_server: Any) -> None:
    uri, options = s3_server.new_root()
    lh = Lakehouse.create(uri, name="faults-s3", storage_options=options, **LAKE_DEF)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for mode in ("after", "late", "before"):
        clear_caches()
        base = latest_version(Storage(uri, options))
        storage = FaultyStorage(uri, options, faults=[_root_fault(mode)])
        with open_lakehouse(storage).transaction() as tx:
            tx.create_table("ns", f"s3_{mode}")
        assert tx.committed_version == base + 1, mode
        assert latest_version(Storage(uri, options)) == base + 1, mode
    clear_caches()
    final = Lakehouse.open(uri, storage_options=options)
    assert {"s3_after", "s3_late", "s3_before"} <= set(final.list_tables("ns"))
    assert not check_chain(uri, options).problems


def _rival_changes_the_definition(uri: str) -> None:
    """Another writer commits a new lakehouse definition, then this process's caches are emptied."""
    Lakehouse.open(uri).update_definition(
        lambda d: dataclasses.replace(d, minimum_versions_to_keep=7)
    )
    clear_caches()


def test_regression_commit_reported_failed_after_its_root_landed(
    template: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (found by the ``cold`` sweep): after the root is created, ``commit_plan`` read
    the lakehouse definition back and raised if that read failed, although the commit had
    landed, so a caller that retried committed twice. Now an unchanged definition is not read
    again at all, and a read that is needed (a rival changed the definition) may fail without
    un-acknowledging the commit: the object stays at its old version and catches up later."""
    uri = Lakes(template).fresh()
    base = latest_version(Storage(uri))
    clear_caches()
    # Definition reads: 1 the open, 2 the rival's new one (the conflict check, before the root
    # is created), 3 the same one again after the root landed: made to reach storage by emptying
    # the caches once the root exists, and failed there.
    storage = FaultyStorage(
        uri, faults=[Fault("read", 3, "timeout", path_contains="_lakehouse_def_")]
    )
    real_read = lakehouse_module.read_lakehouse_def

    def cold_after_landing(store: Storage, location: str) -> LakehouseDef:
        if any(op.kind == "create_exclusive" for op in storage.ops):
            clear_caches()
        return real_read(store, location)

    monkeypatch.setattr(lakehouse_module, "read_lakehouse_def", cold_after_landing)
    lh = open_lakehouse(storage)
    acked = _commit_change(lh, before_commit=lambda: _rival_changes_the_definition(uri))
    assert storage.fired, "the fault did not fire: the landed root's definition was not read"
    assert storage.ops[-1].kind == "read" and "_lakehouse_def_" in storage.ops[-1].path
    assert acked == base + 2 == latest_version(Storage(uri)), (
        "the commit was not acknowledged as landed"
    )
    assert lh.version == base, "the object moved to a version whose definition it could not read"
    # The object catches up on its next commit, with the rival's definition.
    monkeypatch.undo()
    with lh.transaction() as tx:
        tx.create_table("ns", "after")
    assert tx.committed_version == base + 3 and lh.version == base + 3
    assert lh.lakehouse_def.minimum_versions_to_keep == 7


def test_a_commit_with_an_unchanged_definition_does_not_read_it_back(template: str) -> None:
    uri = Lakes(template).fresh()
    clear_caches()
    storage = FaultyStorage(uri, faults=[])
    lh = open_lakehouse(storage)
    _commit_change(lh, before_commit=clear_caches)
    definition_reads = [
        op for op in storage.ops if op.kind == "read" and "_lakehouse_def_" in op.path
    ]
    assert len(definition_reads) == 1, [op.path for op in definition_reads]


# -- a full flush -----------------------------------------------------------------------------


@dataclass
class FlushRun:
    storage: FaultyStorage
    acked: int | None
    error: LakecoreError | None


def _flush_run(uri: str, faults: list[Fault]) -> FlushRun:
    """flush_in_process + the flush job's commit (lakecore.lakehouse.flush.flushed_root_plan / flush_still_valid)."""
    clear_caches()
    storage = FaultyStorage(uri, faults=faults)
    try:
        lh = open_lakehouse(storage)
        base = lh.root_info
        shape = TreeShape.of(lh.lakehouse_def)
        store = NodeStore(storage, shape.order, cache=NodeCache())
        flushed, _run, _results = flush_in_process(
            store, shape, base.node, FlushPolicy(FlushMode.FULL), 4
        )
        outcome = lh.commit_plan(flush_plan(lh, base, flushed), flush_still_valid(base))
        return FlushRun(storage, outcome.version, None)
    except LakecoreError as exc:
        return FlushRun(storage, None, exc)


def _buffered(uri: str) -> int:
    clear_caches()
    lh = Lakehouse.open(uri)
    return buffered_messages(lh.store, lh.root)


def test_every_fault_of_a_flush(template: str) -> None:
    lakes = Lakes(template)
    before = resolved_map(template)
    base = latest_version(Storage(template))
    assert _buffered(template) > 0, "nothing to flush: not a flush test"
    uri = lakes.fresh()
    healthy = _flush_run(uri, [])
    assert healthy.error is None and healthy.acked == base + 1 and _buffered(uri) == 0, (
        healthy.error
    )
    counts = healthy.storage.counts()
    assert counts.get("write", 0) >= 3, counts
    lakes.drop(uri)
    tally = Tally("faults.flush")
    for fault in fault_plans(counts):
        uri = lakes.fresh()
        run = _flush_run(uri, [fault])
        tally.runs += 1
        tally.faults_fired += len(run.storage.fired)
        label = f"flush {fault.label()}"
        latest = latest_version(Storage(uri))
        unknown = isinstance(run.error, CommitStateUnknownError)
        if resolved_map(uri) != before:
            tally.lost += 1
            tally.problems.append(f"{label}: the resolved map changed")
        if run.acked is not None:
            tally.acked += 1
            if fault.kind == "create_exclusive" and fault.mode != "before":
                tally.ambiguous_recognised += 1
            if latest != base + 1:
                tally.problems.append(f"{label}: acknowledged v{run.acked} but latest is {latest}")
        else:
            tally.state_unknown += unknown
            tally.failed_cleanly += not unknown
            if latest != base and not unknown:
                tally.problems.append(
                    f"{label}: flush raised {run.error} but its root landed (v{latest})"
                )
        if latest > base + 1:
            tally.duplicated += 1
            tally.problems.append(f"{label}: {latest - base} versions for one flush")
        tally.add_check(label, uri, versions=[base, latest])
        if run.acked is None:
            rerun = _flush_run(uri, [])
            if rerun.error is not None or _buffered(uri) != 0 or resolved_map(uri) != before:
                tally.problems.append(
                    f"{label}: the rerun did not complete the flush ({rerun.error})"
                )
            tally.add_check(f"{label} (rerun)", uri, versions=[latest_version(Storage(uri))])
        lakes.drop(uri)
    assert tally.faults_fired == tally.runs
    tally.assert_clean()


# -- gc ---------------------------------------------------------------------------------------


def _gc_now() -> int:
    # A second ahead: files copied into a fresh lake this very millisecond count as old.
    return int(time.time() * 1000) + 1000


def _gc_run(uri: str, faults: list[Fault]) -> tuple[FaultyStorage, Any, LakecoreError | None]:
    """lakecore.maintenance.gc.gc_in_process: the gc job's units composed in one process."""
    clear_caches()
    storage = FaultyStorage(uri, faults=faults)
    try:
        result = gc_in_process(storage, now_millis=_gc_now(), grace_millis=0, batch_size=3)
    except LakecoreError as exc:
        return storage, None, exc
    return storage, result, None


def _orphans(uri: str) -> int:
    clear_caches()
    result = gc_in_process(Storage(uri), now_millis=_gc_now(), grace_millis=0, dry_run=True)
    return len(gc_orphans(result))


def _gc_sweep(gc_template: str, sample: dict[str, list[int]] | None, suite: str) -> None:
    lakes = Lakes(gc_template)
    expected_orphans = _orphans(gc_template)
    assert expected_orphans >= 10
    uri = lakes.fresh()
    storage, result, error = _gc_run(uri, [])
    assert error is None and result.deleted.deleted == expected_orphans and _orphans(uri) == 0, (
        error
    )
    counts = storage.counts()
    lakes.drop(uri)
    before = resolved_map(gc_template)
    tally = Tally(suite)
    for fault in fault_plans(counts, sample=sample):
        uri = lakes.fresh()
        storage, result, error = _gc_run(uri, [fault])
        tally.runs += 1
        tally.faults_fired += len(storage.fired)
        label = f"gc {fault.label()}"
        if (
            error is None
            and result is not None
            and not (result.deleted.errors or result.deleted.refused)
        ):
            tally.acked += 1
        else:
            tally.failed_cleanly += 1
        if not Storage(uri).exists(FOREIGN_FILE):
            tally.problems.append(f"{label}: gc deleted a foreign file")
        tally.add_check(label, uri)  # every retained version, deep: nothing live is gone
        if resolved_map(uri) != before:
            tally.lost += 1
            tally.problems.append(f"{label}: the catalog changed")
        _s, _rerun, rerun_error = _gc_run(uri, [])
        left = _orphans(uri)
        if rerun_error is not None or left:
            tally.problems.append(f"{label}: the rerun left {left} orphans ({rerun_error})")
        tally.add_check(f"{label} (rerun)", uri, versions=[latest_version(Storage(uri))])
        lakes.drop(uri)
    assert tally.faults_fired == tally.runs
    tally.assert_clean()


def _spread(n: int, count: int, seed: int) -> list[int]:
    """1, 2, 3, n-1, n and ``count`` more drawn from between."""
    rng = random.Random(seed)
    middle = range(4, max(4, n - 1))
    return sorted(
        {k for k in (1, 2, 3, n - 1, n) if 1 <= k <= n}
        | set(rng.sample(middle, min(count, len(middle))))
    )


def test_faults_during_gc(gc_template: str) -> None:
    clear_caches()
    probe = FaultyStorage(gc_template)
    gc_in_process(probe, now_millis=_gc_now(), grace_millis=0, dry_run=True)
    counts = probe.counts()
    # gc lists the top and 4,096 hash directories and reads every retained root, definition
    # and node: a spread of those; every write, stat and delete.
    sample = {"list": _spread(counts["list"], 6, 7), "read": _spread(counts["read"], 12, 11)}
    _gc_sweep(gc_template, sample, "faults.gc")


@pytest.mark.slow
def test_every_fault_of_gc(gc_template: str) -> None:
    """Every read, stat, write and delete of a gc run, and up to 200 of its listings."""
    clear_caches()
    probe = FaultyStorage(gc_template)
    gc_in_process(probe, now_millis=_gc_now(), grace_millis=0, dry_run=True)
    _gc_sweep(gc_template, {"list": _spread(probe.counts()["list"], 195, 5)}, "faults.gc.heavy")


# -- version compaction -------------------------------------------------------------------------


def _expire_now() -> int:
    return int(time.time() * 1000) + 8 * 86_400_000  # past the default maximum age of 7 days


def _expire_run(uri: str, faults: list[Fault]) -> tuple[FaultyStorage, Any, LakecoreError | None]:
    """lakecore.maintenance.expire.expire_in_process: the compact-versions job's steps in one
    process."""
    from lakecore.maintenance.expire import expire_in_process

    clear_caches()
    storage = FaultyStorage(uri, faults=faults)
    try:
        return storage, expire_in_process(storage, now_millis=_expire_now(), batch_size=3), None
    except LakecoreError as exc:
        return storage, None, exc


def _compact_sweep(template: str, sample: dict[str, list[int]] | None, suite: str) -> None:
    lakes = Lakes(template)
    latest = latest_version(Storage(template))
    keep = 3  # minimum_versions_to_keep (default)
    before = resolved_map(template)
    uri = lakes.fresh()
    storage, result, error = _expire_run(uri, [])
    assert error is None and len(result.plan.expired) == latest + 1 - keep, error
    counts = storage.counts()
    lakes.drop(uri)
    tally = Tally(suite)
    for fault in fault_plans(counts, sample=sample):
        uri = lakes.fresh()
        storage, result, error = _expire_run(uri, [fault])
        tally.runs += 1
        tally.faults_fired += len(storage.fired)
        label = f"compact {fault.label()}"
        tally.acked += error is None
        tally.failed_cleanly += error is not None
        if latest_version(Storage(uri)) != latest or resolved_map(uri) != before:
            tally.lost += 1
            tally.problems.append(f"{label}: the latest version or its catalog changed")
        tally.add_check(
            label, uri
        )  # gap-free chain, every retained version deep: no dangling pointer
        # The rerun (compaction, then gc for what an interrupted run left) completes the work.
        _s, _r, rerun_error = _expire_run(uri, [])
        _s2, _g, gc_error = _gc_run(uri, [])
        retained = list_root_versions(Storage(uri))
        left = _orphans(uri)
        if (
            rerun_error
            or gc_error
            or retained != list(range(latest + 1 - keep, latest + 1))
            or left
        ):
            tally.problems.append(
                f"{label}: the rerun did not finish: retained {retained}, {left} orphans, "
                f"{rerun_error or gc_error}"
            )
        tally.add_check(f"{label} (rerun)", uri)
        lakes.drop(uri)
    assert tally.faults_fired == tally.runs
    tally.assert_clean()


def test_faults_during_version_compaction(template: str) -> None:
    lakes = Lakes(template)
    uri = lakes.fresh()
    counts = _expire_run(uri, [])[0].counts()
    lakes.drop(uri)
    # Reads (every root, definition and node of both sides) and deletes (one per expired root,
    # then batches): a spread; every write (the hint), stat and list.
    sample = {"read": _spread(counts["read"], 8, 3), "delete": _spread(counts["delete"], 6, 4)}
    _compact_sweep(template, sample, "faults.compact")


@pytest.mark.slow
def test_every_fault_of_version_compaction(template: str) -> None:
    _compact_sweep(template, None, "faults.compact.heavy")


# -- the wrapper itself -------------------------------------------------------------------------


def test_faulty_storage_counts_fails_and_pickles(scratch: Path) -> None:
    import pickle

    uri = str(scratch / f"wrapper-{uuid.uuid4().hex[:8]}")
    storage = FaultyStorage(uri, faults=[Fault("write", 2, "timeout", "after"), Fault("read", 1)])
    storage.write("a", b"1")
    with pytest.raises(StorageTimeoutError):
        storage.write("b", b"2")
    assert storage.clean().read("b") == b"2", "an 'after' fault lets the write land"
    with pytest.raises(StorageError):
        storage.read("a")
    assert storage.read("a") == b"1"
    assert storage.counts() == {"write": 2, "read": 2}
    assert storage.fired == ["write#2:timeout:after", "read#1:error:before"]
    copy = pickle.loads(pickle.dumps(storage))
    assert isinstance(copy, FaultyStorage) and copy.root_uri == storage.root_uri
    assert [f.label() for f in copy.faults] == [f.label() for f in storage.faults]
    assert copy.counts() == {}, "counters start again in the new process"
    with pytest.raises(StorageError):
        copy.read("a")
