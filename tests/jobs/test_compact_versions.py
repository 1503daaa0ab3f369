"""The compact-versions job on real local-mode Spark: which versions expire, the order of effects,
and that nothing a retained version or an export reaches is ever deleted."""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from jobs.compact_versions_job import main as compact_main
from jobs.gc_job import main as gc_main
from lakecore.core.locations import root_node_file_name, version_from_root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache
from lakecore.core.versions import list_root_versions, read_hint, write_hint
from lakecore.errors import StorageError, VersionExpiredError
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance import expire, tally
from lakecore.maintenance.expire import expire_in_process
from lakecore.maintenance.reach import run_reach_tasks
from tests.jobs.test_gc import (
    DAY_SECONDS,
    age,
    assert_every_version_valid,
    build_lake,
    files,
    resolved_maps,
)

pytestmark = pytest.mark.spark

RunJob = Callable[..., tuple[int, dict[str, Any]]]
EXPORTED = 12
FUTURE = str(int(time.time() * 1000) + 365 * DAY_SECONDS * 1000)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Versions 0..31 of commits, 32 records export "x" of version 12, then 33..35: tables that
    version 12 has are dropped and updated later, so some files only the export reaches."""
    path = tmp_path_factory.mktemp("compact-template") / "lake"
    lh = build_lake(str(path))
    lh.export_snapshot("x", version=EXPORTED)
    for i in range(3):
        with lh.transaction() as tx:
            tx.drop_table("ns", f"t0{i + 4}_0")
            tx.update_table("ns", f"t0{i + 5}_2", properties={"late": str(i)})
    return path


@pytest.fixture
def lake(template: Path, tmp_path: Path) -> Path:
    path = tmp_path / "lake"
    shutil.copytree(template, path)
    age(path, 10 * DAY_SECONDS)
    return path


def args(path: Path | str, *extra: str) -> list[str]:
    return ["--lakehouse", str(path), "--parallelism", "4", *extra]


def root_deletions(monkeypatch: pytest.MonkeyPatch, fail_after: int | None = None) -> list[int]:
    """Record (in this process, the driver) every root file deleted, in order."""
    deleted: list[int] = []
    original = Storage.delete

    def recording(
        self: Storage,
        paths: Iterable[str],
        batch_size: int = 1000,
        deleted_here: list[str] | None = None,
    ) -> int:
        paths = list(paths)
        roots = [
            version_from_root_node_file_name(p)
            for p in paths
            if p.startswith("_") and p.endswith(".arrow")
        ]
        if roots and fail_after is not None and len(deleted) >= fail_after:
            raise StorageError("simulated crash while deleting roots")
        deleted.extend(roots)
        return original(self, paths, batch_size, deleted_here)

    monkeypatch.setattr(Storage, "delete", recording)
    return deleted


def test_compaction_keeps_the_newest_versions_and_the_export(
    lake: Path,
    run_job: RunJob,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    uri = Storage(str(lake)).root_uri
    latest = max(list_root_versions(Storage(uri)))
    assert latest == 35
    keep = [EXPORTED, 33, 34, 35]
    expired = [v for v in range(latest + 1) if v not in keep]
    maps = resolved_maps(uri)
    before = files(lake)

    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--dry-run"))
    assert code == 0, report.get("error")
    assert report["dry_run"] and files(lake) == before
    assert report["details"]["expired_versions"] == expired
    assert report["details"]["exported_snapshots"] == {"x": EXPORTED}
    would_delete = set(report["samples"]["would_delete"])
    assert would_delete and report["counts"]["files_deleted"] == 0
    # What it would free, as far as a dry run knows: the root and node files (the walk read
    # them), not the definitions. Its report has a run's keys, its deletes zero; but no "bytes
    # freed 0 B" on the terminal (a new-user trial read that as what the run would free).
    assert report["bytes"]["bytes_freed"] == 0 and report["counts"]["files_already_gone"] == 0
    terminal = capsys.readouterr().out
    assert "bytes to free at least" in terminal and "bytes freed" not in terminal
    would_free = report["bytes"]["bytes_to_free_at_least"]
    assert (
        "freeing at least " in report["summary"][-1]
        and "definition files' sizes" in report["summary"][-1]
    )
    # A --now a year ahead: a dry run shows what it would do, and says a real run refuses it.
    assert (
        "ahead of this machine's clock: a run without --dry-run refuses it" in report["summary"][0]
    )
    sizes = {rel: (lake / rel).stat().st_size for rel in before}
    dry = report

    deleted_roots = root_deletions(monkeypatch)
    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--i-understand-expiry-risk"))
    monkeypatch.undo()
    assert code == 0, report.get("error")
    assert deleted_roots == expired  # oldest first, one by one
    assert report["counts"]["root_files_deleted"] == len(expired)
    assert report["details"]["expired_versions"] == expired
    assert (
        report["counts"]["files_deleted"]
        == report["counts"]["files_only_expired_versions_reach"]
        > 0
    )
    assert set(report["samples"]["deleted"]) == would_delete
    assert report["bytes"]["bytes_freed"] > report["bytes"]["root_bytes_freed"] > 0
    # A dry run reports the keys a run does (docs/report-keys.md).
    for section in ("counts", "bytes", "samples", "details"):
        assert set(report[section]) == set(dry[section]), section
    assert report["bytes"]["bytes_to_free_at_least"] == would_free
    gone = before - files(lake)
    assert would_free == sum(sizes[rel] for rel in gone if rel.endswith(".arrow")) > 0
    assert report["bytes"]["bytes_freed"] == sum(sizes[rel] for rel in gone) > would_free
    assert list_root_versions(Storage(uri)) == keep
    assert read_hint(Storage(uri)) == latest
    assert resolved_maps(uri) == {v: maps[v] for v in keep}
    assert_every_version_valid(uri)
    lh = Lakehouse.open(uri)
    with pytest.raises(VersionExpiredError):
        lh.at_version(5)
    assert lh.at_version(EXPORTED).table_exists("ns", "t04_0")  # dropped later, kept by the export
    after = files(lake)
    assert not after & {root_node_file_name(v) for v in expired}

    # The same --now again: nothing left to expire, nothing deleted.
    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--i-understand-expiry-risk"))
    assert code == 0 and report["details"]["expired_versions"] == [] and files(lake) == after

    # And gc finds no orphan: compaction left none, and deletes nothing the export needs.
    age(lake, 10 * DAY_SECONDS)
    code, report = run_job(gc_main, *args(lake))
    assert code == 0, report.get("error")
    assert report["counts"]["orphans_found"] == 0 and files(lake) == after
    assert_every_version_valid(uri)


def test_nothing_expires_before_its_age_and_a_bad_now_is_refused(
    lake: Path, run_job: RunJob, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(lake)
    code, report = run_job(compact_main, *args(lake, "--now", str(int(time.time() * 1000))))
    assert code == 0, report.get("error")
    # Everything was committed seconds ago by the clock in the root files: younger than 7 days.
    assert report["details"]["expired_versions"] == [] and files(lake) == before
    capsys.readouterr()
    code, report = run_job(compact_main, *args(lake, "--now", "next tuesday"))
    # Refused as the command line is read (before Spark under spark-submit.sh): one line, no report.
    assert code == 2 and report == {} and "argument --now:" in capsys.readouterr().err


def test_a_crash_between_root_deletions_leaves_only_orphans(
    lake: Path, run_job: RunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = Storage(str(lake)).root_uri
    deleted = root_deletions(monkeypatch, fail_after=15)
    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--i-understand-expiry-risk"))
    monkeypatch.undo()
    assert code == 4 and f"versions {deleted} were expired" in report["error"], report.get("error")
    assert deleted == [*range(12), 13, 14, 15]
    assert list_root_versions(Storage(uri)) == [EXPORTED, *range(16, 36)]
    assert_every_version_valid(uri)  # no dangling pointer anywhere
    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--i-understand-expiry-risk"))
    assert code == 0, report.get("error")
    assert list_root_versions(Storage(uri)) == [EXPORTED, 33, 34, 35]
    # What only versions 0..15 reached (not 12) is orphaned now; gc removes it.
    age(lake, 10 * DAY_SECONDS)
    code, report = run_job(gc_main, *args(lake))
    assert code == 0, report.get("error")
    assert report["counts"]["orphans_deleted"] == report["counts"]["orphans_found"] > 0
    assert_every_version_valid(uri)


def test_in_process_expiry_matches(lake: Path) -> None:
    storage = Storage(str(lake))
    dry = expire_in_process(storage, now_millis=int(FUTURE), dry_run=True)
    assert dry.plan.retained == [EXPORTED, 33, 34, 35] and dry.roots.deleted == []
    result = expire_in_process(storage, now_millis=int(FUTURE))
    assert result.roots.deleted == dry.plan.expired
    assert result.files.deleted == len(dry.tally.candidates) > 0
    assert list_root_versions(storage) == [EXPORTED, 33, 34, 35]
    assert_every_version_valid(storage.root_uri)


def test_a_rollback_to_an_expired_version_during_the_run_keeps_its_files(lake: Path) -> None:
    """The units, in one process: the plan expires version 20; before its files go, a rollback
    revives its tree as a new version. The re-check walks the new version and keeps them."""
    storage = Storage(str(lake))
    plan = expire.plan_expiry(storage, int(FUTURE))
    assert 20 in plan.expired
    cache = NodeCache()
    kept_plan, gone_plan, _ = expire.plan_reaches(storage, plan, 4, cache)
    kept = list(kept_plan.driver_paths.items()) + list(run_reach_tasks(storage, kept_plan.tasks))
    gone = list(gone_plan.driver_paths.items()) + list(run_reach_tasks(storage, gone_plan.tasks))
    candidates = {p for p, _ in tally.difference_in_memory(gone, kept).candidates}
    lh = Lakehouse.open(storage.root_uri)
    revived = lh.rollback(to_version=20)  # reads root 20 before step 2 deletes it
    expire.ensure_hint(storage, plan)
    expire.check_exports_unchanged(storage, plan)
    expire.delete_expired_roots(storage, plan)
    reachable = {p for p, _ in kept}
    rechecked = expire.recheck(
        storage, plan, lambda paths: paths & reachable, cache, kept_plan.covered
    )
    assert rechecked.versions == [revived - 1, revived]  # the rollback's pin, then the rollback
    assert rechecked.paths & candidates, "version 20 reached nothing only expired versions reach"
    storage.delete(sorted(candidates - rechecked.paths))
    assert_every_version_valid(storage.root_uri)
    assert resolved_maps(storage.root_uri)[revived] == dict(lh.at_version(revived).items())


def _truncate_a_node_only(lake: Path, versions: range, not_in: list[int]) -> str:
    """Truncate (``truncate -s 100``) a node file that some of ``versions`` reach and none of
    ``not_in`` does; returns it."""
    from lakecore.core.tree import SHARED_CACHE
    from lakecore.maintenance.tree_files import reachable_from_root

    SHARED_CACHE.clear()
    lh = Lakehouse.open(str(lake))
    reach = {
        v: reachable_from_root(lh.store, lh.at_version(v).root).nodes for v in [*versions, *not_in]
    }
    kept = set().union(*(reach[v] for v in not_in))
    victim = sorted(set().union(*(reach[v] for v in versions)) - kept)[0]
    (lake / victim).write_bytes((lake / victim).read_bytes()[:100])
    SHARED_CACHE.clear()
    return victim


def test_an_unreadable_expired_version_expires_and_its_files_are_left_to_gc(
    lake: Path, run_job: RunJob, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = Storage(str(lake)).root_uri
    victim = _truncate_a_node_only(lake, range(20, 26), [EXPORTED, 33, 34, 35])
    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--i-understand-expiry-risk"))
    assert code == 0, report.get("error")
    assert list_root_versions(Storage(uri)) == [EXPORTED, 33, 34, 35]
    unreadable = (
        report["counts"]["unreadable_versions_expired"]
        + report["counts"]["unreadable_expired_subtrees"]
    )
    out = capsys.readouterr().out
    assert unreadable > 0 and "left to gc" in out, out
    assert (lake / victim).exists()
    assert_every_version_valid(uri)
    age(lake, 10 * DAY_SECONDS)
    code, report = run_job(gc_main, *args(lake))
    assert code == 0, report.get("error")
    assert not (lake / victim).exists()
    assert_every_version_valid(uri)


def test_a_damaged_retained_version_stops_compaction_with_exit_6(
    lake: Path, run_job: RunJob
) -> None:
    """Version 12 is retained because export "x" pins it; a node only it reaches is damaged."""
    victim = _truncate_a_node_only(lake, range(EXPORTED, EXPORTED + 1), [33, 34, 35])
    before = files(lake)
    code, report = run_job(compact_main, *args(lake, "--now", FUTURE, "--i-understand-expiry-risk"))
    assert code == 6, report.get("error")
    assert f"retained version(s) {EXPORTED} " in report["error"], report["error"]
    # Pinned, it neither expires nor is dropped: the line says what holds it.
    assert (
        f"version {EXPORTED} stays while an export pins it (export 'x' pins it: drop the export first"
        in report["error"]
    ), report["error"]
    assert "fsck --all" not in report["error"]  # the job's own advice, not the readers' generic one
    assert victim in report["error"] and "nothing was deleted" in report["error"]
    assert files(lake) == before


def test_the_difference_on_path_hashes_is_exact_and_a_collision_only_keeps(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compact-versions' difference joins on a 64-bit hash of the path (``unreached_only``): the
    difference is exact, the reach's error rows take no part, and a collision (forced here:
    every path hashes alike) keeps files that look reached; it never adds one to delete."""
    from pyspark.sql import functions as F

    from jobs.spark_units import unreached_only
    from lakecore.maintenance.listing import ERROR_KEY

    schema = "path string, size bigint"
    expired_reach = spark.createDataFrame(
        [("a/x.arrow", 1), ("a/y.arrow", 2), ("b/z.arrow", 3)], schema
    )
    retained_reach = spark.createDataFrame(
        [("a/y.arrow", 2), ("c/w.arrow", 4), (ERROR_KEY + "a/x.arrow", None)], schema
    )
    only_errors = spark.createDataFrame([(ERROR_KEY + "a/x.arrow", None)], schema)

    def paths(frame: Any) -> list[str]:
        return sorted(row["path"] for row in frame.collect())

    assert paths(unreached_only(expired_reach, retained_reach)) == ["a/x.arrow", "b/z.arrow"]
    assert unreached_only(expired_reach, retained_reach).columns == ["path", "size"]
    monkeypatch.setattr(F, "xxhash64", lambda *columns: F.lit(42).cast("long"))
    assert paths(unreached_only(expired_reach, retained_reach)) == []
    assert paths(unreached_only(expired_reach, only_errors)) == [
        "a/x.arrow",
        "a/y.arrow",
        "b/z.arrow",
    ]


