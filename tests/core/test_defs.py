"""Object definitions (docs/format.md#object-definitions): wire format, defaults, validation,
builders."""

from __future__ import annotations

import dataclasses
import pickle
import random
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.core.defs import (
    LakehouseDef,
    decode_namespace_def,
    decode_table_def,
    encode_def,
    namespace_def,
    pb,
    table_def,
)
from lakecore.errors import (
    CorruptDefinitionError,
    InvalidArgumentError,
    InvalidLakehouseDefError,
    LakecoreError,
    UnsupportedFormatVersionError,
)

LOCATION = "memory://lake/_lakehouse_def_6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb"
SEVEN_DAYS_MILLIS = 7 * 24 * 60 * 60 * 1000


def full_def() -> LakehouseDef:
    return LakehouseDef(
        name="lake",
        major_version=0,
        order=64,
        namespace_name_max_size_bytes=50,
        table_name_max_size_bytes=60,
        file_name_max_size_bytes=150,
        node_file_max_size_bytes=2 << 20,
        properties={"owner": "data-eng", "é": "ü"},
        maximum_version_age_millis=3600_000,
        minimum_versions_to_keep=5,
        maximum_version_age_millis_overrides={7: 1000, 2**40: 2**50},
        exported_snapshots={
            "q1": "_00100110000000000000000000000000.arrow",
            "ext": "s3://other/lake/_1.arrow",
        },
    )


