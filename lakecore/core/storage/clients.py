"""What a process keeps across calls: its storage clients and its pool for network requests.

Rules:

- **Picklable and fork-safe.** A ``Storage`` travels to Spark executors; only its root and
  options are pickled, and its client is rebuilt lazily on first use. Spark's Python workers
  fork: a changed ``os.getpid()`` means a forked child, and a client inherited from the parent
  is abandoned unused, never closed (closing it would run its finalisers against the parent's
  event loop, which does not exist here).
- **Clients are cached** per process, keyed by root and options (and by thread, except on S3:
  ``lakecore.core.storage.s3``): a Spark task unpickles a fresh Storage, and building an S3 client
  per task and per listing thread cost several times the listing itself in CPU. Clients are
  built with ``skip_instance_cache=True`` so two Storages with different options never share
  one. Bounded at ``CLIENT_CACHE_SIZE``, least recently used out.
- **One request pool per process** (``request_pool``) for requests that wait on the network
  (listings, root reads, node prefetches), kept across calls: its threads keep their clients,
  where a pool per call built new clients every time (about 0.1 CPU-s each). Only leaf requests
  go to it: a task in this pool never waits on another one, so it cannot deadlock.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from lakecore.core.storage.backend import Backend

# Clients inherited across a fork are kept referenced, never used and never closed: closing
# them would run their finalisers against the parent's event loop, which does not exist here.
_ABANDONED_AFTER_FORK: list[object] = []
CLIENT_CACHE_SIZE: Final = 64
# (pid, thread, root, options): the thread is 0 for a client every thread shares.
ClientKey = tuple[int, int, str, str]
_CLIENT_CACHE: OrderedDict[ClientKey, Backend] = OrderedDict()
_CLIENT_CACHE_LOCK = threading.Lock()
_CLIENT_BUILD_LOCK = threading.Lock()
_REQUEST_POOL_LOCK: Final = threading.Lock()
_REQUEST_POOL: list[tuple[int, int, ThreadPoolExecutor]] = []  # (pid, size, pool), at most one


def request_pool(threads: int) -> ThreadPoolExecutor:
    """This process's pool for requests that wait on the network, at least ``threads`` wide
    (a forked child, such as a Spark Python worker, makes its own)."""
    with _REQUEST_POOL_LOCK:
        pid = os.getpid()
        if _REQUEST_POOL and _REQUEST_POOL[0][0] == pid and _REQUEST_POOL[0][1] >= threads:
            return _REQUEST_POOL[0][2]
        if _REQUEST_POOL and _REQUEST_POOL[0][0] == pid:
            _REQUEST_POOL[0][2].shutdown(wait=False)  # idle threads exit; running requests finish
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakecore-requests")
        _REQUEST_POOL[:] = [(pid, threads, pool)]
        return pool


def abandon(backend: Backend) -> None:
    """Keep a client inherited across a fork referenced, unused and unclosed (see above)."""
    _ABANDONED_AFTER_FORK.append(backend)


def cached_client(key: ClientKey, build: Callable[[], Backend]) -> Backend:
    """The cached client under ``key``, built once with ``build`` when there is none.

    Built under a lock: threads that meet an uncached S3 client at once (the 16 root readers of
    a job's first step) would otherwise each build one."""
    cached = _cached(key)
    if cached is not None:
        return cached
    with _CLIENT_BUILD_LOCK:
        cached = _cached(key)
        if cached is not None:
            return cached
        backend = build()
        with _CLIENT_CACHE_LOCK:
            _CLIENT_CACHE[key] = backend
            while len(_CLIENT_CACHE) > CLIENT_CACHE_SIZE:
                _CLIENT_CACHE.popitem(last=False)
    return backend


def _cached(key: ClientKey) -> Backend | None:
    """The cached client under ``key``, or None; forgets the parent's clients in a forked
    child (see the module doc)."""
    with _CLIENT_CACHE_LOCK:
        backend = _CLIENT_CACHE.get(key)
        if backend is not None:
            _CLIENT_CACHE.move_to_end(key)
            return backend
        if _CLIENT_CACHE and next(iter(_CLIENT_CACHE))[0] != key[0]:
            _ABANDONED_AFTER_FORK.extend(_CLIENT_CACHE.values())
            _CLIENT_CACHE.clear()
        return None
