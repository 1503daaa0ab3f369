"""Object names, encoded object keys, schema IDs and system keys (docs/format.md#keys).

Key layout (``[sp]`` is the byte 0x20)::

    namespace key  =  "B===" + name(ns)    right-padded with [sp] to namespace_name_max_size_bytes
    table key      =  "C===" + name(ns)    right-padded to namespace_name_max_size_bytes
                             + name(table) right-padded to table_name_max_size_bytes
    view key       =  "D===" + name(ns)    right-padded to namespace_name_max_size_bytes
                             + name(view)  right-padded to table_name_max_size_bytes

A view's name obeys a table name's limit: views and tables share a namespace's names (the
lakehouse and the Iceberg catalog refuse a view named like a table and the reverse), and one
limit keeps both kinds of key the same length.

Padding counts UTF-8 *bytes*, not characters. Keys order bytewise by their UTF-8 encoding;
Python compares ``str`` by code point, which is the same order for valid UTF-8, so keys are
kept as ``str`` everywhere and compared directly. Names may not contain bytes 0x00-0x20 or 0x7F,
so padding with 0x20 sorts a name before every longer name it prefixes and strips exactly.

System keys (``lakehouse_def``, ``previous_root``, ...) live in a node's system rows; they never
take part in key ordering.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Final

from lakecore.errors import InvalidNameError

BASE64_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
SCHEMA_ID_PADDING: Final = "==="

# Schema 0 is the lakehouse's own, which has no object key.
NAMESPACE_SCHEMA: Final = 1
TABLE_SCHEMA: Final = 2
VIEW_SCHEMA: Final = 3

DEFAULT_NAMESPACE_NAME_MAX_SIZE_BYTES: Final = 100
DEFAULT_TABLE_NAME_MAX_SIZE_BYTES: Final = 100

# System keys: the first three appear in root nodes only; the last two in every node.
LAKEHOUSE_DEF_KEY: Final = "lakehouse_def"
PREVIOUS_ROOT_KEY: Final = "previous_root"
ROLLBACK_FROM_ROOT_KEY: Final = "rollback_from_root"
CREATED_AT_MILLIS_KEY: Final = "created_at_millis"
N_KEYS_KEY: Final = "n_keys"
ROOT_ONLY_SYSTEM_KEYS: Final = (LAKEHOUSE_DEF_KEY, PREVIOUS_ROOT_KEY, ROLLBACK_FROM_ROOT_KEY)
EVERY_NODE_SYSTEM_KEYS: Final = (CREATED_AT_MILLIS_KEY, N_KEYS_KEY)
SYSTEM_KEYS: Final = ROOT_ONLY_SYSTEM_KEYS + EVERY_NODE_SYSTEM_KEYS


def schema_id(n: int) -> str:
    """The 4-character encoded schema ID: one base64 digit and ``===``."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < len(BASE64_ALPHABET):
        raise InvalidNameError(f"schema ID {n!r} is outside 0..63")
    return BASE64_ALPHABET[n] + SCHEMA_ID_PADDING


def schema_id_value(encoded: str) -> int:
    """Inverse of ``schema_id``."""
    if len(encoded) != 4 or encoded[1:] != SCHEMA_ID_PADDING or encoded[0] not in BASE64_ALPHABET:
        raise InvalidNameError(
            f"{encoded!r} is not an encoded schema ID (one base64 digit + '===')"
        )
    return BASE64_ALPHABET.index(encoded[0])


NAMESPACE_KEY_PREFIX: Final = schema_id(NAMESPACE_SCHEMA)
TABLE_KEY_PREFIX: Final = schema_id(TABLE_SCHEMA)
VIEW_KEY_PREFIX: Final = schema_id(VIEW_SCHEMA)


def _limit(lakehouse_def: Any, field: str, default: int) -> int:
    # Accepts the generated protobuf message too: an unset proto3 field reads as 0, and 0 is
    # never a valid limit, so it means "use the default".
    value = getattr(lakehouse_def, field, None)
    if value is None or value == 0:
        return default
    return int(value)


