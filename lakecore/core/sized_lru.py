"""A thread-safe least-recently-used cache bounded by the size of what it holds.

Rules: every cache of an immutable file's contents in lakecore is one of these (node files,
definition files, Iceberg metadata files, the REST server's answers for them). A file that
never changes once written can never make a cached entry stale, so the only question is how
much memory it may take: each entry states its size (the bytes it was read from, a fair
measure of what its decoded form holds), the cache evicts the least recently used entries
beyond ``capacity_bytes``, and an entry larger than the whole capacity is not kept at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedLRU(Generic[K, V]):
    """Values by key, at most ``capacity_bytes`` of them (by their stated sizes)."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def contains(self, key: K) -> bool:
        with self._lock:
            return key in self._entries

    def get(self, key: K) -> tuple[V, int] | None:
        """The value and its size, or None; a hit makes it the most recently used."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: K, value: V, size: int) -> None:
        if size > self.capacity_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.capacity_bytes and self._entries:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


__all__ = ["SizedLRU"]
