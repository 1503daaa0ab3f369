"""The FileIO the catalog reads client-named files through: every path checked before it is
opened; and the sync that makes a file written through a FileIO durable on a local disk.

A commit names files the server then reads itself: the manifest list of each new snapshot and
the manifests in it (to record where the table names files, ``lakecore.iceberg.references``), a
registered table's metadata and manifests. A client chooses those paths, so without a check a
commit could make the server open any file it can reach (``/etc/shadow``), a FIFO that blocks
the reading thread until someone writes to it, a directory, or another bucket's object.

Rules:

* Every location is checked before it is opened (``GuardedFileIO``, with the catalog's
  ``check_location``: the canonical form, inside the warehouse, outside lakecore's
  directories). The manifests a manifest list names are checked too: they are read through the
  same FileIO.
* On this machine's disk the path, links resolved, must be a regular file (or missing: the
  read then fails as usual): a FIFO, a device, a socket or a directory is refused before
  ``open``, which would block on a FIFO.
* A refusal is ``InvalidLocationError`` (a client's mistake: 400 at the REST server); nothing
  is read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from urllib.parse import urlparse

from pyiceberg.io import FileIO, InputFile, OutputFile

from lakecore.errors import InvalidLocationError


def refuse_special_local_file(location: str, what: str) -> None:
    """Refuse a local path that leads to anything but a regular file (a missing one passes)."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return
    path = parsed.path if parsed.scheme == "file" else location
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InvalidLocationError(
            f"{what} {location} cannot be read: {exc.strerror or exc}"
        ) from None
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device or a socket"
        )
        raise InvalidLocationError(f"{what} {location} is {kind}, not a file")


def sync_local_file(location: str) -> None:
    """Make a file just written on this machine's disk durable, and its name in its folder
    (nothing for another scheme): a root written after it may name it, and must never outlive
    it in a crash."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return
    path = parsed.path if parsed.scheme == "file" else location
    for target in (path, os.path.dirname(path)):
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class GuardedFileIO(FileIO):
    """``inner`` with every location checked by ``check(location, what)`` (which raises)
    before it is opened, written or deleted (see the module docstring)."""

    def __init__(self, inner: FileIO, check: Callable[[str, str], None]) -> None:
        super().__init__(inner.properties)
        self.inner = inner
        self.check = check

    def _checked(self, location: str, what: str) -> str:
        self.check(location, what)
        refuse_special_local_file(location, what)
        return location

    def new_input(self, location: str) -> InputFile:
        return self.inner.new_input(self._checked(location, "the file"))

    def new_output(self, location: str) -> OutputFile:
        return self.inner.new_output(self._checked(location, "the file"))

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        self.inner.delete(self._checked(path, "the file"))


__all__ = ["GuardedFileIO", "refuse_special_local_file", "sync_local_file"]
