"""Table maintenance in one process (``lakecore table-maintenance``, the Spark job's oracle)
against tables pyiceberg wrote, judged by an oracle written apart from it
(``tests/iceberg_histories.py``: pyiceberg's own readers and the file system).

What a user relies on: snapshots expire by Iceberg's rules (branches and tags keep what they
reach); nothing any retained lakehouse version's table names is deleted, whichever table names
it; orphans go only when older than the grace period; an unreadable manifest stops deletion
where its table's files may lie and nowhere else; a purge waits until no retained version holds
the table, and undrop brings it back until then.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

from lakecore.core.storage import Storage
from lakecore.iceberg.expiry import CatalogCommitter
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.tables.commits import REPLANNED
from lakecore.maintenance.tables.policy import ExpiryDefaults, plan_snapshot_expiry
from lakecore.maintenance.tables.result import TableMaintenanceOptions, TableMaintenanceResult
from lakecore.maintenance.tables.run import plan_table, table_maintenance_in_process
from lakecore.maintenance.tables.versions import HeldTable, TableDefinition
from tests.iceberg_histories import (
    DAY,
    age,
    catalog_of,
    files_under,
    history,
    kept_by_icebergs_rules,
    local,
    named_by,
    new_lake,
    retained_named,
    rows,
)

# Every snapshot pyiceberg writes now is older than any maximum age at this "now".
LATER = int(time.time() * 1000) + 30 * DAY


def run(uri: str, catalog: Any, **options: Any) -> TableMaintenanceResult:
    settings = {"grace_millis": 3 * DAY, "now_millis": LATER, "override_grace": True, **options}
    chosen = TableMaintenanceOptions(**settings)
    committer = CatalogCommitter(catalog, LATER, chosen.defaults)
    return table_maintenance_in_process(Storage(uri), committer, chosen)


def warehouse_files(uri: str) -> set[str]:
    return {
        f
        for f in files_under(Path(uri) / "warehouse")
        if not f.endswith(".lakecore-warehouse.json")
    }


def test_snapshots_expire_by_icebergs_rules_and_only_what_they_alone_named_goes(
    tmp_path: Path,
) -> None:
    uri, catalog = new_lake(tmp_path / "lake")
    steps = ["append", "append", "tag:v1", "overwrite", "spec", "append-b", "branch:dev"]
    steps += ["append@dev", "append@dev", "delete", "append", "append"]
    t = history(catalog, "t", steps, **{"history.expire.min-snapshots-to-keep": "2"})
    u = history(catalog, "u", ["append", "overwrite", "overwrite"])
    before = warehouse_files(uri)
    named_before = named_by(t) | named_by(u)
    assert named_before == before  # every file is named: no orphan to begin with
    expected_kept = {
        "ns.t": kept_by_icebergs_rules(t, 2),
        "ns.u": kept_by_icebergs_rules(u, 1),
    }
    tag_rows = sorted(
        catalog.load_table("ns.t")
        .scan(snapshot_id=t.metadata.refs["v1"].snapshot_id)
        .to_arrow()["id"]
        .to_pylist()
    )

    result = run(uri, catalog)

    for name, kept in expected_kept.items():
        assert {s.snapshot_id for s in catalog.load_table(name).metadata.snapshots} == kept
    after = warehouse_files(uri)
    named = retained_named(uri, [Lakehouse.open(uri).version])
    # Nothing retained is gone; everything else under the tables' folders is (grace: all old
    # enough? no: these files are new, so only what expired snapshots named goes).
    assert named.files <= after
    # What went is exactly what only the expired snapshots named.
    assert before - after == named_before - named.files == result.chosen
    assert result.chosen
    assert (
        sorted(
            catalog.load_table("ns.t")
            .scan(snapshot_id=t.metadata.refs["v1"].snapshot_id)
            .to_arrow()["id"]
            .to_pylist()
        )
        == tag_rows
    )
    assert catalog.load_table("ns.t").scan().to_arrow().num_rows > 0
    assert result.orphans_found == 0  # every file deleted was an expired one, no grace needed


def test_a_file_another_table_names_is_never_deleted(tmp_path: Path) -> None:
    """a writes a file, then overwrites it; b adds that file: a's expiry must keep it."""
    uri, catalog = new_lake(tmp_path / "lake")
    a = history(catalog, "a", ["append"])
    shared = [task.file.file_path for task in a.scan().plan_files()]
    catalog.create_table("ns.b", a.schema()).add_files(shared)
    catalog.load_table("ns.a").overwrite(rows(range(100, 103)))

    result = run(uri, catalog)

    assert all(local(p).exists() for p in shared)
    assert any(p in result.expired and p in result.reachable for p in shared)
    assert sorted(catalog.load_table("ns.b").scan().to_arrow()["id"].to_pylist()) == [10, 11, 12]
    assert result.answers and result.to_delete > 0  # a's other expired files did go


