"""The decoded-block cache: data blocks already read, checked and decompressed, shared by every
``LookupReader`` of a process under one byte cap.

Rules:

- **Key.** Every reader takes an owner number from :meth:`BlockCache.new_owner`, and caches
  its data block ``i`` under the integer ``owner << 64 | i``. The capacity is shared, the
  blocks are not: a file's identity (inode, size, mtime) cannot key them safely, because a
  deleted file's inode is reused at once and file times tick only every few milliseconds, so
  a rebuilt file could meet the blocks of its predecessor. A reader's blocks are dropped when
  it is closed or collected (:meth:`BlockCache.discard_owner`).
- **Charge.** Each block is charged :meth:`Block.memory` bytes (its bytes, the most its search
  memo can hold, and, once indexed by ``get_many`` or a scan, its entry lists); a block is
  charged again when it is put again after indexing. A block larger than the whole capacity is
  not cached.
- **Eviction.** Least recently used first, until the charged bytes are within the capacity. A
  put with ``evict=False`` (``get_many``) only fills free space.
- **Threads.** One lock around every operation; a cached ``Block`` changes only by whole
  attribute or list-slot writes of values any thread would compute alike (``block.py``).

``SHARED_BLOCK_CACHE`` is the process-wide instance readers use by default, with
``DEFAULT_BLOCK_CACHE_BYTES`` (256 MiB, Paimon's default lookup cache memory) until
:meth:`BlockCache.set_capacity` changes it; ``lakecore.clear_caches()`` empties it. A reader
given ``block_cache=None`` caches nothing: every lookup reads and decodes its block.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from lakecore.core.lookup.block import Block
from lakecore.errors import InvalidArgumentError

#: Capacity of the shared cache: Paimon's default ``lookup.cache-max-memory-size``.
DEFAULT_BLOCK_CACHE_BYTES: Final = 256 << 20

#: Bits of a key below the owner number: room for any block number.
OWNER_SHIFT: Final = 64
#: Owner numbers, unique in the process (shared by every cache, so never reused).
_OWNERS: Final = itertools.count(1)


@dataclass(frozen=True, slots=True)
class BlockCacheStats:
    capacity_bytes: int
    charged_bytes: int
    blocks: int
    hits: int
    misses: int
    evictions: int


class BlockCache:
    """An LRU of decoded blocks bounded by the bytes they hold."""

    def __init__(self, capacity_bytes: int = DEFAULT_BLOCK_CACHE_BYTES) -> None:
        self._check_capacity(capacity_bytes)
        self._capacity = capacity_bytes
        self._entries: OrderedDict[int, tuple[Block, int]] = OrderedDict()
        self._by_owner: dict[int, set[int]] = {}
        self._charged = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._lock = threading.Lock()

    @staticmethod
    def _check_capacity(capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise InvalidArgumentError(
                f"block cache capacity must be a positive number of bytes, not {capacity_bytes}"
            )

    @property
    def capacity_bytes(self) -> int:
        return self._capacity

    @staticmethod
    def new_owner() -> int:
        """A fresh owner number for a reader; its keys are ``owner << OWNER_SHIFT | block``."""
        return next(_OWNERS)

    def get(self, key: int) -> Block | None:
        """The cached block, now the most recently used, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]

    def __contains__(self, key: int) -> bool:
        """Whether ``key`` is cached, without counting a hit or touching its recency."""
        with self._lock:
            return key in self._entries

    def put(self, key: int, block: Block, *, evict: bool = True) -> None:
        """Cache ``block`` (or charge it again after indexing) as the most recently used.

        With ``evict=False`` the block is cached only if it fits without evicting anything: a
        batch that touches more blocks than the cache holds (``get_many`` over a whole file)
        then fills the free space once instead of cycling every block through the LRU, which
        would evict each one just before the next batch needs it.
        """
        charge = block.memory()
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._charged -= old[1]
            fits = self._charged + charge <= self._capacity if not evict else True
            if charge > self._capacity or not fits:
                self._forget(key)
                return
            if old is None:
                self._by_owner.setdefault(key >> OWNER_SHIFT, set()).add(key)
            self._entries[key] = (block, charge)
            self._charged += charge
            self._evict()

    def _forget(self, key: int) -> None:
        owner = key >> OWNER_SHIFT
        keys = self._by_owner.get(owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_owner[owner]

    def _evict(self) -> None:
        entries = self._entries
        while self._charged > self._capacity and entries:
            key, (_, charge) = entries.popitem(last=False)
            self._charged -= charge
            self._evictions += 1
            self._forget(key)

    def discard_owner(self, owner: int) -> None:
        """Drop every block of one owner (a reader that closed)."""
        with self._lock:
            for key in self._by_owner.pop(owner, ()):
                entry = self._entries.pop(key, None)
                if entry is not None:
                    self._charged -= entry[1]

    def set_capacity(self, capacity_bytes: int) -> None:
        """Change the byte cap; shrinking evicts at once."""
        self._check_capacity(capacity_bytes)
        with self._lock:
            self._capacity = capacity_bytes
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_owner.clear()
            self._charged = 0

    def stats(self) -> BlockCacheStats:
        with self._lock:
            return BlockCacheStats(
                capacity_bytes=self._capacity,
                charged_bytes=self._charged,
                blocks=len(self._entries),
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
            )


SHARED_BLOCK_CACHE: Final = BlockCache()
