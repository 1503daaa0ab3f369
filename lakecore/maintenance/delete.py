"""Deleting files in batches, with every name classified again right before it goes.

A path that is not a deletable lakecore name at the moment of deletion is refused, whatever
the caller computed; a failed batch is recorded and the rest go on. The outcome counts what was
deleted and freed, and keeps capped samples of paths and errors.

Only what *this* call deleted counts: a file found already gone (another gc or compaction run
racing this one deleted it first) is ``already_gone``, not deleted, and its bytes are not
freed here, so that two racing runs' reports add up to what really went. (On S3 a delete of a
missing key is acknowledged like any other and counts as deleted; a size looked up as missing
still counts as already gone.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lakecore.core.storage import Storage
from lakecore.errors import (
    LakecoreError,
    NotFoundError,
)
from lakecore.maintenance.listing import UNKNOWN_SIZE, is_deletable, kind_of


@dataclass
class DeleteOutcome:
    requested: int = 0
    deleted: int = 0
    already_gone: int = 0  # asked for, but gone before this run's delete reached them
    bytes_freed: int = 0
    deleted_paths: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, other: DeleteOutcome) -> None:
        self.requested += other.requested
        self.deleted += other.deleted
        self.already_gone += other.already_gone
        self.bytes_freed += other.bytes_freed
        self.deleted_paths.extend(other.deleted_paths)
        self.refused.extend(other.refused)
        self.errors.extend(other.errors)


def chunks(items: Sequence[tuple[str, int]], size: int) -> list[list[tuple[str, int]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def delete_files(
    storage: Storage, files: Sequence[tuple[str, int]], batch_size: int
) -> DeleteOutcome:
    """Delete ``(path, size)`` files (an executor unit, one batch). Names are classified again
    here and anything but a deletable lakecore file is refused, whatever the caller sent. A
    size of ``UNKNOWN_SIZE`` is looked up first (for the bytes-freed figure)."""
    out = DeleteOutcome(requested=len(files))
    allowed: list[tuple[str, int]] = []
    for path, size in files:
        if is_deletable(kind_of(path)):
            allowed.append((path, size))
        else:
            out.refused.append(path)
    sized: list[tuple[str, int]] = []
    for path, size in allowed:
        if size == UNKNOWN_SIZE:
            try:
                size = storage.size(path)
            except NotFoundError:
                out.already_gone += 1
                continue
            except LakecoreError:
                size = 0
        sized.append((path, size))
    if not sized:
        return out
    done: list[str] = []
    try:
        storage.delete([p for p, _ in sized], batch_size, done)
    except LakecoreError as exc:
        out.errors.append(exc.one_line())  # what did go before the failure is still counted
    gone = set(done)
    out.deleted = len(gone)
    out.deleted_paths = [p for p, _ in sized if p in gone]
    out.bytes_freed = sum(s for p, s in sized if p in gone)
    if not out.errors:
        out.already_gone += len(sized) - len(gone)
    return out