def test_retained_lakehouse_versions_keep_what_their_tables_name(tmp_path: Path) -> None:
    """With the default retention the version before the expiry is retained: its tables'
    snapshots still scan, so their files stay; once it leaves retention they go."""
    uri, catalog = new_lake(tmp_path / "lake", latest_only=False)
    history(catalog, "t", ["append", "overwrite", "overwrite"])
    version_before = Lakehouse.open(uri).version
    old = catalog_of(uri, version=str(version_before)).load_table("ns.t")
    old_ids = {s.snapshot_id for s in old.metadata.snapshots}

    first = run(uri, catalog)
    assert first.versions_committed and first.snapshots_expired == len(old_ids) - 1
    assert first.expired_kept == first.expired_files > 0 and first.to_delete == 0
    old = catalog_of(uri, version=str(version_before)).load_table("ns.t")
    for snapshot_id in old_ids:  # every snapshot of the retained version still scans
        old.scan(snapshot_id=snapshot_id).to_arrow()

    Lakehouse.open(uri).update_settings(minimum_versions_to_keep=1, maximum_version_age_millis=0)
    second = run(uri, catalog)
    named = retained_named(uri, [Lakehouse.open(uri).version])
    assert second.to_delete > 0 and named.files <= warehouse_files(uri)
    assert second.orphans_found == second.to_delete  # nothing names them now: orphans, old enough


def test_orphans_go_only_when_older_than_the_grace_period(tmp_path: Path) -> None:
    uri, catalog = new_lake(tmp_path / "lake")
    t = history(catalog, "t", ["append"])
    data = local(t.location()) / "data"
    old, young = data / "failed-write.parquet", data / "in-flight.parquet"
    hint = local(t.location()) / "metadata" / "version-hint.text"
    for path in (old, young, hint):
        path.write_bytes(b"x")
    age(old)
    age(hint)
    outside = tmp_path / "lake" / "warehouse" / "ns" / "not-a-table" / "x.parquet"
    outside.parent.mkdir(parents=True)
    outside.write_bytes(b"x")
    age(outside)

    # Aged by the clocks, not a "now" a month ahead: the in-flight file is an hour old at most.
    dry = run(uri, catalog, dry_run=True, now_millis=None, override_grace=False)
    assert {f"file://{old}"} == dry.chosen and old.exists()
    result = run(uri, catalog, now_millis=None, override_grace=False)
    assert not old.exists() and young.exists() and hint.exists() and outside.exists()
    assert result.too_young == 1 and f"file://{young}" in result.too_young_sample


def test_a_damaged_manifest_blocks_its_tables_folders_only(tmp_path: Path) -> None:
    uri, catalog = new_lake(tmp_path / "lake")
    a = history(catalog, "a", ["append", "overwrite"])
    history(catalog, "b", ["append", "overwrite"])
    manifest = a.current_snapshot().manifests(a.io)[0].manifest_path  # type: ignore[union-attr]
    local(manifest).write_bytes(b"not avro")
    a_before = files_under(local(a.location()))

    result = run(uri, catalog)

    assert [p.path for p in result.blocked.problems] == [manifest]
    assert result.blocked.tables == {"ns.a"} and result.blocked.damaged
    # a's expiry committed (its metadata was readable: a new metadata file), nothing of a's went.
    assert a_before <= files_under(local(a.location()))
    assert result.deleted is not None and result.deleted.deleted > 0  # b's expired files did


def test_a_purge_waits_for_retention_and_undrop_brings_the_table_back(tmp_path: Path) -> None:
    uri, catalog = new_lake(tmp_path / "lake", latest_only=False)
    t = history(catalog, "t", ["append", "append"])
    expected = sorted(t.scan().to_arrow()["id"].to_pylist())
    catalog.purge_table("ns.t")

    waiting = run(uri, catalog)
    assert [m.name for m in waiting.marks] == ["ns.t"] and not waiting.marks_due
    assert files_under(local(t.location()))
    restored = catalog.undrop_table("ns.t")
    assert restored is not None
    assert sorted(restored.scan().to_arrow()["id"].to_pylist()) == expected
    assert not any("purge" in k for k in Lakehouse.open(uri).lakehouse_def.properties)

    catalog.purge_table("ns.t")
    Lakehouse.open(uri).update_settings(minimum_versions_to_keep=1, maximum_version_age_millis=0)
    done = run(uri, catalog)
    assert [m.name for m in done.marks_finished] == ["ns.t"]
    assert not files_under(local(t.location()))
    with pytest.raises(NoSuchTableError, match="no retained version holds"):
        catalog.undrop_table("ns.t")
    with pytest.raises(NoSuchTableError, match="version 1 is not retained"):
        catalog.undrop_table("ns.t", version=1)


