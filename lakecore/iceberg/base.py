"""What every part of ``LakecoreCatalog`` stands on: opening the catalog, the version its reads
see, the read-only rule, the retried change, and identifiers.

Rules:

* **Opening.** ``uri`` is the lakehouse root; there must be a lakehouse there, unless
  ``lakecore.create=true`` (``lakecore.iceberg.properties``), which creates it (another
  process creating it first is no error).
* **One warehouse per lakehouse.** The lakehouse's recorded warehouse is the catalog's; a
  catalog given another is refused when it opens. Before the first change records one, the
  warehouse is the one given, else ``<uri>/warehouse``. It must be qualified and out of
  lakecore's directories (``lakecore.iceberg.path_rules``).
* **Which version reads see.** The latest, refreshed at each read; with ``version=`` or
  ``as_of=`` that one version, for every read.
* **Read-only.** A catalog at a past version, or over an exported copy, refuses every change
  with ``ReadOnlyCatalogError`` before anything is written; its tables are ``ReadOnlyTable``,
  which refuse a write before pyiceberg writes a data file for it.
* **Changes are retried.** A catalog operation other than a commit runs in a lakecore
  transaction on the latest version; on a conflict it runs again on the new latest version, up
  to ``CATALOG_OP_ATTEMPTS`` times (it re-checks what it relies on, so a rerun is what the
  caller asked for). ``commit_table`` never reruns itself: pyiceberg must re-apply its changes
  to the new metadata (``lakecore.iceberg.commits``).
* **Identifiers.** A namespace identifier's levels are joined with ``.``
  (``lakecore.namespaces``); an empty one is ``NoSuchNamespaceError``, as pyiceberg's catalogs
  say. A table identifier is its namespace's levels, then the table's name; one without a
  namespace is ``NoSuchNamespaceError`` where a table is to be made, ``NoSuchTableError`` where
  one is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pyiceberg.catalog import WAREHOUSE_LOCATION, Catalog, MetastoreCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
    ValidationError,
)
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Identifier

from lakecore import namespaces as NS
from lakecore.defs import pb
from lakecore.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidLocationError,
    NoLakehouseError,
    ReadOnlyLakehouseError,
)
from lakecore.iceberg.errors import ReadOnlyCatalogError, translated
from lakecore.iceberg.guarded_io import GuardedFileIO
from lakecore.iceberg.path_rules import (
    canonical_location,
    check_qualified,
    check_warehouse_location,
    normalize_location,
    refuse_lakecore_directory,
)
from lakecore.iceberg.pointer import read_metadata, require_iceberg
from lakecore.iceberg.properties import (
    AS_OF_PROPERTY,
    CREATE_PROPERTY,
    VERSION_PROPERTY,
    as_of_millis,
    refuse_misspelt_properties,
    storage_options_of,
    version_number,
)
from lakecore.iceberg.roots import WRITE_PATH_PROPERTIES, Registry
from lakecore.iceberg.transforms import check_new_transforms
from lakecore.keys import namespace_name_max_bytes
from lakecore.lakehouse import Lakehouse, LakehouseView, Transaction
from lakecore.view import read_root_and_def, store_for

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import Transaction as IcebergTransaction

T = TypeVar("T")

DEFAULT_WAREHOUSE_DIRECTORY: Final = "warehouse"
# Catalog operations other than commit_table re-run on a conflict (they re-check existence
# against the new state, so a rerun is what the caller asked for); commit_table never does:
# pyiceberg must re-apply its changes to the new metadata itself.
CATALOG_OP_ATTEMPTS: Final = 5


class ReadOnlyTable(Table):
    """A table of a read-only catalog. Its writes are refused before pyiceberg writes a data
    file: an append writes its data files first and, when the commit is refused, deletes its
    manifests but not those files (they would stay in the live table's directory, which an
    exported copy's metadata also names)."""

    def transaction(self) -> IcebergTransaction:
        catalog = self.catalog
        assert isinstance(catalog, CatalogBase)
        catalog._refuse_read_only(f"write to table {'.'.join(self.name())}")
        return super().transaction()  # the catalog became writable: not for a version or a copy


class CatalogBase(MetastoreCatalog):
    """The state and the shared steps of ``LakecoreCatalog`` (see the module docstring); the
    catalog's operations are in the modules that subclass it."""

    def __init__(self, name: str, **properties: Any) -> None:
        """Open the lakehouse at ``properties["uri"]``.

        Raises:
            ValidationError: no ``uri``, unusable options, or a warehouse in a lakecore directory.
            lakecore.errors.NotFoundError: no lakehouse at ``uri`` (and ``lakecore.create`` is
                not "true"), or the requested version does not exist or was expired.
        """
        storage_options = properties.pop("storage_options", None)
        refuse_misspelt_properties(properties)
        super().__init__(name, **properties)
        # Writers only (commits and other changes): the Lakehouse object they commit through
        # moves with each commit. Reads never take it: they read their own view of the latest
        # version (``_read``), so no read waits for a commit's storage IO.
        self._write_lock = threading.RLock()
        uri = properties.get("uri")
        if not uri:
            raise ValidationError(
                "LakecoreCatalog needs a 'uri': the lakehouse root, such as s3://bucket/lake"
            )
        try:
            options = storage_options_of(
                {**properties, "storage_options": storage_options}
                if storage_options is not None
                else properties
            )
            self._lakehouse = self._open(
                str(uri), options, str(properties.get(CREATE_PROPERTY, "")).lower() == "true"
            )
            self._view: LakehouseView | None = None
            version, as_of = properties.get(VERSION_PROPERTY), properties.get(AS_OF_PROPERTY)
            if version is not None and as_of is not None:
                raise InvalidArgumentError(
                    f"give '{VERSION_PROPERTY}' or '{AS_OF_PROPERTY}', not both"
                )
            if version is not None:
                self._view = self._lakehouse.at_version(version_number(version))
            elif as_of is not None:
                self._view = self._lakehouse.as_of(as_of_millis(as_of))
            root = self._lakehouse.storage.root_uri
            self._storage_options = options
            self.warehouse = self._warehouse_of(properties.get(WAREHOUSE_LOCATION))
            check_qualified(self.warehouse, "the warehouse")
            refuse_lakecore_directory(self.warehouse, root, "the warehouse")
        except InvalidArgumentError as exc:
            raise ValidationError(str(exc)) from exc
        self.properties[WAREHOUSE_LOCATION] = self.warehouse

    def _warehouse_of(self, given: Any) -> str:
        """The lakehouse's recorded warehouse, or the one given (default ``<uri>/warehouse``)
        until a first change records it; a warehouse given that differs from the recorded one
        is refused: every Iceberg table of a lakehouse lives in its one warehouse."""
        recorded = Registry.of(self._lakehouse.lakehouse_def.properties).warehouse
        if recorded is None:
            root = self._lakehouse.storage.root_uri
            if given:  # before it is recorded for good: every table location starts with it
                canonical_location(str(given), "the warehouse")
            return normalize_location(str(given or root + DEFAULT_WAREHOUSE_DIRECTORY))
        if given and normalize_location(str(given)) != recorded:
            raise InvalidLocationError(
                f"the warehouse {given} is not this lakehouse's: its Iceberg tables live in "
                f"{recorded} (recorded at its first catalog change); give warehouse={recorded} or "
                "leave the property out"
            )
        return recorded

    @staticmethod
    def _open(uri: str, options: dict[str, Any] | None, create: bool) -> Lakehouse:
        try:
            return Lakehouse.open(uri, storage_options=options)
        except NoLakehouseError:  # not a missing bucket: creating would not help there
            if not create:
                raise NoLakehouseError(
                    f"there is no lakehouse at {uri}: create one (`lakecore init`, Lakehouse.create) or set "
                    f"the catalog property {CREATE_PROPERTY}=true"
                ) from None
        try:
            return Lakehouse.create(uri, storage_options=options)
        except AlreadyExistsError:  # another process created it first
            return Lakehouse.open(uri, storage_options=options)

    # -- identity and state -----------------------------------------------------------------

    @property
    def lakehouse(self) -> Lakehouse:
        """The lakehouse object this catalog commits through (at its last refresh)."""
        return self._lakehouse

    @property
    def read_only_version(self) -> int | None:
        """The lakehouse version of a time-travel catalog; None for the live catalog."""
        return None if self._view is None else self._view.version

    def _read(self) -> LakehouseView:
        """The version reads see: the fixed one, or the latest (a view of its own, read without
        the write lock: see ``_latest_view``)."""
        if self._view is not None:
            return self._view
        return self._latest_view()

    def _latest_view(self) -> LakehouseView:
        """A read-only view of the latest version, independent of the Lakehouse object writers
        commit through (which moves under them while they hold the write lock)."""
        storage = self._lakehouse.storage
        root, lakehouse_def = read_root_and_def(storage, None)
        return LakehouseView(storage, root, lakehouse_def, store_for(storage, lakehouse_def))

    def _scratch_lakehouse(self) -> Lakehouse:
        """A Lakehouse object of its own at the latest version, for a transaction that only
        checks and is aborted (it never commits, so it needs no write lock)."""
        view = self._latest_view()
        return Lakehouse(view.storage, view.root_info, view.lakehouse_def, view.store)

    def _read_only_why(self, what: str) -> str | None:
        """Why ``what`` is refused (a time-travel catalog, an exported copy); None if it is not."""
        if self._view is not None:
            return (
                f"{what}: this catalog is read-only, opened at lakehouse version {self._view.version}; "
                "open it without 'version'/'as_of' to make changes"
            )
        try:
            self._lakehouse.require_writable(what)
        except ReadOnlyLakehouseError as exc:
            return str(exc)
        return None

    def _refuse_read_only(self, what: str) -> None:
        why = self._read_only_why(what)
        if why is not None:
            raise ReadOnlyCatalogError(why)

    def _change(self, what: str, change: Callable[[Transaction], T], **translate: Any) -> T:
        """Run ``change`` in a lakecore transaction on the latest version and commit it; on a
        conflict run it again on the new latest version (it re-checks what it relies on)."""
        self._refuse_read_only(what)
        with self._write_lock:
            for attempt in range(CATALOG_OP_ATTEMPTS):
                tx = self._lakehouse.refresh().transaction()
                try:
                    with translated(**translate):
                        try:
                            result = change(tx)
                        except BaseException:
                            tx.abort()
                            raise
                        tx.commit()
                    return result
                except CommitFailedException:
                    if attempt == CATALOG_OP_ATTEMPTS - 1:
                        raise
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- names --------------------------------------------------------------------------------

    def _namespace(
        self, namespace: str | Identifier, err: type[Exception] = NoSuchNamespaceError
    ) -> str:
        """The stored name of a namespace to read or change (its levels joined with ``.``,
        ``lakecore.namespaces``). Reads take any stored name, including one from before
        namespaces nested; a new name is checked by ``_new_namespace``.

        Raises:
            NoSuchNamespaceError: an empty identifier (pyiceberg's type for it).
        """
        parts = Catalog.identifier_to_tuple(namespace)
        if not parts or not any(p.strip() for p in parts):
            raise NoSuchNamespaceError(f"Empty namespace identifier: {namespace!r}")
        return NS.join(parts)

    def _new_namespace(self, namespace: str | Identifier) -> str:
        """The stored name of a namespace to create.

        Raises:
            NoSuchNamespaceError: an empty identifier or an empty level.
            ValidationError: a level holds ``.``, or the name breaks the name rule (too long,
                a space or a control character).
        """
        parts = Catalog.identifier_to_tuple(namespace)
        blank = [i + 1 for i, p in enumerate(parts) if not p.strip()]
        if not parts or blank:
            which = f"level {blank[0]} of {len(parts)} is empty; " if len(parts) > 1 else ""
            raise NoSuchNamespaceError(
                f"Empty namespace identifier: {namespace!r} ({which}every level needs a name)"
            )
        max_bytes = namespace_name_max_bytes(self._lakehouse.lakehouse_def)
        try:
            return NS.check_new_levels(parts, max_bytes)
        except InvalidArgumentError as exc:
            raise ValidationError(str(exc)) from exc

    def _table(
        self, identifier: str | Identifier, err: type[Exception] = NoSuchTableError
    ) -> tuple[str, str]:
        """(namespace, table) of an identifier: every level but the last is the namespace.

        Raises:
            ``err``: the identifier has no namespace (NoSuchNamespaceError where a table is
                to be made, NoSuchTableError where one is read).
        """
        parts = Catalog.identifier_to_tuple(identifier)
        if len(parts) < 2 or not all(p.strip() for p in parts[:-1]):
            detail = f"table identifier {'.'.join(parts)!r} has no namespace"
            if err is NoSuchTableError:
                raise NoSuchTableError(f"Table does not exist: {'.'.join(parts)} ({detail})")
            raise err(f"{detail}: a table identifier is 'namespace.table'")
        return NS.join(parts[:-1]), parts[-1]

    # -- tables -------------------------------------------------------------------------------

    def _table_from(self, identifier: Identifier, definition: pb.TableDef) -> Table:
        metadata_location = require_iceberg(identifier, definition)
        io = self._load_file_io(location=metadata_location)
        metadata = read_metadata(io, ".".join(identifier), metadata_location)
        table_class = Table if self._read_only_why("change a table") is None else ReadOnlyTable
        return table_class(
            identifier=identifier,
            metadata=metadata,
            metadata_location=metadata_location,
            io=self._load_file_io(metadata.properties, metadata_location),
            catalog=self,
        )

    # -- locations ----------------------------------------------------------------------------

    def check_location(self, location: str, what: str, *, strict: bool = True) -> None:
        """Refuse a location that is not canonical (with ``strict``, every location a client
        names), outside the warehouse, the warehouse itself, or one inside lakecore's own
        directories (``lakecore.iceberg.path_rules``).

        Raises:
            ValidationError: with the reason.
        """
        with translated():
            check_warehouse_location(
                location, what, self.warehouse, self._lakehouse.storage.root_uri, strict=strict
            )

    def _check_metadata(
        self, metadata: TableMetadata, metadata_location: str, base: TableMetadata | None = None
    ) -> None:
        """The rules for what ``metadata`` holds that ``base`` (the metadata it replaces; None
        for a new table) did not: the location rules for its metadata file, its location and
        write paths, and the manifest lists and statistics files it adds, checked before any of
        them is read or written (``lakecore.iceberg.path_rules``); and the transforms of the
        partition specs and sort orders it adds (``lakecore.iceberg.transforms``). What
        ``base`` already held was checked when it was committed (or predates the rules: a table
        from before them keeps working).

        Raises:
            ValidationError: a location is not canonical, or lies outside the warehouse; a
                transform is unknown or does not apply to its column.
        """
        check_new_transforms(metadata, base)
        # What the client gave first, so that the message names it (the metadata location is
        # derived from the table location).
        if base is None or metadata.location != base.location:
            self.check_location(metadata.location, "table location")
        for name in WRITE_PATH_PROPERTIES:
            path = metadata.properties.get(name)
            if path and (base is None or base.properties.get(name) != path):
                self.check_location(str(path), f"the table property {name}")
        self.check_location(metadata_location, "metadata location")
        known = set() if base is None else {s.manifest_list for s in base.snapshots}
        for snapshot in metadata.snapshots:
            if snapshot.manifest_list not in known:
                self.check_location(
                    snapshot.manifest_list, f"the manifest list of snapshot {snapshot.snapshot_id}"
                )
        known_stats = (
            set()
            if base is None
            else {s.statistics_path for s in [*base.statistics, *base.partition_statistics]}
        )
        for stats in [*metadata.statistics, *metadata.partition_statistics]:
            if stats.statistics_path not in known_stats:
                self.check_location(
                    stats.statistics_path,
                    f"the statistics file of snapshot {stats.snapshot_id}",
                )

    @staticmethod
    def _canonical(location: str | None, what: str) -> str | None:
        """``location`` in its canonical form (``lakecore.iceberg.path_rules``), None for None.

        Raises:
            ValidationError: it has no canonical form (a query, an escape, a '..', ...).
        """
        if location is None:
            return None
        with translated():
            return canonical_location(location, what)

    def _guarded(self, io: FileIO) -> GuardedFileIO:
        """``io`` for reading files a client named: each checked before it is opened
        (``lakecore.iceberg.guarded_io``)."""
        return GuardedFileIO(io, self.check_location)

    def _location_allowed(self, location: str) -> bool:
        """Whether a purge may delete at ``location`` (qualified, in the warehouse, out of
        lakecore's directories; not necessarily canonical: see ``check_warehouse_location``)."""
        try:
            self.check_location(location, "location", strict=False)
        except ValidationError:
            return False
        return True


__all__ = ["CATALOG_OP_ATTEMPTS", "CatalogBase", "ReadOnlyTable"]
