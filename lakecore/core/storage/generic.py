"""Roots of any other fsspec scheme (``memory://``, ``gs://``, ...) through fsspec's calls.

Rules:

- **Exclusive create only where it is atomic.** ``memory://`` lives in one process, so one
  process-wide lock makes check-then-write atomic. Other schemes have no exclusive create here:
  ``Storage`` refuses it by name (lakecore commits need file://, s3:// or memory://) rather
  than silently degrade into check-then-write.
- **No store clock.** fsspec answers no response headers: ``clock_millis`` is None.
- A listing has no early stop: fsspec's ``find`` returns everything, and the limit is the
  caller's.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from lakecore.core.storage.backend import (
    Backend,
    FileInfo,
    ListedPage,
    PathListing,
    columns_of,
    file_info_or_none,
)
from lakecore.core.storage.options import without_lakecore_options

MEMORY_SCHEME = "memory"
# memory:// lives in one process, so one process-wide lock makes check-then-write atomic.
_MEMORY_CREATE_LOCK = threading.Lock()


def open_fsspec(root_uri: str, root_path: str, options: Mapping[str, Any]) -> Backend:
    """A backend for ``root_uri`` through the fsspec file system of its scheme."""
    import fsspec

    scheme = root_uri.split("://", 1)[0]
    fs = fsspec.filesystem(scheme, **without_lakecore_options(options), skip_instance_cache=True)
    base = fs._strip_protocol(root_uri).rstrip("/") + "/"
    return FsspecBackend(fs, scheme, base)


class FsspecBackend:
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
        if self._scheme != MEMORY_SCHEME:
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
            entry = file_info_or_none(rel, int(info.get("size") or 0), mtime)
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
        return columns_of(self.list_under(dir_prefix))

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
