"""Deleting Iceberg files in batches, each file judged again by the rules right before it goes.

A batch is at most ``batch_size`` files (S3's DeleteObjects takes at most 1,000 keys a request:
``S3_MAX_DELETE_BATCH``), deleted through a ``Storage`` rooted at the warehouse, which refuses any
path outside it. Every path is checked again against ``DeletionRules`` (inside its owner's
folders, not blocked, not lakecore's) whatever the caller computed; a refused path is reported,
never deleted. A failed batch is recorded and the others go on; the outcome counts what this
call deleted (a file another run deleted first is ``already_gone``), as gc's deletes do
(``lakecore.maintenance.delete.DeleteOutcome``).

On local disk a batch is deleted from ``LOCAL_DELETE_THREADS`` threads: an unlink waits on the
file system's journal, not on the CPU, and on the shared benchmark VM one thread took 0.6-1.5 ms
a file where eight took 0.08-0.1 ms (the same rules, the same counts; one failed part fails the
batch as one failed call would).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from lakecore.core.storage import Storage
from lakecore.errors import LakecoreError
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.tables.listing import relative
from lakecore.maintenance.tables.rules import DeletionRules

# Threads a local batch is deleted from (see the module doc).
LOCAL_DELETE_THREADS: Final = 8


def _delete_batch(storage: Storage, rels: list[str], batch_size: int, done: list[str]) -> None:
    """``storage.delete`` of one batch; on local disk from a few threads."""
    if storage.waits_on_network or len(rels) < 2 * LOCAL_DELETE_THREADS:
        storage.delete(rels, batch_size, done)
        return
    step = -(-len(rels) // LOCAL_DELETE_THREADS)
    parts = [rels[i : i + step] for i in range(0, len(rels), step)]
    dones: list[list[str]] = [[] for _ in parts]

    def one(index: int) -> LakecoreError | None:
        try:
            storage.delete(parts[index], batch_size, dones[index])
        except LakecoreError as exc:
            return exc
        return None

    with ThreadPoolExecutor(len(parts)) as pool:
        failures = [e for e in pool.map(one, range(len(parts))) if e is not None]
    for part in dones:
        done.extend(part)
    if failures:
        raise failures[0]


def delete_table_files(
    storage: Storage,
    rules: DeletionRules,
    files: Sequence[tuple[str, int, Sequence[str]]],
    batch_size: int,
) -> DeleteOutcome:
    """Delete ``(path, size, owner folders)`` files (an executor unit); see the module doc."""
    out = DeleteOutcome(requested=len(files))
    allowed: list[tuple[str, int]] = []
    for path, size, owner_folders in files:
        why = rules.allows(path, owner_folders)
        if why is None:
            allowed.append((path, size))
        else:
            out.refused.append(f"{path} ({why})")
    for start in range(0, len(allowed), batch_size):
        batch = allowed[start : start + batch_size]
        by_relative = {relative(rules.warehouse, path): (path, size) for path, size in batch}
        done: list[str] = []
        try:
            _delete_batch(storage, list(by_relative), batch_size, done)
        except LakecoreError as exc:
            out.errors.append(exc.one_line())
        gone = set(done)
        for rel, (path, size) in by_relative.items():
            if rel in gone:
                out.deleted += 1
                out.deleted_paths.append(path)
                out.bytes_freed += max(size, 0)
        if not out.errors:
            out.already_gone += len(by_relative) - len(gone & set(by_relative))
    return out


def chunked(
    files: Iterable[tuple[str, int, Sequence[str]]], size: int
) -> Iterable[list[tuple[str, int, Sequence[str]]]]:
    chunk: list[tuple[str, int, Sequence[str]]] = []
    for item in files:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


__all__ = ["LOCAL_DELETE_THREADS", "chunked", "delete_table_files"]
