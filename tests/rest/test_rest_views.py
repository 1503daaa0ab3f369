"""Iceberg views over the REST catalog: the spec's view routes, with pyiceberg's REST client
and plain HTTP (what Spark's and Trino's Java clients send: ``replaceView`` with
``assert-view-uuid`` and ``-1`` for the last added schema and version)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from pyiceberg.exceptions import NoSuchViewError, ViewAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from lakecore.lakehouse import Lakehouse
from tests.rest.conftest import Served
from tests.rest.test_rest_api import SCHEMA_JSON, error_of

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
VIEW_ROUTES = [
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
]


def version_of(sql: str, dialect: str = "spark", schema_id: int = 0) -> dict[str, Any]:
    return {
        "version-id": 1,
        "schema-id": schema_id,
        "timestamp-ms": 1700000000000,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-namespace": ["ns"],
    }


def create_body(name: str, sql: str) -> dict[str, Any]:
    return {"name": name, "schema": SCHEMA_JSON, "view-version": version_of(sql)}


def replace_body(view_uuid: str, sql: str) -> dict[str, Any]:
    """What Iceberg's Java client sends for ``CREATE OR REPLACE VIEW``."""
    return {
        "requirements": [{"type": "assert-view-uuid", "uuid": view_uuid}],
        "updates": [
            {"action": "add-schema", "schema": {**SCHEMA_JSON, "schema-id": 1}},
            {"action": "add-view-version", "view-version": version_of(sql, schema_id=-1)},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }


def sql_of(result: dict[str, Any]) -> str:
    metadata = result["metadata"]
    current = next(
        v for v in metadata["versions"] if v["version-id"] == metadata["current-version-id"]
    )
    return str(current["representations"][0]["sql"])


def test_config_lists_the_view_routes(rest: Served) -> None:
    endpoints = requests.get(f"{rest.url}/v1/config").json()["endpoints"]
    assert set(VIEW_ROUTES) <= set(endpoints)


def test_create_load_replace_rename_drop_over_http(rest: Served) -> None:
    views = f"{rest.url}/v1/namespaces/ns/views"
    rest.catalog.create_namespace("ns")
    created = requests.post(views, json=create_body("v", "SELECT 1 AS id"))
    assert created.status_code == 200, created.text
    result = created.json()
    assert set(result) == {"metadata-location", "metadata", "config"}
    assert result["metadata-location"].startswith(rest.catalog.warehouse + "/ns/v-")
    view_uuid = result["metadata"]["view-uuid"]
    assert requests.head(f"{views}/v").status_code == 204
    assert requests.head(f"{views}/nope").status_code == 404
    assert requests.get(views).json()["identifiers"] == [{"namespace": ["ns"], "name": "v"}]

    replaced = requests.post(f"{views}/v", json=replace_body(view_uuid, "SELECT 2 AS id"))
    assert replaced.status_code == 200, replaced.text
    assert sql_of(replaced.json()) == "SELECT 2 AS id"
    assert replaced.json()["metadata"]["current-version-id"] == 2
    # The same schema again is the schema it has: no second schema.
    assert [s["schema-id"] for s in replaced.json()["metadata"]["schemas"]] == [0]
    assert sql_of(requests.get(f"{views}/v").json()) == "SELECT 2 AS id"
    # Another view of that name meanwhile (the UUID differs): the commit fails, 409.
    stale = requests.post(
        f"{views}/v", json=replace_body("0" * 8 + "-0000-4000-8000-" + "0" * 12, "x")
    )
    assert error_of(stale) == (409, "CommitFailedException")

    rename = {
        "source": {"namespace": ["ns"], "name": "v"},
        "destination": {"namespace": ["ns"], "name": "w"},
    }
    assert requests.post(f"{rest.url}/v1/views/rename", json=rename).status_code == 204
    assert error_of(requests.get(f"{views}/v")) == (404, "NoSuchViewException")
    assert sql_of(requests.get(f"{views}/w").json()) == "SELECT 2 AS id"
    assert requests.delete(f"{views}/w").status_code == 204
    assert error_of(requests.delete(f"{views}/w")) == (404, "NoSuchViewException")
    assert requests.get(views).json()["identifiers"] == []


def test_a_view_and_a_table_never_share_a_name(rest: Served) -> None:
    rest.catalog.create_namespace("ns")
    rest.catalog.create_table("ns.t", SCHEMA)
    views = f"{rest.url}/v1/namespaces/ns/views"
    assert error_of(requests.post(views, json=create_body("t", "SELECT 1"))) == (
        409,
        "AlreadyExistsException",
    )
    assert requests.post(views, json=create_body("v", "SELECT 1")).status_code == 200
    table = requests.post(
        f"{rest.url}/v1/namespaces/ns/tables", json={"name": "v", "schema": SCHEMA_JSON}
    )
    assert error_of(table) == (409, "AlreadyExistsException")
    # Loading a view as a table (what Spark and Trino try first) is "no such table".
    assert error_of(requests.get(f"{rest.url}/v1/namespaces/ns/tables/v")) == (
        404,
        "NoSuchTableException",
    )
    # A namespace holding a view is not empty.
    rest.catalog.drop_table("ns.t")
    assert error_of(requests.delete(f"{rest.url}/v1/namespaces/ns")) == (
        409,
        "NamespaceNotEmptyException",
    )


def test_pyiceberg_rest_client_creates_lists_loads_registers_and_drops(rest: Served) -> None:
    client = rest.client()
    client.create_namespace("ns")
    version = ViewVersion(
        schema_id=0,
        representations=[
            ViewRepresentation(SQLViewRepresentation(type="sql", sql="SELECT 1", dialect="trino"))
        ],
        default_namespace=("ns",),
    )
    view = client.create_view("ns.v", SCHEMA, version, properties={"comment": "one"})
    assert client.list_views("ns") == [("ns", "v")]
    assert client.view_exists("ns.v") and not client.view_exists("ns.other")
    loaded = client.load_view("ns.v")
    assert loaded.uuid() == view.uuid()
    assert loaded.sql_for("trino") is not None and loaded.properties["comment"] == "one"
    assert loaded.schema().find_field("id").field_type == LongType()
    with pytest.raises(ViewAlreadyExistsError):
        client.create_view("ns.v", SCHEMA, version)
    # The view's metadata file registered under another name: a second view, same metadata.
    location = requests.get(f"{rest.url}/v1/namespaces/ns/views/v").json()["metadata-location"]
    registered = client.register_view("ns.copy", location)
    assert registered.uuid() == view.uuid()
    assert sorted(client.list_views("ns")) == [("ns", "copy"), ("ns", "v")]
    client.drop_view("ns.v")
    with pytest.raises(NoSuchViewError):
        client.load_view("ns.v")
    assert client.list_views("ns") == [("ns", "copy")]
    # The lakecore catalog sees what the REST client made.
    assert rest.catalog.load_view("ns.copy").sql_for("trino") is not None


def test_time_travel_shows_the_view_as_it_was_and_is_read_only(rest: Served) -> None:
    rest.catalog.create_namespace("ns")
    views = f"{rest.url}/v1/namespaces/ns/views"
    first = requests.post(views, json=create_body("v", "SELECT 1 AS id")).json()
    before = Lakehouse.open(str(rest.root)).version
    requests.post(f"{views}/v", json=replace_body(first["metadata"]["view-uuid"], "SELECT 2"))
    requests.delete(f"{views}/v")
    config = requests.get(
        f"{rest.url}/v1/config", params={"warehouse": f"{rest.catalog.warehouse}@version={before}"}
    ).json()
    prefix = config["overrides"]["prefix"]
    old = f"{rest.url}/v1/{prefix}/namespaces/ns/views"
    assert sql_of(requests.get(f"{old}/v").json()) == "SELECT 1 AS id"
    assert requests.get(old).json()["identifiers"] == [{"namespace": ["ns"], "name": "v"}]
    assert requests.get(f"{old}/v").json()["metadata-location"] == first["metadata-location"]
    refused = requests.delete(f"{old}/v")
    assert error_of(refused)[0] == 403
    assert error_of(requests.get(f"{views}/v")) == (404, "NoSuchViewException")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": "v"},
        {"name": "v", "schema": SCHEMA_JSON},
        {"name": "v", "schema": SCHEMA_JSON, "view-version": {"schema-id": 0}},
        {**create_body("v", "x"), "location": "file:///elsewhere/v"},
        {**create_body("v", "x"), "location": "relative/v"},
        {**create_body("v", "x"), "view-version": {**version_of("x"), "representations": [{}]}},
    ],
)
def test_bad_create_bodies_are_400(rest: Served, body: dict[str, Any]) -> None:
    rest.catalog.create_namespace("ns")
    response = requests.post(f"{rest.url}/v1/namespaces/ns/views", data=json.dumps(body))
    assert error_of(response)[0] == 400, response.text
    assert requests.get(f"{rest.url}/v1/namespaces/ns/views").json()["identifiers"] == []


@pytest.mark.parametrize(
    "updates",
    [
        [{"action": "set-current-view-version", "view-version-id": 7}],
        [{"action": "set-current-view-version", "view-version-id": -1}],
        [{"action": "add-view-version", "view-version": version_of("x", schema_id=5)}],
        [{"action": "upgrade-format-version", "format-version": 2}],
        [{"action": "set-location", "location": "file:///elsewhere"}],
        [{"action": "no-such-action"}],
        [{"action": "set-properties", "updates": {"version.history.num-entries": "many"}}],
    ],
)
def test_bad_view_updates_are_400(rest: Served, updates: list[dict[str, Any]]) -> None:
    rest.catalog.create_namespace("ns")
    views = f"{rest.url}/v1/namespaces/ns/views"
    created = requests.post(views, json=create_body("v", "SELECT 1")).json()
    response = requests.post(f"{views}/v", json={"updates": updates})
    assert error_of(response)[0] == 400, response.text
    assert requests.get(f"{views}/v").json()["metadata-location"] == created["metadata-location"]
