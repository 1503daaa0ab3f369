"""Look inside an Arrow IPC file's metadata without decoding any record batch body.

Why: pyarrow decompresses a compressed record batch eagerly, and a compressed body of a few KB
can declare (and expand to) any size. docs/format.md#arrow-ipc-layout says node files are
uncompressed, so the node decoder asks this probe first and refuses a compressed batch before
pyarrow touches it.

Byte layout read here (Arrow columnar format, IPC file)::

    file      "ARROW1" pad(2) | stream messages ... | footer flatbuffer | int32 footer_len | "ARROW1"
    Footer    table { 0 version: short, 1 schema: Schema, 2 dictionaries: [Block],
                      3 recordBatches: [Block], 4 custom_metadata }
    Block     struct { offset: int64, metaDataLength: int32, pad(4), bodyLength: int64 }  (24 bytes)
    message   at Block.offset: 0xFFFFFFFF int32 length | Message flatbuffer
              (or, before Arrow 0.15, int32 length | Message flatbuffer)
    Message   table { 0 version: short, 1 header_type: ubyte, 2 header: union, 3 bodyLength: long, ... }
    RecordBatch (header_type 3)
              table { 0 length: long, 1 nodes: [FieldNode], 2 buffers: [Buffer],
                      3 compression: BodyCompression, 4 variadicBufferCounts }

Flatbuffers: a buffer starts with a uint32 offset to its root table; a table starts with an
int32 soffset back to its vtable (vtable = table - soffset); a vtable is uint16 vtable size,
uint16 table size, then one uint16 field offset per field (0 = absent). An offset-typed field
holds a uint32 relative to its own position; a vector is a uint32 count then its elements.

Every read is bounds-checked; anything out of range is reported as ``IpcProbeError`` so that the
caller can name the file. The probe only answers what it is asked; pyarrow still validates the rest.
"""

from __future__ import annotations

import struct
from typing import Final

_MAGIC: Final = b"ARROW1"
_CONTINUATION: Final = 0xFFFFFFFF
_BLOCK_SIZE: Final = 24
_HEADER_RECORD_BATCH: Final = 3

_FOOTER_RECORD_BATCHES: Final = 3
_MESSAGE_HEADER_TYPE: Final = 1
_MESSAGE_HEADER: Final = 2
_RECORD_BATCH_COMPRESSION: Final = 3


class IpcProbeError(ValueError):
    """The IPC metadata is out of bounds or malformed."""


class _Flatbuffer:
    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)

    def _unpack(self, fmt: str, at: int) -> int:
        size = struct.calcsize(fmt)
        if at < 0 or at + size > len(self.data):
            raise IpcProbeError(
                f"flatbuffer read of {size} bytes at {at} is outside its {len(self.data)} bytes"
            )
        value: int = struct.unpack_from(fmt, self.data, at)[0]
        return value

    def root(self) -> int:
        return self._unpack("<I", 0)

    def field_position(self, table: int, field: int) -> int | None:
        """Where ``field`` of the table at ``table`` is stored, or None when it is absent."""
        vtable = table - self._unpack("<i", table)
        vtable_size = self._unpack("<H", vtable)
        slot = 4 + 2 * field
        if slot + 2 > vtable_size:
            return None
        offset = self._unpack("<H", vtable + slot)
        return table + offset if offset else None

    def indirect(self, position: int) -> int:
        return position + self._unpack("<I", position)

    def u8(self, position: int) -> int:
        return self._unpack("<B", position)


def record_batch_offsets(data: bytes | memoryview) -> list[int]:
    """File offsets of the record batch messages the footer lists (what readers will decode)."""
    view = memoryview(data)
    if len(view) < 16 or bytes(view[:6]) != _MAGIC or bytes(view[-6:]) != _MAGIC:
        raise IpcProbeError("not an Arrow IPC file (missing ARROW1 magic)")
    (footer_length,) = struct.unpack_from("<i", view, len(view) - 10)
    footer_start = len(view) - 10 - footer_length
    if footer_length <= 0 or footer_start < 8:
        raise IpcProbeError(f"footer length {footer_length} does not fit a {len(view)}-byte file")
    footer = _Flatbuffer(view[footer_start : len(view) - 10])
    table = footer.root()
    position = footer.field_position(table, _FOOTER_RECORD_BATCHES)
    if position is None:
        return []
    vector = footer.indirect(position)
    count = footer._unpack("<I", vector)
    if vector + 4 + count * _BLOCK_SIZE > len(footer.data):
        raise IpcProbeError(f"footer lists {count} record batches, more than it has room for")
    return [footer._unpack("<q", vector + 4 + i * _BLOCK_SIZE) for i in range(count)]


def _message_at(view: memoryview, offset: int) -> _Flatbuffer:
    if offset < 8 or offset + 8 > len(view):
        raise IpcProbeError(f"record batch offset {offset} is outside the {len(view)}-byte file")
    (prefix,) = struct.unpack_from("<I", view, offset)
    if prefix == _CONTINUATION:
        (length,) = struct.unpack_from("<i", view, offset + 4)
        start = offset + 8
    else:
        length, start = prefix, offset + 4
    if length <= 0 or start + length > len(view):
        raise IpcProbeError(
            f"message at {offset} declares {length} metadata bytes, past the end of the file"
        )
    return _Flatbuffer(view[start : start + length])


def has_compressed_record_batch(data: bytes | memoryview) -> bool:
    """Whether any record batch in the file declares a compressed body (LZ4_FRAME or ZSTD)."""
    view = memoryview(data)
    for offset in record_batch_offsets(view):
        message = _message_at(view, offset)
        table = message.root()
        kind = message.field_position(table, _MESSAGE_HEADER_TYPE)
        header = message.field_position(table, _MESSAGE_HEADER)
        if kind is None or header is None or message.u8(kind) != _HEADER_RECORD_BATCH:
            continue  # not a record batch; pyarrow refuses it when asked for the batch
        batch = message.indirect(header)
        if message.field_position(batch, _RECORD_BATCH_COMPRESSION) is not None:
            return True
    return False
