"""``purge_table`` never deletes a file another live table's current metadata names (issue 39
item 2, after a new-user trial found four ways it still did), and the rough edges the same
trial found. Each test failed before its fix:

* B1: ``add_files`` of another table's files (or of files in a folder a later table takes):
  purge read only the tables whose folders overlapped, never the ones that merely named files;
* B2: a second catalog over the same lakehouse with another ``warehouse``, or a second lakehouse
  over the same warehouse, then ``register_table(overwrite=True)`` (which left the table
  MANAGED) and a purge;
* B3: a table pointed at Iceberg metadata through the lakehouse API, which purge never read;
* B4: what a client of an older release wrote after the registry was built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchIcebergTableError, ValidationError
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AddSnapshotUpdate, TableRequirement, TableUpdate

from lakecore.errors import CorruptFileError, InvalidArgumentError
from lakecore.iceberg import (
    CHECKED_PROPERTY,
    METADATA_LOCATION_PROPERTY,
    PREVIOUS_METADATA_LOCATION_PROPERTY,
    LakecoreCatalog,
)
from lakecore.iceberg.warehouse import MARKER_NAME
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.tables.table_folders import WAREHOUSE_PROPERTY, reduce_folders, refs_key
from tests.conftest import S3TestServer
from tests.iceberg.conftest import (
    CATALOG_IMPL,
    SCHEMA,
    IcebergLake,
    keep_only_the_latest_version,
    local_lake,
    purge_now,
    rows,
    run_table_maintenance,
    s3_lake,
)


def _ids(catalog: LakecoreCatalog, name: str) -> list[int]:
    return sorted(catalog.load_table(name).scan().to_arrow()["id"].to_pylist())


def _data_files(table: Table) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


def _exists(path: str) -> bool:
    return Path(path.removeprefix("file://")).exists()


def _parquet(path: str, ids: range) -> str:
    local = Path(path.removeprefix("file://"))
    local.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows(ids), local)
    return path


def _catalog_at(root: Path, warehouse: Path | str, **extra: Any) -> LakecoreCatalog:
    catalog = load_catalog(
        "test",
        **{
            "py-catalog-impl": CATALOG_IMPL,
            "uri": str(root),
            "warehouse": str(warehouse),
            "lakecore.create": "true",
            **extra,
        },
    )
    assert isinstance(catalog, LakecoreCatalog)
    return catalog


class OlderReleaseCatalog(LakecoreCatalog):
    """Commits as the catalog of the release before the registry (0b64641) did: the new
    metadata's pointer and nothing else, no registry entry and no stamp. The real thing, not a
    stub: pyiceberg applies the changes and writes the files exactly as for any catalog."""

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        *levels, name = table.name()
        current = self.load_table(table.name())
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        with self.lakehouse.refresh().transaction() as tx:
            tx.update_table(
                ".".join(levels),
                name,
                format_properties={
                    METADATA_LOCATION_PROPERTY: staged.metadata_location,
                    PREVIOUS_METADATA_LOCATION_PROPERTY: current.metadata_location,
                },
                checked_by_catalog=True,
            )
        return CommitTableResponse(
            metadata=staged.metadata,
            metadata_location=staged.metadata_location,  # type: ignore[call-arg]
        )


def _older(lake: IcebergLake) -> OlderReleaseCatalog:
    return OlderReleaseCatalog("older", uri=lake.uri, **lake.properties)


def _older_create(catalog: LakecoreCatalog, ns: str, name: str, location: str) -> None:
    """A table as the older release's create_table made it: a metadata file and the pointer."""
    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {}
    )
    metadata_location = f"{location}/metadata/00000-older-{name}.metadata.json"
    ToOutputFile.table_metadata(metadata, PyArrowFileIO().new_output(metadata_location))
    with catalog.lakehouse.refresh().transaction() as tx:
        tx.create_table(
            ns,
            name,
            format_properties={METADATA_LOCATION_PROPERTY: metadata_location},
            checked_by_catalog=True,
        )


# -- B1: files another table names ------------------------------------------------------------


