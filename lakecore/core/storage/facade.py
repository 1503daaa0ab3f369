"""``Storage``: the files of one lakehouse root, and the one door to every backend.

``Storage(root_uri, storage_options)`` reads, writes, exclusively creates, lists and deletes
files named by paths *relative to the root*. Every path goes through
``locations.check_relative_path`` before any I/O, so nothing outside the root is ever read,
written, listed or deleted, whatever a (possibly corrupt or hostile) stored location says.

The backend is chosen by the root's scheme from ``SCHEMES`` (``file://``: ``local``,
``s3://``: ``s3``, ``memory://``: ``generic``; any other scheme an installed fsspec package
provides: ``generic``, without exclusive create). Every failure of a backend leaves as a
lakecore error (``translate``). A ``Storage`` pickles as its root and options alone
(``clients``), so it travels to Spark executors.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from lakecore.core.locations import check_relative_path, normalize_root_uri, split_root_uri
from lakecore.core.storage.backend import Backend, DeleteFailures, FileInfo, ListedPage, PathListing
from lakecore.core.storage.clients import abandon, cached_client
from lakecore.core.storage.generic import MEMORY_SCHEME, open_fsspec
from lakecore.core.storage.local import LocalBackend
from lakecore.core.storage.options import checked_options, timeout_seconds
from lakecore.core.storage.s3 import S3_MAX_DELETE_BATCH, open_s3, s3_endpoint
from lakecore.core.storage.translate import raise_translated
from lakecore.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidLocationError,
    LakecoreError,
    NotFoundError,
    StorageError,
)

LOCAL_SCHEME = "file"
S3_SCHEME = "s3"


@dataclass(frozen=True)
class SchemeKind:
    """How ``Storage`` serves the roots of one scheme."""

    open_backend: Callable[[str, str, Mapping[str, Any]], Backend]
    # Whether its exclusive create is atomic (a commit needs it).
    exclusive_create: bool
    # Whether a request waits on the network: several in flight then hide the latency.
    waits_on_network: bool
    # Clients: "none" (cheap, one per thread), "thread" (cached per thread: fsspec file systems
    # may not be thread-safe) or "process" (one for every thread: lakecore.core.storage.s3).
    client_cache: str
    # Whether every request carries the overall deadline of options.TIMEOUT_OPTION.
    has_deadline: bool = False
    # Whether the store dates its files by a clock of its own that clock_millis asks.
    keeps_its_own_clock: bool = False
    # The endpoint the options name: part of the store's identity (fingerprint, client key).
    endpoint: Callable[[Mapping[str, Any]], str | None] | None = None


def _open_local(root_uri: str, root_path: str, options: Mapping[str, Any]) -> Backend:
    return LocalBackend(root_path)


SCHEMES: dict[str, SchemeKind] = {
    LOCAL_SCHEME: SchemeKind(
        _open_local, exclusive_create=True, waits_on_network=False, client_cache="none"
    ),
    S3_SCHEME: SchemeKind(
        open_s3,
        exclusive_create=True,
        waits_on_network=True,
        client_cache="process",
        has_deadline=True,
        keeps_its_own_clock=True,
        endpoint=s3_endpoint,
    ),
    MEMORY_SCHEME: SchemeKind(
        open_fsspec, exclusive_create=True, waits_on_network=False, client_cache="thread"
    ),
}
# Any other scheme an installed fsspec package provides (gs://, az://, ...): read, write, list
# and delete, but no commit (no atomic exclusive create).
OTHER_FSSPEC_SCHEME = SchemeKind(
    open_fsspec, exclusive_create=False, waits_on_network=True, client_cache="thread"
)


class Storage:
    """Files of one lakehouse root, addressed by paths relative to it. See the module doc."""

    root_uri: str

    def __init__(self, root_uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._setup(root_uri, storage_options)

    def _setup(self, root_uri: str, storage_options: Mapping[str, Any] | None) -> None:
        self.root_uri = normalize_root_uri(root_uri)
        self._scheme, self._root_path = split_root_uri(self.root_uri)
        _refuse_an_unknown_scheme(self._scheme, self.root_uri)
        self._kind = SCHEMES.get(self._scheme, OTHER_FSSPEC_SCHEME)
        self._storage_options: dict[str, Any] = checked_options(self._scheme, storage_options or {})
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
        return self._kind.keeps_its_own_clock

    @property
    def waits_on_network(self) -> bool:
        """True when a request waits on the network (S3): several in flight then hide the
        latency. A local file system (or memory) answers at CPU speed, where threads only
        contend."""
        return self._kind.waits_on_network

    def file_in_the_way(self) -> str | None:
        """For a local root: the path of a file that is the root or one of its folders (a
        mistyped path), else None. No lakehouse can be there, and saying "no lakehouse" or
        failing to write into it would point the operator elsewhere. Anything that is not a
        folder counts (a device such as /dev/null, a FIFO): an export there committed its
        record and then failed on its first write."""
        if self._scheme != LOCAL_SCHEME:
            return None
        path = self._root_path.rstrip("/")
        while path and not os.path.exists(path):
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
        return path if path and not os.path.isdir(path) else None

    def local_root_is_missing(self) -> bool:
        """True for a local root whose folder does not exist: a mistyped path, most likely."""
        return self._scheme == LOCAL_SCHEME and not os.path.isdir(self._root_path)

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
        endpoint = self._kind.endpoint(self._storage_options) if self._kind.endpoint else None
        return self.root_uri if endpoint is None else f"{self.root_uri}#endpoint={endpoint}"

    def read(self, path: str) -> bytes:
        """All bytes of a file; ``NotFoundError`` if it does not exist."""
        uri = self.uri(path)
        try:
            return self._backend().read(path)
        except Exception as exc:
            self._raise(exc, uri, "read", reading=True)

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
            self._raise(exc, uri, f"read bytes {start}..{end} of", reading=True)

    def size(self, path: str) -> int:
        """Size in bytes; ``NotFoundError`` if the file does not exist."""
        uri = self.uri(path)
        try:
            return self._backend().size(path)
        except Exception as exc:
            self._raise(exc, uri, "get the size of", reading=True)

    def exists(self, path: str) -> bool:
        """True when ``path`` is a file (a directory or prefix is not)."""
        uri = self.uri(path)
        try:
            return self._backend().exists(path)
        except Exception as exc:
            self._raise(exc, uri, "check the existence of")

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Create or overwrite a file; readers see the old or the new bytes, never a mix.

        ``durable=False`` skips the local fsyncs: the caller promises a ``sync()`` before
        anything that makes the file reachable (many node files, then one sync, then the root)."""
        uri = self.uri(path)
        _check_data(uri, data)
        try:
            self._backend().write(path, data, durable)
        except Exception as exc:
            self._raise(exc, uri, "write")

    def sync(self) -> None:
        """Make every earlier ``write(durable=False)`` durable (local disks; a no-op on S3,
        where an acknowledged PUT is durable)."""
        try:
            self._backend().sync()
        except Exception as exc:
            self._raise(exc, self.root_uri, "sync")

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Create a file that must not exist; ``AlreadyExistsError`` if it does.

        Atomic in content: the file appears with all of ``data`` or not at all."""
        uri = self.uri(path)
        _check_data(uri, data)
        if not self._kind.exclusive_create:
            raise LakecoreError(
                f"exclusive create is not supported for scheme '{self._scheme}://' (creating "
                f"{uri}); lakecore commits need file://, s3:// or memory://"
            )
        try:
            created = self._backend().create_exclusive(path, data)
        except Exception as exc:
            self._raise(exc, uri, "exclusively create")
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
            self._raise(exc, self.root_uri + dir_prefix, "list")

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
                self._raise(exc, self.root_uri + dir_prefix, "list")
            yield page

    def list_paths(self, prefix: str = "") -> PathListing:
        """``list`` as columns, without what the backend would pay a call per file for
        (``PathListing``): on a local file system, the paths alone."""
        dir_prefix = self._dir_prefix(prefix)
        try:
            return self._backend().list_paths(dir_prefix)
        except Exception as exc:
            self._raise(exc, self.root_uri + dir_prefix, "list")

    def info(self, path: str) -> FileInfo:
        """Size and modification time of one file; ``NotFoundError`` if it does not exist."""
        uri = self.uri(path)
        try:
            return self._backend().info(path)
        except Exception as exc:
            self._raise(exc, uri, "get the size and time of", reading=True)

    def first_files(self, limit: int = 5) -> builtins.list[str]:
        """Up to ``limit`` paths of files anywhere under the root, cheaply (one request on S3);
        an empty list means the root holds nothing."""
        try:
            return self._backend().first_files(limit)
        except Exception as exc:
            self._raise(exc, self.root_uri, "list")

    def clock_millis(self) -> int | None:
        """The store's clock now, as it dates the files it holds (epoch millis; on S3 the Date of
        a one-key listing of the root, rounded up to its next whole second), or None where that
        clock cannot be read without writing a file: a local root (this machine's kernel dates
        its files) and the generic fsspec schemes."""
        try:
            return self._backend().clock_millis()
        except Exception as exc:
            self._raise(exc, self.root_uri, "list")

    def list_top_level(self) -> builtins.list[FileInfo]:
        """Files directly under the root, not in subdirectories."""
        try:
            return self._backend().list_top()
        except Exception as exc:
            self._raise(exc, self.root_uri, "list")

    def delete(
        self,
        paths: Iterable[str],
        batch_size: int = S3_MAX_DELETE_BATCH,
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
        except DeleteFailures as exc:
            if deleted is not None:
                deleted.extend(exc.deleted)
            raise StorageError(
                f"delete under {self.root_uri}: {len(exc.deleted)} file(s) deleted, but {exc}"
            ) from exc
        except Exception as exc:
            self._raise(exc, self.root_uri, f"delete {len(rels)} file(s) under")
        if deleted is not None:
            deleted.extend(done)
        return len(done)

    def _raise(self, exc: Exception, uri: str, action: str, reading: bool = False) -> NoReturn:
        """``raise_translated`` with this storage's overall deadline, for its timeout line."""
        deadline = (
            timeout_seconds(self._storage_options, self.root_uri)
            if self._kind.has_deadline
            else None
        )
        raise_translated(exc, uri, action, reading, deadline_seconds=deadline)

    # -- the per-process, per-thread client -------------------------------------------------

    def _backend(self) -> Backend:
        backend: Backend | None = getattr(self._local, "backend", None)
        pid = os.getpid()
        if backend is not None and backend.pid == pid:
            return backend
        if backend is not None:
            abandon(backend)  # inherited from the parent process (lakecore.core.storage.clients)
        backend = self._new_or_cached_backend()
        self._local.backend = backend
        return backend

    def _new_or_cached_backend(self) -> Backend:
        def build() -> Backend:
            return self._kind.open_backend(self.root_uri, self._root_path, self._storage_options)

        if self._kind.client_cache == "none":
            return build()
        # The endpoint may come from the environment, which can change between two Storages.
        endpoint = self._kind.endpoint(self._storage_options) if self._kind.endpoint else None
        thread = 0 if self._kind.client_cache == "process" else threading.get_ident()
        key = (
            os.getpid(),
            thread,
            self.root_uri,
            json.dumps([self._storage_options, endpoint], sort_keys=True, default=repr),
        )
        return cached_client(key, build)


def _check_data(uri: str, data: bytes) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"data for {uri} must be bytes, got {type(data).__name__}")


def _check_range(uri: str, start: int, end: int) -> None:
    for value in (start, end):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"byte range of {uri} must be integers, got {value!r}")
    if not 0 <= start <= end:
        raise InvalidArgumentError(f"byte range [{start}, {end}) of {uri} is not 0 <= start <= end")


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