def namespace_name_max_bytes(lakehouse_def: Any) -> int:
    return _limit(
        lakehouse_def, "namespace_name_max_size_bytes", DEFAULT_NAMESPACE_NAME_MAX_SIZE_BYTES
    )


def table_name_max_bytes(lakehouse_def: Any) -> int:
    return _limit(lakehouse_def, "table_name_max_size_bytes", DEFAULT_TABLE_NAME_MAX_SIZE_BYTES)


def validate_name(name: str, max_bytes: int, what: str = "object") -> bytes:
    """Check an object name and return its UTF-8 bytes; raise InvalidNameError if it breaks a rule."""
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} name must be a string, not {type(name).__name__}")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidNameError(f"{what} name {name!r} is not valid UTF-8: {exc.reason}") from None
    if not encoded:
        raise InvalidNameError(f"{what} name is empty: names need 1 to {max_bytes} bytes")
    if len(encoded) > max_bytes:
        raise InvalidNameError(
            f"{what} name {name!r} is {len(encoded)} bytes in UTF-8; the lakehouse allows at most "
            f"{max_bytes} (shorten it, or create the lakehouse with a larger limit)"
        )
    for i, byte in enumerate(encoded):
        if byte <= 0x20 or byte == 0x7F:
            raise InvalidNameError(
                f"{what} name {name!r} has byte 0x{byte:02X} at offset {i}: control characters, "
                "space and DEL are not allowed in names"
            )
    return encoded


def refuse_unclear_name(name: str, what: str = "object") -> None:
    """The rule for a *new* name, on top of ``validate_name`` (docs/format.md#keys): no
    Unicode format character (category Cf: U+200B ZERO WIDTH SPACE made ``zw\u200bsp`` print
    as ``zwsp``, U+202E RIGHT-TO-LEFT OVERRIDE reverses what follows), and not ``.`` or ``..``
    (HTTP clients and path joins remove those as segments). Names already stored are read
    whatever they hold.

    Raises:
        InvalidNameError: with the character or the reason.
    """
    if name in (".", ".."):
        raise InvalidNameError(
            f"{what} name {name!r} is refused: '.' and '..' mean this and the parent folder to "
            "paths and HTTP clients, which would remove them"
        )
    for i, char in enumerate(name):
        if unicodedata.category(char) == "Cf":
            raise InvalidNameError(
                f"{what} name {name!a} holds U+{ord(char):04X} "
                f"({unicodedata.name(char, 'a format character')}) at character {i}: invisible "
                "format characters make a name look like another; leave it out"
            )


def encode_name(name: str, max_bytes: int, what: str = "object") -> str:
    """The name right-padded with spaces to exactly ``max_bytes`` UTF-8 bytes."""
    encoded = validate_name(name, max_bytes, what)
    return name + " " * (max_bytes - len(encoded))


def namespace_key(ns: str, lakehouse_def: Any) -> str:
    return NAMESPACE_KEY_PREFIX + encode_name(
        ns, namespace_name_max_bytes(lakehouse_def), "namespace"
    )


def table_key(ns: str, table: str, lakehouse_def: Any) -> str:
    return (
        TABLE_KEY_PREFIX
        + encode_name(ns, namespace_name_max_bytes(lakehouse_def), "namespace")
        + encode_name(table, table_name_max_bytes(lakehouse_def), "table")
    )


def table_key_prefix(ns: str, lakehouse_def: Any) -> str:
    """Every table key of namespace ``ns`` starts with this; used to list a namespace's tables."""
    return TABLE_KEY_PREFIX + encode_name(ns, namespace_name_max_bytes(lakehouse_def), "namespace")


def view_key(ns: str, view: str, lakehouse_def: Any) -> str:
    return (
        VIEW_KEY_PREFIX
        + encode_name(ns, namespace_name_max_bytes(lakehouse_def), "namespace")
        + encode_name(view, table_name_max_bytes(lakehouse_def), "view")
    )