@pytest.mark.parametrize("lake_kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_purge_keeps_the_data_files_another_table_added(
    tmp_path: Path, lake_kind: str, request: pytest.FixtureRequest
) -> None:
    lake = (
        local_lake(tmp_path)
        if lake_kind == "local"
        else s3_lake(request.getfixturevalue("s3_server"))
    )
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    b = catalog.create_table("ns.b", SCHEMA)
    b.append(rows(range(5)))
    a = catalog.create_table("ns.a", SCHEMA)
    a.append(rows(range(100, 103)))
    b_files = _data_files(catalog.load_table("ns.b"))
    catalog.load_table("ns.a").add_files(b_files)
    a_files = _data_files(catalog.load_table("ns.a"))

    purge_now(lake, catalog, "ns.b")
    assert _ids(catalog, "ns.a") == [*range(5), *range(100, 103)]
    io = catalog.load_table("ns.a").io
    assert all(io.new_input(path).exists() for path in a_files)

    # And the other way round: a's purge leaves b's files, which lie outside a's folders.
    c = catalog.create_table("ns.c", SCHEMA)
    c.append(rows(range(7)))
    c_files = _data_files(catalog.load_table("ns.c"))
    catalog.create_table("ns.d", SCHEMA).add_files(c_files)
    purge_now(lake, catalog, "ns.d")
    assert _ids(catalog, "ns.c") == list(range(7))


def test_a_later_table_over_a_referenced_folder_keeps_the_file(tmp_path: Path) -> None:
    """A file in a folder of no table, named by table a; later table c takes that folder and
    names the file too: c's purge must keep it (a's reference was recorded when it was added,
    before c existed)."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    imports = f"file://{tmp_path}/lake/warehouse/imports"
    shared = _parquet(f"{imports}/part-0.parquet", range(4))
    catalog.create_table("ns.a", SCHEMA).add_files([shared])
    c = catalog.create_table("ns.c", SCHEMA, location=imports)
    c.add_files([shared])

    purge_now(lake, catalog, "ns.c")
    assert _exists(shared)
    assert _ids(catalog, "ns.a") == list(range(4))


def test_a_folder_a_table_moved_its_writes_away_from_stays_protected(tmp_path: Path) -> None:
    """t writes to one folder, then moves write.data.path elsewhere: the old folder is no root
    of any table any more, so u may take it and name t's files there; u's purge must keep them."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    area = f"file://{tmp_path}/lake/warehouse/area"
    t = catalog.create_table("ns.t", SCHEMA, properties={"write.data.path": f"{area}/x"})
    t.append(rows(range(3)))
    t_files = _data_files(catalog.load_table("ns.t"))
    assert all(p.startswith(f"{area}/x/") for p in t_files)
    t.transaction().set_properties({"write.data.path": f"{area}/y"}).commit_transaction()
    u = catalog.create_table("ns.u", SCHEMA, location=f"{area}/x")
    u.add_files(t_files)

    purge_now(lake, catalog, "ns.u")
    assert all(_exists(p) for p in t_files)
    assert _ids(catalog, "ns.t") == [0, 1, 2]


