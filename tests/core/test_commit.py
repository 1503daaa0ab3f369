"""The commit protocol (lakecore/core/commit.py) on its own: the exclusive create of root v+1, the
lost race and its rebase, the stale hint, ambiguous and refused root writes.

A refused root write (no space, no permission) used to be retried as a lost race: 26 attempts,
about 20 orphan files each, then ``CommitConflictError`` (exit 3, which the DAGs retry for
ever) with no other writer running. It is now ``StorageRefusedError`` with its cause, exit 4,
after one read-back. The full-disk case runs on a real tmpfs where this machine can mount one.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.commit import (
    AMBIGUOUS_WRITE_RETRIES,
    CommitPolicy,
    RootPlan,
    commit,
)
from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.versions import RootInfo, latest_version, read_hint, read_root
from lakecore.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    CommitTimeoutError,
    ExitCode,
    StorageError,
    StorageRefusedError,
    StorageTimeoutError,
)
from lakecore.lakehouse import Lakehouse
from tests.conftest import ManualClock as Clock
from tests.conftest import fill_disk

FAST = CommitPolicy(max_retries=25, backoff_base_seconds=0, backoff_cap_seconds=0)


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


class Planner:
    """A plan that carries the base's tree forward unchanged and counts its calls."""

    def __init__(self, lh: Lakehouse) -> None:
        self.lh = lh
        self.calls = 0

    def __call__(self, base: RootInfo) -> RootPlan:
        self.calls += 1
        return RootPlan(node=base.node, lakehouse_def_path=base.lakehouse_def_path)


def still(_: RootInfo) -> None:
    return None


@pytest.fixture
def lake(tmp_path: Path) -> Lakehouse:
    lh = Lakehouse.create(str(tmp_path / "lake"), name="commit", order=8)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    return lh


def test_a_commit_creates_the_next_root_and_moves_the_hint(lake: Lakehouse) -> None:
    planner = Planner(lake)
    outcome = commit(lake.storage, 8, lake.root_info, planner, still, FAST)
    assert (outcome.version, outcome.attempts, outcome.conflicts) == (2, 1, 0)
    assert latest_version(lake.storage) == 2 and read_hint(lake.storage) == 2
    assert read_root(lake.storage, 2, 8).previous_root == root_node_file_name(1)
    assert planner.calls == 1


def test_a_lost_race_rebases_onto_the_winner(lake: Lakehouse) -> None:
    base = lake.root_info
    commit(lake.storage, 8, base, Planner(lake), still, FAST)  # another writer wins version 2
    seen: list[int] = []

    def valid(latest: RootInfo) -> None:
        seen.append(latest.version)
        return None

    outcome = commit(lake.storage, 8, base, Planner(lake), valid, FAST)
    assert (outcome.version, outcome.conflicts) == (3, 1) and seen == [2]
    assert read_root(lake.storage, 3, 8).previous_root == root_node_file_name(2)


def test_a_change_that_no_longer_holds_is_a_conflict(lake: Lakehouse) -> None:
    base = lake.root_info
    commit(lake.storage, 8, base, Planner(lake), still, FAST)
    with pytest.raises(CommitConflictError, match="conflicts with version 2: the table moved"):
        commit(lake.storage, 8, base, Planner(lake), lambda _: "the table moved", FAST)
    assert latest_version(lake.storage) == 2


def test_a_hint_at_the_target_is_a_lost_race(lake: Lakehouse) -> None:
    # Compaction may have deleted root 2 after pointing the hint past it: creating root 2
    # again would commit below the real latest version.
    base = lake.root_info
    second = commit(lake.storage, 8, base, Planner(lake), still, FAST)
    commit(lake.storage, 8, second.root, Planner(lake), still, FAST)
    os.unlink(Path(lake.storage.root_uri.removeprefix("file://")) / root_node_file_name(2))
    assert read_hint(lake.storage) == 3
    outcome = commit(lake.storage, 8, base, Planner(lake), still, FAST)
    assert outcome.version == 4 and outcome.conflicts == 1


