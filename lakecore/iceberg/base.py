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
* **Which version reads see.** The latest, as of a check that started after the read was
  asked for (``lakecore.lakehouse.latest``: one request when nothing changed, shared by the
  reads that wait for it); with ``version=`` or ``as_of=`` that one version, for every read.
  Reads take no lock a change holds. What a read finds never changes once written (nodes,
  definitions, Iceberg metadata files), so it is cached (``METADATA_CACHE_BYTES`` of metadata).
* **Read-only.** A catalog at a past version, or over an exported copy, refuses every change
  with ``ReadOnlyCatalogError`` before anything is written; its tables are ``ReadOnlyTable``,
  which refuse a write before pyiceberg writes a data file for it.
* **Changes are grouped.** Every change (a commit, a create, a drop, ...) is a unit of the
  group committer (``lakecore.lakehouse.group_commit``): the changes that arrive while a root
  write is in flight share the next lakehouse version, each staged on what its batch built
  before it. When another writer changed what a batch changes, the batch is staged again on
  the new latest version: each change re-checks what it relies on, so a rerun is what the
  caller asked for (``commit_table`` re-applies the caller's updates to the new metadata and
  checks its requirements against it).
* **FileIO.** The catalog's FileIO is made from its own properties, one per scheme, never from
  a table's properties (a table's writers choose those).
* **Identifiers.** A namespace identifier's levels are joined with ``.``
  (``lakecore.core.namespaces``); an empty one is ``NoSuchNamespaceError``, as pyiceberg's catalogs
  say. A table identifier is its namespace's levels, then the table's name; one without a
  namespace is ``NoSuchNamespaceError`` where a table is to be made, ``NoSuchTableError`` where
  one is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlparse

from pyiceberg.catalog import WAREHOUSE_LOCATION, Catalog, MetastoreCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
    ValidationError,
)
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import Compressor
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import AddSnapshotUpdate
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties
from pyiceberg.utils.config import Config

from lakecore.core import namespaces as NS
from lakecore.core.defs import pb
from lakecore.core.keys import namespace_name_max_bytes
from lakecore.core.sized_lru import SizedLRU
from lakecore.core.storage import Storage
from lakecore.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidLocationError,
    NoLakehouseError,
    ReadOnlyLakehouseError,
)
from lakecore.iceberg.errors import ReadOnlyCatalogError, translated
from lakecore.iceberg.guarded_io import GuardedFileIO, sync_local_file
from lakecore.iceberg.path_rules import (
    canonical_location,
    check_qualified,
    check_warehouse_location,
    normalize_location,
    refuse_lakecore_directory,
)
from lakecore.iceberg.pointer import read_metadata_bytes, read_metadata_sized, require_iceberg
from lakecore.iceberg.properties import (
    AS_OF_PROPERTY,
    CREATE_PROPERTY,
    VERSION_PROPERTY,
    as_of_millis,
    full_check_seconds,
    group_commit_policy,
    refuse_misspelt_properties,
    storage_options_of,
    version_number,
)
from lakecore.iceberg.references import read_named_files
from lakecore.iceberg.storage_settings import is_s3, s3_settings
from lakecore.iceberg.table_folders import WRITE_PATH_PROPERTIES, FolderRegistry
from lakecore.iceberg.transforms import check_new_transforms
from lakecore.lakehouse import Lakehouse, LakehouseView, Transaction
from lakecore.lakehouse.group_commit import Batch, CommitStats, GroupCommitter
from lakecore.lakehouse.latest import LatestVersion

if TYPE_CHECKING:
    from pyiceberg.table import Transaction as IcebergTransaction

T = TypeVar("T")

