"""Hypothesis strategies of hostile requests to the REST server (``test_rest_fuzz.py``).

A ``Request`` is one request with placeholders (``$WH``, ``$TSNAP``, ``$WRITER``, ...) that
the test resolves at send time to what its sandbox holds then (``resolve``, ``encode_body``):
the warehouse, the tables' locations, metadata files, manifest lists, snapshot ids and uuids,
a FIFO, a folder outside the lakehouse, the secrets. ``requests_for(server)`` draws a request
to any route: mostly routed and authenticated ones whose body or query is hostile (so most
reach the catalog), the rest with hostile paths, methods, headers and tokens too.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from lakecore.rest.routes import OPERATIONS, Operation
from tests.rest.auth_helpers import hostile_header_values

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "day", "type": "date", "required": False},
    ],
}

# -- strategies: values ---------------------------------------------------------------------------

HUGE_FLOAT = "$1E999"  # replaced by the literal 1e999
numbers = st.one_of(
    st.integers(-5, 5),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**40, HUGE_FLOAT]),
    st.floats(allow_nan=True, allow_infinity=True),
)
ODD_NAMES = [
    "",
    ".",
    "..",
    "a.b",
    "zw\u200bsp",
    "\u202eabc",
    "a/b",
    "a\x00b",
    "a\nb",
    "a\x1fb",
    "\x1f",
    "\u00e9t\u00e9",
    "\U0001f4a9",
    " ",
    " t",
    "x" * 300,
    "x" * 5000,
    "%2e%2e",
    "_lakecore",
    "a b",
    "\ud800",
]
names = st.one_of(
    st.sampled_from(["t", "u", "new", "t2", "x", "db", "other"]),
    st.sampled_from(["t", "u", "new"]),
    st.sampled_from(ODD_NAMES),
    st.text(max_size=12),
)
json_junk = st.recursive(
    st.none()
    | st.booleans()
    | numbers
    | st.text(max_size=16)
    | st.sampled_from(["$TSNAP", "$TUUID", "$WH", "main", "append", "long"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``strategy``, one in eight a JSON value of any type in its place."""
    return st.sampled_from([strategy] * 7 + [json_junk]).flatmap(lambda s: s)


def drop_a_key(strategy: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """The dictionaries of ``strategy``, about one in eight with a (required) key left out
    (hypothesis leans to the first choices, so keeping every key comes first)."""

    def dropped(document: dict[str, Any], k: int | None) -> dict[str, Any]:
        keys = list(document)
        if k is None or k >= len(keys):
            return document
        return {key: v for key, v in document.items() if key != keys[k]}

    return st.builds(dropped, strategy, st.sampled_from([None] * 14 + [0, 1]))


LOCATION_BASES = [
    "$WH",
    "$WH/db",
    "$TLOC",
    "$ULOC",
    "$VLOC",
    "$OUT",
    "$OUTP",
    "$LAKE",
    "$WHP",
    "s3://b",
]
LOCATION_SPECIALS = [
    "",
    "/",
    "relative/x",
    "file:",
    "file:/x",
    "file://host/x",
    "file:///",
    "s3://",
    "s3://bucket/x",
    "s3a://b/../x",
    "gs://b/x",
    "http://127.0.0.1:1/x",
    "/etc/passwd",
    "/dev/zero",
    "/proc/self/environ",
    "/root",
    "/nonexistent",
    "$FIFO",
    "$OUTFIFO",
    "$TMETA",
    "$VMETA",
    "$TML",
    "$UML",
    "$UMETA",
    "$TDATA",
    "$UDATA",
    "$WH",
    "$LAKE",
    "$LAKE/_lakecore",
    "$LAKE/0101/x",
    "$WH/../x",
    "$WH/db/../../../../../../x",
    "$WH/db/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/x",
    "$WH/db/q?x",
    "$WH/db/q#x",
    "$WH/db/a\\..\\..\\x",
    "$WH/db/a\u202eb",
    "$WH/db/a\nb",
    "$WH//x",
    "$WH/./x",
    "$OUT/x",
    "$OUT/secret.txt",
    "$OUTP/../outside/x",
    "$ULOC",
    "$ULOC/sub",
    "$ULOC/metadata/x.avro",
    "$TLOC/metadata/missing.avro",
    "$TLOC/metadata",
    "$WH/db/t-00000000000000000000000000000000",
    "$WH/db/" + "a" * 5000,
    " $WH/x",
    "$WH/x ",
]
location_tails = st.lists(
    st.one_of(
        st.sampled_from(["x", "db", "new", "..", ".", "", "%2e%2e", "q?x", "f#g", "a\\b", "m"]),
        st.text(
            alphabet=st.sampled_from(list("ab/.%?#\\:@ ~\x00\n\x1f\u202e\u200b\u00e9;=&")),
            max_size=8,
        ),
    ),
    max_size=4,
).map("/".join)
locations = st.one_of(
    st.sampled_from(LOCATION_SPECIALS),
    st.sampled_from(LOCATION_SPECIALS),
    st.builds(lambda b, t: f"{b}/{t}", st.sampled_from(LOCATION_BASES), location_tails),
    st.text(max_size=30),
)
snapshot_ids = st.one_of(st.sampled_from(["$TSNAP", "$USNAP"]), numbers)

PRIMITIVES = [
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "decimal(9,2)",
    "decimal(99,99)",
    "decimal(-1,0)",
    "decimal(38, 0)",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "timestamp_ns",
    "string",
    "uuid",
    "binary",
    "fixed[16]",
    "fixed[-1]",
    "fixed[0]",
    "fixed[99999999999999999999]",
    "unknown",
    "variant",
    "geometry",
    "bogus",
    "",
]
field_ids = st.sampled_from([st.integers(0, 3)] * 4 + [st.integers(-2, 6), numbers]).flatmap(
    lambda s: s
)


def _struct_type(fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"type": st.just("struct"), "fields": st.lists(fields, max_size=3)}
    )


