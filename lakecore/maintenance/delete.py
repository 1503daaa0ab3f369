"""Deleting files in batches, with every name classified again right before it goes.

A path that is not a deletable lakecore name at the moment of deletion is refused, whatever
the caller computed; a failed batch is recorded and the rest go on. The outcome counts what was
deleted and freed, and keeps capped samples of paths and errors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lakecore.errors import (
    LakecoreError,
    NotFoundError,
)
from lakecore.maintenance.listing import UNKNOWN_SIZE, is_deletable, kind_of
from lakecore.storage import Storage


@dataclass
class DeleteOutcome:
    requested: int = 0
    deleted: int = 0
    bytes_freed: int = 0
    deleted_paths: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, other: DeleteOutcome) -> None:
        self.requested += other.requested
        self.deleted += other.deleted
        self.bytes_freed += other.bytes_freed
        self.deleted_paths.extend(other.deleted_paths)
        self.refused.extend(other.refused)
        self.errors.extend(other.errors)


def chunks(items: Sequence[tuple[str, int]], size: int) -> list[list[tuple[str, int]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def delete_files(storage: Storage, files: Sequence[tuple[str, int]], batch_size: int) -> DeleteOutcome:
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
                continue  # already gone
            except LakecoreError:
                size = 0
        sized.append((path, size))
    if not sized:
        return out
    try:
        out.deleted = storage.delete([p for p, _ in sized], batch_size)
    except LakecoreError as exc:
        out.errors.append(exc.one_line())
        return out
    out.deleted_paths = [p for p, _ in sized]
    out.bytes_freed = sum(s for _, s in sized)
    return out