def test_retries_end_in_a_conflict_that_names_them(lake: Lakehouse) -> None:
    policy = CommitPolicy(max_retries=2, backoff_base_seconds=0, backoff_cap_seconds=0)
    base = lake.root_info

    class AlwaysBeaten(Planner):
        def __call__(self, current: RootInfo) -> RootPlan:
            # Another writer commits the very version this attempt aims at.
            commit(lake.storage, 8, current, Planner(lake), still, FAST)
            return super().__call__(current)

    with pytest.raises(CommitConflictError, match="gave up after 3 attempts") as caught:
        commit(lake.storage, 8, base, AlwaysBeaten(lake), still, policy)
    assert caught.value.exit_code == ExitCode.CONFLICT


# -- refused and ambiguous root writes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "cause"),
    [(errno.ENOSPC, "No space left on device"), (errno.EACCES, "Permission denied")],
)
def test_a_refused_root_write_is_that_error_at_once(
    lake: Lakehouse, monkeypatch: pytest.MonkeyPatch, code: int, cause: str
) -> None:
    root = Path(lake.storage.root_uri.removeprefix("file://"))
    real_link = os.link

    def refusing_link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if Path(dst).name.startswith("_") and Path(dst).parent == root:  # root files only
            raise OSError(code, os.strerror(code), str(dst))
        real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", refusing_link)
    before = files_of(root)
    planner = Planner(lake)
    with pytest.raises(StorageRefusedError) as caught:
        commit(lake.storage, 8, lake.root_info, planner, still, FAST)
    message = str(caught.value)
    assert cause in message and "version 2 was not committed" in message
    assert caught.value.exit_code == ExitCode.FAILURE
    assert planner.calls == 1  # one plan: no second round of node files
    assert files_of(root) - before == set()  # this plan wrote no nodes; no temp file stays
    monkeypatch.undo()
    assert latest_version(lake.storage) == 1


