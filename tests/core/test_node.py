"""The node file codec (docs/format.md#node-files): round trips, exact layout, strict decoding."""

from __future__ import annotations

import io
import re

import pyarrow as pa
import pyarrow.ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecore.core.locations import new_lakehouse_def_path, new_node_file_path, root_node_file_name
from lakecore.core.node import Node, decode_node, encode_node, encoded_size, read_system_rows
from lakecore.errors import CorruptFileError, CorruptNodeFileError, LakecoreError

LOCATION = "memory://lake/0110/0000/1011/01111000-node-test.arrow"
Row = tuple[str | None, str | None, str | None]
NULL_ROW: Row = (None, None, None)
UTF8_FIELDS = [
    pa.field("key", pa.string(), nullable=True),
    pa.field("pvalue", pa.string(), nullable=True),
    pa.field("pnode", pa.string(), nullable=True),
]


# ---------------------------------------------------------------------------------------------
# Helpers that build files with pyarrow directly, independent of encode_node


def ipc_file(batches: list[pa.RecordBatch], schema: pa.Schema) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue()


def rows_batch(rows: list[Row], fields: list[pa.Field] = UTF8_FIELDS) -> pa.RecordBatch:
    columns = [[row[i] for row in rows] for i in range(len(fields))]
    schema = pa.schema(fields)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, fields, strict=True)], schema=schema
    )


def rows_file(rows: list[Row]) -> bytes:
    """An Arrow IPC file holding ``rows`` in one batch of schema key/pvalue/pnode: utf8."""
    batch = rows_batch(rows)
    return ipc_file([batch], batch.schema)


def read_rows(data: bytes) -> list[Row]:
    reader = pa.ipc.open_file(pa.py_buffer(data))
    assert reader.num_record_batches == 1
    table = reader.read_all()
    return list(zip(*(table.column(i).to_pylist() for i in range(3)), strict=True))


def assert_corrupt(
    data: bytes, rule: str, order: int | None = 4, location: str = LOCATION
) -> CorruptNodeFileError:
    with pytest.raises(CorruptNodeFileError) as exc:
        decode_node(data, location, order)
    err = exc.value
    assert isinstance(err, CorruptFileError) and isinstance(err, LakecoreError)
    assert err.location == location
    assert location in str(err)
    assert re.search(rule, str(err), re.IGNORECASE), f"{rule!r} not in {str(err)!r}"
    return err


# ---------------------------------------------------------------------------------------------
# Round trips

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@st.composite
def nodes(draw: st.DrawFn) -> tuple[Node, int]:
    order = draw(st.integers(3, 20))
    keys = sorted(set(draw(st.lists(TEXT, max_size=order - 1))))
    values = draw(st.lists(TEXT, min_size=len(keys), max_size=len(keys)))
    leaf = draw(st.booleans())
    children = [] if leaf else [new_node_file_path() for _ in range(len(keys) + 1)]
    buffer = draw(st.dictionaries(TEXT, st.none() | TEXT, max_size=10))
    system: dict[str, str] = {}
    if draw(st.booleans()):
        system["created_at_millis"] = str(draw(st.integers(0, 2**63 - 1)))
    if draw(st.booleans()):
        system["lakehouse_def"] = new_lakehouse_def_path()
    if draw(st.booleans()):
        system["previous_root"] = root_node_file_name(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        system["rollback_from_root"] = root_node_file_name(draw(st.integers(0, 2**32 - 1)))
    return Node(keys, values, children, buffer, system), order


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes())
def test_round_trip(case: tuple[Node, int]) -> None:
    node, order = case
    data = encode_node(node, order)
    assert decode_node(data, LOCATION, order) == node
    assert decode_node(data, LOCATION, None) == node
    size = encoded_size(node, order)
    assert len(data) <= size <= len(data) + 512
    # A real Arrow IPC file with exactly the normative schema.
    reader = pa.ipc.open_file(pa.py_buffer(data))
    assert reader.num_record_batches == 1
    assert reader.schema.names == ["key", "pvalue", "pnode"]
    assert all(f.type == pa.string() and f.nullable for f in reader.schema)
    rows = read_rows(data)
    n_system = len(node.system) + 1
    assert len(rows) == n_system + order + len(node.buffer)
    assert rows[n_system][:2] == (None, None)


