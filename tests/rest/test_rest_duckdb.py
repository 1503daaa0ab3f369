"""DuckDB (1.5.5, with the iceberg, httpfs and avro extensions from the package index) through the
REST server: attach, create a schema and a table, insert, select; read pyiceberg's table, and
pyiceberg reads DuckDB's.

DuckDB runs in its own venv (``make`` builds ``.venv-duckdb``: its pinned packages stay out of
lakecore's), as a subprocess of this test (``tests/rest/duckdb_client.py``); the server runs in
this process. It authenticates with the OAuth2 client-credentials exchange, as the README shows.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from tests.rest.conftest import Served

REPO = Path(__file__).resolve().parents[2]
DUCKDB_PYTHON = Path(os.environ.get("LAKECORE_DUCKDB_PYTHON", REPO / ".venv-duckdb/bin/python"))
CLIENT = Path(__file__).with_name("duckdb_client.py")
SECRET = "duckdb-test-secret-0123456789"


def run_duckdb(spec: dict[str, Any]) -> list[list[list[str]]]:
    if not DUCKDB_PYTHON.exists():
        pytest.skip(f"no DuckDB venv at {DUCKDB_PYTHON}: run `make .venv-duckdb/.installed`")
    done = subprocess.run(
        [str(DUCKDB_PYTHON), str(CLIENT), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: list[list[list[str]]] = json.loads(done.stdout)
    return result


def test_duckdb_writes_and_reads_through_the_server(rest: Served, serve_app: Any) -> None:
    authenticator = Authenticator([("duck", "read-write", SECRET)])
    url = serve_app(app(rest.catalog, authenticator=authenticator))
    rest.url = url
    pyiceberg = rest.client(token=SECRET)
    pyiceberg.create_namespace("shared")
    written = pyiceberg.create_table(
        "shared.from_pyiceberg", pa.schema([("id", pa.int64()), ("name", pa.string())])
    )
    written.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}))

    results = run_duckdb(
        {
            "endpoint": url,
            "secret": {
                "CLIENT_ID": "duck",
                "CLIENT_SECRET": SECRET,
                "OAUTH2_SERVER_URI": f"{url}/v1/oauth/tokens",
            },
            "statements": [
                "CREATE SCHEMA lake.duck",
                "CREATE TABLE lake.duck.events (id BIGINT, kind VARCHAR, amount DOUBLE)",
                "INSERT INTO lake.duck.events VALUES (1, 'click', 0.5), (2, 'view', 1.25)",
                "INSERT INTO lake.duck.events VALUES (3, 'click', 2.0)",
                "SELECT id, kind, amount FROM lake.duck.events ORDER BY id",
                "SELECT count(*), sum(id) FROM lake.shared.from_pyiceberg",
                "SELECT name FROM lake.shared.from_pyiceberg WHERE id = 2",
                # Staged creates and inserts of two tables in one DuckDB transaction.
                "BEGIN TRANSACTION",
                "CREATE TABLE lake.duck.a (id BIGINT)",
                "INSERT INTO lake.duck.a VALUES (1), (2)",
                "CREATE TABLE lake.duck.b (id BIGINT)",
                "INSERT INTO lake.duck.b VALUES (3)",
                "COMMIT",
                "SELECT (SELECT sum(id) FROM lake.duck.a), (SELECT sum(id) FROM lake.duck.b)",
            ],
        }
    )
    assert results[4] == [["1", "click", "0.5"], ["2", "view", "1.25"], ["3", "click", "2.0"]]
    assert results[5] == [["3", "6"]]
    assert results[6] == [["b"]]
    assert results[-1] == [["3", "3"]]
    assert pyiceberg.list_tables("duck") == [("duck", "a"), ("duck", "b"), ("duck", "events")]

    from_duckdb = pyiceberg.load_table("duck.events").scan().to_arrow().sort_by("id")
    assert from_duckdb.column("id").to_pylist() == [1, 2, 3]
    assert from_duckdb.column("kind").to_pylist() == ["click", "view", "click"]
    assert len(from_duckdb.schema) == 3
    # DuckDB's table is a lakehouse table like any other, its files under the warehouse.
    table = rest.catalog.load_table(("duck", "events"))
    assert table.metadata_location.startswith(rest.catalog.warehouse)
    assert len(table.metadata.snapshots) == 2
