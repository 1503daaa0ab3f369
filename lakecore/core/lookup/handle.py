"""Block handles: where a block sits in the file. They are the values of the index block.

Byte layout (docs/lookup-format.md#block-handles)::

    varint64 offset     file offset of the block's first stored byte
    varint32 size       stored size of the block, excluding its 5-byte trailer
"""

from __future__ import annotations

from typing import NamedTuple

from lakecore.core.lookup.varint import (
    MAX_INT32,
    MAX_INT64,
    VARINT32_MAX_BYTES,
    VARINT64_MAX_BYTES,
    decode_varint,
    encode_varint,
)


class BlockHandle(NamedTuple):
    offset: int
    size: int

    def encode(self) -> bytes:
        return encode_varint(self.offset) + encode_varint(self.size)

    @classmethod
    def decode(cls, raw: bytes) -> BlockHandle:
        """Decode a handle that must fill ``raw`` exactly; ``ValueError`` if it does not."""
        offset, pos = decode_varint(raw, 0, len(raw), VARINT64_MAX_BYTES)
        size, pos = decode_varint(raw, pos, len(raw), VARINT32_MAX_BYTES)
        if pos != len(raw):
            raise ValueError(f"block handle has {len(raw) - pos} stray bytes after it")
        if offset > MAX_INT64 or size > MAX_INT32:
            raise ValueError(f"block handle ({offset}, {size}) is out of range")
        return cls(offset, size)
