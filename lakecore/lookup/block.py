"""Blocks of the lookup file: building them, their trailer, and searching a decoded block.

Byte layout of a raw (uncompressed) block (LOOKUP-FORMAT.md, "Block")::

    entries, back to back, from byte 0:
        varint32 klen, key (klen bytes), varint32 vlen, value (vlen bytes)
    tail, when every encoded entry has the same length ("aligned"):
        int32 entrySize, u8 0
    tail otherwise ("unaligned"):
        int32 start offset of each entry (n of them), int32 n, u8 1

An empty block is unaligned with n = 0. Integers are little-endian. A writer closes a data block
once ``len(entries) + 5 + (4 * n if unaligned else 0)`` exceeds the block size; the entry that
crossed the limit stays in the block.

The stored block (raw, or compressed as in ``compression.py``) is followed by a 5-byte trailer::

    u8 codecId, int32 crc      crc = zlib CRC-32 of (stored bytes + the codec byte), not masked

This module works on raw blocks and trailers; it raises ``ValueError`` with a short rule for
anything malformed and leaves naming the file and offset to the reader.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Final

import numpy as np
import numpy.typing as npt

from lakecore.lookup.varint import VARINT32_MAX_BYTES, decode_varint, decode_varints, encode_varint

ALIGNED: Final = 0
UNALIGNED: Final = 1
#: The fixed part of a block tail: int32 (entry size or entry count) + u8 aligned flag.
TAIL_SIZE: Final = 5
#: u8 codec + int32 crc after every stored block.
TRAILER_SIZE: Final = 5
#: Bytes per entry offset in an unaligned tail.
OFFSET_SIZE: Final = 4
_INT32: Final = struct.Struct("<i")
_TRAILER: Final = struct.Struct("<BI")
_MORE: Final = 0x80


def block_crc(stored: bytes, codec: int) -> int:
    """CRC-32 (zlib's, unsigned) over the stored bytes followed by the codec byte."""
    return zlib.crc32(bytes((codec,)), zlib.crc32(stored))


def encode_trailer(stored: bytes, codec: int) -> bytes:
    return _TRAILER.pack(codec, block_crc(stored, codec))


def decode_trailer(trailer: bytes) -> tuple[int, int]:
    """``(codec id, crc as unsigned)`` of a 5-byte trailer."""
    codec, crc = _TRAILER.unpack(trailer)
    return int(codec), int(crc)


class BlockBuilder:
    """Accumulates entries of one block; :meth:`finish` returns the raw block and resets."""

    __slots__ = ("_aligned", "_buf", "_entry_size", "_starts")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._starts: list[int] = []
        self._aligned = True
        self._entry_size = 0

    def __len__(self) -> int:
        return len(self._starts)

    def add(self, key: bytes, value: bytes) -> None:
        buf = self._buf
        start = len(buf)
        klen = len(key)
        vlen = len(value)
        # One-byte lengths are by far the most common; skip the general encoder for them.
        if klen < _MORE:
            buf.append(klen)
        else:
            buf += encode_varint(klen)
        buf += key
        if vlen < _MORE:
            buf.append(vlen)
        else:
            buf += encode_varint(vlen)
        buf += value
        self._starts.append(start)
        if self._aligned:
            size = len(buf) - start
            if self._entry_size == 0:
                self._entry_size = size
            elif size != self._entry_size:
                self._aligned = False

    def memory(self) -> int:
        """Size of the block if it were finished now (the block-size rule compares this)."""
        size = len(self._buf) + TAIL_SIZE
        if not self._aligned:
            size += OFFSET_SIZE * len(self._starts)
        return size

    def finish(self) -> bytes:
        buf = self._buf
        count = len(self._starts)
        if count and self._aligned:
            buf += _INT32.pack(self._entry_size)
            buf.append(ALIGNED)
        else:
            buf += struct.pack(f"<{count}i", *self._starts)
            buf += _INT32.pack(count)
            buf.append(UNALIGNED)
        raw = bytes(buf)
        self._buf = bytearray()
        self._starts = []
        self._aligned = True
        self._entry_size = 0
        return raw


class Block:
    """A decoded raw block, searched in place.

    Construction checks the tail (O(1) for aligned blocks, one vectorised pass over the offsets
    for unaligned ones). Entries are parsed lazily by :meth:`find`; every parse is bounds-checked
    against the entry's extent, so a malformed entry raises ``ValueError`` rather than reading
    a neighbour. :func:`index_blocks` parses and checks every entry at once with numpy and keeps
    a sample of the keys, for blocks that are searched many times.
    """

    __slots__ = (
        "_bounds",
        "_key_ends",
        "_key_starts",
        "_offsets",
        "_sample",
        "_stride",
        "_value_ends",
        "_value_starts",
        "count",
        "data",
        "entry_size",
    )

    def __init__(self, raw: bytes) -> None:
        size = len(raw)
        if size < TAIL_SIZE:
            raise ValueError(f"block of {size} bytes is shorter than its {TAIL_SIZE}-byte tail")
        flag = raw[-1]
        value: int = _INT32.unpack_from(raw, size - TAIL_SIZE)[0]
        self.data = raw
        self.count: int
        self.entry_size: int
        # Set by index_blocks: every entry's key and value extents, and the keys of every
        # ``_stride``-th entry, which a bisect narrows a search to ``_stride`` entries with.
        self._sample: list[bytes] | None = None
        self._stride = 1
        self._key_starts: list[int] = []
        self._key_ends: list[int] = []
        self._value_starts: list[int] = []
        self._value_ends: list[int] = []
        if flag == ALIGNED:
            data_end = size - TAIL_SIZE
            if value <= 0 or data_end == 0 or data_end % value:
                raise ValueError(
                    f"aligned block tail: entry size {value} does not divide the "
                    f"{data_end} bytes of entries"
                )
            self.entry_size = value
            self.count = data_end // value
            self._bounds: list[int] = []
            self._offsets: npt.NDArray[np.int64] | None = None
        elif flag == UNALIGNED:
            count = value
            if count < 0 or count > (size - TAIL_SIZE) // OFFSET_SIZE:
                raise ValueError(f"unaligned block tail: {count} entry offsets cannot fit")
            data_end = size - TAIL_SIZE - OFFSET_SIZE * count
            self.entry_size = 0
            self.count = count
            if count == 0:
                if data_end != 0:
                    raise ValueError(f"empty block holds {data_end} bytes of entries")
                self._bounds = [0]
                self._offsets = None
            else:
                offsets = np.frombuffer(raw, dtype="<i4", count=count, offset=data_end)
                # Entries lie back to back from byte 0, each at least 2 bytes (two varints).
                if (
                    offsets[0] != 0
                    or offsets[-1] > data_end - 2
                    or (count > 1 and bool(np.any(offsets[1:] - offsets[:-1] < 2)))
                ):
                    raise ValueError("unaligned block tail: entry offsets out of order or range")
                bounds: list[int] = offsets.tolist()
                bounds.append(data_end)
                self._bounds = bounds
                self._offsets = offsets.astype(np.int64)
        else:
            raise ValueError(f"block tail flag {flag} is neither 0 (aligned) nor 1 (unaligned)")

    def _extent(self, i: int) -> tuple[int, int]:
        if self.entry_size:
            start = i * self.entry_size
            return start, start + self.entry_size
        return self._bounds[i], self._bounds[i + 1]

    def _key_range(self, start: int, end: int) -> tuple[int, int]:
        data = self.data
        first = data[start]
        # Inline the one- and two-byte length varints (keys shorter than 16 KiB): this runs
        # once per probe of a binary search.
        if first < _MORE:
            klen, pos = first, start + 1
        elif start + 1 < end and data[start + 1] < _MORE:
            klen, pos = (first & 0x7F) | (data[start + 1] << 7), start + 2
        else:
            klen, pos = decode_varint(data, start, end, VARINT32_MAX_BYTES)
        key_end = pos + klen
        # At least one byte must remain for the value's length.
        if key_end >= end:
            raise ValueError(f"entry at {start}: key of {klen} bytes overruns the entry")
        return pos, key_end

    def value_at(self, i: int) -> bytes:
        if self._sample is not None:
            return self.data[self._value_starts[i] : self._value_ends[i]]
        start, end = self._extent(i)
        _, key_end = self._key_range(start, end)
        vlen, pos = decode_varint(self.data, key_end, end, VARINT32_MAX_BYTES)
        if pos + vlen != end:
            raise ValueError(
                f"entry at {start}: value of {vlen} bytes does not end the entry at {end}"
            )
        return self.data[pos:end]

    def find(self, key: bytes) -> int:
        """Index of the entry with exactly ``key``, or -1."""
        sample = self._sample
        if sample is not None:
            return self._find_indexed(sample, key)
        lo = 0
        hi = self.count
        data = self.data
        key_range = self._key_range
        size = self.entry_size
        bounds = self._bounds
        while lo < hi:
            mid = (lo + hi) >> 1
            if size:
                start = mid * size
                end = start + size
            else:
                start = bounds[mid]
                end = bounds[mid + 1]
            key_start, key_end = key_range(start, end)
            probe = data[key_start:key_end]
            if probe < key:
                lo = mid + 1
            elif probe == key:
                return mid
            else:
                hi = mid
        return -1

    def _find_indexed(self, sample: list[bytes], key: bytes) -> int:
        j = bisect_right(sample, key) - 1
        if j < 0:
            return -1
        stride = self._stride
        first = j * stride
        if sample[j] == key:
            return first
        # The key can only be strictly between two sampled keys.
        lo = first + 1
        hi = min(first + stride, self.count)
        data = self.data
        starts = self._key_starts
        ends = self._key_ends
        while lo < hi:
            mid = (lo + hi) >> 1
            probe = data[starts[mid] : ends[mid]]
            if probe < key:
                lo = mid + 1
            elif probe == key:
                return mid
            else:
                hi = mid
        return -1

    def get(self, key: bytes) -> bytes | None:
        i = self.find(key)
        return None if i < 0 else self.value_at(i)

    def answer(self, queries: list[bytes], members: list[int], out: list[bytes | None]) -> None:
        """``out[m] = self.get(queries[m])`` for each ``m`` of ``members`` whose key is here.

        The batched twin of :meth:`get`: one loop with everything in local variables, since
        it runs once per key of a ``get_many``.
        """
        sample = self._sample
        if sample is None:
            for m in members:
                value = self.get(queries[m])
                if value is not None:
                    out[m] = value
            return
        stride = self._stride
        count = self.count
        data = self.data
        starts = self._key_starts
        ends = self._key_ends
        value_starts = self._value_starts
        value_ends = self._value_ends
        for m in members:
            key = queries[m]
            j = bisect_right(sample, key) - 1
            if j < 0:
                continue
            lo = j * stride
            if sample[j] == key:
                out[m] = data[value_starts[lo] : value_ends[lo]]
                continue
            # The key can only be strictly between two sampled keys.
            hi = lo + stride
            if hi > count:
                hi = count
            lo += 1
            while lo < hi:
                mid = (lo + hi) >> 1
                probe = data[starts[mid] : ends[mid]]
                if probe < key:
                    lo = mid + 1
                elif probe == key:
                    out[m] = data[value_starts[mid] : value_ends[mid]]
                    break
                else:
                    hi = mid

    @property
    def indexed(self) -> bool:
        """Whether :func:`index_blocks` has parsed this block (finds then bisect a sample)."""
        return self._sample is not None

    def _entry_starts(self) -> npt.NDArray[np.int64]:
        if self.entry_size:
            return np.arange(0, self.count * self.entry_size, self.entry_size, dtype=np.int64)
        assert self._offsets is not None
        return self._offsets

    def items(self, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) in order, from the first key >= ``start``."""
        if self._sample is None or self._stride != 1:
            index_blocks([self], stride=1)
        keys = self._sample
        assert keys is not None
        first = 0 if start is None else bisect_left(keys, start)
        data = self.data
        vs = self._value_starts[first:]
        ve = self._value_ends[first:]
        for key, a, b in zip(keys[first:], vs, ve, strict=True):
            yield key, data[a:b]


def index_blocks(blocks: list[Block], stride: int) -> None:
    """Parse and check every entry of several blocks with one numpy pass, and index them.

    Afterwards each block knows the extent of every key and value, and keeps the keys of every
    ``stride``-th entry (all keys when ``stride`` is 1) so that a find is a bisect of that
    sample plus at most log2(stride) probes. Doing many blocks at once pays numpy's per-call
    cost once, which is what makes ``LookupReader.get_many`` cheap when it touches thousands of
    blocks; sampling keeps it from building a key object for every entry of every block.
    ``ValueError`` if any block is malformed (index them one by one to find which).
    """
    todo = [b for b in blocks if b._sample is None or b._stride > stride]
    for block in todo:
        if block.count == 0:
            block._sample = []
            block._stride = stride
    todo = [b for b in todo if b.count]
    if not todo:
        return
    counts = np.fromiter((b.count for b in todo), dtype=np.int64, count=len(todo))
    sizes = np.fromiter((len(b.data) for b in todo), dtype=np.int64, count=len(todo))
    bases = np.zeros(len(todo), dtype=np.int64)
    np.cumsum(sizes[:-1], out=bases[1:])
    firsts = np.zeros(len(todo), dtype=np.int64)
    np.cumsum(counts[:-1], out=firsts[1:])
    joined = todo[0].data if len(todo) == 1 else b"".join(b.data for b in todo)
    rebase = np.repeat(bases, counts)
    starts = np.concatenate([b._entry_starts() for b in todo]) + rebase
    # An entry ends where the next one starts, except the last of each block, which ends
    # where that block's tail starts.
    data_ends = np.fromiter(
        (b.count * b.entry_size if b.entry_size else b._bounds[-1] for b in todo),
        dtype=np.int64,
        count=len(todo),
    )
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[firsts + counts - 1] = bases + data_ends
    buf = np.frombuffer(joined, dtype=np.uint8)
    klen, key_starts = decode_varints(buf, starts, ends, VARINT32_MAX_BYTES)
    key_ends = key_starts + klen
    if np.any(key_ends >= ends):
        raise ValueError("a key overruns its entry")
    vlen, value_starts = decode_varints(buf, key_ends, ends, VARINT32_MAX_BYTES)
    if np.any(value_starts + vlen != ends):
        raise ValueError("a value does not end its entry")
    if stride == 1:
        sampled = np.arange(len(starts))
    else:
        # Entry 0, stride, 2 * stride, ... of every block.
        within = np.arange(len(starts)) - np.repeat(firsts, counts)
        sampled = np.flatnonzero(within % stride == 0)
    sample_starts: list[int] = key_starts[sampled].tolist()
    sample_ends: list[int] = key_ends[sampled].tolist()
    sample = [joined[a:b] for a, b in zip(sample_starts, sample_ends, strict=True)]
    per_block = (counts + stride - 1) // stride
    sample_firsts = np.zeros(len(todo), dtype=np.int64)
    np.cumsum(per_block[:-1], out=sample_firsts[1:])
    # Python lists, not numpy arrays: a find indexes them a few times per key, and indexing a
    # list is several times cheaper than producing a numpy scalar.
    ks: list[int] = (key_starts - rebase).tolist()
    ke: list[int] = (key_ends - rebase).tolist()
    vs: list[int] = (value_starts - rebase).tolist()
    ve: list[int] = (ends - rebase).tolist()
    for block, first, count, sample_first, sample_count in zip(
        todo,
        firsts.tolist(),
        counts.tolist(),
        sample_firsts.tolist(),
        per_block.tolist(),
        strict=True,
    ):
        last = first + count
        block._sample = sample[sample_first : sample_first + sample_count]
        block._stride = stride
        block._key_starts = ks[first:last]
        block._key_ends = ke[first:last]
        block._value_starts = vs[first:last]
        block._value_ends = ve[first:last]
