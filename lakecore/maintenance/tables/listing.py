"""Listing the tables' folders for orphan files: one listing of the warehouse, fanned out by
prefix.

Only the folders of the tables in scope are listed (their location and write paths), and
the folders of purge marks whose time has come; a file elsewhere in the warehouse (a folder no
live table owns: a table dropped without purge, a namespace folder) is neither listed nor
deleted. How:

* **Small** (the tables' files, as their metadata counts them, fit ``flat_max_files``): one flat
  paged listing of the whole warehouse (a request per 1,000 files on S3), its files kept when they
  lie under one of those folders (``Folders``); it gives up, as gc's does, once it has seen more.
* **Large**: the folders, each listed recursively and paged (``list_folder``), fanned out over tasks
  (the Spark job) with several requests in flight per task (``list_folders``). Folders never nest
  inside each other (no two tables share a folder), except where a table was made in a purged
  table's old folder; a file met twice is one file.

A folder that cannot be listed is an ``ERROR`` record (its path the reason), never an empty
folder: the caller deletes nothing then (``lakecore.maintenance.tables.rules``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, NamedTuple

from lakecore.core.storage import Storage, request_pool
from lakecore.errors import InvalidArgumentError, LakecoreError
from lakecore.maintenance.tables.named import PathForm
from lakecore.maintenance.tables.rules import Folders

# A listing record whose path is a reason, not a file (control characters never occur in a
# file name a table writes).
ERROR: Final = "\x00error: "


class Listed(NamedTuple):
    """A listed file: its full normalized path, size, modification time and the table folder it
    was listed under."""

    path: str
    size: int
    mtime_millis: int
    folder: str


def relative(warehouse: str, path: str) -> str:
    """``path`` relative to the warehouse (it must lie inside)."""
    prefix = warehouse.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise InvalidArgumentError(f"{path} is not inside the warehouse {warehouse}")
    return path[len(prefix) :]


def list_folder(storage: Storage, warehouse: str, folder: str, form: PathForm) -> list[Listed]:
    """Every file under one folder (an executor unit); a failure is one ``ERROR`` record."""
    try:
        infos = storage.list(relative(warehouse, folder))
    except (LakecoreError, InvalidArgumentError) as exc:
        return [Listed(f"{ERROR}listing {folder}/: {exc.one_line()}", 0, 0, folder)]
    base = warehouse.rstrip("/") + "/"
    return [Listed(form(base + i.path), i.size, i.mtime_millis, folder) for i in infos]


def list_folders(
    storage: Storage, warehouse: str, folders: Iterable[str], form: PathForm, threads: int = 1
) -> Iterator[Listed]:
    """``list_folder`` of each folder, ``threads`` requests in flight when the store waits on the
    network."""
    ordered = sorted(set(folders))
    if threads <= 1 or not storage.waits_on_network or len(ordered) <= 1:
        for folder in ordered:
            yield from list_folder(storage, warehouse, folder, form)
        return
    pool = request_pool(threads)
    for listed in pool.map(lambda r: list_folder(storage, warehouse, r, form), ordered):
        yield from listed


def list_flat(
    storage: Storage, warehouse: str, folders: Iterable[str], form: PathForm, max_files: int
) -> list[Listed] | None:
    """The files under the folders through one flat paged listing of the warehouse, or None
    when the warehouse holds more than ``max_files`` files (list the folders one by one then)."""
    if max_files <= 0:
        return None
    index = Folders(folders)
    base = warehouse.rstrip("/") + "/"
    out: list[Listed] = []
    seen = 0
    try:
        for page in storage.list_pages("", limit=max_files):
            seen += len(page.files)
            if seen > max_files:
                return None
            for info in page.files:
                path = form(base + info.path)
                folder = index.holding(path)
                if folder is not None:
                    out.append(Listed(path, info.size, info.mtime_millis, folder))
    except InvalidArgumentError:
        raise
    except LakecoreError as exc:
        return [Listed(f"{ERROR}listing {warehouse}/: {exc.one_line()}", 0, 0, warehouse)]
    return out


def is_error(listed: Listed) -> bool:
    return listed.path.startswith(ERROR)


__all__ = ["ERROR", "Listed", "is_error", "list_flat", "list_folder", "list_folders", "relative"]
