"""Lakehouse lifecycle: create/open, time travel, rollback, exports, expiry, bad input."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from lakecore.core.locations import LATEST_HINT_FILE_NAME, root_node_file_name
from lakecore.core.storage import Storage
from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    InvalidLakehouseDefError,
    InvalidLocationError,
    InvalidNameError,
    NotFoundError,
    UnsupportedFormatVersionError,
    VersionExpiredError,
)
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version


def _lake(tmp_path: Path, **kw) -> Lakehouse:  # type: ignore[no-untyped-def]
    return Lakehouse.create(str(tmp_path / "lake"), name="t", **kw)


def test_create_writes_version_zero_and_refuses_a_second_create(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    assert lh.version == 0 and lh.list_namespaces() == []
    assert (tmp_path / "lake" / root_node_file_name(0)).exists()
    assert (tmp_path / "lake" / "_latest_hint.txt").read_text() == "0"
    with pytest.raises(AlreadyExistsError):
        _lake(tmp_path)


def test_open_missing_lakehouse_is_a_clear_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no lakehouse"):
        Lakehouse.open(str(tmp_path / "nothing"))


def test_invalid_definitions_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(InvalidLakehouseDefError, match="node_file_max_size_bytes"):
        _lake(tmp_path, order=128, node_file_max_size_bytes=1000)
    with pytest.raises(UnsupportedFormatVersionError):
        _lake(tmp_path, major_version=1)
    with pytest.raises(InvalidLocationError):
        Lakehouse.create("s3://bucket/../other")
    assert not (tmp_path / "lake").exists()


def test_invalid_names_are_typed_errors_and_abort_the_transaction(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    for bad in ["", "has space", "tab\there", "del\x7f", "x" * 101, "é" * 51]:
        with pytest.raises(InvalidNameError), lh.transaction() as tx:
            tx.create_namespace(bad)
    assert lh.version == 0 and Lakehouse.open(lh.uri).version == 0


def test_time_travel_by_version_and_timestamp(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    stamps = []
    for i in range(5):
        with lh.transaction() as tx:
            tx.create_namespace(f"ns{i}")
        stamps.append(lh.created_at_millis)
        time.sleep(0.005)
    assert lh.at_version(3).list_namespaces() == ["ns0", "ns1", "ns2"]
    assert lh.as_of(stamps[1]).version == 2
    assert lh.as_of(stamps[1] + 1).version == 2
    assert lh.as_of(stamps[-1] + 10_000).version == 5
    with pytest.raises(NotFoundError):
        lh.at_version(99)


def test_time_travel_past_an_expired_version_is_a_clear_error(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    for i in range(4):
        with lh.transaction() as tx:
            tx.create_namespace(f"ns{i}")
    Storage(lh.uri).delete([root_node_file_name(0), root_node_file_name(1)])
    with pytest.raises(VersionExpiredError, match="oldest retained version is 2"):
        lh.at_version(1)
    with pytest.raises(VersionExpiredError):
        lh.as_of(0)
    assert [v.version for v in lh.versions()] == [4, 3, 2]


def _stamped_lake(tmp_path: Path, commits: int) -> tuple[Lakehouse, list[int]]:
    """A lakehouse with versions 0..commits, each created at least 5 ms after the one before;
    ``stamps[v]`` is version v's creation time."""
    lh = _lake(tmp_path)
    stamps = [lh.created_at_millis]
    for i in range(commits):
        time.sleep(0.005)
        with lh.transaction() as tx:
            tx.create_namespace(f"ns{i}")
        stamps.append(lh.created_at_millis)
    return lh, stamps


def test_time_travel_steps_over_a_damaged_root(tmp_path: Path) -> None:
    """A truncated root that a repair rolled forward past (found by a new-user trial): --as-of
    stopped at it with exit 6 and "run repair rollback", which had been run already."""
    lh, stamps = _stamped_lake(tmp_path, 6)
    (tmp_path / "lake" / root_node_file_name(4)).write_bytes(b"truncated")
    lh.rollback(to_version=3)  # version 7: the content of 3
    assert lh.as_of(stamps[2]).version == 2  # version 3 is younger: so is 4, and 2 is the answer
    assert lh.as_of(stamps[5]).version == 5 and lh.as_of(stamps[6]).version == 6
    # 3 is old enough, but the damaged 4 may have been too: the answer cannot be told.
    with pytest.raises(
        VersionExpiredError,
        match=r"version 3 \(created .*\) is the newest readable one before "
        r"that time, but version 4, after it, is missing or damaged .*`--version 3` reads version 3",
    ):
        lh.as_of(stamps[3] + 1)


