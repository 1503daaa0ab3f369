"""Bad input gives pyiceberg's own exception types carrying lakecore's message; a catalog
opened at an old lakehouse version loads every table at its old snapshot and refuses changes;
lakecore's gc never touches Iceberg files, whether the warehouse is inside the lakehouse root
or outside it."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchIcebergTableError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ValidationError,
)

from lakecore.core.locations import classify_path, new_node_file_path, new_table_def_path
from lakecore.core.storage import Storage
from lakecore.errors import LakecoreError
from lakecore.iceberg import LakecoreCatalog, ReadOnlyCatalogError
from lakecore.lakehouse.group_commit import BATCH_ATTEMPTS
from lakecore.maintenance.gc import gc_in_process
from tests.iceberg.conftest import RETRY_PROPERTIES, SCHEMA, SPEC, RacingCatalog, local_lake, rows


def _carries_lakecore_message(exc: BaseException) -> None:
    cause = exc.__cause__
    assert isinstance(cause, LakecoreError), (
        f"{type(exc).__name__} was not translated from a lakecore error"
    )
    # pyiceberg's own wording may come first (issue 38); lakecore's detail follows it.
    assert str(exc).endswith(str(cause))


def test_bad_input_raises_pyiceberg_types_with_lakecore_messages(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", SCHEMA)
    catalog.create_table("ns.u", SCHEMA)

    with pytest.raises(NoSuchNamespaceError, match="'nope'") as unknown:
        catalog.load_namespace_properties("nope")
    _carries_lakecore_message(unknown.value)
    with pytest.raises(NoSuchNamespaceError, match="'nope'") as unknown:
        catalog.create_table("nope.t", SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nope")
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace("nope")
    with pytest.raises(NamespaceAlreadyExistsError, match="already exists") as duplicate_ns:
        catalog.create_namespace("ns")
    _carries_lakecore_message(duplicate_ns.value)
    with pytest.raises(NamespaceNotEmptyError, match="still holds 2 table") as not_empty:
        catalog.drop_namespace("ns")
    _carries_lakecore_message(not_empty.value)

    with pytest.raises(TableAlreadyExistsError, match=r"ns\.t already exists") as duplicate:
        catalog.create_table("ns.t", SCHEMA)
    _carries_lakecore_message(duplicate.value)
    with pytest.raises(TableAlreadyExistsError, match=r"ns\.u already exists") as onto:
        catalog.rename_table("ns.t", "ns.u")
    _carries_lakecore_message(onto.value)
    with pytest.raises(NoSuchTableError, match=r"ns\.gone") as missing:
        catalog.rename_table("ns.gone", "ns.v")
    _carries_lakecore_message(missing.value)
    with pytest.raises(NoSuchTableError) as missing:
        catalog.drop_table("ns.gone")
    _carries_lakecore_message(missing.value)

    with pytest.raises(ValidationError, match="control characters, space and DEL") as invalid:
        catalog.create_table("ns.bad name", SCHEMA)
    _carries_lakecore_message(invalid.value)
    with pytest.raises(ValidationError, match="control characters") as invalid:
        catalog.create_namespace("bad\tns")
    _carries_lakecore_message(invalid.value)
    with pytest.raises(ValidationError, match="control characters"):
        catalog.rename_table("ns.t", "ns.bad name")
    assert not catalog.table_exists("ns.bad name")  # no table can have it: no error
    with pytest.raises(ValidationError, match=r"level 'a\.b' holds '\.'"):
        catalog.create_namespace(("a.b", "c"))

    outside = tmp_path / "elsewhere" / "metadata" / "00000-x.metadata.json"
    with pytest.raises(ValidationError, match="outside the warehouse") as escape:
        catalog.register_table("ns.reg", f"file://{outside}")
    _carries_lakecore_message(escape.value)
    with pytest.raises(ValidationError, match="outside the warehouse"):
        catalog.create_table("ns.elsewhere", SCHEMA, location=f"file://{tmp_path}/elsewhere")
    with pytest.raises(ValidationError, match="not qualified"):
        catalog.create_table("ns.sneaky", SCHEMA, location=f"{catalog.warehouse}/../../elsewhere")
    assert sorted(catalog.list_tables("ns")) == [("ns", "t"), ("ns", "u")]

    assert catalog.list_views("ns") == []
    with pytest.raises(NoSuchViewError, match=r"View does not exist: ns\.v"):
        catalog.load_view("ns.v")
    with pytest.raises(NoSuchViewError, match="has no namespace"):
        catalog.load_view("v")

    # A lakecore table created without Iceberg metadata is not an Iceberg table.
    lh = lake.open()
    with lh.transaction() as tx:
        tx.create_table("ns", "plain")
    with pytest.raises(NoSuchIcebergTableError, match="no Iceberg metadata"):
        catalog.load_table("ns.plain")
    lake.assert_fsck_deep()


def test_no_lakehouse_at_the_uri_names_the_command_that_makes_one(tmp_path: Path) -> None:
    """It named `lakecore create`, which does not exist (a new-user trial)."""
    with pytest.raises(
        LakecoreError, match=r"there is no lakehouse at .*: create one \(`lakecore init`"
    ):
        LakecoreCatalog("py", uri=str(tmp_path / "nolake"))
    assert not (tmp_path / "nolake").exists()


@pytest.mark.parametrize("warehouse", ["", "_warehouse", ".hidden", "0101", "0101/0011/1100"])
def test_a_warehouse_in_lakecore_directories_is_refused(tmp_path: Path, warehouse: str) -> None:
    lake = local_lake(tmp_path)
    with pytest.raises(ValidationError, match=r"lakehouse root itself|name lakecore uses"):
        lake.catalog(warehouse=f"file://{lake.uri}/{warehouse}".rstrip("/"))


def test_a_concurrent_change_is_commit_failed_and_pyiceberg_retries(tmp_path: Path) -> None:
    """Another catalog commits to the table between this commit's read and its lakehouse
    commit. Nothing is ever lost, and the losing metadata files are never referenced."""
    lake = local_lake(tmp_path)
    other = lake.catalog()
    other.create_namespace("ns")
    other.create_table("ns.t", SCHEMA, properties=RETRY_PROPERTIES)
    racing = RacingCatalog("racing", uri=lake.uri)
    mine = racing.load_table("ns.t")

    ids = itertools.count()
    others: list[int] = []  # one a window: each is a staging that lost

    def other_appends_one_row() -> None:
        i = next(ids)
        other.load_table("ns.t").append(rows(range(i, i + 1), "other"))
        others.append(i)

    racing.in_window = other_appends_one_row
    # A change that loses its first attempt is redone on the latest version: nothing is lost.
    racing.races = 1
    with mine.transaction() as tx:
        tx.set_properties(owner="mine")
    current = racing.load_table("ns.t")
    assert current.properties["owner"] == "mine" and len(current.scan().to_arrow()) == 1

    # Losing every staging of its batch is CommitFailedException; the other writer's changes
    # stay.
    racing.races = BATCH_ATTEMPTS
    with (
        pytest.raises(CommitFailedException, match="changed by another commit") as lost,
        mine.transaction() as tx,
    ):
        tx.set_properties(owner="mine again")
    _carries_lakecore_message(lost.value)
    current = racing.load_table("ns.t")
    assert (
        current.properties["owner"] == "mine"
        and len(current.scan().to_arrow()) == 1 + BATCH_ATTEMPTS
    )

    # An append that keeps losing is retried by pyiceberg and lands once.
    racing.races = 2
    mine = racing.load_table("ns.t")
    mine.append(rows(range(10, 14), "mine"))
    assert racing.races == 0
    final = racing.load_table("ns.t")
    assert sorted(final.scan().to_arrow().column("id").to_pylist()) == [*others, 10, 11, 12, 13]
    assert len(final.metadata.snapshots) == len(others) + 1
    referenced = {final.metadata_location, *(e.metadata_file for e in final.metadata.metadata_log)}
    metadata_dir = Path(final.metadata_location.removeprefix("file://")).parent
    written = {f"file://{p}" for p in metadata_dir.glob("*.metadata.json")}
    assert len(written - referenced) == len(others), (
        "each lost attempt leaves exactly one unreferenced metadata file"
    )
    lake.assert_fsck_deep()


def test_time_travel_loads_old_snapshots_and_is_read_only(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA, partition_spec=SPEC)
    other = catalog.create_table("ns.other", SCHEMA)
    table.append(rows(range(3)))
    other.append(rows(range(7)))
    old_version = catalog.lakehouse.version
    old_snapshot = table.current_snapshot()
    time.sleep(0.01)
    between = int(time.time() * 1000)
    time.sleep(0.01)
    table.append(rows(range(3, 10)))
    catalog.drop_table("ns.other")
    assert len(catalog.load_table("ns.t").scan().to_arrow()) == 10

    for past in (
        lake.catalog(version=str(old_version)),
        lake.catalog(as_of=str(between)),
        LakecoreCatalog("py", uri=lake.uri, as_of=between),
    ):
        assert past.read_only_version == old_version
        then = past.load_table("ns.t")
        assert then.current_snapshot() == old_snapshot
        assert len(then.scan().to_arrow()) == 3
        assert len(past.load_table("ns.other").scan().to_arrow()) == 7  # dropped since
        assert sorted(past.list_tables("ns")) == [("ns", "other"), ("ns", "t")]
        with pytest.raises(ReadOnlyCatalogError, match=f"version {old_version}"):
            then.append(rows(range(100, 101)))
        with pytest.raises(ReadOnlyCatalogError):
            past.drop_table("ns.t")
    assert len(catalog.load_table("ns.t").scan().to_arrow()) == 10


def _plant_old_orphans(storage: Storage, n: int) -> list[str]:
    """Lakecore-named files no version reaches, ten days old: what gc must delete."""
    paths = [
        new_node_file_path() if i % 2 else new_table_def_path("ns", f"orphan{i}") for i in range(n)
    ]
    old = time.time() - 10 * 86400
    for path in paths:
        storage.write(path, b"orphan")
        local = storage.root_uri.removeprefix("file://") + path
        os.utime(local, (old, old))
    return paths


@pytest.mark.parametrize(
    "inside", [True, False], ids=["warehouse-inside-root", "warehouse-outside-root"]
)
def test_gc_never_deletes_iceberg_files(tmp_path: Path, inside: bool) -> None:
    lake = local_lake(tmp_path)
    if not inside:
        lake.properties["warehouse"] = f"file://{tmp_path}/warehouse"
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA, partition_spec=SPEC)
    for i in range(3):
        table.append(rows(range(i * 5, i * 5 + 5)))
    # A losing writer's metadata file: written, never referenced by any lakehouse version.
    racing = RacingCatalog("racing", uri=lake.uri, **lake.properties)
    racing.in_window = lambda: table.append(rows(range(15, 16)))
    racing.races = BATCH_ATTEMPTS
    with pytest.raises(CommitFailedException), racing.load_table("ns.t").transaction() as tx:
        tx.set_properties(lost="yes")
    warehouse = Path(catalog.warehouse.removeprefix("file://"))
    assert warehouse.is_relative_to(Path(lake.uri)) == inside
    iceberg_files = sorted(p for p in warehouse.rglob("*") if p.is_file())
    unreferenced = [
        p
        for p in iceberg_files
        if p.name.endswith(".metadata.json")
        and str(p)
        not in {
            table.metadata_location.removeprefix("file://"),
            *(
                e.metadata_file.removeprefix("file://")
                for e in catalog.load_table("ns.t").metadata.metadata_log
            ),
        }
    ]
    assert unreferenced, "expected the losing writer's metadata file"

    storage = Storage(lake.uri)
    planted = _plant_old_orphans(storage, 4)
    result = gc_in_process(storage, now_millis=int(time.time() * 1000), grace_millis=0)
    # The planted orphans, plus the table definition the losing lakecore commit wrote.
    assert set(planted) <= set(result.deleted.deleted_paths)
    assert all(classify_path(path) is not None for path in result.deleted.deleted_paths)
    assert sorted(p for p in warehouse.rglob("*") if p.is_file()) == iceberg_files
    # 15, and the racer's row of each lost staging
    assert len(catalog.load_table("ns.t").scan().to_arrow()) == 15 + BATCH_ATTEMPTS
    lake.assert_fsck_deep()
