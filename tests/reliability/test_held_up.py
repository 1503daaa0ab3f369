"""What a new-user trial found working (issue 39, "Held up, keep it so"), kept so by tests.

Each claim of the trial, and where it is tested (here unless a file is named). Figures are
scaled to seconds; what a user sees is asserted: exit codes, the one line on stderr, files
intact, ``lakecore fsck --all --deep`` clean.

* **S3 connections reset for 30-60 s during compact-versions and gc: both jobs waited and
  finished.** ``test_connections_reset_during_compaction_and_gc_are_waited_out``: moto behind
  ``flaky_endpoint.FlakyEndpoint``; for 2 s every request is reset once (after it was sent, so
  it may have taken effect), during version compaction and again during gc (the jobs' units in
  one process); both do what a healthy run does, and every retained version is whole. What
  waits is botocore's own retrying (5 attempts, random back-off of up to 1, 2, 4 and 8 s): an
  outage that resets *every* attempt is outlasted after 2.5-13 s (measured), and then the job
  fails with exit 4, as below.
* **Refused for 120 s: exit 4, with one clear line.**
  ``test_a_store_that_refuses_is_exit_4_and_one_line``: the endpoint answers lakecore's probe
  and refuses every connection after it; ``lakecore fsck`` ends with exit 4 and one line (the
  storage server cannot be reached; check the endpoint and that the server is up). botocore's
  attempts cut to 2 (``AWS_MAX_ATTEMPTS``) to give up in a second. Refused from the start:
  ``tests/core/test_storage.py::test_s3_connection_refused_is_storage_error`` (one TCP probe,
  "nothing answers at the S3 endpoint", in under 5 s).
* **Flush on a full disk: exit 4, and no torn files.**
  ``test_a_flush_on_a_full_disk_is_exit_4_one_line_and_tears_nothing``: the flush job on a full
  4 MiB tmpfs (``small_disk``: root only) exits 4 with one line ending "No space left on
  device", and every file of the lakehouse is as it was, byte for byte. A commit on a full
  disk: ``tests/core/test_commit.py::test_a_full_disk_is_one_line_exit_4_and_nothing_torn``; an
  export into one: ``tests/jobs/test_spark_submit.py::test_an_executors_failure_is_one_line_and_sparks_traces_go_to_the_log``.
* **Two gc runs and a writer making 4,868 commits in 50 s: every acknowledged table present;
  fsck clean over 5,020 versions.** ``test_two_gc_runs_beside_a_writer_keep_every_acknowledged_table``:
  two gc processes (``--older-than 2s`` with the risk flag) loop beside a writer committing for
  3 s; every acknowledged table is there, the planted old orphans are gone, fsck is clean over
  every version. Heavier: ``test_soak.py::test_soak_local_heavy`` (``-m slow``; gc beside 8
  writers) and, in the job, ``tests/jobs/test_gc.py::test_gc_while_commits_land_deletes_nothing_live``.
* **compact-versions racing 50 rollbacks: clean.** Does not hold in general: a rollback that
  lands after compaction's re-check of new versions revives files compaction then deletes (the
  known window in ``lakecore/maintenance/expire.py``; 300 racing rollbacks left dangling
  versions in 3 runs of 5). ``test_a_rollback_landing_after_compactions_recheck_keeps_its_files``
  replays that interleaving, strict xfail until the window is closed. A rollback that lands
  before the re-check keeps its files:
  ``tests/jobs/test_compact_versions.py::test_a_rollback_to_an_expired_version_during_the_run_keeps_its_files``.
* **SIGINT and SIGTERM mid-delete: exit 130, and reruns converged.**
  ``test_sigterm_mid_delete_is_exit_130_and_a_rerun_converges``: gc's executors delete a first
  batch, SIGTERM reaches the driver; exit 130, the report says interrupted during delete, the
  rest of the orphans are there; gc again deletes exactly them, and a third run finds none.
  SIGINT at the same point: ``tests/jobs/test_gc.py::test_a_delete_interrupted_says_some_orphans_may_be_gone``
  (exit 130 and the line, no rerun); both signals at other stages, through spark-submit.sh
  or a job's own process: ``test_operator_mistakes.py::test_a_signal_stops_a_job_cleanly``
  (validate) and ``::test_a_signal_stops_a_spark_stage_without_waiting_for_it`` (gc's listing).
* **Hostile names stay inside the root: ``..``, ``a/b``, ``%2F`` and ``$(id)``.**
  ``test_hostile_names_stay_inside_the_root``: each as a namespace and as a table name, through
  the command line; the names come back unchanged and every file lies in the root. Stored paths
  that try to leave the root: ``test_hostile_structure.py``; the path rules:
  ``tests/core/test_locations.py::test_check_relative_path_refuses``.
* **A root of ``/`` or of a symlink to /etc: refused.**
  ``test_a_root_of_slash_or_of_a_link_to_etc_is_refused``: ``init`` exit 2 (the folder holds
  other files), the commands and the gc, compact-versions, flush and validate jobs exit 5 (no
  lakehouse there), each in one line; ``/`` and ``/etc`` unchanged.
* **100k tables in one transaction: 82 s and 228 MB.** A performance figure: measured by
  ``bench/bench_commit.py --big-transaction`` (``bench/big_transaction.py``, against building the
  same version the bulk way). Here only the function:
  ``test_hundreds_of_tables_in_one_transaction_commit_and_read_back`` (400 tables, one commit,
  a tree of several levels, read back and fsck clean).
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.flush_job import main as flush_main
from jobs.gc_job import main as gc_main
from lakecore import clear_caches
from lakecore.cli import main as cli_main
from lakecore.core.commit import CommitPolicy
from lakecore.core.storage import Storage
from lakecore.core.versions import list_root_versions
from lakecore.errors import CommitTimeoutError, ExitCode
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.treeinfo import buffered_messages
from lakecore.maintenance.expire import expire_in_process
from lakecore.maintenance.gc import gc_in_process
from tests.conftest import S3TestServer, fill_disk
from tests.jobs.test_gc import build_lake, plant_orphans
from tests.reliability.flaky_endpoint import FlakyEndpoint
from tests.reliability.workers import COUNTER, NAMESPACE, create_catalog, maintenance_loop

pytestmark = pytest.mark.reliability

DAY_MILLIS = 86_400_000
RunJob = Callable[..., tuple[int, dict[str, Any]]]


def _cli(*argv: str) -> tuple[int, str, str]:
    """``lakecore ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _fsck_all_deep(uri: str, *options: str, seen: str = "") -> int:
    """``lakecore fsck --all --deep`` (``options``: its ``--storage-option`` arguments) in a
    fresh state: exit 0, clean. Returns how many versions it checked. ``seen``: what the test
    saw, for a failure's message."""
    clear_caches()
    code, out, err = _cli("-l", uri, *options, "fsck", "--all", "--deep")
    assert code == 0 and not err, (code, out[-2000:], err, seen)
    match = re.fullmatch(r"checked ([\d,]+) versions, [\d,]+ nodes: clean\n", out)
    assert match, out
    return int(match.group(1).replace(",", ""))


