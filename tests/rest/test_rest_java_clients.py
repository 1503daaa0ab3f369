"""What Iceberg's Java REST client (Spark, Trino) needs of the server, replayed over plain HTTP.

Found by running the engines (tests/engines); these are the cheap checks of the same answers.
"""

from __future__ import annotations

import requests

from tests.rest.conftest import Served

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "kind", "required": False, "type": "string"},
    ],
}
SPEC = {
    "spec-id": 0,
    "fields": [{"source-id": 2, "field-id": 1000, "name": "kind", "transform": "identity"}],
}


def test_a_staged_create_answers_one_schema_spec_and_sort_order(rest: Served) -> None:
    # Trino's CREATE TABLE and Spark's CREATE TABLE AS SELECT stage the create. Java's
    # TableMetadataParser keys schemas, specs and sort orders by id: two with one id were
    # "Multiple entries with same key: 0=table {...}" in Trino, and no table.
    rest.catalog.create_namespace("db")
    answer = requests.post(
        f"{rest.url}/v1/namespaces/db/tables",
        json={"name": "t", "schema": SCHEMA, "partition-spec": SPEC, "stage-create": True},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json().get("metadata-location") is None
    metadata = answer.json()["metadata"]
    assert [s["schema-id"] for s in metadata["schemas"]] == [0]
    assert [s["spec-id"] for s in metadata["partition-specs"]] == [0]
    assert [o["order-id"] for o in metadata["sort-orders"]] == [0]
    assert metadata["partition-specs"][0]["fields"][0]["name"] == "kind"
    assert metadata["location"].startswith(rest.catalog.warehouse + "/db/t-")
    assert not rest.catalog.table_exists(("db", "t"))  # staged: nothing committed


def test_a_namespace_names_where_its_tables_go(rest: Served) -> None:
    # Trino stages a create only when the namespace has a location (it then places the table
    # inside it); without one it created the table outright and refused its own table: "Cannot
    # create a table on a non-empty location".
    rest.catalog.create_namespace("db")
    rest.catalog.create_namespace(("db", "inner"))
    loaded = requests.get(f"{rest.url}/v1/namespaces/db").json()
    assert loaded["properties"] == {"location": f"{rest.catalog.warehouse}/db"}
    inner = requests.get(f"{rest.url}/v1/namespaces/db%1Finner").json()
    assert inner["properties"]["location"] == f"{rest.catalog.warehouse}/db/inner"
    # Its own location stays its own, and is not stored when it had none.
    own = f"{rest.catalog.warehouse}/elsewhere"
    rest.catalog.create_namespace("placed", {"location": own})
    assert requests.get(f"{rest.url}/v1/namespaces/placed").json()["properties"] == {
        "location": own
    }
    assert rest.catalog.load_namespace_properties("db") == {}
    # A table made where the namespace says (as Trino does) is the namespace's like any other.
    location = f"{rest.catalog.warehouse}/db/t-{'0' * 32}"
    created = requests.post(
        f"{rest.url}/v1/namespaces/db/tables",
        json={"name": "t", "schema": SCHEMA, "location": location},
    )
    assert created.status_code == 200, created.text
    assert rest.catalog.load_table(("db", "t")).location() == location
