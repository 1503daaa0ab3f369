"""Local version caches: one lookup file per (lakehouse, version), under a size cap.

A tree version never changes, so its resolved map (object key -> pvalue) can be written once
into a local lookup file by one sequential scan (the scan is already sorted) and served from
there forever: a cached file never goes stale. Files live under one folder::

    <folder>/<sha256(storage fingerprint)[:16]>/v<version>-<root identity>.lookup

A version number alone does not name one tree over the life of a URI: a lakehouse deleted and
created again at the same place has a version 1 of its own. The root identity is a hash of what
the version's root file says of itself (its lakehouse definition file, whose name holds a
uuid, its creation time and its size), so a new lakehouse's version never hits an old file.

The cache keeps its files under ``max_bytes``, evicting least recently used files first (the
file's mtime is its last use: a hit touches it). It counts and evicts only files named as above:
nothing else in the folder, which an operator may share with other data, is ever deleted.
Builds write to a temporary file and rename it into place, so two processes building the same
version at once both end with a whole file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakecore.core.lookup.reader import LookupReader
from lakecore.core.lookup.writer import LookupWriter
from lakecore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from lakecore.core.view import LakehouseView

DEFAULT_MAX_BYTES = 2 << 30
LOOKUP_SUFFIX = ".lookup"
# The names ``VersionCache.path_for`` gives: the only files the cache counts or evicts.
_STORE_FOLDER = re.compile(r"[0-9a-f]{16}")
_CACHE_FILE = re.compile(r"v[0-9]+-[0-9a-f]{12}" + re.escape(LOOKUP_SUFFIX))


def default_cache_folder() -> Path:
    configured = os.environ.get("LAKECORE_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakecore" / "lookup"


@dataclass
class CacheStats:
    hits: int = 0
    builds: int = 0
    evictions: int = 0
    entries_built: int = 0


class VersionCache:
    """Lookup files of tree versions on local disk, LRU-evicted under a byte cap."""

    def __init__(
        self,
        folder: str | Path | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        compression: str = "zstd",
    ) -> None:
        if max_bytes <= 0:
            raise InvalidArgumentError(f"cache max_bytes must be positive, got {max_bytes}")
        self.folder = Path(folder) if folder is not None else default_cache_folder()
        self.max_bytes = max_bytes
        self.compression = compression
        self.stats = CacheStats()
        self._lock = threading.Lock()

    def path_for(self, view: LakehouseView) -> Path:
        """Where the lookup file of ``view``'s version lives (see the module docstring)."""
        store = hashlib.sha256(view.storage.fingerprint().encode("utf-8")).hexdigest()[:16]
        root = view.root_info
        identity = f"{root.lakehouse_def_path}\n{root.created_at_millis}\n{root.size}"
        root_digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:12]
        return self.folder / store / f"v{view.version}-{root_digest}{LOOKUP_SUFFIX}"

    def file_for(self, view: LakehouseView) -> Path:
        """The lookup file of ``view``'s version, built on first use."""
        path = self.path_for(view)
        with self._lock:
            if path.parent.is_symlink():
                # The cache writes only below its folder: a link in its place (to a lakehouse,
                # say) would take the lookup files there.
                raise InvalidArgumentError(
                    f"lookup cache folder {path.parent} is a symbolic link (to "
                    f"{os.readlink(path.parent)}); the cache writes only into folders of its own: "
                    "remove the link"
                )
            if path.exists():
                self.stats.hits += 1
                os.utime(path)  # last use, for LRU
                return path
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except (
                OSError
            ) as exc:  # a mistyped --cache-dir, or one under a file: the operator's to fix
                raise InvalidArgumentError(
                    f"lookup cache folder {self.folder} cannot be used: {exc.strerror or exc} "
                    f"({exc.filename or path.parent}); give --cache-dir a folder you can write (or set LAKECORE_CACHE_DIR)"
                ) from None
            count = 0
            with LookupWriter(str(path), compression=self.compression) as writer:
                for key, value in view.items():
                    writer.put(key.encode("utf-8"), value.encode("utf-8"))
                    count += 1
            self.stats.builds += 1
            self.stats.entries_built += count
            self._evict(keep=path)
            return path

    def reader(self, view: LakehouseView) -> LookupReader:
        return LookupReader(str(self.file_for(view)))

    def files(self) -> list[Path]:
        """The cache's own files: only names this class gives (``path_for``), never a link. The
        folder may be one the operator shares with other things (``--cache-dir ~/data``), and
        eviction deletes what this returns: another tool's ``.lookup`` file is not ours."""
        if not self.folder.is_dir():
            return []
        found: list[Path] = []
        for store in self.folder.iterdir():
            if not _STORE_FOLDER.fullmatch(store.name) or store.is_symlink() or not store.is_dir():
                continue
            found.extend(
                path
                for path in store.iterdir()
                if _CACHE_FILE.fullmatch(path.name) and not path.is_symlink() and path.is_file()
            )
        return found

    def size_bytes(self) -> int:
        return sum(_size(p) for p in self.files())

    def _evict(self, keep: Path) -> None:
        entries = []
        for path in self.files():
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                return
            if path == keep:
                continue  # never evict the file just asked for, even when it alone is over the cap
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= size
            self.stats.evictions += 1


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@dataclass
class VersionDiff:
    """Keys added, removed and changed from version ``old`` to version ``new``."""

    old: int
    new: int
    added: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    changed: list[tuple[str, str, str]]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def diff_lookup_files(old_path: Path, new_path: Path, old: int, new: int) -> VersionDiff:
    """Merge two sorted lookup files: one pass over each."""
    added: list[tuple[str, str]] = []
    removed: list[tuple[str, str]] = []
    changed: list[tuple[str, str, str]] = []
    with LookupReader(str(old_path)) as a, LookupReader(str(new_path)) as b:
        left = iter(a.items())
        right = iter(b.items())
        x = next(left, None)
        y = next(right, None)
        while x is not None or y is not None:
            if y is None or (x is not None and x[0] < y[0]):
                assert x is not None
                removed.append((x[0].decode(), x[1].decode()))
                x = next(left, None)
            elif x is None or y[0] < x[0]:
                added.append((y[0].decode(), y[1].decode()))
                y = next(right, None)
            else:
                if x[1] != y[1]:
                    changed.append((x[0].decode(), x[1].decode(), y[1].decode()))
                x = next(left, None)
                y = next(right, None)
    return VersionDiff(old, new, added, removed, changed)


def diff_versions(old: LakehouseView, new: LakehouseView, cache: VersionCache) -> VersionDiff:
    """Diff two versions through their lookup files (each version's tree is read at most once)."""
    return diff_lookup_files(cache.file_for(old), cache.file_for(new), old.version, new.version)