def test_time_travel_to_before_damaged_bottom_roots_says_they_cannot_be_read(
    tmp_path: Path,
) -> None:
    """Roots 0 and 1 unreadable: a time between 1 and 2 was answered "no retained version ...
    the oldest retained version 2", though 0 and 1 are retained and one of them is the answer
    (found by a review)."""
    lh, stamps = _stamped_lake(tmp_path, 4)
    for version in (0, 1):
        (tmp_path / "lake" / root_node_file_name(version)).write_bytes(b"garbage")
    with pytest.raises(
        VersionExpiredError,
        match=r"no readable version was created at or before .*: the oldest "
        r"readable one is 2 \(created .*\), and the root files of versions 0..1 under it cannot be read",
    ):
        lh.as_of(stamps[1] + 1)
    assert lh.as_of(stamps[2]).version == 2


def test_time_travel_across_dropped_versions_says_what_it_can_and_cannot_tell(
    tmp_path: Path,
) -> None:
    """Root files deleted in the middle of the log (``repair drop-damaged``, or expiry below an
    export's pin): by number the error said "expired by version compaction" though older
    versions were there; by time the walk stopped at the gap and said "the oldest retained
    version is 6" with 0..2 still retained (found by a new-user trial)."""
    lh, stamps = _stamped_lake(tmp_path, 7)
    Storage(lh.uri).delete([root_node_file_name(v) for v in (3, 4, 5)])
    with pytest.raises(
        VersionExpiredError,
        match=r"version 4 is missing from the log \(no root file between "
        r"versions 2 and 6\): it was dropped as damaged by `repair drop-damaged`, or expired by "
        r"version compaction while an older version was kept",
    ):
        lh.at_version(4)
    assert lh.at_version(2).version == 2
    assert lh.as_of(stamps[1]).version == 1  # below the gap, and told for sure: 2 is younger
    assert lh.as_of(stamps[6]).version == 6 and lh.as_of(stamps[7] + 5).version == 7
    with pytest.raises(
        VersionExpiredError,
        match=r"version 2 .* but versions 3..5, after it, are missing or damaged",
    ):
        lh.as_of(stamps[2] + 1)
    with pytest.raises(NotFoundError, match="the lakehouse did not exist yet"):
        lh.as_of(stamps[0] - 1)


def test_without_a_hint_the_latest_version_is_found_above_a_gap_and_a_commit_lands_on_top(
    tmp_path: Path,
) -> None:
    """Versions 0-5, root 3 dropped (``repair drop-damaged``), the hint lost: the probe from
    version 0 stopped at the gap, said the latest was 2, and a commit took version 3, under 4
    and 5, where no reader found it (found by a review)."""
    lh, _ = _stamped_lake(tmp_path, 5)
    storage = Storage(lh.uri)
    storage.delete([root_node_file_name(3), LATEST_HINT_FILE_NAME])
    reopened = Lakehouse.open(lh.uri)
    assert reopened.version == 5
    with reopened.transaction() as tx:
        tx.create_namespace("after-the-gap")
    assert reopened.version == 6 and not storage.exists(root_node_file_name(3))
    assert "after-the-gap" in Lakehouse.open(lh.uri).list_namespaces()


