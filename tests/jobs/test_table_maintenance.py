"""The table-maintenance job on the session's local[2] SparkSession (and once on moto's S3):
the same sets as the in-process run, and what it deletes is exactly what the oracle
(``tests/iceberg_histories.py``, pyiceberg's readers and the file system) says nothing retained
names.

A hook for a comparison with Iceberg's own Spark procedures (``expire_snapshots``,
``remove_orphan_files``) on the same tables, once Iceberg's Spark runtime is in the tests:
``iceberg_sets`` computes what this job would expire and delete for one table, by Iceberg's
semantics alone (the table's current metadata; no other table, no lakehouse version), from the
same units the job runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.table_maintenance_job import main as table_maintenance_main
from lakecore.core.storage import Storage
from lakecore.iceberg.expiry import CatalogCommitter
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.tables.graph import FileGraph, Unit
from lakecore.maintenance.tables.named import PathForm
from lakecore.maintenance.tables.policy import ExpiryDefaults, plan_snapshot_expiry
from lakecore.maintenance.tables.result import TableMaintenanceOptions
from lakecore.maintenance.tables.run import table_maintenance_in_process
from tests.conftest import S3TestServer
from tests.iceberg_histories import (
    DAY,
    age,
    files_under,
    history,
    local,
    named_by,
    new_lake,
    retained_named,
)

pytestmark = pytest.mark.spark
RunJob = Callable[..., tuple[int, dict[str, Any]]]
LATER = int(time.time() * 1000) + 30 * DAY
NOW_ARGS = ["--now", str(LATER), "--i-understand-grace-risk"]


def iceberg_sets(table: Any, now_millis: int, defaults: ExpiryDefaults) -> dict[str, set[str]]:
    """For one table, by Iceberg's semantics alone: the snapshots that expire, the files only
    they name (``expired``: what ``expire_snapshots`` deletes), and the files under the table's
    location its current metadata does not name (``orphans``, before the grace period: what
    ``remove_orphan_files`` considers). The hook for the comparison with Iceberg's procedures."""
    form = PathForm()
    graph = FileGraph(form=form)
    graph.read(table.io, [table.metadata_location])
    expiry = plan_snapshot_expiry(table.metadata, now_millis, defaults)
    kept = {s.snapshot_id for s in table.metadata.snapshots} - set(expiry.snapshot_ids)
    reachable = graph.reach([Unit(table.metadata_location, frozenset(kept))]).files
    expired = graph.reach([Unit(table.metadata_location, frozenset(expiry.snapshot_ids))]).files
    listed = {form(p) for p in files_under(local(table.location()))}
    return {
        "expired_snapshots": {str(s) for s in expiry.snapshot_ids},
        "expired": {p for p in expired if p not in reachable and not p.endswith(".metadata.json")},
        "orphans": listed - set(reachable) - set(expired),
    }


def _data_files(table: Any) -> list[Any]:
    return [task.file for task in table.scan().plan_files()]


def build(root: Path) -> tuple[str, Any]:
    """Two tables: t (a tag, a branch, a new partition spec, a delete), u (overwrites, a file of
    t's added, an old orphan and a metadata file of a commit that lost its race)."""
    uri, catalog = new_lake(root)
    history(catalog, "t", ["append", "tag:v1", "append", "spec", "append-b", "branch:dev"])
    t2 = history(catalog, "t2", ["append", "overwrite"])
    u = history(catalog, "u", ["append", "overwrite", "overwrite"])
    shared = [task.file.file_path for task in t2.scan().plan_files()]
    catalog.load_table("ns.u").add_files(shared)
    # t2 replaces its file: only t2's expired snapshot and u name it now.
    catalog.load_table("ns.t2").overwrite(t2.scan().to_arrow())
    junk = local(u.location()) / "data" / "failed-write.parquet"
    junk.write_bytes(b"x")
    age(junk)
    lost = local(u.location()) / "metadata" / "00099-lost-race.metadata.json"
    lost.write_text("{}")
    age(lost)
    return uri, catalog


