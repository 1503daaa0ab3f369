"""The in-memory node and its Arrow IPC codec (docs/format.md#node-files).

A node file is an Arrow IPC *file* (with footer) holding one uncompressed record batch with the
schema ``key: utf8, pvalue: utf8, pnode: utf8`` (all nullable, in that order). Rows, top to
bottom::

    system rows     key=<system key>  pvalue=<decimal or location>  pnode=null
    key table       row 0:        key=null  pvalue=null  pnode=<leftmost child> | null (leaf)
    (exactly N      rows 1..k:    key=K_i   pvalue=V_i   pnode=<child right of K_i> | null (leaf)
     rows)          rows k+1..N-1: all null
    write buffer    key=K  pvalue=V (set) | null (delete)  pnode=null;  later rows are newer

``N`` is the tree order; ``k = n_keys <= N-1``. The key table starts at the first row whose
``key`` and ``pvalue`` are both null. Writers emit ``created_at_millis`` and ``n_keys`` in every
node and the root-only system keys in roots; readers accept any known subset and refuse an
unknown system key.

The writer keeps at most one message per key in a buffer (only the newest message for a key can
ever decide a read) and writes them sorted by key; the reader accepts duplicates, newest last.

Size: the encoded size is computed exactly from the string lengths (``encoded_size``) so that the
tree can decide whether a node fits ``node_file_max_size_bytes`` without serialising it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa

from lakecore.core import keys as K
from lakecore.core.ipc_probe import IpcProbeError, has_compressed_record_batch
from lakecore.core.locations import check_relative_path, is_full_uri, normalize_root_uri
from lakecore.errors import CorruptNodeFileError, InvalidLocationError

NODE_SCHEMA: Final = pa.schema(
    [
        pa.field("key", pa.string(), nullable=True),
        pa.field("pvalue", pa.string(), nullable=True),
        pa.field("pnode", pa.string(), nullable=True),
    ]
)
# Bytes an IPC file with one record batch of NODE_SCHEMA adds on top of its column buffers:
# magic, schema message (twice: stream header and footer), batch metadata and footer. Measured
# on pyarrow 15-26 as 762; rounded up so that a different flatbuffer padding cannot make a node
# larger than the size the tree budgeted for. tests/core/test_node.py checks the bound.
IPC_FILE_OVERHEAD_BYTES: Final = 1024

# The order in which system rows are written.
_SYSTEM_ROW_ORDER: Final = (
    K.LAKEHOUSE_DEF_KEY,
    K.PREVIOUS_ROOT_KEY,
    K.ROLLBACK_FROM_ROOT_KEY,
    K.CREATED_AT_MILLIS_KEY,
    K.N_KEYS_KEY,
)

Message = tuple[str, str | None]


@dataclass(slots=True)
class Node:
    """A node's content. ``children`` is empty for a leaf, else ``len(keys) + 1`` locations.

    ``buffer`` maps a key to its newest message: a pvalue (set) or None (delete).
    ``system`` holds the system rows other than ``n_keys`` (derived from ``keys``)."""

    keys: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    buffer: dict[str, str | None] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def n_keys(self) -> int:
        return len(self.keys)

    def pvalues(self) -> Iterator[str]:
        """Every value this node stores: its key table's, then its buffered set messages'."""
        yield from self.values
        for value in self.buffer.values():
            if value is not None:
                yield value

    def same_tree_as(self, other: Node) -> bool:
        """True when both nodes say the same about the tree: keys, values, children and buffer
        (not the system rows, which name the definition and the version's history). For roots:
        node files never change, so equal roots mean equal trees."""
        return (
            self.keys == other.keys
            and self.values == other.values
            and self.children == other.children
            and self.buffer == other.buffer
        )

    def copy(self) -> Node:
        return Node(
            list(self.keys),
            list(self.values),
            list(self.children),
            dict(self.buffer),
            dict(self.system),
        )


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def utf8_len(text: str) -> int:
    """UTF-8 bytes of one string."""
    # ASCII fast path: catalog keys and paths are almost always ASCII.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def utf8_total(texts: Iterable[str]) -> int:
    """UTF-8 bytes of many strings: one join instead of a Python call per string."""
    joined = "".join(texts)
    return len(joined) if joined.isascii() else len(joined.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class SizeParts:
    """Byte counts of the three string columns, enough to compute the encoded size."""

    rows: int
    key_bytes: int
    pvalue_bytes: int
    pnode_bytes: int

    @property
    def total(self) -> int:
        rows = self.rows
        per_column_fixed = _pad8((rows + 7) // 8) + _pad8(4 * (rows + 1))
        return (
            IPC_FILE_OVERHEAD_BYTES
            + 3 * per_column_fixed
            + _pad8(self.key_bytes)
            + _pad8(self.pvalue_bytes)
            + _pad8(self.pnode_bytes)
        )


def system_rows(node: Node) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [
        (key, node.system[key])
        for key in _SYSTEM_ROW_ORDER
        if key in node.system and key != K.N_KEYS_KEY
    ]
    rows.append((K.N_KEYS_KEY, str(len(node.keys))))
    return rows


def size_parts(node: Node, order: int) -> SizeParts:
    sys_rows = system_rows(node)
    key_bytes = utf8_total(k for k, _ in sys_rows) + utf8_total(node.keys) + utf8_total(node.buffer)
    pvalue_bytes = (
        utf8_total(v for _, v in sys_rows)
        + utf8_total(node.values)
        + utf8_total(v for v in node.buffer.values() if v is not None)
    )
    pnode_bytes = utf8_total(node.children)
    return SizeParts(len(sys_rows) + order + len(node.buffer), key_bytes, pvalue_bytes, pnode_bytes)


def encoded_size(node: Node, order: int) -> int:
    """The size of ``encode_node(node, order)`` (an upper bound, within a few hundred bytes)."""
    return size_parts(node, order).total


def message_size(key: str, value: str | None) -> int:
    """Bytes one buffer message adds to a node file (string bytes plus two offsets)."""
    return utf8_len(key) + (0 if value is None else utf8_len(value)) + 12


def encode_node(node: Node, order: int) -> bytes:
    """Serialise a node of a tree of order ``order`` to Arrow IPC file bytes."""
    n_keys = len(node.keys)
    if n_keys > order - 1:
        raise ValueError(f"node has {n_keys} keys; order {order} allows {order - 1}")
    if node.children and len(node.children) != n_keys + 1:
        raise ValueError(f"internal node has {len(node.children)} children for {n_keys} keys")
    sys_rows = system_rows(node)
    key_col: list[str | None] = [k for k, _ in sys_rows]
    pvalue_col: list[str | None] = [v for _, v in sys_rows]
    pnode_col: list[str | None] = [None] * len(sys_rows)
    key_col.append(None)
    pvalue_col.append(None)
    pnode_col.append(node.children[0] if node.children else None)
    key_col.extend(node.keys)
    pvalue_col.extend(node.values)
    if node.children:
        pnode_col.extend(node.children[1:])
    else:
        pnode_col.extend([None] * n_keys)
    empty = order - 1 - n_keys
    key_col.extend([None] * empty)
    pvalue_col.extend([None] * empty)
    pnode_col.extend([None] * empty)
    for key in sorted(node.buffer):
        key_col.append(key)
        pvalue_col.append(node.buffer[key])
    pnode_col.extend([None] * len(node.buffer))
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(key_col, type=pa.string()),
            pa.array(pvalue_col, type=pa.string()),
            pa.array(pnode_col, type=pa.string()),
        ],
        schema=NODE_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, NODE_SCHEMA) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def _read_columns(
    data: bytes, location: str
) -> tuple[list[str | None], list[str | None], list[str | None]]:
    if len(data) < 12 or data[:6] != b"ARROW1" or data[-6:] != b"ARROW1":
        raise CorruptNodeFileError(
            location, "not an Arrow IPC file (missing ARROW1 magic); truncated or foreign file"
        )
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        schema = reader.schema
        batches = reader.num_record_batches
        if (
            not schema.equals(NODE_SCHEMA, check_metadata=False)
            or [f.nullable for f in schema] != [True] * 3
        ):
            raise CorruptNodeFileError(
                location,
                f"schema is {schema.to_string(show_schema_metadata=False)!r}; expected key, pvalue, pnode: utf8 nullable",
            )
        if batches != 1:
            raise CorruptNodeFileError(
                location, f"holds {batches} record batches; a node file has exactly one"
            )
        # Checked before get_batch, which would decompress: a compressed body of a few KB can
        # expand to any size, and docs/format.md#arrow-ipc-layout says node files are uncompressed.
        if has_compressed_record_batch(data):
            raise CorruptNodeFileError(
                location,
                "its record batch is compressed; node files are uncompressed "
                "(docs/format.md#arrow-ipc-layout): rewrite it without IPC compression",
            )
        batch = reader.get_batch(0)
        batch.validate(full=True)
        return (
            batch.column(0).to_pylist(),
            batch.column(1).to_pylist(),
            batch.column(2).to_pylist(),
        )
    except CorruptNodeFileError:
        raise
    except IpcProbeError as exc:
        raise CorruptNodeFileError(location, f"unreadable Arrow IPC metadata: {exc}") from None
    except (pa.ArrowException, ValueError, OSError, IndexError, UnicodeDecodeError) as exc:
        raise CorruptNodeFileError(
            location, f"unreadable Arrow IPC data: {' '.join(str(exc).split())}"
        ) from None


def _check_child(location: str, row: int, child: str) -> str:
    try:
        if is_full_uri(child):
            # Allowed only in partial exports; the tree refuses to follow it unless told to.
            # It must still be a qualified URI (docs/format.md#qualified-uris): s3://b/../x is
            # refused.
            normalize_root_uri(child)
            return child
        return check_relative_path(child)
    except InvalidLocationError as exc:
        raise CorruptNodeFileError(
            location, f"row {row}: child pointer {child!r} is not a qualified location ({exc})"
        ) from None


def decode_node(data: bytes, location: str, order: int | None = None) -> Node:
    """Parse node file bytes strictly; CorruptNodeFileError names the file and the rule broken.

    With ``order`` the key table must have exactly ``order`` rows; without it the key table
    length is inferred (used before the lakehouse definition is known)."""
    keys_col, pvalues_col, pnodes_col = _read_columns(data, location)
    total = len(keys_col)
    node = Node()
    row = 0
    # System rows run until the first row with null key and null pvalue.
    while row < total and not (keys_col[row] is None and pvalues_col[row] is None):
        key, value, pnode = keys_col[row], pvalues_col[row], pnodes_col[row]
        if key is None or value is None:
            raise CorruptNodeFileError(
                location, f"row {row}: a system row needs both key and pvalue"
            )
        if pnode is not None:
            raise CorruptNodeFileError(
                location, f"row {row}: system row {key!r} has a non-null pnode"
            )
        if key not in K.SYSTEM_KEYS:
            raise CorruptNodeFileError(
                location,
                f"row {row}: unknown system key {key!r} before the key table (no null separator row?)",
            )
        if key in node.system:
            raise CorruptNodeFileError(location, f"row {row}: system key {key!r} appears twice")
        node.system[key] = value
        row += 1
    if row >= total:
        raise CorruptNodeFileError(location, "no null separator row: the node key table is missing")
    declared_n_keys: int | None = None
    if K.N_KEYS_KEY in node.system:
        text = node.system.pop(K.N_KEYS_KEY)
        if not (text.isascii() and text.isdigit()) or len(text) > 10:
            raise CorruptNodeFileError(location, f"n_keys is {text!r}, not a decimal count")
        declared_n_keys = int(text)
    created = node.system.get(K.CREATED_AT_MILLIS_KEY)
    if created is not None and (not (created.isascii() and created.isdigit()) or len(created) > 19):
        raise CorruptNodeFileError(
            location, f"created_at_millis is {created!r}, not a decimal count of milliseconds"
        )

    table_start = row
    first_child = pnodes_col[table_start]
    row = table_start + 1
    children: list[str] = []
    if first_child is not None:
        children.append(_check_child(location, table_start, first_child))
    previous: str | None = None
    while row < total and keys_col[row] is not None:
        if order is not None and row - table_start >= order:
            break  # a full key table; the buffer follows directly
        if declared_n_keys is not None and row - table_start > declared_n_keys:
            break
        key, value, pnode = keys_col[row], pvalues_col[row], pnodes_col[row]
        assert key is not None
        if value is None:
            raise CorruptNodeFileError(
                location, f"row {row}: key table entry {key!r} has a null pvalue"
            )
        if previous is not None and key <= previous:
            raise CorruptNodeFileError(
                location, f"row {row}: key table is not sorted ({key!r} after {previous!r})"
            )
        if (pnode is None) != (first_child is None):
            raise CorruptNodeFileError(
                location,
                f"row {row}: key {key!r} {'lacks' if pnode is None else 'has'} a child pointer but row "
                f"{table_start} {'has' if pnode is None else 'lacks'} one (a node is either a leaf or has all k+1 pointers)",
            )
        if pnode is not None:
            children.append(_check_child(location, row, pnode))
        node.keys.append(key)
        node.values.append(value)
        previous = key
        row += 1
    n_keys = len(node.keys)
    if declared_n_keys is not None and declared_n_keys != n_keys:
        raise CorruptNodeFileError(
            location, f"n_keys says {declared_n_keys} but the key table holds {n_keys} keys"
        )
    # Trailing empty rows of the key table.
    while row < total and keys_col[row] is None and (order is None or row - table_start < order):
        if pvalues_col[row] is not None or pnodes_col[row] is not None:
            raise CorruptNodeFileError(
                location, f"row {row}: an unused key table row must be all null"
            )
        row += 1
    table_rows = row - table_start
    if order is not None and table_rows != order:
        raise CorruptNodeFileError(
            location,
            f"key table has {table_rows} rows; a tree of order {order} needs exactly {order}",
        )
    if n_keys > table_rows - 1:
        raise CorruptNodeFileError(
            location, f"{n_keys} keys do not fit a key table of {table_rows} rows"
        )
    node.children = children
    for buffer_row in range(row, total):
        key, value, pnode = keys_col[buffer_row], pvalues_col[buffer_row], pnodes_col[buffer_row]
        if key is None:
            raise CorruptNodeFileError(
                location, f"row {buffer_row}: write buffer row with a null key"
            )
        if pnode is not None:
            raise CorruptNodeFileError(
                location, f"row {buffer_row}: write buffer row for {key!r} has a non-null pnode"
            )
        node.buffer.pop(key, None)
        node.buffer[key] = value
    return node


def read_system_rows(data: bytes, location: str) -> Mapping[str, str]:
    """Only the system rows of a node file (for example a root's lakehouse_def pointer)."""
    node = decode_node(data, location)
    return dict(node.system)
