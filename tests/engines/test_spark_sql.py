"""Spark SQL (pyspark 4.1, Iceberg's Spark runtime 1.12) through the REST server.

Each test's catalog ``lake`` is the settings the README shows (``type=rest``, ``uri``, and
``credential`` with ``oauth2-server-uri`` where tokens are needed), on a fresh lakehouse served
by this process; what Spark wrote is then read back through the lakehouse's own catalog, so a
test checks both sides. One Spark driver serves the whole session (tests/engines/conftest.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from lakecore.rest.tokenfile import read_token_file
from tests.engines.conftest import Lake, SparkLake
from tests.engines.spark_sql import SparkSQLSession

WRITER_SECRET = "etl-0123456789abcdef-secret"
READER_SECRET = "dashboards-fedcba9876543210"


def arrow_rows(lake: Lake, table: str, *columns: str) -> list[tuple[Any, ...]]:
    """The table's rows as the lakehouse's own catalog reads them, sorted."""
    data = lake.catalog.load_table(tuple(table.split("."))).scan().to_arrow()
    return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True))


def test_create_insert_merge_and_the_lakehouse_sees_it(
    spark_sql: SparkSQLSession, lake: Lake
) -> None:
    spark_sql.sql("CREATE NAMESPACE lake.sales")
    assert spark_sql.sql("SHOW NAMESPACES IN lake") == [["sales"]]
    spark_sql.sql(
        "CREATE TABLE lake.sales.orders (id BIGINT, region STRING, amount DOUBLE, ts TIMESTAMP) "
        "USING iceberg PARTITIONED BY (region, days(ts))"
    )
    spark_sql.sql(
        "INSERT INTO lake.sales.orders VALUES "
        "(1, 'eu', 10.0, TIMESTAMP '2026-11-01 10:00:00'), "
        "(2, 'us', 20.0, TIMESTAMP '2026-11-01 11:00:00'), "
        "(3, 'eu', 30.0, TIMESTAMP '2026-11-02 09:00:00')"
    )
    spark_sql.sql(
        "MERGE INTO lake.sales.orders t USING (SELECT * FROM VALUES "
        "(2, 'us', 25.0, TIMESTAMP '2026-11-01 11:00:00'), "
        "(4, 'apac', 40.0, TIMESTAMP '2026-11-03 08:00:00') AS s(id, region, amount, ts)) s "
        "ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.amount = s.amount "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    assert spark_sql.sql("SELECT id, region, amount FROM lake.sales.orders ORDER BY id") == [
        [1, "eu", 10.0],
        [2, "us", 25.0],
        [3, "eu", 30.0],
        [4, "apac", 40.0],
    ]
    # CREATE TABLE AS SELECT stages the create (the server's staged answer must be one Java
    # can read) and commits it with the data in one step.
    spark_sql.sql(
        "CREATE TABLE lake.sales.by_region USING iceberg AS "
        "SELECT region, sum(amount) AS total FROM lake.sales.orders GROUP BY region"
    )

    assert lake.catalog.list_tables("sales") == [("sales", "by_region"), ("sales", "orders")]
    orders = lake.catalog.load_table(("sales", "orders"))
    assert [f.name for f in orders.spec().fields] == ["region", "ts_day"]
    assert orders.metadata_location.startswith(lake.warehouse + "/sales/orders-")
    assert arrow_rows(lake, "sales.orders", "id", "amount") == [
        (1, 10.0),
        (2, 25.0),
        (3, 30.0),
        (4, 40.0),
    ]
    assert arrow_rows(lake, "sales.by_region", "region", "total") == [
        ("apac", 40.0),
        ("eu", 40.0),
        ("us", 25.0),
    ]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_update_and_delete_write_what_the_mode_says(
    spark_sql: SparkSQLSession, lake: Lake, mode: str
) -> None:
    spark_sql.sql("CREATE NAMESPACE lake.db")
    spark_sql.sql(
        "CREATE TABLE lake.db.t (id BIGINT, v STRING) USING iceberg PARTITIONED BY (bucket(2, id)) "
        f"TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = '{mode}', "
        f"'write.update.mode' = '{mode}', 'write.merge.mode' = '{mode}')"
    )
    spark_sql.sql("INSERT INTO lake.db.t SELECT id, concat('v', id) FROM range(1, 9)")
    spark_sql.sql("DELETE FROM lake.db.t WHERE id IN (2, 5)")
    spark_sql.sql("UPDATE lake.db.t SET v = 'changed' WHERE id = 3")
    spark_sql.sql(
        "MERGE INTO lake.db.t t USING (SELECT * FROM VALUES (4, 'gone'), (6, 'merged'), (9, 'new') "
        "AS s(id, v)) s ON t.id = s.id "
        "WHEN MATCHED AND s.v = 'gone' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    expected = [[1, "v1"], [3, "changed"], [6, "merged"], [7, "v7"], [8, "v8"], [9, "new"]]
    assert spark_sql.sql("SELECT id, v FROM lake.db.t ORDER BY id") == expected

    # content 0: data files, 1: position deletes. Copy-on-write rewrites data files instead.
    contents = {row[0] for row in spark_sql.sql("SELECT content FROM lake.db.t.files")}
    assert contents == ({0, 1} if mode == "merge-on-read" else {0})
    # The lakehouse's catalog (pyiceberg) applies Spark's delete files the same way.
    assert [list(r) for r in arrow_rows(lake, "db.t", "id", "v")] == expected


def test_alter_table_columns_partitions_and_name(spark_sql: SparkSQLSession, lake: Lake) -> None:
    spark_sql.sql("CREATE NAMESPACE lake.db")
    spark_sql.sql(
        "CREATE TABLE lake.db.events (id BIGINT, kind STRING) USING iceberg PARTITIONED BY (kind)"
    )
    spark_sql.sql("INSERT INTO lake.db.events VALUES (1, 'click'), (2, 'view')")
    spark_sql.sql("ALTER TABLE lake.db.events ADD COLUMN note STRING")
    spark_sql.sql("ALTER TABLE lake.db.events RENAME COLUMN kind TO category")
    # Partition evolution: new data by a bucket of id as well; old files keep their spec.
    spark_sql.sql("ALTER TABLE lake.db.events ADD PARTITION FIELD bucket(4, id) AS id_bucket")
    spark_sql.sql("INSERT INTO lake.db.events VALUES (3, 'click', 'after')")
    spark_sql.sql("ALTER TABLE lake.db.events DROP PARTITION FIELD category")
    spark_sql.sql("INSERT INTO lake.db.events VALUES (4, 'view', 'last')")
    # The new name is within the catalog (Spark would read lake.db.clicks as namespace lake.db).
    spark_sql.sql("ALTER TABLE lake.db.events RENAME TO db.clicks")

    rows = spark_sql.sql("SELECT id, category, note FROM lake.db.clicks ORDER BY id")
    assert rows == [
        [1, "click", None],
        [2, "view", None],
        [3, "click", "after"],
        [4, "view", "last"],
    ]
    specs = spark_sql.sql("SELECT DISTINCT spec_id FROM lake.db.clicks.files ORDER BY spec_id")
    assert specs == [[0], [1], [2]]

    assert lake.catalog.list_tables("db") == [("db", "clicks")]
    table = lake.catalog.load_table(("db", "clicks"))
    assert [f.name for f in table.schema().fields] == ["id", "category", "note"]
    assert [f.name for f in table.spec().fields] == ["id_bucket"]
    assert len(table.specs()) == 3
    assert arrow_rows(lake, "db.clicks", "id", "category") == [
        (1, "click"),
        (2, "view"),
        (3, "click"),
        (4, "view"),
    ]


def test_metadata_tables_and_time_travel(spark_lake: SparkLake, lake: Lake) -> None:
    spark = spark_lake.catalog()
    spark.sql("CREATE NAMESPACE lake.db")
    spark.sql("CREATE TABLE lake.db.t (id BIGINT) USING iceberg")
    spark.sql("INSERT INTO lake.db.t VALUES (1), (2)")
    version_after_first = lake.version()
    spark.sql("INSERT INTO lake.db.t VALUES (3)")
    spark.sql("DELETE FROM lake.db.t WHERE id = 1")

    snapshots = spark.sql(
        "SELECT snapshot_id, operation FROM lake.db.t.snapshots ORDER BY committed_at"
    )
    assert [op for _, op in snapshots] == ["append", "append", "delete"]
    history = spark.sql("SELECT snapshot_id, is_current_ancestor FROM lake.db.t.history")
    assert [h[0] for h in history] == [s[0] for s in snapshots]
    files = spark.sql("SELECT file_path, record_count FROM lake.db.t.files")
    # Spark names local files file:/path (Hadoop's form of file:///path): the same files.
    table_folder = urlparse(lake.warehouse).path + "/db/t-"
    assert all(urlparse(path).path.startswith(table_folder) for path, _ in files), files
    assert sum(count for _, count in files) == 2  # the delete rewrote the file that held 1

    first = snapshots[0][0]
    assert spark.sql(f"SELECT id FROM lake.db.t VERSION AS OF {first} ORDER BY id") == [[1], [2]]
    assert spark.sql("SELECT id FROM lake.db.t ORDER BY id") == [[2], [3]]

    # The lakehouse's own time travel: the whole catalog at a lakehouse version, read-only.
    past = spark_lake.catalog("past", warehouse=f"lakecore@version={version_after_first}")
    assert past.sql("SELECT id FROM past.db.t ORDER BY id") == [[1], [2]]
    refused = past.fails("INSERT INTO past.db.t VALUES (9)")
    assert refused.mentions("ForbiddenException")
    assert refused.mentions(f"lakehouse version {version_after_first}, read-only")
    assert spark.sql("SELECT count(*) FROM lake.db.t") == [[2]]


class InterposedWriter:
    """ASGI middleware: before the first ``updateTable`` of ``path`` reaches the server, another
    writer (pyiceberg, through the lakehouse's catalog) commits to the same table, so the first
    request's requirements no longer hold."""

    def __init__(self, inner: ASGIApp, path: str, lake: Lake) -> None:
        self.inner, self.path, self.lake = inner, path, lake
        self.done = False

    def append_elsewhere(self) -> None:
        import pyarrow as pa

        table = self.lake.catalog.load_table(("db", "t"))
        table.append(pa.table({"id": pa.array([100], pa.int64()), "writer": ["pyiceberg"]}))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not self.done
            and scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == self.path
        ):
            self.done = True
            await run_in_threadpool(self.append_elsewhere)
        await self.inner(scope, receive, send)