@pytest.mark.s3
def test_on_s3_a_driver_clock_ahead_of_the_stores_expires_no_version_before_its_age(
    s3_server: Any, run_job: RunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Versions committed a moment ago by writers whose clocks agree with the store's; a maximum
    # age of 1 h, and a driver whose clock runs 3 h ahead. By the driver's clock alone every
    # version but the latest was 3 h old and expired, with its time travel, for good.
    import lakecore.contract.compact_versions
    import lakecore.maintenance.clock

    lake = f"s3://{s3_server.bucket}/{uuid.uuid4()}/lake"
    options = s3_server.storage_options()
    lh = build_lake(lake, options, commits=4)
    lh.update_settings(maximum_version_age_millis=3_600_000, minimum_versions_to_keep=1)
    storage = Storage(lake, options)
    versions = list_root_versions(storage)
    ahead_millis = 3 * 3600 * 1000
    real_clock = lakecore.maintenance.clock.machine_clock_millis
    monkeypatch.setattr(
        lakecore.maintenance.clock, "machine_clock_millis", lambda: real_clock() + ahead_millis
    )
    # ... and for the check of --now as the command line is read.
    monkeypatch.setattr(
        lakecore.contract.compact_versions,
        "machine_clock_millis",
        lambda: real_clock() + ahead_millis,
    )

    code, report = run_job(compact_main, *args(lake, *s3_server.job_args()))
    assert code == 0, report.get("error")
    assert report["status"] == "noop" and report["counts"]["expired_versions"] == 0
    assert list_root_versions(storage) == versions
    clocks = report["details"]["clocks"]
    # The machine's clock is read before the store's request, whose Date has a resolution of a
    # second: the skew is short by that request's time (on a loaded machine, with the S3
    # client's first build, a few seconds; a fresh-clone CI run met 3.6 s).
    assert abs(clocks["clock_skew_millis"] - ahead_millis) <= 10_000
    assert report["details"]["now_millis"] == clocks["store_clock_millis"]
    assert any(
        re.match(
            r"this machine's clock is (2h 59m|3h 00m) ahead of the store's: versions were aged",
            line,
        )
        for line in report["summary"]
    ), report["summary"]
    # A --now by the driver's clock is 3 h ahead of the store's: refused before anything goes.
    driver_now = str(real_clock() + ahead_millis)
    code, report = run_job(compact_main, *args(lake, *s3_server.job_args(), "--now", driver_now))
    assert code == 2 and "ahead of the store's clock" in report["error"], report.get("error")
    assert list_root_versions(storage) == versions
    # The same time, allowed: the versions are old enough then, so the run above kept them
    # because of the clock it chose, not because nothing could expire.
    code, report = run_job(
        compact_main,
        *args(lake, *s3_server.job_args(), "--now", driver_now, "--i-understand-expiry-risk"),
    )
    assert code == 0, report.get("error")
    assert report["counts"]["expired_versions"] == len(versions) - 1
    assert list_root_versions(storage) == versions[-1:]
    # The --now aged them, not a clock: the line says only that the clocks differ.
    assert any(
        re.match(
            r"this machine's clock is (2h 59m|3h 00m) ahead of the store's \(--now was given\)",
            line,
        )
        for line in report["summary"]
    ), report["summary"]
    assert not any("were aged" in line for line in report["summary"])


def test_with_nothing_to_expire_the_hint_is_not_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with nothing to do writes nothing: the hint, right already, is left alone (it was
    rewritten, the same bytes, on every run: a PUT on S3; found by a new-user trial)."""
    lake = tmp_path / "lake"
    lh = Lakehouse.create(str(lake))
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    storage = Storage(str(lake))
    writes: list[int] = []
    real_write_hint = expire.write_hint_or_raise
    monkeypatch.setattr(
        expire,
        "write_hint_or_raise",
        lambda st, version: writes.append(version) or real_write_hint(st, version),
    )
    result = expire_in_process(storage, now_millis=int(time.time() * 1000))
    assert result.plan.expired == [] and writes == [] and read_hint(storage) == 1
    (lake / "_latest_hint.txt").unlink()  # a hint missing (or behind) is written, as before
    expire_in_process(storage, now_millis=int(time.time() * 1000))
    assert writes == [1] and read_hint(storage) == 1


def test_a_hint_that_cannot_be_written_is_refused_with_its_cause(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial: on a full disk the line said the job could not write _latest_hint.txt but
    not why, and this is the job that would free the space."""
    storage = Storage(str(lake))
    plan = expire.plan_expiry(storage, int(FUTURE))
    write_hint(storage, 1)  # a hint below the versions to expire: it must move first
    real_replace = os.replace

    def full(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if str(dst).endswith("_latest_hint.txt"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(expire.ExpiryRefusedError) as caught:
        expire.ensure_hint(storage, plan)
    message = str(caught.value)
    assert "No space left on device" in message and "nothing was deleted" in message
    assert f"could not point the hint at version {plan.latest}" in message