def test_only_a_new_reference_folder_changes_the_lakehouse_definition(tmp_path: Path) -> None:
    """An append writes under the table's own folder: its commit reads two small files and
    leaves the definition alone (so it never conflicts with another table's commit). A file
    elsewhere in the warehouse is recorded once."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA)
    before = lake.open().root_info.lakehouse_def_path
    table.append(rows(range(3)))
    catalog.load_table("ns.t").append(rows(range(3, 6)))
    assert lake.open().root_info.lakehouse_def_path == before

    elsewhere = f"file://{tmp_path}/lake/warehouse/landing/2026/01"
    first = _parquet(f"{elsewhere}/one.parquet", range(10, 12))
    catalog.load_table("ns.t").add_files([first])
    recorded = lake.open().lakehouse_def.properties[refs_key("ns", "t")]
    assert json.loads(recorded) == [elsewhere]
    after_first = lake.open().root_info.lakehouse_def_path
    catalog.load_table("ns.t").add_files([_parquet(f"{elsewhere}/two.parquet", range(12, 14))])
    assert lake.open().root_info.lakehouse_def_path == after_first  # already recorded
    assert _ids(catalog, "ns.t") == [*range(6), *range(10, 14)]


def test_reference_folders_are_few_and_only_ever_coarser() -> None:
    w = "s3://b/wh"
    folders = [f"{w}/land/d={day:02d}" for day in range(40)] + [f"{w}/other/x/y"]
    reduced = reduce_folders(w, folders, 16)
    assert reduced == [f"{w}/land", f"{w}/other/x/y"]
    assert all(any(f == r or f.startswith(r + "/") for r in reduced) for f in folders)
    assert reduce_folders(w, [f"{w}/a/b", f"{w}/a"], 16) == [f"{w}/a"]
    assert reduce_folders(w, [f"{w}/{i}" for i in range(20)], 16) == [w]


# -- B2: one warehouse per lakehouse, one lakehouse per warehouse --------------------------------


def test_a_catalog_given_another_warehouse_is_refused(tmp_path: Path) -> None:
    first = _catalog_at(tmp_path / "lake", tmp_path / "wh")
    first.create_namespace("ns")
    table = first.create_table("ns.a", SCHEMA)
    table.append(rows(range(3)))
    recorded = Lakehouse.open(str(tmp_path / "lake")).lakehouse_def.properties
    assert recorded[WAREHOUSE_PROPERTY] == f"file://{tmp_path}/wh"
    for other in (tmp_path, tmp_path / "wh" / "ns", tmp_path / "elsewhere"):
        with pytest.raises(ValidationError, match=r"is not this lakehouse's: .*give warehouse="):
            _catalog_at(tmp_path / "lake", other)
    # Without the property the catalog takes the lakehouse's warehouse.
    plain = LakecoreCatalog("plain", uri=str(tmp_path / "lake"))
    assert plain.warehouse == f"file://{tmp_path}/wh"
    assert _ids(plain, "ns.a") == [0, 1, 2]


def test_a_catalog_opened_before_the_warehouse_was_recorded_is_refused_at_its_change(
    tmp_path: Path,
) -> None:
    Lakehouse.create(str(tmp_path / "lake"))
    first = _catalog_at(tmp_path / "lake", tmp_path / "wh")
    parent = _catalog_at(tmp_path / "lake", tmp_path)  # opened before the record
    first.create_namespace("ns")
    first.create_table("ns.a", SCHEMA).append(rows(range(2)))
    with pytest.raises(ValidationError, match=r"not the lakehouse's: its Iceberg tables live in"):
        parent.create_namespace("x")
    with pytest.raises(ValidationError, match=r"not the lakehouse's"):
        parent.load_table("ns.a").append(rows(range(2, 4)))
    assert _ids(first, "ns.a") == [0, 1]


def test_two_lakehouses_never_share_a_warehouse(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    first = _catalog_at(tmp_path / "lake1", wh)
    first.create_namespace("ns")
    a = first.create_table("ns.a", SCHEMA)
    a.append(rows(range(3)))
    assert json.loads((wh / MARKER_NAME).read_text())["lakehouse"] == f"file://{tmp_path}/lake1"

    for warehouse in (wh, wh / "ns", wh / "inner" / "deeper"):
        second = _catalog_at(tmp_path / f"lake-{warehouse.name}", warehouse)
        with pytest.raises(ValidationError, match=r"the Iceberg warehouse of the lakehouse at"):
            second.create_namespace("ns")

    # A warehouse around the first one is claimed (finding the first would take a listing of
    # all of it), but no table of it may go inside the first's.
    around = _catalog_at(tmp_path / "lake-around", tmp_path)
    around.create_namespace("x")
    with pytest.raises(ValidationError, match=r"lies in .*/wh, the Iceberg warehouse of"):
        around.create_table("x.t", SCHEMA, location=a.location())
    with pytest.raises(ValidationError, match=r"lies in .*/wh, the Iceberg warehouse of"):
        around.create_namespace("wh")
    with pytest.raises(ValidationError, match=r"write\.data\.path .* lies in .*/wh, the Iceberg"):
        around.create_table("x.u", SCHEMA, properties={"write.data.path": f"file://{wh}/data"})
    assert _ids(first, "ns.a") == [0, 1, 2]


@pytest.mark.s3
def test_two_lakehouses_never_share_a_warehouse_on_s3(s3_server: S3TestServer) -> None:
    lake = s3_lake(s3_server)
    lake.catalog().create_namespace("ns")
    base = lake.uri.rsplit("/", 1)[0]
    Lakehouse.create(f"{base}/lake2", storage_options=lake.storage_options)
    second = IcebergLake(f"{base}/lake2", lake.storage_options, lake.properties)
    with pytest.raises(ValidationError, match=r"is the Iceberg warehouse of the lakehouse at"):
        second.catalog().create_namespace("ns")


def test_register_with_overwrite_makes_the_table_external(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    old = catalog.create_table("ns.old", SCHEMA)
    old.append(rows(range(4)))
    old_metadata = catalog.load_table("ns.old").metadata_location
    catalog.drop_table("ns.old")  # its files stay, nobody's
    catalog.create_table("ns.b", SCHEMA)
    catalog.register_table("ns.b", old_metadata, overwrite=True)
    assert lake.open().load_table("ns", "b").table_type == "EXTERNAL"
    with pytest.raises(ValidationError, match=r"registered \(EXTERNAL\)"):
        catalog.purge_table("ns.b")
    assert _ids(catalog, "ns.b") == list(range(4))


# -- B3: the lakehouse API ------------------------------------------------------------------------


def test_the_lakehouse_api_refuses_to_point_a_table_at_iceberg_metadata(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    a = catalog.create_table("ns.a", SCHEMA)
    a.append(rows(range(4)))
    a = catalog.load_table("ns.a")
    a_files = _data_files(a)
    lh = lake.open()
    version = lh.version
    for key in (METADATA_LOCATION_PROPERTY, CHECKED_PROPERTY):
        tx = lh.transaction()
        with pytest.raises(InvalidArgumentError, match=rf"'{key}' is set by the Iceberg catalog"):
            tx.create_table("ns", "copy", format_properties={key: a.metadata_location})
        with pytest.raises(InvalidArgumentError, match=r"is set by the Iceberg catalog only"):
            tx.update_table("ns", "a", format_properties={key: a.metadata_location})
        tx.commit()  # nothing staged: no version
    assert lake.open().version == version
    purge_now(lake, catalog, "ns.a")  # nothing else names its files: all of them go
    assert a_files and not any(_exists(p) for p in a_files)


# -- B4: clients of an older release --------------------------------------------------------------


def test_a_table_an_older_client_changed_is_not_purged_until_checked_again(tmp_path: Path) -> None:
    """An older client adds b's files to t after the registry was built: nothing records it.
    Purging t is refused (its stamp says other code changed it); b's purge cannot know about t
    until the registry is rebuilt, after which it keeps the files."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    b = catalog.create_table("ns.b", SCHEMA)
    b.append(rows(range(5)))
    catalog.create_table("ns.t", SCHEMA)
    b_files = _data_files(catalog.load_table("ns.b"))
    _older(lake).load_table("ns.t").add_files(b_files)
    assert refs_key("ns", "t") not in lake.open().lakehouse_def.properties

    with pytest.raises(ValidationError, match=r"written by other code .*rebuild_location_registry"):
        catalog.purge_table("ns.t")
    catalog.rebuild_location_registry()
    assert refs_key("ns", "t") in lake.open().lakehouse_def.properties
    purge_now(lake, catalog, "ns.b")
    assert all(_exists(p) for p in b_files)
    assert _ids(catalog, "ns.t") == list(range(5))
    purge_now(lake, catalog, "ns.t")  # checked again by the rebuild
    assert not catalog.table_exists("ns.t")


