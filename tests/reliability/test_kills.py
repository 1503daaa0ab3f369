"""Process kills: SIGKILL committers and a running maintenance job at random moments.

A committer is a spawned process that commits transactions in a loop (create a table, or
increment the counter) and acknowledges each one in an ack file only after ``commit()``
returned. It is killed at a random moment, again and again, on one lakehouse; after every kill
and at the end:

* the lakehouse validates at its latest version (``check_version`` deep) and the retained
  versions form a gap-free chain;
* every acknowledged commit is there (its table exists; the counter never went backwards and
  every increment is +1 along the chain);
* a new committer picks up where the killed one stopped.

The flush job (``python -m jobs.flush``, real local Spark) is SIGKILLed after a random delay
(its whole process group: the driver and its JVM); the catalog must be unchanged, the lakehouse
valid, and a rerun must finish the flush. Finally gc (the Spark job, ``--older-than 0s
--i-understand-grace-risk``) collects every orphan the kills left: afterwards fsck is clean and
a dry run finds no orphan.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.versions import latest_version
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.treeinfo import buffered_messages
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance.gc import gc_in_process
from tests.reliability.faulty_storage import check_chain, clear_caches, emit_summary, gc_orphans
from tests.reliability.workers import COUNTER, NAMESPACE, committer, create_catalog, read_acks

pytestmark = pytest.mark.reliability

LAKE_DEF: dict[str, Any] = dict(
    order=4,
    node_file_max_size_bytes=2600,
    namespace_name_max_size_bytes=16,
    table_name_max_size_bytes=24,
    file_name_max_size_bytes=100,
)
# Bigger nodes for the flush test: buffers that hold messages for the flush to push down.
FLUSH_DEF: dict[str, Any] = {**LAKE_DEF, "node_file_max_size_bytes": 6000}
REPO = Path(__file__).resolve().parents[2]
# Up to this many versions every one is checked at the end; beyond, a random sample of this
# many (consecutive pairs, for the counter's steps).
FULL_CHECK_VERSIONS = 2000


def _wait_for(path: Path, timeout: float, proc: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc is not None and not proc.is_alive():
            raise AssertionError(f"the child died before it was ready (exit {proc.exitcode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.01)


def _counter_values(uri: str, versions: list[int]) -> list[int]:
    clear_caches()
    lh = Lakehouse.open(uri)
    return [int(lh.at_version(v).load_table(NAMESPACE, COUNTER).properties["n"]) for v in versions]


def _check_acks(uri: str, acks: list[dict[str, Any]], checked: int = 0) -> list[str]:
    """Every acknowledged commit is present at the latest version; those from ``checked`` on
    (the ones not seen by an earlier call) also in their own version."""
    problems: list[str] = []
    clear_caches()
    lh = Lakehouse.open(uri)
    tables = set(lh.list_tables(NAMESPACE))
    counter = int(lh.load_table(NAMESPACE, COUNTER).properties["n"])
    for index, ack in enumerate(acks):
        if ack["op"] == "create" and ack["arg"] not in tables:
            problems.append(f"acknowledged table {ack['arg']} (v{ack['v']}) is missing")
        if ack["op"] == "increment":
            if counter < int(ack["arg"]):
                problems.append(
                    f"acknowledged increment to {ack['arg']} (v{ack['v']}) lost: counter {counter}"
                )
            if index < checked:
                continue
            at = int(lh.at_version(ack["v"]).load_table(NAMESPACE, COUNTER).properties["n"])
            if at != int(ack["arg"]):
                problems.append(f"version {ack['v']} holds n={at}, acknowledged {ack['arg']}")
    versions = [a["v"] for a in acks]
    if len(set(versions)) != len(versions):
        problems.append("two acknowledged commits claim one version")
    return problems


def _kill_committers(
    uri: str, workdir: Path, kills: int, seed: int, window: tuple[float, float]
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    rng = random.Random(seed)
    ack_path = workdir / "acks.jsonl"
    problems: list[str] = []
    versions_validated = 0
    files_checked = 0
    checked = 0  # acks already checked in their own version
    for kill in range(kills):
        ready = workdir / f"ready-{kill}"
        proc = ctx.Process(
            target=committer, args=(uri, None, f"k{kill}", str(ack_path), str(ready))
        )
        proc.start()
        try:
            _wait_for(ready, 120, proc)
            time.sleep(rng.uniform(*window))
        finally:
            if proc.pid is not None and proc.is_alive():
                os.kill(proc.pid, signal.SIGKILL)
            proc.join(30)
        assert proc.exitcode == -signal.SIGKILL, (
            f"kill {kill}: the committer exited {proc.exitcode} before the kill"
        )
        # After every kill: the latest version validates and every ack so far is there.
        check = check_chain(uri, versions=[latest_version(Storage(uri))])
        versions_validated += check.versions_checked
        files_checked += check.files_checked
        problems.extend(f"kill {kill}: {p}" for p in check.problems)
        acks, _ = read_acks(ack_path)
        problems.extend(f"kill {kill}: {p}" for p in _check_acks(uri, acks, checked))
        checked = len(acks)
    acks, _ = read_acks(ack_path)
    # At the end: every retained version (a sample of them beyond FULL_CHECK_VERSIONS), and the
    # counter along the chain: every step is 0 or +1.
    latest = latest_version(Storage(uri))
    if latest < FULL_CHECK_VERSIONS:
        sample = list(range(1, latest + 1))  # v0 is the empty lakehouse
    else:
        starts = random.Random(seed).sample(range(1, latest), FULL_CHECK_VERSIONS // 2)
        sample = sorted({v for s in starts for v in (s, s + 1)} | {latest})
    final = check_chain(uri, versions=sample)
    versions_validated += final.versions_checked
    files_checked += final.files_checked
    problems.extend(final.problems)
    counters = dict(zip(sample, _counter_values(uri, sample), strict=True))
    steps = {counters[v + 1] - counters[v] for v in sample if v + 1 in counters}
    if not steps <= {0, 1}:
        problems.append(
            f"the counter moved by {sorted(steps)} in one version: a lost or doubled update"
        )
    # A new committer picks up where the killed ones stopped.
    proc = ctx.Process(
        target=committer, args=(uri, None, "after", str(ack_path), str(workdir / "ready-after"), 6)
    )
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0, f"the committer after the kills failed ({proc.exitcode})"
    acks_after, _done = read_acks(ack_path)
    problems.extend(_check_acks(uri, acks_after, checked))
    landed_unacked = final.latest - 1 - len(acks)  # version 1 is the catalog's setup commit
    return {
        "kills": kills,
        "acked_commits": len(acks),
        "versions": final.latest + 1,
        "landed_unacknowledged": landed_unacked,
        "versions_validated": versions_validated,
        "files_checked": files_checked,
        "rerun_commits": len(acks_after) - len(acks),
        "problems": problems,
    }


def _collect_orphans_with_gc_job(run_job: Any, uri: str) -> dict[str, Any]:
    from jobs.gc_job import main as gc_main

    clear_caches()
    before = len(
        gc_orphans(
            gc_in_process(
                Storage(uri),
                now_millis=int(time.time() * 1000) + 1000,
                grace_millis=0,
                dry_run=True,
            )
        )
    )
    time.sleep(0.01)
    code, report = run_job(
        gc_main,
        "--lakehouse",
        uri,
        "--older-than",
        "0s",
        "--i-understand-grace-risk",
        "--parallelism",
        "4",
    )
    assert code == 0, report
    clear_caches()
    after = gc_in_process(
        Storage(uri), now_millis=int(time.time() * 1000) + 1000, grace_millis=0, dry_run=True
    )
    clear_caches()
    fsck = check_version(Lakehouse.open(uri), deep=True)
    return {
        "orphans_before_gc": before,
        "gc_deleted": report["counts"].get("orphans_deleted", 0),
        "orphans_after_gc": len(gc_orphans(after)),
        "fsck_clean_after_gc": fsck.ok,
    }


def _run_committer_kills(tmp_path: Path, run_job: Any, kills: int, seed: int, suite: str) -> None:
    uri = str(tmp_path / "lake")
    create_catalog(uri, **LAKE_DEF)
    started = time.monotonic()
    result = _kill_committers(uri, tmp_path, kills, seed, window=(0.0, 1.0))
    gc = _collect_orphans_with_gc_job(run_job, uri)
    problems = result.pop("problems")
    emit_summary(
        suite,
        **result,
        **gc,
        lost=sum("missing" in p or "lost" in p for p in problems),
        problems=len(problems),
        seconds=round(time.monotonic() - started, 1),
    )
    assert not problems, "\n".join(problems[:25])
    assert gc["orphans_after_gc"] == 0 and gc["fsck_clean_after_gc"], gc


@pytest.mark.spark
def test_sigkill_committers(tmp_path: Path, run_job: Any) -> None:
    _run_committer_kills(tmp_path, run_job, kills=15, seed=1, suite="kills.committer")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(3600)
def test_sigkill_committers_many(tmp_path: Path, run_job: Any) -> None:
    _run_committer_kills(tmp_path, run_job, kills=200, seed=2, suite="kills.committer.slow")


# -- a maintenance job ---------------------------------------------------------------------------


def _job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["LAKECORE_SPARK_LOG_LEVEL"] = "ERROR"
    return env


def _flush_command(uri: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jobs.flush",
        "--lakehouse",
        uri,
        "--mode",
        "full",
        "--master",
        "local[2]",
        "--parallelism",
        "4",
    ]


def _start_job(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    # A session of its own, so that the kill reaches the driver and its JVM (one process group).
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            cwd=REPO,
            env=_job_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group this test started, by its id
    proc.wait(60)


def _buffered_messages(uri: str) -> int:
    clear_caches()
    lh = Lakehouse.open(uri)
    return buffered_messages(lh.store, lh.root)


def _fill(uri: str, commits: int, prefix: str = "f") -> None:
    lh = Lakehouse.open(uri)
    for i in range(commits):
        with lh.transaction() as tx:
            for j in range(3):
                tx.create_table(NAMESPACE, f"{prefix}{i:03d}_{j}", properties={"i": str(i)})


def _file_count(path: Path) -> int:
    return sum(len(files) for _d, _s, files in os.walk(path))


def _wait_until(proc: subprocess.Popen[bytes], condition: Any, timeout: float) -> bool:
    """Poll ``condition`` until it holds (True) or the job exits or time runs out (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


@pytest.mark.spark
def test_sigkill_flush_job(tmp_path: Path, run_job: Any) -> None:
    """Three kills of ``python -m jobs.flush`` (driver + JVM): as soon as the executors write
    their first node file, at a random moment up to 0.5 s later, and right after the new root
    appears. Before each, commits put fresh messages into the buffers."""
    from jobs.flush_job import main as flush_main

    rng = random.Random(3)
    lake = tmp_path / "lake"
    uri = str(lake)
    create_catalog(uri, **FLUSH_DEF)
    started = time.monotonic()
    problems: list[str] = []
    outcomes: list[str] = []
    versions_validated = files_checked = 0
    plans = [
        ("at the first node write", 0.0),
        ("after the first node write", 0.5),
        ("when the root lands", 0.0),
    ]
    for kill, (when, spread) in enumerate(plans):
        for round_ in range(20):  # fresh messages in the buffers: the flush has work to do
            _fill(uri, 5, prefix=f"k{kill}r{round_}_")
            if _buffered_messages(uri) > 10:
                break
        clear_caches()
        before = dict(Lakehouse.open(uri).items())
        base = latest_version(Storage(uri))
        files_before = _file_count(lake)
        next_root = lake / root_node_file_name(base + 1)
        proc = _start_job(_flush_command(uri), tmp_path / f"kill-{kill}.log")
        try:
            if when == "when the root lands":
                hit = _wait_until(proc, next_root.exists, 600)
            else:
                hit = _wait_until(proc, lambda n=files_before: _file_count(lake) > n, 600)
                if spread:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(rng.uniform(0, spread))
        finally:
            finished = proc.poll() is not None
            _kill_group(proc)
        latest = latest_version(Storage(uri))
        new_files = _file_count(lake) - files_before
        outcomes.append(
            f"kill {kill} {when}: "
            + (
                "the job finished first"
                if finished and not hit
                else f"{'after' if latest > base else 'before'} its commit, {new_files} new files"
            )
        )
        if latest > base + 1:
            problems.append(f"kill {kill}: one flush made {latest - base} versions")
        clear_caches()
        if dict(Lakehouse.open(uri).items()) != before:
            problems.append(f"kill {kill}: the catalog changed")
        check = check_chain(uri, versions=[latest])
        versions_validated += check.versions_checked
        files_checked += check.files_checked
        problems.extend(f"kill {kill}: {p}" for p in check.problems)
    # The rerun completes the flush.
    code, report = run_job(flush_main, "--lakehouse", uri, "--mode", "full", "--parallelism", "4")
    assert code == 0, report
    clear_caches()
    if dict(Lakehouse.open(uri).items()) != before:
        problems.append("the catalog changed after the rerun")
    buffered_after = _buffered_messages(uri)
    final = check_chain(uri)
    versions_validated += final.versions_checked
    files_checked += final.files_checked
    problems.extend(final.problems)
    gc = _collect_orphans_with_gc_job(run_job, uri)
    emit_summary(
        "kills.flush_job",
        kills=len(plans),
        outcomes=outcomes,
        buffered_after_rerun=buffered_after,
        versions_validated=versions_validated,
        files_checked=files_checked,
        **gc,
        lost=sum("changed" in p for p in problems),
        problems=len(problems),
        seconds=round(time.monotonic() - started, 1),
    )
    assert not problems, "\n".join(problems)
    assert buffered_after == 0
    assert gc["orphans_after_gc"] == 0 and gc["fsck_clean_after_gc"], gc
