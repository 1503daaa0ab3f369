"""Where an Iceberg table's files may live, and how the catalog finds, without loading every
table, the few tables whose files could share a folder with a given path.

Terms. ``W`` is the catalog's warehouse. A table's *folders* are its location and each write path
its properties set (``WRITE_PATH_PROPERTIES``). A namespace's *folder* is its default folder
``W/<level 1>/.../<level n>`` and, when it sets one, its ``location`` property. Two paths
*overlap* when they are equal or one lies inside the other.

**The rule** (issue 39): every folder of a table lies strictly inside ``W``, neither equals nor
contains a namespace folder (lying inside one is what a default location does), and overlaps no
folder of another live table. Purge deletes only files under the purged table's own folders, so
with the rule no purge can reach another table's folder.

**Finding the tables a path could overlap** (at millions of tables, without a scan):

* A table's default location is ``W/<namespace levels>/<table>-<32 hex digits>``: the path names
  the table. The tables at a path's ancestors are found by reading each ancestor as
  ``<namespace levels>/<table>-<uuid>`` and looking that table up: one lookup per level.
  (``W/a.b/t-<uuid>``, the default folder of a flat namespace named ``a.b`` before namespaces
  nested, reads the same way.)
* Every other folder (an explicit location, a write path, a location under a namespace's own
  ``location``, a location kept through a rename) is in the **registry**, written in the same
  commit that gives the table that folder: the lakehouse definition property
  ``lakecore.iceberg.roots <namespace> <table>`` holds the JSON list of that table's folders (the
  space cannot occur in a name; the property name keeps the word ``roots``, what a table's
  folders were once called: it is file bytes). Every namespace ``location`` is there too
  (``lakecore.iceberg.namespace-location <namespace>``). Explicit folders are few, and the
  definition is read by every open anyway.
* A path equals or contains a default namespace folder exactly when its levels below ``W``,
  joined with ``.``, name a namespace or a prefix of one: one range lookup of namespace keys.

So the tables that could overlap a path ``P`` are: the registry's tables with a folder
overlapping ``P``; the default-located tables at ``P`` and its ancestors; and, only when ``P``
contains a namespace folder (never true of a folder the rule admitted, so only in a lakehouse made
before the rule), every table of those namespaces.

**References.** A table's metadata may also name files outside its own folders (``add_files``
of another table's files, a registered copy). Purge keeps every file another live table's
current metadata names, so it must find the tables that name files under the purged table's
folders. The registry holds, per table, the folders inside ``W`` but outside the table's own folders
in which its metadata names a file (``lakecore.iceberg.refs <namespace> <table>``: a JSON list,
at most ``MAX_REFERENCE_FOLDERS``; a longer list is coarsened to common ancestors, which only
makes more purges read the table). Each commit adds the folders of the files its new snapshots
name (``lakecore.iceberg.references``); nothing is ever taken out while the table lives, so the
list only over-approximates. Files outside ``W`` need no entry: no table folder of this lakehouse
can hold them.

**The warehouse** is recorded too (``lakecore.iceberg.warehouse``): all of a lakehouse's tables
live in one warehouse, and a catalog given another one is refused (the module
``lakecore.iceberg.warehouse`` claims the folder against other lakehouses).

**Lakehouses made before the registry** (or before its format ``REGISTRY_FORMAT``) may hold
tables whose folders overlap in any way, and tables that name other tables' files. The first
catalog change on such a lakehouse (its definition has no ``lakecore.iceberg.roots-registry``
property of this format) reads every Iceberg table's metadata and manifests once and commits
the registry, and the marker, with that change; from then on nothing is scanned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from lakecore.core.export_records import ICEBERG_PROPERTY_PREFIX

# The registry's property names keep the word "roots" (what a table's folders were once called):
# they are file bytes, in every lakehouse definition written since the registry came.
FOLDERS_PROPERTY_PREFIX: Final = ICEBERG_PROPERTY_PREFIX + "roots "
NAMESPACE_LOCATION_PROPERTY_PREFIX: Final = ICEBERG_PROPERTY_PREFIX + "namespace-location "
REFS_PROPERTY_PREFIX: Final = ICEBERG_PROPERTY_PREFIX + "refs "
WAREHOUSE_PROPERTY: Final = ICEBERG_PROPERTY_PREFIX + "warehouse"
REGISTRY_MARKER_PROPERTY: Final = ICEBERG_PROPERTY_PREFIX + "roots-registry"  # file bytes too
# 2: references and the warehouse recorded too (1 had folders and namespace locations only).
REGISTRY_FORMAT: Final = "2"
# The registry is read by every open: a table's reference list stays short.
MAX_REFERENCE_FOLDERS: Final = 16
# Table properties that place files: each is a folder of the table.
WRITE_PATH_PROPERTIES: Final = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)
_DEFAULT_SEGMENT_RE: Final = re.compile(r"^(.+)-[0-9a-f]{32}$")


def overlaps(a: str, b: str) -> bool:
    """Whether two normalized paths are equal or one lies inside the other."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` equals ``outer`` or lies inside it."""
    return inner == outer or inner.startswith(outer + "/")


