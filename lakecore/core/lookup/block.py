"""Blocks of the lookup file: building them, their trailer, and searching a decoded block.

Byte layout of a raw (uncompressed) block (docs/lookup-format.md#blocks)::

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
import sys
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from lakecore.core.lookup.varint import (
    VARINT32_MAX_BYTES,
    decode_varint,
    decode_varints,
    encode_varint,
)

# What a key or a value may be given as, to the writer and the reader alike (stored as bytes).
BYTES_LIKE: Final = (bytes, bytearray, memoryview)

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
#: What a Block object and its bytes object cost beyond the block's bytes.
_BLOCK_OVERHEAD: Final = 200
#: find() keeps the keys it probes in the first this-many levels of its binary search: those
#: positions are the same for every search of a block, so a block searched again (a cached one)
#: skips parsing them. 4 levels: at most 15 keys, all but the last probe of a search in the
#: ~28 entries of a default 8 KiB catalog block, and about half its key bytes as cache charge.
_MEMO_LEVELS: Final = 4
_MEMO_SLOTS: Final = (1 << _MEMO_LEVELS) - 1
#: Bytes a cached key costs beyond its own (bytes object header, list slot).
_KEY_OVERHEAD: Final = 41


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


class _BlockIndex(NamedTuple):
    """What :func:`index_blocks` learned about one block, replaced as one attribute so that a
    block shared through the block cache is never seen half indexed."""

    sample: list[bytes]  # keys of entries 0, stride, 2 * stride, ...
    stride: int
    key_starts: list[int]
    key_ends: list[int]
    value_starts: list[int]
    value_ends: list[int]
    memory: int  # approximate bytes the lists above hold


_NATIVE_LE_INT32: Final = sys.byteorder == "little" and struct.calcsize("i") == OFFSET_SIZE


def _int32_view(raw: bytes, offset: int, count: int) -> Sequence[int]:
    """``count`` little-endian int32s of ``raw`` from ``offset``, read in place when the host is
    little-endian (a memoryview cast costs the same for 4 offsets or 4000)."""
    if _NATIVE_LE_INT32:
        return memoryview(raw)[offset : offset + OFFSET_SIZE * count].cast("i")
    return struct.unpack_from(f"<{count}i", raw, offset)


class Block:
    """A decoded raw block, searched in place.

    Construction checks the tail in O(1): the entry size of an aligned block, or the entry count
    and the first and last entry offsets of an unaligned one; the offsets are read in place, not
    copied. :meth:`find` binary-searches the entries through those offsets (or ``i * entrySize``),
    checking each probed entry's extent (inside the entries, at least 2 bytes, before the next
    entry) and parsing its key within that extent, so a malformed entry raises ``ValueError``
    rather than reading a neighbour, without paying to check entries no search touches.
    :func:`index_blocks` parses and checks every entry at once with numpy and keeps a sample of
    the keys, for blocks that are searched many times.
    """

    __slots__ = ("_index", "_memo", "_offsets", "count", "data", "data_end", "entry_size")

    def __init__(self, raw: bytes) -> None:
        size = len(raw)
        if size < TAIL_SIZE:
            raise ValueError(f"block of {size} bytes is shorter than its {TAIL_SIZE}-byte tail")
        flag = raw[-1]
        value: int = _INT32.unpack_from(raw, size - TAIL_SIZE)[0]
        self.data = raw
        self.count: int
        self.entry_size: int
        self.data_end: int
        self._index: _BlockIndex | None = None
        self._offsets: Sequence[int] = ()
        # Keys probed in the top levels of find()'s binary search, by heap position (root 0,
        # children 2n+1 and 2n+2); filled as searches pass. Slots are written whole, so a
        # block shared between threads only ever sees None or the right key.
        self._memo: list[bytes | None] = [None] * _MEMO_SLOTS
        if flag == ALIGNED:
            data_end = size - TAIL_SIZE
            if value <= 0 or data_end == 0 or data_end % value:
                raise ValueError(
                    f"aligned block tail: entry size {value} does not divide the "
                    f"{data_end} bytes of entries"
                )
            self.entry_size = value
            self.count = data_end // value
            self.data_end = data_end
        elif flag == UNALIGNED:
            count = value
            if count < 0 or count > (size - TAIL_SIZE) // OFFSET_SIZE:
                raise ValueError(f"unaligned block tail: {count} entry offsets cannot fit")
            data_end = size - TAIL_SIZE - OFFSET_SIZE * count
            self.entry_size = 0
            self.count = count
            self.data_end = data_end
            if count == 0:
                if data_end != 0:
                    raise ValueError(f"empty block holds {data_end} bytes of entries")
            else:
                offsets = _int32_view(raw, data_end, count)
                # Entries lie back to back from byte 0, each at least 2 bytes (two varints).
                if offsets[0] != 0 or not 0 <= offsets[count - 1] <= data_end - 2:
                    raise ValueError("unaligned block tail: entry offsets out of order or range")
                self._offsets = offsets
        else:
            raise ValueError(f"block tail flag {flag} is neither 0 (aligned) nor 1 (unaligned)")

    def memory(self) -> int:
        """Approximate bytes this block holds (what the block cache charges for it).

        The memoised keys are charged up front, as the share of the entries they can be at
        most (15 of ``count``), so a block's charge does not grow as it is searched.
        """
        index = self._index
        size = len(self.data)
        memo = 0
        if self.count:
            memo = min(self.count, _MEMO_SLOTS) * (size // self.count + _KEY_OVERHEAD)
        return size + _BLOCK_OVERHEAD + memo + (index.memory if index is not None else 0)

    def _extent(self, i: int) -> tuple[int, int]:
        """Start and end of entry ``i``, checked to lie inside the entries."""
        size = self.entry_size
        if size:
            start = i * size
            return start, start + size
        offsets = self._offsets
        start = offsets[i]
        end = offsets[i + 1] if i + 1 < self.count else self.data_end
        if start < 0 or end - start < 2 or end > self.data_end:
            raise ValueError(f"unaligned block tail: entry {i} offsets out of order or range")
        return start, end

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
        index = self._index
        if index is not None:
            return self.data[index.value_starts[i] : index.value_ends[i]]
        start, end = self._extent(i)
        _, key_end = self._key_range(start, end)
        data = self.data
        first = data[key_end]  # key_range left at least one byte for it
        if first < _MORE:
            vlen, pos = first, key_end + 1
        else:
            vlen, pos = decode_varint(data, key_end, end, VARINT32_MAX_BYTES)
        if pos + vlen != end:
            raise ValueError(
                f"entry at {start}: value of {vlen} bytes does not end the entry at {end}"
            )
        return self.data[pos:end]

    def find(self, key: bytes) -> int:
        """Index of the entry with exactly ``key``, or -1."""
        index = self._index
        if index is not None:
            return _find_indexed(self.data, self.count, index, key)
        memo = self._memo
        probe_key = self._probe_key
        lo = 0
        hi = self.count
        node = 0  # heap position of this probe in the search tree, for the memo
        while lo < hi:
            mid = (lo + hi) >> 1
            if node < _MEMO_SLOTS:
                probe = memo[node]
                if probe is None:
                    probe = memo[node] = probe_key(mid)
            else:
                probe = probe_key(mid)
            if probe < key:
                lo = mid + 1
                node = 2 * node + 2
            elif probe == key:
                return mid
            else:
                hi = mid
                node = 2 * node + 1
        return -1

    def _probe_key(self, i: int) -> bytes:
        """The key of entry ``i`` for a search.

        A probe only checks that the key lies inside the entries and leaves a byte for the
        value's length; the entry found is checked whole by value_at. So a malformed block can
        misdirect a search but never make it read outside the block, and a probe does not pay
        for reading the next entry's offset.
        """
        data = self.data
        limit = self.data_end - 1
        start = i * self.entry_size if self.entry_size else self._offsets[i]
        if not 0 <= start < limit:
            raise ValueError(f"unaligned block tail: entry {i} starts outside the entries")
        # The one- and two-byte length varints (keys shorter than 16 KiB), inlined.
        first = data[start]
        if first < _MORE:
            klen = first
            pos = start + 1
        elif data[start + 1] < _MORE:
            klen = (first & 0x7F) | (data[start + 1] << 7)
            pos = start + 2
        else:
            klen, pos = decode_varint(data, start, limit, VARINT32_MAX_BYTES)
        key_end = pos + klen
        if key_end > limit:
            raise ValueError(f"entry at {start}: key of {klen} bytes overruns the entries")
        return data[pos:key_end]

    def get(self, key: bytes) -> bytes | None:
        i = self.find(key)
        return None if i < 0 else self.value_at(i)

    def answer(self, queries: list[bytes], members: list[int], out: list[bytes | None]) -> None:
        """``out[m] = self.get(queries[m])`` for each ``m`` of ``members`` whose key is here.

        The batched twin of :meth:`get`: one loop with everything in local variables, since
        it runs once per key of a ``get_many``.
        """
        index = self._index
        if index is None:
            for m in members:
                value = self.get(queries[m])
                if value is not None:
                    out[m] = value
            return
        sample, stride, starts, ends, value_starts, value_ends, _ = index
        count = self.count
        data = self.data
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
        return self._index is not None

    def _entry_starts(self) -> npt.NDArray[np.int64]:
        """Every entry's start; for an unaligned block also checks that they ascend."""
        if self.entry_size:
            return np.arange(0, self.count * self.entry_size, self.entry_size, dtype=np.int64)
        offsets = np.frombuffer(self.data, dtype="<i4", count=self.count, offset=self.data_end)
        if self.count > 1 and bool(np.any(offsets[1:] - offsets[:-1] < 2)):
            raise ValueError("unaligned block tail: entry offsets out of order or range")
        return offsets.astype(np.int64)

    def items(self, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) in order, from the first key >= ``start``."""
        index = self._index
        if index is None or index.stride != 1:
            index_blocks([self], stride=1)
            index = self._index
        assert index is not None
        keys = index.sample
        first = 0 if start is None else bisect_left(keys, start)
        data = self.data
        vs = index.value_starts[first:]
        ve = index.value_ends[first:]
        for key, a, b in zip(keys[first:], vs, ve, strict=True):
            yield key, data[a:b]


def _find_indexed(data: bytes, count: int, index: _BlockIndex, key: bytes) -> int:
    sample = index.sample
    j = bisect_right(sample, key) - 1
    if j < 0:
        return -1
    stride = index.stride
    first = j * stride
    if sample[j] == key:
        return first
    # The key can only be strictly between two sampled keys.
    lo = first + 1
    hi = min(first + stride, count)
    starts = index.key_starts
    ends = index.key_ends
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


def index_blocks(blocks: list[Block], stride: int) -> None:
    """Parse and check every entry of several blocks with one numpy pass, and index them.

    Afterwards each block knows the extent of every key and value, and keeps the keys of every
    ``stride``-th entry (all keys when ``stride`` is 1) so that a find is a bisect of that
    sample plus at most log2(stride) probes. Doing many blocks at once pays numpy's per-call
    cost once, which is what makes ``LookupReader.get_many`` cheap when it touches thousands of
    blocks; sampling keeps it from building a key object for every entry of every block.
    ``ValueError`` if any block is malformed (index them one by one to find which).
    """
    todo = [b for b in blocks if b._index is None or b._index.stride > stride]
    for block in todo:
        if block.count == 0:
            block._index = _BlockIndex([], stride, [], [], [], [], 0)
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
    data_ends = np.fromiter((b.data_end for b in todo), dtype=np.int64, count=len(todo))
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
        keys = sample[sample_first : sample_first + sample_count]
        # Four lists of ints (8-byte slots, 28-byte ints) and the sampled keys (33-byte header).
        memory = 4 * count * 36 + sum(map(len, keys)) + 33 * len(keys)
        block._index = _BlockIndex(
            keys,
            stride,
            ks[first:last],
            ke[first:last],
            vs[first:last],
            ve[first:last],
            memory,
        )
