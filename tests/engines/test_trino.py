"""Trino 476 (its Iceberg connector, ``iceberg.catalog.type=rest``) through the REST server.

Each test's catalog ``lake`` is the README's ``etc/catalog/lake.properties`` (with local files:
``fs.native-local.enabled``), created on the session's one Trino server with ``CREATE CATALOG``
and dropped after the test; what Trino wrote is read back through the lakehouse's own catalog.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import requests

from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from lakecore.rest.tokenfile import read_token_file
from tests.engines.conftest import Lake, TrinoLake
from tests.engines.test_spark_sql import READER_SECRET, WRITER_SECRET, InterposedWriter


def arrow_rows(lake: Lake, table: str, *columns: str) -> list[list[Any]]:
    data = lake.catalog.load_table(tuple(table.split("."))).scan().to_arrow()
    return sorted(
        [list(r) for r in zip(*(data.column(c).to_pylist() for c in columns), strict=True)]
    )


def test_create_insert_merge_update_delete(trino: TrinoLake, lake: Lake) -> None:
    trino.query("CREATE SCHEMA lake.sales")
    assert ["sales"] in trino.query("SHOW SCHEMAS FROM lake")
    trino.query(
        "CREATE TABLE lake.sales.orders (id bigint, region varchar, amount double, ts timestamp(6)) "
        "WITH (partitioning = ARRAY['region', 'day(ts)'])"
    )
    trino.query(
        "INSERT INTO lake.sales.orders VALUES "
        "(1, 'eu', 10.0, TIMESTAMP '2026-11-01 10:00:00'), "
        "(2, 'us', 20.0, TIMESTAMP '2026-11-01 11:00:00'), "
        "(3, 'eu', 30.0, TIMESTAMP '2026-11-02 09:00:00'), "
        "(5, 'us', 50.0, TIMESTAMP '2026-11-04 09:00:00')"
    )
    trino.query(
        "MERGE INTO lake.sales.orders t USING (VALUES (2, 'us', 25.0), (4, 'apac', 40.0)) "
        "AS s(id, region, amount) ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET amount = s.amount "
        "WHEN NOT MATCHED THEN INSERT (id, region, amount, ts) "
        "VALUES (s.id, s.region, s.amount, TIMESTAMP '2026-11-03 08:00:00')"
    )
    assert trino.query("UPDATE lake.sales.orders SET amount = 35.0 WHERE id = 3") == [[1]]
    assert trino.query("DELETE FROM lake.sales.orders WHERE id = 5") == [[1]]
    expected = [[1, "eu", 10.0], [2, "us", 25.0], [3, "eu", 35.0], [4, "apac", 40.0]]
    assert trino.query("SELECT id, region, amount FROM lake.sales.orders ORDER BY id") == expected
    # Trino deletes by position delete files (merge-on-read).
    contents = trino.query('SELECT DISTINCT content FROM lake.sales."orders$files" ORDER BY 1')
    assert contents == [[0], [1]]
    trino.query(
        "CREATE TABLE lake.sales.by_region AS "
        "SELECT region, sum(amount) AS total FROM lake.sales.orders GROUP BY region"
    )

    assert lake.catalog.list_tables("sales") == [("sales", "by_region"), ("sales", "orders")]
    orders = lake.catalog.load_table(("sales", "orders"))
    assert [f.name for f in orders.spec().fields] == ["region", "ts_day"]
    assert orders.location().startswith(lake.warehouse + "/sales/orders-")
    assert arrow_rows(lake, "sales.orders", "id", "region", "amount") == expected
    assert arrow_rows(lake, "sales.by_region", "region", "total") == [
        ["apac", 40.0],
        ["eu", 45.0],
        ["us", 25.0],
    ]


def test_a_schema_made_elsewhere_takes_trinos_tables(trino: TrinoLake, lake: Lake) -> None:
    # A namespace pyiceberg (or Spark, or DuckDB) made has no location property: the server
    # names its default one, so Trino stages the create there (it refused its own new table,
    # "Cannot create a table on a non-empty location", before).
    lake.pyiceberg().create_namespace("shared")
    trino.query("CREATE TABLE lake.shared.t (id bigint)")
    trino.query("INSERT INTO lake.shared.t VALUES (7)")
    assert arrow_rows(lake, "shared.t", "id") == [[7]]
    assert (
        lake.catalog.load_table(("shared", "t"))
        .location()
        .startswith(lake.warehouse + "/shared/t-")
    )


def test_alter_table_columns_partitions_and_name(trino: TrinoLake, lake: Lake) -> None:
    trino.query("CREATE SCHEMA lake.db")
    trino.query(
        "CREATE TABLE lake.db.events (id bigint, kind varchar) WITH (partitioning = ARRAY['kind'])"
    )
    trino.query("INSERT INTO lake.db.events VALUES (1, 'click'), (2, 'view')")
    trino.query("ALTER TABLE lake.db.events ADD COLUMN note varchar")
    trino.query("ALTER TABLE lake.db.events RENAME COLUMN kind TO category")
    trino.query(
        "ALTER TABLE lake.db.events SET PROPERTIES partitioning = ARRAY['category', 'bucket(id, 4)']"
    )
    trino.query("INSERT INTO lake.db.events VALUES (3, 'click', 'after')")
    trino.query("ALTER TABLE lake.db.events RENAME TO lake.db.clicks")

    rows = trino.query("SELECT id, category, note FROM lake.db.clicks ORDER BY id")
    assert rows == [[1, "click", None], [2, "view", None], [3, "click", "after"]]
    assert lake.catalog.list_tables("db") == [("db", "clicks")]
    table = lake.catalog.load_table(("db", "clicks"))
    assert [f.name for f in table.schema().fields] == ["id", "category", "note"]
    assert [f.name for f in table.spec().fields] == ["category", "id_bucket"]
    assert len(table.specs()) == 2
    assert arrow_rows(lake, "db.clicks", "id", "note") == [[1, None], [2, None], [3, "after"]]


def test_metadata_tables_and_time_travel(trino: TrinoLake, lake: Lake) -> None:
    trino.query("CREATE SCHEMA lake.db")
    trino.query("CREATE TABLE lake.db.t (id bigint)")
    trino.query("INSERT INTO lake.db.t VALUES 1, 2")
    version_after_first = lake.version()
    first = trino.query('SELECT snapshot_id FROM lake.db."t$snapshots" ORDER BY committed_at')[-1][
        0
    ]
    trino.query("INSERT INTO lake.db.t VALUES 3")
    trino.query("DELETE FROM lake.db.t WHERE id = 1")

    snapshots = trino.query(
        'SELECT snapshot_id, operation FROM lake.db."t$snapshots" ORDER BY committed_at'
    )
    # Trino's CREATE TABLE commits an empty first snapshot.
    assert [op for _, op in snapshots] == ["append", "append", "append", "delete"]
    history = trino.query('SELECT snapshot_id FROM lake.db."t$history" ORDER BY made_current_at')
    assert [h[0] for h in history] == [s[0] for s in snapshots]
    files = trino.query('SELECT file_path, content FROM lake.db."t$files"')
    assert all(path.startswith(lake.warehouse + "/db/t-") for path, _ in files)
    assert sorted(content for _, content in files) == [0, 0, 1]

    assert trino.query(f"SELECT id FROM lake.db.t FOR VERSION AS OF {first} ORDER BY id") == [
        [1],
        [2],
    ]
    assert trino.query("SELECT id FROM lake.db.t ORDER BY id") == [[2], [3]]

    # The lakehouse's own time travel: the whole catalog at a lakehouse version, read-only.
    past = trino.catalog(
        **{"iceberg.rest-catalog.warehouse": f"lakecore@version={version_after_first}"}
    )
    assert trino.query(f"SELECT id FROM {past}.db.t ORDER BY id") == [[1], [2]]
    refused = trino.fails(f"INSERT INTO {past}.db.t VALUES 9")
    assert f"lakehouse version {version_after_first}, read-only" in refused.message
    assert trino.query("SELECT count(*) FROM lake.db.t") == [[2]]


def test_a_commit_conflict_is_retried_by_iceberg(
    trino: TrinoLake, lake: Lake, caplog: pytest.LogCaptureFixture
) -> None:
    trino.query("CREATE SCHEMA lake.db")
    trino.query("CREATE TABLE lake.db.t (id bigint, writer varchar)")
    trino.query("INSERT INTO lake.db.t VALUES (1, 'trino')")
    lake.server.serve(InterposedWriter(app(lake.catalog), "/v1/namespaces/db/tables/t", lake))

    with caplog.at_level(logging.INFO, logger="lakecore.rest.access"):
        trino.query("INSERT INTO lake.db.t VALUES (2, 'trino')")
    commits = [
        r.getMessage().split()[2]
        for r in caplog.records
        if r.name == "lakecore.rest.access" and "operation=updateTable" in r.getMessage()
    ]
    # Trino's commit lost (409); Iceberg reloaded and committed again (Trino then commits the
    # table's statistics on their own).
    assert commits[:2] == ["409", "200"] and commits.count("409") == 1
    assert trino.query("SELECT id, writer FROM lake.db.t ORDER BY id") == [
        [1, "trino"],
        [2, "trino"],
        [100, "pyiceberg"],
    ]


def test_oauth2_client_credentials(
    trino: TrinoLake, lake: Lake, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text(f"etl read-write {WRITER_SECRET}\ndashboards read-only {READER_SECRET}\n")
    url = lake.secure(Authenticator(read_token_file(token_file)))

    def secured(credential: str) -> str:
        return trino.catalog(
            **{
                "iceberg.rest-catalog.security": "OAUTH2",
                "iceberg.rest-catalog.oauth2.credential": credential,
                "iceberg.rest-catalog.oauth2.server-uri": f"{url}/v1/oauth/tokens",
            }
        )

    etl = secured(f"etl:{WRITER_SECRET}")
    trino.query(f"CREATE SCHEMA {etl}.db")
    trino.query(f"CREATE TABLE {etl}.db.t AS SELECT 1 AS id")
    dashboards = secured(f"dashboards:{READER_SECRET}")
    assert trino.query(f"SELECT id FROM {dashboards}.db.t") == [[1]]
    refused = trino.fails(f"INSERT INTO {dashboards}.db.t VALUES 2")
    assert "read-only" in refused.message
    # The catalog created before the server wanted tokens now gets 401. Trino passes on the
    # server's reason when it asks for /v1/config; a catalog it had already set up says only
    # that listing failed.
    with caplog.at_level(logging.INFO, logger="lakecore.rest.access"):
        message = trino.fails("SHOW SCHEMAS FROM lake").message
    assert "no bearer token" in message or "Failed to list namespaces" in message, message
    # Each refusal is logged, with no principal.
    refusals = [r.getMessage().split() for r in caplog.records if "principal=" in r.getMessage()]
    assert refusals and all(line[2] == "401" and "principal=-" in line for line in refusals), (
        refusals
    )
    assert requests.get(f"{url}/healthz").status_code == 200
    assert lake.catalog.load_table(("db", "t")).scan().to_arrow().num_rows == 1
