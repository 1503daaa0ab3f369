"""Reading a sorted lookup file: ``LookupReader``.

Lookup procedure (docs/lookup-format.md#lookup): bloom test (stop on negative); binary search of
the index for the first data block whose last key is >= the key; read that one block (check its
CRC-32, decompress, check its tail); binary search inside it; exact match or absent. At most one
data block is read per key.

At open the reader maps the file, checks the footer against the file size, reads the index
block and requires its block handles to tile the data region exactly (block 0 at offset 0, each
block starting where the previous trailer ended, the last one ending at the bloom bitset or the
index block), so every later read stays inside the file.

Decoded data blocks go into a block cache (``blockcache.py``): by default the process-wide
``SHARED_BLOCK_CACHE``, or the one given as ``block_cache``, or none. ``get`` looks in the cache
first and tests the bloom filter only when the block is not cached: a negative then saves
reading and decompressing a block, while for a cached block the search costs about what the
hash would. A compressed block may declare at most ``max_block_bytes`` of raw data
(``compression.py`` has the whole rule).

``get_many`` answers many keys in one pass and at most one decode per needed block: each key
is mapped to its block with a bisect of the index (``map``, no Python frame per key), the keys
are grouped by block (numpy argsort), and the blocks are handled a batch at a time. A block hit
by many keys is indexed together with the others of its batch (numpy parses every entry of
all of them at once; every fourth key is kept for a bisect), a block hit by few is searched in
place. The bloom filter is used where it pays: for every key when a sample of the batch shows
that many keys are absent, otherwise only for keys that are (nearly) alone in a block that is
not cached, where a negative saves reading the block; for a block that must be read anyway a
bloom test would only cost a hash.

The file is memory-mapped rather than read whole: lookups measured the same speed both ways
(block bytes are sliced out either way), and a map does not hold a private copy of the file.
"""

from __future__ import annotations

import mmap
import os
import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Final

import numpy as np
import numpy.typing as npt

from lakecore.core.lookup.block import (
    BYTES_LIKE,
    TRAILER_SIZE,
    Block,
    block_crc,
    decode_trailer,
    index_blocks,
)
from lakecore.core.lookup.blockcache import OWNER_SHIFT, SHARED_BLOCK_CACHE, BlockCache
from lakecore.core.lookup.bloom import BloomFilter
from lakecore.core.lookup.compression import CODEC_NAMES, DEFAULT_MAX_BLOCK_BYTES, BlockDecompressor
from lakecore.core.lookup.corruption import corrupt
from lakecore.core.lookup.footer import FOOTER_SIZE, Footer
from lakecore.core.lookup.handle import BlockHandle
from lakecore.core.lookup.murmur import hash_key, hash_keys
from lakecore.errors import CorruptLookupFileError, InvalidArgumentError, NotFoundError

#: In get_many, a block that this many or more of the keys fall into is indexed (all its
#: entries parsed at once with numpy, with other such blocks); below it each key is
#: binary-searched in place. Indexing costs about as much as this many in-place searches
#: (measured on 200-byte keys, ~250 entries a block).
_INDEX_MIN_KEYS: Final = 8
#: An indexed block keeps the key of every this-many-th entry: a find bisects those, then
#: probes at most two more entries. Building a key object for every entry costs more than the
#: probes it saves when a block holds ten times more entries than keys sought (measured on the
#: benchmark's 1M catalog keys: strides 4 and 8 answer ~20% more keys/s than 1, 16 no more).
_SAMPLE_STRIDE: Final = 4
#: In get_many, keys falling into an uncached block with at most this many keys are first
#: tested against the bloom filter; if all are negative the block is not read at all.
_BLOOM_MAX_KEYS_PER_BLOCK: Final = 4
#: get_many first tests this many keys (spread over the batch) against the bloom filter ...
_BLOOM_SAMPLE: Final = 128
#: ... and if at least this share is rejected, tests every key before looking for blocks.
#: Testing costs about half a microsecond a key; a rejected key saves a bisect of the index,
#: its search in a block, and often the block itself.
_BLOOM_ALL_MIN_ABSENT: Final = 0.2
#: ... and if less than this share is rejected, tests none: a negative saves a block read (~10
#: us) only for an absent key alone in its block, so below a few percent of absent keys the
#: hashes (~1 us a key) cost more than the blocks they save.
_BLOOM_SOME_MIN_ABSENT: Final = 0.05
#: get_many decodes and indexes this many blocks together: enough to amortise numpy's
#: per-call cost, few enough that their bytes stay a few MiB at a time (2 MiB of the default
#: 8 KiB blocks, 16 MiB of Paimon's 64 KiB ones).
_BATCH_BLOCKS: Final = 256