def test_decode_with_wrong_order_is_refused() -> None:
    node = Node(["a"], ["1"], [], {"b": "2"}, {})
    data = encode_node(node, 4)
    assert decode_node(data, LOCATION, 4) == node
    assert_corrupt(data, "key table has", order=5)
    assert_corrupt(data, "key table has|buffer", order=3)


def test_encode_refuses_impossible_nodes() -> None:
    with pytest.raises(ValueError):
        encode_node(Node(["a", "b", "c"], ["1", "2", "3"]), 3)
    with pytest.raises(ValueError):
        encode_node(Node(["a"], ["1"], [new_node_file_path()]), 3)


def test_empty_node() -> None:
    data = encode_node(Node(), 3)
    assert read_rows(data) == [("n_keys", "0", None), NULL_ROW, NULL_ROW, NULL_ROW]
    assert decode_node(data, LOCATION, 3) == Node()
    assert len(data) <= encoded_size(Node(), 3) <= len(data) + 512


def test_encoded_size_large_node() -> None:
    order = 128
    keys = [f"C===ns{i:04d}" + " " * 90 + "é" * 40 for i in range(order - 1)]
    node = Node(
        keys=keys,
        values=[new_node_file_path() for _ in keys],
        children=[new_node_file_path() for _ in range(order)],
        buffer={f"B===x{i}": (None if i % 3 == 0 else "v" * i) for i in range(200)},
        system={"created_at_millis": "1700000000000", "lakehouse_def": new_lakehouse_def_path()},
    )
    data = encode_node(node, order)
    assert len(data) <= encoded_size(node, order) <= len(data) + 512
    assert decode_node(data, LOCATION, order) == node


def test_exact_row_layout_of_an_internal_node() -> None:
    c0, c1, c2 = (new_node_file_path() for _ in range(3))
    ldef, prev = new_lakehouse_def_path(), root_node_file_name(6)
    node = Node(
        keys=["k1", "k2"],
        values=["v1", "v2"],
        children=[c0, c1, c2],
        buffer={"k3": "v3", "k0": None},
        system={"created_at_millis": "17", "previous_root": prev, "lakehouse_def": ldef},
    )
    rows = read_rows(encode_node(node, 5))
    # System rows first (key, pvalue non-null, pnode null), n_keys last among them.
    assert set(rows[:3]) == {
        ("lakehouse_def", ldef, None),
        ("previous_root", prev, None),
        ("created_at_millis", "17", None),
    }
    assert rows[3:] == [
        ("n_keys", "2", None),
        (None, None, c0),  # separator: leftmost child
        ("k1", "v1", c1),
        ("k2", "v2", c2),
        NULL_ROW,  # the key table has exactly N = 5 rows
        NULL_ROW,
        ("k0", None, None),  # delete message
        ("k3", "v3", None),  # set message
    ]


def test_exact_row_layout_of_a_leaf() -> None:
    node = Node(keys=["a"], values=["1"], buffer={"b": ""})
    assert read_rows(encode_node(node, 3)) == [
        ("n_keys", "1", None),
        NULL_ROW,
        ("a", "1", None),
        NULL_ROW,
        ("b", "", None),  # an empty pvalue is a set message, not a delete
    ]


def test_full_key_table_is_followed_directly_by_the_buffer() -> None:
    node = Node(keys=["a", "b"], values=["1", "2"], buffer={"0": "x", "z": None})
    data = encode_node(node, 3)
    assert read_rows(data) == [
        ("n_keys", "2", None),
        NULL_ROW,
        ("a", "1", None),
        ("b", "2", None),
        ("0", "x", None),
        ("z", None, None),
    ]
    assert decode_node(data, LOCATION, 3) == node
    assert decode_node(data, LOCATION) == node


# ---------------------------------------------------------------------------------------------
# Files written by other writers: what the reader must accept


def test_reader_accepts_no_system_rows_and_any_known_subset() -> None:
    data = rows_file([NULL_ROW, ("a", "1", None), NULL_ROW, NULL_ROW])
    assert decode_node(data, LOCATION, 4) == Node(["a"], ["1"])
    data = rows_file(
        [("created_at_millis", "5", None), NULL_ROW, ("a", "1", None), NULL_ROW, NULL_ROW]
    )
    assert decode_node(data, LOCATION, 4) == Node(["a"], ["1"], system={"created_at_millis": "5"})
    assert read_system_rows(data, LOCATION) == {"created_at_millis": "5"}