def test_a_commit_conflict_is_retried_by_iceberg(
    spark_lake: SparkLake, lake: Lake, caplog: pytest.LogCaptureFixture
) -> None:
    spark = spark_lake.catalog()
    spark.sql("CREATE NAMESPACE lake.db")
    spark.sql("CREATE TABLE lake.db.t (id BIGINT, writer STRING) USING iceberg")
    spark.sql("INSERT INTO lake.db.t VALUES (1, 'spark')")
    lake.server.serve(InterposedWriter(app(lake.catalog), "/v1/namespaces/db/tables/t", lake))

    with caplog.at_level(logging.INFO, logger="lakecore.rest.access"):
        spark.sql("INSERT INTO lake.db.t VALUES (2, 'spark')")
    commits = [
        r.getMessage().split()[2]
        for r in caplog.records
        if r.name == "lakecore.rest.access" and "operation=updateTable" in r.getMessage()
    ]
    # Spark's commit asserted the snapshot it had read; it lost (409), and Iceberg reloaded
    # the table, kept the other writer's snapshot and committed again.
    assert commits == ["409", "200"]
    assert spark.sql("SELECT id, writer FROM lake.db.t ORDER BY id") == [
        [1, "spark"],
        [2, "spark"],
        [100, "pyiceberg"],
    ]
    assert len(lake.catalog.load_table(("db", "t")).metadata.snapshots) == 3
    metrics = requests.get(f"{lake.url}/metrics").text
    assert 'lakecore_rest_commit_conflicts_total{operation="updateTable"} 1.0' in metrics


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"etl read-write {WRITER_SECRET}\ndashboards read-only {READER_SECRET}\n")
    return path