iceberg_types = st.recursive(
    st.sampled_from(PRIMITIVES),
    lambda inner: st.one_of(
        _struct_type(
            st.fixed_dictionaries(
                {"id": field_ids, "name": names, "type": inner, "required": maybe(st.booleans())}
            )
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("list"),
                "element-id": field_ids,
                "element": inner,
                "element-required": maybe(st.booleans()),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("map"),
                "key-id": field_ids,
                "key": inner,
                "value-id": field_ids,
                "value": inner,
                "value-required": maybe(st.booleans()),
            }
        ),
    ),
    max_leaves=5,
)
schema_fields = drop_a_key(
    st.fixed_dictionaries(
        {
            "id": maybe(field_ids),
            "name": maybe(names),
            "type": maybe(iceberg_types),
            "required": maybe(st.booleans()),
        },
        optional={"doc": maybe(st.text(max_size=8)), "initial-default": json_junk},
    )
)
schemas = st.one_of(
    st.just(SCHEMA),
    drop_a_key(
        st.fixed_dictionaries(
            {
                "type": maybe(st.just("struct")),
                "schema-id": maybe(field_ids),
                "fields": maybe(st.lists(schema_fields, max_size=4)),
            },
            optional={"identifier-field-ids": maybe(st.lists(field_ids, max_size=3))},
        )
    ),
)
TRANSFORMS = [
    "identity",
    "bucket[16]",
    "bucket[0]",
    "bucket[-1]",
    "bucket[99999999999999999999]",
    "truncate[4]",
    "truncate[0]",
    "year",
    "month",
    "day",
    "hour",
    "void",
    "bogus",
    "bogus[3]",
    "bucket",
    "truncate[]",
    "day(x)",
    "",
]
partition_specs = drop_a_key(
    st.fixed_dictionaries(
        {
            "spec-id": maybe(field_ids),
            "fields": maybe(
                st.lists(
                    drop_a_key(
                        st.fixed_dictionaries(
                            {
                                "source-id": maybe(field_ids),
                                "field-id": maybe(st.integers(995, 1002) | field_ids),
                                "transform": maybe(st.sampled_from(TRANSFORMS)),
                                "name": maybe(names),
                            }
                        )
                    ),
                    max_size=3,
                )
            ),
        }
    )
)
sort_orders = drop_a_key(
    st.fixed_dictionaries(
        {
            "order-id": maybe(field_ids),
            "fields": maybe(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "source-id": maybe(field_ids),
                            "transform": maybe(st.sampled_from(TRANSFORMS)),
                            "direction": maybe(st.sampled_from(["asc", "desc", "up"])),
                            "null-order": maybe(
                                st.sampled_from(["nulls-first", "nulls-last", "never"])
                            ),
                        }
                    ),
                    max_size=2,
                )
            ),
        }
    )
)
properties = st.dictionaries(
    st.one_of(
        st.sampled_from(
            [
                "write.data.path",
                "write.metadata.path",
                "write.object-storage.path",
                "write.folder-storage.path",
                "location",
                "format-version",
                "write.object-storage.enabled",
                "k",
            ]
        ),
        st.text(max_size=10),
    ),
    st.one_of(locations, st.text(max_size=10), numbers, st.booleans(), st.none()),
    max_size=3,
)
snapshots = drop_a_key(
    st.fixed_dictionaries(
        {
            "snapshot-id": maybe(st.integers(1, 2**62) | numbers),
            "parent-snapshot-id": maybe(snapshot_ids),
            "sequence-number": maybe(numbers),
            "timestamp-ms": maybe(numbers),
            "manifest-list": maybe(
                st.one_of(st.sampled_from(["$TML", "$TML", "$UML", "$TMETA", "$TDATA"]), locations)
            ),
            "summary": maybe(
                st.fixed_dictionaries(
                    {"operation": maybe(st.sampled_from(["append", "overwrite", "delete", "x"]))},
                    optional={"added-data-files": maybe(st.text(max_size=4))},
                )
            ),
        },
        optional={"schema-id": maybe(field_ids), "first-row-id": maybe(numbers)},
    )
)
statistics = drop_a_key(
    st.fixed_dictionaries(
        {
            "snapshot-id": maybe(snapshot_ids),
            "statistics-path": maybe(locations),
            "file-size-in-bytes": maybe(numbers),
            "file-footer-size-in-bytes": maybe(numbers),
            "blob-metadata": maybe(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "type": maybe(
                                st.sampled_from(
                                    ["apache-datasketches-theta-v1", "deletion-vector-v1", "x"]
                                )
                            ),
                            "snapshot-id": maybe(snapshot_ids),
                            "sequence-number": maybe(numbers),
                            "fields": maybe(st.lists(field_ids, max_size=2)),
                        }
                    ),
                    max_size=2,
                )
            ),
        }
    )
)
uuids = st.one_of(st.sampled_from(["$TUUID", "$UUUID"]), st.uuids().map(str), st.text(max_size=10))