def test_reader_keeps_the_newest_of_duplicate_buffer_messages() -> None:
    rows: list[Row] = [
        ("n_keys", "0", None),
        NULL_ROW,
        NULL_ROW,
        NULL_ROW,
        ("k", "1", None),
        ("j", "x", None),
        ("k", None, None),
    ]
    assert decode_node(rows_file(rows), LOCATION, 3).buffer == {"k": None, "j": "x"}
    rows[-1] = ("k", "2", None)
    assert decode_node(rows_file(rows), LOCATION, 3).buffer == {"k": "2", "j": "x"}


def test_reader_accepts_a_full_uri_child() -> None:
    # Partial snapshot exports point back at the source lakehouse.
    uri = "s3://source-bucket/lake/0110/0000/1011/01111000-node-x.arrow"
    local = new_node_file_path()
    data = rows_file([("n_keys", "1", None), (None, None, uri), ("a", "1", local), NULL_ROW])
    assert decode_node(data, LOCATION, 3).children == [uri, local]


# ---------------------------------------------------------------------------------------------
# Corrupt files

C0, C1, C2 = (
    "0000/0000/0000/00000000-node-c0.arrow",
    "0000/0000/0000/00000000-node-c1.arrow",
    "x/c2.arrow",
)
LEAF: list[Row] = [
    ("created_at_millis", "1", None),
    ("n_keys", "2", None),
    NULL_ROW,
    ("a", "va", None),
    ("b", "vb", None),
    NULL_ROW,
    ("c", "vc", None),
]
INTERNAL: list[Row] = [
    ("n_keys", "2", None),
    (None, None, C0),
    ("a", "va", C1),
    ("b", "vb", C2),
    NULL_ROW,
]


def replaced(rows: list[Row], index: int, row: Row) -> list[Row]:
    out = list(rows)
    out[index] = row
    return out


def test_the_bases_of_the_corrupt_cases_are_valid() -> None:
    leaf = decode_node(rows_file(LEAF), LOCATION, 4)
    assert leaf == Node(["a", "b"], ["va", "vb"], [], {"c": "vc"}, {"created_at_millis": "1"})
    internal = decode_node(rows_file(INTERNAL), LOCATION, 4)
    assert internal == Node(["a", "b"], ["va", "vb"], [C0, C1, C2], {}, {})


@pytest.mark.parametrize(
    "fields",
    [
        [*UTF8_FIELDS, pa.field("extra", pa.string())],  # extra column
        [UTF8_FIELDS[0], pa.field("value", pa.string()), UTF8_FIELDS[2]],  # renamed column
        [UTF8_FIELDS[0], UTF8_FIELDS[2], UTF8_FIELDS[1]],  # columns out of order
        [UTF8_FIELDS[0], pa.field("pvalue", pa.int64()), UTF8_FIELDS[2]],  # int column
        [pa.field("key", pa.large_string()), UTF8_FIELDS[1], UTF8_FIELDS[2]],
        [pa.field("key", pa.binary()), UTF8_FIELDS[1], UTF8_FIELDS[2]],
        UTF8_FIELDS[:2],  # missing column
    ],
    ids=["extra", "renamed", "reordered", "int", "large_string", "binary", "missing"],
)
def test_wrong_schema(fields: list[pa.Field]) -> None:
    rows: list[tuple[object, ...]] = [(None,) * len(fields)] * 4
    if fields[1].type == pa.int64():
        rows = [(None, 1, None)] * 4
    batch = rows_batch(rows, fields)  # type: ignore[arg-type]
    assert_corrupt(ipc_file([batch], batch.schema), "schema")


def test_non_nullable_field_is_a_wrong_schema() -> None:
    fields = [pa.field("key", pa.string(), nullable=False), UTF8_FIELDS[1], UTF8_FIELDS[2]]
    batch = rows_batch([("a", None, None), ("b", None, None)], fields)
    assert_corrupt(ipc_file([batch], batch.schema), "schema")


def test_two_record_batches() -> None:
    batch = rows_batch(LEAF)
    assert_corrupt(ipc_file([batch, batch], batch.schema), "record batch")
    first, second = rows_batch(LEAF[:3]), rows_batch(LEAF[3:])
    assert_corrupt(ipc_file([first, second], first.schema), "record batch")