def test_a_missing_definition_is_damage_unless_its_version_expired_meanwhile(
    tmp_path: Path,
) -> None:
    from lakecore.core.view import clear_definition_cache
    from lakecore.errors import ExitCode, MissingDefinitionError

    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table("ns", "old", columns=[{"id": 1, "name": "id", "type": "INT8"}])
    with lh.transaction() as tx:
        tx.drop_table("ns", "old")
        tx.create_table("ns", "new", columns=[{"id": 1, "name": "id", "type": "INT8"}])
    old_view = lh.at_version(1)
    (old_def,) = (tmp_path / "lake").rglob("*-table-old-ns-*.binpb")
    # What compact-versions does when version 1 expires: its root first, then what only it reached.
    Storage(lh.uri).delete([root_node_file_name(1)])
    old_def.unlink()
    clear_definition_cache()  # as a process that had not read it: files deleted behind its back
    with pytest.raises(
        VersionExpiredError, match="version 1 was expired by version compaction while"
    ):
        old_view.load_table("ns", "old")
    # The latest version names a file nobody may delete: its loss is damage (exit 6).
    (new_def,) = (tmp_path / "lake").rglob("*-table-new-ns-*.binpb")
    new_def.unlink()
    clear_definition_cache()
    with pytest.raises(
        MissingDefinitionError,
        match=r"table ns\.new: its definition file .* is missing, though "
        r"version 2 names it",
    ) as caught:
        Lakehouse.open(lh.uri).load_table("ns", "new")
    assert caught.value.exit_code == ExitCode.DAMAGED
    with pytest.raises(MissingDefinitionError), Lakehouse.open(lh.uri).transaction() as tx:
        tx.update_table("ns", "new", properties={"a": "b"})


