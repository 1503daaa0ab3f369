"""What the catalog deletes and what it refuses before writing anything (a review's findings,
2026-11-24): purge deletes only the table's own files, a read-only catalog (time travel, an
exported copy) refuses an append without leaving its files, and bad input is refused before a
metadata file is written or a commit lands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import (
    NoSuchIcebergTableError,
    NoSuchNamespaceError,
    TableAlreadyExistsError,
    ValidationError,
    ValidationException,
)

from lakecore.core.locations import root_node_file_name
from lakecore.iceberg import ReadOnlyCatalogError
from lakecore.lakehouse import Lakehouse
from tests.conftest import S3TestServer
from tests.iceberg.conftest import SCHEMA, local_lake, purge_now, rows


def _files_under(path: Path) -> set[str]:
    return {str(p) for p in path.rglob("*") if p.is_file()}


def test_purge_refuses_a_registered_table(tmp_path: Path) -> None:
    """A registered (EXTERNAL) table's files were not written for it. While the table they came
    from lives, registering them is refused (two tables would share a folder); after it was
    dropped (not purged) they may be registered, and purge still leaves them."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    live = catalog.create_table("ns.t", SCHEMA)
    live.append(rows(range(5)))
    live = catalog.load_table("ns.t")
    with pytest.raises(ValidationError, match=r"overlaps .*table ns\.t:"):
        catalog.register_table("ns.snapshot_copy", live.metadata_location)
    catalog.drop_table("ns.t")
    catalog.register_table("ns.snapshot_copy", live.metadata_location)
    before = _files_under(tmp_path / "lake" / "warehouse")

    with pytest.raises(ValidationError, match=r"registered \(EXTERNAL\).*drop_table removes it"):
        catalog.purge_table("ns.snapshot_copy")
    assert catalog.table_exists("ns.snapshot_copy")
    assert _files_under(tmp_path / "lake" / "warehouse") == before
    assert sorted(
        catalog.load_table("ns.snapshot_copy").scan().to_arrow()["id"].to_pylist()
    ) == list(range(5))


def test_purge_deletes_only_under_the_tables_own_locations(tmp_path: Path) -> None:
    """A metadata file whose log names the lakehouse's version-0 root file and another table's
    metadata: pyiceberg's own purge deleted both."""
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    other = catalog.create_table("ns.other", SCHEMA)
    victim = catalog.create_table("ns.victim", SCHEMA)
    victim.append(rows(range(3)))
    victim = catalog.load_table("ns.victim")
    own_files = {
        p
        for p in _files_under(tmp_path / "lake" / "warehouse")
        if p.startswith(victim.location().removeprefix("file://"))
    }
    assert own_files
    root_zero = tmp_path / "lake" / root_node_file_name(0)
    other_metadata = other.metadata_location.removeprefix("file://")

    # Rewrite the current metadata file in place with a log naming files that are not the table's.
    metadata_path = Path(victim.metadata_location.removeprefix("file://"))
    document = json.loads(metadata_path.read_text())
    document["metadata-log"] = [
        *document.get("metadata-log", []),
        {"metadata-file": f"file://{root_zero}", "timestamp-ms": 1},
        {"metadata-file": other.metadata_location, "timestamp-ms": 2},
    ]
    metadata_path.write_text(json.dumps(document))

    result = purge_now(lake, catalog, "ns.victim")
    assert root_zero.exists() and Path(other_metadata).exists()
    assert not any(Path(p).exists() for p in own_files)
    # The root file lies outside the warehouse; the other table's metadata is named by it too.
    assert any(
        root_zero.name in line and "outside the warehouse" in line for line in result.refused_sample
    )
    assert result.expired_kept >= 1
    assert Lakehouse.open(lake.uri).at_version(0).version == 0
    assert catalog.load_table("ns.other").metadata_location == other.metadata_location