def test_zero_record_batches() -> None:
    assert_corrupt(ipc_file([], pa.schema(UTF8_FIELDS)), "record batch")


def test_arrow_stream_format_is_refused() -> None:
    batch = rows_batch(LEAF)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    assert_corrupt(sink.getvalue(), "ipc file|magic")


def test_no_null_separator_row() -> None:
    assert_corrupt(rows_file([("n_keys", "0", None)]), "separator")
    assert_corrupt(rows_file([]), "separator")
    assert_corrupt(
        rows_file([("a", "va", None), ("b", "vb", None)]), "separator|unknown system key"
    )


def test_unknown_system_key() -> None:
    assert_corrupt(rows_file([("lakehouse", "x", None), *LEAF]), "unknown system key")
    assert_corrupt(rows_file([("N_KEYS", "2", None), *LEAF[2:]]), "unknown system key")


def test_bad_system_rows() -> None:
    assert_corrupt(rows_file(replaced(LEAF, 0, ("created_at_millis", "1", C0))), "pnode")
    assert_corrupt(rows_file(replaced(LEAF, 0, ("created_at_millis", None, None))), "system row")
    assert_corrupt(rows_file(replaced(LEAF, 0, (None, "1", None))), "system row")
    assert_corrupt(rows_file([("n_keys", "2", None), *LEAF[1:]]), "twice")
    assert_corrupt(
        rows_file(replaced(LEAF, 0, ("created_at_millis", "-1", None))), "created_at_millis"
    )
    assert_corrupt(
        rows_file(replaced(LEAF, 0, ("created_at_millis", "1e3", None))), "created_at_millis"
    )


@pytest.mark.parametrize(
    "text",
    ["", "x", "-1", "+2", " 2", "2 ", "2.0", "0x2", "\u00b2", "\u0662", "\uff12", "99999999999"],
)
def test_non_decimal_n_keys(text: str) -> None:
    assert_corrupt(rows_file(replaced(LEAF, 1, ("n_keys", text, None))), "n_keys")
    assert_corrupt(rows_file(replaced(LEAF, 1, ("n_keys", text, None))), "n_keys", order=None)


# Superscript, Arabic-Indic and fullwidth digits: str.isdigit() is true, but they are not decimal.
@pytest.mark.parametrize("text", ["\u00b9", "\u0661", "\uff11"])
def test_non_ascii_digits_in_created_at_millis(text: str) -> None:
    assert_corrupt(
        rows_file(replaced(LEAF, 0, ("created_at_millis", text, None))), "created_at_millis"
    )


def test_key_table_length_differs_from_order() -> None:
    data = rows_file(LEAF)
    assert_corrupt(data, "key table has", order=5)
    assert_corrupt(data, "key table has|buffer|n_keys", order=3)
    short = rows_file([("n_keys", "1", None), NULL_ROW, ("a", "va", None)])
    assert_corrupt(short, "key table has", order=4)


@pytest.mark.parametrize("n_keys", ["0", "1", "3", "4"])
def test_n_keys_disagrees_with_the_table(n_keys: str) -> None:
    assert_corrupt(rows_file(replaced(LEAF, 1, ("n_keys", n_keys, None))), "n_keys|key table")
    assert_corrupt(rows_file(replaced(INTERNAL, 0, ("n_keys", n_keys, None))), "n_keys|key table")


@pytest.mark.parametrize("n_keys", ["3", "4"])
def test_n_keys_larger_than_the_table_without_order(n_keys: str) -> None:
    assert_corrupt(rows_file(replaced(LEAF, 1, ("n_keys", n_keys, None))), "n_keys", order=None)


def test_unsorted_or_duplicate_keys_in_the_key_table() -> None:
    assert_corrupt(rows_file(replaced(LEAF, 4, ("A", "vb", None))), "not sorted")
    assert_corrupt(rows_file(replaced(LEAF, 4, ("a", "vb", None))), "not sorted")
    assert_corrupt(rows_file(replaced(INTERNAL, 3, ("a", "vb", C2))), "not sorted")


def test_null_pvalue_in_the_key_table() -> None:
    assert_corrupt(rows_file(replaced(LEAF, 3, ("a", None, None))), "null pvalue")