def levels_below(warehouse: str, path: str) -> list[str] | None:
    """The path's segments below the warehouse; None when it is not strictly inside it."""
    if not path.startswith(warehouse + "/"):
        return None
    return path[len(warehouse) + 1 :].split("/")


def default_location(warehouse: str, namespace: list[str], table: str, uuid_hex: str) -> str:
    """``W/<level 1>/.../<level n>/<table>-<uuid>``: unique, and it names its table."""
    return "/".join([warehouse, *namespace, f"{table}-{uuid_hex}"])


def named_by(warehouse: str, path: str) -> tuple[str, str] | None:
    """The (namespace, table) whose default location ``path`` has the shape of, if any."""
    levels = levels_below(warehouse, path)
    if not levels or len(levels) < 2:
        return None
    match = _DEFAULT_SEGMENT_RE.match(levels[-1])
    if match is None:
        return None
    return ".".join(levels[:-1]), match.group(1)


def default_located_ancestors(warehouse: str, path: str) -> list[tuple[str, str, str]]:
    """(namespace, table, ancestor) for each ancestor-or-self of ``path`` that has the shape of
    a default location."""
    levels = levels_below(warehouse, path) or []
    found = []
    for end in range(2, len(levels) + 1):
        ancestor = "/".join([warehouse, *levels[:end]])
        named = named_by(warehouse, ancestor)
        if named is not None:
            found.append((*named, ancestor))
    return found


def namespace_name_of_folder(warehouse: str, path: str) -> str | None:
    """The namespace whose default folder ``path`` would be (levels joined with ``.``)."""
    levels = levels_below(warehouse, path)
    return None if not levels else ".".join(levels)


def table_folders(location: str, properties: Mapping[str, str]) -> list[str]:
    """The table's folders as given (normalize them before comparing)."""
    return [location, *(str(properties[n]) for n in WRITE_PATH_PROPERTIES if properties.get(n))]


def folders_key(namespace: str, table: str) -> str:
    return f"{FOLDERS_PROPERTY_PREFIX}{namespace} {table}"


def refs_key(namespace: str, table: str) -> str:
    return f"{REFS_PROPERTY_PREFIX}{namespace} {table}"


def namespace_location_key(namespace: str) -> str:
    return f"{NAMESPACE_LOCATION_PROPERTY_PREFIX}{namespace}"


def is_registry_key(key: str) -> bool:
    """Whether a definition property belongs to the registry (rebuilt as a whole)."""
    return key.startswith(
        (FOLDERS_PROPERTY_PREFIX, REFS_PROPERTY_PREFIX, NAMESPACE_LOCATION_PROPERTY_PREFIX)
    ) or key in (REGISTRY_MARKER_PROPERTY, WAREHOUSE_PROPERTY)


def parent_folder(path: str) -> str:
    """The folder a file lies in."""
    return path.rsplit("/", 1)[0]


def reduce_folders(warehouse: str, folders: Iterable[str], limit: int) -> list[str]:
    """The folders without those inside another, sorted, at most ``limit`` of them: while there
    are more, the largest group of siblings is replaced by their parent (a lone folder by its
    parent when no two are siblings), never going above the warehouse. Coarser folders only
    over-approximate where a table names files."""
    kept = _outermost(folders)
    while len(kept) > limit and kept != [warehouse]:
        siblings: dict[str, list[str]] = {}
        for folder in kept:
            if folder != warehouse:
                siblings.setdefault(parent_folder(folder), []).append(folder)
        parent, members = max(
            siblings.items(), key=lambda item: (len(item[1]), item[0].count("/"), item[0])
        )
        if len(members) == 1:  # no two siblings: lift the deepest folder one level
            deepest = max(kept, key=lambda f: (f.count("/"), f))
            parent, members = parent_folder(deepest), [deepest]
        kept = _outermost([f for f in kept if f not in members] + [parent])
    return kept


