"""Where table maintenance may delete a file, and what an unreadable file forbids.

A file may be deleted only when every one of these holds; the check is made where the file is
chosen and again right before its batch is deleted (``allows``):

* it lies strictly inside the warehouse (the deletes go through a ``Storage`` rooted there, which
  refuses anything else), and not inside the lakehouse root unless the warehouse itself lies
  there (lakecore's own files are never an Iceberg table's);
* it lies under a folder of its *owner*: the table whose expired snapshot, purge mark or listed
  folder made it a candidate (a file a table names outside its own folders, ``add_files`` of
  files written elsewhere, was not written for it and is never deleted here, as a purge never
  deletes it);
* it lies in no *blocked* folder (below), and is no ``version-hint.text`` (Hadoop tables keep
  one beside their metadata, which no metadata names).

**Blocked folders: fail closed across tables.** Reachability is global: a file is deleted only
when no retained metadata of *any* table names it. A table whose metadata file, manifest list or
manifest cannot be read (damaged, or a failed read) has an unknown reachable set, so:

* every folder that table may name files in is blocked: its own folders (its location and
  write paths) and the reference folders the location registry records for it
  (``lakecore.maintenance.tables.table_folders``, the registry of each retained version's definition that holds
  the table) -- no candidate of any table is deleted there;
* when those folders cannot be known -- its metadata file itself is unreadable, it was written
  around the registry (a client of an older lakecore: its references are not recorded), or the
  registry is not complete -- the whole warehouse is blocked: nothing is deleted this run;
* the table's own expiry still commits when its current metadata was readable (metadata only),
  and every other table's deletes outside the blocked folders go on. The run names each
  unreadable file and exits with an error (6 for damage, 4 for a failed read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from lakecore.maintenance.tables.named import PathForm
from lakecore.maintenance.tables.table_folders import (
    WRITE_PATH_PROPERTIES,
    FolderRegistry,
    contains,
)

VERSION_HINT: Final = "version-hint.text"


def table_folders(location: str, properties: Mapping[str, str], form: PathForm) -> tuple[str, ...]:
    """A table's folders in ``form``: its location and the write paths its properties set."""
    folders = [location, *(str(properties[n]) for n in WRITE_PATH_PROPERTIES if properties.get(n))]
    return tuple(sorted({form(f).rstrip("/") for f in folders}))


def under(path: str, folder: str) -> bool:
    """Whether ``path`` lies strictly inside ``folder``."""
    return path.startswith(folder.rstrip("/") + "/")


class Folders:
    """A set of folders, asked "does this path lie inside one of them?" in a few set lookups
    (one per level of the path), however many folders there are."""

    def __init__(self, folders: Iterable[str]) -> None:
        self.folders = frozenset(f.rstrip("/") for f in folders)

    def holding(self, path: str) -> str | None:
        """The folder of the set that ``path`` lies strictly inside, if any."""
        end = len(path)
        while True:
            end = path.rfind("/", 0, end)
            if end <= 0:
                return None
            prefix = path[:end]
            if prefix in self.folders:
                return prefix
            if prefix.endswith(":/") or prefix.endswith(":"):
                return None

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.holding(path) is not None

    def __len__(self) -> int:
        return len(self.folders)


@dataclass(frozen=True)
class DeletionRules:
    """The rules of the module doc for one run. ``blocked_everything`` blocks the warehouse."""

    warehouse: str
    lakehouse_root: str
    blocked: frozenset[str] = frozenset()
    blocked_everything: bool = False
    blocked_index: Folders = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocked_index", Folders(self.blocked))

    def allows(self, path: str, owner_folders: Iterable[str]) -> str | None:
        """None when ``path`` may be deleted for an owner with ``owner_folders``; else why not."""
        warehouse = self.warehouse.rstrip("/")
        lakehouse_root = self.lakehouse_root.rstrip("/")
        if not under(path, warehouse):
            return "outside the warehouse"
        if under(path, lakehouse_root) and not (
            under(warehouse, lakehouse_root) or warehouse == lakehouse_root
        ):
            return "inside the lakehouse root"
        if not any(under(path, f) for f in owner_folders):
            return "outside its table's own folders"
        if path.rsplit("/", 1)[-1] == VERSION_HINT:
            return "a version hint"
        if self.blocked_everything:
            return "deletion is blocked: a table's reachable files are unknown"
        if path in self.blocked_index:
            return "in a folder of a table whose files could not all be read"
        return None


def blocked_folders(
    own_folders: Iterable[str],
    namespace: str,
    table: str,
    registries: Iterable[FolderRegistry],
    form: PathForm,
) -> tuple[set[str], str | None]:
    """The folders a table with an unknown reachable set may name files in: its own folders and the
    registry's reference folders for it (from each registry that records it), and, when they
    cannot be known, why (then the whole warehouse is blocked)."""
    folders = {f.rstrip("/") for f in own_folders}
    why = None
    for registry in registries:
        if not registry.complete:
            why = "the location registry is not complete"
        folders.update(form(f).rstrip("/") for f in registry.refs.get((namespace, table), []))
        folders.update(form(f).rstrip("/") for f in registry.tables.get((namespace, table), []))
    return folders, why


def covered(path: str, folders: Iterable[str]) -> bool:
    return any(contains(f.rstrip("/"), path) for f in folders)


__all__ = [
    "VERSION_HINT",
    "DeletionRules",
    "Folders",
    "blocked_folders",
    "covered",
    "table_folders",
    "under",
]