def test_unused_key_table_row_must_be_all_null() -> None:
    assert_corrupt(rows_file(replaced(LEAF, 5, (None, "x", None))), "all null|system row|buffer")
    assert_corrupt(rows_file(replaced(LEAF, 5, (None, None, C0))), "all null")


def test_non_null_pnode_in_a_buffer_row() -> None:
    assert_corrupt(rows_file(replaced(LEAF, 6, ("c", "vc", C0))), "non-null pnode")
    assert_corrupt(rows_file([*INTERNAL, ("z", None, C0)]), "non-null pnode")


def test_null_key_in_a_buffer_row() -> None:
    assert_corrupt(rows_file([*LEAF, (None, "x", None)]), "null key")
    assert_corrupt(rows_file([*LEAF, NULL_ROW]), "null key|key table has")


def test_partial_children() -> None:
    # A leaf row with a pnode while the other pointers are null.
    assert_corrupt(rows_file(replaced(LEAF, 4, ("b", "vb", C1))), "child pointer")
    # An internal node with one pointer missing, in each position.
    assert_corrupt(rows_file(replaced(INTERNAL, 1, NULL_ROW)), "child pointer")
    assert_corrupt(rows_file(replaced(INTERNAL, 2, ("a", "va", None))), "child pointer")
    assert_corrupt(rows_file(replaced(INTERNAL, 3, ("b", "vb", None))), "child pointer")


@pytest.mark.parametrize(
    "child",
    [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "a//b",
        "a/./b",
        "a/",
        "",
        "a\x00b",
        "s3://b/../x",
        "s3://b//x",
        "file://relative",
    ],
)
def test_child_pointer_that_is_not_a_qualified_location(child: str) -> None:
    assert_corrupt(rows_file(replaced(INTERNAL, 1, (None, None, child))), "child pointer")
    assert_corrupt(rows_file(replaced(INTERNAL, 3, ("b", "vb", child))), "child pointer")


@pytest.mark.parametrize("cut", [0, 1, 6, 8, 64, 200, 400, -200, -20, -11, -10, -6, -1])
def test_truncated_file(cut: int) -> None:
    data = rows_file(LEAF)
    assert_corrupt(data[:cut], "arrow|ipc|magic|unreadable")


def test_random_bytes_and_empty_bytes() -> None:
    import random

    rng = random.Random(1234)
    for size in (0, 1, 12, 100, 5000):
        assert_corrupt(bytes(rng.getrandbits(8) for _ in range(size)), "arrow|ipc|magic|unreadable")
    assert_corrupt(b"", "arrow|ipc|magic")
    assert_corrupt(b"ARROW1" + bytes(100) + b"ARROW1", "arrow|ipc|unreadable")


def test_error_names_any_location() -> None:
    other = "file:///tmp/elsewhere/_00000000000000000000000000000000.arrow"
    assert_corrupt(b"garbage", "magic", location=other)


# ---------------------------------------------------------------------------------------------
# Fuzzing: damaged files give a decode or CorruptNodeFileError, never anything else

FUZZ_BASES = [
    (
        encode_node(
            Node(["a", "b"], ["va", "vb"], [], {"c": "vc", "d": None}, {"created_at_millis": "12"}),
            4,
        ),
        4,
    ),
    (
        encode_node(
            Node(
                ["k1"],
                ["v1"],
                [new_node_file_path(), new_node_file_path()],
                {"k0": None},
                {"lakehouse_def": new_lakehouse_def_path()},
            ),
            3,
        ),
        3,
    ),
]


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from(FUZZ_BASES),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
    cut=st.none() | st.integers(0, 10**6),
)
def test_damaged_files_never_raise_anything_else(
    base: tuple[bytes, int], flips: list[tuple[int, int]], cut: int | None
) -> None:
    original, order = base
    data = bytearray(original)
    for pos, xor in flips:
        data[pos % len(data)] ^= xor
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    for decode_order in (order, None):
        try:
            node = decode_node(bytes(data), LOCATION, decode_order)
        except CorruptNodeFileError as exc:
            assert exc.location == LOCATION
            continue
        # Whatever was accepted is a well-formed node that survives a round trip.
        assert node.keys == sorted(node.keys) and len(set(node.keys)) == len(node.keys)
        assert len(node.values) == len(node.keys)
        assert node.children == [] or len(node.children) == len(node.keys) + 1
        if decode_order is not None:
            assert decode_node(encode_node(node, order), LOCATION, order) == node