def test_latest_version_survives_a_stale_or_garbage_hint(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    for i in range(3):
        with lh.transaction() as tx:
            tx.create_namespace(f"ns{i}")
    hint = tmp_path / "lake" / "_latest_hint.txt"
    hint.write_text("1")
    assert Lakehouse.open(lh.uri).version == 3
    hint.write_text("not a number")
    assert Lakehouse.open(lh.uri).version == 3
    hint.unlink()
    assert Lakehouse.open(lh.uri).version == 3
    # The hinted root was expired: list and probe from the largest retained root.
    hint.write_text("0")
    Storage(lh.uri).delete([root_node_file_name(0)])
    assert Lakehouse.open(lh.uri).version == 3


def test_rollback_rolls_forward(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        tx.create_namespace("a")
    with lh.transaction() as tx:
        tx.create_namespace("b")
    new = lh.rollback(to_version=1)
    # Two versions: the pin of version 1 (3), then the rolling forward that takes it back (4).
    assert new == 4 and lh.list_namespaces() == ["a"]
    info = lh.versions()[0]
    assert info.version == 4 and info.rollback_from_version == 2  # asked on version 2
    assert lh.at_version(3).lakehouse_def.exported_snapshots  # the pin
    assert not lh.lakehouse_def.exported_snapshots
    assert lh.at_version(2).list_namespaces() == ["a", "b"]


def test_a_rollback_to_the_content_the_latest_has_commits_nothing(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        tx.create_namespace("a")
    assert lh.rollback_if_needed(to_version=1) == (1, False)
    assert lh.rollback(to_version=0) == 3  # the pin (2), the rolling forward (3)
    # Version 3 has version 0's content now: rolling back to 0 again has nothing to do.
    assert lh.rollback_if_needed(to_version=0) == (3, False)
    assert Lakehouse.open(lh.uri).version == 3
    assert lh.rollback_if_needed(to_version=1) == (5, True)
    assert lh.list_namespaces() == ["a"]


def test_rollback_refuses_to_discard_a_concurrent_commit(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        tx.create_namespace("a")
    other = Lakehouse.open(lh.uri)
    with other.transaction() as tx:
        tx.create_namespace("b")
    with pytest.raises(CommitConflictError, match="rerun the rollback"):
        lh.rollback(to_version=0)
    assert Lakehouse.open(lh.uri).list_namespaces() == ["a", "b"]


@pytest.mark.parametrize("mode", ["minimal", "partial", "full"])
def test_export_modes_copy_a_readable_snapshot(tmp_path: Path, mode: str) -> None:
    lh = Lakehouse.create(
        str(tmp_path / "lake"),
        order=4,
        node_file_max_size_bytes=16384,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(40):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i:02d}", properties={"i": str(i)})
    exported_version = lh.version
    recorded = lh.export_snapshot("snap", mode=mode, target=str(tmp_path / "export"))  # type: ignore[arg-type]
    assert recorded == exported_version + 1
    assert lh.lakehouse_def.exported_snapshots == {"snap": root_node_file_name(exported_version)}
    # Later changes in the source do not show in the export.
    with lh.transaction() as tx:
        tx.drop_table("ns", "t00")
    copy = Lakehouse.open(str(tmp_path / "export"))
    assert copy.list_tables("ns") == [f"t{i:02d}" for i in range(40)]
    assert copy.load_table("ns", "t07").properties["i"] == "7"
    assert check_version(copy, deep=True).ok
    copied = {p.name for p in (tmp_path / "export").rglob("*") if p.is_file()}
    if mode == "full":
        assert any(name.endswith(".binpb") and "table-" in name for name in copied)
    else:
        assert not any("table-" in name for name in copied)
    with pytest.raises(AlreadyExistsError):
        lh.export_snapshot("snap")


@pytest.mark.parametrize("mode", ["minimal", "partial", "full"])
def test_gc_on_an_export_and_its_source_keeps_both_readable(tmp_path: Path, mode: str) -> None:
    """gc of the copy treats the source's files as not its own (neither walked for deletion nor
    refused as forged pointers); gc of the source keeps what the pinned export reaches."""
    from lakecore import clear_caches
    from lakecore.maintenance.expire import expire_in_process
    from lakecore.maintenance.gc import gc_in_process

    source = Lakehouse.create(
        str(tmp_path / "lake"),
        order=4,
        node_file_max_size_bytes=16384,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
        minimum_versions_to_keep=1,
    )
    with source.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(30):
        with source.transaction() as tx:
            tx.create_table("ns", f"t{i:02d}")
    exported = source.version
    source.export_snapshot("snap", mode=mode, target=str(tmp_path / "export"))  # type: ignore[arg-type]
    for i in range(10):  # the source moves on: the exported tables are dropped there
        with source.transaction() as tx:
            tx.drop_table("ns", f"t{i:02d}")

    def files(lake: str) -> set[str]:
        return {str(p.relative_to(tmp_path)) for p in (tmp_path / lake).rglob("*") if p.is_file()}

    export_files, source_files = files("export"), files("lake")
    future = int(time.time() * 1000) + 10**9
    # Expire every source version but the latest and the pinned one, then collect both lakes.
    expired = expire_in_process(Storage(str(tmp_path / "lake")), now_millis=future)
    assert len(expired.plan.expired) > 30 and exported not in expired.plan.expired
    for lake in ("export", "lake"):
        clear_caches()
        result = gc_in_process(Storage(str(tmp_path / lake)), now_millis=future, grace_millis=0)
        if lake == "export":
            assert result.deleted.deleted_paths == [], "gc deleted files of a fresh export copy"
    assert files("export") == export_files
    assert files("lake") < source_files, "expiry freed nothing: not a test of what the export pins"
    clear_caches()
    copy = Lakehouse.open(str(tmp_path / "export"))
    assert copy.list_tables("ns") == [f"t{i:02d}" for i in range(30)]
    assert check_version(copy, deep=True).ok
    assert check_version(Lakehouse.open(str(tmp_path / "lake")), deep=True).ok


def test_a_reader_refuses_a_pointer_out_of_the_root(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    view = lh.at_version(1)
    for location in [
        "../escape.binpb",
        "/etc/passwd",
        f"file://{tmp_path}/other/x.binpb",
        "s3://other/x",
    ]:
        with pytest.raises(InvalidLocationError):
            view.read_location(location)


def test_transaction_commits_nothing_when_empty(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        assert tx.list_namespaces() == []
    assert tx.committed_version == 0 and Lakehouse.open(lh.uri).version == 0


def test_table_updates_merge_properties_and_can_replace_the_schema(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table(
            "ns",
            "t",
            columns=[{"id": 1, "name": "a", "type": "INT4"}],
            properties={"x": "1", "y": "2"},
        )
    with lh.transaction() as tx:
        tx.update_table(
            "ns",
            "t",
            properties={"y": "3"},
            remove_properties=["x"],
            columns=[
                {"id": 1, "name": "a", "type": "INT8"},
                {"id": 2, "name": "b", "type": "VARCHAR"},
            ],
        )
    table = lh.load_table("ns", "t")
    assert dict(table.properties) == {"y": "3"}
    assert [(c.id, c.name) for c in table.schema.columns] == [(1, "a"), (2, "b")]
    assert table.table_format == "ICEBERG" and table.table_type == "MANAGED"


def test_memory_and_file_uris_behave_alike() -> None:
    lh = Lakehouse.create(f"memory://alike/{uuid.uuid4()}")
    with lh.transaction() as tx:
        tx.create_namespace("a")
    assert Lakehouse.open(lh.uri).list_namespaces() == ["a"]
