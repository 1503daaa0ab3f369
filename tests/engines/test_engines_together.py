"""Four engines on one lakehouse through the REST server: pyiceberg, DuckDB, Spark SQL and Trino
each write a table (with deletes where the engine has them: pyiceberg's copy-on-write, Spark's
and Trino's delete files), and each reads all four. Then Spark and Trino on a lakehouse on S3
(moto), with the S3 settings the README shows: Spark's S3FileIO, Trino's native S3."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from tests.conftest import S3_TEST_REGION, S3TestServer
from tests.engines.conftest import Lake, SparkLake, TrinoLake
from tests.engines.spark_sql import SparkSQLEngine
from tests.engines.trino import TrinoServer
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


@pytest.fixture
def on_s3(
    s3_lake: Lake, spark_sql_engine: SparkSQLEngine, trino_server: TrinoServer
) -> Iterator[tuple[SparkLake, TrinoLake]]:
    spark, trino = SparkLake(spark_sql_engine, s3_lake), TrinoLake(trino_server, s3_lake)
    yield spark, trino
    spark.close()
    trino.close()


def test_spark_and_trino_on_s3(
    on_s3: tuple[SparkLake, TrinoLake], s3_lake: Lake, s3_server: S3TestServer
) -> None:
    spark_lake, trino_lake = on_s3
    key, secret = s3_server.storage_options()["key"], s3_server.storage_options()["secret"]
    spark = spark_lake.catalog(
        **{
            "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
            "s3.endpoint": s3_server.endpoint,
            "s3.path-style-access": "true",
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "client.region": S3_TEST_REGION,
        }
    )
    trino_lake.catalog(
        "lake",
        **{
            "fs.native-s3.enabled": "true",
            "s3.endpoint": s3_server.endpoint,
            "s3.region": S3_TEST_REGION,
            "s3.path-style-access": "true",
            "s3.aws-access-key": key,
            "s3.aws-secret-key": secret,
        },
    )
    spark.sql("CREATE NAMESPACE lake.db")
    spark.sql(
        "CREATE TABLE lake.db.from_spark (id BIGINT, v STRING) USING iceberg "
        "TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"
    )
    spark.sql("INSERT INTO lake.db.from_spark VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("DELETE FROM lake.db.from_spark WHERE id = 2")
    trino_lake.query("CREATE TABLE lake.db.from_trino AS SELECT * FROM lake.db.from_spark")
    trino_lake.query("UPDATE lake.db.from_trino SET v = 'z' WHERE id = 3")

    assert spark.sql("SELECT id, v FROM lake.db.from_trino ORDER BY id") == [[1, "a"], [3, "z"]]
    assert trino_lake.query("SELECT id, v FROM lake.db.from_spark ORDER BY id") == [
        [1, "a"],
        [3, "c"],
    ]
    for name, expected in (("from_spark", [1, 3]), ("from_trino", [1, 3])):
        table = s3_lake.catalog.load_table(("db", name))
        assert table.location().startswith(s3_lake.warehouse + f"/db/{name}-")
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == expected
