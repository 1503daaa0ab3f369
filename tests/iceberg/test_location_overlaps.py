"""No table's files may share a folder with another's (issue 39, item 2).

``create_table`` accepted a location equal to another table's, to a namespace's folder or to the
warehouse itself; a table whose metadata named files in such a shared folder (after
``add_files``) had its purge delete the other table's files. Each refusal here failed before the
rule, as did the purge of a lakehouse that already held overlapping tables (made here through
the lakehouse API, as an older catalog could have made them)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.exceptions import ValidationError
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.catalog import METADATA_LOCATION_PROPERTY
from tests.iceberg.conftest import (
    SCHEMA,
    keep_only_the_latest_version,
    local_lake,
    rows,
    run_table_maintenance,
)


def _files(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()}


def _catalog(tmp_path: Path) -> LakecoreCatalog:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    return catalog


def test_a_location_equal_to_or_inside_another_tables_is_refused(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    first = catalog.create_table("ns.first", SCHEMA)
    warehouse = tmp_path / "lake" / "warehouse"
    before = _files(warehouse)
    for location, how in [
        (first.location(), "equal to"),
        (first.location() + "/inner", "inside"),
    ]:
        with pytest.raises(ValidationError, match=r"overlaps .*ns\.first"):
            catalog.create_table("ns.second", SCHEMA, location=location)
        assert not catalog.table_exists("ns.second"), how
    assert _files(warehouse) == before  # nothing written on a refusal


def test_a_location_containing_another_tables_is_refused(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    catalog.create_table("ns.inner", SCHEMA, location=str(tmp_path / "lake/warehouse/x/y/inner"))
    with pytest.raises(ValidationError, match=r"overlaps .*ns\.inner"):
        catalog.create_table("ns.outer", SCHEMA, location=str(tmp_path / "lake/warehouse/x/y"))
    with pytest.raises(ValidationError, match=r"overlaps .*ns\.inner"):
        catalog.create_table("ns.outer", SCHEMA, location=str(tmp_path / "lake/warehouse/x"))
    catalog.create_table("ns.beside", SCHEMA, location=str(tmp_path / "lake/warehouse/x/y/other"))


def test_the_warehouse_root_and_namespace_folders_are_refused(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    catalog.create_namespace("sales")
    warehouse = tmp_path / "lake" / "warehouse"
    with pytest.raises(ValidationError, match=r"is the warehouse itself"):
        catalog.create_table("ns.t", SCHEMA, location=str(warehouse))
    with pytest.raises(ValidationError, match=r"folder of namespace 'sales'"):
        catalog.create_table("ns.t", SCHEMA, location=str(warehouse / "sales"))
    with pytest.raises(ValidationError, match=r"folder of namespace 'ns'"):
        catalog.create_table("ns.t", SCHEMA, location=str(warehouse / "ns"))
    # A namespace's own location is a folder too.
    catalog.create_namespace("placed", {"location": str(warehouse / "custom" / "placed")})
    with pytest.raises(ValidationError, match=r"folder of namespace 'placed'"):
        catalog.create_table("ns.t", SCHEMA, location=str(warehouse / "custom"))
    assert catalog.list_tables("ns") == []


def test_write_paths_are_held_to_the_rule_at_create_and_at_every_commit(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    first = catalog.create_table("ns.first", SCHEMA)
    for name in ("write.data.path", "write.metadata.path"):
        with pytest.raises(ValidationError, match=rf"{name}.*overlaps .*ns\.first"):
            catalog.create_table("ns.second", SCHEMA, properties={name: first.location() + "/data"})
    second = catalog.create_table("ns.second", SCHEMA)
    for name in ("write.data.path", "write.metadata.path"):
        with pytest.raises(ValidationError, match=rf"{name}.*overlaps .*ns\.first"):
            second.transaction().set_properties({name: first.location()}).commit_transaction()
    # And the other way round: a later table may not take a folder a write path holds.
    elsewhere = str(tmp_path / "lake" / "warehouse" / "shared" / "data")
    second.transaction().set_properties({"write.data.path": elsewhere}).commit_transaction()
    with pytest.raises(ValidationError, match=r"overlaps .*ns\.second"):
        catalog.create_table("ns.third", SCHEMA, location=elsewhere)


def test_register_and_rename_are_held_to_the_rule(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    first = catalog.create_table("ns.first", SCHEMA)
    first.append(rows(range(3)))
    first = catalog.load_table("ns.first")
    # A metadata file (a copy of the first table's) whose location is the first table's.
    copy = first.location() + "/metadata/copy.metadata.json"
    ToOutputFile.table_metadata(first.metadata, first.io.new_output(copy))
    with pytest.raises(ValidationError, match=r"overlaps .*ns\.first"):
        catalog.register_table("ns.copy", copy)
    assert not catalog.table_exists("ns.copy")
    # After a rename the old location no longer names its table: it must still be protected.
    catalog.create_namespace("other")
    catalog.rename_table("ns.first", "other.renamed")
    with pytest.raises(ValidationError, match=r"overlaps .*other\.renamed"):
        catalog.create_table("ns.again", SCHEMA, location=first.location())


def _legacy_table(catalog: LakecoreCatalog, name: str, location: str) -> None:
    """A table at ``location`` committed straight through the lakehouse, as a catalog from
    before the rule could have made it."""
    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {}
    )
    metadata_location = f"{location}/metadata/00000-legacy-{name}.metadata.json"
    ToOutputFile.table_metadata(metadata, PyArrowFileIO().new_output(metadata_location))
    with catalog.lakehouse.refresh().transaction() as tx:
        # What an older release's catalog wrote: the pointer, with no registry entry.
        tx.create_table(
            "ns",
            name,
            format_properties={METADATA_LOCATION_PROPERTY: metadata_location},
            checked_by_catalog=True,
        )


def _shared_file(folder: str) -> str:
    path = f"{folder}/data/shared.parquet"
    Path(path.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "category": pa.array(["a", "b"]),
                "writer": pa.array(["w", "w"]),
            }
        ),
        path.removeprefix("file://"),
    )
    return path


@pytest.mark.parametrize("where", ["same location", "namespace folder", "explicit elsewhere"])
def test_purge_keeps_files_another_overlapping_table_names(tmp_path: Path, where: str) -> None:
    """A lakehouse made before the rule: two tables share a folder, and both name a file in it
    (``add_files``). Purging one must leave the file the other still reads."""
    lake = local_lake(tmp_path)
    with lake.open().transaction() as tx:  # no catalog change yet: the lakehouse is "old"
        tx.create_namespace("ns")
    catalog = lake.catalog()
    warehouse = tmp_path / "lake" / "warehouse"
    if where == "same location":
        survivor = catalog.create_table("ns.survivor", SCHEMA)
        shared_location = survivor.location()
    elif where == "namespace folder":
        survivor = catalog.create_table("ns.survivor", SCHEMA)
        shared_location = f"file://{warehouse}/ns"
    else:
        shared_location = f"file://{warehouse}/explicit"
        _legacy_table(catalog, "survivor", shared_location)
        survivor = catalog.load_table("ns.survivor")
    _legacy_table(catalog, "doomed", shared_location)
    shared = _shared_file(survivor.location())
    survivor.add_files([shared])
    doomed = catalog.load_table("ns.doomed")
    doomed.add_files([shared])

    catalog.purge_table("ns.doomed")
    keep_only_the_latest_version(lake)
    result = run_table_maintenance(lake, catalog, expire=False, orphans=False)
    # Its folder is (or holds, or lies in) a live table's: the purge waits while that one lives.
    assert [m.name for m in result.marks] == ["ns.doomed"] and not result.marks_due
    assert Path(shared.removeprefix("file://")).exists()
    assert sorted(catalog.load_table("ns.survivor").scan().to_arrow()["id"].to_pylist()) == [1, 2]
    assert not catalog.table_exists("ns.doomed")
