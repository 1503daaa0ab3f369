"""The catalog's side of the rule that no two tables share a folder: each change checks it and
keeps the location registry that lets it be checked without a scan.

``lakecore.maintenance.tables.table_folders`` states the rule, the registry's keys and how the tables a path could
overlap are found; ``lakecore.iceberg.references`` what a commit reads to find the folders it
names files in; this module applies both inside the lakecore transaction of a change.

Rules:

* **Checked in the change's own transaction.** A table's folders (its location and write paths)
  are checked when they are set or moved (``check_folders``: ``create_table``,
  ``register_table``, ``rename_table``, a commit that changes a folder) and a namespace's folder
  when it is made or its ``location`` set (``check_namespace_folder``), against what the
  transaction sees, and the registry entry is written in the same commit: a concurrent change
  that breaks the rule conflicts. A create also checks before any file is written
  (``precheck_folders``).
* **No table or namespace folder in another lakehouse's warehouse** (``lakecore.iceberg.warehouse``):
  a table folder placed explicitly, and every namespace folder, is refused there.
* **The registry is built once per lakehouse**, with the first change that finds none of this
  format (``ensure_registry``): every Iceberg table's metadata and manifests are read
  (``REGISTRY_BUILD_THREADS`` at a time) and the warehouse claimed. A lakehouse whose recorded
  warehouse is another is refused. ``build_registry(restamp=True)`` builds it again on demand
  (the catalog's ``rebuild_location_registry``).
* **A commit records only what is new** (``check_change``): the folders outside the table's
  folders where the files it adds lie; an append under the table's own folders changes no
  definition, and so never conflicts with another table's commit. A folder the table gives up
  counts as outside from then on (it still holds files the metadata names).
* **A table written around the registry is recorded whole** (``written_around_registry``):
  when its stamp (``CHECKED_PROPERTY``) names another metadata file, or it has a folder neither
  its name gives away nor the registry records, its next commit here records its folders and the
  references of every file it names, as the registry's build does.
* Dropping a table drops its registry entries in the same transaction (``drop_with_entries``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Final, Protocol

from pyiceberg.catalog import LOCATION
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata

from lakecore.core.defs import pb
from lakecore.errors import InvalidArgumentError, InvalidLocationError, LakecoreError, StorageError
from lakecore.iceberg.commit_path import CommitPath
from lakecore.iceberg.errors import translated
from lakecore.iceberg.location_checks import LocationChecks
from lakecore.iceberg.metadata_files import MetadataFiles
from lakecore.iceberg.path_rules import normalize_location, physical_location
from lakecore.iceberg.pointer import (
    CHECKED_PROPERTY,
    METADATA_LOCATION_PROPERTY,
    VIEW_LOCATION_PROPERTY,
    identifier_of,
    is_checked,
)
from lakecore.iceberg.references import NamedFiles, ReferenceFinder
from lakecore.iceberg.warehouse import claim_warehouse, claimed_between
from lakecore.lakehouse import Transaction
from lakecore.maintenance.tables.table_folders import (
    MAX_REFERENCE_FOLDERS,
    REGISTRY_FORMAT,
    REGISTRY_MARKER_PROPERTY,
    WAREHOUSE_PROPERTY,
    WRITE_PATH_PROPERTIES,
    FolderRegistry,
    contains,
    default_located_ancestors,
    folders_key,
    folders_property,
    is_registry_key,
    named_by,
    namespace_location_key,
    namespace_name_of_folder,
    overlaps,
    reduce_folders,
    refs_key,
    refs_property,
    registered_folders,
    table_folders,
)

# Threads reading tables' metadata and manifests when the registry is built.
REGISTRY_BUILD_THREADS: Final = 8


class CatalogReader(Protocol):
    """What the location checks read: a transaction (sees its own writes) or a version."""

    def table_exists(self, ns: str, table: str) -> bool: ...
    def load_table(self, ns: str, table: str) -> pb.TableDef: ...
    def list_tables(self, ns: str) -> list[str]: ...
    def list_namespaces(self) -> list[str]: ...
    def namespaces_starting_with(self, name_prefix: str, limit: int | None = None) -> list[str]: ...


@contextmanager
def named_files_read(whose: str) -> Iterator[None]:
    """Reading the manifest lists and manifests ``whose`` names: a file that is missing or is no
    manifest is the client's mistake (``InvalidArgumentError``, nothing was committed); a store
    that fails is ``StorageError``."""
    try:
        yield
    except LakecoreError:
        raise
    except FileNotFoundError as exc:
        raise InvalidArgumentError(
            f"{whose} names a manifest list or manifest that does not exist "
            f"({exc.filename or exc}); write the snapshot's files before committing it"
        ) from exc
    except PermissionError as exc:
        raise InvalidArgumentError(
            f"{whose} names a manifest list or manifest this server may not read "
            f"({exc.filename or exc})"
        ) from exc
    except OSError as exc:
        raise StorageError(
            f"could not read the files {whose} names, to record where they lie "
            f"({type(exc).__name__}: {exc}); retry"
        ) from exc
    except Exception as exc:  # a file that is not Avro, or not a manifest: the reader's error
        raise InvalidArgumentError(
            f"{whose} names a file that is not a readable manifest list or manifest "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
        ) from exc


def drop_with_entries(tx: Transaction, ns: str, name: str) -> None:
    """Drop the table and its registry entries (lakecore.maintenance.tables.table_folders) in ``tx``."""
    tx.drop_table(ns, name)
    for key in (folders_key(ns, name), refs_key(ns, name)):
        if tx.definition_property(key) is not None:
            tx.set_definition_properties({key: None})


class PlacementRules:
    """The location rule between tables and namespaces, and the registry (see the module
    docstring), for one catalog's warehouse."""

    def __init__(
        self,
        warehouse: str,
        path: CommitPath,
        files: MetadataFiles,
        checks: LocationChecks,
    ) -> None:
        self.warehouse = warehouse
        self._path = path
        self._files = files
        self._checks = checks
        self._lakehouse_uri = normalize_location(path.lakehouse.storage.root_uri)

    # -- the location rule (lakecore.maintenance.tables.table_folders) -----------------------------------

    @staticmethod
    def _named_folders(metadata: TableMetadata) -> list[tuple[str, str]]:
        """(what, normalized folder) for each folder of the table."""
        named = [("table location", metadata.location)]
        named += [
            (f"the table property {n}", str(metadata.properties[n]))
            for n in WRITE_PATH_PROPERTIES
            if metadata.properties.get(n)
        ]
        return [(what, normalize_location(folder)) for what, folder in named]

    def folders(self, metadata: TableMetadata) -> list[str]:
        """The table's folders (its location and write paths), normalized and sorted."""
        return sorted({folder for _, folder in self._named_folders(metadata)})

    def _leads_to(self) -> Callable[[str], str]:
        """A function: where a location leads (``physical_location``), spelt from the warehouse
        as this catalog names it when it lies in the warehouse's real folder (the registry, the
        folders and the default-location names are spelt so), else its real location. One name of
        a local file for every spelling and link that reaches it: ``file:////w/t/x``,
        ``file:///w//t/x``, ``file:///w/./t/x`` and a link to ``/w/t`` all lead to ``W/t/x``."""
        warehouse = self.warehouse
        real_warehouse = physical_location(warehouse)

        def leads_to(location: str) -> str:
            real = physical_location(location)
            if real == real_warehouse:
                return warehouse
            if real.startswith(real_warehouse + "/"):
                return warehouse + real[len(real_warehouse) :]
            return real

        return leads_to

    def _physical_forms(self, path: str) -> list[str]:
        """``path`` (normalized) and, when a link on this machine's disk takes it elsewhere,
        where it leads (``_leads_to``): the location rule and purge judge both."""
        leads = self._leads_to()(path)
        return [path] if leads == path else [path, leads]

    def _metadata_of(self, ns: str, name: str, definition: pb.TableDef) -> TableMetadata | None:
        """A table's current metadata (None for a table without Iceberg metadata)."""
        metadata_location = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
        if definition.table_format != "ICEBERG" or not metadata_location:
            return None
        return self._files.table_metadata(identifier_of(ns, name), str(metadata_location))

    def _definition_folders(self, ns: str, name: str, definition: pb.TableDef) -> list[str]:
        """The folders of a table from its current metadata (none for a non-Iceberg table)."""
        metadata = self._metadata_of(ns, name, definition)
        if metadata is None:
            return []
        return sorted(
            normalize_location(r) for r in table_folders(metadata.location, metadata.properties)
        )

    def table_references(self, metadata: TableMetadata, metadata_location: str) -> set[str]:
        """The reference folders of everything a table's metadata names (reads every manifest)."""
        io = self._checks.guarded(self._files.file_io(metadata_location))
        finder = ReferenceFinder(self.warehouse, self.folders(metadata), self._leads_to())
        with named_files_read(f"table metadata {metadata_location}"):
            return finder.named_by_table(io, metadata, metadata_location)

    def _registry(self, tx: Transaction) -> FolderRegistry:
        """The registry as ``tx`` would commit it."""
        properties = dict(tx.lakehouse_def.properties)
        for key, value in tx.definition_changes.items():
            if value is None:
                properties.pop(key, None)
            else:
                properties[key] = value
        return FolderRegistry.of(properties)

    def ensure_registry(self, tx: Transaction) -> FolderRegistry:
        """The registry, built in ``tx`` from every Iceberg table's metadata and manifests when
        the lakehouse has none of this format yet (one scan per lakehouse, committed with the
        change ``tx`` makes, which also claims the warehouse).

        Raises:
            InvalidLocationError: the lakehouse's warehouse is not this catalog's, or another
                lakehouse owns it, or a table lies outside it.
            CorruptFileError: a table's metadata cannot be read.
        """
        registry = self._registry(tx)
        if not registry.complete:
            self.build_registry(tx)
            return self._registry(tx)
        if registry.warehouse != self.warehouse:
            raise InvalidLocationError(
                f"this catalog's warehouse {self.warehouse} is not the lakehouse's: its Iceberg "
                f"tables live in {registry.warehouse}; reopen the catalog with "
                f"warehouse={registry.warehouse} or without the property"
            )
        return registry

    def build_registry(self, tx: Transaction, *, restamp: bool = False) -> None:
        """Write the whole registry in ``tx`` from every table's metadata and manifests,
        replacing any older one, and claim the warehouse. With ``restamp`` a table whose
        definition another writer changed after this catalog checked it is stamped checked
        again (its current state is what the registry now holds)."""
        claim_warehouse(self.warehouse, self._lakehouse_uri, self._files.warehouse_options)
        changes: dict[str, str | None] = {
            key: None for key in tx.lakehouse_def.properties if is_registry_key(key)
        }
        changes[REGISTRY_MARKER_PROPERTY] = REGISTRY_FORMAT
        changes[WAREHOUSE_PROPERTY] = self.warehouse
        tables: list[tuple[str, str, pb.TableDef]] = []
        for ns in tx.list_namespaces():
            location = tx.load_namespace(ns).properties.get(LOCATION)
            if location:
                changes[namespace_location_key(ns)] = normalize_location(str(location))
            tables += [(ns, name, tx.load_table(ns, name)) for name in tx.list_tables(ns)]

        def scan(item: tuple[str, str, pb.TableDef]) -> tuple[list[str], set[str]] | None:
            ns, name, definition = item
            metadata = self._metadata_of(ns, name, definition)
            if metadata is None:
                return None
            location = str(definition.format_properties[METADATA_LOCATION_PROPERTY])
            return self.folders(metadata), self.table_references(metadata, location)

        with ThreadPoolExecutor(REGISTRY_BUILD_THREADS) as pool:
            scanned = list(pool.map(scan, tables))
        for (ns, name, definition), found in zip(tables, scanned, strict=True):
            if found is None:
                continue
            folders, references = found
            outside = [r for r in folders if not r.startswith(self.warehouse + "/")]
            if outside:
                raise InvalidLocationError(
                    f"table {ns}.{name} keeps files in {outside[0]}, outside the warehouse "
                    f"{self.warehouse} this catalog was given: all of a lakehouse's Iceberg tables "
                    "live in its one warehouse; open the catalog with a warehouse that holds every "
                    "table's folders"
                )
            changes.update(folders_property(self.warehouse, ns, name, folders))
            changes.update(
                refs_property(
                    ns, name, reduce_folders(self.warehouse, references, MAX_REFERENCE_FOLDERS)
                )
            )
            current = str(definition.format_properties[METADATA_LOCATION_PROPERTY])
            stamp = definition.format_properties.get(CHECKED_PROPERTY)
            if restamp and stamp is not None and stamp != current:
                tx.update_table(
                    ns, name, format_properties={CHECKED_PROPERTY: current}, checked_by_catalog=True
                )
        tx.set_definition_properties(
            {k: v for k, v in changes.items() if v is not None or k in tx.lakehouse_def.properties}
        )

    def _tables_overlapping(
        self, reader: CatalogReader, registry: FolderRegistry, path: str
    ) -> dict[tuple[str, str], list[str]]:
        """Every live table with a folder overlapping ``path``, with its folders: the registry's,
        the default-located tables at ``path`` and its ancestors, and the tables of every
        namespace whose folder ``path`` contains (see lakecore.maintenance.tables.table_folders)."""
        candidates: dict[tuple[str, str], list[str] | None] = {
            name: folders
            for name, folders in registry.tables.items()
            if any(overlaps(r, path) for r in folders)
        }
        for ns, name, _ in default_located_ancestors(self.warehouse, path):
            candidates.setdefault((ns, name), None)
        for ns in self._namespaces_in_folder(reader, registry, path):
            for name in reader.list_tables(ns):
                candidates.setdefault((ns, name), None)
        return self._live_with_folders(
            reader, candidates, lambda folders: any(overlaps(r, path) for r in folders)
        )

    def _live_with_folders(
        self,
        reader: CatalogReader,
        candidates: Mapping[tuple[str, str], list[str] | None],
        keep: Callable[[list[str]], bool],
    ) -> dict[tuple[str, str], list[str]]:
        """The candidates that exist, with their folders (the registry's, which list only folders
        the name does not give away, joined with the metadata's), where ``keep(folders)``."""
        found: dict[tuple[str, str], list[str]] = {}
        for (ns, name), known in candidates.items():
            try:
                if not reader.table_exists(ns, name):
                    continue
                definition = reader.load_table(ns, name)
            except InvalidArgumentError:  # a path segment that is no valid name names nothing
                continue
            folders = sorted(set(known or []) | set(self._definition_folders(ns, name, definition)))
            if keep(folders):
                found[(ns, name)] = folders
        return found

    def tables_holding(
        self, reader: CatalogReader, registry: FolderRegistry, folder: str
    ) -> dict[tuple[str, str], list[str]]:
        """Every live table with a folder that equals or contains ``folder``: the registry's and
        the default-located tables at ``folder`` and its ancestors (no scan)."""
        candidates: dict[tuple[str, str], list[str] | None] = {
            name: folders
            for name, folders in registry.tables.items()
            if any(contains(r, folder) for r in folders)
        }
        for ns, name, _ in default_located_ancestors(self.warehouse, folder):
            candidates.setdefault((ns, name), None)
        return self._live_with_folders(
            reader, candidates, lambda folders: any(contains(r, folder) for r in folders)
        )

    def _namespaces_in_folder(
        self, reader: CatalogReader, registry: FolderRegistry, path: str
    ) -> list[str]:
        """Namespaces whose folder equals ``path`` or lies inside it."""
        found = set(registry.namespaces_with_folder_in(path))
        if contains(path, self.warehouse):
            found.update(reader.list_namespaces())
            return sorted(found)
        folder = namespace_name_of_folder(self.warehouse, path)
        if folder:
            try:
                names = reader.namespaces_starting_with(folder)
            except InvalidArgumentError:
                names = []
            found.update(n for n in names if n == folder or n.startswith(folder + "."))
        return sorted(found)

    def check_folders(
        self,
        tx: Transaction,
        ns: str,
        name: str,
        metadata: TableMetadata,
        *,
        also_not: tuple[str, str] | None = None,
    ) -> None:
        """The location rule for every folder of table ``ns.name`` (see lakecore.maintenance.tables.table_folders),
        and the registry entry that records its folders, both in ``tx``.

        Raises:
            InvalidLocationError: a folder breaks the rule (the message names the other party).
        """
        registry = self.ensure_registry(tx)
        named = self._named_folders(metadata)
        for what, given in named:
            if named_by(self.warehouse, given) != (ns, name):
                # Placed explicitly: it may lie in a folder another lakehouse claimed, or hold
                # a view's folder (a default location is new: it holds nothing).
                self._refuse_claimed(given, f"{what} {given} of table {ns}.{name}")
                self._refuse_views_inside(tx, given, f"{what} {given} of table {ns}.{name}")
            # Where it leads too: a link to another table's folder shares that folder.
            for form in self._physical_forms(given):
                subject = f"{what} {given}" + (
                    "" if form == given else f" (a symbolic link to {form})"
                )
                namespaces = self._namespaces_in_folder(tx, registry, form)
                if namespaces:
                    raise InvalidLocationError(
                        f"{subject} of table {ns}.{name} equals or contains the folder of namespace "
                        f"{namespaces[0]!r}; a table "
                        "needs a folder of its own (leave the location out for a default one)"
                    )
                others = {
                    k: v
                    for k, v in self._tables_overlapping(tx, registry, form).items()
                    if k not in ((ns, name), also_not)
                }
                if others:
                    (other_ns, other_name), theirs = next(iter(sorted(others.items())))
                    clash = next(r for r in theirs if overlaps(r, form))
                    raise InvalidLocationError(
                        f"{subject} of table {ns}.{name} overlaps {clash}, a folder of table "
                        f"{other_ns}.{other_name}: tables never "
                        "share a folder (a purge of one would delete the other's files); choose another location"
                    )
        tx.set_definition_properties(
            folders_property(self.warehouse, ns, name, [folder for _, folder in named])
        )

    def _refuse_views_inside(self, tx: Transaction, table_folder: str, subject: str) -> None:
        """Refuse a table folder that equals or contains a view's folder: table maintenance
        deletes the files under a table's folders that no table's metadata names, a view's
        metadata among them. Reads every view definition (views are few; only an explicitly
        placed folder asks)."""
        for view_ns, view_name in tx.all_views():
            definition = tx.load_view(view_ns, view_name)
            properties = definition.format_properties
            folders = [properties.get(VIEW_LOCATION_PROPERTY)]
            metadata = properties.get(METADATA_LOCATION_PROPERTY)
            if metadata:
                folders.append(metadata.rsplit("/", 1)[0])
            for folder in folders:
                if folder and contains(table_folder, normalize_location(folder)):
                    raise InvalidLocationError(
                        f"{subject} holds {folder}, a folder of view {view_ns}.{view_name}: "
                        "table maintenance deletes files in a table's folders that no table "
                        "names; choose another location"
                    )

    def _refuse_claimed(self, folder: str, what: str) -> None:
        """Refuse a folder inside another lakehouse's warehouse (lakecore.iceberg.warehouse)."""
        claim = claimed_between(
            self.warehouse, folder, self._lakehouse_uri, self._files.warehouse_options
        )
        if claim is not None:
            raise InvalidLocationError(
                f"{what} lies in {claim.folder}, the Iceberg warehouse of the lakehouse at "
                f"{claim.lakehouse}: a table never keeps files in another lakehouse's warehouse; "
                "choose another location"
            )

    def check_namespace_folder(self, tx: Transaction, ns: str, folder: str, what: str) -> None:
        """A namespace's folder is where its tables go: it may not equal or lie inside a table's
        folder (that table's purge would then reach the namespace's tables), nor another
        lakehouse's warehouse.

        Raises:
            ValidationError: it does (pyiceberg's type already: a namespace operation maps
                lakecore's invalid-argument errors to NoSuchNamespaceError, for bad names).
        """
        with translated():
            registry = self.ensure_registry(tx)
            for form in self._physical_forms(folder):
                holders = self.tables_holding(tx, registry, form)
                if holders:
                    (other_ns, other_name), theirs = next(iter(sorted(holders.items())))
                    clash = next(r for r in theirs if contains(r, form))
                    where = "is" if clash == form else f"lies inside {clash},"
                    link = "" if form == folder else f" (a symbolic link to {form})"
                    raise InvalidLocationError(
                        f"{what} {folder}{link} of namespace {ns!r} {where} a folder of table "
                        f"{other_ns}.{other_name}: a namespace's tables never go inside another "
                        "table's folder; choose another location"
                    )
            self._refuse_claimed(folder, f"{what} {folder} of namespace {ns!r}")

    def record_namespace_location(self, tx: Transaction, ns: str, location: Any) -> None:
        """Record (or with None, forget) a namespace's own folder in the registry, in ``tx``,
        after checking it (``check_namespace_folder``)."""
        key = namespace_location_key(ns)
        if location:
            folder = normalize_location(str(location))
            self.check_namespace_folder(tx, ns, folder, "the location")
            tx.set_definition_properties({key: folder})
        elif tx.definition_property(key) is not None:
            tx.set_definition_properties({key: None})

    def written_around_registry(
        self,
        ns: str,
        name: str,
        definition: pb.TableDef | None,
        metadata: TableMetadata,
        definition_property: Callable[[str], str | None],
    ) -> bool:
        """Whether code that does not keep the registry (a client of an older lakecore) changed
        the table since this catalog checked it: its stamp (``CHECKED_PROPERTY``) names another
        metadata file, or, with a complete registry, it has a folder that neither its name gives
        away nor the registry records (every folder this catalog, or the registry's build, saw is
        recorded). Property lookups only, no read."""
        if not is_checked(definition):
            return True
        if definition_property(REGISTRY_MARKER_PROPERTY) != REGISTRY_FORMAT:
            return False  # the build that comes with the next change reads the table as it is
        recorded = definition_property(folders_key(ns, name))
        known = set(json.loads(recorded)) if recorded else set()
        return (
            not set(registered_folders(self.warehouse, ns, name, self.folders(metadata))) <= known
        )

    def precheck_folders(self, ns: str, name: str, metadata: TableMetadata) -> None:
        """The rule, before any file is written (the commit checks again)."""
        with translated():
            tx = self._path.scratch_lakehouse().transaction()
            try:
                self.check_folders(tx, ns, name, metadata)
            finally:
                tx.abort()

    def check_change(
        self,
        tx: Transaction,
        ns: str,
        name: str,
        definition: pb.TableDef | None,
        current: Table | None,
        staged: Table,
        prefetched: NamedFiles | None = None,
    ) -> None:
        """What a commit of ``staged`` over ``current`` (None: a create) checks and records in
        ``tx``: the lakehouse's warehouse is this catalog's; the location rule when the folders
        change; and the reference folders (lakecore.iceberg.references) of the files the commit
        adds. A table other code wrote around the registry (``written_around_registry``) is
        recorded whole, as the registry's build records a table: its folders, and the references
        of every file it names. The registry changes only for something not yet recorded: an
        append that writes under the table's own folders changes no definition, and so never
        conflicts with another table's commit.

        Raises:
            InvalidLocationError: a folder breaks the rule, or the warehouse is not this
                catalog's.
        """
        # Three property lookups, not the whole registry: this runs for every commit.
        recorded = tx.definition_property(WAREHOUSE_PROPERTY)
        if recorded is not None and recorded != self.warehouse:
            self.ensure_registry(tx)  # refuses: the lakehouse's warehouse is another
        adopted = current is not None and self.written_around_registry(
            ns, name, definition, current.metadata, tx.definition_property
        )
        own_folders = self.folders(staged.metadata)
        if current is None or own_folders != self.folders(current.metadata):
            self.check_folders(tx, ns, name, staged.metadata)
        elif adopted:
            # Recorded as the registry's build records a table: the folders it already has are
            # not judged (it cannot move), only what this commit changes is.
            self.ensure_registry(tx)
            tx.set_definition_properties(folders_property(self.warehouse, ns, name, own_folders))
        recorded_refs = tx.definition_property(refs_key(ns, name))
        known = json.loads(recorded_refs) if recorded_refs else []
        finder = ReferenceFinder(self.warehouse, own_folders, self._leads_to(), known, prefetched)
        if current is not None:
            # A folder given up (a write path moved elsewhere) still holds files the metadata
            # names, now outside the table's folders: another table may take the folder later.
            finder.add_folders(self.folders(current.metadata))
        io = self._checks.guarded(staged.io)
        with named_files_read(f"the commit to table {ns}.{name}"):
            if adopted:
                folders = finder.named_by_table(io, staged.metadata, staged.metadata_location)
            else:
                folders = finder.added_by_commit(
                    io,
                    None if current is None else current.metadata,
                    staged.metadata,
                    staged.metadata_location,
                )
        if all(any(contains(k, f) for k in known) for f in folders):
            return
        known = self.ensure_registry(tx).refs.get((ns, name), [])
        merged = reduce_folders(self.warehouse, [*known, *folders], MAX_REFERENCE_FOLDERS)
        tx.set_definition_properties(refs_property(ns, name, merged))


__all__ = ["REGISTRY_BUILD_THREADS", "CatalogReader", "PlacementRules", "drop_with_entries"]