def test_a_table_registered_at_a_purged_tables_files_keeps_them(tmp_path: Path) -> None:
    """The REST trial's race: a register of a purged table's metadata file, landing while the
    purge deleted, lost the registered table its files (503 for good). A purge now only marks;
    the job deletes what no retained version of any table names, and the registered table
    names them."""
    uri, catalog = new_lake(tmp_path / "lake")
    b = history(catalog, "b", ["append", "append"])
    expected = sorted(b.scan().to_arrow()["id"].to_pylist())
    catalog.purge_table("ns.b")
    catalog.register_table("ns.a", b.metadata_location)

    files = files_under(local(b.location()))

    done = run(uri, catalog)

    assert [m.name for m in done.marks] == ["ns.b"] and not done.marks_due
    assert files_under(local(b.location())) == files
    assert sorted(catalog.load_table("ns.a").scan().to_arrow()["id"].to_pylist()) == expected
    # Once no retained version holds that table under any name, the mark's time has come.
    catalog.drop_table("ns.a")
    assert [m.name for m in run(uri, catalog).marks_finished] == ["ns.b"]


def test_a_table_that_changed_meanwhile_is_planned_again_never_overwritten(
    tmp_path: Path,
) -> None:
    _, catalog = new_lake(tmp_path / "lake")
    t = history(catalog, "t", ["append", "append", "append"])
    defaults = ExpiryDefaults()
    held = HeldTable(0, "ns", "t", "")
    definition = TableDefinition("", "ICEBERG", "MANAGED", t.metadata_location, True)
    planned = plan_table(held, definition, t.metadata, None, LATER, defaults)
    assert not isinstance(planned, str) and planned is not None
    catalog.load_table("ns.t").append(rows([999]))  # another writer, after the plan

    answer = CatalogCommitter(catalog, LATER, defaults).commit_expirations([planned])

    assert [a.state for a in answer.answers] == [REPLANNED]
    table = catalog.load_table("ns.t")
    assert 999 in table.scan().to_arrow()["id"].to_pylist()
    assert len(table.metadata.snapshots) == 1  # the writer's snapshot, the others expired
    # The expiry the committer made is Iceberg's on the new metadata, not the stale plan.
    assert plan_snapshot_expiry(table.metadata, LATER, defaults).snapshot_ids == ()
    with pytest.raises(CommitFailedException):
        catalog.commit_tables([(("ns", "t"), *_stale_change(planned))])


def _stale_change(planned: Any) -> tuple[Any, Any]:
    from lakecore.maintenance.tables.policy import expiry_change

    return expiry_change(
        planned.table_uuid, planned.refs, planned.partition_statistics, planned.expiry
    )


def test_deletes_judge_every_file_again_and_count_what_they_deleted(tmp_path: Path) -> None:
    from lakecore.maintenance.tables.deletes import LOCAL_DELETE_THREADS, delete_table_files
    from lakecore.maintenance.tables.rules import DeletionRules

    warehouse = tmp_path / "warehouse"
    mine = warehouse / "ns" / "t-1"
    (mine / "data").mkdir(parents=True)
    theirs = warehouse / "ns" / "u-2"
    theirs.mkdir(parents=True)
    count = 4 * LOCAL_DELETE_THREADS + 3  # several threads' worth, unevenly split
    files = [mine / "data" / f"{i:03d}.parquet" for i in range(count)]
    for f in files:
        f.write_bytes(b"x" * 10)
    (theirs / "other.parquet").write_bytes(b"y")
    root = f"file://{mine}"
    rules = DeletionRules(warehouse=f"file://{warehouse}", lakehouse_root=f"file://{tmp_path}/lake")
    items = [(f"file://{f}", 10, [root]) for f in files]
    items.append((f"file://{theirs}/other.parquet", 1, [root]))  # not under its owner's folder
    items.append((f"file://{mine}/data/gone.parquet", 5, [root]))  # already gone

    outcome = delete_table_files(Storage(f"file://{warehouse}/"), rules, items, 1000)

    assert outcome.deleted == count and outcome.bytes_freed == 10 * count
    assert outcome.already_gone == 1 and not outcome.errors
    assert [r.split(" (")[1] for r in outcome.refused] == ["outside its table's own folders)"]
    assert not any(f.exists() for f in files) and (theirs / "other.parquet").exists()