# ---------------------------------------------------------------------------------------------
# Hand-rolled protobuf wire encoding, to check field numbers independently of the generated code


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def vfield(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def lfield(number: int, payload: bytes | str) -> bytes:
    raw = payload.encode() if isinstance(payload, str) else payload
    return varint((number << 3) | 2) + varint(len(raw)) + raw


# ---------------------------------------------------------------------------------------------
# LakehouseDef


def test_round_trip_with_all_fields() -> None:
    d = full_def().validate()
    data = d.to_bytes()
    back = LakehouseDef.from_bytes(data, LOCATION)
    assert back == d
    for f in dataclasses.fields(LakehouseDef):
        assert getattr(back, f.name) == getattr(d, f.name), f.name
    assert dict(back.maximum_version_age_millis_overrides) == {7: 1000, 2**40: 2**50}
    assert back.to_bytes() == data


def test_to_bytes_is_deterministic_whatever_the_map_order() -> None:
    a = LakehouseDef(name="x", properties={"a": "1", "b": "2", "c": "3"})
    b = LakehouseDef(name="x", properties={"c": "3", "a": "1", "b": "2"})
    assert a.to_bytes() == b.to_bytes()


def test_defaults_when_optional_fields_are_absent() -> None:
    data = pb.LakehouseDef(name="lake").SerializeToString()
    assert data == lfield(1, "lake")  # nothing else on the wire
    d = LakehouseDef.from_bytes(data, LOCATION)
    assert d.name == "lake"
    assert d.major_version == 0
    assert d.order == 128
    assert d.namespace_name_max_size_bytes == 100
    assert d.table_name_max_size_bytes == 100
    assert d.file_name_max_size_bytes == 200
    assert d.node_file_max_size_bytes == 1048576
    assert d.maximum_version_age_millis == SEVEN_DAYS_MILLIS == 604_800_000
    assert d.minimum_versions_to_keep == 3
    assert dict(d.properties) == {} and dict(d.exported_snapshots) == {}
    assert dict(d.maximum_version_age_millis_overrides) == {}
    assert d == LakehouseDef(name="lake")


def test_wire_field_numbers_by_hand() -> None:
    def entry(key: bytes, value: bytes) -> bytes:
        return key + value

    data = b"".join(
        [
            lfield(1, "lake"),
            vfield(2, 0),
            vfield(3, 7),
            vfield(4, 11),
            vfield(5, 12),
            vfield(6, 13),
            vfield(7, 1 << 33),
            lfield(8, entry(lfield(1, "k"), lfield(2, "v"))),
            vfield(9, 99),
            vfield(10, 4),
            lfield(11, entry(vfield(1, 5), vfield(2, 1 << 35))),
            lfield(12, entry(lfield(1, "snap"), lfield(2, "_1.arrow"))),
        ]
    )
    d = LakehouseDef.from_bytes(data, LOCATION)
    assert d == LakehouseDef(
        name="lake",
        order=7,
        namespace_name_max_size_bytes=11,
        table_name_max_size_bytes=12,
        file_name_max_size_bytes=13,
        node_file_max_size_bytes=1 << 33,
        properties={"k": "v"},
        maximum_version_age_millis=99,
        minimum_versions_to_keep=4,
        maximum_version_age_millis_overrides={5: 1 << 35},
        exported_snapshots={"snap": "_1.arrow"},
    )


def test_major_version_above_supported_is_refused() -> None:
    data = lfield(1, "lake") + vfield(2, 1)
    with pytest.raises(UnsupportedFormatVersionError) as exc:
        LakehouseDef.from_bytes(data, LOCATION)
    assert isinstance(exc.value, LakecoreError)
    assert "1" in str(exc.value)
    with pytest.raises(UnsupportedFormatVersionError):
        LakehouseDef(name="lake", major_version=1).validate()


# N * (ns + table + file + 5) with the defaults: 128 * (100 + 100 + 200 + 5) = 51840.
DEFAULT_KEY_TABLE_ESTIMATE = 128 * (100 + 100 + 200 + 5)


def test_node_size_rule_boundary() -> None:
    assert DEFAULT_KEY_TABLE_ESTIMATE == 51840
    with pytest.raises(InvalidLakehouseDefError):
        LakehouseDef(name="lake", node_file_max_size_bytes=DEFAULT_KEY_TABLE_ESTIMATE).validate()
    with pytest.raises(InvalidLakehouseDefError):
        LakehouseDef(
            name="lake", node_file_max_size_bytes=DEFAULT_KEY_TABLE_ESTIMATE - 1
        ).validate()
    ok = LakehouseDef(
        name="lake", node_file_max_size_bytes=DEFAULT_KEY_TABLE_ESTIMATE + 1
    ).validate()
    assert ok.node_file_max_size_bytes == 51841


@pytest.mark.parametrize(
    ("order", "ns", "table", "file"),
    [(3, 1, 1, 1), (10, 20, 30, 40), (200, 8, 8, 64), (128, 100, 100, 200)],
)
def test_node_size_rule_for_other_limits(order: int, ns: int, table: int, file: int) -> None:
    estimate = order * (ns + table + file + 5)
    fields = {
        "order": order,
        "namespace_name_max_size_bytes": ns,
        "table_name_max_size_bytes": table,
        "file_name_max_size_bytes": file,
    }
    with pytest.raises(InvalidLakehouseDefError):
        LakehouseDef(name="lake", node_file_max_size_bytes=estimate, **fields).validate()
    LakehouseDef(name="lake", node_file_max_size_bytes=estimate + 1, **fields).validate()
    # The same rule applies to a file read from storage.
    msg = pb.LakehouseDef(name="lake", node_file_max_size_bytes=estimate, **fields)
    with pytest.raises(InvalidLakehouseDefError):
        LakehouseDef.from_bytes(msg.SerializeToString(), LOCATION)
    msg.node_file_max_size_bytes = estimate + 1
    assert (
        LakehouseDef.from_bytes(msg.SerializeToString(), LOCATION).node_file_max_size_bytes
        == estimate + 1
    )


def test_with_changes_validates() -> None:
    d = LakehouseDef(name="lake")
    assert d.with_changes(order=64).order == 64
    assert d.order == 128  # unchanged
    with pytest.raises(InvalidLakehouseDefError):
        d.with_changes(node_file_max_size_bytes=1000)


@pytest.mark.parametrize(
    "msg",
    [
        pb.LakehouseDef(name="lake", order=2),
        pb.LakehouseDef(name="lake", order=0),
        pb.LakehouseDef(name="lake", namespace_name_max_size_bytes=0),
        pb.LakehouseDef(name="lake", table_name_max_size_bytes=0),
        pb.LakehouseDef(name="lake", file_name_max_size_bytes=0),
        pb.LakehouseDef(name="lake", minimum_versions_to_keep=0),
        pb.LakehouseDef(name="la\x00ke"),
        pb.LakehouseDef(name="lake\n"),
    ],
    ids=["order2", "order0", "ns0", "table0", "file0", "keep0", "nul-name", "newline-name"],
)
def test_invalid_definitions(msg: Any) -> None:
    with pytest.raises(InvalidLakehouseDefError) as exc:
        LakehouseDef.from_bytes(msg.SerializeToString(), LOCATION)
    assert isinstance(exc.value, InvalidArgumentError)


@pytest.mark.parametrize(
    "data",
    [
        b"",  # an empty message: no name
        b"\xff" * 16,
        b"\x0a\xff",  # length past the end
        b"\x0a\x05la",  # truncated string
        b"\x0a\x02\xff\xfe",  # name is not UTF-8
        b"not a protobuf at all",
        b"\x12\x00",  # major_version with the wrong wire type
        b"ARROW1\x00\x00\xff\xff\xff\xff",
        pb.NamespaceDef().SerializeToString(),
    ],
)
def test_garbage_is_a_corrupt_definition(data: bytes) -> None:
    with pytest.raises(CorruptDefinitionError) as exc:
        LakehouseDef.from_bytes(data, LOCATION)
    assert exc.value.location == LOCATION
    assert LOCATION in str(exc.value)


def test_seeded_random_bytes_are_a_corrupt_definition() -> None:
    rng = random.Random(42)
    refused = 0
    for _ in range(200):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
        try:
            LakehouseDef.from_bytes(data, LOCATION)
        except CorruptDefinitionError as exc:
            assert exc.location == LOCATION
            refused += 1
        except (InvalidLakehouseDefError, UnsupportedFormatVersionError):
            pass
    assert refused >= 180


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_never_raise_anything_else(data: bytes) -> None:
    try:
        d = LakehouseDef.from_bytes(data, LOCATION)
    except (CorruptDefinitionError, InvalidLakehouseDefError, UnsupportedFormatVersionError):
        return
    assert d.name and d.major_version == 0


def test_pickles_for_spark_executors() -> None:
    d = full_def()
    back = pickle.loads(pickle.dumps(d))
    assert type(back) is LakehouseDef
    assert back == d
    with pytest.raises(TypeError):
        back.properties["x"] = "y"  # type: ignore[index]


def test_is_immutable() -> None:
    props = {"a": "1"}
    d = LakehouseDef(name="lake", properties=props)
    props["b"] = "2"  # the caller's dict is copied, not shared
    assert dict(d.properties) == {"a": "1"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.order = 3  # type: ignore[misc]
    for name in ("properties", "maximum_version_age_millis_overrides", "exported_snapshots"):
        mapping = getattr(d, name)
        with pytest.raises(TypeError):
            mapping["k"] = "v"
        with pytest.raises((TypeError, AttributeError)):
            mapping.clear()


# ---------------------------------------------------------------------------------------------
# Field numbers of docs/format.md#messages-and-field-numbers

T = FieldDescriptor
EXPECTED_FIELDS: dict[str, dict[str, tuple[int, int]]] = {
    "LakehouseDef": {
        "name": (1, T.TYPE_STRING),
        "major_version": (2, T.TYPE_UINT32),
        "order": (3, T.TYPE_UINT32),
        "namespace_name_max_size_bytes": (4, T.TYPE_UINT32),
        "table_name_max_size_bytes": (5, T.TYPE_UINT32),
        "file_name_max_size_bytes": (6, T.TYPE_UINT32),
        "node_file_max_size_bytes": (7, T.TYPE_UINT64),
        "properties": (8, T.TYPE_MESSAGE),
        "maximum_version_age_millis": (9, T.TYPE_UINT64),
        "minimum_versions_to_keep": (10, T.TYPE_UINT32),
        "maximum_version_age_millis_overrides": (11, T.TYPE_MESSAGE),
        "exported_snapshots": (12, T.TYPE_MESSAGE),
    },
    "NamespaceDef": {"name": (1, T.TYPE_STRING), "properties": (2, T.TYPE_MESSAGE)},
    "TableDef": {
        "name": (1, T.TYPE_STRING),
        "schema": (2, T.TYPE_MESSAGE),
        "distribution_keys": (3, T.TYPE_UINT32),
        "primary_key": (4, T.TYPE_UINT32),
        "sort_keys": (5, T.TYPE_UINT32),
        "unique_columns": (6, T.TYPE_UINT32),
        "table_type": (8, T.TYPE_STRING),
        "table_format": (9, T.TYPE_STRING),
        "format_properties": (10, T.TYPE_MESSAGE),
        "properties": (11, T.TYPE_MESSAGE),
    },
    "Schema": {"columns": (1, T.TYPE_MESSAGE)},
    "Column": {
        "id": (1, T.TYPE_UINT32),
        "name": (2, T.TYPE_STRING),
        "type": (3, T.TYPE_ENUM),
        "nullable": (4, T.TYPE_BOOL),
        "properties": (5, T.TYPE_MESSAGE),
        "struct_fields": (6, T.TYPE_MESSAGE),
        "map_key": (7, T.TYPE_MESSAGE),
        "map_value": (8, T.TYPE_MESSAGE),
        "list_element": (9, T.TYPE_MESSAGE),
    },
}
OPTIONAL_SCALARS = {
    "LakehouseDef": {
        "order",
        "namespace_name_max_size_bytes",
        "table_name_max_size_bytes",
        "file_name_max_size_bytes",
        "node_file_max_size_bytes",
        "maximum_version_age_millis",
        "minimum_versions_to_keep",
    }
}
REPEATED = {
    "LakehouseDef": {"properties", "maximum_version_age_millis_overrides", "exported_snapshots"},
    "NamespaceDef": {"properties"},
    "TableDef": {
        "distribution_keys",
        "primary_key",
        "sort_keys",
        "unique_columns",
        "format_properties",
        "properties",
    },
    "Schema": {"columns"},
    "Column": {"properties", "struct_fields"},
}
MAPS = {
    ("LakehouseDef", "properties"): (T.TYPE_STRING, T.TYPE_STRING),
    ("LakehouseDef", "maximum_version_age_millis_overrides"): (T.TYPE_UINT64, T.TYPE_UINT64),
    ("LakehouseDef", "exported_snapshots"): (T.TYPE_STRING, T.TYPE_STRING),
    ("NamespaceDef", "properties"): (T.TYPE_STRING, T.TYPE_STRING),
    ("TableDef", "format_properties"): (T.TYPE_STRING, T.TYPE_STRING),
    ("TableDef", "properties"): (T.TYPE_STRING, T.TYPE_STRING),
    ("Column", "properties"): (T.TYPE_STRING, T.TYPE_STRING),
}


@pytest.mark.parametrize("message", sorted(EXPECTED_FIELDS))
def test_proto_field_numbers(message: str) -> None:
    descriptor = getattr(pb, message).DESCRIPTOR
    assert descriptor.full_name == f"lakecore.defs.{message}"
    expected = EXPECTED_FIELDS[message]
    assert set(descriptor.fields_by_name) == set(expected)
    for name, (number, ftype) in expected.items():
        fd = descriptor.fields_by_name[name]
        assert fd.number == number, name
        assert fd.type == ftype, name
        is_repeated = fd.label == T.LABEL_REPEATED if hasattr(fd, "label") else fd.is_repeated
        assert is_repeated == (name in REPEATED.get(message, set())), name
        if name in OPTIONAL_SCALARS.get(message, set()):
            assert fd.has_presence, name
        key = (message, name)
        if key in MAPS:
            entry = fd.message_type
            assert entry.GetOptions().map_entry
            assert (entry.fields_by_name["key"].type, entry.fields_by_name["value"].type) == MAPS[
                key
            ]
    if message == "TableDef":
        assert descriptor.fields_by_name["schema"].message_type.full_name == "lakecore.defs.Schema"
    if message == "Column":
        assert descriptor.fields_by_name["type"].enum_type.full_name == "lakecore.defs.DataType"
        for part in ("struct_fields", "map_key", "map_value", "list_element"):
            assert descriptor.fields_by_name[part].message_type.full_name == "lakecore.defs.Column"


def test_data_type_enum_values() -> None:
    expected = {
        "BOOLEAN": 0, "INT2": 1, "INT4": 2, "INT8": 3, "DECIMAL": 4, "FLOAT4": 5, "FLOAT8": 6,
        "CHAR": 7, "VARCHAR": 8, "DATE": 9, "TIME": 10, "TIMETZ": 11, "TIMESTAMP": 12,
        "TIMESTAMPTZ": 13, "FIXED": 14, "BINARY": 15, "STRUCT": 16, "MAP": 17, "LIST": 18,
    }  # fmt: skip
    assert dict(pb.DataType.items()) == expected
    assert pb.DataType.DESCRIPTOR.full_name == "lakecore.defs.DataType"


# ---------------------------------------------------------------------------------------------
# Namespace and table definitions


def test_namespace_def_round_trip() -> None:
    msg = namespace_def("sales", {"owner": "x"})
    assert msg.name == "sales" and dict(msg.properties) == {"owner": "x"}
    data = encode_def(msg)
    assert data == encode_def(namespace_def("sales", {"owner": "x"}))
    back = decode_namespace_def(data, LOCATION)
    assert back == msg
    with pytest.raises(InvalidArgumentError):
        namespace_def("sales", {"owner": 1})  # type: ignore[dict-item]


COLUMNS: list[dict[str, Any]] = [
    {"id": 1, "name": "id", "type": "INT8", "nullable": False},
    {
        "id": 2,
        "name": "tags",
        "type": "list",
        "list_element": {"id": 3, "name": "element", "type": "VARCHAR"},
    },
    {
        "id": 4,
        "name": "attrs",
        "type": "MAP",
        "map_key": {"id": 5, "name": "key", "type": "VARCHAR", "nullable": False},
        "map_value": {"id": 6, "name": "value", "type": 5},
    },
    {
        "id": 7,
        "name": "point",
        "type": "STRUCT",
        "properties": {"doc": "a point"},
        "struct_fields": [
            {"id": 8, "name": "x", "type": "FLOAT8"},
            {"id": 9, "name": "y", "type": "FLOAT8"},
        ],
    },
]


def test_table_def_from_dicts() -> None:
    msg = table_def(
        "orders",
        columns=COLUMNS,
        table_type="external",
        properties={"a": "b"},
        format_properties={"format-version": "2"},
        distribution_keys=[1],
        primary_key=[1],
        sort_keys=[7, 1],
        unique_columns=[2],
    )
    assert isinstance(msg, pb.TableDef)
    assert msg.name == "orders"
    assert msg.table_type == "EXTERNAL" and msg.table_format == "ICEBERG"
    assert list(msg.distribution_keys) == [1] and list(msg.primary_key) == [1]
    assert list(msg.sort_keys) == [7, 1] and list(msg.unique_columns) == [2]
    assert dict(msg.properties) == {"a": "b"} and dict(msg.format_properties) == {
        "format-version": "2"
    }
    cols = msg.schema.columns
    assert [(c.id, c.name, c.type, c.nullable) for c in cols] == [
        (1, "id", pb.INT8, False),
        (2, "tags", pb.LIST, True),
        (4, "attrs", pb.MAP, True),
        (7, "point", pb.STRUCT, True),
    ]
    assert cols[1].HasField("list_element") and cols[1].list_element.type == pb.VARCHAR
    assert not cols[1].HasField("map_key")
    assert (cols[2].map_key.name, cols[2].map_key.nullable, cols[2].map_value.type) == (
        "key",
        False,
        pb.FLOAT4,
    )
    assert [f.name for f in cols[3].struct_fields] == ["x", "y"]
    assert dict(cols[3].properties) == {"doc": "a point"}
    back = decode_table_def(encode_def(msg), LOCATION)
    assert back == msg


def test_table_def_defaults() -> None:
    msg = table_def("t")
    assert (msg.table_type, msg.table_format) == ("MANAGED", "ICEBERG")
    # A file written without table_type reads as MANAGED.
    back = decode_table_def(pb.TableDef(name="t").SerializeToString(), LOCATION)
    assert back.table_type == "MANAGED"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"columns": [{"id": 1, "name": "a", "type": "INTEGER"}]},
        {"columns": [{"id": 1, "name": "a", "type": ""}]},
        {"columns": [{"id": 1, "name": "a"}]},
        {"columns": [{"id": 1, "name": "a", "type": None}]},
        {"columns": [{"id": 1, "name": "a", "type": 19}]},
        {"columns": [{"id": 1, "name": "a", "type": -1}]},
        {"columns": [{"id": 1, "name": "a", "type": True}]},
        {"columns": [{"id": 1, "name": "a", "type": 3.0}]},
        {
            "columns": [
                {
                    "id": 1,
                    "name": "s",
                    "type": "STRUCT",
                    "struct_fields": [{"id": 2, "name": "x", "type": "NOPE"}],
                }
            ]
        },
        {
            "columns": [
                {"id": 1, "name": "a", "type": "INT4"},
                {"id": 1, "name": "b", "type": "INT4"},
            ]
        },
        {"columns": [{"id": 1, "name": "a", "type": "INT4"}], "primary_key": [2]},
        {"columns": [{"id": 1, "name": "a", "type": "INT4"}], "sort_keys": [1, 9]},
        {"columns": [{"id": 1, "name": "a", "type": "INT4"}], "distribution_keys": [0]},
        {"columns": [{"id": 1, "name": "a", "type": "INT4"}], "unique_columns": [5]},
        {"primary_key": [1]},
        {"columns": [{"id": 1, "name": "", "type": "INT4"}]},
        {"columns": [{"id": -1, "name": "a", "type": "INT4"}]},
        {"columns": [{"id": True, "name": "a", "type": "INT4"}]},
        {"columns": [{"id": 2**32, "name": "a", "type": "INT4"}]},  # id is a uint32
        {"columns": [{"id": 1, "name": "a", "type": "INT4"}], "primary_key": [True]},
        {"columns": [{"id": 1, "name": "a", "type": "INT4", "colour": "red"}]},
        {"columns": ["a"]},
        {"columns": [{"id": 1, "name": "a", "type": "INT4", "properties": {"k": 1}}]},
        {"table_type": "VIEW"},
        {"table_format": "DELTA"},
        {"properties": {"k": None}},
        {"format_properties": {1: "v"}},
    ],
)
def test_table_def_refuses(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        table_def("t", **kwargs)


@pytest.mark.parametrize("data", [b"\xff\xff", b"\x0a\x09ab", b"\x0a\x02\xc3\x28"])
def test_namespace_and_table_garbage(data: bytes) -> None:
    with pytest.raises(CorruptDefinitionError):
        decode_namespace_def(data, LOCATION)
    with pytest.raises(CorruptDefinitionError):
        decode_table_def(data, LOCATION)


@pytest.mark.parametrize(
    ("given", "named"), [("long", "INT8"), ("string", "VARCHAR"), ("Double", "FLOAT8")]
)
def test_an_engines_type_name_is_refused_with_the_formats_name_for_it(
    given: str, named: str
) -> None:
    with pytest.raises(
        InvalidArgumentError,
        match=rf"has type '{given}' \(the format's name for "
        rf"{given.upper()} is {named}\); expected one of",
    ):
        table_def("t", columns=[{"id": 1, "name": "x", "type": given}])
    # Never taken silently: the stored name is the format's.
    stored = table_def("t", columns=[{"id": 1, "name": "x", "type": named}]).schema.columns[0].type
    assert stored == pb.DataType.Value(named)
    with pytest.raises(InvalidArgumentError, match=r"has type 'wibble'; expected one of"):
        table_def("t", columns=[{"id": 1, "name": "x", "type": "wibble"}])