def _moto_port(s3: S3TestServer) -> int:
    return int(s3.endpoint.rsplit(":", 1)[1])


# -- S3 connections reset, S3 refusing ------------------------------------------------------------

# How long each job's requests are reset (each once): the trial's 30-60 s, scaled to cover
# most of what either job asks of a lakehouse this small. Counted from the job's first request:
# on a loaded machine (load 20, a CI run beside three others) building the S3 client took the
# whole window and compaction met no reset at all. And open until RESETS_AT_LEAST requests were
# reset: in a CI run beside tests/airflow, compaction's first reset request, its retry after
# botocore's back-off and the next request took the whole 2 s, and only one was reset.
RESET_SECONDS = 2.0
RESETS_AT_LEAST = 3


@pytest.mark.s3
def test_connections_reset_during_compaction_and_gc_are_waited_out(
    s3_server: S3TestServer,
) -> None:
    uri, options = s3_server.new_root()
    build_lake(uri, options, commits=12)
    direct = Storage(uri, options)
    orphans = plant_orphans(direct)
    later = int(time.time() * 1000) + 10 * DAY_MILLIS  # every version past its age, every file
    with FlakyEndpoint(_moto_port(s3_server)) as flaky:
        storage = Storage(uri, {**options, "client_kwargs": {"endpoint_url": flaky.endpoint}})

        healthy = expire_in_process(direct, now_millis=later, dry_run=True)
        assert healthy.plan.expired, "nothing to expire: not a test of compaction"
        clear_caches()  # every read goes through the endpoint
        flaky.reset_requests_for(RESET_SECONDS, from_first_request=True, at_least=RESETS_AT_LEAST)
        compacted = expire_in_process(storage, now_millis=later)
        resets_in_compaction = flaky.requests_reset

        clear_caches()
        flaky.reset_requests_for(RESET_SECONDS, from_first_request=True, at_least=RESETS_AT_LEAST)
        collected = gc_in_process(storage, now_millis=later, grace_millis=3 * DAY_MILLIS)
        resets_in_gc = flaky.requests_reset - resets_in_compaction

    # Both met resets (each reset request failed once, and its retry got through) ...
    met = (resets_in_compaction, resets_in_gc)
    assert min(met) >= RESETS_AT_LEAST, met
    # ... and did what a healthy run does.
    assert compacted.plan.expired == healthy.plan.expired
    assert list_root_versions(direct) == healthy.plan.retained
    assert compacted.files.deleted == len(healthy.tally.candidates) > 0
    assert not compacted.files.errors and not collected.deleted.errors
    assert set(collected.deleted.deleted_paths) == orphans
    assert not {p for p in orphans if direct.exists(p)}
    assert _fsck_all_deep(uri, *s3_server.job_args()) == len(healthy.plan.retained)
    clear_caches()
    again = gc_in_process(direct, now_millis=later, grace_millis=3 * DAY_MILLIS, dry_run=True)
    assert not again.would_delete, "a rerun still finds orphans: the first run did not finish"