def test_oauth2_client_credentials(spark_lake: SparkLake, lake: Lake, token_file: Path) -> None:
    url = lake.secure(Authenticator(read_token_file(token_file)))
    tokens = f"{url}/v1/oauth/tokens"
    etl = spark_lake.catalog(credential=f"etl:{WRITER_SECRET}", **{"oauth2-server-uri": tokens})
    etl.sql("CREATE NAMESPACE lake.db")
    etl.sql("CREATE TABLE lake.db.t (id BIGINT) USING iceberg")
    etl.sql("INSERT INTO lake.db.t VALUES (1), (2)")

    dashboards = spark_lake.catalog(
        credential=f"dashboards:{READER_SECRET}", **{"oauth2-server-uri": tokens}
    )
    assert dashboards.sql("SELECT sum(id) FROM lake.db.t") == [[3]]
    refused = dashboards.fails("INSERT INTO lake.db.t VALUES (3)")
    assert refused.mentions("ForbiddenException") and refused.mentions("read-only")

    wrong = spark_lake.catalog(
        credential="etl:not-the-secret-at-all", **{"oauth2-server-uri": tokens}
    )
    assert wrong.fails("SHOW NAMESPACES IN lake").mentions("invalid_client")
    nothing = spark_lake.catalog()
    assert nothing.fails("SHOW NAMESPACES IN lake").mentions("NotAuthorized")
    assert lake.catalog.load_table(("db", "t")).scan().to_arrow().num_rows == 2
