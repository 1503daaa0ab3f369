"""Concurrent writers through separate catalog objects in separate processes, and lakecore's
maintenance (flush, compact-versions, gc) running while they commit."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import Table

from lakecore.core.locations import new_node_file_path, new_table_def_path
from lakecore.core.storage import Storage
from tests.iceberg.conftest import RETRY_PROPERTIES, SCHEMA, SPEC, IcebergLake, local_lake, s3_lake
from tests.iceberg.workers import run_appender
from tests.reliability.workers import maintenance_loop

WRITERS = 4
APPENDS = 3
ROWS = 5


def _run_writers(
    lake: IcebergLake, tmp_path: Path, tables: list[str], appends: int = APPENDS
) -> list[dict[str, Any]]:
    """One appender process per writer; writer w appends to ``tables[w % len(tables)]``."""
    ctx = multiprocessing.get_context("spawn")
    jobs = [
        (
            lake.uri,
            lake.properties,
            tables[w % len(tables)],
            f"w{w}",
            appends,
            ROWS,
            str(tmp_path / f"report-{w}.json"),
        )
        for w in range(WRITERS)
    ]
    with ProcessPoolExecutor(max_workers=WRITERS, mp_context=ctx) as pool:
        for future in [pool.submit(run_appender, job) for job in jobs]:
            future.result(timeout=600)
    return [json.loads((tmp_path / f"report-{w}.json").read_text()) for w in range(WRITERS)]


def _expected_ids(writers: list[int], appends: int = APPENDS) -> list[int]:
    return sorted(w * 10**6 + i for w in writers for i in range(appends * ROWS))


def _assert_every_append_once(
    table: Table, reports: list[dict[str, Any]], writers: list[int]
) -> None:
    ids = table.scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == _expected_ids(writers), "an append was lost or landed twice"
    snapshot_ids = {s.snapshot_id for s in table.metadata.snapshots}
    acknowledged = [
        sid for r in reports if int(r["writer"][1:]) in writers for sid in r["snapshots"]
    ]
    assert len(set(acknowledged)) == len(acknowledged) == len(writers) * APPENDS
    assert set(acknowledged) <= snapshot_ids


def _create(lake: IcebergLake, names: list[str]) -> None:
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    for name in names:
        catalog.create_table(f"ns.{name}", SCHEMA, partition_spec=SPEC, properties=RETRY_PROPERTIES)


def test_four_processes_append_to_one_table(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    _create(lake, ["t"])
    reports = _run_writers(lake, tmp_path, ["ns.t"])
    table = lake.catalog().load_table("ns.t")
    _assert_every_append_once(table, reports, list(range(WRITERS)))
    assert len(table.metadata.snapshots) == WRITERS * APPENDS
    lake.assert_fsck_deep()
    lake.assert_validates()


def test_appends_to_different_tables_all_land_and_the_version_chain_has_no_gap(
    tmp_path: Path,
) -> None:
    lake = local_lake(tmp_path)
    _create(lake, [f"t{w}" for w in range(WRITERS)])
    reports = _run_writers(lake, tmp_path, [f"ns.t{w}" for w in range(WRITERS)])
    catalog = lake.catalog()
    for w in range(WRITERS):
        _assert_every_append_once(catalog.load_table(f"ns.t{w}"), reports, [w])
    lh = lake.open()
    versions = [info.version for info in lh.versions()]
    assert versions == list(range(lh.version, -1, -1)), "the version chain has a gap"
    # 1 namespace + 4 tables + 12 appends: one lakehouse version each, nothing else.
    assert lh.version == 1 + WRITERS + WRITERS * APPENDS
    lake.assert_fsck_deep()


# Versions older than 2 s expire (the newest 5 stay), so compact-versions has work while the
# writers commit; small nodes so flushes and splits happen with few keys.
EXPIRING = dict(
    order=8,
    node_file_max_size_bytes=8192,
    maximum_version_age_millis=2000,
    minimum_versions_to_keep=5,
)
# gc's grace must outlast a commit (lakecore refuses less than an hour outside tests): here
# 30 s, far longer than any commit of this test, with old orphans planted so gc has work.
GC_GRACE_MILLIS = 30_000


def _plant_old_orphans(storage: Storage, local: bool) -> list[str]:
    paths = [new_node_file_path(), new_table_def_path("ns", "orphan")]
    for path in paths:
        storage.write(path, b"orphan")
        if local:
            old = time.time() - 10 * 86400
            os.utime(storage.root_uri.removeprefix("file://") + path, (old, old))
    return paths


def _iceberg_files(table: Table) -> set[str]:
    """Every metadata, manifest list, manifest and data file the table's metadata reaches."""
    files = {table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}
    for snapshot in table.metadata.snapshots:
        files.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            files.add(manifest.manifest_path)
            files.update(
                e.data_file.file_path
                for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False)
            )
    return files


def _maintenance_alongside(lake: IcebergLake, tmp_path: Path, local: bool) -> None:
    _create(lake, ["a", "b"])
    storage = Storage(lake.uri, lake.storage_options)
    planted = _plant_old_orphans(storage, local)
    stop, report = tmp_path / "stop", tmp_path / "maintenance.json"
    ctx = multiprocessing.get_context("spawn")
    maintenance = ctx.Process(
        target=maintenance_loop,
        args=(
            lake.uri,
            lake.storage_options,
            str(stop),
            str(report),
            ["flush", "compact", "gc"],
            GC_GRACE_MILLIS,
        ),
    )
    maintenance.start()
    try:
        reports = _run_writers(lake, tmp_path, ["ns.a", "ns.b"])
        time.sleep(1.0)  # let the maintenance loop finish a round after the last commit
    finally:
        stop.write_text("stop")
        maintenance.join(timeout=300)
    assert maintenance.exitcode == 0
    done = json.loads(report.read_text())
    assert done["errors"] == []
    counts = done["counts"]
    assert (
        counts.get("flush_commits", 0) > 0
        and counts.get("compact_runs", 0) > 0
        and counts.get("gc_runs", 0) > 0
    )
    if local:
        # On moto a gc round (4,096 listings) outlasts the writers, so expiry may find nothing
        # old enough there; locally it always has.
        assert counts.get("versions_expired", 0) > 0, (
            "compact-versions expired nothing: not a test of it"
        )
        # Only local files can be back-dated past the grace period.
        assert not any(storage.exists(path) for path in planted), (
            "gc did not delete the old orphans"
        )

    catalog = lake.catalog()
    for name, writers in (("a", [0, 2]), ("b", [1, 3])):
        table = catalog.load_table(f"ns.{name}")
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == _expected_ids(writers)
        _assert_every_append_once(table, reports, writers)
        missing = [path for path in _iceberg_files(table) if not table.io.new_input(path).exists()]
        assert missing == [], f"maintenance deleted Iceberg files: {missing[:3]}"
    lake.assert_fsck_deep()
    lake.assert_validates()


def test_maintenance_alongside_appenders_local(tmp_path: Path) -> None:
    _maintenance_alongside(local_lake(tmp_path, **EXPIRING), tmp_path, local=True)


@pytest.mark.s3
@pytest.mark.slow
def test_maintenance_alongside_appenders_s3(tmp_path: Path, s3_server: Any) -> None:
    _maintenance_alongside(s3_lake(s3_server, **EXPIRING), tmp_path, local=False)
