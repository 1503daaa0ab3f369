"""``file://`` roots through plain ``os`` calls.

fsspec's LocalFileSystem would add a layer without adding anything: the atomic-rename and
hard-link tricks below need real OS paths and ``fsync``.

Rules:

- **Exclusive create is atomic in content.** A commit is the exclusive create of the next root
  node file, so a reader must never see a half-written root, and a crashed writer must never
  leave a torn file that blocks every later commit. The bytes go to a uniquely named temporary
  file in the target's directory, are fsynced, and are then published with
  ``os.link(tmp, target)``: ``link`` fails with EEXIST when the target exists (the same
  guarantee as ``O_EXCL``), and the target appears with all its bytes or not at all. ``O_EXCL``
  on the target itself would be exclusive but not atomic in content; ``os.replace`` would be
  atomic but not exclusive. A crash leaves at most a ``.lakecore-tmp-<uuid>`` orphan, which
  blocks nothing (its name is unique) and which garbage collection removes. A file system
  without hard links (some FUSE and SMB mounts) is refused by name.
- **Plain writes are atomic too.** ``write`` (new uuid-named files, the latest-version hint)
  goes through a temporary file and ``os.replace``, so a reader never sees a torn file.
  ``durable=False`` skips the fsyncs; ``sync`` is then one ``syncfs`` for all of them.
- **Symlinks below the root lead nowhere.** A write never goes through one; a listing neither follows nor reports a symlink,
  and it lists nothing through a directory below the root that is one (or lies under one); a
  delete skips a file whose directory is reached through one. A hash directory linked to
  another lakehouse's (a "cheap clone") would otherwise have its files listed as orphans of
  this one and deleted by gc. The root's own path may hold links.
- **Listing by columns skips the stat.** ``list_paths`` reads names and types from the
  directory alone; a stat per file cost four times the directory read, and gc needs sizes and
  times only for the few files nothing reaches.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

from lakecore.core.locations import new_temp_path
from lakecore.core.storage.backend import FileInfo, ListedPage, PathListing
from lakecore.errors import StorageError

# os.link errors that mean "this file system has no hard links" (some FUSE and SMB mounts).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})


class LocalBackend:
    """``file://`` roots through ``os``: temp file + fsync + link/replace."""

    def __init__(self, root_dir: str) -> None:
        self.pid = os.getpid()
        self._root_dir = root_dir  # absolute, ends in '/'
        self._real_root: str | None = None  # its realpath, found on first use
        self._writable_dirs: set[str] = set()  # folders below the root checked for links

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
        if rel_dir and rel_dir not in self._writable_dirs:
            # Never through a link below the root (a hash folder linked to another lakehouse's:
            # an export target holding one wrote into its source). Once per folder.
            if not self._below_root_without_links(rel_dir + "/"):
                raise StorageError(
                    f"{self._root_dir}{rel_dir} is reached through a symbolic link below the root "
                    "(it leads to another folder): lakecore writes only into the root's own "
                    "folders; remove the link"
                )
            self._writable_dirs.add(rel_dir)
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
