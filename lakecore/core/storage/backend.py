"""What every storage backend offers, and the listing types they answer with.

A backend serves one root. It takes relative paths that ``Storage`` has already checked
(``locations.check_relative_path``) and may raise anything: ``Storage`` turns its exceptions
into lakecore errors (``lakecore.core.storage.translate``). Backends are chosen by the root's
scheme (``lakecore.core.storage.facade.SCHEMES``).

Rules every backend keeps:

- **Only files.** ``exists``, ``read`` and ``size`` see files, never directories or prefixes;
  a listing leaves out directories, S3 directory markers (``dir/``) and keys that are not
  qualified relative paths (``a//b``), which no other method could address anyway
  (``file_info_or_none``).
- **Prefixes end in '/'.** A directory prefix is always listed as ``root + prefix + '/'``
  and the root itself always ends in ``/``: on an object store a prefix is a string match, and
  ``s3://b/lake`` would otherwise also match ``s3://b/lake2/...``, a neighbouring lakehouse
  whose files a garbage collector must never see, let alone delete.
- **A file of unknown age counts as just written** (``UNKNOWN_MTIME_MILLIS``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from lakecore.core.locations import check_relative_path
from lakecore.core.units import LATEST_TIME_MILLIS
from lakecore.errors import LakecoreError


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
UNKNOWN_MTIME_MILLIS = LATEST_TIME_MILLIS


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


def columns_of(infos: list[FileInfo]) -> PathListing:
    return PathListing(
        [i.path for i in infos], [i.size for i in infos], [i.mtime_millis for i in infos]
    )


class Backend(Protocol):
    """One root's files through one client (see the module doc)."""

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


class DeleteFailures(Exception):
    """Some keys of a batched delete were refused; carries what did succeed."""

    def __init__(self, deleted: list[str], failures: list[str]) -> None:
        super().__init__(f"{len(failures)} file(s) not deleted, e.g. {'; '.join(failures[:5])}")
        self.deleted = deleted
        self.failures = failures


def file_info_or_none(rel: str, size: int, mtime: Any) -> FileInfo | None:
    """A FileInfo for a listed name, or None for names lakecore cannot address safely:
    directory markers (``dir/``) and keys such as ``a//b`` or ``../x`` that an object store
    allows but that are not qualified relative paths."""
    try:
        check_relative_path(rel)
    except LakecoreError:
        return None
    return FileInfo(rel, size, to_millis(mtime))


def to_millis(value: Any) -> int:
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
