"""The REST catalog's wire protocol, checked with plain HTTP against Iceberg's OpenAPI spec.

What Java clients (Spark's and Trino's Iceberg REST client) rely on, which pyiceberg's client
does not exercise: the endpoints list, optional body fields, error types per route, paging with
an empty first ``pageToken``, ``snapshots=refs``, ETags, HEAD without bodies, the metrics route.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from lakecore.rest.app import app
from lakecore.rest.paging import DEFAULT_PAGE_SIZE
from tests.rest.conftest import Served

SCHEMA_JSON: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "s", "type": "string", "required": False},
    ],
}
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "s", StringType(), required=False),
)


def error_of(response: requests.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "code"}, body
    assert body["error"]["code"] == response.status_code
    assert body["error"]["message"]
    return response.status_code, body["error"]["type"]


def test_config_lists_exactly_the_served_endpoints(rest: Served) -> None:
    config = requests.get(f"{rest.url}/v1/config").json()
    assert config["defaults"] == {} and config["overrides"] == {}
    assert sorted(config["endpoints"]) == sorted(
        [
            "GET /v1/{prefix}/namespaces",
            "POST /v1/{prefix}/namespaces",
            "GET /v1/{prefix}/namespaces/{namespace}",
            "HEAD /v1/{prefix}/namespaces/{namespace}",
            "DELETE /v1/{prefix}/namespaces/{namespace}",
            "POST /v1/{prefix}/namespaces/{namespace}/properties",
            "GET /v1/{prefix}/namespaces/{namespace}/tables",
            "POST /v1/{prefix}/namespaces/{namespace}/tables",
            "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
            "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
            "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
            "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
            "POST /v1/{prefix}/namespaces/{namespace}/register",
            "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
            "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
            "POST /v1/{prefix}/tables/rename",
            "POST /v1/{prefix}/transactions/commit",
            "GET /v1/{prefix}/namespaces/{namespace}/views",
            "POST /v1/{prefix}/namespaces/{namespace}/views",
            "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
            "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
            "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
            "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
            "POST /v1/{prefix}/views/rename",
            "POST /v1/{prefix}/namespaces/{namespace}/register-view",
        ]
    )
    # An unknown warehouse is the spec's 404 (Java: NoSuchWarehouseException).
    missing = requests.get(f"{rest.url}/v1/config", params={"warehouse": "s3://elsewhere/wh"})
    assert error_of(missing) == (404, "NoSuchWarehouseException")
    for known in ("", "lakecore", str(rest.root), rest.catalog.warehouse):
        assert requests.get(f"{rest.url}/v1/config", params={"warehouse": known}).status_code == 200


def test_sqlcatalog_is_served_without_transactions(tmp_path: Any, serve_app: Any) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    sql = SqlCatalog("sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    url = serve_app(app(sql))
    endpoints = requests.get(f"{url}/v1/config").json()["endpoints"]
    assert "POST /v1/{prefix}/transactions/commit" not in endpoints
    assert not any("views" in e for e in endpoints)  # a SqlCatalog does not store views
    refused = requests.post(f"{url}/v1/transactions/commit", json={"table-changes": []})
    assert error_of(refused) == (406, "UnsupportedOperationException")
    time_travel = requests.get(f"{url}/v1/config", params={"warehouse": "sql@version=1"})
    assert error_of(time_travel) == (404, "NoSuchWarehouseException")


def test_namespace_routes_and_their_error_types(rest: Served) -> None:
    v1 = f"{rest.url}/v1"
    created = requests.post(f"{v1}/namespaces", json={"namespace": ["db"]})
    assert created.status_code == 200
    assert created.json() == {"namespace": ["db"], "properties": {}}
    assert error_of(requests.post(f"{v1}/namespaces", json={"namespace": ["db"]})) == (
        409,
        "AlreadyExistsException",
    )
    head = requests.head(f"{v1}/namespaces/db")
    assert head.status_code == 204 and head.content == b""
    missing_head = requests.head(f"{v1}/namespaces/nope")
    assert missing_head.status_code == 404 and missing_head.content == b""
    assert error_of(requests.get(f"{v1}/namespaces/nope")) == (404, "NoSuchNamespaceException")
    assert error_of(requests.delete(f"{v1}/namespaces/nope")) == (404, "NoSuchNamespaceException")
    assert error_of(requests.get(f"{v1}/namespaces/nope/tables")) == (
        404,
        "NoSuchNamespaceException",
    )

    update = requests.post(
        f"{v1}/namespaces/db/properties",
        json={"removals": ["absent"], "updates": {"owner": "etl"}},
    )
    assert update.status_code == 200
    assert update.json() == {"updated": ["owner"], "removed": [], "missing": ["absent"]}
    overlap = requests.post(
        f"{v1}/namespaces/db/properties", json={"removals": ["owner"], "updates": {"owner": "x"}}
    )
    assert error_of(overlap) == (422, "UnprocessableEntityException")
    loaded = requests.get(f"{v1}/namespaces/db").json()
    # The namespace's default location too (tests/rest/test_rest_java_clients.py says why).
    location = f"{rest.catalog.warehouse}/db"
    assert loaded == {"namespace": ["db"], "properties": {"owner": "etl", "location": location}}

    rest.catalog.create_table(("db", "t"), SCHEMA)
    assert error_of(requests.delete(f"{v1}/namespaces/db")) == (409, "NamespaceNotEmptyException")
    listed = requests.get(f"{v1}/namespaces").json()
    assert listed["namespaces"] == [["db"]]


def test_bodies_follow_the_spec_not_pyicebergs_client_models(rest: Served) -> None:
    """A Java client omits optional fields: no location, no partition spec, no write order, no
    overwrite flag; it sends the identifier in the commit body."""
    v1 = f"{rest.url}/v1"
    requests.post(f"{v1}/namespaces", json={"namespace": ["db"]}).raise_for_status()
    created = requests.post(f"{v1}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA_JSON})
    assert created.status_code == 200, created.text
    result = created.json()
    assert result["metadata-location"].startswith(rest.catalog.warehouse)
    assert result["metadata"]["current-schema-id"] == 0
    assert created.headers["ETag"]

    staged = requests.post(
        f"{v1}/namespaces/db/tables",
        json={"name": "staged", "schema": SCHEMA_JSON, "stage-create": True},
    )
    assert staged.status_code == 200
    assert "metadata-location" not in staged.json()
    assert not rest.catalog.table_exists(("db", "staged"))

    dropped = requests.post(
        f"{v1}/namespaces/db/tables", json={"name": "src", "schema": SCHEMA_JSON}
    )
    src_location = dropped.json()["metadata-location"]
    assert requests.delete(f"{v1}/namespaces/db/tables/src").status_code == 204
    register = requests.post(
        f"{v1}/namespaces/db/register",
        json={"name": "again", "metadata-location": src_location},
    )
    assert register.status_code == 200, register.text
    assert register.json()["metadata-location"] == src_location

    commit = requests.post(
        f"{v1}/namespaces/db/tables/t",
        json={
            "identifier": {"namespace": ["db"], "name": "t"},
            "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
        },
    )
    assert commit.status_code == 200, commit.text
    assert set(commit.json()) == {"metadata-location", "metadata"}
    assert commit.json()["metadata"]["properties"]["k"] == "v"
    assert rest.catalog.load_table(("db", "t")).properties["k"] == "v"

    other_table = requests.post(
        f"{v1}/namespaces/db/tables/t",
        json={"identifier": {"namespace": ["db"], "name": "x"}, "requirements": [], "updates": []},
    )
    assert error_of(other_table) == (400, "BadRequestException")


def test_malformed_bodies_are_400_and_unknown_updates_too(rest: Served) -> None:
    v1 = f"{rest.url}/v1"
    requests.post(f"{v1}/namespaces", json={"namespace": ["db"]}).raise_for_status()
    rest.catalog.create_table(("db", "t"), SCHEMA)
    bad_json = requests.post(
        f"{v1}/namespaces", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert error_of(bad_json) == (400, "BadRequestException")
    assert "malformed JSON" in bad_json.json()["error"]["message"]
    missing_field = requests.post(f"{v1}/namespaces/db/tables", json={"name": "t"})
    assert error_of(missing_field) == (400, "BadRequestException")
    unknown_update = requests.post(
        f"{v1}/namespaces/db/tables/t",
        json={"requirements": [], "updates": [{"action": "add-view-version", "view-version": {}}]},
    )
    assert error_of(unknown_update) == (400, "BadRequestException")
    unknown_requirement = requests.post(
        f"{v1}/namespaces/db/tables/t",
        json={"requirements": [{"type": "assert-view-uuid", "uuid": "x"}], "updates": []},
    )
    assert error_of(unknown_requirement) == (400, "BadRequestException")
    failed = requests.post(
        f"{v1}/namespaces/db/tables/t",
        json={
            "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}],
            "updates": [],
        },
    )
    assert error_of(failed) == (409, "CommitFailedException")
    missing_table = requests.post(
        f"{v1}/namespaces/db/tables/nope", json={"requirements": [], "updates": []}
    )
    assert error_of(missing_table) == (404, "NoSuchTableException")
    wrong_method = requests.put(f"{v1}/namespaces/db")
    assert error_of(wrong_method) == (405, "MethodNotAllowedException")
    assert error_of(requests.get(f"{v1}/no/such/route/at/all")) == (404, "NotFoundException")
    outside = requests.post(
        f"{v1}/namespaces/db/tables",
        json={"name": "outside", "schema": SCHEMA_JSON, "location": "file:///tmp/elsewhere"},
    )
    assert error_of(outside) == (400, "IllegalArgumentException")
    assert "outside the warehouse" in outside.json()["error"]["message"]


def test_body_over_the_limit_is_413(rest: Served, serve_app: Any) -> None:
    url = serve_app(app(rest.catalog, max_body_bytes=1024))
    big = {"namespace": ["db"], "properties": {"x": "y" * 3000}}

    def chunks() -> Any:  # no Content-Length: the limit holds while streaming
        for _ in range(20):
            yield b" " * 200

    # The client writes its whole body before it reads the answer; a server that answered early
    # and closed could make it see a reset connection instead of the 413. Several rounds.
    for _ in range(5):
        assert error_of(requests.post(f"{url}/v1/namespaces", json=big)) == (
            413,
            "RequestEntityTooLargeException",
        )
        assert requests.post(f"{url}/v1/namespaces", data=chunks()).status_code == 413
    assert not rest.catalog.namespace_exists("db")
    assert requests.post(f"{url}/v1/namespaces", json={"namespace": ["db"]}).status_code == 200


def test_list_tables_pages_only_when_asked(rest: Served, serve_app: Any) -> None:
    rest.catalog.create_namespace("db")
    names = [f"t{i:02d}" for i in range(7)]
    for name in reversed(names):
        rest.catalog.create_table(("db", name), SCHEMA)
    url = f"{rest.url}/v1/namespaces/db/tables"
    everything = requests.get(url, params={"pageSize": "2"}).json()
    # No pageToken: every name in one answer, next-page-token null (the spec's rule).
    assert [i["name"] for i in everything["identifiers"]] == names
    assert everything["next-page-token"] is None
    seen: list[str] = []
    token = ""
    pages = 0
    while token is not None:
        answer = requests.get(url, params={"pageToken": token, "pageSize": "3"}).json()
        seen += [i["name"] for i in answer["identifiers"]]
        assert all(i["namespace"] == ["db"] for i in answer["identifiers"])
        token = answer["next-page-token"]
        pages += 1
    assert seen == names and pages == 3
    # A paged listing is one snapshot: a table created between pages is not in it ...
    first = requests.get(url, params={"pageToken": "", "pageSize": "3"}).json()
    rest.catalog.create_table(("db", "t03a"), SCHEMA)
    rest_of_it = requests.get(url, params={"pageToken": first["next-page-token"], "pageSize": "10"})
    assert [i["name"] for i in rest_of_it.json()["identifiers"]] == names[3:]
    # ... and a token still works where its listing is not kept (another server process): the
    # names are listed again and the page starts after the token's last name.
    other_url = serve_app(app(rest.catalog)) + "/v1/namespaces/db/tables"
    elsewhere = requests.get(
        other_url, params={"pageToken": first["next-page-token"], "pageSize": "10"}
    ).json()
    assert [i["name"] for i in elsewhere["identifiers"]] == ["t03", "t03a", *names[4:]]
    assert error_of(requests.get(other_url, params={"pageToken": "bm9wZQ"})) == (
        400,
        "BadRequestException",
    )
    default = requests.get(other_url, params={"pageToken": ""}).json()
    assert len(default["identifiers"]) == 8 <= DEFAULT_PAGE_SIZE
    assert error_of(requests.get(url, params={"pageToken": "", "pageSize": "0"})) == (
        400,
        "BadRequestException",
    )


def test_load_table_snapshots_refs_etag_and_purge(rest: Served) -> None:
    rest.catalog.create_namespace("db")
    table = rest.catalog.create_table(("db", "t"), SCHEMA)
    table.append(pa.table({"id": [1], "s": ["a"]}))
    table = rest.catalog.load_table(("db", "t"))
    first = table.current_snapshot()
    assert first is not None
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").commit()
    table = rest.catalog.load_table(("db", "t"))
    table.append(pa.table({"id": [2], "s": ["b"]}))
    table = rest.catalog.load_table(("db", "t"))
    table.manage_snapshots().remove_tag("v1").commit()
    url = f"{rest.url}/v1/namespaces/db/tables/t"

    everything = requests.get(url)
    assert len(everything.json()["metadata"]["snapshots"]) == 2
    refs_only = requests.get(url, params={"snapshots": "refs"})
    assert len(refs_only.json()["metadata"]["snapshots"]) == 1
    assert refs_only.headers["ETag"] != everything.headers["ETag"]
    not_modified = requests.get(url, headers={"If-None-Match": everything.headers["ETag"]})
    assert not_modified.status_code == 304 and not_modified.content == b""
    assert error_of(requests.get(url, params={"snapshots": "some"})) == (400, "BadRequestException")

    assert requests.head(url).status_code == 204
    metrics = requests.post(
        f"{url}/metrics", json={"report-type": "scan-report", "table-name": "db.t"}
    )
    assert metrics.status_code == 204
    assert error_of(
        requests.post(f"{rest.url}/v1/namespaces/db/tables/nope/metrics", json={"report-type": "x"})
    ) == (404, "NoSuchTableException")

    data_files = [task.file.file_path for task in table.scan().plan_files()]
    assert data_files and all(p.startswith(rest.catalog.warehouse) for p in data_files)
    purge = requests.delete(url, params={"purgeRequested": "true"})
    assert purge.status_code == 204
    assert error_of(requests.get(url)) == (404, "NoSuchTableException")
    from pyiceberg.io import load_file_io

    io = load_file_io({})
    # A purge drops and marks; table maintenance deletes the files once no retained lakehouse
    # version holds the table (tests/rest/test_rest_table_maintenance.py runs it through).
    assert all(io.new_input(p).exists() for p in data_files)
    properties = rest.catalog.lakehouse.refresh().lakehouse_def.properties
    assert any(k.startswith("lakecore.iceberg.purge db t ") for k in properties)


def test_rename_and_its_errors(rest: Served) -> None:
    rest.catalog.create_namespace("db")
    rest.catalog.create_table(("db", "a"), SCHEMA)
    rest.catalog.create_table(("db", "b"), SCHEMA)
    url = f"{rest.url}/v1/tables/rename"

    def rename(src: str, dst: str, dst_ns: str = "db") -> requests.Response:
        return requests.post(
            url,
            json={
                "source": {"namespace": ["db"], "name": src},
                "destination": {"namespace": [dst_ns], "name": dst},
            },
        )

    assert error_of(rename("a", "b")) == (409, "AlreadyExistsException")
    assert error_of(rename("nope", "c")) == (404, "NoSuchTableException")
    assert error_of(rename("a", "c", dst_ns="nowhere")) == (404, "NoSuchNamespaceException")
    assert rename("a", "c").status_code == 204
    assert rest.catalog.table_exists(("db", "c")) and not rest.catalog.table_exists(("db", "a"))


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lakecore.rest.access"]


def test_health_metrics_and_the_access_log(rest: Served, caplog: pytest.LogCaptureFixture) -> None:
    assert requests.get(f"{rest.url}/healthz").text == "ok\n"
    with caplog.at_level(logging.INFO, logger="lakecore.rest.access"):
        requests.post(f"{rest.url}/v1/namespaces", json={"namespace": ["db"]})
        requests.get(f"{rest.url}/v1/namespaces/db/tables/nope?pageToken=secretish")
    lines = access_lines(caplog)
    assert len(lines) == 2
    assert lines[0].startswith("POST /v1/namespaces 200 ")
    assert lines[0].endswith("principal=anonymous operation=createNamespace")
    assert lines[1].startswith("GET /v1/namespaces/db/tables/nope 404 ")
    assert "secretish" not in lines[1]  # no query strings
    text = requests.get(f"{rest.url}/metrics").text
    assert (
        'lakecore_rest_requests_total{method="POST",operation="createNamespace",status="200"} 1.0'
        in text
    )
    assert 'lakecore_rest_request_seconds_bucket{le="0.001",operation="loadTable"}' in text
    assert "lakecore_rest_commit_conflicts_total" in text


def test_a_table_name_with_a_slash_and_a_nested_namespace_path(rest: Served) -> None:
    """Path segments are decoded one by one: %2F stays inside the name."""
    rest.catalog.create_namespace("db")
    response = requests.get(f"{rest.url}/v1/namespaces/db/tables/a%2Fb")
    assert error_of(response) == (404, "NoSuchTableException")
    assert "a/b" in response.json()["error"]["message"]
    nested = requests.get(f"{rest.url}/v1/namespaces/db%1Fsub/tables")
    assert nested.status_code == 404  # flat lakehouse: db.sub does not exist
    assert json.loads(nested.text)["error"]["type"] == "NoSuchNamespaceException"


def test_nested_namespaces_through_the_unit_separator(rest: Served) -> None:
    v1 = f"{rest.url}/v1"
    for namespace in (["a"], ["a", "b"], ["a", "c"], ["a", "b", "d"]):
        assert requests.post(f"{v1}/namespaces", json={"namespace": namespace}).ok
    top = requests.get(f"{v1}/namespaces").json()["namespaces"]
    assert top == [["a"]]
    under_a = requests.get(f"{v1}/namespaces", params={"parent": "a"}).json()["namespaces"]
    assert under_a == [["a", "b"], ["a", "c"]]
    deep = requests.get(f"{v1}/namespaces", params={"parent": "a\x1fb"}).json()["namespaces"]
    assert deep == [["a", "b", "d"]]
    missing = requests.get(f"{v1}/namespaces", params={"parent": "a\x1fzz"})
    assert error_of(missing) == (404, "NoSuchNamespaceException")
    created = requests.post(
        f"{v1}/namespaces/a%1Fb/tables", json={"name": "t", "schema": SCHEMA_JSON}
    )
    assert created.status_code == 200, created.text
    assert rest.catalog.table_exists(("a", "b", "t"))
    listed = requests.get(f"{v1}/namespaces/a%1Fb/tables").json()["identifiers"]
    assert listed == [{"namespace": ["a", "b"], "name": "t"}]
    client = rest.client()
    assert client.load_table(("a", "b", "t")).name() == ("a", "b", "t")
    assert client.list_namespaces(("a",)) == [("a", "b"), ("a", "c")]


def test_error_mapping_of_storage_and_unknown_failures() -> None:
    """Failures no client can provoke on purpose, mapped as the spec says."""
    from pyiceberg.exceptions import CommitStateUnknownException

    from lakecore.errors import StorageError
    from lakecore.rest.errors import rest_error_of

    unreachable = StorageError("could not reach s3://bucket: connection refused")
    on_read = rest_error_of(unreachable, read=True)
    assert (on_read.code, on_read.type) == (503, "ServiceUnavailableException")
    assert on_read.headers == {"Retry-After": "1"}
    on_write = rest_error_of(unreachable, read=False)
    assert (on_write.code, on_write.headers) == (503, {})  # no retry hint for a write
    on_commit = rest_error_of(unreachable, commit=True, read=False)
    assert (on_commit.code, on_commit.type) == (500, "CommitStateUnknownException")
    unknown = rest_error_of(CommitStateUnknownException("root write timed out"), commit=True)
    assert (unknown.code, unknown.type) == (500, "CommitStateUnknownException")
    bug = rest_error_of(KeyError("x"), commit=True)
    assert (bug.code, bug.type) == (500, "CommitStateUnknownException")
    assert "may or may not have landed" in bug.message
    elsewhere = rest_error_of(KeyError("x"))
    assert (elsewhere.code, elsewhere.type) == (500, "InternalServerError")
