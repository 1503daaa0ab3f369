"""Commits through the REST server with pyiceberg's RestCatalog: races, several server
processes on one lakehouse, multi-table transactions, and time travel."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg.exceptions import CommitFailedException, ForbiddenError
from pyiceberg.table import Table
from pyiceberg.types import LongType

from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app
from tests.rest.conftest import Served

ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string())])


def rows(ids: range, writer: str) -> pa.Table:
    return pa.table({"id": list(ids), "writer": [writer] * len(ids)}, schema=ARROW_SCHEMA)


def ids_of(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_the_loser_of_a_race_gets_409_and_its_retry_lands(
    rest: Served, caplog: pytest.LogCaptureFixture
) -> None:
    alice, bob = rest.client(), rest.client()
    alice.create_namespace("db")
    alice.create_table("db.t", ARROW_SCHEMA)
    alice_table, bob_table = alice.load_table("db.t"), bob.load_table("db.t")
    alice_table.append(rows(range(0, 3), "alice"))
    # Bob's table is stale: his commit asserts main is still at no snapshot, gets 409, and
    # pyiceberg (0.12 retries an append on CommitFailedException) reloads and commits again.
    with caplog.at_level(logging.INFO, logger="lakecore.rest.access"):
        bob_table.append(rows(range(3, 5), "bob"))
    commits = [
        r.getMessage().split()[2]
        for r in caplog.records
        if r.name == "lakecore.rest.access" and "operation=updateTable" in r.getMessage()
    ]
    assert commits == ["409", "200"]
    final = rest.catalog.load_table(("db", "t"))
    assert ids_of(final) == [0, 1, 2, 3, 4]
    assert len(final.metadata.snapshots) == 2
    metrics = requests.get(f"{rest.url}/metrics").text
    assert 'lakecore_rest_commit_conflicts_total{operation="updateTable"} 1.0' in metrics
    # A schema change is not retried by pyiceberg: the loser sees the 409 itself.
    stale = alice.load_table("db.t")
    with bob.load_table("db.t").update_schema() as update:
        update.add_column("bobs", LongType())
    with (
        pytest.raises(CommitFailedException, match="current schema id has changed"),
        stale.update_schema() as update,
    ):
        update.add_column("alices", LongType())
    assert rest.catalog.load_table(("db", "t")).schema().find_field("bobs")


def test_two_server_processes_on_one_lakehouse_lose_no_commit(rest: Served) -> None:
    """Two servers, each with its own catalog object (as two processes have), and one writer
    thread per server appending with the usual reload-and-retry on 409."""
    second_url = rest.server.serve_second(app(rest.new_catalog()))
    setup = rest.client()
    setup.create_namespace("db")
    setup.create_table("db.t", ARROW_SCHEMA)
    appends_each = 4
    conflicts = {"first": 0, "second": 0}
    failures: list[BaseException] = []

    def writer(name: str, url: str, start: int) -> None:
        client = rest.client() if url == rest.url else type(setup)("rest2", uri=url)
        try:
            for i in range(appends_each):
                batch = rows(range(start + i, start + i + 1), name)
                for _attempt in range(20):
                    try:
                        client.load_table("db.t").append(batch)
                        break
                    except CommitFailedException:
                        conflicts[name] += 1
                        time.sleep(0.005)
                else:
                    raise AssertionError(f"{name}: 20 conflicts in a row")
        except BaseException as exc:
            failures.append(exc)

    threads = [
        threading.Thread(target=writer, args=("first", rest.url, 0)),
        threading.Thread(target=writer, args=("second", second_url, 100)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    final = rest.catalog.load_table(("db", "t"))
    assert ids_of(final) == [*range(0, appends_each), *range(100, 100 + appends_each)]
    assert len(final.metadata.snapshots) == 2 * appends_each
    # Every snapshot's parent is the one before it: no commit replaced another's.
    parents = {s.parent_snapshot_id for s in final.metadata.snapshots}
    assert len(parents) == 2 * appends_each


def transaction_body(
    rest: Served, tables: dict[str, Table], fail: str | None = None
) -> dict[str, Any]:
    changes = []
    for name, table in tables.items():
        snapshot = table.current_snapshot()
        expected = snapshot.snapshot_id if snapshot is not None else None
        changes.append(
            {
                "identifier": {"namespace": ["db"], "name": name},
                "requirements": [
                    {
                        "type": "assert-ref-snapshot-id",
                        "ref": "main",
                        "snapshot-id": 12345 if name == fail else expected,
                    }
                ],
                "updates": [{"action": "set-properties", "updates": {"batch": "42"}}],
            }
        )
    return {"table-changes": changes}


def test_a_multi_table_transaction_lands_as_one_version_or_not_at_all(rest: Served) -> None:
    client = rest.client()
    client.create_namespace("db")
    for name in ("a", "b", "c"):
        client.create_table(f"db.{name}", ARROW_SCHEMA).append(rows(range(1), name))
    tables = {name: client.load_table(f"db.{name}") for name in ("a", "b", "c")}
    lakehouse = Lakehouse.open(str(rest.root))
    before = lakehouse.version
    locations = {n: t.metadata_location for n, t in tables.items()}

    refused = requests.post(
        f"{rest.url}/v1/transactions/commit", json=transaction_body(rest, tables, fail="c")
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["type"] == "CommitFailedException"
    assert lakehouse.refresh().version == before
    for name in tables:
        assert rest.catalog.load_table(("db", name)).metadata_location == locations[name]
        assert "batch" not in rest.catalog.load_table(("db", name)).properties

    landed = requests.post(
        f"{rest.url}/v1/transactions/commit", json=transaction_body(rest, tables)
    )
    assert landed.status_code == 204, landed.text
    assert lakehouse.refresh().version == before + 1
    for name in tables:
        assert rest.catalog.load_table(("db", name)).properties["batch"] == "42"

    # A transaction may create a table (assert-create) along with changing others.
    create = {
        "identifier": {"namespace": ["db"], "name": "new"},
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
            {"action": "upgrade-format-version", "format-version": 2},
            {
                "action": "add-schema",
                "schema": {
                    "type": "struct",
                    "schema-id": 0,
                    "fields": [{"id": 1, "name": "x", "type": "long", "required": False}],
                },
            },
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {
                "action": "set-location",
                "location": f"{rest.catalog.warehouse}/db/new-in-a-transaction",
            },
        ],
    }
    change_a = transaction_body(rest, {"a": client.load_table("db.a")})["table-changes"][0]
    created_with = requests.post(
        f"{rest.url}/v1/transactions/commit", json={"table-changes": [create, change_a]}
    )
    assert created_with.status_code == 204, created_with.text
    assert lakehouse.refresh().version == before + 2
    assert rest.catalog.load_table(("db", "new")).schema().find_field("x")
    again = requests.post(
        f"{rest.url}/v1/transactions/commit",
        json={"table-changes": [create]},
    )
    assert again.status_code == 409 and "already exists" in again.json()["error"]["message"]

    missing = requests.post(
        f"{rest.url}/v1/transactions/commit",
        json={"table-changes": [{"requirements": [], "updates": []}]},
    )
    assert missing.status_code == 400 and "identifier" in missing.json()["error"]["message"]
    twice = transaction_body(rest, {"a": tables["a"]})
    twice["table-changes"] *= 2
    assert requests.post(f"{rest.url}/v1/transactions/commit", json=twice).status_code == 400


def test_time_travel_prefix_reads_the_old_rows_and_refuses_writes(rest: Served) -> None:
    client = rest.client()
    client.create_namespace("db")
    client.create_table("db.t", ARROW_SCHEMA).append(rows(range(0, 2), "v1"))
    old_version = Lakehouse.open(str(rest.root)).version
    time.sleep(0.01)  # the next version is created at a later millisecond
    client.load_table("db.t").append(rows(range(2, 5), "v2"))
    client.create_table("db.later", ARROW_SCHEMA)

    config = requests.get(
        f"{rest.url}/v1/config", params={"warehouse": f"lakecore@version={old_version}"}
    )
    assert config.json()["overrides"] == {"prefix": f"version-{old_version}"}
    past = rest.client(warehouse=f"lakecore@version={old_version}")
    assert ids_of(past.load_table("db.t")) == [0, 1]
    assert past.list_tables("db") == [("db", "t")]
    assert ids_of(client.load_table("db.t")) == [0, 1, 2, 3, 4]

    with pytest.raises(ForbiddenError, match=f"lakehouse version {old_version}, read-only"):
        past.load_table("db.t").append(rows(range(9, 10), "nope"))
    with pytest.raises(ForbiddenError, match="read-only"):
        past.create_namespace("other")
    assert ids_of(client.load_table("db.t")) == [0, 1, 2, 3, 4]

    as_of = rest.client(warehouse=f"@as-of={_iso_after(rest, old_version)}")
    assert ids_of(as_of.load_table("db.t")) == [0, 1]

    gone = requests.get(f"{rest.url}/v1/config", params={"warehouse": "lakecore@version=999"})
    assert gone.status_code == 404
    assert gone.json()["error"]["type"] == "NoSuchWarehouseException"
    malformed = requests.get(f"{rest.url}/v1/config", params={"warehouse": "lakecore@v=1"})
    assert malformed.status_code == 400


def _iso_after(rest: Served, version: int) -> str:
    """An ISO-8601 time at which ``version`` was the newest (its own creation time)."""
    import datetime as dt

    lakehouse = Lakehouse.open(str(rest.root))
    info = next(v for v in lakehouse.versions() if v.version == version)
    assert info.created_at_millis is not None
    when = dt.datetime.fromtimestamp(info.created_at_millis / 1000, tz=dt.UTC)
    return when.isoformat().replace("+00:00", "Z")


def test_a_commits_answer_is_the_metadata_it_wrote(rest: Served) -> None:
    """updateTable answers with the JSON the catalog wrote to the new metadata file (not
    rendered twice): the same document pyiceberg's model renders, and the file's content."""
    client = rest.client()
    client.create_namespace("answer")
    client.create_table("answer.t", ARROW_SCHEMA)
    client.load_table("answer.t").append(rows(range(0, 2), "w"))
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    response = requests.post(f"{rest.url}/v1/namespaces/answer/tables/t", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer = response.json()
    table = rest.catalog.load_table(("answer", "t"))
    assert answer["metadata-location"] == table.metadata_location
    written = rest.catalog.written_metadata_json(table.metadata_location)
    assert written is not None and json.loads(written) == answer["metadata"]
    assert answer["metadata"] == json.loads(table.metadata.model_dump_json(exclude_none=True))
    assert answer["metadata"]["properties"]["k"] == "v"
    assert len(answer["metadata"]["snapshots"]) == 1