def view_key_prefix(ns: str, lakehouse_def: Any) -> str:
    """Every view key of namespace ``ns`` starts with this; used to list a namespace's views."""
    return VIEW_KEY_PREFIX + encode_name(ns, namespace_name_max_bytes(lakehouse_def), "namespace")


@dataclass(frozen=True)
class ParsedKey:
    """What an object key names: ``table`` is set for a table key, ``view`` for a view key,
    neither for a namespace key."""

    schema: int
    namespace: str
    table: str | None = None
    view: str | None = None

    @property
    def kind(self) -> str:
        """``namespace``, ``table`` or ``view``."""
        if self.view is not None:
            return "view"
        return "namespace" if self.table is None else "table"

    @property
    def name(self) -> str:
        """The object's own name: the table's or view's, or the namespace's."""
        return self.view or self.table or self.namespace


def _decode_padded(raw: bytes, max_bytes: int, what: str, key: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidNameError(f"key {key!r}: the {what} part is not valid UTF-8") from None
    name = text.rstrip(" ")
    if text[len(name) :].strip(" "):
        raise InvalidNameError(f"key {key!r}: the {what} part is not space-padded")
    validate_name(name, max_bytes, what)
    return name


def parse_namespace_key(key: str, lakehouse_def: Any) -> str:
    """The namespace name of a namespace key."""
    parsed = parse_key(key, lakehouse_def)
    if parsed.kind != "namespace":
        raise InvalidNameError(f"key {key!r} is a {parsed.kind} key, not a namespace key")
    return parsed.namespace


def parse_table_key(key: str, lakehouse_def: Any) -> tuple[str, str]:
    """(namespace, table) of a table key."""
    parsed = parse_key(key, lakehouse_def)
    if parsed.table is None:
        raise InvalidNameError(f"key {key!r} is a {parsed.kind} key, not a table key")
    return parsed.namespace, parsed.table


def parse_view_key(key: str, lakehouse_def: Any) -> tuple[str, str]:
    """(namespace, view) of a view key."""
    parsed = parse_key(key, lakehouse_def)
    if parsed.view is None:
        raise InvalidNameError(f"key {key!r} is a {parsed.kind} key, not a view key")
    return parsed.namespace, parsed.view


def parse_key(key: str, lakehouse_def: Any) -> ParsedKey:
    """Parse an object key back into its names; InvalidNameError if it is not a valid key."""
    if not isinstance(key, str) or len(key) < 4:
        raise InvalidNameError(f"{key!r} is not an object key (too short for a schema ID)")
    schema = schema_id_value(key[:4])
    body = key[4:].encode("utf-8")
    ns_max = namespace_name_max_bytes(lakehouse_def)
    if schema == NAMESPACE_SCHEMA:
        if len(body) != ns_max:
            raise InvalidNameError(
                f"namespace key {key!r} is {len(body)} bytes after its schema ID, expected {ns_max}"
            )
        return ParsedKey(schema, _decode_padded(body, ns_max, "namespace", key))
    if schema in (TABLE_SCHEMA, VIEW_SCHEMA):
        what = "table" if schema == TABLE_SCHEMA else "view"
        table_max = table_name_max_bytes(lakehouse_def)
        if len(body) != ns_max + table_max:
            raise InvalidNameError(
                f"{what} key {key!r} is {len(body)} bytes after its schema ID, expected {ns_max + table_max}"
            )
        ns = _decode_padded(body[:ns_max], ns_max, "namespace", key)
        name = _decode_padded(body[ns_max:], table_max, what, key)
        if schema == TABLE_SCHEMA:
            return ParsedKey(schema, ns, table=name)
        return ParsedKey(schema, ns, view=name)
    raise InvalidNameError(
        f"key {key!r} has schema ID {schema}; this profile knows 1 (namespace), 2 (table) and "
        "3 (view)"
    )


def is_system_key(key: str) -> bool:
    return key in SYSTEM_KEYS
