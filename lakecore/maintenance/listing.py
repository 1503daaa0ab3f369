"""Listing a lakehouse root for maintenance: what is there, and what lakecore may delete.

Only the top level and the 4,096 hash directories are listed: lakecore writes nowhere else. A
lakehouse is listed with the fewest requests that cover it: a small one (at most
``gc_flat_listing_max_files`` files) in one flat paged listing of the root (a request per 1,000
files on S3), whose files outside the hash directories are dropped; a large one with a request
per hash directory, fanned out over tasks with several requests in flight each
(``list_directories``). ``list_small_root`` tries the flat listing and gives up, after at most
``max_files / 1000 + 1`` requests, as soon as the lakehouse turns out larger. A
listed file is classified by its *name* (``locations.classify_path``): lakecore's own kinds,
or ``foreign`` (reported, never touched). Only node files, namespace, table and lakehouse
definitions and ``.lakecore-tmp-*`` leftovers are deletable; root files and the hint never are
(expiring versions is version compaction's job).

A listing failure travels in the stream as a record whose path starts with ``ERROR_KEY`` (a
control character no stored path can hold), so that a distributed listing can report it to the
driver, which then refuses to delete anything."""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, NamedTuple

from lakecore.errors import (
    LakecoreError,
)
from lakecore.locations import (
    FileKind,
    classify_path,
)
from lakecore.storage import Storage

DELETABLE_KINDS: Final = frozenset(
    {FileKind.NODE, FileKind.NAMESPACE_DEF, FileKind.TABLE_DEF, FileKind.LAKEHOUSE_DEF, FileKind.TEMP}
)
FOREIGN: Final = "foreign"
# Starts an error record in a stream of (path, size) records or a listing. Control characters
# never occur in a stored path (check_relative_path refuses them): it cannot be a real file.
ERROR_KEY: Final = "\x00error: "
UNKNOWN_SIZE: Final = -1
_DELETABLE_NAMES: Final = frozenset(kind.value for kind in DELETABLE_KINDS)
DELETABLE_KIND_NAMES: Final = tuple(sorted(_DELETABLE_NAMES))
# A path inside one of the 4,096 hash directories (``locations.hash_directories``).
_IN_HASH_DIRECTORY: Final = re.compile(r"[01]{4}/[01]{4}/[01]{4}/")


class GcRefusedError(LakecoreError):
    """gc cannot prove what is live (a retained root or node is missing or unreadable, the
    listing failed, ...); nothing was deleted. Repair the named file (or restore it) first."""

    exit_code = 4

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; nothing was deleted")


# ---------------------------------------------------------------------------------------------
# Listing


class ListedFile(NamedTuple):
    """One listed file and what its name says it is (a FileKind value, FOREIGN, or ERROR_KEY
    for a directory that could not be listed, with the reason as ``path``)."""

    path: str
    size: int
    mtime_millis: int
    kind: str


def kind_of(path: str) -> str:
    classified = classify_path(path)
    return FOREIGN if classified is None else classified.kind.value


def is_deletable(kind: str) -> bool:
    return kind in _DELETABLE_NAMES


def list_directory(storage: Storage, directory: str) -> list[ListedFile]:
    """Every file under one hash directory (an executor unit). A failure comes back as one
    ERROR_KEY record instead of an exception, so the driver can name it in one line."""
    try:
        infos = storage.list(directory)
    except LakecoreError as exc:
        return [ListedFile(f"listing {directory}/: {exc.one_line()}", 0, 0, ERROR_KEY)]
    return [ListedFile(i.path, i.size, i.mtime_millis, kind_of(i.path)) for i in infos]


def list_directories(storage: Storage, directories: Iterable[str], threads: int = 1) -> Iterator[ListedFile]:
    """``list_directory`` over many directories (an executor unit, one call per partition),
    ``threads`` requests in flight: on an object store a listing waits on the network, and
    most hash directories of a small lakehouse are empty. A local file system is listed in
    this thread alone: there the listing is CPU-bound, and threads only contend for the
    interpreter (twice as slow at 200k files)."""
    directories = list(directories)
    if threads <= 1 or len(directories) <= 1 or not storage.waits_on_network:
        for directory in directories:
            yield from list_directory(storage, directory)
        return
    pool = _listing_pool(threads)
    # A sliding window of ``threads`` requests, answered in order: no more in flight than asked
    # for even when the shared pool is larger, and a consumer that stops early leaves at most
    # the window running.
    pending = iter(directories)
    in_flight: deque[Future[list[ListedFile]]] = deque(
        pool.submit(list_directory, storage, d) for d in itertools.islice(pending, threads)
    )
    while in_flight:
        listed = in_flight.popleft().result()
        following = next(pending, None)
        if following is not None:
            in_flight.append(pool.submit(list_directory, storage, following))
        yield from listed


# One pool per process, kept across calls: its threads keep their storage clients (which are
# cached per thread), where a pool per call built new clients every time.
_POOL_LOCK: Final = threading.Lock()
_POOL: list[tuple[int, int, ThreadPoolExecutor]] = []  # (pid, size, pool), at most one


def _listing_pool(threads: int) -> ThreadPoolExecutor:
    with _POOL_LOCK:
        pid = os.getpid()
        if _POOL and _POOL[0][0] == pid and _POOL[0][1] >= threads:
            return _POOL[0][2]
        if _POOL and _POOL[0][0] == pid:
            _POOL[0][2].shutdown(wait=False)  # idle threads exit; running requests finish
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakecore-list")
        _POOL[:] = [(pid, threads, pool)]
        return pool


def list_small_root(storage: Storage, max_files: int) -> list[ListedFile] | None:
    """Every file in the hash directories through one flat paged listing of the root, or None
    when the root holds more than ``max_files`` files (list the hash directories one by one
    then). The top level is not included (``list_top`` lists it); files in other folders are
    left out, as the per-directory listing leaves them out."""
    if max_files <= 0:
        return None
    try:
        infos = storage.list("", limit=max_files)
    except LakecoreError as exc:
        raise GcRefusedError(f"could not list {storage.root_uri}: {exc.one_line()}") from exc
    if len(infos) > max_files:
        return None
    return [ListedFile(i.path, i.size, i.mtime_millis, kind_of(i.path)) for i in infos
            if _IN_HASH_DIRECTORY.match(i.path)]


def list_top(storage: Storage) -> list[ListedFile]:
    """The files directly under the root (roots, definitions, hint, temp files, foreign)."""
    try:
        infos = storage.list_top_level()
    except LakecoreError as exc:
        raise GcRefusedError(f"could not list the top of {storage.root_uri}: {exc.one_line()}") from exc
    return [ListedFile(i.path, i.size, i.mtime_millis, kind_of(i.path)) for i in infos]


def root_version_of(path: str) -> int | None:
    """The version of a root node file at the top of the root, None for any other path."""
    classified = classify_path(path)
    if classified is None or classified.kind is not FileKind.ROOT_NODE:
        return None
    return classified.version


def is_error(path: str) -> bool:
    """True for the error records of ``run_reach_tasks``."""
    return path.startswith(ERROR_KEY)


def error_reason(path: str) -> str:
    return path[len(ERROR_KEY) :]
