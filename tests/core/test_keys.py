"""Keys (docs/format.md#keys): schema IDs, encoded names, object keys and their order."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lakecore.core.defs import LakehouseDef, pb
from lakecore.core.keys import (
    SYSTEM_KEYS,
    ParsedKey,
    encode_name,
    is_system_key,
    namespace_key,
    parse_key,
    parse_namespace_key,
    parse_table_key,
    schema_id,
    schema_id_value,
    table_key,
    table_key_prefix,
)
from lakecore.errors import InvalidArgumentError, InvalidNameError, LakecoreError

# ---------------------------------------------------------------------------------------------
# Schema IDs


@pytest.mark.parametrize(
    ("n", "encoded"),
    [
        (0, "A==="),
        (1, "B==="),
        (2, "C==="),
        # TrinityLake's "schema ID 4 is D===" contradicts its own alphabet (A=0 ... E=4):
        # docs/format.md#where-the-sources-disagree.
        (4, "E==="),
        (25, "Z==="),
        (26, "a==="),
        (51, "z==="),
        (52, "0==="),
        (61, "9==="),
        (62, "+==="),
        (63, "/==="),
    ],
)
def test_schema_id_vectors(n: int, encoded: str) -> None:
    assert schema_id(n) == encoded
    assert schema_id_value(encoded) == n


@pytest.mark.parametrize("bad", [-1, 64, 1000, True, 1.0, None])
def test_schema_id_rejects(bad: object) -> None:
    with pytest.raises(InvalidNameError):
        schema_id(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "B", "B==", "B====", "=B==", "B=== ", "-===", "B=A="])
def test_schema_id_value_rejects(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        schema_id_value(bad)


# ---------------------------------------------------------------------------------------------
# Lakehouse definitions in the three forms the key functions accept


def _defs(ns_max: int, table_max: int) -> list[Any]:
    msg = pb.LakehouseDef(
        name="lake", namespace_name_max_size_bytes=ns_max, table_name_max_size_bytes=table_max
    )
    return [
        LakehouseDef(
            name="lake", namespace_name_max_size_bytes=ns_max, table_name_max_size_bytes=table_max
        ),
        SimpleNamespace(namespace_name_max_size_bytes=ns_max, table_name_max_size_bytes=table_max),
        msg,
    ]


DEFS_8_6 = _defs(8, 6)
DEF_IDS = ["dataclass", "simplenamespace", "protobuf"]


@pytest.mark.parametrize("ldef", DEFS_8_6, ids=DEF_IDS)
def test_namespace_key_vector(ldef: Any) -> None:
    key = namespace_key("default", ldef)
    assert key == "B===default "  # one trailing space, no leading space
    assert parse_key(key, ldef) == ParsedKey(1, "default", None)
    assert parse_namespace_key(key, ldef) == "default"


@pytest.mark.parametrize("ldef", DEFS_8_6, ids=DEF_IDS)
def test_table_key_vector(ldef: Any) -> None:
    key = table_key("default", "table", ldef)
    assert key == "C===default table "
    assert table_key("ns", "t", ldef) == "C===ns      t     "
    assert parse_table_key(key, ldef) == ("default", "table")
    assert parse_key(key, ldef) == ParsedKey(2, "default", "table")
    assert table_key_prefix("default", ldef) == "C===default "
    assert key.startswith(table_key_prefix("default", ldef))


def test_names_exactly_at_the_limit_have_no_padding() -> None:
    ldef = DEFS_8_6[0]
    assert namespace_key("abcdefgh", ldef) == "B===abcdefgh"
    assert table_key("abcdefgh", "uvwxyz", ldef) == "C===abcdefghuvwxyz"


def test_unset_protobuf_fields_use_defaults() -> None:
    msg = pb.LakehouseDef(name="lake")
    assert not msg.HasField("namespace_name_max_size_bytes")
    key = namespace_key("ns", msg)
    assert key == "B===ns" + " " * 98
    assert len(key.encode()) == 4 + 100
    tkey = table_key("ns", "t", msg)
    assert tkey == "C===ns" + " " * 98 + "t" + " " * 99
    assert parse_table_key(tkey, msg) == ("ns", "t")


def test_partly_set_protobuf_message() -> None:
    msg = pb.LakehouseDef(name="lake", table_name_max_size_bytes=3)
    assert table_key("ns", "t", msg) == "C===ns" + " " * 98 + "t  "


def test_plain_object_without_fields_uses_defaults() -> None:
    assert namespace_key("x", SimpleNamespace()) == "B===x" + " " * 99
    assert namespace_key("x", LakehouseDef(name="lake")) == "B===x" + " " * 99


@pytest.mark.parametrize("ldef", DEFS_8_6, ids=DEF_IDS)
def test_padding_counts_utf8_bytes(ldef: Any) -> None:
    key = namespace_key("é", ldef)  # 2 bytes: pad with 6 spaces, not 7
    assert key == "B===é" + " " * 6
    assert len(key.encode("utf-8")) == 4 + 8
    key = namespace_key("日本", ldef)  # 6 bytes
    assert key == "B===日本  "
    tkey = table_key("é", "日本", ldef)  # table max 6: no padding left
    assert tkey == "C===é      日本"
    assert len(tkey.encode("utf-8")) == 4 + 8 + 6
    assert parse_table_key(tkey, ldef) == ("é", "日本")
    assert encode_name("😀", 8) == "😀    "


@pytest.mark.parametrize("ldef", DEFS_8_6, ids=DEF_IDS)
def test_name_over_the_limit_in_bytes_but_not_in_characters(ldef: Any) -> None:
    name = "ééééé"  # 5 characters, 10 bytes > 8
    assert len(name) < 8
    with pytest.raises(InvalidNameError):
        namespace_key(name, ldef)
    with pytest.raises(InvalidNameError):
        table_key("ns", "ééé#", ldef)  # 4 characters, 7 bytes > 6
    assert table_key("ns", "ééé", ldef).endswith("ééé")  # exactly 6 bytes


@pytest.mark.parametrize("ldef", DEFS_8_6, ids=DEF_IDS)
def test_one_byte_over_the_limit(ldef: Any) -> None:
    with pytest.raises(InvalidNameError):
        namespace_key("abcdefghi", ldef)
    with pytest.raises(InvalidNameError):
        table_key("ns", "abcdefg", ldef)
    with pytest.raises(InvalidNameError):
        table_key("abcdefghi", "t", ldef)


BAD_NAMES = [chr(b) for b in range(0x00, 0x21)] + [
    "\x7f",
    "",
    "a b",
    "a\tb",
    "ab\x00",
    " ab",
    "ab ",
    "a\x7f",
    "\ud800",
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n) for n in BAD_NAMES])
def test_invalid_names(name: str) -> None:
    ldef = DEFS_8_6[1]
    for call in (
        lambda: namespace_key(name, ldef),
        lambda: table_key(name, "t", ldef),
        lambda: table_key("ns", name, ldef),
    ):
        with pytest.raises(InvalidNameError) as exc:
            call()
        assert isinstance(exc.value, InvalidArgumentError)
        assert isinstance(exc.value, LakecoreError)


def test_bytes_above_0x7f_are_allowed() -> None:
    # Only 0x00-0x20 and 0x7F are forbidden; U+0080 (C2 80) and U+00A0 (C2 A0) are fine.
    assert encode_name("\u0080", 4) == "\u0080  "
    assert encode_name("a\u00a0b", 8) == "a\u00a0b    "
    assert encode_name("~!", 2) == "~!"


# ---------------------------------------------------------------------------------------------
# Parsing malformed keys


@pytest.mark.parametrize(
    "key",
    [
        "",
        "B==",
        "B===",
        "B===default",  # one byte short
        "B===default  ",  # one byte long
        "B=== default",  # leading space
        "B===de fault",  # inner space
        "B===        ",  # empty name
        "B===de\x00fault",
        "A===default ",  # schema 0 has no keys
        "D===default ",  # unknown schema ID
        "B==default  ",
        "C===default table",  # one byte short
        "C===default tab le",  # inner space in the table part
        "C===default  able ",  # table part starts with a space
        "C===default       ",  # empty table name
        "C===        table ",  # empty namespace name
        "B===é" + " " * 7,  # 8 characters but 9 bytes: padding is counted in bytes
    ],
)
def test_parse_key_refuses_malformed(key: str) -> None:
    ldef = DEFS_8_6[0]
    with pytest.raises(InvalidNameError):
        parse_key(key, ldef)


def test_parse_key_kind_mismatch() -> None:
    ldef = DEFS_8_6[0]
    with pytest.raises(InvalidNameError):
        parse_namespace_key(table_key("a", "b", ldef), ldef)
    with pytest.raises(InvalidNameError):
        parse_table_key(namespace_key("a", ldef), ldef)


def test_parse_key_refuses_a_key_of_another_lakehouse_layout() -> None:
    small, large = _defs(8, 6)[0], _defs(10, 6)[0]
    with pytest.raises(InvalidNameError):
        parse_key(namespace_key("ns", small), large)


def test_parse_key_refuses_a_multibyte_character_split_by_the_boundary() -> None:
    ldef = DEFS_8_6[0]
    # 7 ASCII bytes then a 2-byte character straddling the namespace/table boundary.
    key = "C===abcdefgé" + "xxxxx"
    assert len(key[4:].encode()) == 14
    with pytest.raises(InvalidNameError):
        parse_key(key, ldef)


def test_system_keys() -> None:
    assert set(SYSTEM_KEYS) == {
        "lakehouse_def",
        "previous_root",
        "rollback_from_root",
        "created_at_millis",
        "n_keys",
    }
    for key in SYSTEM_KEYS:
        assert is_system_key(key)
    assert not is_system_key("B===default ")
    assert not is_system_key("n_key")


# ---------------------------------------------------------------------------------------------
# Properties

# Valid name characters: anything but surrogates, control characters, space and DEL.
NAME_CHARS = st.characters(
    exclude_categories=("Cs",), exclude_characters="".join(chr(b) for b in range(0x21)) + "\x7f"
)


def names(max_bytes: int) -> st.SearchStrategy[str]:
    return st.text(NAME_CHARS, min_size=1, max_size=max_bytes).filter(
        lambda s: len(s.encode()) <= max_bytes
    )


NS_MAX, TABLE_MAX = 12, 9
PROP_DEFS = _defs(NS_MAX, TABLE_MAX)


def utf8(s: str) -> bytes:
    return s.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(ns=names(NS_MAX), table=names(TABLE_MAX), which=st.integers(0, 2))
def test_round_trip(ns: str, table: str, which: int) -> None:
    ldef = PROP_DEFS[which]
    nkey = namespace_key(ns, ldef)
    assert len(utf8(nkey)) == 4 + NS_MAX
    assert parse_key(nkey, ldef) == ParsedKey(1, ns, None)
    tkey = table_key(ns, table, ldef)
    assert len(utf8(tkey)) == 4 + NS_MAX + TABLE_MAX
    assert parse_table_key(tkey, ldef) == (ns, table)
    assert tkey.startswith(table_key_prefix(ns, ldef))


@settings(max_examples=150, deadline=None)
@given(st.lists(names(NS_MAX), min_size=2, max_size=8, unique=True))
def test_namespace_key_order_is_utf8_byte_order_and_name_order(ns_names: list[str]) -> None:
    ldef = PROP_DEFS[0]
    key_of = {n: namespace_key(n, ldef) for n in ns_names}
    by_str = sorted(ns_names, key=lambda n: key_of[n])
    by_bytes = sorted(ns_names, key=lambda n: utf8(key_of[n]))
    by_name_bytes = sorted(ns_names, key=utf8)
    assert by_str == by_bytes == by_name_bytes


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names(NS_MAX), names(TABLE_MAX)), min_size=2, max_size=8, unique=True))
def test_table_key_order_is_utf8_byte_order_and_name_order(pairs: list[tuple[str, str]]) -> None:
    ldef = PROP_DEFS[1]
    key_of = {p: table_key(p[0], p[1], ldef) for p in pairs}
    by_str = sorted(pairs, key=lambda p: key_of[p])
    by_bytes = sorted(pairs, key=lambda p: utf8(key_of[p]))
    by_names = sorted(pairs, key=lambda p: (utf8(p[0]), utf8(p[1])))
    assert by_str == by_bytes == by_names


@settings(max_examples=150, deadline=None)
@given(prefix=names(NS_MAX), rest=st.text(NAME_CHARS, min_size=1, max_size=6))
def test_a_name_sorts_before_every_longer_name_it_prefixes(prefix: str, rest: str) -> None:
    longer = prefix + rest
    assume(len(utf8(longer)) <= NS_MAX)
    ldef = PROP_DEFS[2]
    short_key, long_key = namespace_key(prefix, ldef), namespace_key(longer, ldef)
    assert short_key < long_key
    assert utf8(short_key) < utf8(long_key)
    # Also inside a table key: the namespace part keeps the order whatever the tables are.
    assert utf8(table_key(prefix, "~" * TABLE_MAX, ldef)) < utf8(table_key(longer, "!", ldef))
    if len(utf8(longer)) <= TABLE_MAX:
        assert utf8(table_key("ns", prefix, ldef)) < utf8(table_key("ns", longer, ldef))
