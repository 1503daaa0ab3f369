"""Storage for one lakehouse root: the only module that knows about file systems and S3.

``Storage(root_uri, storage_options)`` reads, writes, exclusively creates, lists and deletes
files named by paths *relative to the root*. Every path goes through
``locations.check_relative_path`` before any I/O, so nothing outside the root is ever read,
written, listed or deleted, whatever a (possibly corrupt or hostile) stored location says.

Backends, chosen by the root's scheme:

- ``file://``: plain ``os`` calls. The atomic-rename and hard-link tricks below need real OS
  paths and ``fsync``; fsspec's LocalFileSystem would add a layer without adding anything.
- ``s3://`` (``s3a``/``s3n`` are normalised to ``s3``): s3fs, with the S3 API called directly
  for listing, deletion and conditional create, so that every request is explicit about its
  ``Prefix``, batch size and precondition.
- anything else (``memory://``, ``gs://``, ...): generic fsspec calls. Exclusive create is only
  offered where it can be made atomic: ``memory://`` (one process, one lock). Other schemes
  refuse it by name rather than silently degrade into check-then-write.

Design choices:

- **Exclusive create is atomic in content.** A commit is the exclusive create of the next root
  node file, so a reader must never see a half-written root, and a crashed writer must never
  leave a torn file that blocks every later commit. Locally the bytes go to a uniquely named
  temporary file in the target's directory, are fsynced, and are then published with
  ``os.link(tmp, target)``: ``link`` fails with EEXIST when the target exists (the same
  guarantee as ``O_EXCL``), and the target appears with all its bytes or not at all. ``O_EXCL``
  on the target itself would be exclusive but not atomic in content; ``os.replace`` would be
  atomic but not exclusive. A crash leaves at most a ``.lakecore-tmp-<uuid>`` orphan, which
  blocks nothing (its name is unique) and which garbage collection removes.
  On S3 a single ``PutObject`` with ``If-None-Match: *`` is both (S3 answers 412 when the key
  exists). Because botocore and s3fs retry a PUT whose response was lost, a 412 can mean
  "your own earlier attempt landed": when the existing object holds exactly our bytes the
  create counts as ours. Root files carry their creation time and fresh file names, so two
  different writers never produce identical root bytes.
- **Plain writes are atomic too.** ``write`` (new uuid-named files, the latest-version hint)
  goes through a temporary file and ``os.replace`` locally, so a reader never sees a torn file.
- **Prefixes end in '/'.** A directory prefix is always listed as ``root + prefix + '/'`` and
  the root itself always ends in ``/``: on an object store a prefix is a string match, and
  ``s3://b/lake`` would otherwise also match ``s3://b/lake2/...``, a neighbouring lakehouse
  whose files a garbage collector must never see, let alone delete.
- **Symlinks below the root lead nowhere.** Locally a listing neither follows nor reports a
  symlink, and it lists nothing through a directory below the root that is one (or lies under
  one); a delete skips a file whose directory is reached through one. A hash directory linked
  to another lakehouse's (a "cheap clone") would otherwise have its files listed as orphans of
  this one and deleted by gc.
- **Picklable and fork-safe.** A Storage travels to Spark executors. Only ``(root_uri,
  storage_options)`` is pickled; the file system client is rebuilt lazily on first use, cached
  per process and per thread (s3fs clients are bound to an event loop and are not fork-safe;
  Spark's python workers fork). A changed ``os.getpid()`` means we are in a forked child and
  the inherited client is abandoned unused. Clients are built with
  ``skip_instance_cache=True`` so two Storages with different options never share one, and
  kept in a small per-process cache keyed by root and options (and by thread, except on S3):
  a Spark task unpickles a fresh Storage, and building an S3 client per task and per listing
  thread cost several times the listing itself in CPU.
- **One S3 client per process.** Every synchronous s3fs client runs its requests as
  coroutines on fsspec's one IO thread per process, whichever thread calls it, so a client
  per thread bought no concurrency and cost 0.1-0.2 CPU-s each to build (16 root-reading
  threads: 16 clients). All threads of a process share one, and its connection pool is
  widened to ``S3_MAX_POOL_CONNECTIONS`` (botocore's default of 10 would queue the request
  pool's and the prefetches' requests) unless ``config_kwargs.max_pool_connections`` says
  otherwise.
- **A listing costs its bytes, not its timestamps.** botocore parses every timestamp of a
  response with dateutil, about 160 us each: 85% of the client's CPU for a page of 1,000 keys
  (186 ms a page, 27 ms without), which made a listing of 100k objects take 18 CPU-seconds
  in one process, and 0.2 ms of each GET's 3.8 (its Last-Modified header). Each S3 client gets
  a session of its own whose responses parse S3's two forms (``2026-11-27T22:09:38.000Z``,
  ``Fri, 27 Nov 2026 22:09:38 GMT``) with the standard library (``parse_s3_timestamp``); any
  other form still goes to botocore's parser.
- **Nothing hangs.** Every S3 call carries an overall deadline (storage option
  ``lakecore_timeout_seconds``, default 300, taken out before the options reach s3fs):
  botocore's read timeout does not cover a PUT that waits for ``100 Continue`` from a silent
  server, which otherwise blocks a commit forever.
- **A wrong endpoint fails at once.** An explicit S3 endpoint (``endpoint_url``,
  ``AWS_ENDPOINT_URL``) gets one TCP connect before its client is built, once per process:
  where nothing listens (refused, a name that does not resolve, no route) that is a
  ``StorageError`` naming the endpoint, not 20-34 s of botocore's and s3fs's retries ending in
  the same verdict. Skipped where a proxy carries the requests; a probe that times out decides
  nothing. The cost: a server restarting at that moment fails the job (exit 4, which the DAGs
  retry) instead of being waited for.
- **Errors.** A missing file is ``NotFoundError`` naming the full URI; timeouts are
  ``StorageTimeoutError`` (the operation may or may not have taken effect); any other failure
  of the OS or the client is ``StorageError`` with the URI and the cause chained. No raw
  ``OSError`` or botocore exception escapes.
- **Only files.** ``exists``, ``read`` and ``size`` see files, never directories or prefixes;
  ``list`` leaves out directories, S3 directory markers (``dir/``) and keys that are not
  qualified relative paths (``a//b``), which no other method could address anyway.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import os
import re
import socket
import stat
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NoReturn, Protocol

from lakecore.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidLocationError,
    LakecoreError,
    NotFoundError,
    StorageError,
    StorageRefusedError,
    StorageTimeoutError,
)
from lakecore.locations import (
    check_relative_path,
    new_temp_path,
    normalize_root_uri,
    split_root_uri,
)

__all__ = [
    "DEFAULT_S3_TIMEOUT_SECONDS",
    "TIMEOUT_OPTION",
    "FileInfo",
    "Storage",
    "accepted_storage_options",
    "parse_s3_timestamp",
    "parse_storage_options",
]

# S3's DeleteObjects accepts at most 1000 keys per request.
S3_MAX_DELETE_BATCH = 1000
# S3 answers 409 ConditionalRequestConflict when another conditional write to the same key is
# in flight; AWS documents that the request should be retried. A few quick tries suffice: the
# retry then gets a definite 412 or 200.
_CONFLICT_RETRIES = 5
_CONFLICT_BACKOFF_SECONDS = 0.05
# How far to follow __cause__/__context__ when classifying an exception from a client library
# (s3fs wraps botocore errors, which wrap urllib3/aiohttp errors).
_MAX_CAUSE_DEPTH = 8
_LOCAL_SCHEME = "file"
_S3_SCHEME = "s3"
_MEMORY_SCHEME = "memory"
_EXCLUSIVE_SCHEMES = (_LOCAL_SCHEME, _S3_SCHEME, _MEMORY_SCHEME)
# A lakecore option (taken out of storage_options before they reach s3fs): the most seconds one
# S3 request, retries included, may take before it fails with StorageTimeoutError. Generous,
# because it must outlast botocore's and s3fs's own retries; it exists so that nothing hangs.
TIMEOUT_OPTION = "lakecore_timeout_seconds"
DEFAULT_S3_TIMEOUT_SECONDS = 300.0

# The storage options each scheme accepts. Unknown keys are refused before any I/O: a typo
# (``endpoint=`` for ``endpoint_url=``) would otherwise surface as a TypeError deep inside the
# client on first use, or worse, be silently ignored. These are s3fs's S3FileSystem arguments
# that can be given as text or JSON (not ``session``/``loop``), plus ``region`` as a shorthand.
_S3_OPTIONS: Final = frozenset(
    {
        "anon",
        "endpoint_url",
        "key",
        "secret",
        "token",
        "use_ssl",
        "client_kwargs",
        "requester_pays",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "version_aware",
        "config_kwargs",
        "s3_additional_kwargs",
        "username",
        "password",
        "cache_regions",
        "max_concurrency",
        "fixed_upload_size",
        "profile",
        "region",
    }
)
_OPTIONS_BY_SCHEME: Final[dict[str, frozenset[str]]] = {
    "s3": _S3_OPTIONS,
    "file": frozenset(),
    "memory": frozenset(),
}
# How text values from the command line are typed, by key (everything else stays a string).
_BOOLEAN_OPTIONS: Final = frozenset(
    {
        "anon",
        "use_ssl",
        "requester_pays",
        "default_fill_cache",
        "version_aware",
        "cache_regions",
        "fixed_upload_size",
    }
)
# Typed by their full key on a command line; the nested one is the S3 client's connection pool
# (see S3_MAX_POOL_CONNECTIONS), which botocore refuses as text.
_INTEGER_OPTIONS: Final = frozenset(
    {"default_block_size", "max_concurrency", "config_kwargs.max_pool_connections"}
)
_NESTED_OPTIONS: Final = frozenset({"client_kwargs", "config_kwargs", "s3_additional_kwargs"})

# os.link errors that mean "this file system has no hard links" (some FUSE and SMB mounts).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})

# memory:// lives in one process, so one process-wide lock makes check-then-write atomic.
_MEMORY_CREATE_LOCK = threading.Lock()
# Clients inherited across a fork are kept referenced, never used and never closed: closing
# them would run their finalisers against the parent's event loop, which does not exist here.
_ABANDONED_AFTER_FORK: list[object] = []
# Remote clients by (pid, thread, root, options): reused by every Storage of the same root and
# options in one thread (in any thread, for S3: the thread is 0 in the key). Bounded, least
# recently used out; an evicted client is just dropped.
_CLIENT_CACHE_SIZE = 64
_CLIENT_CACHE: OrderedDict[tuple[int, int, str, str], _Backend] = OrderedDict()
_CLIENT_CACHE_LOCK = threading.Lock()
_CLIENT_BUILD_LOCK = threading.Lock()
# Connections one process's S3 client may hold open: above the requests a process puts in
# flight at once (a listing's threads, root reads, a walk's prefetches), below what would
# exhaust file descriptors.
S3_MAX_POOL_CONNECTIONS: Final = 64


# One pool per process for requests that wait on the network (listings, root reads, node
# prefetches), kept across calls: its threads keep their storage clients, which are cached per
# thread, where a pool per call built new clients every time (about 0.1 CPU-s each). Only leaf
# requests go to it: a task in this pool never waits on another one, so it cannot deadlock.
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


@dataclass(frozen=True)
class FileInfo:
    """One file under the root."""

    path: str  # relative to the root, '/'-separated
    size: int
    mtime_millis: (
        int  # modification (S3: LastModified) time, epoch milliseconds; see UNKNOWN_MTIME_MILLIS
    )


# The modification time of a file whose store gave none (or one that does not parse): the last
# millisecond of year 9999. A file of unknown age counts as just written, so that no grace
# period ever passes for it and gc never deletes it: 0, the epoch, made it the oldest of all.
UNKNOWN_MTIME_MILLIS = 253_402_300_799_999


@dataclass(frozen=True)
class PathListing:
    """Files under a directory as columns (``Storage.list_paths``). ``sizes`` and
    ``mtimes_millis`` are None where the backend would pay a call per file to know them: a
    local file system needs a stat per file, which costs four times the directory read and
    which gc needs only for the few files nothing reaches. An object store's listing carries
    both for free."""

    paths: list[str]
    sizes: list[int] | None
    mtimes_millis: list[int] | None


@dataclass(frozen=True)
class ListedPage:
    """One response of a paged listing (``Storage.list_pages``): its files, in key order on an
    object store, and whether more pages follow."""

    files: list[FileInfo]
    more: bool


def _columns_of(infos: list[FileInfo]) -> PathListing:
    return PathListing(
        [i.path for i in infos], [i.size for i in infos], [i.mtime_millis for i in infos]
    )


# ---------------------------------------------------------------------------------------------
# Backends: they take already-checked relative paths and may raise anything; Storage turns
# their exceptions into lakecore errors.


class _Backend(Protocol):
    pid: int

    def read(self, rel: str) -> bytes: ...
    def read_range(self, rel: str, start: int, end: int) -> bytes: ...
    def size(self, rel: str) -> int: ...
    def write(self, rel: str, data: bytes, durable: bool = True) -> None: ...
    def sync(self) -> None: ...
    def create_exclusive(self, rel: str, data: bytes) -> bool: ...
    def exists(self, rel: str) -> bool: ...
    def info(self, rel: str) -> FileInfo: ...
    def list_under(self, dir_prefix: str, limit: int | None = None) -> list[FileInfo]: ...
    def list_pages(self, dir_prefix: str, limit: int) -> Iterator[ListedPage]: ...
    def list_paths(self, dir_prefix: str) -> PathListing: ...
    def list_top(self) -> list[FileInfo]: ...
    def first_files(self, limit: int) -> list[str]: ...
    def delete(self, rels: list[str], batch_size: int) -> list[str]: ...
    def clock_millis(self) -> int | None: ...


class _LocalBackend:
    """``file://`` roots through ``os``: temp file + fsync + link/replace."""

    def __init__(self, root_dir: str) -> None:
        self.pid = os.getpid()
        self._root_dir = root_dir  # absolute, ends in '/'
        self._real_root: str | None = None  # its realpath, found on first use

    def _abs(self, rel: str) -> str:
        return self._root_dir + rel

    def _below_root_without_links(self, rel_dir: str) -> bool:
        """Whether the directory ``rel_dir`` ('' or ending in '/') lies under the root through
        real directories only. A symlinked directory below the root (``0001 -> ../other/0001``)
        leads outside it: what is listed or deleted there is another tree's. The root's own path
        may hold links (``/tmp`` on some systems); only the part below it is held to this."""
        if not rel_dir:
            return True
        if self._real_root is None:  # once: gc asks for each of 4,096 hash directories
            self._real_root = os.path.realpath(self._root_dir)
        return os.path.realpath(self._root_dir + rel_dir) == os.path.join(
            self._real_root, rel_dir.rstrip("/")
        )

    def read(self, rel: str) -> bytes:
        with open(self._abs(rel), "rb") as f:
            return f.read()

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        with open(self._abs(rel), "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def _stat(self, rel: str) -> os.stat_result:
        st = os.stat(self._abs(rel))
        if not stat.S_ISREG(st.st_mode):
            raise FileNotFoundError(errno.ENOENT, "not a regular file", self._abs(rel))
        return st

    def size(self, rel: str) -> int:
        return self._stat(rel).st_size

    def info(self, rel: str) -> FileInfo:
        st = self._stat(rel)
        return FileInfo(rel, st.st_size, st.st_mtime_ns // 1_000_000)

    def exists(self, rel: str) -> bool:
        try:
            st = os.stat(self._abs(rel))
        except (FileNotFoundError, NotADirectoryError):
            return False
        return stat.S_ISREG(st.st_mode)

    def _write_temp(self, rel: str, data: bytes, fsync: bool = True) -> tuple[str, str]:
        """Write ``data`` to a fresh (fsynced) temp file next to ``rel``; return (tmp, dir)."""
        rel_dir = rel.rsplit("/", 1)[0] if "/" in rel else ""
        abs_dir = self._root_dir + rel_dir
        os.makedirs(abs_dir, exist_ok=True)
        tmp = self._abs(new_temp_path(rel_dir))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        os.close(fd)
        return tmp, abs_dir

    def write(self, rel: str, data: bytes, durable: bool = True) -> None:
        tmp, abs_dir = self._write_temp(rel, data, fsync=durable)
        try:
            os.replace(tmp, self._abs(rel))
        except BaseException:
            _unlink_quietly(tmp)
            raise
        if durable:
            _fsync_directory(abs_dir)

    def sync(self) -> None:
        _syncfs(self._root_dir)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        tmp, abs_dir = self._write_temp(rel, data)
        try:
            os.link(tmp, self._abs(rel))
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno in _NO_HARD_LINKS:
                raise StorageError(
                    f"the file system under {self._root_dir} does not support hard links, which "
                    f"lakecore needs for an atomic exclusive create ({exc}); put the lakehouse "
                    "on a POSIX file system or on S3"
                ) from exc
            raise
        finally:
            # The temp name is only a vehicle: after link (or its failure) it goes away.
            _unlink_quietly(tmp)
        # The link is the commit point; make the new name durable before reporting success.
        _fsync_directory(abs_dir)
        return True

    def list_under(self, dir_prefix: str, limit: int | None = None) -> list[FileInfo]:
        out: list[FileInfo] = []
        if self._below_root_without_links(dir_prefix):
            self._walk(dir_prefix, recursive=True, out=out, limit=limit)
        return out

    def list_pages(self, dir_prefix: str, limit: int) -> Iterator[ListedPage]:
        # A directory walk has no pages, nor any order to estimate from: one page.
        yield ListedPage(self.list_under(dir_prefix, limit), more=False)

    def list_paths(self, dir_prefix: str) -> PathListing:
        paths: list[str] = []
        if self._below_root_without_links(dir_prefix):
            self._walk_names(dir_prefix, paths)
        return PathListing(paths, None, None)

    def list_top(self) -> list[FileInfo]:
        out: list[FileInfo] = []
        self._walk("", recursive=False, out=out)
        return out

    def first_files(self, limit: int) -> list[str]:
        # Stops early: the root may be a large folder that is not a lakehouse at all.
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self._root_dir):
            dirnames.sort()
            rel_dir = dirpath[len(self._root_dir) :].strip("/")
            for name in sorted(filenames):
                found.append(f"{rel_dir}/{name}" if rel_dir else name)
                if len(found) >= limit:
                    return found
        return found

    def clock_millis(self) -> int | None:
        # A local file is dated by the kernel that writes it: this machine's clock, unless the
        # root is a shared mount, whose clock cannot be asked without writing a file.
        return None

    def _walk(
        self, rel_dir: str, recursive: bool, out: list[FileInfo], limit: int | None = None
    ) -> None:
        # rel_dir is '' or ends in '/'. Symlinks are neither followed nor reported: lakecore
        # never creates them, and following one could lead outside the root. With a limit the
        # walk stops once it has found more than that many files.
        if limit is not None and len(out) > limit:
            return
        try:
            entries = list(os.scandir(self._root_dir + rel_dir))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            rel = rel_dir + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if recursive:
                        self._walk(rel + "/", recursive, out, limit)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    out.append(FileInfo(rel, st.st_size, st.st_mtime_ns // 1_000_000))
            except FileNotFoundError:
                continue  # deleted while we were listing

    def _walk_names(self, rel_dir: str, out: list[str]) -> None:
        # ``_walk`` without the stat per file: the entry's type comes with the directory read.
        try:
            with os.scandir(self._root_dir + rel_dir) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            self._walk_names(rel_dir + entry.name + "/", out)
                        elif entry.is_file(follow_symlinks=False):
                            out.append(rel_dir + entry.name)
                    except FileNotFoundError:
                        continue  # deleted while we were listing
        except (FileNotFoundError, NotADirectoryError):
            return

    def delete(self, rels: list[str], batch_size: int) -> list[str]:
        deleted: list[str] = []
        checked_dirs: dict[str, bool] = {}
        for rel in rels:
            parent = rel[: rel.rfind("/") + 1]
            if parent not in checked_dirs:
                checked_dirs[parent] = self._below_root_without_links(parent)
            if not checked_dirs[parent]:
                continue  # through a symlinked directory: not this lakehouse's file to delete
            try:
                os.unlink(self._abs(rel))
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue  # not a file (or already gone): nothing this call deleted
            deleted.append(rel)
        # Empty hash directories are left in place: removing them would race with a writer
        # that has just created the directory and is about to put its temp file there.
        return deleted


class _S3Backend:
    """``s3://`` roots through s3fs and direct S3 API calls."""

    def __init__(self, fs: Any, bucket: str, key_prefix: str, timeout: float) -> None:
        self.pid = os.getpid()
        self._fs = fs
        # Passed to every call: fsspec cancels the request after this many seconds. botocore's
        # read timeout does not cover a PUT waiting for "100 Continue", which can hang forever.
        self._timeout = timeout
        self._bucket = bucket
        self._key_prefix = key_prefix  # '' or ends in '/'

    def _key(self, rel: str) -> str:
        return self._key_prefix + rel

    def _fs_path(self, rel: str) -> str:
        return f"{self._bucket}/{self._key(rel)}"

    def read(self, rel: str) -> bytes:
        # "bytes=0-" rather than no range: without one, s3fs first HEADs the object to decide
        # whether to fetch it in concurrent chunks, a second round trip (and, for large
        # objects, several GETs that could straddle an overwrite).
        return self.read_range(rel, 0, None)

    def read_range(self, rel: str, start: int, end: int | None) -> bytes:
        try:
            data: bytes = self._fs.cat_file(
                self._fs_path(rel), start=start, end=end, timeout=self._timeout
            )
        except Exception as exc:
            # 416: start is at or past the end of an existing (possibly empty) object.
            if _find_client_error(exc, codes=("InvalidRange",), statuses=(416,)):
                return b""
            raise
        return data

    def _head(self, rel: str) -> dict[str, Any]:
        head: dict[str, Any] = self._fs.call_s3(
            "head_object", Bucket=self._bucket, Key=self._key(rel), timeout=self._timeout
        )
        return head

    def size(self, rel: str) -> int:
        return int(self._head(rel)["ContentLength"])

    def info(self, rel: str) -> FileInfo:
        head = self._head(rel)
        return FileInfo(rel, int(head["ContentLength"]), _to_millis(head.get("LastModified")))

    def exists(self, rel: str) -> bool:
        try:
            self._head(rel)
        except FileNotFoundError:
            return False
        return True

    def write(self, rel: str, data: bytes, durable: bool = True) -> None:
        # A single PUT (multipart above 100 MiB) is atomic on S3: readers see old or new, and
        # durable once acknowledged.
        self._fs.pipe_file(self._fs_path(rel), data, timeout=self._timeout)

    def sync(self) -> None:
        pass

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._fs.pipe_file(self._fs_path(rel), data, mode="create", timeout=self._timeout)
                return True
            except Exception as exc:
                if isinstance(exc, FileExistsError) or _find_client_error(
                    exc, codes=("PreconditionFailed",), statuses=(412,)
                ):
                    return self._holds_exactly(rel, data)
                conflict = _find_client_error(
                    exc, codes=("ConditionalRequestConflict",), statuses=(409,)
                )
                if conflict and attempt + 1 < _CONFLICT_RETRIES:
                    time.sleep(_CONFLICT_BACKOFF_SECONDS * (attempt + 1))
                    continue
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _holds_exactly(self, rel: str, data: bytes) -> bool:
        """After a 412: True if the existing object is byte-for-byte ours (a retried PUT whose
        first attempt landed), False if someone else created it."""
        try:
            return bool(self.read(rel) == data)
        except FileNotFoundError:
            # Deleted between the 412 and now: it did exist, and it was not ours to claim.
            return False

    def _object_pages(self, prefix: str, delimiter: str | None) -> Iterator[ListedPage]:
        """``list_objects_v2`` a request at a time, each response as it comes (key order)."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
            if delimiter is not None:
                kwargs["Delimiter"] = delimiter
            if token is not None:
                kwargs["ContinuationToken"] = token
            page: dict[str, Any] = self._fs.call_s3(
                "list_objects_v2", timeout=self._timeout, **kwargs
            )
            files: list[FileInfo] = []
            for obj in page.get("Contents", []):
                key: str = obj["Key"]
                if not key.startswith(self._key_prefix):
                    continue  # cannot happen with a Prefix request; never trust it blindly
                rel = key[len(self._key_prefix) :]
                info = _file_info_or_none(rel, int(obj.get("Size", 0)), obj.get("LastModified"))
                if info is not None:
                    files.append(info)
            token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
            yield ListedPage(files, more=token is not None)
            if token is None:
                return

    def _list_objects(
        self, prefix: str, delimiter: str | None, limit: int | None = None
    ) -> list[FileInfo]:
        out: list[FileInfo] = []
        for page in self._object_pages(prefix, delimiter):
            out.extend(page.files)
            if limit is not None and len(out) > limit:
                break
        return out

    def list_pages(self, dir_prefix: str, limit: int) -> Iterator[ListedPage]:
        found = 0
        for page in self._object_pages(self._key_prefix + dir_prefix, None):
            found += len(page.files)
            yield page
            if found > limit:
                return

    def list_under(self, dir_prefix: str, limit: int | None = None) -> list[FileInfo]:
        return self._list_objects(self._key_prefix + dir_prefix, delimiter=None, limit=limit)

    def list_paths(self, dir_prefix: str) -> PathListing:
        return _columns_of(self.list_under(dir_prefix))

    def list_top(self) -> list[FileInfo]:
        return self._list_objects(self._key_prefix, delimiter="/")

    def first_files(self, limit: int) -> list[str]:
        page: dict[str, Any] = self._fs.call_s3(
            "list_objects_v2",
            timeout=self._timeout,
            Bucket=self._bucket,
            Prefix=self._key_prefix,
            MaxKeys=limit,
        )
        return [obj["Key"][len(self._key_prefix) :] for obj in page.get("Contents", [])][:limit]

    def clock_millis(self) -> int | None:
        # The Date of a response is the clock that dates the objects (Last-Modified), with the
        # fraction of its second dropped: rounded up again, or a file stored in the same second
        # as the answer would look younger than the answer (a grace of 0s kept it). A listing,
        # not a HEAD of the bucket: a policy may allow listing only under the root's prefix.
        page: dict[str, Any] = self._fs.call_s3(
            "list_objects_v2",
            timeout=self._timeout,
            Bucket=self._bucket,
            Prefix=self._key_prefix,
            MaxKeys=1,
        )
        date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        if not isinstance(date, str) or not _HTTP_DATE.fullmatch(date):
            return None
        try:
            return _to_millis(parse_s3_timestamp(date)) + 1000
        except (ValueError, OverflowError):  # the form of a date, not a date (31 Feb, hour 25)
            return None

    def delete(self, rels: list[str], batch_size: int) -> list[str]:
        # S3 reports a missing key as deleted, so these are the keys S3 acknowledged.
        size = min(batch_size, S3_MAX_DELETE_BATCH)
        deleted: list[str] = []
        failures: list[str] = []
        for i in range(0, len(rels), size):
            batch = rels[i : i + size]
            response: dict[str, Any] = self._fs.call_s3(
                "delete_objects",
                timeout=self._timeout,
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": self._key(r)} for r in batch], "Quiet": True},
            )
            errors = response.get("Errors", [])
            failures.extend(f"{e.get('Key')} ({e.get('Code')}: {e.get('Message')})" for e in errors)
            refused = {str(e.get("Key")) for e in errors}
            deleted.extend(r for r in batch if self._key(r) not in refused)
        if failures:
            raise _DeleteFailures(deleted, failures)
        return deleted


class _FsspecBackend:
    """Any other fsspec scheme; ``memory://`` gets a lock-based exclusive create."""

    def __init__(self, fs: Any, scheme: str, base: str) -> None:
        self.pid = os.getpid()
        self._fs = fs
        self._scheme = scheme
        self._base = base  # the root as the file system names it, ending in '/'

    def _p(self, rel: str) -> str:
        return self._base + rel

    def read(self, rel: str) -> bytes:
        data: bytes = self._fs.cat_file(self._p(rel))
        return data

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        data: bytes = self._fs.cat_file(self._p(rel), start=start, end=end)
        return data

    def _file_info(self, rel: str) -> dict[str, Any]:
        info: dict[str, Any] = self._fs.info(self._p(rel))
        if info.get("type") != "file":
            raise FileNotFoundError(errno.ENOENT, "not a file", self._p(rel))
        return info

    def size(self, rel: str) -> int:
        return int(self._file_info(rel)["size"])

    def info(self, rel: str) -> FileInfo:
        entries = self._infos([self._file_info(rel)], self._base)
        if not entries:
            raise FileNotFoundError(errno.ENOENT, "not a file", self._p(rel))
        return entries[0]

    def exists(self, rel: str) -> bool:
        try:
            self._file_info(rel)
        except FileNotFoundError:
            return False
        return True

    def write(self, rel: str, data: bytes, durable: bool = True) -> None:
        self._fs.pipe_file(self._p(rel), data)

    def sync(self) -> None:
        pass

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        if self._scheme != _MEMORY_SCHEME:
            raise AssertionError("Storage refuses exclusive create before reaching here")
        with _MEMORY_CREATE_LOCK:
            if self._fs.exists(self._p(rel)):
                return False
            self._fs.pipe_file(self._p(rel), data)
            return True

    def _infos(self, entries: Iterable[dict[str, Any]], under: str) -> list[FileInfo]:
        out: list[FileInfo] = []
        for info in entries:
            name: str = info.get("name", "")
            if info.get("type") != "file" or not name.startswith(under):
                continue  # directories, and anything not under the listed directory
            rel = name[len(self._base) :]
            mtime = (
                info.get("mtime")
                or info.get("LastModified")
                or info.get("last_modified")
                or info.get("updated")
                or info.get("created")
            )
            entry = _file_info_or_none(rel, int(info.get("size") or 0), mtime)
            if entry is not None:
                out.append(entry)
        return out

    def list_under(self, dir_prefix: str, limit: int | None = None) -> list[FileInfo]:
        # fsspec's find has no early stop: the limit is the caller's, the cost is all of it.
        under = self._base + dir_prefix
        try:
            found: dict[str, dict[str, Any]] = self._fs.find(under, detail=True)
        except FileNotFoundError:
            return []
        return self._infos(found.values(), under)

    def list_pages(self, dir_prefix: str, limit: int) -> Iterator[ListedPage]:
        yield ListedPage(self.list_under(dir_prefix, limit), more=False)

    def list_paths(self, dir_prefix: str) -> PathListing:
        return _columns_of(self.list_under(dir_prefix))

    def list_top(self) -> list[FileInfo]:
        try:
            entries: list[dict[str, Any]] = self._fs.ls(self._base, detail=True)
        except FileNotFoundError:
            return []
        return [i for i in self._infos(entries, self._base) if "/" not in i.path]

    def first_files(self, limit: int) -> list[str]:
        return [info.path for info in self.list_under("")[:limit]]

    def clock_millis(self) -> int | None:
        return None  # fsspec answers no response headers: the store's clock is not to be had

    def delete(self, rels: list[str], batch_size: int) -> list[str]:
        deleted: list[str] = []
        for rel in rels:
            try:
                self._fs.rm_file(self._p(rel))
            except FileNotFoundError:
                continue
            deleted.append(rel)
        return deleted


class _DeleteFailures(Exception):
    """Some keys of a batched delete were refused; carries what did succeed."""

    def __init__(self, deleted: list[str], failures: list[str]) -> None:
        super().__init__(f"{len(failures)} file(s) not deleted, e.g. {'; '.join(failures[:5])}")
        self.deleted = deleted
        self.failures = failures


# ---------------------------------------------------------------------------------------------
# Storage


class Storage:
    """Files of one lakehouse root, addressed by paths relative to it. See the module doc."""

    root_uri: str

    def __init__(self, root_uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._setup(root_uri, storage_options)

    def _setup(self, root_uri: str, storage_options: Mapping[str, Any] | None) -> None:
        self.root_uri = normalize_root_uri(root_uri)
        self._scheme, self._root_path = split_root_uri(self.root_uri)
        _refuse_an_unknown_scheme(self._scheme, self.root_uri)
        self._storage_options: dict[str, Any] = _checked_options(
            self._scheme, storage_options or {}
        )
        # Holds this thread's backend (and with it the fsspec client); never pickled.
        self._local = threading.local()

    # -- pickling: only the description travels, never a live client ---------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"root_uri": self.root_uri, "storage_options": self._storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["root_uri"], state["storage_options"])

    def __repr__(self) -> str:
        # Options may hold secrets; name only their keys.
        return f"Storage({self.root_uri!r}, options={sorted(self._storage_options)})"

    # -- public API -------------------------------------------------------------------------

    @property
    def scheme(self) -> str:
        return self._scheme

    @property
    def keeps_its_own_clock(self) -> bool:
        """True where the store dates its files by a clock of its own that ``clock_millis`` asks
        (S3); None from ``clock_millis`` there means its answer carried no readable date."""
        return self._scheme == _S3_SCHEME

    @property
    def waits_on_network(self) -> bool:
        """True when a request waits on the network (S3): several in flight then hide the
        latency. A local file system (or memory) answers at CPU speed, where threads only
        contend."""
        return self._scheme not in (_LOCAL_SCHEME, _MEMORY_SCHEME)

    def file_in_the_way(self) -> str | None:
        """For a local root: the path of a file that is the root or one of its folders (a
        mistyped path), else None. No lakehouse can be there, and saying "no lakehouse" or
        failing to write into it would point the operator elsewhere."""
        if self._scheme != _LOCAL_SCHEME:
            return None
        path = self._root_path.rstrip("/")
        while path and not os.path.exists(path):
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
        return path if path and os.path.isfile(path) else None

    def local_root_is_missing(self) -> bool:
        """True for a local root whose folder does not exist: a mistyped path, most likely."""
        return self._scheme == _LOCAL_SCHEME and not os.path.isdir(self._root_path)

    @property
    def storage_options(self) -> dict[str, Any]:
        """The options this Storage was made with (a copy), e.g. to open a sibling root."""
        return dict(self._storage_options)

    def uri(self, path: str) -> str:
        """The full URI of a path relative to the root."""
        return self.root_uri + check_relative_path(path)

    def fingerprint(self) -> str:
        """A stable identity of the store this root lives in, for keying local caches.

        The root URI plus, on S3, the endpoint (two servers can both have ``s3://b/lake``).
        Credentials are left out on purpose: rotating a key does not change the data."""
        endpoint = self._s3_endpoint() if self._scheme == _S3_SCHEME else None
        return self.root_uri if endpoint is None else f"{self.root_uri}#endpoint={endpoint}"

    def read(self, path: str) -> bytes:
        """All bytes of a file; ``NotFoundError`` if it does not exist."""
        uri = self.uri(path)
        try:
            return self._backend().read(path)
        except Exception as exc:
            self._raise_translated(exc, uri, "read", reading=True)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of a file, cut short at its end (like slicing)."""
        uri = self.uri(path)
        _check_range(uri, start, end)
        if start == end:
            if not self.exists(path):
                raise NotFoundError(f"file {uri} does not exist")
            return b""
        try:
            return self._backend().read_range(path, start, end)
        except Exception as exc:
            self._raise_translated(exc, uri, f"read bytes {start}..{end} of", reading=True)

    def size(self, path: str) -> int:
        """Size in bytes; ``NotFoundError`` if the file does not exist."""
        uri = self.uri(path)
        try:
            return self._backend().size(path)
        except Exception as exc:
            self._raise_translated(exc, uri, "get the size of", reading=True)

    def exists(self, path: str) -> bool:
        """True when ``path`` is a file (a directory or prefix is not)."""
        uri = self.uri(path)
        try:
            return self._backend().exists(path)
        except Exception as exc:
            self._raise_translated(exc, uri, "check the existence of")

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Create or overwrite a file; readers see the old or the new bytes, never a mix.

        ``durable=False`` skips the local fsyncs: the caller promises a ``sync()`` before
        anything that makes the file reachable (many node files, then one sync, then the root)."""
        uri = self.uri(path)
        _check_data(uri, data)
        try:
            self._backend().write(path, data, durable)
        except Exception as exc:
            self._raise_translated(exc, uri, "write")

    def sync(self) -> None:
        """Make every earlier ``write(durable=False)`` durable (local disks; a no-op on S3,
        where an acknowledged PUT is durable)."""
        try:
            self._backend().sync()
        except Exception as exc:
            self._raise_translated(exc, self.root_uri, "sync")

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Create a file that must not exist; ``AlreadyExistsError`` if it does.

        Atomic in content: the file appears with all of ``data`` or not at all."""
        uri = self.uri(path)
        _check_data(uri, data)
        if self._scheme not in _EXCLUSIVE_SCHEMES:
            raise LakecoreError(
                f"exclusive create is not supported for scheme '{self._scheme}://' (creating "
                f"{uri}); lakecore commits need file://, s3:// or memory://"
            )
        try:
            created = self._backend().create_exclusive(path, data)
        except Exception as exc:
            self._raise_translated(exc, uri, "exclusively create")
        if not created:
            raise AlreadyExistsError(f"file {uri} already exists")

    def list(self, prefix: str = "", limit: int | None = None) -> list[FileInfo]:
        """Every file under ``root/prefix/``, recursively, with paths relative to the root.

        ``prefix`` is a directory ('' for the whole root); ``a`` and ``a/`` both mean the
        directory ``a/``, never ``ab/``. Directory markers and directories are not files.
        With ``limit`` the listing may stop as soon as it has found more than ``limit`` files
        (on S3 a page holds 1,000): a result longer than ``limit`` means "more than that", not
        everything."""
        dir_prefix = self._dir_prefix(prefix)
        try:
            return self._backend().list_under(dir_prefix, limit)
        except Exception as exc:
            self._raise_translated(exc, self.root_uri + dir_prefix, "list")

    @staticmethod
    def _dir_prefix(prefix: str) -> str:
        # '' for the whole root; 'a' and 'a/' both mean the directory 'a/', never 'ab/'.
        if prefix == "":
            return ""
        return check_relative_path(prefix[:-1] if prefix.endswith("/") else prefix) + "/"

    def list_pages(self, prefix: str = "", limit: int | None = None) -> Iterator[ListedPage]:
        """``list`` a response at a time, so that a caller can stop between requests: on an
        object store each page is one request, in key order; a local walk is one page. With
        ``limit`` the pages end once more than ``limit`` files have come."""
        dir_prefix = self._dir_prefix(prefix)
        pages = self._backend().list_pages(dir_prefix, sys.maxsize if limit is None else limit)
        while True:
            try:
                page = next(pages)
            except StopIteration:
                return
            except Exception as exc:
                self._raise_translated(exc, self.root_uri + dir_prefix, "list")
            yield page

    def list_paths(self, prefix: str = "") -> PathListing:
        """``list`` as columns, without what the backend would pay a call per file for
        (``PathListing``): on a local file system, the paths alone."""
        dir_prefix = self._dir_prefix(prefix)
        try:
            return self._backend().list_paths(dir_prefix)
        except Exception as exc:
            self._raise_translated(exc, self.root_uri + dir_prefix, "list")

    def info(self, path: str) -> FileInfo:
        """Size and modification time of one file; ``NotFoundError`` if it does not exist."""
        uri = self.uri(path)
        try:
            return self._backend().info(path)
        except Exception as exc:
            self._raise_translated(exc, uri, "get the size and time of", reading=True)

    def first_files(self, limit: int = 5) -> builtins.list[str]:
        """Up to ``limit`` paths of files anywhere under the root, cheaply (one request on S3);
        an empty list means the root holds nothing."""
        try:
            return self._backend().first_files(limit)
        except Exception as exc:
            self._raise_translated(exc, self.root_uri, "list")

    def clock_millis(self) -> int | None:
        """The store's clock now, as it dates the files it holds (epoch millis; on S3 the Date of
        a one-key listing of the root, rounded up to its next whole second), or None where that
        clock cannot be read without writing a file: a local root (this machine's kernel dates
        its files) and the generic fsspec schemes."""
        try:
            return self._backend().clock_millis()
        except Exception as exc:
            self._raise_translated(exc, self.root_uri, "list")

    def list_top_level(self) -> builtins.list[FileInfo]:
        """Files directly under the root, not in subdirectories."""
        try:
            return self._backend().list_top()
        except Exception as exc:
            self._raise_translated(exc, self.root_uri, "list")

    def delete(
        self,
        paths: Iterable[str],
        batch_size: int = 1000,
        deleted: builtins.list[str] | None = None,
    ) -> int:
        """Delete files in batches; missing files are ignored. Returns how many were deleted,
        and appends their paths to ``deleted`` when given (also when some batch failed).

        A file that was already gone (another job deleted it first) is not counted: reports
        must not claim another run's deletes. On S3 the count includes keys that were already
        missing (S3 acknowledges a missing key as deleted and does not tell them apart).
        Every path is checked before anything is deleted, so one bad path deletes nothing."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(paths, str):
            raise InvalidArgumentError("delete takes an iterable of paths, not a single string")
        rels = list(dict.fromkeys(check_relative_path(p) for p in paths))
        if not rels:
            return 0
        try:
            done = self._backend().delete(rels, batch_size)
        except _DeleteFailures as exc:
            if deleted is not None:
                deleted.extend(exc.deleted)
            raise StorageError(
                f"delete under {self.root_uri}: {len(exc.deleted)} file(s) deleted, but {exc}"
            ) from exc
        except Exception as exc:
            self._raise_translated(exc, self.root_uri, f"delete {len(rels)} file(s) under")
        if deleted is not None:
            deleted.extend(done)
        return len(done)

    def _raise_translated(
        self, exc: Exception, uri: str, action: str, reading: bool = False
    ) -> NoReturn:
        """``_raise_translated`` with this storage's overall deadline, for its timeout line."""
        deadline = self._timeout_seconds() if self._scheme == _S3_SCHEME else None
        _raise_translated(exc, uri, action, reading, deadline_seconds=deadline)

    # -- the per-process, per-thread client -------------------------------------------------

    def _backend(self) -> _Backend:
        backend: _Backend | None = getattr(self._local, "backend", None)
        pid = os.getpid()
        if backend is not None and backend.pid == pid:
            return backend
        if backend is not None:
            _ABANDONED_AFTER_FORK.append(backend)  # inherited from the parent; see above
        backend = self._local_backend() if self._scheme == _LOCAL_SCHEME else self._cached_client()
        self._local.backend = backend
        return backend

    def _local_backend(self) -> _Backend:
        return _LocalBackend(self._root_path)

    def _cached_client(self) -> _Backend:
        # The endpoint may come from the environment, which can change between two Storages.
        endpoint = self._s3_endpoint() if self._scheme == _S3_SCHEME else None
        # An S3 client serves every thread (see the module doc); other fsspec file systems may
        # not be thread-safe, so those stay one per thread.
        thread = 0 if self._scheme == _S3_SCHEME else threading.get_ident()
        key = (
            os.getpid(),
            thread,
            self.root_uri,
            json.dumps([self._storage_options, endpoint], sort_keys=True, default=repr),
        )
        cached = _cached_backend(key)
        if cached is not None:
            return cached
        # Built under a lock: threads that meet an uncached S3 client at once (the 16 root
        # readers of a job's first step) would otherwise each build one.
        with _CLIENT_BUILD_LOCK:
            cached = _cached_backend(key)
            if cached is not None:
                return cached
            backend = self._new_backend()
            with _CLIENT_CACHE_LOCK:
                _CLIENT_CACHE[key] = backend
                while len(_CLIENT_CACHE) > _CLIENT_CACHE_SIZE:
                    _CLIENT_CACHE.popitem(last=False)
        return backend

    def _new_backend(self) -> _Backend:
        import fsspec

        if self._scheme == _S3_SCHEME:
            options = self._s3_options()
            endpoint = self._s3_endpoint()
            if endpoint is not None:
                _refuse_an_endpoint_without_scheme(self.root_uri, endpoint)
                _refuse_an_endpoint_nothing_answers(
                    self.root_uri, endpoint, options["config_kwargs"]
                )
            # s3fs makes a session from the options it does not know (``profile``) unless given one.
            options["session"] = _s3_session(options.pop("profile", None))
            fs = fsspec.filesystem(_S3_SCHEME, **options)
            bucket, _, key_prefix = self._root_path.partition("/")
            return _S3Backend(fs, bucket, key_prefix, self._timeout_seconds())
        options = {**self._fs_options(), "skip_instance_cache": True}
        fs = fsspec.filesystem(self._scheme, **options)
        base = fs._strip_protocol(self.root_uri).rstrip("/") + "/"
        return _FsspecBackend(fs, self._scheme, base)

    def _s3_endpoint(self) -> str | None:
        client_kwargs = self._storage_options.get("client_kwargs") or {}
        endpoint = client_kwargs.get("endpoint_url") or self._storage_options.get("endpoint_url")
        if endpoint:
            return str(endpoint)
        # The standard variables, read in the process that uses the client (an executor's
        # environment may differ from the driver's).
        env = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return env or None

    def _fs_options(self) -> dict[str, Any]:
        """The options the fsspec file system gets: lakecore's own keys taken out."""
        return {k: v for k, v in self._storage_options.items() if k != TIMEOUT_OPTION}

    def _timeout_seconds(self) -> float:
        value = self._storage_options.get(TIMEOUT_OPTION, DEFAULT_S3_TIMEOUT_SECONDS)
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = -1.0
        if not seconds > 0:
            raise InvalidArgumentError(
                f"storage option {TIMEOUT_OPTION}={value!r} for {self.root_uri} must be a "
                "positive number of seconds"
            )
        return seconds

    def _s3_options(self) -> dict[str, Any]:
        options = self._fs_options()
        endpoint = self._s3_endpoint()
        if endpoint is not None and "endpoint_url" not in options:
            options["client_kwargs"] = {
                **(options.get("client_kwargs") or {}),
                "endpoint_url": endpoint,
            }
        # Key and secret, when not in the options, come from botocore's usual chain
        # (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles, instance roles).
        options["skip_instance_cache"] = True
        options["config_kwargs"] = {
            "max_pool_connections": S3_MAX_POOL_CONNECTIONS,
            **(options.get("config_kwargs") or {}),
        }
        return options


# ---------------------------------------------------------------------------------------------
# Helpers


# S3's timestamps: in XML bodies UTC ISO 8601, whole seconds or a fraction; in headers
# (Last-Modified, Date) the HTTP date of RFC 9110 (what the fast paths parse).
_S3_ISO_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")
_HTTP_DATE: Final = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d{2}:\d{2}:\d{2} GMT"
)


def parse_s3_timestamp(value: Any) -> datetime:
    """A timestamp of an S3 response as botocore's parser gives it (an aware datetime in
    UTC): S3's ISO 8601 form by ``datetime.fromisoformat`` and an HTTP date by the standard
    library's ``parsedate_to_datetime`` (1-5 us, where dateutil takes 100-160), anything else
    (epoch seconds, other forms) by botocore's own parser."""
    if isinstance(value, str):
        if _S3_ISO_TIMESTAMP.fullmatch(value):
            return datetime.fromisoformat(value)
        if _HTTP_DATE.fullmatch(value):
            from email.utils import parsedate_to_datetime

            return parsedate_to_datetime(value)
    from botocore.utils import parse_timestamp

    parsed: datetime = parse_timestamp(value)
    return parsed


def _s3_session(profile: str | None) -> Any:
    """An aiobotocore session for one S3 client (``profile`` as s3fs would give it), its
    responses' timestamps parsed by ``parse_s3_timestamp``."""
    from aiobotocore.session import AioSession

    session = AioSession(profile=profile)
    session.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=parse_s3_timestamp
    )
    return session


ENDPOINT_PROBE_TIMEOUT_SECONDS: Final = 3.0


def _refuse_an_endpoint_without_scheme(root_uri: str, endpoint: str) -> None:
    """botocore refuses ``127.0.0.1:9000`` only as "Invalid endpoint", which came out as a
    storage failure (exit 4, retried by the DAGs): it is a bad option (exit 2)."""
    scheme = endpoint.split("://", 1)[0].lower() if "://" in endpoint else ""
    if scheme not in ("http", "https"):
        raise InvalidArgumentError(
            f"S3 endpoint {endpoint!r} for {root_uri} must start with http:// or https:// (storage option "
            f"endpoint_url, or AWS_ENDPOINT_URL), e.g. http://{endpoint.split('://')[-1]}"
        )


def _refuse_an_endpoint_nothing_answers(
    root_uri: str, endpoint: str, config_kwargs: Mapping[str, Any]
) -> None:
    """One TCP connect to an explicit S3 endpoint; StorageError when nothing can answer there.

    Only definite answers count: refused, a host name that does not resolve, no route. A probe
    that times out decides nothing (a slow network; botocore has its own timeouts). Skipped
    when a proxy carries the requests (botocore's ``proxies``, or ``HTTP(S)_PROXY`` not
    bypassed by ``NO_PROXY``): then the endpoint need not be reachable from here."""
    import urllib.parse
    import urllib.request

    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    host = parsed.hostname
    if not host or config_kwargs.get("proxies"):
        return
    if parsed.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:  # a port that is not a number: botocore says so in its own words
        return
    reason: OSError
    try:
        socket.create_connection((host, port), timeout=ENDPOINT_PROBE_TIMEOUT_SECONDS).close()
    except (ConnectionRefusedError, socket.gaierror) as exc:
        reason = exc
    except OSError as exc:
        if exc.errno not in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return  # a timeout, or something botocore may yet get past
        reason = exc
    else:
        return
    raise StorageError(
        f"could not reach {root_uri}: nothing answers at the S3 endpoint {endpoint} ({type(reason).__name__}: "
        f"{reason}); check the endpoint (storage option endpoint_url, or AWS_ENDPOINT_URL) and that the server is up"
    ) from reason


def _cached_backend(key: tuple[int, int, str, str]) -> _Backend | None:
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


def accepted_storage_options(scheme: str) -> frozenset[str] | None:
    """The option keys a scheme accepts (lakecore's own included), or None when lakecore cannot
    know them (a scheme it has no backend of its own for: fsspec's file system decides)."""
    known = _OPTIONS_BY_SCHEME.get(scheme)
    return None if known is None else known | {TIMEOUT_OPTION}


def _checked_options(scheme: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a dict, with ``region`` folded into ``client_kwargs``; raises
    ``InvalidArgumentError`` naming the accepted keys when a key is unknown for ``scheme``."""
    if not isinstance(options, Mapping):
        raise InvalidArgumentError(
            f"storage options must be a mapping, not {type(options).__name__}"
        )
    accepted = accepted_storage_options(scheme)
    if accepted is not None:
        unknown = sorted(str(k) for k in options if k not in accepted)
        if unknown:
            listed = ", ".join(sorted(accepted))
            raise InvalidArgumentError(
                f"unknown storage option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for {scheme}:// "
                f"(accepted: {listed})"
            )
    out = dict(options)
    if "region" in out:
        out["client_kwargs"] = {
            **(out.get("client_kwargs") or {}),
            "region_name": out.pop("region"),
        }
    for key in _NESTED_OPTIONS & out.keys():
        if not isinstance(out[key], Mapping):
            raise InvalidArgumentError(
                f"storage option {key} must be a mapping (give {key}.NAME=VALUE)"
            )
    return out


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """The one parser of ``KEY=VALUE`` storage options from a command line or a job.

    ``client_kwargs.NAME=VALUE`` (and ``config_kwargs.``, ``s3_additional_kwargs.``) set one
    entry of a nested option; booleans (``anon=true``) and integers are typed by key. Which keys
    a scheme accepts is checked when the options reach ``Storage``."""
    options: dict[str, Any] = {}
    for item in pairs:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgumentError(f"storage option {item!r} is not KEY=VALUE")
        value: Any = text
        if key in _BOOLEAN_OPTIONS:
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise InvalidArgumentError(f"storage option {key}={text!r} must be true or false")
            value = text.lower() in ("true", "1", "yes")
        elif key in _INTEGER_OPTIONS:
            if not text.isdigit():
                raise InvalidArgumentError(f"storage option {key}={text!r} must be a whole number")
            value = int(text)
        head, dot, name = key.partition(".")
        if dot:
            if head not in _NESTED_OPTIONS or not name:
                raise InvalidArgumentError(
                    f"storage option {key!r}: only {', '.join(sorted(_NESTED_OPTIONS))} take .NAME"
                )
            options.setdefault(head, {})[name] = value
        else:
            options[key] = value
    return options


def _check_data(uri: str, data: bytes) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"data for {uri} must be bytes, got {type(data).__name__}")


def _check_range(uri: str, start: int, end: int) -> None:
    for value in (start, end):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"byte range of {uri} must be integers, got {value!r}")
    if not 0 <= start <= end:
        raise InvalidArgumentError(f"byte range [{start}, {end}) of {uri} is not 0 <= start <= end")


def _file_info_or_none(rel: str, size: int, mtime: Any) -> FileInfo | None:
    """A FileInfo for a listed name, or None for names lakecore cannot address safely:
    directory markers (``dir/``) and keys such as ``a//b`` or ``../x`` that an object store
    allows but that are not qualified relative paths."""
    try:
        check_relative_path(rel)
    except LakecoreError:
        return None
    return FileInfo(rel, size, _to_millis(mtime))


def _to_millis(value: Any) -> int:
    """A listing's or a HEAD's time as epoch milliseconds; ``UNKNOWN_MTIME_MILLIS`` when there is
    none that can be read."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1000)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return UNKNOWN_MTIME_MILLIS
    return UNKNOWN_MTIME_MILLIS


def _unlink_quietly(path: str) -> None:
    # Best effort: a leftover temp file is an orphan that gc removes.
    with contextlib.suppress(OSError):
        os.unlink(path)


def _syncfs(path: str) -> None:
    """Flush the file system holding ``path``: one syncfs(2) instead of an fsync per file."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()  # no syncfs here: sync everything (slower, same guarantee)


def _fsync_directory(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # platforms without directory fds: nothing more we can do
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories (EINVAL); the data is synced
    finally:
        os.close(fd)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps, following __cause__ then __context__."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < _MAX_CAUSE_DEPTH and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _find_client_error(
    exc: BaseException, codes: tuple[str, ...], statuses: tuple[int, ...]
) -> bool:
    """True when a botocore ClientError with one of these codes or HTTP statuses is in the chain."""
    for e in _causes(exc):
        response = getattr(e, "response", None)
        if not isinstance(response, dict):
            continue
        error = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        if error.get("Code") in codes or meta.get("HTTPStatusCode") in statuses:
            return True
    return False


def _timeout_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [TimeoutError]  # also socket.timeout, asyncio's, fsspec's
    try:
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

        types += [ConnectTimeoutError, ReadTimeoutError]
    except ImportError:  # pragma: no cover - botocore comes with s3fs
        pass
    return tuple(types)


def _is_timeout(exc: BaseException) -> bool:
    timeout_types = _timeout_types()
    for e in _causes(exc):
        if isinstance(e, timeout_types):
            return True
        if isinstance(e, OSError) and e.errno == errno.ETIMEDOUT:
            return True
    return False


# What a store answers when it refuses a request outright: it did not take effect, and a retry
# fails the same way until space is freed or access granted.
_REFUSING_ERRNOS: Final = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG}
)
_REFUSING_S3_CODES: Final = (
    "AccessDenied",
    "AllAccessDisabled",
    "AccountProblem",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "EntityTooLarge",
)


def _refusal(exc: BaseException) -> str | None:
    """The cause, as a person reads it (``No space left on device``), when the store refused the
    request outright; None when the failure may be passing or may have taken effect."""
    for e in _causes(exc):
        if isinstance(e, OSError) and e.errno in _REFUSING_ERRNOS:
            return e.strerror or os.strerror(e.errno)
        if isinstance(e, PermissionError):  # s3fs's translation of a 403 carries no errno
            return f"Permission denied ({_capped(e)})"
    if _find_client_error(exc, codes=_REFUSING_S3_CODES, statuses=(403,)):
        return f"access denied ({_capped(exc)})"
    return None


def _is_unreachable(exc: BaseException) -> bool:
    """True when no connection to the server could be made at all (refused, no route, a name
    that does not resolve): most often a wrong endpoint or a server that is down. Checked after
    timeouts, which may or may not have taken effect."""
    types: list[type[BaseException]] = [ConnectionRefusedError, socket.gaierror]
    try:
        from botocore.exceptions import EndpointConnectionError

        types.append(EndpointConnectionError)
    except ImportError:  # pragma: no cover - botocore comes with s3fs
        pass
    return any(isinstance(e, tuple(types)) for e in _causes(exc))


def _refuse_an_unknown_scheme(scheme: str, root_uri: str) -> None:
    """InvalidArgumentError (exit 2) for a scheme no fsspec file system is known for (``foo://``,
    a typo of ``s3://``): a failure there would otherwise come from the first request, as a
    storage failure (exit 4) that a scheduler retries."""
    from fsspec.registry import known_implementations, registry

    if scheme in known_implementations or scheme in registry:
        return
    raise InvalidLocationError(
        f"{root_uri}: no file system is known for {scheme}:// (a typo? lakecore reads file://, s3:// and any "
        "scheme an installed fsspec package provides, such as gs:// with gcsfs)"
    )


# Actions that change the store: a timeout may or may not have taken effect. The others only
# look, and a timeout there changed nothing.
_CHANGING_ACTIONS: Final = ("write", "exclusively create", "delete", "sync")


def _raise_translated(
    exc: Exception,
    uri: str,
    action: str,
    reading: bool = False,
    *,
    deadline_seconds: float | None = None,
) -> NoReturn:
    """Re-raise a backend failure as a lakecore error naming ``uri``; the original is chained.

    ``reading``: the operation reads one file, so a directory (or a file where a directory
    should be) on its path means that file does not exist. ``deadline_seconds``: the overall
    deadline of the request (``TIMEOUT_OPTION``), named when it is what ran out."""
    if isinstance(exc, LakecoreError):
        raise exc
    if _is_timeout(exc):
        if type(exc).__name__ == "FSTimeoutError" and deadline_seconds is not None:
            # fsspec's overall deadline, which has no message of its own.
            cause = (
                f"the store did not answer within {deadline_seconds:g} s (storage option "
                f"{TIMEOUT_OPTION})"
            )
        else:
            cause = f"{type(exc).__name__}: {_capped(exc)}"
        if action.startswith(_CHANGING_ACTIONS):
            raise StorageTimeoutError(
                f"timed out trying to {action} {uri}: {cause}; it may or may not have taken "
                "effect, check before retrying"
            ) from exc
        raise StorageTimeoutError(
            f"timed out trying to {action} {uri}: {cause}; nothing was changed"
        ) from exc
    if isinstance(exc, ImportError) or (
        isinstance(exc, OSError) and str(exc).startswith("Unable to load lib")
    ):
        # fsspec knows the scheme but its package or native library is missing (gs:// without
        # gcsfs; hdfs:// without a Hadoop client, whose error lists every path it tried):
        # setup, not a storage failure a retry could fix.
        raise InvalidArgumentError(
            f"cannot open {uri}: {_capped(exc)} (this installation has no working file system for "
            f"{uri.split('://')[0]}://)"
        ) from exc
    if reading and isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError)):
        raise NotFoundError(f"file {uri} does not exist") from exc
    if isinstance(exc, FileNotFoundError):
        # Not the file itself but something it needs: a bucket, a container, the root.
        raise NotFoundError(f"could not {action} {uri}: {exc} (does the bucket exist?)") from exc
    refusal = _refusal(exc)
    if refusal is not None:
        raise StorageRefusedError(f"could not {action} {uri}: {refusal}") from exc
    if _is_unreachable(exc):
        raise StorageError(
            f"could not {action} {uri}: the storage server cannot be reached ({type(exc).__name__}: {exc}); "
            "check the endpoint (storage option endpoint_url, or AWS_ENDPOINT_URL) and that the server is up"
        ) from exc
    missing_profile = next((e for e in _causes(exc) if type(e).__name__ == "ProfileNotFound"), None)
    if (
        missing_profile is not None
    ):  # botocore's: a name the AWS config lacks, a setting a retry cannot fix
        raise InvalidArgumentError(
            f"could not {action} {uri}: ProfileNotFound: {_capped(missing_profile)}; check the storage option "
            "profile (or AWS_PROFILE) against the AWS config (~/.aws/config, or AWS_CONFIG_FILE)"
        ) from exc
    if (
        type(exc).__name__ == "NoCredentialsError"
    ):  # botocore's, found by name: botocore is optional
        raise StorageError(
            f"could not {action} {uri}: NoCredentialsError: no AWS credentials were found; give them to this "
            "process (and the executors): AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance "
            "role, or --storage-option key=... secret=..."
        ) from exc
    raise StorageError(f"could not {action} {uri}: {type(exc).__name__}: {_capped(exc)}") from exc


# An error line is read by a person and kept by a scheduler: a backend's message beyond this
# (a native loader's list of every path it tried ran to 15 KB) is cut, the original chained.
_MESSAGE_MAX_CHARS: Final = 400


def _capped(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) <= _MESSAGE_MAX_CHARS:
        return text
    return f"{text[:_MESSAGE_MAX_CHARS]}... ({len(text) - _MESSAGE_MAX_CHARS:,} more characters)"