def test_the_job_deletes_what_the_oracle_and_the_in_process_run_say(
    tmp_path: Path, run_job: RunJob
) -> None:
    uri, catalog = build(tmp_path / "lake")
    tables = {name: catalog.load_table(f"ns.{name}") for name in ("t", "t2", "u")}
    before = files_under(Path(uri) / "warehouse")
    named_before = set().union(*(named_by(t) for t in tables.values()))
    hook = {name: iceberg_sets(t, LATER, ExpiryDefaults()) for name, t in tables.items()}

    code, dry = run_job(table_maintenance_main, "--lakehouse", uri, *NOW_ARGS, "--dry-run")
    assert code == 0, dry.get("error")
    options = TableMaintenanceOptions(
        grace_millis=3 * DAY, now_millis=LATER, override_grace=True, dry_run=True
    )
    oracle = table_maintenance_in_process(
        Storage(uri), CatalogCommitter(catalog, LATER, options.defaults), options
    )
    for key, value in {
        "files_to_delete": oracle.to_delete,
        "expired_files": oracle.expired_files,
        "expired_files_still_named": oracle.expired_kept,
        "orphans_found": oracle.orphans_found,
        "snapshots_expired": oracle.snapshots_expired,
        "reachable_files": oracle.reachable_files,
    }.items():
        assert dry["counts"][key] == value, key
    assert set(dry["samples"]["would_delete"]) == oracle.chosen  # under the sample's cap here
    assert files_under(Path(uri) / "warehouse") == before  # a dry run deletes nothing

    old_orphans = {
        f"file://{p}"
        for p in local(tables["u"].location()).rglob("*")
        if "lost" in p.name or "failed" in p.name
    }
    code, report = run_job(table_maintenance_main, "--lakehouse", uri, *NOW_ARGS)
    assert code == 0, report.get("error")
    after = files_under(Path(uri) / "warehouse")
    retained = retained_named(uri, [Lakehouse.open(uri).version])
    assert retained.files <= after
    assert before - after == (named_before - retained.files) | old_orphans
    assert report["counts"]["files_deleted"] == len(before - after)
    shared = {f.file_path for f in _data_files(catalog.load_table("ns.u")) if "/t2-" in f.file_path}
    assert shared and shared <= after  # t2's file that u added: kept, though t2 expired it
    # The hook (Iceberg's semantics, one table alone) agrees but for the file u names: Iceberg's
    # expire_snapshots on t2 would delete it; the lakehouse-wide anti-join keeps it.
    assert shared <= hook["t2"]["expired"]
    assert hook["t2"]["expired"] - shared <= before - after


def test_the_job_stops_where_a_manifest_cannot_be_read(tmp_path: Path, run_job: RunJob) -> None:
    uri, catalog = new_lake(tmp_path / "lake")
    a = history(catalog, "a", ["append", "overwrite"])
    b = history(catalog, "b", ["append", "overwrite"])
    manifest = a.current_snapshot().manifests(a.io)[0].manifest_path  # type: ignore[union-attr]
    local(manifest).write_bytes(b"damaged")
    a_before, b_before = files_under(local(a.location())), files_under(local(b.location()))

    code, report = run_job(table_maintenance_main, "--lakehouse", uri, *NOW_ARGS)

    assert code == 6 and report["status"] == "failed"
    assert manifest in report["error"] and "ns.a" in report["error"]
    assert a_before <= files_under(local(a.location()))
    assert b_before - files_under(local(b.location()))  # b's expired files went all the same
    assert report["counts"]["blocked_tables"] == 1


@pytest.mark.s3
def test_the_job_on_s3(
    s3_server: S3TestServer, run_job: RunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.iceberg.conftest import s3_lake

    # The executors delete here (a run this small deletes on the driver otherwise).
    monkeypatch.setattr("jobs.table_maintenance_job.DRIVER_DELETE_MAX_FILES", 0)

    lake = s3_lake(s3_server, minimum_versions_to_keep=1, maximum_version_age_millis=0)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    t = history(catalog, "t", ["append", "overwrite", "append"])
    catalog.create_table("ns.gone", t.schema()).append(t.scan().to_arrow())
    gone = catalog.load_table("ns.gone")
    catalog.purge_table("ns.gone")
    client = s3_server.client()
    bucket = s3_server.bucket
    prefix = lake.properties["warehouse"].removeprefix(f"s3://{bucket}/")

    def keys() -> set[str]:
        found = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        return {f"s3://{bucket}/{o['Key']}" for o in found}

    before = keys()
    code, report = run_job(
        table_maintenance_main, "--lakehouse", lake.uri, *s3_server.job_args(), *NOW_ARGS
    )
    assert code == 0, report.get("error")
    after = keys()
    assert not any(k.startswith(gone.location() + "/") for k in after)
    assert report["counts"]["purge_marks_finished"] == 1
    retained = named_by(catalog.load_table("ns.t"))
    assert retained <= after and before - after
    assert sorted(catalog.load_table("ns.t").scan().to_arrow()["id"].to_pylist())


def test_an_unsafe_grace_period_is_refused_before_anything_runs(
    tmp_path: Path, run_job: RunJob
) -> None:
    uri, _ = new_lake(tmp_path / "lake")
    code, report = run_job(table_maintenance_main, "--lakehouse", uri, "--older-than", "10m")
    assert code == 2 and not report  # refused as the command line is read: no report, no run
    code, report = run_job(table_maintenance_main, "--lakehouse", uri)
    assert code == 0 and report["status"] == "noop"
    assert json.dumps(report)  # plain JSON


def test_a_lakehouse_without_iceberg_tables_ends_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the DAG's end-to-end test: the noop started a Spark application (a driver and
    executors on the cluster) to find nothing to do, because its first stage asked whether the
    session was a Connect one. The retained versions are read on the driver alone now."""
    import jobs.context

    def no_spark(self: Any) -> Any:
        raise AssertionError("the job started Spark")

    monkeypatch.setattr(jobs.context.JobContext, "spark", property(no_spark))
    lake = str(tmp_path / "lake")
    Lakehouse.create(lake)
    written = tmp_path / "report.json"
    assert table_maintenance_main(["--lakehouse", lake, "--report", str(written)]) == 0
    report = json.loads(written.read_text())
    assert report["status"] == "noop" and "no Iceberg table" in report["details"]["noop_reason"]
