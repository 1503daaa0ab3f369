"""The deep catalog checks: what each (key, definition) pair of a version says, and the rule
that every table's namespace exists.

One (key, location) pair at a time (``check_catalog_entry``): the key parses under the
lakehouse's name limits (namespace, table and view keys), its definition file exists, decodes
as its kind's message (a view's with a known ``view_format``) and carries the name the key
says. A view counts with the tables for "every table's namespace exists".
A subtree's pairs are checked where the subtree is (``check_catalog_items``, an executor), and
the parts are joined on the driver for "every table's namespace exists"
(``namespace_violations``). ``catalog_violations`` is all of it over one resolved map, the
single-process form fsck uses. As in fsck, these only count for a version whose tree checks
are clean (``lakecore.maintenance.validate``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from lakecore.core import keys as K
from lakecore.core.defs import VIEW_FORMATS, decode_namespace_def, decode_table_def, decode_view_def
from lakecore.core.locations import check_relative_path, external_root_for, is_full_uri
from lakecore.core.storage import Storage
from lakecore.errors import InvalidLocationError, LakecoreError, StorageError
from lakecore.maintenance.tree_check import Violation, add_counts

# Orphan-table candidates an executor sends back per namespace (the namespace check runs on
# the driver, which only learns which namespaces are missing once every part is in).
TABLES_PER_NAMESPACE_LIMIT: Final = 1000


def location_reader(storage: Storage, external_roots: Sequence[str]) -> Callable[[str], bytes]:
    """``LakehouseView.read_location`` without a view: a path under the root, or a full URI
    under an allowed export source; anything else is refused."""
    roots = tuple(external_roots)

    def read(location: str) -> bytes:
        if is_full_uri(location):
            root = external_root_for(location, roots)
            if root is not None:
                return Storage(root, storage.storage_options).read(location[len(root) :])
            raise InvalidLocationError(
                f"location {location!r} is outside the lakehouse {storage.root_uri}; refusing to read it"
            )
        return storage.read(check_relative_path(location))

    return read


@dataclass(frozen=True)
class EntryCheck:
    """What one (key, location) pair of the catalog says: violations, and the namespace or
    table it defines (only when its definition decodes, as in fsck)."""

    violations: tuple[Violation, ...] = ()
    namespace: str | None = None
    table: tuple[str, str, str] | None = None  # (namespace, table or view, location)


def check_catalog_entry(
    key: str, location: str, lakehouse_def: Any, read: Callable[[str], bytes]
) -> EntryCheck:
    """The per-key part of fsck's ``check_catalog``: the key parses under the lakehouse's
    limits, its definition exists, decodes and carries the name the key says."""
    try:
        parsed = K.parse_key(key, lakehouse_def)
    except LakecoreError as exc:
        return EntryCheck((Violation(key, "key-shape", str(exc)),))
    try:
        data = read(location)
    except StorageError:
        raise  # the store failed, not the file: no verdict (see check.py)
    except LakecoreError as exc:
        # Named as the catalog names it: the key itself is padded to the names' full width
        # ("'C===ns1' then 100 spaces, then 't1'").
        what = (
            f"namespace {parsed.namespace!r}"
            if parsed.kind == "namespace"
            else f"{parsed.kind} {parsed.namespace}.{parsed.name}"
        )
        return EntryCheck((Violation(location, "definition-missing", f"{what}: {exc}"),))
    namespace: str | None = None
    table: tuple[str, str, str] | None = None
    try:
        if parsed.view is not None:
            view = decode_view_def(data, location)
            name = view.name
            table = (parsed.namespace, parsed.view, location)
            expected = parsed.view
            if view.view_format not in VIEW_FORMATS:
                return EntryCheck(
                    (
                        Violation(
                            location,
                            "definition-corrupt",
                            f"view {parsed.namespace}.{parsed.view}: view_format "
                            f"{view.view_format!r} is not one of {', '.join(VIEW_FORMATS)}",
                        ),
                    ),
                    None,
                    table,
                )
        elif parsed.table is None:
            name = decode_namespace_def(data, location).name
            namespace = parsed.namespace
            expected = parsed.namespace
        else:
            name = decode_table_def(data, location).name
            table = (parsed.namespace, parsed.table, location)
            expected = parsed.table
    except LakecoreError as exc:
        return EntryCheck((Violation(location, "definition-corrupt", str(exc)),))
    violations: tuple[Violation, ...] = ()
    if name != expected:
        violations = (
            Violation(
                location,
                "definition-name",
                f"key names {expected!r} but the definition says {name!r}",
            ),
        )
    return EntryCheck(violations, namespace, table)


@dataclass
class CatalogPart:
    """The deep checks of one part of a version's resolved map."""

    violations: list[Violation] = field(default_factory=list)
    # Counted, not listed, by rule (see ``CheckReport.unlisted``).
    unlisted: dict[str, int] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    # namespace -> (table, location) of its tables, at most TABLES_PER_NAMESPACE_LIMIT
    tables: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    table_counts: dict[str, int] = field(default_factory=dict)
    keys_checked: int = 0
    # Namespaces the driver saw keys of in this version: their tables are only counted, not
    # listed, so a deep check sends the driver counts instead of every (table, location).
    # Listed again on the driver only in the rare case such a namespace turns out broken.
    keyed_namespaces: frozenset[str] = frozenset()

    def add(self, entry: EntryCheck) -> None:
        self.keys_checked += 1
        self.violations.extend(entry.violations)
        if entry.namespace is not None:
            self.namespaces.add(entry.namespace)
        if entry.table is not None:
            ns, table, location = entry.table
            self.table_counts[ns] = self.table_counts.get(ns, 0) + 1
            if ns in self.keyed_namespaces:
                return
            listed = self.tables.setdefault(ns, [])
            if len(listed) < TABLES_PER_NAMESPACE_LIMIT:
                listed.append((table, location))

    def merge(self, other: CatalogPart) -> None:
        self.violations.extend(other.violations)
        add_counts(self.unlisted, other.unlisted)
        self.namespaces |= other.namespaces
        self.keys_checked += other.keys_checked
        for ns, count in other.table_counts.items():
            self.table_counts[ns] = self.table_counts.get(ns, 0) + count
        for ns, listed in other.tables.items():
            self.tables.setdefault(ns, []).extend(listed)


