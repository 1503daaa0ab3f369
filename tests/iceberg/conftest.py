"""Fixtures of the Iceberg catalog tests: a lakehouse plus the properties of a LakecoreCatalog
over it, on local disk or on moto's S3 server (``tests/conftest.py``'s ``s3_server``).

Every check reads from storage, not from this process's caches (``clear_caches`` first), so a
file deleted behind our back shows up.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.io import FileIO
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from lakecore import clear_caches
from lakecore.core.storage import Storage
from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance.tables.result import TableMaintenanceOptions, TableMaintenanceResult
from lakecore.maintenance.tables.run import table_maintenance_in_process
from lakecore.maintenance.validate_run import validate_view
from tests.conftest import S3_TEST_REGION, S3TestServer

CATALOG_IMPL = "lakecore.iceberg.LakecoreCatalog"
# Four writers on one table lose many races; pyiceberg's default (4 retries, 100 ms doubling)
# could give up. Small waits keep the tests short.
RETRY_PROPERTIES = {
    "commit.retry.num-retries": "60",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "200",
}

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "writer", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category")
)


def rows(ids: range, writer: str = "test") -> pa.Table:
    """A batch with ids ``ids``, category ``a``/``b`` by parity, and the writer's name."""
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "category": pa.array(["a" if i % 2 == 0 else "b" for i in ids], pa.string()),
            "writer": pa.array([writer] * len(ids), pa.string()),
        }
    )


@dataclass
class IcebergLake:
    """A lakehouse at ``uri`` and the catalog properties that reach it and its warehouse."""

    uri: str
    storage_options: dict[str, Any] | None
    properties: dict[str, str] = field(default_factory=dict)

    def catalog(self, **extra: Any) -> LakecoreCatalog:
        catalog = load_catalog(
            "test", **{"py-catalog-impl": CATALOG_IMPL, "uri": self.uri, **self.properties, **extra}
        )
        assert isinstance(catalog, LakecoreCatalog)
        return catalog

    def open(self) -> Lakehouse:
        clear_caches()
        return Lakehouse.open(self.uri, storage_options=self.storage_options)

    def assert_fsck_deep(self) -> int:
        """``lakecore fsck --deep`` of the latest version is clean; returns the version."""
        lh = self.open()
        result = check_version(lh, deep=True)
        assert result.ok, [str(v) for v in result.violations]
        return lh.version

    def assert_validates(self) -> None:
        lh = self.open()
        result = validate_view(lh, deep=True)
        assert result.ok, [str(v) for v in result.violations]
        assert result.catalog_checked


def local_lake(tmp_path: Path, **definition: Any) -> IcebergLake:
    """A lakehouse on local disk; the warehouse is the default, ``<root>/warehouse``."""
    uri = str(tmp_path / "lake")
    Lakehouse.create(uri, **definition)
    return IcebergLake(uri, None)


def s3_lake(s3: S3TestServer, **definition: Any) -> IcebergLake:
    """A lakehouse on moto's S3, with the warehouse beside it (outside the root)."""
    base = f"s3://{s3.bucket}/{uuid.uuid4()}"
    options = s3.storage_options()
    Lakehouse.create(f"{base}/lake", storage_options=options, **definition)
    properties = {
        "warehouse": f"{base}/warehouse",
        "s3.endpoint": s3.endpoint,
        "s3.access-key-id": options["key"],
        "s3.secret-access-key": options["secret"],
        "s3.region": S3_TEST_REGION,
    }
    return IcebergLake(f"{base}/lake", options, properties)


def keep_only_the_latest_version(lake: IcebergLake) -> None:
    """Retention that keeps the latest version alone: a dropped table leaves retention with
    the next commit (what makes a purge's files due)."""
    lake.open().update_settings(minimum_versions_to_keep=1, maximum_version_age_millis=0)


def run_table_maintenance(
    lake: IcebergLake, catalog: LakecoreCatalog, **options: Any
) -> TableMaintenanceResult:
    """``lakecore table-maintenance`` in this process at the clocks' now, no grace period."""
    from lakecore.iceberg.expiry import CatalogCommitter
    from lakecore.maintenance.clock import read_clocks

    storage = Storage(lake.uri, lake.storage_options)
    settings = {"grace_millis": 0, "override_grace": True, **options}
    run = TableMaintenanceOptions(**settings)
    clocks = read_clocks(storage)
    now = run.now_millis if run.now_millis is not None else clocks.now_millis
    return table_maintenance_in_process(
        storage, CatalogCommitter(catalog, now, run.defaults), run, clocks=clocks
    )


def purge_now(lake: IcebergLake, catalog: LakecoreCatalog, name: str) -> TableMaintenanceResult:
    """``purge_table``, then what table maintenance does once the dropped table has left
    retention: only the purge (no expiry, no orphans of other tables). Asserts the mark is
    gone."""
    catalog.purge_table(name)
    keep_only_the_latest_version(lake)
    result = run_table_maintenance(lake, catalog, expire=False, orphans=False)
    assert not result.blocked.problems, result.blocked
    assert [m.name for m in result.marks_finished] == [name], result.marks
    return result


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IcebergLake]:
    if request.param == "local":
        yield local_lake(tmp_path)
    else:
        yield s3_lake(request.getfixturevalue("s3_server"))


class RacingCatalog(LakecoreCatalog):
    """A LakecoreCatalog that lets another writer commit in the window between reading the
    table's current state and committing the new metadata to the lakehouse (while the new
    metadata file is written), for the next ``races`` commit attempts: the race
    ``commit_table`` must never lose an update in. A real second catalog commits in the
    window; nothing is faked."""

    def __init__(self, name: str, **properties: Any) -> None:
        super().__init__(name, **properties)
        self.in_window: Callable[[], None] | None = None
        self.races = 0

    def _write_new_metadata(self, metadata: TableMetadata, io: FileIO, metadata_path: str) -> None:
        super()._write_new_metadata(metadata, io, metadata_path)
        if self.races > 0 and self.in_window is not None:
            self.races -= 1
            self.in_window()
