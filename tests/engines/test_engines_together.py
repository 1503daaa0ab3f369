"""Four engines on one lakehouse through the REST server: pyiceberg, DuckDB, Spark SQL and Trino
each write a table (with deletes where the engine has them: pyiceberg's copy-on-write, Spark's
and Trino's delete files), and each reads all four."""

from __future__ import annotations

import pyarrow as pa

from tests.engines.conftest import Lake, SparkLake, TrinoLake
from tests.rest.test_rest_duckdb import run_duckdb

WRITERS = ("pyiceberg", "duckdb", "spark", "trino")
# Every writer writes ids 1-4 and, where it can delete, deletes 2.
EXPECTED = {
    "pyiceberg": [[1, "pyiceberg"], [3, "pyiceberg"], [4, "pyiceberg"]],
    "duckdb": [[1, "duckdb"], [2, "duckdb"], [3, "duckdb"], [4, "duckdb"]],
    "spark": [[1, "spark"], [3, "spark"], [4, "spark"]],
    "trino": [[1, "trino"], [3, "trino"], [4, "trino"]],
}


def test_every_engine_reads_what_every_engine_wrote(
    lake: Lake, spark_lake: SparkLake, trino: TrinoLake
) -> None:
    client = lake.pyiceberg()
    client.create_namespace("x")
    table = client.create_table(
        "x.from_pyiceberg", pa.schema([("id", pa.int64()), ("name", pa.string())])
    )
    table.append(pa.table({"id": [1, 2, 3, 4], "name": ["pyiceberg"] * 4}))
    table.delete("id = 2")

    run_duckdb(
        {
            "endpoint": lake.url,
            "secret": None,
            "statements": [
                "CREATE TABLE lake.x.from_duckdb (id BIGINT, name VARCHAR)",
                "INSERT INTO lake.x.from_duckdb SELECT i, 'duckdb' FROM range(1, 5) t(i)",
            ],
        }
    )

    spark = spark_lake.catalog()
    spark.sql(
        "CREATE TABLE lake.x.from_spark (id BIGINT, name STRING) USING iceberg "
        "PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"
    )
    spark.sql("INSERT INTO lake.x.from_spark SELECT id, 'spark' FROM range(1, 5)")
    spark.sql("DELETE FROM lake.x.from_spark WHERE id = 2")

    trino.query("CREATE TABLE lake.x.from_trino (id bigint, name varchar)")
    trino.query(
        "INSERT INTO lake.x.from_trino VALUES (1, 'trino'), (2, 'trino'), (3, 'trino'), (4, 'trino')"
    )
    trino.query("DELETE FROM lake.x.from_trino WHERE id = 2")

    select = "SELECT id, name FROM lake.x.from_{} ORDER BY id"
    read_by = {
        "spark": [spark.sql(select.format(w)) for w in WRITERS],
        "trino": [trino.query(select.format(w)) for w in WRITERS],
        "duckdb": [
            [[int(i), name] for i, name in rows]
            for rows in run_duckdb(
                {
                    "endpoint": lake.url,
                    "secret": None,
                    "statements": [select.format(w) for w in WRITERS],
                }
            )
        ],
        "pyiceberg": [
            sorted(
                [r["id"], r["name"]]
                for r in client.load_table(f"x.from_{w}").scan().to_arrow().to_pylist()
            )
            for w in WRITERS
        ],
    }
    expected = [EXPECTED[w] for w in WRITERS]
    for reader, tables in read_by.items():
        assert tables == expected, f"{reader} read {tables}"
