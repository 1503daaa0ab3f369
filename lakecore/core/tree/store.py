"""Reading and writing node files, with a process-wide cache and I/O accounting.

Node files are immutable (a changed node is a new file, a root is created exclusively), so a
cached node can never go stale: the cache is keyed by (root URI, path) and shared by every tree
of the process. It is bounded by the encoded bytes of the nodes it holds and evicts least
recently used nodes first.

Child pointers are relative paths. A full URI in a pnode is only followed when the store was
opened with that URI's root in ``external_roots`` (a partial snapshot export points back at its
source lakehouse); anything else is refused, so a forged pointer never leads outside the root.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from lakecore.core.locations import external_root_for, is_full_uri, new_node_file_path
from lakecore.core.node import Node, decode_node, encode_node
from lakecore.core.sized_lru import SizedLRU
from lakecore.errors import InvalidLocationError, NotFoundError

if TYPE_CHECKING:
    from lakecore.core.storage import Storage

DEFAULT_CACHE_BYTES: Final = 256 << 20
# A node write is dominated by the storage round trip (an fsync locally, a PUT on S3), not by
# CPU: many in flight at once hide that latency.
WRITE_THREADS: Final = 8
# Reads a walk starts ahead of itself on storage that waits on the network (``prefetch``): the
# threads that make them, how many may be in flight at once, and how many may be started and
# not yet loaded (in flight or read): a bound on the memory they hold (a node file is at most
# node_file_max_size bytes, 1 MiB by default; an order-128 leaf of table keys about 40 KB).
PREFETCH_THREADS: Final = 8
PREFETCH_PENDING: Final = 64
PREFETCH_HELD: Final = 2 * PREFETCH_PENDING
# Reads asked for beyond those: started as the walk loads what it asked for before. Only their
# paths wait; the newest asked are kept when there are more.
PREFETCH_QUEUED: Final = 4096


@dataclass
class IOStats:
    """Counters of node file traffic, for benchmarks and job reports."""

    files_read: int = 0
    bytes_read: int = 0
    cache_hits: int = 0
    files_written: int = 0
    bytes_written: int = 0
    written_paths: list[str] = field(default_factory=list)

    def add(self, other: IOStats) -> None:
        self.files_read += other.files_read
        self.bytes_read += other.bytes_read
        self.cache_hits += other.cache_hits
        self.files_written += other.files_written
        self.bytes_written += other.bytes_written
        self.written_paths.extend(other.written_paths)

    def as_dict(self) -> dict[str, int]:
        return {
            "files_read": self.files_read,
            "bytes_read": self.bytes_read,
            "cache_hits": self.cache_hits,
            "files_written": self.files_written,
            "bytes_written": self.bytes_written,
        }


class NodeCache(SizedLRU[tuple[str, str], Node]):
    """An LRU of decoded nodes, keyed by (root URI, path), bounded by their encoded size."""

    def __init__(self, capacity_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__(capacity_bytes)


SHARED_CACHE: Final = NodeCache()


class NodeStore:
    """Loads and writes the node files of one lakehouse for a tree of one order.

    Nodes returned by ``load`` are shared with the cache: treat them as read-only and
    ``copy()`` before changing one. A store is used by one thread at a time (its read-ahead
    state is not locked; the reads themselves run on the request pool's threads)."""

    def __init__(
        self,
        storage: Storage,
        order: int,
        *,
        cache: NodeCache | None = SHARED_CACHE,
        external_roots: Iterable[str] = (),
    ) -> None:
        self.storage = storage
        self.order = order
        self.cache = cache
        self.external_roots = tuple(external_roots)
        self.stats = IOStats()
        self._cache_prefix = storage.fingerprint()
        self._prefetched: dict[str, Future[bytes]] = {}
        self._in_flight = 0  # of the reads in _prefetched: counted down by the pool's threads
        self._in_flight_lock = threading.Lock()
        # Asked to read ahead but not started yet, the next to start first; the set says which
        # are still wanted (a node loaded before its turn is no longer).
        self._queued: deque[str] = deque(maxlen=PREFETCH_QUEUED)
        self._queued_wanted: set[str] = set()

    def _resolve(self, location: str) -> tuple[Storage, str]:
        if not is_full_uri(location):
            return self.storage, location
        root = external_root_for(location, self.external_roots)
        if root is not None:
            from lakecore.core.storage import Storage

            return Storage(root, self.storage.storage_options), location[len(root) :]
        raise InvalidLocationError(
            f"node pointer {location!r} leaves the lakehouse root {self.storage.root_uri}; refusing to follow it"
        )

    def load(self, location: str) -> Node:
        return self.load_sized(location)[0]

    def load_sized(self, location: str) -> tuple[Node, int]:
        """The node at ``location`` and the size of its file in bytes."""
        key = (self._cache_prefix, location)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.stats.cache_hits += 1
                return cached
        storage, path = self._resolve(location)
        started = self._prefetched.pop(location, None)
        self._queued_wanted.discard(location)
        self._start_queued()
        try:
            data = started.result() if started is not None else storage.read(path)
        except NotFoundError:
            raise NotFoundError(f"node file {storage.uri(path)} is missing") from None
        self._start_queued()  # in the place the read just waited for
        node = decode_node(data, storage.uri(path), self.order)
        if storage is not self.storage:
            node = _absolutize(node, storage.root_uri)
        self.stats.files_read += 1
        self.stats.bytes_read += len(data)
        if self.cache is not None:
            self.cache.put(key, node, len(data))
        return node, len(data)

    def prefetch(self, locations: Iterable[str]) -> None:
        """Start reading these node files in the background, when the storage waits on the
        network: a walk about to load them then finds their bytes read, instead of paying one
        round trip after another (159 node files at 20 ms each were 3-5 s of a gc on S3).
        Only files of this lakehouse that are not cached.

        At most ``PREFETCH_PENDING`` reads are in flight and ``PREFETCH_HELD`` started and not
        yet loaded; the rest are queued and started as reads finish and the walk loads
        (``load_sized`` starts them). A walk goes depth first, so the files of a later call
        start before those still queued from an earlier one: a node's children before its
        siblings' read ahead. (Files past the bound used to be dropped, so a node's children
        after its first 64 were read one round trip after another: 11 s of a local[1]
        validate of 100k tables on S3, 3.5 s since.) A read that fails raises when (and if) the
        node is loaded, as it would have without the prefetch."""
        if not self.storage.waits_on_network:
            return
        wanted = [
            location for location in dict.fromkeys(locations) if self._worth_reading_ahead(location)
        ]
        self._queued.extendleft(reversed(wanted))
        self._queued_wanted.update(wanted)
        self._start_queued()

    def drop_read_ahead(self) -> None:
        """Forget what was asked to be read ahead (a walk that failed will not load it): queued
        reads are not started, and started ones that have not begun are cancelled."""
        self._queued.clear()
        self._queued_wanted.clear()
        for future in self._prefetched.values():
            if future.cancel():  # never begun, so never counted down by its thread
                self._read_ended()
        self._prefetched.clear()

    def _worth_reading_ahead(self, location: str) -> bool:
        if location in self._prefetched or is_full_uri(location):
            return False
        return self.cache is None or not self.cache.contains((self._cache_prefix, location))

    def _start_queued(self) -> None:
        """Start queued reads while the bounds allow."""
        if not self._queued:
            return
        from lakecore.core.storage import request_pool

        pool = request_pool(PREFETCH_THREADS)
        while (
            self._queued
            and len(self._prefetched) < PREFETCH_HELD
            and self._in_flight < PREFETCH_PENDING
        ):
            location = self._queued.popleft()
            if location not in self._queued_wanted or not self._worth_reading_ahead(location):
                continue
            self._queued_wanted.discard(location)
            with self._in_flight_lock:
                self._in_flight += 1
            self._prefetched[location] = pool.submit(self._read_ahead, location)
        if not self._queued:
            self._queued_wanted.clear()

    def _read_ahead(self, location: str) -> bytes:
        """A read on the request pool. It counts itself down before its future is done, so a
        walk woken by the result already sees the place free."""
        try:
            return self.storage.read(location)
        finally:
            self._read_ended()

    def _read_ended(self) -> None:
        with self._in_flight_lock:
            self._in_flight -= 1

    def write_many(
        self, nodes: list[tuple[str, Node]], *, threads: int = WRITE_THREADS, cache: bool = False
    ) -> None:
        """Write new nodes at paths chosen beforehand, in parallel, then make them durable with
        one sync. A commit only happens after this returns, so neither the parallelism nor the
        batched sync changes what a reader can see. ``cache`` keeps them (a commit's nodes are
        what its next reader walks; a bulk build's would flood the cache)."""
        if not nodes:
            return

        def one(item: tuple[str, Node]) -> int:
            path, node = item
            data = encode_node(node, self.order)
            self.storage.write(path, data, durable=False)
            return len(data)

        if len(nodes) == 1:
            sizes = [one(nodes[0])]
        else:
            from lakecore.core.storage import request_pool

            # The process's request pool: a pool per call started threads for every commit.
            sizes = list(request_pool(threads).map(one, nodes))
        self.storage.sync()  # one flush for the batch, before anything can point at it
        if cache and self.cache is not None:
            for (path, node), size in zip(nodes, sizes, strict=True):
                self.cache.put((self._cache_prefix, path), node, size)
        self.stats.files_written += len(nodes)
        self.stats.bytes_written += sum(sizes)
        self.stats.written_paths.extend(path for path, _ in nodes)

    def write(self, node: Node, *, cache: bool = True) -> str:
        """Write a non-root node to a new file and return its path. ``cache=False`` keeps
        bulk writes from flooding the cache with nodes nobody reads soon."""
        data = encode_node(node, self.order)
        path = new_node_file_path()
        self.storage.write(path, data)
        self.stats.files_written += 1
        self.stats.bytes_written += len(data)
        self.stats.written_paths.append(path)
        if cache and self.cache is not None:
            self.cache.put((self._cache_prefix, path), node, len(data))
        return path


def absolute_location(location: str, root_uri: str) -> str:
    """A stored location made absolute against the root of the lakehouse it was read from."""
    return location if is_full_uri(location) else root_uri + location


def _absolutize(node: Node, root_uri: str) -> Node:
    # A relative location is relative to the lakehouse the file holding it lives in. A node read
    # from an export's source carries pointers into the source: make them full URIs so that
    # nobody resolves them against the export's own root.
    return Node(
        list(node.keys),
        [absolute_location(v, root_uri) for v in node.values],
        [absolute_location(c, root_uri) for c in node.children],
        {
            k: (None if v is None else absolute_location(v, root_uri))
            for k, v in node.buffer.items()
        },
        dict(node.system),
    )