def action(name: str, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return drop_a_key(
        st.fixed_dictionaries({"action": st.just(name), **{k: maybe(v) for k, v in fields.items()}})
    )


def _dash(**fields: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    return {k.replace("_", "-"): v for k, v in fields.items()}


table_updates = st.one_of(
    action("assign-uuid", uuid=uuids),
    action("upgrade-format-version", **_dash(format_version=st.integers(0, 4) | numbers)),
    action("add-schema", schema=schemas, **_dash(last_column_id=field_ids)),
    action("set-current-schema", **_dash(schema_id=field_ids)),
    action("add-spec", spec=partition_specs),
    action("set-default-spec", **_dash(spec_id=field_ids)),
    action("add-sort-order", **_dash(sort_order=sort_orders)),
    action("set-default-sort-order", **_dash(sort_order_id=field_ids)),
    action("add-snapshot", snapshot=snapshots),
    action("add-snapshot", snapshot=snapshots),
    action(
        "set-snapshot-ref",
        **_dash(
            ref_name=st.sampled_from(["main", "b", "t"]) | names,
            type=st.sampled_from(["branch", "tag", "x"]),
            snapshot_id=snapshot_ids,
            max_ref_age_ms=numbers,
        ),
    ),
    action("remove-snapshots", **_dash(snapshot_ids=st.lists(snapshot_ids, max_size=2))),
    action("remove-snapshot-ref", **_dash(ref_name=st.sampled_from(["main", "b"]) | names)),
    action("set-location", location=locations),
    action("set-properties", updates=properties),
    action("remove-properties", removals=st.lists(st.text(max_size=8), max_size=2)),
    action("set-statistics", statistics=statistics, **_dash(snapshot_id=snapshot_ids)),
    action("remove-statistics", **_dash(snapshot_id=snapshot_ids)),
    action("set-partition-statistics", **_dash(partition_statistics=statistics)),
    action("remove-partition-statistics", **_dash(snapshot_id=snapshot_ids)),
    action("remove-partition-specs", **_dash(spec_ids=st.lists(field_ids, max_size=2))),
    action("remove-schemas", **_dash(schema_ids=st.lists(field_ids, max_size=2))),
    action("enable-row-lineage"),
    st.builds(
        lambda a, rest: {"action": a, **rest},
        st.sampled_from(["bogus", "", "ADD-SNAPSHOT", "set-location "]) | st.text(max_size=8),
        st.dictionaries(st.text(max_size=6), json_junk, max_size=2),
    ),
    json_junk,
)


def requirement(name: str, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return drop_a_key(
        st.fixed_dictionaries({"type": st.just(name), **{k: maybe(v) for k, v in fields.items()}})
    )


table_requirements = st.one_of(
    st.just({"type": "assert-create"}),
    requirement("assert-table-uuid", uuid=uuids),
    requirement("assert-table-uuid", uuid=st.just("$TUUID")),
    requirement(
        "assert-ref-snapshot-id",
        ref=st.sampled_from(["main", "b"]) | names,
        **{"snapshot-id": snapshot_ids | st.none()},
    ),
    requirement("assert-last-assigned-field-id", **{"last-assigned-field-id": field_ids}),
    requirement("assert-current-schema-id", **{"current-schema-id": field_ids}),
    requirement("assert-last-assigned-partition-id", **{"last-assigned-partition-id": field_ids}),
    requirement("assert-default-spec-id", **{"default-spec-id": field_ids}),
    requirement("assert-default-sort-order-id", **{"default-sort-order-id": field_ids}),
    st.builds(lambda t: {"type": t}, st.sampled_from(["assert-bogus", ""]) | st.text(max_size=6)),
    json_junk,
)
namespaces_json = st.lists(names, max_size=3)
identifiers = drop_a_key(
    st.fixed_dictionaries(
        {
            "namespace": maybe(
                st.sampled_from([["db"], ["other"], ["db", "sub"], ["nope"]]) | namespaces_json
            ),
            "name": maybe(names),
        }
    )
)
commit_bodies = drop_a_key(
    st.fixed_dictionaries(
        {
            "requirements": maybe(st.lists(table_requirements, max_size=3)),
            "updates": maybe(st.lists(table_updates, max_size=4)),
        },
        optional={
            "identifier": st.sampled_from(
                [st.just({"namespace": ["db"], "name": "t"})] * 3 + [identifiers]
            ).flatmap(lambda s: s)
        },
    )
)
transaction_bodies = drop_a_key(
    st.fixed_dictionaries(
        {
            "table-changes": maybe(
                st.lists(
                    st.builds(lambda i, c: {"identifier": i, **c}, identifiers, commit_bodies),
                    max_size=3,
                )
            )
        }
    )
)
create_table_bodies = drop_a_key(
    st.fixed_dictionaries(
        {"name": maybe(names), "schema": maybe(schemas)},
        optional={
            "location": maybe(locations),
            "partition-spec": maybe(partition_specs),
            "write-order": maybe(sort_orders),
            "stage-create": maybe(st.booleans()),
            "properties": maybe(properties),
        },
    )
)
register_bodies = drop_a_key(
    st.fixed_dictionaries(
        {"name": maybe(names), "metadata-location": maybe(locations)},
        optional={"overwrite": maybe(st.booleans())},
    )
)
rename_bodies = drop_a_key(
    st.fixed_dictionaries({"source": maybe(identifiers), "destination": maybe(identifiers)})
)
namespace_bodies = drop_a_key(
    st.fixed_dictionaries(
        {"namespace": maybe(namespaces_json)}, optional={"properties": maybe(properties)}
    )
)
namespace_property_bodies = st.fixed_dictionaries(
    {},
    optional={
        "removals": maybe(st.lists(st.sampled_from(["location", "k"]) | st.text(max_size=6))),
        "updates": maybe(properties),
    },
)
metrics_bodies = st.fixed_dictionaries(
    {"report-type": maybe(st.sampled_from(["scan-report", "commit-report"]) | st.text())},
    optional={"table-name": json_junk, "snapshot-id": json_junk, "metrics": json_junk},
)
# -- views ---------------------------------------------------------------------------------------

VIEW_SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
VIEW_VERSION = ViewVersion(
    schema_id=0,
    representations=[
        ViewRepresentation(SQLViewRepresentation(type="sql", sql="SELECT 1 AS id", dialect="spark"))
    ],
    default_namespace=("db",),
)
view_uuids = st.one_of(st.just("$VUUID"), uuids)
representations = st.one_of(
    drop_a_key(
        st.fixed_dictionaries(
            {
                "type": maybe(st.sampled_from(["sql", "SQL", "x"])),
                "sql": maybe(st.sampled_from(["SELECT 1", ""]) | st.text(max_size=20)),
                "dialect": maybe(st.sampled_from(["spark", "trino"]) | st.text(max_size=6)),
            }
        )
    ),
    json_junk,
)
view_versions = drop_a_key(
    st.fixed_dictionaries(
        {
            "version-id": maybe(field_ids),
            "schema-id": maybe(field_ids),
            "timestamp-ms": maybe(numbers),
            "summary": maybe(properties),
            "representations": maybe(st.lists(representations, max_size=2)),
            "default-namespace": maybe(namespaces_json),
        },
        optional={"default-catalog": maybe(names)},
    )
)
view_updates = st.one_of(
    action("assign-uuid", uuid=view_uuids),
    action("upgrade-format-version", **_dash(format_version=st.integers(0, 3) | numbers)),
    action("add-schema", schema=schemas, **_dash(last_column_id=field_ids)),
    action("set-location", location=locations),
    action("set-properties", updates=properties),
    action("remove-properties", removals=st.lists(st.text(max_size=8), max_size=2)),
    action("add-view-version", **_dash(view_version=view_versions)),
    action("set-current-view-version", **_dash(view_version_id=field_ids)),
    st.builds(
        lambda a, rest: {"action": a, **rest},
        st.sampled_from(["bogus", "add-snapshot", "set-current-schema"]) | st.text(max_size=8),
        st.dictionaries(st.text(max_size=6), json_junk, max_size=2),
    ),
    json_junk,
)
view_requirements = st.one_of(
    requirement("assert-view-uuid", uuid=view_uuids),
    requirement("assert-table-uuid", uuid=uuids),
    st.builds(lambda t: {"type": t}, st.sampled_from(["assert-bogus", ""]) | st.text(max_size=6)),
    json_junk,
)
commit_view_bodies = drop_a_key(
    st.fixed_dictionaries(
        {
            "requirements": maybe(st.lists(view_requirements, max_size=2)),
            "updates": maybe(st.lists(view_updates, max_size=4)),
        },
        optional={
            "identifier": st.sampled_from(
                [st.just({"namespace": ["db"], "name": "v"})] * 3 + [identifiers]
            ).flatmap(lambda s: s)
        },
    )
)
create_view_bodies = drop_a_key(
    st.fixed_dictionaries(
        {"name": maybe(names), "schema": maybe(schemas), "view-version": maybe(view_versions)},
        optional={"location": maybe(locations), "properties": maybe(properties)},
    )
)
register_view_bodies = drop_a_key(
    st.fixed_dictionaries(
        {
            "name": maybe(names),
            "metadata-location": maybe(st.sampled_from(["$VMETA", "$TMETA"]) | locations),
        }
    )
)

BODIES: dict[str, st.SearchStrategy[Any]] = {
    "createNamespace": namespace_bodies,
    "updateProperties": namespace_property_bodies,
    "createTable": create_table_bodies,
    "updateTable": commit_bodies,
    "registerTable": register_bodies,
    "reportMetrics": metrics_bodies,
    "renameTable": rename_bodies,
    "commitTransaction": transaction_bodies,
    "createView": create_view_bodies,
    "replaceView": commit_view_bodies,
    "registerView": register_view_bodies,
    "renameView": rename_bodies,
}
RAW_BODIES = [
    b"",
    b"[" * 1000,
    b'{"a":' * 300,
    b"[" * 300 + b"]" * 300,
    b"1e999",
    b"-1e999",
    b'"',
    b"null",
    b"\xff\xfe{\x00}\x00",
    b"\xef\xbb\xbf{}",
    b'{"requirements": [], "updates": [], "x": ' + b"9" * 5000 + b"}",
    b'{"namespace": ["a"], "properties": {"k": "\\ud800"}}',
    b'{"name": "t", "schema": '
    + b'{"type": "list", "element-id": 1, "element": ' * 120
    + b'"long"'
    + b"}" * 120
    + b"}",
    b"NaN",
    b"{}",
    b"[]",
]
raw_bodies = st.one_of(
    st.sampled_from(RAW_BODIES),
    st.binary(max_size=64),
    json_junk.map(lambda v: json.dumps(v).encode()),
)

# -- strategies: requests ----------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request, with placeholders (``$WH``, ``$TSNAP``, ...) still in it."""

    operation: str
    method: str
    path: bytes
    query: bytes = b""
    headers: tuple[tuple[str, str | bytes], ...] = ()
    body: Any = None  # a JSON document (placeholders resolved at send time) or raw bytes


NAME_SEGMENTS = ["db", "t", "u", "other", "db%1Fsub", "new", "nope", "t2", "x"]
HOSTILE_SEGMENTS = [
    "%00",
    "%0A",
    "a%0D%0Ab",
    "%2F",
    "a%2Fb",
    "..",
    ".",
    "%2e%2e",
    "%2E",
    "%C0%AE%C0%AE",
    "%FF",
    "%",
    "%zz",
    "%1F",
    "a%1F",
    "%1Fa",
    "%1F%1F",
    "%E2%80%AE",
    "zw%E2%80%8Bsp",
    "%F0%9F%92%A9",
    "%ED%A0%80",
    "a%20b",
    "%25",
    "%252e%252e",
    "~",
    "a" * 300,
    "x" * 5000,
    "%u202e",
    "a;b=c",
    "%3F",
    "%23",
    "%5C..%5C",
    "%1B%5B31m",
]
segments = st.one_of(
    st.sampled_from(NAME_SEGMENTS).map(str.encode),
    st.sampled_from(NAME_SEGMENTS).map(str.encode),
    st.sampled_from(NAME_SEGMENTS).map(str.encode),
    st.sampled_from(HOSTILE_SEGMENTS).map(str.encode),
    st.text(max_size=10).map(lambda t: quote(t, safe="").encode()),
    st.binary(max_size=8).map(lambda b: "".join(f"%{c:02X}" for c in b).encode()),
    st.text(max_size=6).map(
        lambda t: t.replace("/", "").replace("?", "").encode("utf-8", "replace")
    ),
)
PREFIXES = [
    b"version-1",
    b"version-0",
    b"version-99999999",
    b"version-x",
    b"version-",
    b"x",
    b"%00",
]
prefixes = st.one_of(
    st.none(), st.none(), st.none(), st.none(), st.sampled_from(PREFIXES), segments
)
ANY_METHODS = ["GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "FOO", "get", "TRACE"]


GOOD_SEGMENTS = {
    "namespace": st.sampled_from([b"db", b"db", b"db", b"other", b"db%1Fsub", b"nope"]),
    "table": st.sampled_from([b"t", b"t", b"t", b"u", b"new", b"nope"]),
    "view": st.sampled_from([b"v", b"v", b"v", b"t", b"new", b"nope"]),
}


def path_of(operation: Operation, hostile: bool) -> st.SearchStrategy[bytes]:
    """Paths of ``operation``: with ``hostile``, any segments and sometimes a prefix; else the
    names the sandbox holds (and a few it does not)."""
    template = operation.path.strip("/").split("/")
    variables = [p[1:-1] for p in template if p.startswith("{") and p != "{prefix}"]

    def build(prefix: bytes | None, parts: list[bytes]) -> bytes:
        out: list[bytes] = []
        drawn = iter(parts)
        for piece in template:
            if piece == "{prefix}":
                if prefix is not None:
                    out.append(prefix)
            elif piece.startswith("{"):
                out.append(next(drawn))
            else:
                out.append(piece.encode())
        return b"/" + b"/".join(out)

    if hostile:
        parts = st.lists(segments, min_size=len(variables), max_size=len(variables))
        return st.builds(build, prefixes, parts)
    return st.builds(build, st.none(), st.tuples(*[GOOD_SEGMENTS[v] for v in variables]).map(list))


QUERY_VALUES: dict[str, list[str]] = {
    "pageToken": [
        "",
        "$PAGETOKEN",
        "e30",
        "!!!",
        "x" * 5000,
        base64.urlsafe_b64encode(b"[" * 900).decode(),
    ],
    "pageSize": [
        "1",
        "2",
        "0",
        "-1",
        "1e3",
        "100000",
        "100001",
        "99999999999999999999",
        "\uff11",
        " 1",
        "",
    ],
    "snapshots": ["all", "refs", "x", "", "ALL"],
    "purgeRequested": ["true", "false", "TRUE", "1", "", "yes"],
    "parent": ["db", "db\x1fsub", "", "\x1f", "..", "nope", "a\x00b"],
    "warehouse": [
        "",
        "lakecore",
        "$WH",
        "$LAKE",
        "@version=1",
        "@version=0",
        "@version=99999999999999999999",
        "@as-of=-99999999999999999999",
        "@as-of=2026-01-01",
        "@as-of=1e999",
        "@as-of=9999-12-31T23:59:59-14:00",
        "@as-of=0001-01-01",
        "x@version=1",
        "@",
        "@version=",
        "@version=\uff11",
        "nope",
    ],
}
query_pairs = st.lists(
    st.tuples(
        st.sampled_from([*QUERY_VALUES, "x"]),
        st.one_of(
            st.sampled_from(sorted({v for vs in QUERY_VALUES.values() for v in vs})),
            st.text(max_size=12),
        ),
    ),
    max_size=3,
)
queries = st.one_of(
    st.just(b""),
    query_pairs.map(lambda pairs: urlencode(pairs).encode()),
    st.binary(max_size=30).map(lambda b: b.replace(b"#", b"")),
)


def authorization(server: str) -> st.SearchStrategy[Any]:
    junk = st.one_of(
        st.sampled_from(hostile_header_values()),
        st.text(max_size=40),
        st.sampled_from(["Bearer $READER", "Basic Og==", "Bearer None", "Bearer", "Bearer $JWTx"]),
    )
    if server == "anonymous":
        return st.one_of(st.none(), st.none(), st.none(), st.just("Bearer None"), junk)
    writer = st.sampled_from(["Bearer $WRITER", "Bearer $JWT", "bearer  $WRITER "])
    return st.one_of(
        writer, writer, writer, writer, writer, st.just("Bearer $READER"), st.none(), junk
    )


CONTENT_LENGTHS = ["abc", "-1", "99999999999999999999", "0", "+5", " 12", "1,1", "$LEN+5", "$LEN-1"]


def headers_for(server: str) -> st.SearchStrategy[tuple[tuple[str, str | bytes], ...]]:
    return st.builds(
        lambda auth, length, extra: tuple(
            ([("authorization", auth)] if auth is not None else [])
            + ([("content-length", length)] if length is not None else [])
            + extra
        ),
        authorization(server),
        st.one_of(st.none(), st.none(), st.none(), st.sampled_from(CONTENT_LENGTHS)),
        st.lists(
            st.tuples(
                st.sampled_from(["content-type", "if-none-match", "x-forwarded-for", "accept"]),
                st.sampled_from(
                    ["application/json", "text/plain; charset=utf-16", "*", "\u00ff", "$ETAG"]
                ),
            ),
            max_size=2,
        ),
    )


GOOD_QUERIES: dict[str, list[str]] = {
    "listNamespaces": ["pageToken", "pageSize", "parent"],
    "listTables": ["pageToken", "pageSize"],
    "loadTable": ["snapshots"],
    "dropTable": ["purgeRequested"],
}


def good_queries(operation: str) -> st.SearchStrategy[bytes]:
    keys = GOOD_QUERIES.get(operation)
    if keys is None:
        return st.just(b"")
    pairs = st.lists(
        st.sampled_from(keys).flatmap(
            lambda k: st.tuples(st.just(k), st.sampled_from(QUERY_VALUES[k]))
        ),
        max_size=2,
        unique_by=lambda kv: kv[0],
    )
    return pairs.map(lambda p: urlencode(p).encode())


def good_headers(server: str) -> st.SearchStrategy[tuple[tuple[str, str | bytes], ...]]:
    if server == "anonymous":
        return st.just(())
    return st.sampled_from(["Bearer $WRITER", "Bearer $JWT"]).map(lambda a: (("authorization", a),))


# How hostile a request is: "body" (a routed, authenticated request whose body or query is
# hostile: most examples, so that most reach the catalog), "envelope" (hostile path, method,
# headers and query, a structured body) or "all".
MODES = ["body"] * 6 + ["envelope"] * 2 + ["all"]


def operation_requests(server: str) -> st.SearchStrategy[Request]:
    def build(op: Operation, mode: str) -> st.SearchStrategy[Request]:
        structured = BODIES.get(op.name, st.none())
        if mode == "body":
            return st.builds(
                Request,
                st.just(op.name),
                st.just(op.method),
                path_of(op, hostile=False),
                good_queries(op.name),
                good_headers(server),
                structured,
            )
        methods = st.sampled_from([op.method] * 6 + ANY_METHODS)
        return st.builds(
            Request,
            st.just(op.name),
            methods,
            path_of(op, hostile=True),
            st.one_of(queries, good_queries(op.name)),
            headers_for(server),
            structured if mode == "envelope" else st.one_of(structured, raw_bodies),
        )

    # Commits and creates do most: they parse the most and write.
    weighted = [op for op in OPERATIONS for _ in range(3 if op.write else 1)]
    weighted += [op for op in OPERATIONS if op.name in ("updateTable", "createTable")] * 4
    weighted += [op for op in OPERATIONS if op.name in ("replaceView", "createView")] * 2
    return st.tuples(st.sampled_from(weighted), st.sampled_from(MODES)).flatmap(
        lambda pair: build(*pair)
    )


OAUTH_FIELDS = [
    "grant_type",
    "client_id",
    "client_secret",
    "subject_token",
    "subject_token_type",
    "scope",
]
OAUTH_VALUES = [
    "client_credentials",
    "urn:ietf:params:oauth:grant-type:token-exchange",
    "urn:ietf:params:oauth:token-type:access_token",
    "etl",
    "$WRITER",
    "$JWT",
    "catalog",
]


def other_requests(server: str) -> st.SearchStrategy[Request]:
    config = st.builds(
        Request,
        st.just("config"),
        st.sampled_from(["GET"] * 6 + ANY_METHODS),
        st.just(b"/v1/config"),
        st.one_of(queries, query_pairs.map(lambda p: urlencode(p).encode())),
        st.one_of(good_headers(server), headers_for(server)),
        st.just(None),
    )
    form = st.dictionaries(
        st.sampled_from(OAUTH_FIELDS) | st.text(max_size=6),
        st.sampled_from(OAUTH_VALUES) | st.text(max_size=20),
        max_size=4,
    ).map(lambda d: urlencode(d).encode())
    oauth = st.builds(
        Request,
        st.just("oauthTokens"),
        st.one_of(st.just("POST"), st.sampled_from(ANY_METHODS)),
        st.just(b"/v1/oauth/tokens"),
        queries,
        headers_for(server),
        st.one_of(form, form, raw_bodies),
    )
    probes = st.builds(
        Request,
        st.sampled_from(["healthz", "metrics"]),
        st.one_of(st.just("GET"), st.sampled_from(ANY_METHODS)),
        st.sampled_from([b"/healthz", b"/metrics"]),
        queries,
        headers_for(server),
        st.just(None),
    )
    unknown = st.builds(
        Request,
        st.just("unmatched"),
        st.sampled_from(ANY_METHODS),
        st.one_of(
            st.sampled_from(
                [
                    b"//v1/config",
                    b"/v1",
                    b"/v1/",
                    b"/V1/config",
                    b"/healthz/",
                    b"/",
                    b"/v2/config",
                    b"/v1/namespaces/",
                    b"/v1//namespaces",
                    b"/v1/namespaces/db/tables/t/x/y",
                ]
            ),
            st.lists(segments, min_size=1, max_size=5).map(lambda s: b"/v1/" + b"/".join(s)),
            st.lists(segments, min_size=1, max_size=3).map(lambda s: b"/" + b"/".join(s)),
        ),
        queries,
        headers_for(server),
        st.one_of(st.none(), raw_bodies),
    )
    return st.one_of(config, oauth, probes, unknown)


def requests_for(server: str) -> st.SearchStrategy[Request]:
    kinds = [operation_requests(server)] * 6 + [other_requests(server)]
    return st.sampled_from(kinds).flatmap(lambda kind: kind)


# -- placeholders ---------------------------------------------------------------------------------


def resolve(document: Any, values: dict[str, Any]) -> Any:
    """``document`` with each placeholder string replaced by its value (a placeholder inside a
    longer string is replaced as text)."""
    if isinstance(document, str):
        if document in values:
            return values[document]
        if "$" in document:
            for key in sorted(values, key=len, reverse=True):
                if key in document:
                    document = document.replace(key, str(values[key]))
        return document
    if isinstance(document, list):
        return [resolve(v, values) for v in document]
    if isinstance(document, dict):
        return {resolve(k, values): resolve(v, values) for k, v in document.items()}
    return document


def encode_body(body: Any, values: dict[str, Any]) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    text = json.dumps(resolve(body, values))
    return text.replace(f'"{HUGE_FLOAT}"', "1e999").encode("utf-8", "surrogatepass")