def _outermost(folders: Iterable[str]) -> list[str]:
    """The folders that lie inside no other of them, sorted."""
    kept: list[str] = []
    for folder in sorted(set(folders)):
        if not any(contains(k, folder) for k in kept):
            kept.append(folder)
    return kept


@dataclass
class FolderRegistry:
    """The location registry of table folders, as read from a lakehouse definition's
    properties: each table's registered folders and reference folders, each namespace's
    ``location``, the warehouse, and whether the registry is complete."""

    complete: bool
    tables: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    namespace_locations: dict[str, str] = field(default_factory=dict)
    refs: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    warehouse: str | None = None

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> FolderRegistry:
        registry = cls(
            complete=properties.get(REGISTRY_MARKER_PROPERTY) == REGISTRY_FORMAT,
            warehouse=properties.get(WAREHOUSE_PROPERTY),
        )
        for key, value in properties.items():
            if key.startswith(FOLDERS_PROPERTY_PREFIX):
                namespace, _, table = key[len(FOLDERS_PROPERTY_PREFIX) :].partition(" ")
                registry.tables[(namespace, table)] = [str(r) for r in json.loads(value)]
            elif key.startswith(REFS_PROPERTY_PREFIX):
                namespace, _, table = key[len(REFS_PROPERTY_PREFIX) :].partition(" ")
                registry.refs[(namespace, table)] = [str(r) for r in json.loads(value)]
            elif key.startswith(NAMESPACE_LOCATION_PROPERTY_PREFIX):
                registry.namespace_locations[key[len(NAMESPACE_LOCATION_PROPERTY_PREFIX) :]] = value
        return registry

    def tables_overlapping(self, path: str) -> list[tuple[str, str]]:
        return [
            name for name, folders in self.tables.items() if any(overlaps(r, path) for r in folders)
        ]

    def tables_referencing(self, path: str) -> list[tuple[str, str]]:
        """Tables whose metadata may name a file in a folder overlapping ``path``."""
        return [
            name for name, folders in self.refs.items() if any(overlaps(f, path) for f in folders)
        ]

    def namespaces_with_folder_in(self, path: str) -> list[str]:
        """Namespaces whose ``location`` equals ``path`` or lies inside it."""
        return [ns for ns, loc in self.namespace_locations.items() if contains(path, loc)]


def registered_folders(
    warehouse: str, namespace: str, table: str, folders: Iterable[str]
) -> list[str]:
    """The folders the registry must hold for the table: those its name does not give away."""
    return sorted({r for r in folders if named_by(warehouse, r) != (namespace, table)})


def folders_property(
    warehouse: str, namespace: str, table: str, folders: Iterable[str]
) -> dict[str, str | None]:
    """The definition property change that records the table's folders (None: remove)."""
    kept = registered_folders(warehouse, namespace, table, folders)
    return {folders_key(namespace, table): json.dumps(kept) if kept else None}


def refs_property(namespace: str, table: str, folders: Iterable[str]) -> dict[str, str | None]:
    """The definition property change that records the table's reference folders."""
    kept = sorted(set(folders))
    return {refs_key(namespace, table): json.dumps(kept) if kept else None}


__all__ = [
    "FOLDERS_PROPERTY_PREFIX",
    "MAX_REFERENCE_FOLDERS",
    "NAMESPACE_LOCATION_PROPERTY_PREFIX",
    "REFS_PROPERTY_PREFIX",
    "REGISTRY_FORMAT",
    "REGISTRY_MARKER_PROPERTY",
    "WAREHOUSE_PROPERTY",
    "WRITE_PATH_PROPERTIES",
    "FolderRegistry",
    "contains",
    "default_located_ancestors",
    "default_location",
    "folders_key",
    "folders_property",
    "is_registry_key",
    "levels_below",
    "named_by",
    "namespace_location_key",
    "namespace_name_of_folder",
    "overlaps",
    "parent_folder",
    "reduce_folders",
    "refs_key",
    "refs_property",
    "registered_folders",
    "table_folders",
]