@pytest.mark.s3
def test_a_store_that_refuses_is_exit_4_and_one_line(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, options = s3_server.new_root()
    build_lake(uri, options, commits=3)
    # botocore's attempts, scaled from 5 (retries of up to 1 + 2 + 4 + 8 s) to 2 (up to 1 s).
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")

    def refuse_after_the_probe(connections: int) -> None:
        if connections == 2:  # the first was lakecore's probe of the endpoint
            flaky.refuse_for(120)

    with FlakyEndpoint(_moto_port(s3_server), on_connection=refuse_after_the_probe) as flaky:
        started = time.monotonic()
        code, out, err = _cli(
            "-l",
            uri,
            "--storage-option",
            f"endpoint_url={flaky.endpoint}",
            "--storage-option",
            "key=lakecore-test",
            "--storage-option",
            "secret=lakecore-test",
            "fsck",
            "--all",
            "--deep",
        )
        elapsed = time.monotonic() - started
    assert flaky.connections >= 2, "the command never got past the probe"
    assert code == ExitCode.FAILURE, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lakecore: StorageError: could not "), lines[0]
    assert f"{uri}" in lines[0] and "the storage server cannot be reached" in lines[0], lines[0]
    assert lines[0].endswith("and that the server is up"), lines[0]
    assert elapsed < 30, f"{elapsed:.1f} s to give up"


# -- a full disk ------------------------------------------------------------------------------------


def _flushable(uri: str, tables: int) -> Lakehouse:
    """Small nodes (order 4, 4 KB), one table a commit: messages wait in buffers at every level."""
    lh = Lakehouse.create(
        uri,
        name="flushme",
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("a")
    for i in range(tables):
        with lh.transaction() as tx:
            tx.create_table("a", f"t{i:03d}", properties={"i": str(i)})
    return lh


def _contents(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.spark
def test_a_flush_on_a_full_disk_is_exit_4_one_line_and_tears_nothing(
    small_disk: Path, run_job: RunJob, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = small_disk / "lake"
    lh = _flushable(str(lake), tables=24)
    assert buffered_messages(lh.store, lh.root) > 0, "nothing to flush: not a test of a flush"
    before = _contents(lake)
    filler = fill_disk(small_disk)
    capsys.readouterr()
    code, report = run_job(
        flush_main, "--lakehouse", str(lake), "--mode", "full", "--parallelism", "2"
    )
    err = capsys.readouterr().err
    assert code == ExitCode.FAILURE, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lakecore flush: StorageRefusedError: "), lines[0]
    assert lines[0].endswith("No space left on device"), lines[0]
    assert report["status"] == "failed" and report["exit_code"] == ExitCode.FAILURE
    # No torn file, no temporary, nothing half-committed: the lakehouse as it was, byte for byte.
    assert _contents(lake) == before
    filler.unlink()
    assert _fsck_all_deep(str(lake)) == lh.version + 1


# -- signals --------------------------------------------------------------------------------------


@pytest.mark.spark
def test_sigterm_mid_delete_is_exit_130_and_a_rerun_converges(
    tmp_path: Path, run_job: RunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gc job deletes a first batch of orphans on its executors; then the scheduler's
    SIGTERM reaches the driver, before the rest. (SIGINT at the same point, the report and the
    line: ``tests/jobs/test_gc.py::test_a_delete_interrupted_says_some_orphans_may_be_gone``.)
    gc run again (its units in one process) deletes what is left and then finds nothing."""
    import jobs.gc_job
    from jobs.spark_units import delete_frame

    lake = tmp_path / "lake"
    build_lake(str(lake), commits=4)
    storage = Storage(str(lake))
    orphans = set().union(*(plant_orphans(storage) for _ in range(2)))

    def first_batch_then_sigterm(ctx: Any, store: Storage, files: Any, batch_size: int) -> Any:
        delete_frame(ctx, store, files.orderBy("path").limit(2), batch_size)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the job's handler raises in here
        raise AssertionError("no SIGTERM arrived")

    monkeypatch.setattr(jobs.gc_job, "delete_frame", first_batch_then_sigterm)
    code, report = run_job(
        gc_main,
        "--lakehouse",
        str(lake),
        "--parallelism",
        "2",
        "--older-than",
        "0s",
        "--i-understand-grace-risk",
    )
    monkeypatch.undo()
    assert code == ExitCode.INTERRUPTED, report
    assert report["status"] == "interrupted" and report["details"]["interrupted_stage"] == "delete"
    assert report["error"].startswith(
        f"interrupted by SIGTERM during delete: some of the {len(orphans)} old orphans may be "
        "deleted already"
    ), report["error"]
    left = orphans & {f.path for f in storage.list("")}
    assert len(left) == len(orphans) - 2, "the signal did not come between the deletes"
    now = int(time.time() * 1000)
    rerun = gc_in_process(storage, now_millis=now, grace_millis=0)
    assert set(rerun.deleted.deleted_paths) == left and not rerun.deleted.errors
    again = gc_in_process(storage, now_millis=now, grace_millis=0, dry_run=True)
    assert not again.would_delete, "a second rerun still finds orphans: the first did not converge"
    assert _fsck_all_deep(str(lake)) == 6  # versions 0-5: none expired


# -- racing jobs -------------------------------------------------------------------------------------


def _spawn_maintenance(
    uri: str, workdir: Path, kinds: list[str], count: int, grace_millis: int = 0
) -> list[tuple[Any, Path]]:
    """``count`` spawned processes, each running ``workers.maintenance_loop`` until
    ``workdir/stop`` exists; returns them, once their imports are done, with the paths of their
    JSON reports."""
    started = []
    for i in range(count):
        ready, report = workdir / f"{kinds[0]}{i}-ready", workdir / f"{kinds[0]}{i}.json"
        process = multiprocessing.get_context("spawn").Process(
            target=maintenance_loop,
            args=(uri, None, str(workdir / "stop"), str(report), kinds, grace_millis, str(ready)),
        )
        process.start()
        started.append((process, report, ready))
    deadline = time.monotonic() + 60
    for process, _, ready in started:
        while not ready.exists() and process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), f"a maintenance process did not start ({process.exitcode})"
    return [(process, report) for process, report, _ in started]


def _stop(workdir: Path, processes: list[Any]) -> None:
    (workdir / "stop").write_text("stop")
    for process in processes:
        process.join(60)
        assert process.exitcode == 0, f"a maintenance process failed ({process.exitcode})"


# The trial: a writer made 4,868 commits in 50 s beside two gc runs. Here: 3 s, and gc with a
# grace of 2 s (``--older-than 2s --i-understand-grace-risk``): files older than that, of
# versions that land while gc runs, are kept only because gc sees them reached. The writer's
# commit timeout is half the grace, as gc's floor demands of real ones: in a CI run beside the
# other suites fsck found a version naming a definition file gc had deleted, which only a commit
# of over 2 s explains (likely its sync waiting on the busy disk). Such a commit now gives up
# (``CommitTimeoutError``) and is not acknowledged.
WRITER_SECONDS = 3.0
GC_GRACE_MILLIS = 2000
WRITER_COMMIT_TIMEOUT_SECONDS = GC_GRACE_MILLIS / 2000


def test_two_gc_runs_beside_a_writer_keep_every_acknowledged_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    create_catalog(uri, order=8, node_file_max_size_bytes=8192)
    storage = Storage(uri)
    old_orphans = set().union(*(plant_orphans(storage) for _ in range(3)))
    ten_days_ago = time.time() - 10 * 86_400
    for path in old_orphans:
        os.utime(tmp_path / "lake" / path, (ten_days_ago, ten_days_ago))
    gcs = _spawn_maintenance(uri, tmp_path, ["gc"], 2, GC_GRACE_MILLIS)
    acknowledged: list[str] = []
    timed_out, slowest = 0, 0.0
    lh = Lakehouse.open(
        uri, commit_policy=CommitPolicy(timeout_seconds=WRITER_COMMIT_TIMEOUT_SECONDS)
    )
    stop_at = time.monotonic() + WRITER_SECONDS
    while time.monotonic() < stop_at:
        name = f"t{len(acknowledged) + timed_out:05d}"
        started = time.monotonic()
        try:
            with lh.transaction() as tx:
                tx.create_table(NAMESPACE, name, properties={"n": str(len(acknowledged))})
        except CommitTimeoutError:
            timed_out += 1
            continue
        finally:
            slowest = max(slowest, time.monotonic() - started)
        acknowledged.append(name)
    _stop(tmp_path, [process for process, _ in gcs])
    reports = [json.loads(report.read_text()) for _, report in gcs]
    deleted = {path for r in reports for path in r["gc_deleted"]}
    # What a failure below needs to be read: how slow the writer got, and what gc took.
    seen = f"slowest commit {slowest:.2f}s, {timed_out} timed out; gc deleted {sorted(deleted - old_orphans)[:5]} beside the planted orphans"
    assert all(r["counts"].get("gc_runs", 0) >= 1 and not r["errors"] for r in reports), reports
    assert sum(r["counts"].get("gc_deleted", 0) for r in reports) >= len(old_orphans), reports
    assert not {p for p in old_orphans if storage.exists(p)}
    clear_caches()
    latest = Lakehouse.open(uri)
    assert set(latest.list_tables(NAMESPACE)) == {COUNTER, *acknowledged}, seen
    assert list_root_versions(storage) == list(range(latest.version + 1))
    assert _fsck_all_deep(uri, seen=seen) == latest.version + 1 == len(acknowledged) + 2


# The trial: compact-versions racing 50 rollbacks, "clean". Not so before rollbacks pinned their
# target: a rollback that read its target before compaction deleted that version's root, and
# landed after compaction's re-check of new versions, revived files compaction then deleted.
# Racing 300 rollbacks against compaction (versions expiring after 200 ms) left 1-2 retained
# versions dangling in 3 runs of 5. A rollback now pins its target first and reads it after;
# compaction reads the pins again after its re-check (maintenance.expire.refuse_late_revivals).
# Both ways that can interleave, step by step.


def _compaction_planned(uri: str, lh: Lakehouse) -> tuple[Any, ...]:
    """Step 0 of a compaction at a time past every age: its plan, both reaches, the files it
    would delete, and the expired version whose files it would delete the most of."""
    from lakecore.core.tree.store import NodeCache
    from lakecore.maintenance import expire
    from lakecore.maintenance.reach import run_reach_tasks
    from lakecore.maintenance.tree_files import reachable_from_root

    storage = Storage(uri)
    plan = expire.plan_expiry(storage, int(time.time() * 1000) + 10 * DAY_MILLIS)
    cache = NodeCache()
    kept_plan, gone_plan, _ = expire.plan_reaches(storage, plan, 4, cache)
    kept = [*kept_plan.driver_paths.items(), *run_reach_tasks(storage, kept_plan.tasks)]
    gone = [*gone_plan.driver_paths.items(), *run_reach_tasks(storage, gone_plan.tasks)]
    candidates = {path for path, _ in expire.difference_in_memory(gone, kept).candidates}
    reach = {v: reachable_from_root(lh.store, lh.at_version(v).root).files for v in plan.expired}
    target = max(plan.expired, key=lambda v: len(reach[v] & candidates))
    assert reach[target] & candidates, "no expired version reaches a file only it reaches"
    reachable = {path for path, _ in kept}

    def recheck() -> Any:
        return expire.recheck(
            storage, plan, lambda paths: paths & reachable, cache, kept_plan.covered
        )

    return storage, plan, candidates, target, recheck


def _rolling_lake(uri: str) -> Lakehouse:
    lh = create_catalog(uri, order=4, node_file_max_size_bytes=4096, minimum_versions_to_keep=3)
    for i in range(12):
        with lh.transaction() as tx:
            tx.create_table(NAMESPACE, f"t{i:02d}", properties={"i": str(i)})
            if i >= 2:
                tx.drop_table(NAMESPACE, f"t{i - 2:02d}")
    return lh


def test_a_rollback_that_read_its_target_before_compaction_deleted_it_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction checks the pins, then the rollback pins and reads its target, then
    compaction deletes the expired roots and re-checks: it finds the pin and deletes no file;
    the rollback lands whole."""
    from lakecore.maintenance import expire

    uri = str(tmp_path / "lake")
    lh = _rolling_lake(uri)
    storage, plan, candidates, target, recheck = _compaction_planned(uri, lh)
    expire.ensure_hint(storage, plan)
    expire.check_exports_unchanged(storage, plan)  # before the rollback's pin
    refused: list[Exception] = []
    real_commit_plan = Lakehouse.commit_plan
    commits = []

    def compaction_before_the_rollback_lands(self: Lakehouse, *args: Any, **kwargs: Any) -> Any:
        commits.append(1)
        if len(commits) == 2:  # the rolling forward; the first commit is the pin
            expire.delete_expired_roots(storage, plan)
            with pytest.raises(expire.ExpiryConflictError, match="pins expired version") as caught:
                recheck()
            refused.append(caught.value)
        return real_commit_plan(self, *args, **kwargs)

    monkeypatch.setattr(Lakehouse, "commit_plan", compaction_before_the_rollback_lands)
    revived = Lakehouse.open(uri).rollback(to_version=target)
    monkeypatch.undo()
    assert refused and revived == plan.latest + 2  # the pin's version, then the rollback's
    assert all(storage.exists(path) for path in candidates)  # step 3 never ran
    clear_caches()
    rolled = Lakehouse.open(uri)
    assert not rolled.lakehouse_def.exported_snapshots  # the pin went with the rollback
    _fsck_all_deep(uri)  # every retained version reaches only files that are there


def test_a_rollback_whose_target_compaction_deleted_first_fails_and_takes_its_pin_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback pins after compaction checked the pins; compaction deletes the expired
    roots before the rollback reads its target: the read finds the root gone, the rollback
    fails with nothing rolled back and its pin taken back, and compaction's re-check then
    deletes what only expired versions reached."""
    from lakecore.errors import VersionExpiredError
    from lakecore.maintenance import expire

    uri = str(tmp_path / "lake")
    lh = _rolling_lake(uri)
    storage, plan, candidates, target, recheck = _compaction_planned(uri, lh)
    expire.ensure_hint(storage, plan)
    expire.check_exports_unchanged(storage, plan)
    latest_before = Lakehouse.open(uri).version
    real_commit_plan = Lakehouse.commit_plan
    commits = []

    def roots_deleted_after_the_pin(self: Lakehouse, *args: Any, **kwargs: Any) -> Any:
        outcome = real_commit_plan(self, *args, **kwargs)
        commits.append(1)
        if len(commits) == 1:  # the pin has landed; the read of the target comes next
            expire.delete_expired_roots(storage, plan)
        return outcome

    monkeypatch.setattr(Lakehouse, "commit_plan", roots_deleted_after_the_pin)
    with pytest.raises(VersionExpiredError):
        Lakehouse.open(uri).rollback(to_version=target)
    monkeypatch.undo()
    clear_caches()
    after = Lakehouse.open(uri)
    assert not after.lakehouse_def.exported_snapshots  # taken back
    assert after.version == latest_before + 2  # the pin and its release; nothing rolled back
    rechecked = recheck()
    storage.delete(sorted(candidates - rechecked.paths), 1000)  # step 3
    _fsck_all_deep(uri)
    # A target already expired when the rollback starts: refused before anything is committed.
    with pytest.raises(VersionExpiredError):
        after.rollback(to_version=target)
    assert Lakehouse.open(uri).version == after.version


# -- hostile names and roots -------------------------------------------------------------------------

HOSTILE_NAMES = ["a/b", "%2F", "$(id)", "..."]
NAMESPACE_NAMES = [name for name in HOSTILE_NAMES if name != "..."]


def test_hostile_names_stay_inside_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Namespaces and tables named ``a/b``, ``%2F``, ``$(id)`` and (a table) ``...`` (valid
    names: the format allows any printable UTF-8) are created, listed and dropped through the command
    line; every file lands in the root, at its top or in a hash directory, and the names come
    back exactly as given (nothing expanded, nothing decoded)."""
    home = tmp_path / "home"
    lake = home / "lake"
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # a path that escaped relative to the working folder lands here
    assert _cli("init", str(lake))[0] == 0
    # As a namespace ".." is three empty levels (a.b is b inside a): refused, naming why.
    code, _, err = _cli("-l", str(lake), "namespace", "create", "..")
    assert code == ExitCode.BAD_INPUT and "empty" in err, err
    for name in NAMESPACE_NAMES:
        assert _cli("-l", str(lake), "namespace", "create", name)[0] == 0, name
        for table in HOSTILE_NAMES:
            code, _, err = _cli(
                "-l", str(lake), "table", "create", name, table, "--column", "1:id:INT8"
            )
            assert code == 0, (name, table, err)
    code, out, _ = _cli("-l", str(lake), "--json", "namespace", "list")
    assert code == 0 and sorted(json.loads(out)["namespaces"]) == sorted(NAMESPACE_NAMES), out
    for name in NAMESPACE_NAMES:
        code, out, _ = _cli("-l", str(lake), "--json", "table", "list", name)
        assert code == 0 and sorted(json.loads(out)["tables"]) == sorted(HOSTILE_NAMES), out
        code, out, _ = _cli("-l", str(lake), "--json", "table", "show", name, "$(id)")
        assert code == 0 and json.loads(out)["name"] == "$(id)", out
    # A new table named "." or ".." is refused: HTTP clients and path joins drop such a segment.
    for dots in (".", ".."):
        code, _, err = _cli(
            "-l", str(lake), "table", "create", "a/b", dots, "--column", "1:id:INT8"
        )
        assert code == ExitCode.BAD_INPUT and "parent folder" in err, err
    assert _cli("-l", str(lake), "table", "drop", "a/b", "...")[0] == 0
    assert [p.name for p in home.iterdir()] == ["lake"] and not any(work.iterdir())
    for path in lake.rglob("*"):
        parts = path.relative_to(lake).parts
        if path.is_file():
            # Top-level files (roots, the lakehouse definition, the hint), or definitions four
            # levels down in a hash directory: no name made a folder of its own.
            assert len(parts) in (1, 4) and all(len(p) == 4 for p in parts[:-1]), parts
        else:
            assert len(parts) <= 3 and all(re.fullmatch("[01]{4}", p) for p in parts), parts
    assert _fsck_all_deep(str(lake)) == 1 + len(NAMESPACE_NAMES) * (1 + len(HOSTILE_NAMES)) + 1


def _top_level(folder: Path) -> dict[str, tuple[int, int]]:
    """Name -> (size, mtime in ns) of each entry of ``folder``, links not followed."""
    return {
        entry.name: (
            entry.stat(follow_symlinks=False).st_size,
            entry.stat(follow_symlinks=False).st_mtime_ns,
        )
        for entry in os.scandir(folder)
    }


@pytest.mark.spark
def test_a_root_of_slash_or_of_a_link_to_etc_is_refused(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``init`` refuses a folder holding other files (exit 2); every other command and job
    finds no lakehouse there (exit 5); each says so in one line, and neither ``/`` nor
    ``/etc`` changes."""
    import jobs.compact_versions_job
    import jobs.validate_job

    link = tmp_path / "lake"
    link.symlink_to("/etc", target_is_directory=True)
    slash, etc = set(os.listdir("/")), _top_level(Path("/etc"))  # / holds /tmp: names only
    for root in ("/", str(link)):
        code, _, err = _cli("init", root)
        assert code == ExitCode.BAD_INPUT and err.count("\n") == 1, (root, err)
        assert "already holds other files" in err, err
        for argv in (["namespace", "create", "x"], ["table", "list", "x"], ["fsck", "--all"]):
            code, _, err = _cli("-l", root, *argv)
            assert code == ExitCode.NOT_FOUND and err.count("\n") == 1, (root, argv, err)
            assert "NoLakehouseError: no lakehouse at file:///" in err, err
        for job, extra in (
            (gc_main, ["--older-than", "0s", "--i-understand-grace-risk"]),
            (jobs.compact_versions_job.main, []),
            (flush_main, []),
            (jobs.validate_job.main, []),
        ):
            capsys.readouterr()
            code = job(["--lakehouse", root, *extra], spark=spark)
            err = capsys.readouterr().err
            assert code == ExitCode.NOT_FOUND and err.count("\n") == 1, (root, job, err)
            assert "NoLakehouseError" in err, err
    assert set(os.listdir("/")) == slash and _top_level(Path("/etc")) == etc


# -- big inputs ----------------------------------------------------------------------------------

# The trial: 100k tables in one transaction (82 s, 228 MB: bench/bench_commit.py measures that,
# ``--big-transaction``). Here the function: one transaction of 400 tables fills an order-4 tree
# of several levels in its one commit (each definition is its own fsynced file: 2-10 ms here).
BIG_TRANSACTION_TABLES = 400


def test_hundreds_of_tables_in_one_transaction_commit_and_read_back(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    lh = Lakehouse.create(uri, name="big", order=4, node_file_max_size_bytes=4096)
    names = [f"t{i:05d}" for i in range(BIG_TRANSACTION_TABLES)]
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        for i, name in enumerate(names):
            tx.create_table(
                "ns",
                name,
                columns=[{"id": 1, "name": "id", "type": "INT8"}],
                properties={"i": str(i)},
            )
    assert lh.version == 1
    clear_caches()
    reopened = Lakehouse.open(uri)
    assert reopened.list_tables("ns") == names
    for i in (0, 123, BIG_TRANSACTION_TABLES - 1):
        assert reopened.load_table("ns", names[i]).properties == {"i": str(i)}
    code, out, _ = _cli("-l", uri, "--json", "tree")
    assert code == 0 and json.loads(out)["depth"] >= 3, out
    assert _fsck_all_deep(uri) == 2