DEFAULT_WAREHOUSE_DIRECTORY: Final = "warehouse"
# Iceberg metadata files kept decoded, by the size of their JSON: a table of a few hundred
# snapshots has some 100 KB, so 256 MiB holds those of thousands of busy tables.
METADATA_CACHE_BYTES: Final = 256 << 20


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
        uri = properties.get("uri")
        if not uri:
            raise ValidationError(
                "LakecoreCatalog needs a 'uri': the lakehouse root, such as s3://bucket/lake"
            )
        try:
            explicit = storage_options_of(
                {**properties, "storage_options": storage_options}
                if storage_options is not None
                else properties
            )
            settings = s3_settings(explicit, properties)
            options = settings.lakecore_options() if is_s3(str(uri)) else explicit
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
            self.storage_settings = settings
            # The warehouse's files with the same settings as the lakehouse's, lakecore's
            # storage and pyiceberg's FileIO alike.
            self._warehouse_options = (
                settings.lakecore_options() if is_s3(self.warehouse) else options
            )
            if is_s3(self.warehouse) or is_s3(str(uri)):
                for key, value in settings.fileio_properties().items():
                    self.properties.setdefault(key, value)
            check_qualified(self.warehouse, "the warehouse")
            refuse_lakecore_directory(self.warehouse, root, "the warehouse")
            max_batch, max_wait_seconds = group_commit_policy(properties)
            full_check = full_check_seconds(properties)
        except InvalidArgumentError as exc:
            raise ValidationError(str(exc)) from exc
        self.properties[WAREHOUSE_LOCATION] = self.warehouse
        # Reads learn the latest version from here (one request per check, shared); the
        # Lakehouse object is the committer's alone (``_begin_batch``), so no read waits for a
        # commit's IO and no lock is shared between them.
        self._latest = LatestVersion(self._lakehouse.storage, full_check_seconds=full_check)
        self._latest.installed(self._lakehouse.root_info, self._lakehouse.lakehouse_def)
        self._committer = GroupCommitter(
            self._begin_batch,
            self._commit_batch,
            self._batch_landed,
            max_batch=max_batch,
            max_wait_seconds=max_wait_seconds,
            retryable=(CommitFailedException,),
            unknown=(CommitStateUnknownException,),
            stale=self._latest.suspect,
        )
        self._metadata_cache = SizedLRU[str, TableMetadata](METADATA_CACHE_BYTES)
        # The metadata files of the batch being staged, by location, until they are written.
        self._staged_metadata: dict[str, TableMetadata] = {}
        self._legacy_snapshot_id = Config().get_bool("legacy-current-snapshot-id") or False
        self._file_ios: dict[str, FileIO] = {}
        self._warehouse_files: Storage | None = None

    def _warehouse_of(self, given: Any) -> str:
        """The lakehouse's recorded warehouse, or the one given (default ``<uri>/warehouse``)
        until a first change records it; a warehouse given that differs from the recorded one
        is refused: every Iceberg table of a lakehouse lives in its one warehouse."""
        recorded = FolderRegistry.of(self._lakehouse.lakehouse_def.properties).warehouse
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
        """A read-only view of the latest version, as of a check that started after this call
        (``LatestVersion``: one request when nothing changed, shared by concurrent reads),
        independent of the Lakehouse object the committer moves."""
        return self._latest.view()

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
        """Run ``change`` in the transaction of the group committer's next batch and commit it
        with the batch; when another writer changed what the batch changes, it runs again on
        the new latest version (it re-checks what it relies on)."""
        self._refuse_read_only(what)

        def apply(batch: Batch) -> T:
            with translated(**translate):
                return change(batch.tx)

        return self._committer.run(apply)

    # -- the committer's side: one transaction a batch ----------------------------------------

    def _begin_batch(self) -> Transaction:
        """A transaction on the latest version, for the committer (its thread alone moves the
        Lakehouse object)."""
        self._staged_metadata = {}
        view = self._latest.view()
        if view.version != self._lakehouse.version:
            self._lakehouse.move_to(view)
        return self._lakehouse.transaction()

    @staticmethod
    def _commit_batch(tx: Transaction) -> None:
        with translated(in_commit=True):
            tx.commit()

    def _batch_landed(self, tx: Transaction) -> None:
        if tx.outcome is not None:
            self._latest.installed(self._lakehouse.root_info, self._lakehouse.lakehouse_def)

    @property
    def commit_stats(self) -> CommitStats:
        """What the group committer did (batches, their sizes, conflicts), for metrics."""
        return self._committer.stats

    # -- names --------------------------------------------------------------------------------

    def _namespace(
        self, namespace: str | Identifier, err: type[Exception] = NoSuchNamespaceError
    ) -> str:
        """The stored name of a namespace to read or change (its levels joined with ``.``,
        ``lakecore.core.namespaces``). Reads take any stored name, including one from before
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

    def _table_from(
        self, identifier: Identifier, definition: pb.TableDef, *, cached: bool = True
    ) -> Table:
        """The table a definition names, at its current metadata. ``cached=False`` reads the
        metadata file as it is now: what a purge deletes is decided from the file, not from a
        copy (a file changed in place behind the catalog's back must show)."""
        metadata_location = require_iceberg(identifier, definition)
        if cached:
            metadata = self._metadata_at(identifier, metadata_location)
        else:
            io = self._load_file_io(location=metadata_location)
            metadata = read_metadata_sized(io, ".".join(identifier), metadata_location)[0]
        table_class = Table if self._read_only_why("change a table") is None else ReadOnlyTable
        return table_class(
            identifier=identifier,
            metadata=metadata,
            metadata_location=metadata_location,
            io=self._load_file_io(location=metadata_location),
            catalog=self,
        )

    def _metadata_at(self, identifier: Identifier, location: str) -> TableMetadata:
        """The metadata file at ``location`` (immutable once written: cached, at most
        ``METADATA_CACHE_BYTES`` of them by their size in JSON). A file the batch being staged
        has yet to write is answered from what it staged: nothing committed names its (unique)
        location before the batch's root, so only the batch's own checks ask for it."""
        staged = self._staged_metadata.get(location)
        if staged is not None:
            return staged
        cached = self._metadata_cache.get(location)
        if cached is not None:
            return cached[0]
        inside = self._warehouse_path(location)
        if inside is None or location.startswith("file:"):
            io = self._load_file_io(location=location)
            metadata, size = read_metadata_sized(io, ".".join(identifier), location)
        else:
            metadata, size = read_metadata_bytes(
                self._warehouse_storage().read, inside, ".".join(identifier), location
            )
        self._metadata_cache.put(location, metadata, size)
        return metadata

    def _write_new_metadata(self, metadata: TableMetadata, io: FileIO, metadata_path: str) -> None:
        """Write a new metadata file and keep it in the cache: the commit's next reader finds it
        without a read. On an object store, a file in the warehouse (every file this catalog
        places) goes through lakecore's storage: one request (pyarrow's FileIO makes three, a
        multipart upload, for any size). On a local disk it is synced before the root that will
        name it is written (pyarrow's local writes are not)."""
        # As pyiceberg's ToOutputFile writes it (its legacy option, its compression by name).
        text = metadata.model_dump_json(exclude_none=not self._legacy_snapshot_id).encode("utf-8")
        data = Compressor.get_compressor(metadata_path).bytes_compressor()(text)
        inside = self._warehouse_path(metadata_path)
        if inside is not None and not metadata_path.startswith("file:"):
            self._warehouse_storage().write(inside, data)
        else:
            # Every metadata location is new (a version number and a UUID): no file is there
            # to keep, and not asking whether one is saves a request on an object store.
            with io.new_output(metadata_path).create(overwrite=True) as out:
                out.write(data)
            sync_local_file(metadata_path)
        self._metadata_cache.put(metadata_path, metadata, len(text))

    def warm_up(self) -> None:
        """Make the FileIO for the warehouse's scheme now, not in the first request that needs
        one (importing pyarrow's costs about a CPU-second): a server calls it at start."""
        self._load_file_io(location=self.warehouse)

    def _warehouse_path(self, location: str) -> str | None:
        """``location`` relative to the warehouse when it lies inside it, else None."""
        try:
            normalized = normalize_location(location)
        except InvalidArgumentError:
            return None
        prefix = self.warehouse + "/"
        return normalized[len(prefix) :] if normalized.startswith(prefix) else None

    def _warehouse_storage(self) -> Storage:
        """lakecore's storage rooted at the warehouse, with the lakehouse's storage options
        (the catalog's own metadata files: ``_metadata_at``, ``_write_new_metadata``)."""
        if self._warehouse_files is None:
            self._warehouse_files = Storage(self.warehouse, self._warehouse_options)
        return self._warehouse_files

    def _load_file_io(
        self, properties: Properties = EMPTY_DICT, location: str | None = None
    ) -> FileIO:
        """The catalog's FileIO for ``location``'s scheme, made from the catalog's properties
        alone and kept. A table's properties never configure it: they come from the table's
        writers, and pyiceberg would otherwise let ``py-io-impl`` pick any class to import, or
        ``s3.endpoint`` send the server's requests, with its credentials, elsewhere."""
        scheme = urlparse(location).scheme if location else ""
        io = self._file_ios.get(scheme)
        if io is None:
            io = load_file_io(dict(self.properties), location)
            self._file_ios[scheme] = io
        return io

    def _prefetch_named_files(self, change: Any) -> None:
        """Read what the new snapshots of ``change`` name (its ``add-snapshot`` updates' manifest
        lists, and the manifests they add) in the caller's thread, before the change is queued:
        side by side with other requests, not in the committer's turn. Each path is checked
        first (``GuardedFileIO``). A file that cannot be read is left for the committer, which
        says why."""
        snapshots = [u.snapshot for u in change.updates if isinstance(u, AddSnapshotUpdate)]
        if not snapshots:
            return
        try:
            change.named_files = read_named_files(self._guarded(self._load_file_io()), snapshots)
        except Exception:  # the committer reads it again and reports it as the unit's error
            change.named_files = None

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


__all__ = ["METADATA_CACHE_BYTES", "CatalogBase", "ReadOnlyTable"]