def test_a_refused_write_through_the_catalog_is_exit_4(
    lake: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", full)
    with (
        pytest.raises(StorageRefusedError, match="No space left on device"),
        lake.transaction() as tx,
    ):
        tx.create_namespace("more")


def test_an_ambiguous_failure_is_sent_again_with_the_same_bytes(
    lake: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = lake.storage
    real = Storage.create_exclusive
    sent: list[bytes] = []

    def flaky(self: Storage, path: str, data: bytes) -> None:
        sent.append(data)
        if len(sent) <= 2:
            raise StorageTimeoutError("timed out; it may or may not have taken effect")
        real(self, path, data)

    monkeypatch.setattr(Storage, "create_exclusive", flaky)
    planner = Planner(lake)
    outcome = commit(storage, 8, lake.root_info, planner, still, FAST)
    assert outcome.version == 2 and outcome.ambiguous_writes == 2 and outcome.conflicts == 0
    assert planner.calls == 1 and len(set(sent)) == 1


def test_ambiguous_failures_without_end_are_an_unknown_state_not_a_conflict(
    lake: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def hung(self: Storage, path: str, data: bytes) -> None:
        calls.append(1)
        raise StorageError("could not exclusively create: connection reset")

    monkeypatch.setattr(Storage, "create_exclusive", hung)
    with pytest.raises(CommitStateUnknownError, match="failed 4 times"):
        commit(lake.storage, 8, lake.root_info, Planner(lake), still, FAST)
    assert len(calls) == AMBIGUOUS_WRITE_RETRIES + 1


# -- the commit timeout ------------------------------------------------------------------------
# gc deletes unreached files older than its grace period, which may not be shorter than the
# commit timeout: a commit stalled past the timeout must not land a root naming such files.
# The commit's clock is one the test moves: a loaded machine cannot make a commit outlive its
# timeout, or not, where the test does not say so.


@pytest.fixture
def clock() -> Clock:
    return Clock()


def timed(clock: Clock) -> CommitPolicy:
    return CommitPolicy(
        max_retries=25,
        backoff_base_seconds=0,
        backoff_cap_seconds=0,
        timeout_seconds=5,
        clock=clock,
    )


def test_a_commit_past_its_timeout_creates_no_root(
    lake: Lakehouse, tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "lake"
    before = files_of(root)
    planner = Planner(lake)
    # Its first file was written 6 s ago (a sync that waited on a busy disk, a paused process).
    with pytest.raises(CommitTimeoutError) as caught:
        commit(
            lake.storage, 8, lake.root_info, planner, still, timed(clock), files_since=clock.now - 6
        )
    line = str(caught.value)
    assert "\n" not in line
    assert line == (
        "gave up before creating root 2: its first new file was written 6s ago, past the commit "
        "timeout of 5s (gc may take files that old for orphans); nothing was committed, run it "
        "again"
    )
    assert caught.value.exit_code == ExitCode.CONFLICT  # a conflict's "run again" (409 over REST)
    assert isinstance(caught.value, CommitConflictError)
    assert latest_version(lake.storage) == 1 and files_of(root) == before
    # At the timeout, not past it, the same commit lands.
    outcome = commit(
        lake.storage, 8, lake.root_info, planner, still, timed(clock), files_since=clock.now - 5
    )
    assert outcome.version == 2


def test_a_slow_plan_counts_against_the_timeout(lake: Lakehouse, clock: Clock) -> None:
    """Without ``files_since`` the clock starts when ``commit`` is called: a plan (writing its
    nodes) that outlasts the timeout lands nothing; with no timeout it does."""

    class Slow(Planner):
        def __call__(self, base: RootInfo) -> RootPlan:
            clock.now += 5.5
            return super().__call__(base)

    with pytest.raises(
        CommitTimeoutError, match=r"written 5\.5s ago, past the commit timeout of 5s"
    ):
        commit(lake.storage, 8, lake.root_info, Slow(lake), still, timed(clock))
    assert latest_version(lake.storage) == 1
    untimed = CommitPolicy(timeout_seconds=None)
    assert commit(lake.storage, 8, lake.root_info, Slow(lake), still, untimed).version == 2


def test_a_transaction_times_from_its_first_file(tmp_path: Path, clock: Clock) -> None:
    """A transaction whose definitions went out early (``write_new_files``, as a group commit
    writes them beside its own files) counts from then, not from its commit: its files are
    what gc would take for orphans."""
    created = Lakehouse.create(str(tmp_path / "lake"), name="t", order=8)
    lh = Lakehouse.open(created.storage.root_uri, commit_policy=timed(clock))
    tx = lh.transaction()
    tx.create_namespace("late")
    tx.write_new_files()
    assert tx.files_since == clock.now
    clock.now += 6
    with pytest.raises(CommitTimeoutError, match="written 6s ago"):
        tx.commit()
    assert latest_version(lh.storage) == 0
    with lh.transaction() as again:  # a new transaction, its own clock
        again.create_namespace("late")
    assert latest_version(lh.storage) == 1


def test_an_ambiguous_write_past_the_timeout_is_an_unknown_state(
    lake: Lakehouse, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    """An ambiguous root write is not sent again once the commit is past its timeout, and since
    the first may yet land, the outcome is unknown, not a conflict to run again."""
    sent: list[bytes] = []

    def slow_reset(self: Storage, path: str, data: bytes) -> None:
        sent.append(data)
        clock.now += 6  # the reset came after 6 s
        raise StorageError("could not exclusively create: connection reset")

    monkeypatch.setattr(Storage, "create_exclusive", slow_reset)
    with pytest.raises(CommitStateUnknownError, match="failed 1 time and it is not sent again"):
        commit(lake.storage, 8, lake.root_info, Planner(lake), still, timed(clock))
    assert len(sent) == 1


# -- a real full disk --------------------------------------------------------------------------


def test_a_full_disk_is_one_line_exit_4_and_nothing_torn(small_disk: Path) -> None:
    lake = small_disk / "lake"
    lh = Lakehouse.create(str(lake), name="full", order=8)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    before = files_of(lake)
    filler = fill_disk(small_disk)
    done = subprocess.run(
        [sys.executable, "-m", "lakecore.cli", "-l", str(lake), "namespace", "create", "more"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == ExitCode.FAILURE, done.stderr
    assert done.stderr.count("\n") == 1 and "No space left on device" in done.stderr
    assert "CommitConflictError" not in done.stderr
    assert files_of(lake) == before  # no torn file, no orphan, no temporary
    filler.unlink()
    reopened = Lakehouse.open(str(lake))
    assert reopened.version == 1
    with reopened.transaction() as tx:
        tx.create_namespace("more")
    assert reopened.list_namespaces() == ["more", "ns"]
