"""Unsigned LEB128 variable-length integers, the length prefixes of the sorted lookup file.

Byte layout (docs/lookup-format.md#conventions)::

    7 bits of the value per byte, least significant group first;
    the high bit (0x80) of a byte is set when another byte follows.

    0          -> 00
    127        -> 7F
    128        -> 80 01
    300        -> AC 02

A ``varint32`` (entry key and value lengths, block sizes, uncompressed lengths) takes at most
5 bytes, a ``varint64`` (block offsets) at most 10. Decoding is strict: a value that runs past
its limit or uses more bytes than its width allows is malformed.

This module owns only the encoding. The decoders raise ``ValueError`` with a short rule; the
reader turns that into a ``CorruptLookupFileError`` that names the file and the byte offset.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Longest encoding of a 32-bit length: ceil(32 / 7) bytes.
VARINT32_MAX_BYTES = 5
#: Longest encoding of a 64-bit offset: ceil(64 / 7) bytes.
VARINT64_MAX_BYTES = 10
#: Lengths are Java ints in Paimon, so no length may exceed this.
MAX_INT32 = 2**31 - 1
#: Offsets are Java longs in Paimon.
MAX_INT64 = 2**63 - 1

_LOW7 = 0x7F
_MORE = 0x80


def encode_varint(value: int) -> bytes:
    """The LEB128 bytes of a non-negative integer."""
    if value < _MORE:
        if value < 0:
            raise ValueError(f"varint cannot encode a negative value ({value})")
        return bytes((value,))
    out = bytearray()
    while value >= _MORE:
        out.append((value & _LOW7) | _MORE)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Decode the varint starting at ``buf[pos]`` that must end before ``end``.

    Returns ``(value, position after the varint)``. Raises ``ValueError`` when the varint runs
    past ``end`` or is longer than ``max_bytes``.
    """
    value = 0
    shift = 0
    limit = min(end, pos + max_bytes)
    while pos < limit:
        byte = buf[pos]
        pos += 1
        value |= (byte & _LOW7) << shift
        if byte < _MORE:
            return value, pos
        shift += 7
    if pos >= end:
        raise ValueError("varint runs past the end of its field")
    raise ValueError(f"varint longer than {max_bytes} bytes")


def decode_varints(
    buf: npt.NDArray[np.uint8],
    pos: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    max_bytes: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Decode one varint at each position of ``pos`` at once (each must end before ``end``).

    The vectorised twin of :func:`decode_varint` for decoding every entry of a block without a
    Python loop per entry. Returns ``(values, positions after each varint)``.
    """
    if len(pos) == 0:
        return np.zeros(0, dtype=np.int64), pos.astype(np.int64)
    if np.any(pos >= end):
        raise ValueError("varint runs past the end of its field")
    first = buf[pos]
    # Fast path: every varint is one byte (lengths below 128), the common case for values.
    if int(first.max()) < _MORE:
        return first.astype(np.int64), pos + 1
    values = (first & _LOW7).astype(np.int64)
    more = first >= _MORE
    cursor = pos + 1
    for j in range(1, max_bytes):
        if np.any(more & (cursor >= end)):
            raise ValueError("varint runs past the end of its field")
        # Entries already finished read a harmless byte at their own start instead.
        byte = buf[np.where(more, cursor, pos)]
        values |= np.where(more, (byte & _LOW7).astype(np.int64) << (7 * j), 0)
        cursor += more
        more &= byte >= _MORE
        if not more.any():
            return values, cursor
    raise ValueError(f"varint longer than {max_bytes} bytes")
