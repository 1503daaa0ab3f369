"""End to end through pyiceberg: namespaces, a partitioned table, appends, filtered scans,
schema evolution, overwrite, delete, rename and drop, on local disk and on moto's S3. The
lakehouse passes ``fsck --deep`` after every step and validate at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.exceptions import NoSuchTableError, ValidationError
from pyiceberg.io import load_file_io
from pyiceberg.types import DoubleType

from lakecore.cli import main as cli_main
from lakecore.iceberg import (
    CHECKED_PROPERTY,
    METADATA_LOCATION_PROPERTY,
    PREVIOUS_METADATA_LOCATION_PROPERTY,
)
from tests.conftest import S3TestServer
from tests.iceberg.conftest import SCHEMA, SPEC, IcebergLake, local_lake, purge_now, rows, s3_lake


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_lifecycle(lake: IcebergLake) -> None:
    catalog = lake.catalog()
    versions = [lake.assert_fsck_deep()]

    def step() -> None:
        versions.append(lake.assert_fsck_deep())
        assert versions[-1] > versions[-2], (
            "a catalog change did not commit a new lakehouse version"
        )

    catalog.create_namespace("sales", {"owner": "data-eng"})
    step()
    summary = catalog.update_namespace_properties(
        "sales", removals={"owner"}, updates={"tier": "gold"}
    )
    assert summary.removed == ["owner"] and summary.updated == ["tier"]
    assert catalog.load_namespace_properties("sales") == {"tier": "gold"}
    assert catalog.list_namespaces() == [("sales",)]
    step()

    table = catalog.create_table(
        "sales.orders", SCHEMA, partition_spec=SPEC, properties={"owner": "me"}
    )
    step()
    definition = lake.open().load_table("sales", "orders")
    assert definition.table_format == "ICEBERG"
    assert definition.format_properties[METADATA_LOCATION_PROPERTY] == table.metadata_location
    assert [c.name for c in definition.schema.columns] == ["id", "category", "writer"]
    assert catalog.table_exists("sales.orders") and catalog.list_tables("sales") == [
        ("sales", "orders")
    ]

    table.append(rows(range(0, 10)))
    step()
    table.append(rows(range(10, 20)))
    step()
    loaded = catalog.load_table("sales.orders")
    assert loaded.metadata_location == table.metadata_location
    assert len(loaded.metadata.snapshots) == 2
    assert loaded.spec().fields[0].name == "category"
    assert _ids(loaded.scan().to_arrow()) == list(range(20))
    assert _ids(loaded.scan(row_filter="category == 'a' and id >= 10").to_arrow()) == list(
        range(10, 20, 2)
    )
    assert len(loaded.scan(row_filter="category == 'b'").to_pandas()) == 10
    props = lake.open().load_table("sales", "orders").format_properties
    assert props[METADATA_LOCATION_PROPERTY] == loaded.metadata_location
    assert props[PREVIOUS_METADATA_LOCATION_PROPERTY] != loaded.metadata_location

    with loaded.update_schema() as update:
        update.add_column("price", DoubleType())
    step()
    assert [c.name for c in lake.open().load_table("sales", "orders").schema.columns][-1] == "price"
    evolved = rows(range(20, 24)).append_column("price", pa.array([1.5] * 4, pa.float64()))
    loaded.append(evolved)
    step()
    scanned = loaded.scan().to_arrow()
    assert _ids(scanned) == list(range(24))
    assert pc.sum(scanned.column("price")).as_py() == 6.0

    loaded.overwrite(
        rows(range(100, 106)).append_column("price", pa.array([2.0] * 6, pa.float64()))
    )
    step()
    assert _ids(loaded.scan().to_arrow()) == list(range(100, 106))
    loaded.delete(delete_filter="id < 103")
    step()
    assert _ids(catalog.load_table("sales.orders").scan().to_arrow()) == [103, 104, 105]

    renamed = catalog.rename_table("sales.orders", "sales.orders_v2")
    step()
    assert not catalog.table_exists("sales.orders")
    assert _ids(renamed.scan().to_arrow()) == [103, 104, 105]
    renamed.append(rows(range(200, 202)).append_column("price", pa.array([0.0, 0.0], pa.float64())))
    step()
    last_location = renamed.metadata_location

    catalog.drop_table("sales.orders_v2")
    step()
    with pytest.raises(NoSuchTableError):
        catalog.load_table("sales.orders_v2")
    assert catalog.list_tables("sales") == []
    # Dropping forgets the table; its files stay for whoever registered or time-travels to it.
    assert load_file_io(catalog.properties, last_location).new_input(last_location).exists()
    catalog.drop_namespace("sales")
    step()
    assert catalog.list_namespaces() == []
    lake.assert_validates()


def test_create_table_transaction_and_register_and_purge(lake: IcebergLake) -> None:
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    with catalog.create_table_transaction("ns.staged", SCHEMA, partition_spec=SPEC) as tx:
        tx.append(rows(range(5)))
    lake.assert_fsck_deep()
    staged = catalog.load_table("ns.staged")
    assert _ids(staged.scan().to_arrow()) == list(range(5))
    assert lake.open().load_table("ns", "staged").table_type == "MANAGED"

    # The same metadata under a second name would make two tables share a folder (issue 39):
    # refused, before and after more commits.
    for _ in range(2):
        with pytest.raises(ValidationError, match=r"of table ns\.copy overlaps .*table ns\.staged"):
            catalog.register_table("ns.copy", staged.metadata_location)
        assert not catalog.table_exists("ns.copy")
        staged.append(rows(range(5, 8)))

    io = load_file_io(catalog.properties, staged.metadata_location)
    data_files = [task.file.file_path for task in staged.scan().plan_files()]
    assert data_files and all(io.new_input(path).exists() for path in data_files)
    purge_now(lake, catalog, "ns.staged")
    lake.assert_fsck_deep()
    assert not catalog.table_exists("ns.staged")
    assert not any(io.new_input(path).exists() for path in data_files)
    lake.assert_validates()


def test_cli_table_show_prints_format_properties(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = local_lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA)
    capsys.readouterr()
    assert cli_main(["-l", lake.uri, "table", "show", "ns", "t"]) == 0
    human = capsys.readouterr().out
    assert "format properties:" in human and table.metadata_location in human
    assert cli_main(["-l", lake.uri, "--json", "table", "show", "ns", "t"]) == 0
    shown = json.loads(capsys.readouterr().out)
    # The metadata and the stamp that the catalog checked that metadata (lakecore.iceberg).
    assert shown["format_properties"] == {
        METADATA_LOCATION_PROPERTY: table.metadata_location,
        CHECKED_PROPERTY: table.metadata_location,
    }


@pytest.mark.s3
def test_explicit_storage_options_reach_the_lakehouse(s3_server: S3TestServer) -> None:
    """``lakecore.storage-options`` (JSON, as a config file gives it) reach lakecore's own
    files, with what pyiceberg's ``s3.*`` properties add (the region): one configuration for
    both (``lakecore.iceberg.storage_settings``)."""
    lake = s3_lake(s3_server)
    options = {
        "client_kwargs": {"endpoint_url": s3_server.endpoint},
        "key": "lakecore-test",
        "secret": "lakecore-test",
        "lakecore_timeout_seconds": 60,
    }
    catalog = lake.catalog(**{"lakecore.storage-options": json.dumps(options)})
    region = lake.properties["s3.region"]
    assert catalog.lakehouse.storage.storage_options == {
        **options,
        "client_kwargs": {**options["client_kwargs"], "region_name": region},
    }
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", SCHEMA).append(rows(range(3)))
    assert lake.open().list_tables("ns") == ["t"]
    assert len(lake.catalog().load_table("ns.t").scan().to_arrow()) == 3
    with pytest.raises(ValidationError, match="must be a JSON object"):
        lake.catalog(**{"lakecore.storage-options": "endpoint=x"})