def check_catalog_items(
    items: Iterable[tuple[str, str]],
    lakehouse_def: Any,
    read: Callable[[str], bytes],
    memo: dict[tuple[str, str], EntryCheck] | None = None,
    keyed_namespaces: frozenset[str] = frozenset(),
) -> CatalogPart:
    """Per-key deep checks of resolved (key, location) pairs. ``memo`` shares the checks of
    pairs seen before (definition files are immutable); the tables of ``keyed_namespaces`` are
    counted, not listed (see ``CatalogPart``)."""
    part = CatalogPart(keyed_namespaces=keyed_namespaces)
    for key, location in items:
        entry = memo.get((key, location)) if memo is not None else None
        if entry is None:
            entry = check_catalog_entry(key, location, lakehouse_def, read)
            if memo is not None:
                memo[(key, location)] = entry
        part.add(entry)
    return part


def namespace_violations(
    parts: Iterable[CatalogPart], list_tables: Callable[[str], list[tuple[str, str]]] | None = None
) -> list[Violation]:
    """Every table's namespace exists: run once all parts of a version are in. A namespace with
    a key whose definition is broken had its tables counted but not listed by the parts;
    ``list_tables`` (namespace -> its first (table, location) pairs) lists them then."""
    total = CatalogPart()
    for part in parts:
        total.merge(part)
    out: list[Violation] = []
    for ns in sorted(total.table_counts):
        if ns in total.namespaces:
            continue
        listed = total.tables.get(ns, [])
        if not listed and list_tables is not None:
            listed = list_tables(ns)[:TABLES_PER_NAMESPACE_LIMIT]
        for table, location in listed:
            out.append(
                Violation(
                    location,
                    "table-namespace",
                    f"{'view' if _is_view_location(location) else 'table'} {ns}.{table} has no "
                    f"namespace {ns!r}",
                )
            )
        missing = total.table_counts[ns] - len(listed)
        if missing > 0:
            out.append(
                Violation(
                    K.NAMESPACE_KEY_PREFIX + ns,
                    "table-namespace",
                    f"{missing} more tables of namespace {ns!r} have no namespace",
                )
            )
    return out


def _is_view_location(location: str) -> bool:
    """Whether a definition location is a view's by lakecore's name for it (a label only)."""
    return location.rsplit("/", 1)[-1][9:14] == "view-"


def catalog_violations(
    items: Iterable[tuple[str, str]], lakehouse_def: Any, read: Callable[[str], bytes]
) -> list[Violation]:
    """fsck's ``check_catalog`` over a whole resolved map, in one process."""
    part = check_catalog_items(items, lakehouse_def, read)
    return part.violations + namespace_violations([part])