def test_the_next_checked_commit_records_what_an_older_client_referenced(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    b = catalog.create_table("ns.b", SCHEMA)
    b.append(rows(range(5)))
    catalog.create_table("ns.t", SCHEMA)
    b_files = _data_files(catalog.load_table("ns.b"))
    _older(lake).load_table("ns.t").add_files(b_files)

    catalog.load_table("ns.t").append(rows(range(100, 102)))  # reads every manifest of t once
    purge_now(lake, catalog, "ns.b")
    assert _ids(catalog, "ns.t") == [*range(5), 100, 101]


def test_a_rebuild_finds_the_tables_an_older_client_made(tmp_path: Path) -> None:
    """The trial's case: after the registry was built an older client made ns.a at a location
    of its choosing and pointed a MANAGED ns.x at ns.a's metadata; purging ns.x deleted all of
    ns.a's files. ns.x's folder is neither of its name's shape nor in the registry: its purge is
    refused. The rebuild, once every client is upgraded, records both."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    catalog.create_table("ns.first", SCHEMA)  # the registry is built here
    older = _older(lake)
    custom = f"file://{tmp_path}/lake/warehouse/ns/custom"
    _older_create(older, "ns", "a", custom)
    older.load_table("ns.a").append(rows(range(4)))
    a_metadata = older.load_table("ns.a").metadata_location
    _older_create(older, "ns", "x", f"file://{tmp_path}/lake/warehouse/ns/x")
    with older.lakehouse.refresh().transaction() as tx:
        tx.update_table(
            "ns",
            "x",
            format_properties={METADATA_LOCATION_PROPERTY: a_metadata},
            checked_by_catalog=True,
        )
    a_files = _data_files(catalog.load_table("ns.a"))

    with pytest.raises(ValidationError, match=r"written by other code .*around the location"):
        catalog.purge_table("ns.x")
    assert all(_exists(p) for p in a_files)
    catalog.rebuild_location_registry()
    catalog.purge_table("ns.x")
    keep_only_the_latest_version(lake)
    result = run_table_maintenance(lake, catalog, expire=False, orphans=False)
    # ns.x was ns.a's metadata under another name: while ns.a is retained, the mark waits.
    assert [m.name for m in result.marks] == ["ns.x"] and not result.marks_due
    assert all(_exists(p) for p in a_files)
    assert _ids(catalog, "ns.a") == list(range(4))


# -- rough edges ----------------------------------------------------------------------------------


def test_a_namespace_folder_may_not_be_a_tables_folder(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    warehouse = f"file://{tmp_path}/lake/warehouse"
    catalog.create_namespace("a")
    catalog.create_table("a.t", SCHEMA, location=f"{warehouse}/a/b")
    with pytest.raises(ValidationError, match=r"folder .*/a/b of namespace 'a\.b' is a folder of"):
        catalog.create_namespace(("a", "b"))
    real = catalog.create_table("a.real", SCHEMA).location()
    for make in (
        lambda: catalog.create_namespace("n2", {"location": real}),
        lambda: catalog.create_namespace("n3", {"location": f"{real}/sub"}),
        lambda: catalog.update_namespace_properties("a", updates={"location": real}),
    ):
        with pytest.raises(ValidationError, match=r"location .* a folder of table a\.real"):
            make()
    assert catalog.list_namespaces() == [("a",)]


def test_a_missing_metadata_file_names_the_table_and_the_way_out(tmp_path: Path) -> None:
    """A lakehouse from before the registry with one table whose metadata file is gone: every
    create failed with a bare FileNotFoundError."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    with lake.open().transaction() as tx:
        tx.create_namespace("ns")
    warehouse = f"file://{tmp_path}/lake/warehouse"
    _older_create(catalog, "ns", "fine", f"{warehouse}/ns/fine")
    _older_create(catalog, "ns", "broken", f"{warehouse}/ns/broken")
    missing = catalog.lakehouse.refresh().load_table("ns", "broken")
    Path(missing.format_properties[METADATA_LOCATION_PROPERTY].removeprefix("file://")).unlink()

    with pytest.raises(CorruptFileError, match=r"table ns\.broken cannot be read .*drop_table"):
        catalog.create_table("ns.new", SCHEMA)
    catalog.drop_table("ns.broken")
    catalog.create_table("ns.new", SCHEMA)


def test_a_table_without_iceberg_metadata_points_at_drop_table(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    with lake.open().transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table("ns", "plain", columns=[{"id": 1, "name": "x", "type": "INT8"}])
    catalog = lake.catalog()
    with pytest.raises(NoSuchIcebergTableError, match=r"`lakecore table create`.*drop_table"):
        catalog.load_table("ns.plain")
    catalog.purge_table("ns.plain")  # it has no files: purging it is dropping it
    assert catalog.list_tables("ns") == []


def test_a_commit_naming_a_manifest_list_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    """The catalog reads what a commit adds; a snapshot whose files were never written is a
    ValidationError naming the file, and nothing lands."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA)
    version = lake.open().version
    ghost = Snapshot(  # type: ignore[call-arg]
        snapshot_id=1,
        sequence_number=1,
        timestamp_ms=1_700_000_000_000,
        manifest_list=f"{table.location()}/metadata/snap-never-written.avro",
        summary=Summary(Operation.APPEND),
        schema_id=0,
    )
    with pytest.raises(ValidationError, match=r"does not exist .*snap-never-written\.avro"):
        catalog.commit_table(table, (), (AddSnapshotUpdate(snapshot=ghost),))
    assert lake.open().version == version
