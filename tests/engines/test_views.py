"""Iceberg views from Spark SQL and Trino through the REST server: each creates a view, queries
it, replaces it and drops it; each reads the other's view; pyiceberg lists and loads both; a
time-travel catalog shows a view as it was. One test on the session's two engines (a few
seconds: the JVMs are shared)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import requests

from tests.engines.conftest import Lake, SparkLake, TrinoLake


def add_dialect(lake: Lake, view: str, dialect: str, sql: str) -> None:
    """Add ``dialect``'s SQL to the view's current version, through ``replaceView``."""
    url = f"{lake.url}/v1/namespaces/x/views/{view}"
    metadata: dict[str, Any] = requests.get(url).json()["metadata"]
    current = next(
        v for v in metadata["versions"] if v["version-id"] == metadata["current-version-id"]
    )
    both = {
        **current,
        "representations": [
            *current["representations"],
            {"type": "sql", "sql": sql, "dialect": dialect},
        ],
    }
    answer = requests.post(
        url,
        json={
            "requirements": [{"type": "assert-view-uuid", "uuid": metadata["view-uuid"]}],
            "updates": [
                {"action": "add-view-version", "view-version": both},
                {"action": "set-current-view-version", "view-version-id": -1},
                # An engine's CREATE OR REPLACE writes its own dialect alone; Iceberg's client
                # refuses to drop the other's unless the view allows it.
                {
                    "action": "set-properties",
                    "updates": {"replace.drop-dialect.allowed": "true"},
                },
            ],
        },
    )
    answer.raise_for_status()


def test_spark_and_trino_views(lake: Lake, spark_lake: SparkLake, trino: TrinoLake) -> None:
    lake.catalog.create_namespace("x")
    table = lake.catalog.create_table("x.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}))
    spark = spark_lake.catalog()

    spark.sql("CREATE VIEW lake.x.from_spark AS SELECT id, name FROM lake.x.t WHERE id > 1")
    assert spark.sql("SELECT id FROM lake.x.from_spark ORDER BY id") == [[2], [3]]
    trino.query("CREATE VIEW lake.x.from_trino AS SELECT id, name FROM lake.x.t WHERE id < 3")
    assert trino.query("SELECT id FROM lake.x.from_trino ORDER BY id") == [[1], [2]]

    # Each reads the other's view. An Iceberg view keeps its SQL per dialect: Spark reads
    # another dialect's SQL when its own is missing; Trino reads only "trino", so Spark's view
    # gets a Trino representation the way a multi-engine tool adds one (a replaceView that adds
    # a version holding both).
    assert spark.sql("SELECT id FROM lake.x.from_trino ORDER BY id") == [[1], [2]]
    refused = trino.fails("SELECT id FROM lake.x.from_spark")
    assert "ICEBERG_UNSUPPORTED_VIEW_DIALECT" in str(refused)
    add_dialect(lake, "from_spark", "trino", "SELECT id, name FROM lake.x.t WHERE id > 1")
    assert trino.query("SELECT id FROM lake.x.from_spark ORDER BY id") == [[2], [3]]
    assert spark.sql("SELECT id FROM lake.x.from_spark ORDER BY id") == [[2], [3]]

    # pyiceberg sees both, through REST and through the lakehouse's own catalog.
    client = lake.pyiceberg()
    assert sorted(client.list_views("x")) == [("x", "from_spark"), ("x", "from_trino")]
    assert client.load_view("x.from_spark").sql_for("spark") is not None
    assert client.load_view("x.from_trino").sql_for("trino") is not None
    assert lake.catalog.list_tables("x") == [("x", "t")]
    before_replace = lake.version()

    spark.sql("CREATE OR REPLACE VIEW lake.x.from_spark AS SELECT id * 10 AS id FROM lake.x.t")
    assert spark.sql("SELECT id FROM lake.x.from_spark ORDER BY id") == [[10], [20], [30]]
    trino.query("CREATE OR REPLACE VIEW lake.x.from_trino AS SELECT name FROM lake.x.t")
    assert trino.query("SELECT name FROM lake.x.from_trino ORDER BY name") == [["a"], ["b"], ["c"]]
    replaced = lake.catalog.load_view("x.from_spark")
    assert replaced.current_version().version_id > 1
    assert [f.name for f in replaced.schema().fields] == ["id"]

    # Time travel: the lakehouse version before the replace has the first definitions.
    past = lake.catalog.__class__("past", uri=lake.root, version=str(before_replace))
    assert past.load_view("x.from_spark").sql_for("spark").sql.endswith("WHERE id > 1")  # type: ignore[union-attr]

    spark.sql("DROP VIEW lake.x.from_spark")
    trino.query("DROP VIEW lake.x.from_trino")
    assert client.list_views("x") == []
    assert lake.catalog.list_tables("x") == [("x", "t")]
