"""The decoded-block cache: byte cap, LRU order, sharing between readers, and no stale blocks."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from lakecore import clear_caches
from lakecore.core.lookup import LookupReader
from lakecore.core.lookup.block import Block, BlockBuilder
from lakecore.core.lookup.blockcache import OWNER_SHIFT, SHARED_BLOCK_CACHE, BlockCache
from lakecore.errors import InvalidArgumentError

from ._helpers import catalog_entries, write_file

ENTRIES = catalog_entries(600)


def block_of(size: int) -> Block:
    builder = BlockBuilder()
    builder.add(b"k", b"v" * size)
    return Block(builder.finish())


def test_evicts_least_recently_used_under_the_byte_cap() -> None:
    blocks = [block_of(1000) for _ in range(4)]
    charge = blocks[0].memory()
    cache = BlockCache(3 * charge)
    for i in range(3):
        cache.put(i, blocks[i])
    assert cache.get(0) is blocks[0]  # 0 is now the most recently used, 1 the least
    cache.put(3, blocks[3])
    assert cache.get(1) is None
    assert [cache.get(i) for i in (0, 2, 3)] == [blocks[0], blocks[2], blocks[3]]
    stats = cache.stats()
    assert (stats.blocks, stats.charged_bytes, stats.evictions) == (3, 3 * charge, 1)
    assert stats.charged_bytes <= stats.capacity_bytes


def test_a_block_bigger_than_the_cache_is_not_cached() -> None:
    small, big = block_of(10), block_of(10_000)
    cache = BlockCache(big.memory() - 1)
    cache.put(1, small)
    cache.put(2, big)
    assert cache.get(2) is None and cache.get(1) is small


def test_put_without_evicting_only_fills_free_space() -> None:
    blocks = [block_of(1000) for _ in range(3)]
    cache = BlockCache(2 * blocks[0].memory())
    for i, block in enumerate(blocks):
        cache.put(i, block, evict=False)
    assert [cache.get(i) for i in range(3)] == [blocks[0], blocks[1], None]
    assert cache.stats().evictions == 0


def test_charge_follows_indexing() -> None:
    from lakecore.core.lookup.block import index_blocks

    builder = BlockBuilder()
    for key, value in ENTRIES[:40]:
        builder.add(key, value)
    block = Block(builder.finish())
    cache = BlockCache(1 << 20)
    cache.put(7, block)
    before = cache.stats().charged_bytes
    index_blocks([block], 1)
    cache.put(7, block)
    assert cache.stats().charged_bytes == block.memory() > before
    assert cache.stats().blocks == 1


def test_set_capacity_shrinks_at_once_and_refuses_nonsense() -> None:
    blocks = [block_of(1000) for _ in range(4)]
    cache = BlockCache(10 * blocks[0].memory())
    for i, block in enumerate(blocks):
        cache.put(i, block)
    cache.set_capacity(2 * blocks[0].memory())
    assert [cache.get(i) is not None for i in range(4)] == [False, False, True, True]
    with pytest.raises(InvalidArgumentError):
        cache.set_capacity(0)
    with pytest.raises(InvalidArgumentError):
        BlockCache(-1)


def test_readers_share_the_capacity_and_hit_their_blocks(tmp_path: Path) -> None:
    cache = BlockCache(64 << 20)
    paths = [write_file(tmp_path / f"{i}.lk", ENTRIES, block_size=2048) for i in range(2)]
    readers = [LookupReader(path, block_cache=cache) for path in paths]
    key, value = ENTRIES[300]
    for reader in readers:
        assert reader.get(key) == value
    assert cache.stats().blocks == 2  # one block each, under one cap
    misses = cache.stats().misses
    for reader in readers:
        assert reader.get(key) == value
    assert cache.stats().misses == misses and cache.stats().hits >= 2
    for reader in readers:
        reader.close()
    assert cache.stats().blocks == 0, "a closed reader's blocks are dropped"


def test_a_collected_reader_gives_its_blocks_back(tmp_path: Path) -> None:
    cache = BlockCache(64 << 20)
    path = write_file(tmp_path / "f.lk", ENTRIES, block_size=2048)
    reader = LookupReader(path, block_cache=cache)
    reader.get_many([k for k, _ in ENTRIES])
    assert cache.stats().blocks > 1
    del reader
    gc.collect()
    assert cache.stats().blocks == 0


def test_a_rebuilt_file_never_meets_the_old_files_blocks(tmp_path: Path) -> None:
    """Same path, same size, same layout, other values: inode and mtime can coincide, so the
    cache must not key blocks by the file."""
    cache = BlockCache(64 << 20)
    path = tmp_path / "v.lk"
    old = [(k, b"old-" + v[4:]) for k, v in ENTRIES]
    new = [(k, b"new-" + v[4:]) for k, v in ENTRIES]
    write_file(path, old, compression="none")
    with LookupReader(path, block_cache=cache) as reader:
        assert reader.get(old[5][0]) == old[5][1]
    write_file(path, new, compression="none")
    with LookupReader(path, block_cache=cache) as reader:
        assert reader.get(new[5][0]) == new[5][1]


def test_without_a_cache_every_get_reads_its_block(tmp_path: Path) -> None:
    path = write_file(tmp_path / "f.lk", ENTRIES, block_size=2048)
    with LookupReader(path, block_cache=None) as reader:
        assert [reader.get(k) for k, _ in ENTRIES[::7]] == [v for _, v in ENTRIES[::7]]
        assert reader.get_many([k for k, _ in ENTRIES]) == [v for _, v in ENTRIES]


def test_the_shared_cache_is_the_default_and_clear_caches_empties_it(tmp_path: Path) -> None:
    path = write_file(tmp_path / "f.lk", ENTRIES)
    with LookupReader(path) as reader:
        assert reader.get(ENTRIES[0][0]) == ENTRIES[0][1]
        assert SHARED_BLOCK_CACHE.get(reader._key) is not None
        clear_caches()
        assert SHARED_BLOCK_CACHE.get(reader._key) is None
        assert reader.get(ENTRIES[0][0]) == ENTRIES[0][1]


def test_owners_never_collide() -> None:
    owners = {BlockCache.new_owner() for _ in range(100)}
    assert len(owners) == 100
    block = block_of(10)
    cache = BlockCache(1 << 20)
    first, second = sorted(owners)[:2]
    cache.put(first << OWNER_SHIFT, block)
    cache.discard_owner(second)
    assert cache.get(first << OWNER_SHIFT) is block


def test_threads_sharing_a_cache_get_right_answers(tmp_path: Path) -> None:
    cache = BlockCache(200_000)  # a few blocks: threads evict each other's blocks all the time
    path = write_file(tmp_path / "f.lk", ENTRIES, block_size=1024)
    errors: list[str] = []

    def work(offset: int) -> None:
        with LookupReader(path, block_cache=cache) as reader:
            for key, value in ENTRIES[offset::3] * 3:
                if reader.get(key) != value:
                    errors.append(repr(key))
            if reader.get_many([k for k, _ in ENTRIES]) != [v for _, v in ENTRIES]:
                errors.append("get_many")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cache.stats().charged_bytes <= 200_000