def test_a_write_path_outside_the_warehouse_is_refused(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    outside = tmp_path / "outside_everything"
    with pytest.raises(ValidationError, match=r"write\.data\.path .*outside the warehouse"):
        catalog.create_table("ns.t", SCHEMA, properties={"write.data.path": f"file://{outside}"})
    with pytest.raises(
        ValidationError, match=r"write\.data\.path .*lake/0101 is outside the warehouse"
    ):
        catalog.create_table(
            "ns.t", SCHEMA, properties={"write.data.path": str(tmp_path / "lake" / "0101")}
        )
    table = catalog.create_table("ns.t", SCHEMA)
    with pytest.raises(ValidationError, match=r"write\.data\.path"):
        table.transaction().set_properties(
            {"write.data.path": f"file://{outside}"}
        ).commit_transaction()
    # lake/0101 may well exist: it is a hash directory, where lakecore's own files go.
    assert not outside.exists() and not list((tmp_path / "lake" / "0101").rglob("*.parquet"))


@pytest.mark.parametrize("how", ["time travel", "exported copy"])
def test_a_read_only_catalog_refuses_an_append_and_leaves_no_file(tmp_path: Path, how: str) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", SCHEMA).append(rows(range(2)))
    if how == "time travel":
        read_only = lake.catalog(version=str(Lakehouse.open(lake.uri).version))
    else:
        Lakehouse.open(lake.uri).export_snapshot("e1", mode="full", target=str(tmp_path / "copy"))
        read_only = lake.catalog(uri=str(tmp_path / "copy"))
    before = _files_under(tmp_path)

    with pytest.raises(ReadOnlyCatalogError) as refused:
        read_only.load_table("ns.t").append(rows(range(2, 4)))
    assert isinstance(refused.value, ValidationException) and isinstance(
        refused.value, ValidationError
    )
    assert _files_under(tmp_path) == before
    for change in (
        lambda: read_only.drop_table("ns.t"),
        lambda: read_only.drop_namespace("ns"),
        lambda: read_only.update_namespace_properties("ns", updates={"a": "b"}),
        lambda: read_only.create_namespace("ns2"),
    ):
        with pytest.raises(ReadOnlyCatalogError, match=r"read-only"):
            change()
    assert read_only.load_table("ns.t").scan().to_arrow().num_rows == 2


def test_bad_creates_are_refused_before_a_file_is_written(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    warehouse = tmp_path / "lake" / "warehouse"
    with pytest.raises(NoSuchNamespaceError, match="namespace 'nons' does not exist"):
        catalog.create_table("nons.t", SCHEMA, location=f"file://{warehouse}/x/t")
    with pytest.raises(ValidationError, match="bad name"):
        catalog.create_table_transaction("ns.bad name", SCHEMA)
    with pytest.raises(ValidationError):
        catalog.create_table_transaction("ns." + "t" * 101, SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table_transaction("nons.t", SCHEMA)
    catalog.create_table("ns.t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table_transaction("ns.t", SCHEMA)
    assert not (warehouse / "x").exists()


def test_renaming_a_table_without_iceberg_metadata_is_refused_before_the_commit(
    tmp_path: Path,
) -> None:
    lake = local_lake(tmp_path)
    with Lakehouse.open(lake.uri).transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table(
            "ns", "plain", columns=[{"id": 1, "name": "x", "type": "INT8", "nullable": True}]
        )
    catalog = lake.catalog()
    version = Lakehouse.open(lake.uri).version
    with pytest.raises(NoSuchIcebergTableError, match="no Iceberg metadata"):
        catalog.rename_table("ns.plain", "ns.plain2")
    assert Lakehouse.open(lake.uri).version == version
    assert catalog.list_tables("ns") == [("ns", "plain")]


@pytest.mark.parametrize("version", [True, 1.9, "1_0", "-1", " ", "\uff11"])
def test_the_version_property_takes_digits_only(tmp_path: Path, version: object) -> None:
    lake = local_lake(tmp_path)
    with pytest.raises(ValidationError, match="not a lakehouse version number"):
        lake.catalog(version=version)


def test_the_version_property_takes_an_int_or_digits(tmp_path: Path) -> None:
    lake = local_lake(tmp_path)
    assert lake.catalog(version=0).read_only_version == 0
    assert lake.catalog(version=" 0 ").read_only_version == 0


@pytest.mark.s3
def test_a_missing_bucket_is_named_not_answered_with_create_advice(s3_server: S3TestServer) -> None:
    """The catalog said "there is no lakehouse ...: set lakecore.create=true" for a mistyped
    bucket, where creating fails too (a trial found it): the storage's own words stand."""
    from lakecore.errors import NoLakehouseError, NotFoundError

    options = s3_server.storage_options()
    properties = {
        "py-catalog-impl": "lakecore.iceberg.LakecoreCatalog",
        "s3.endpoint": s3_server.endpoint,
        "s3.access-key-id": options["key"],
        "s3.secret-access-key": options["secret"],
    }
    with pytest.raises(NotFoundError, match="bucket does not exist") as missing:
        load_catalog("t", **{**properties, "uri": "s3://no-such-bucket-for-lakecore/lake"})
    assert not isinstance(missing.value, NoLakehouseError) and "lakecore.create" not in str(
        missing.value
    )
    with pytest.raises(NoLakehouseError, match=r"lakecore\.create=true"):
        load_catalog("t", **{**properties, "uri": f"s3://{s3_server.bucket}/no-lake-here"})


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("verison", "version"),
        ("warehose", "warehouse"),
        ("as-of", "as_of"),
        ("lakecore.storage-option", "lakecore.storage-options"),
        ("lakecore.cache", None),
        ("lakecore.creat", "lakecore.create"),
        ("s3.endpont", "s3.endpoint"),
    ],
)
def test_a_misspelt_catalog_property_is_refused(
    tmp_path: Path, key: str, suggestion: str | None
) -> None:
    """``verison=5`` opened the latest version, writable: every misspelt property was ignored."""
    lake = local_lake(tmp_path)
    match = (
        f"did you mean '{suggestion}'" if suggestion else "this catalog's own are uri, warehouse"
    )
    with pytest.raises(ValidationError, match=match):
        lake.catalog(**{key: "5"})
    assert (
        lake.catalog(
            **{"version": "0", "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}
        ).read_only_version
        == 0
    )


def test_a_namespace_location_is_held_to_the_tables_rule_and_stored_as_a_full_uri(
    tmp_path: Path,
) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    root = tmp_path / "lake"
    for location in (root / "0011", tmp_path / "elsewhere"):  # a hash directory; outside everything
        with pytest.raises(
            ValidationError, match=r"namespace location .* is outside the warehouse"
        ):
            catalog.create_namespace("bad", {"location": str(location)})
    catalog.create_namespace("ns")
    with pytest.raises(
        ValidationError, match=r"namespace location .*_bad is outside the warehouse"
    ):
        catalog.update_namespace_properties("ns", updates={"location": str(root / "_bad")})
    assert catalog.list_namespaces() == [("ns",)]
    catalog.create_namespace("custom", {"location": str(root / "warehouse" / "custom")})
    table = catalog.create_table("custom.t", SCHEMA)
    stored = (
        Lakehouse.open(lake.uri).load_table("custom", "t").format_properties["metadata_location"]
    )
    assert stored == table.metadata_location and stored.startswith(
        f"file://{root}/warehouse/custom/t-"
    )