@dataclass(frozen=True, slots=True)
class LookupStats:
    """What a lookup file holds (``LookupReader.stats``)."""

    entries: int
    blocks: int
    file_size: int
    codec: str  # "none", "zstd", "lz4", "lzo", or "mixed" when blocks use more than one codec
    codec_blocks: dict[str, int]  # data blocks per codec actually stored
    bloom_bytes: int
    bloom_expected_entries: int
    bloom_hashes: int
    index_bytes: int


class LookupReader:
    """Answers point lookups and ordered scans on one lookup file. Not thread-safe.

    ``block_cache``: where decoded data blocks are kept (default: the process-wide
    ``SHARED_BLOCK_CACHE``; None: nowhere). ``max_block_bytes``: the most raw bytes a compressed
    block may declare (default 256 MiB, at most 2 GiB - 1).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        block_cache: BlockCache | None = SHARED_BLOCK_CACHE,
        max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    ) -> None:
        self.path = os.fspath(path)
        self._cache = block_cache
        # Block i is cached under self._key + i (blockcache.py); a reader dropped without
        # close() gives its blocks back when it is collected.
        self._key = 0
        self._release: weakref.finalize[[int], LookupReader] | None = None
        if block_cache is not None:
            owner = block_cache.new_owner()
            self._key = owner << OWNER_SHIFT
            self._release = weakref.finalize(self, block_cache.discard_owner, owner)
        try:
            self._decompressor = BlockDecompressor(max_block_bytes)
        except ValueError as error:
            raise InvalidArgumentError(str(error)) from None
        self._stats: LookupStats | None = None
        self._closed = False
        try:
            file = open(self.path, "rb")  # noqa: SIM115 - closed right below, after mapping
        except FileNotFoundError as error:
            raise NotFoundError(f"lookup file {self.path} does not exist") from error
        with file:
            self._size = os.fstat(file.fileno()).st_size
            if self._size < FOOTER_SIZE:
                raise corrupt(
                    self.path,
                    0,
                    f"file of {self._size} bytes is shorter than the {FOOTER_SIZE}-byte footer",
                )
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._open()
        except BaseException:
            self._map.close()
            self._closed = True
            raise

    def _open(self) -> None:
        footer = Footer.decode(self._map[self._size - FOOTER_SIZE :], self.path, self._size)
        footer.check(self.path, self._size)
        self._footer = footer
        index = self._read_block(BlockHandle(footer.index_offset, footer.index_size), -1)
        try:
            entries = list(index.items())
        except ValueError as error:
            raise corrupt(self.path, footer.index_offset, f"index block: {error}") from None
        last_keys = [key for key, _ in entries]
        handles: list[BlockHandle] = []
        expected_offset = 0
        for i, (_, encoded) in enumerate(entries):
            try:
                handle = BlockHandle.decode(encoded)
            except ValueError as error:
                raise corrupt(self.path, footer.index_offset, f"index entry {i}: {error}") from None
            if handle.offset != expected_offset:
                raise corrupt(
                    self.path,
                    footer.index_offset,
                    f"index entry {i}: data block at {handle.offset}, expected one at "
                    f"{expected_offset} right after the previous block",
                )
            expected_offset = handle.offset + handle.size + TRAILER_SIZE
            if expected_offset > footer.data_end:
                raise corrupt(
                    self.path,
                    footer.index_offset,
                    f"index entry {i}: data block at {handle.offset} of {handle.size} bytes "
                    f"runs past the end of the data blocks ({footer.data_end})",
                )
            if i and last_keys[i] <= last_keys[i - 1]:
                raise corrupt(
                    self.path, footer.index_offset, f"index entry {i}: last keys not ascending"
                )
            handles.append(handle)
        if expected_offset != footer.data_end:
            raise corrupt(
                self.path,
                footer.index_offset,
                f"index: data blocks end at {expected_offset}, but the next region starts at "
                f"{footer.data_end}",
            )
        self._last_keys = last_keys
        self._handles = handles
        self._bloom: BloomFilter | None = None
        if footer.has_bloom:
            try:
                self._bloom = BloomFilter(
                    self._map[footer.bloom_offset : footer.bloom_offset + footer.bloom_size],
                    footer.bloom_expected_entries,
                )
            except ValueError as error:
                raise corrupt(
                    self.path, self._size - FOOTER_SIZE, f"footer: bloom filter: {error}"
                ) from None

    # -- blocks ---------------------------------------------------------------------------

    def _read_block(self, handle: BlockHandle, number: int) -> Block:
        """Read, check and decode the block at ``handle`` (whose range has been checked):
        data block ``number``, or the index block for -1."""
        offset, size = handle
        end = offset + size
        mapped = self._map
        trailer = mapped[end : end + TRAILER_SIZE]
        if len(trailer) != TRAILER_SIZE:
            raise corrupt(
                self.path, end, f"{_block_name(number)}: trailer runs past the end of the file"
            )
        stored = mapped[offset:end]
        codec, crc = decode_trailer(trailer)
        actual = block_crc(stored, codec)
        if actual != crc:
            raise corrupt(
                self.path,
                offset,
                f"{_block_name(number)}: CRC-32 mismatch (trailer says {crc:#010x}, the {size} "
                f"stored bytes and codec {codec} give {actual:#010x})",
            )
        try:
            return Block(self._decompressor.decompress(codec, stored))
        except ValueError as error:
            raise corrupt(self.path, offset, f"{_block_name(number)}: {error}") from None

    def _peek(self, i: int) -> Block:
        """Data block ``i`` from the cache if it is there, else read without caching it (scans
        must not evict the blocks that point lookups use)."""
        cache = self._cache
        block = cache.get(self._key + i) if cache is not None else None
        return block if block is not None else self._read_block(self._handles[i], i)

    def _recharge(self, blocks: list[tuple[int, Block]]) -> None:
        """Charge cached blocks again after indexing made them bigger."""
        cache = self._cache
        if cache is None:
            return
        for i, block in blocks:
            key = self._key + i
            if key in cache:
                cache.put(key, block)

    def _corrupt_entry(self, i: int, error: ValueError) -> CorruptLookupFileError:
        return corrupt(self.path, self._handles[i].offset, f"data block {i}: {error}")

    # -- lookups --------------------------------------------------------------------------

    def _as_key(self, key: object) -> bytes:
        """Keys as the writer takes them: bytes, bytearray or memoryview; anything else (a str
        most likely) is refused, where comparing it with the index's bytes raised TypeError."""
        if isinstance(key, BYTES_LIKE):
            return bytes(key)
        raise InvalidArgumentError(
            f"lookup file {self.path}: a key must be bytes, got {type(key).__name__} (encode a str as UTF-8)"
        )

    def get(self, key: bytes) -> bytes | None:
        """The value stored for ``key``, or None."""
        if self._closed:
            self._check_open()
        if type(key) is not bytes:
            key = self._as_key(key)
        last_keys = self._last_keys
        i = bisect_left(last_keys, key)
        if i == len(last_keys):
            return None
        cache = self._cache
        block = cache.get(self._key + i) if cache is not None else None
        if block is None:
            bloom = self._bloom
            if bloom is not None and not bloom.might_contain(hash_key(key)):
                return None
            block = self._read_block(self._handles[i], i)
            if cache is not None:
                cache.put(self._key + i, block)
        try:
            return block.get(key)
        except ValueError as error:
            raise self._corrupt_entry(i, error) from None

    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """``[get(k) for k in keys]``, with one decode per needed block and no per-key seek."""
        self._check_open()
        queries = keys if isinstance(keys, list) else list(keys)
        if not all(type(key) is bytes for key in queries):
            queries = [key if type(key) is bytes else self._as_key(key) for key in queries]
        n = len(queries)
        out: list[bytes | None] = [None] * n
        nblocks = len(self._handles)
        if n == 0 or nblocks == 0:
            return out
        # Positions (into queries) still to answer; the bloom filter may remove some.
        alive: npt.NDArray[np.int64] | None = None
        bloom = self._bloom
        filter_groups = bloom is not None
        absent_share = self._absent_share(queries, bloom) if bloom is not None else 0.0
        if bloom is not None and absent_share >= _BLOOM_ALL_MIN_ABSENT:
            # Many keys are absent: one vectorised bloom pass over all keys is far cheaper
            # than the blocks and searches it saves.
            alive = np.flatnonzero(bloom.might_contain_many(hash_keys(queries)))
            filter_groups = False
            if len(alive) == 0:
                return out
        elif n >= _BLOOM_SAMPLE and absent_share < _BLOOM_SOME_MIN_ABSENT:
            filter_groups = False
        candidates = queries if alive is None else [queries[i] for i in alive.tolist()]
        # map + partial calls bisect from C, without a Python frame per key.
        block_ids = np.fromiter(
            map(partial(bisect_left, self._last_keys), candidates),
            dtype=np.int64,
            count=len(candidates),
        )
        order = np.argsort(block_ids, kind="stable")
        grouped = block_ids[order]
        if alive is not None:
            order = alive[order]
        cut = np.flatnonzero(grouped[1:] != grouped[:-1]) + 1
        group_starts: list[int] = [0, *cut.tolist()]
        group_ends: list[int] = [*cut.tolist(), len(candidates)]
        group_blocks: list[int] = grouped[group_starts].tolist()
        order_list: list[int] = order.tolist()
        groups = [
            (b, order_list[s:e])
            for b, s, e in zip(group_blocks, group_starts, group_ends, strict=True)
            if b < nblocks  # keys after the last key of the file are absent
        ]
        if filter_groups:
            groups = self._bloom_filter_groups(queries, groups)
        for first in range(0, len(groups), _BATCH_BLOCKS):
            self._answer_batch(queries, groups[first : first + _BATCH_BLOCKS], out)
        return out

    def _answer_batch(
        self, queries: list[bytes], groups: list[tuple[int, list[int]]], out: list[bytes | None]
    ) -> None:
        """Answer the keys of a few blocks; the blocks hit by many keys are indexed together."""
        cache = self._cache
        blocks: list[Block] = []
        dense: list[tuple[int, Block]] = []
        fresh: list[tuple[int, Block]] = []
        for block_id, members in groups:
            block = cache.get(self._key + block_id) if cache is not None else None
            if block is None:
                block = self._read_block(self._handles[block_id], block_id)
                fresh.append((block_id, block))
            blocks.append(block)
            if len(members) >= _INDEX_MIN_KEYS and not block.indexed:
                dense.append((block_id, block))
        self._index_blocks(dense, _SAMPLE_STRIDE)
        self._recharge(dense)
        if cache is not None:
            # Blocks read here go into free space only (BlockCache.put explains why).
            for block_id, block in fresh:
                cache.put(self._key + block_id, block, evict=False)
        for (block_id, members), block in zip(groups, blocks, strict=True):
            try:
                block.answer(queries, members, out)
            except ValueError as error:
                raise self._corrupt_entry(block_id, error) from None

    def _index_blocks(self, blocks: list[tuple[int, Block]], stride: int) -> None:
        """``index_blocks`` over ``(block id, block)`` pairs, naming the culprit on failure."""
        if not blocks:
            return
        try:
            index_blocks([block for _, block in blocks], stride)
        except ValueError:
            # Index them one by one to name the culprit (a failed call changes nothing).
            for block_id, block in blocks:
                try:
                    index_blocks([block], stride)
                except ValueError as error:
                    raise self._corrupt_entry(block_id, error) from None
            raise

    @staticmethod
    def _absent_share(queries: list[bytes], bloom: BloomFilter) -> float:
        """The share of a spread sample of the keys that the bloom filter rejects; -1 for a
        batch too small to sample (its sparse blocks are then always filtered)."""
        if len(queries) < _BLOOM_SAMPLE:
            return -1.0
        step = len(queries) // _BLOOM_SAMPLE
        sample = queries[::step][:_BLOOM_SAMPLE]
        maybe = bloom.might_contain_many(hash_keys(sample))
        return 1.0 - float(maybe.mean())

    def _bloom_filter_groups(
        self, queries: list[bytes], groups: list[tuple[int, list[int]]]
    ) -> list[tuple[int, list[int]]]:
        """Drop keys the bloom filter rules out, where that can save reading a block."""
        assert self._bloom is not None
        cache = self._cache
        base = self._key

        def uncached(block_id: int) -> bool:
            return cache is None or base + block_id not in cache

        sparse = [g for g in groups if len(g[1]) <= _BLOOM_MAX_KEYS_PER_BLOCK and uncached(g[0])]
        if not sparse:
            return groups
        tested = [m for _, members in sparse for m in members]
        maybe = self._bloom.might_contain_many(hash_keys(queries[m] for m in tested))
        keep = {m for m, ok in zip(tested, maybe.tolist(), strict=True) if ok}
        result: list[tuple[int, list[int]]] = []
        for block_id, members in groups:
            if len(members) <= _BLOOM_MAX_KEYS_PER_BLOCK and uncached(block_id):
                members = [m for m in members if m in keep]
                if not members:
                    continue
            result.append((block_id, members))
        return result

    def items(self, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) in key order, from the first key >= ``start``.

        Blocks are decoded a batch at a time (parsed together, like ``get_many``) and not put
        in the block cache, so a scan does not evict the blocks that point lookups use.
        """
        self._check_open()
        first = 0 if start is None else bisect_left(self._last_keys, start)
        count = len(self._handles)
        for batch in range(first, count, _BATCH_BLOCKS):
            self._check_open()
            blocks = [(i, self._peek(i)) for i in range(batch, min(batch + _BATCH_BLOCKS, count))]
            self._index_blocks(blocks, 1)
            self._recharge(blocks)
            for i, block in blocks:
                yield from block.items(start if i == first else None)

    # -- facts ----------------------------------------------------------------------------

    def stats(self) -> LookupStats:
        """Entry and block counts, sizes and codecs. The first call reads every block."""
        self._check_open()
        if self._stats is None:
            entries = 0
            codec_blocks: dict[str, int] = {}
            for i, handle in enumerate(self._handles):
                block = self._peek(i)
                entries += block.count
                codec_id, _ = decode_trailer(
                    self._map[
                        handle.offset + handle.size : handle.offset + handle.size + TRAILER_SIZE
                    ]
                )
                name = CODEC_NAMES.get(codec_id, str(codec_id))
                codec_blocks[name] = codec_blocks.get(name, 0) + 1
            compressed = sorted(name for name in codec_blocks if name != "none")
            codec = "none" if not compressed else compressed[0] if len(compressed) == 1 else "mixed"
            bloom = self._bloom
            self._stats = LookupStats(
                entries=entries,
                blocks=len(self._handles),
                file_size=self._size,
                codec=codec,
                codec_blocks=codec_blocks,
                bloom_bytes=len(bloom.bitset) if bloom is not None else 0,
                bloom_expected_entries=bloom.expected_entries if bloom is not None else 0,
                bloom_hashes=bloom.hash_count if bloom is not None else 0,
                index_bytes=self._footer.index_size,
            )
        return self._stats

    def __len__(self) -> int:
        return self.stats().entries

    # -- lifetime -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError(f"lookup reader for {self.path} is closed")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._release is not None:
                self._release()
            self._map.close()

    def __enter__(self) -> LookupReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _block_name(number: int) -> str:
    return "index block" if number < 0 else f"data block {number}"
