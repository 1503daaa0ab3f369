"""``LakecoreCatalog``: a pyiceberg catalog whose namespaces and tables live in a lakehouse.

Load it like any pyiceberg catalog::

    load_catalog("prod", **{"py-catalog-impl": "lakecore.iceberg.LakecoreCatalog",
                            "uri": "s3://bucket/lake", "warehouse": "s3://bucket/warehouse",
                            "s3.endpoint": ..., "s3.access-key-id": ..., "s3.secret-access-key": ...})

Rules:

* **One lakehouse object per Iceberg object.** An Iceberg namespace is a lakecore namespace (its
  properties are the namespace definition's properties); an Iceberg table is a lakecore table
  with ``table_format = ICEBERG`` whose ``format_properties["metadata_location"]`` is the full
  URI of its current metadata file (``previous_metadata_location`` the one before). Its columns
  mirror the Iceberg schema (``lakecore.iceberg.columns``). Namespaces nest to any depth:
  ``("a", "b")`` is the lakecore namespace ``a.b`` (``lakecore.core.namespaces``); creating one
  creates its missing parents, ``list_namespaces(parent)`` gives the direct children, and a
  namespace with children or tables cannot be dropped.
* **Commits are optimistic.** ``commit_table`` applies the requirements and updates to the
  current metadata, writes a new metadata file, then commits a lakecore transaction that
  replaces the table's definition. Snapshot isolation makes that commit fail if any other
  commit changed the table's key since the current metadata was read, so a concurrent change is
  never a lost update: the commit is redone once on the latest version (as a catalog that reads
  the latest state first would have done), and a second loss is ``CommitFailedException``
  (pyiceberg refreshes and retries). An
  ambiguous root write (or any storage failure during the lakecore commit) is
  ``CommitStateUnknownException``: pyiceberg then keeps every file it wrote. The losing writer's
  metadata file is never referenced; it is left for an Iceberg orphan-file cleanup.
  ``commit_tables`` commits changes to several tables as one lakehouse version, all or none
  (the REST server's multi-table transactions).
* **Locations.** Every table location, every metadata file and every write path a table's
  properties set (``write.data.path``, ``write.metadata.path``, ...) lies strictly inside the
  warehouse (``ValidationError`` otherwise), and so does a namespace's ``location`` property
  (checked when it is set, since it is where that namespace's tables go by default). A warehouse
  inside the lakehouse root must be a directory of its own whose first path segment is not a
  lakecore name (no leading ``_`` or ``.``, not a 4-binary-digit hash directory): lakecore's gc
  lists only the lakehouse root's top level and its hash directories and deletes only files with
  lakecore's names, so Iceberg files are then never listed, let alone deleted. A table's
  default location is
  ``<warehouse or namespace location>/<namespace>/<table>-<uuid>``: unique, so a table created
  after a rename or a drop never shares a directory (and an orphan cleanup) with the old one.
* **One warehouse per lakehouse, one lakehouse per warehouse** (``lakecore.iceberg.warehouse``).
  The first change a catalog makes records its warehouse in the lakehouse definition and
  claims the folder with a marker file, ``<warehouse>/.lakecore-warehouse.json``. From then on
  a catalog given another ``warehouse`` is refused when it opens (without the property it takes
  the recorded one; before the record it is ``<uri>/warehouse``), a second lakehouse cannot
  claim the folder or a folder inside it (its first change is refused), and no table or
  namespace folder is placed inside another lakehouse's warehouse (a warehouse that holds
  another's can be claimed, since finding the other would take a listing of all of it, but its
  tables keep out of the one inside).
* **No two tables share a folder** (``lakecore.maintenance.tables.table_folders`` has the details).
  A table's location and write paths (its *folders*) may not equal or contain the warehouse, a
  namespace's folder (``<warehouse>/<namespace levels>`` or its ``location``) or a folder of another
  live table, nor lie inside another table's folder; and a namespace's folder may not equal or lie
  inside a table's folder. Checked at ``create_table`` (and a create transaction, before any file is
  written), ``register_table``, ``rename_table``, ``create_namespace``, every namespace ``location``
  change and every commit that changes a table folder. The tables a path could overlap are found
  without a scan: a default location names its table, and every other folder is kept in a registry
  in the lakehouse definition, written in the same commit.
* **References.** A table's metadata may name files outside its folders (``add_files``). Each
  commit reads what it added (its manifest list and its new manifests: two small reads for an
  append) and records, in the registry, the folders inside the warehouse but outside the
  table's folders where it names files (``lakecore.iceberg.references``); only a folder not yet
  recorded changes the definition. ``register_table`` reads every manifest once to the same
  end. The lakehouse API refuses to set ``metadata_location`` (or any ``lakecore.*`` format
  property) itself: a table pointed at Iceberg metadata around the catalog would escape the
  registry.
* **Storage options** for lakecore's own files: ``storage_options`` (a mapping, when the catalog
  is built in Python), else ``lakecore.storage-options`` (a JSON object), else derived from
  pyiceberg's ``s3.*``/``client.*`` properties (endpoint, keys, session token, region). Iceberg
  data and metadata files go through pyiceberg's FileIO with the catalog's properties as usual.
* **Purge** drops the table and records a purge mark in the same commit; it deletes nothing
  itself (``lakecore.iceberg.purge``). Table maintenance deletes the files once no retained
  lakehouse version holds the table: only files under the table's own location and write
  paths, never what its metadata merely names elsewhere (another table's files, lakecore's),
  and never a file that retained metadata of any table names. Until then ``undrop_table``
  brings the table back (``lakecore.iceberg.undrop``); so does it a table dropped without purge,
  whose files are never deleted. On this machine's disk a path is judged by where it leads
  (``physical_location``: ``file:////w/t``, ``file:///w//t``, ``file:///w/./t`` and a link to
  ``/w/t`` are one file), in the references a commit records and in the location rule (a folder
  that is a link into another table's folder overlaps it); maintenance deletes nothing through
  a link. A registered (``EXTERNAL``) table is refused (``register_table`` with ``overwrite``
  makes the table ``EXTERNAL`` too): ``drop_table`` forgets it and leaves its files. A table
  without Iceberg metadata is dropped: it has none.
* **What is not guaranteed.** The guarantee covers what this release's catalog wrote, and what
  the registry's one scan read when it was built (the first change on a lakehouse from before
  it). A client of an older lakecore that writes after that records nothing. Part of what it
  writes shows, by property lookups alone: a table it placed at a folder of its choosing (that
  folder is neither of the table's name's shape nor in the registry), and a table it changed
  after this catalog did (the definition's ``CHECKED_PROPERTY`` stamp names another metadata
  file). Such a table's purge is refused, and its next commit here records it whole (its
  folders, and the references of every file it names). What does not show: files it made a
  table name that lie in another table's folders (``add_files``, ``register_table``), which
  that other table's purge then deletes. Once every client runs this release,
  ``rebuild_location_registry()`` reads every table once and makes the registry whole again.
  Not covered either: a lakehouse that shared its warehouse with another before the claim
  existed, and files that a table of another catalog or lakehouse names (its own purge is not
  this catalog's).
* **Time travel.** ``version=V`` or ``as_of=`` (epoch milliseconds or an ISO-8601 time; UTC when
  no zone is given) make a read-only catalog of that lakehouse version: every table loads at the
  metadata it had then, and every change raises ``ReadOnlyCatalogError``. A catalog over an
  exported copy is read-only the same way. A read-only catalog's tables refuse a write before
  pyiceberg writes any data file for it.
* **Errors** are pyiceberg's types carrying lakecore's message: not found is
  ``NoSuchNamespaceError``/``NoSuchTableError`` (an empty namespace identifier, or a table
  identifier without one, is ``NoSuchNamespaceError``, as pyiceberg's catalogs say), already
  exists is ``NamespaceAlreadyExistsError``/``TableAlreadyExistsError``, a bad name or location
  is ``ValidationError``, a lost race ``CommitFailedException``. Where pyiceberg's own suite
  asserts a wording (``Table does not exist: ns.t``, ``Namespace ns is not empty``), the
  message starts with it and lakecore's detail follows. Storage failures and damaged files
  outside a commit stay lakecore errors (``StorageError``, ``CorruptFileError``): pyiceberg has
  no type for them. Views: ``NoSuchViewError``/``ViewAlreadyExistsError`` (a view named like a
  table is ``ViewAlreadyExistsError`` too).
* **Views** (``lakecore.iceberg.views``): pyiceberg's view calls (``create_view``,
  ``load_view``, ``list_views``, ``view_exists``, ``drop_view``, ``register_view``), and
  ``rename_view`` and ``commit_view`` for the REST server. A view is a lakehouse view object
  pointing at its Iceberg view metadata file; tables and views share a namespace's names; a
  view's files lie in the warehouse, outside every table's folder; time travel shows each view
  as it was.

* **Opening.** ``uri`` is the lakehouse root; there must be a lakehouse there, unless
  ``lakecore.create=true`` (``lakecore.iceberg.properties``), which creates it (another process
  creating it first is no error). The warehouse must be qualified and out of lakecore's
  directories (``lakecore.iceberg.path_rules``).
* **Tables outside a commit.** Nothing is written before it can be refused: ``create_table``
  and a create transaction check the name, the namespace, that the table does not exist, and
  every location rule before the first metadata file is written; the commit checks all again.
  ``list_tables`` lists every lakecore table of the namespace, Iceberg metadata or not. Rename
  moves the definition in one lakehouse commit; the files stay, and the old default location
  becomes an explicit folder under the new name (recorded in the registry); a table without
  Iceberg metadata cannot be renamed here (the answer is the renamed Iceberg table). Drop
  forgets the table and its registry entries; its files stay.
* **Namespaces.** Creating ``("a", "b")`` creates its missing parents (empty), as pyiceberg's
  SQL catalog lets a child exist without one; ``list_namespaces(parent)`` gives the direct
  children, one seek per child whatever lies deeper. A namespace's ``location`` is held to the
  tables' rule when it is set, not found wrong at every later create, and recorded in the
  registry (forgotten with it).

The class is pyiceberg's catalog surface, one method per call, over collaborators that each
hold one part and offer it through public methods (pyiceberg's own catalogs are one class per
file the same way): ``commit_path`` (``CommitPath``: the version reads see, the read-only rule,
the group committer), ``metadata_files`` (``MetadataFiles``: metadata reads, cached, and
writes; the FileIO), ``location_checks`` (``LocationChecks``: where one path may lie),
``placement`` (``PlacementRules``: no two tables share a folder; the registry),
``commits`` (``TableCommits``: staging ``commit_table``/``commit_tables``), ``purge``
(``Purger``), ``purge_marks`` and ``undrop`` (functions over the commit path), and ``views``
(``IcebergViews``); ``identifiers`` parses names, and ``properties``, ``errors``, ``pointer``,
``table_folders``, ``references``, ``warehouse`` and ``columns`` hold the rules' data and
arithmetic.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from pyiceberg.catalog import (
    LOCATION,
    WAREHOUSE_LOCATION,
    MetastoreCatalog,
    PropertiesUpdateSummary,
)
from pyiceberg.exceptions import (
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    ValidationError,
)
from pyiceberg.io import FileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties
from pyiceberg.view import View
from pyiceberg.view.metadata import ViewMetadata, ViewVersion

from lakecore.core import namespaces as NS
from lakecore.core.defs import pb
from lakecore.core.keys import namespace_name_max_bytes, refuse_unclear_name
from lakecore.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidLocationError,
    NoLakehouseError,
    NotFoundError,
)
from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.commit_path import CommitPath
from lakecore.iceberg.commits import TableChange, TableCommits
from lakecore.iceberg.errors import ReadOnlyCatalogError, translated
from lakecore.iceberg.identifiers import namespace_of, new_namespace, table_of, view_of
from lakecore.iceberg.location_checks import LocationChecks, canonical
from lakecore.iceberg.metadata_files import MetadataFiles
from lakecore.iceberg.path_rules import (
    canonical_location,
    check_qualified,
    normalize_location,
    refuse_lakecore_directory,
)
from lakecore.iceberg.placement import PlacementRules, drop_with_entries
from lakecore.iceberg.pointer import (
    CHECKED_PROPERTY,
    METADATA_LOCATION_PROPERTY,
    PREVIOUS_METADATA_LOCATION_PROPERTY,
    identifier_of,
    pointer_properties,
    require_iceberg,
)
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
from lakecore.iceberg.purge import Purger
from lakecore.iceberg.purge_marks import finish_purges, start_purges
from lakecore.iceberg.storage_settings import is_s3, s3_settings
from lakecore.iceberg.undrop import undrop_table
from lakecore.iceberg.updates import apply_updates
from lakecore.iceberg.views import IcebergViews
from lakecore.lakehouse import Lakehouse, LakehouseView, Transaction
from lakecore.lakehouse.group_commit import CommitStats
from lakecore.maintenance.tables.marks import PurgeMark
from lakecore.maintenance.tables.table_folders import (
    MAX_REFERENCE_FOLDERS,
    FolderRegistry,
    reduce_folders,
    refs_key,
    refs_property,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import CreateTableTransaction
    from pyiceberg.table import Transaction as IcebergTransaction
    from pyiceberg.table.update import TableRequirement, TableUpdate

DEFAULT_WAREHOUSE_DIRECTORY: Final = "warehouse"


class LakecoreCatalog(MetastoreCatalog):
    """A pyiceberg catalog backed by a lakecore lakehouse (see the module docstring)."""

    #: Every commit failure whose outcome is unknown is raised as CommitStateUnknownException
    #: (``lakecore.iceberg.errors.translated``): any other failure of a commit means it did not
    #: land. The REST server relies on it (``lakecore.rest.errors``).
    reports_unknown_commits: Final = True

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
            lakehouse = _open(
                str(uri), options, str(properties.get(CREATE_PROPERTY, "")).lower() == "true"
            )
            fixed: LakehouseView | None = None
            version, as_of = properties.get(VERSION_PROPERTY), properties.get(AS_OF_PROPERTY)
            if version is not None and as_of is not None:
                raise InvalidArgumentError(
                    f"give '{VERSION_PROPERTY}' or '{AS_OF_PROPERTY}', not both"
                )
            if version is not None:
                fixed = lakehouse.at_version(version_number(version))
            elif as_of is not None:
                fixed = lakehouse.as_of(as_of_millis(as_of))
            root_uri = lakehouse.storage.root_uri
            self.warehouse = _warehouse_of(lakehouse, properties.get(WAREHOUSE_LOCATION))
            self.storage_settings = settings
            # The warehouse's files with the same settings as the lakehouse's, lakecore's
            # storage and pyiceberg's FileIO alike.
            warehouse_options = settings.lakecore_options() if is_s3(self.warehouse) else options
            if is_s3(self.warehouse) or is_s3(str(uri)):
                for key, value in settings.fileio_properties().items():
                    self.properties.setdefault(key, value)
            check_qualified(self.warehouse, "the warehouse")
            refuse_lakecore_directory(self.warehouse, root_uri, "the warehouse")
            max_batch, max_wait_seconds, linger_seconds = group_commit_policy(properties)
            full_check = full_check_seconds(properties)
        except InvalidArgumentError as exc:
            raise ValidationError(str(exc)) from exc
        self.properties[WAREHOUSE_LOCATION] = self.warehouse
        self._files = MetadataFiles(self.warehouse, warehouse_options, self.properties)
        self._path = CommitPath(
            lakehouse,
            fixed,
            full_check_seconds=full_check,
            max_batch=max_batch,
            max_wait_seconds=max_wait_seconds,
            linger_seconds=linger_seconds,
            on_new_batch=self._files.forget_staged,
        )
        self._checks = LocationChecks(self.warehouse, root_uri)
        self._placement = PlacementRules(self.warehouse, self._path, self._files, self._checks)
        self._commits = TableCommits(
            self,
            self._path,
            self._files,
            self._checks,
            self._placement,
            stage_table=self._staged_table,
            write_metadata=self._write_new_metadata,
        )
        self._purger = Purger(self._path, self._files, self._checks, self._placement)
        self._views = IcebergViews(
            self._path,
            self._files,
            self._checks,
            self._placement,
            namespace_location=self.namespace_location,
            metadata_version=self._parse_metadata_version,
            convert_schema=self._convert_schema_if_needed,
        )

    # -- identity and state -------------------------------------------------------------------

    @property
    def lakehouse(self) -> Lakehouse:
        """The lakehouse object this catalog commits through (at its last refresh)."""
        return self._path.lakehouse

    @property
    def read_only_version(self) -> int | None:
        """The lakehouse version of a time-travel catalog; None for the live catalog."""
        return self._path.fixed_version

    @property
    def commit_stats(self) -> CommitStats:
        """What the group committer did (batches, their sizes, conflicts), for metrics."""
        return self._path.stats

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait up to ``timeout`` seconds until what this catalog writes after answering a
        change (the latest-version hint) is written; False if it still was not. A program that
        counts the store's files or requests right after a change calls it first."""
        return self._path.settle(timeout)

    def warm_up(self) -> None:
        """Make the FileIO for the warehouse's scheme now, not in the first request that needs
        one (importing pyarrow's costs about a CPU-second): a server calls it at start."""
        self._files.warm_up()

    def check_location(self, location: str, what: str, *, strict: bool = True) -> None:
        """Refuse a location that is not canonical (with ``strict``, every location a client
        names), outside the warehouse, the warehouse itself, or one inside lakecore's own
        directories (``lakecore.iceberg.path_rules``).

        Raises:
            ValidationError: with the reason.
        """
        self._checks.check(location, what, strict=strict)

    def _refuse_read_only(self, what: str) -> None:
        self._path.refuse_read_only(what)

    # -- pyiceberg's hooks --------------------------------------------------------------------

    def _load_file_io(
        self, properties: Properties = EMPTY_DICT, location: str | None = None
    ) -> FileIO:
        """The catalog's FileIO for ``location``'s scheme, made from the catalog's properties
        alone and kept (``lakecore.iceberg.metadata_files``): a table's properties never
        configure it."""
        return self._files.file_io(location)

    def _get_default_warehouse_location(self, database_name: str, table_name: str) -> str:
        # Unique per table (see the module docstring); pyiceberg's is <warehouse>/<ns>/<table>.
        return f"{self.namespace_location(database_name)}/{table_name}-{uuid.uuid4().hex}"

    def _write_new_metadata(self, metadata: TableMetadata, io: FileIO, metadata_path: str) -> None:
        """Write a new metadata file (``MetadataFiles.write_table_metadata``): every metadata
        file this catalog writes goes through here."""
        self._files.write_table_metadata(metadata, io, metadata_path)

    def _staged_table(
        self,
        current: Table | None,
        identifier: Identifier,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> Table:
        """pyiceberg's ``_update_and_stage_table`` with ``apply_updates`` (no deep copy of the
        metadata): the requirements checked against ``current`` (None: a create), the updates
        applied, the next metadata file's location chosen by the table's location provider.

        Raises:
            CommitFailedException: a requirement does not hold.
        """
        base = None if current is None else current.metadata
        for requirement in requirements:
            requirement.validate(base)
        try:
            metadata = apply_updates(
                base if base is not None else self._empty_table_metadata(),
                updates,
                enforce_validation=current is None,
                metadata_location=None if current is None else current.metadata_location,
            )
        except StopIteration:
            # pyiceberg looks the current schema, spec and sort order up with next(): updates
            # that leave one of them unnamed ({"requirements": [{"type": "assert-create"}],
            # "updates": []}) raised StopIteration, a 500 at the REST server.
            what = "create" if current is None else "change"
            raise ValidationError(
                f"the updates of this {what} of table {'.'.join(identifier)} leave it without "
                "the current schema, partition spec or sort order its metadata names; a create "
                "must add a schema, a partition spec and a sort order and set each as current "
                "(-1: the last added)"
            ) from None
        version = (
            0 if current is None else self._parse_metadata_version(current.metadata_location) + 1
        )
        provider = load_location_provider(metadata.location, metadata.properties)
        location = provider.new_table_metadata_file_location(version)
        return StagedTable(
            identifier=identifier,
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(location=location),
            catalog=self,
        )

    # -- namespaces ---------------------------------------------------------------------------

    def create_namespace(
        self, namespace: str | Identifier, properties: Properties = EMPTY_DICT
    ) -> None:
        """Create a namespace with ``properties``; ``("a", "b")`` is ``b`` inside ``a``, and a
        missing parent is created with it (empty), as pyiceberg's SQL catalog lets a child
        exist without one.

        Raises:
            NamespaceAlreadyExistsError: it exists.
            NoSuchNamespaceError: an empty identifier or level.
            ValidationError: a level holds ``.``, or the name is too long or holds a space or
                a control character.
        """
        self._refuse_read_only("create_namespace")
        ns = new_namespace(namespace, namespace_name_max_bytes(self.lakehouse.lakehouse_def))
        self._check_namespace_location(properties)

        def create(tx: Transaction) -> None:
            tx.create_namespace(ns, dict(properties), parents=True)
            default_folder = "/".join([self.warehouse, *NS.levels(ns)])
            self._placement.check_namespace_folder(tx, ns, default_folder, "the folder")
            self._placement.record_namespace_location(tx, ns, properties.get(LOCATION))

        self._path.change("create_namespace", create, exists=NamespaceAlreadyExistsError)

    def drop_namespace(self, namespace: str | Identifier) -> None:
        """Drop an empty namespace.

        Raises:
            NoSuchNamespaceError: it does not exist.
            NamespaceNotEmptyError: it still holds tables or namespaces.
        """
        self._refuse_read_only("drop_namespace")
        ns = namespace_of(namespace)

        def drop(tx: Transaction) -> None:
            tx.drop_namespace(ns)
            self._placement.record_namespace_location(tx, ns, None)

        self._path.change(
            "drop_namespace",
            drop,
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace {ns} does not exists",
            not_empty_wording=f"Namespace {ns} is not empty",
        )

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        """The direct children of ``namespace`` (the top-level namespaces without one), sorted.
        One seek per child, whatever lies deeper (``lakecore.core.namespaces``).

        Raises:
            NoSuchNamespaceError: ``namespace`` is given and does not exist.
        """
        parent = namespace_of(namespace) if namespace else None
        with (
            translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=None if parent is None else f"Namespace does not exist: {parent}",
            ),
        ):
            return [tuple(NS.levels(child)) for child in self._path.read().child_namespaces(parent)]

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        """The namespace's properties.

        Raises:
            NoSuchNamespaceError: it does not exist.
        """
        ns = namespace_of(namespace)
        with (
            translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=f"Namespace {ns} does not exists",
            ),
        ):
            return dict(self._path.read().load_namespace(ns).properties)

    def update_namespace_properties(
        self,
        namespace: str | Identifier,
        removals: set[str] | None = None,
        updates: Properties = EMPTY_DICT,
    ) -> PropertiesUpdateSummary:
        """Remove ``removals`` and set ``updates`` in one commit.

        Raises:
            NoSuchNamespaceError: it does not exist.
            ValueError: ``removals`` and ``updates`` overlap.
        """
        self._refuse_read_only("update_namespace_properties")
        ns = namespace_of(namespace)
        self._check_namespace_location(updates)

        def update(tx: Transaction) -> PropertiesUpdateSummary:
            current = dict(tx.load_namespace(ns).properties)
            summary, _ = self._get_updated_props_and_update_summary(current, removals, updates)
            tx.update_namespace(ns, dict(updates), remove_properties=removals or ())
            if LOCATION in updates or LOCATION in (removals or ()):
                self._placement.record_namespace_location(tx, ns, updates.get(LOCATION))
            return summary

        return self._path.change(
            "update_namespace_properties",
            update,
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace {ns} does not exists",
        )

    def _check_namespace_location(self, properties: Properties) -> None:
        """A namespace's ``location`` is where its tables go by default: held to the tables'
        rule when it is set, not found wrong at every later create."""
        location = properties.get(LOCATION)
        if location:
            self._checks.check(str(location), "namespace location")

    def namespace_location(self, namespace: str | Identifier) -> str:
        """Where the namespace's tables go by default: its ``location`` property, else
        ``<warehouse>/<level 1>/.../<level n>``, as a full URI (a bare path in a namespace's
        location would be stored as one, and metadata_location is a full URI by the format's
        rule).

        Raises:
            NoSuchNamespaceError: it does not exist.
        """
        properties = self.load_namespace_properties(namespace)
        folder = "/".join([self.warehouse, *NS.levels(namespace_of(namespace))])
        return normalize_location(properties.get(LOCATION) or folder)

    # -- tables: reads ------------------------------------------------------------------------

    def load_table(self, identifier: str | Identifier) -> Table:
        """The table at its current metadata (at this catalog's version when time-travelling).

        Raises:
            NoSuchTableError: no such table (``NoSuchIcebergTableError`` if it has no Iceberg
                metadata).
        """
        ns, table = table_of(identifier)
        with (
            translated(invalid=NoSuchTableError, wording=f"Table does not exist: {ns}.{table}"),
        ):
            definition = self._path.read().load_table(ns, table)
        return self._table_from(identifier_of(ns, table), definition)

    def _table_from(self, identifier: Identifier, definition: pb.TableDef) -> Table:
        """The table a definition names, at its current metadata (``ReadOnlyTable`` in a
        read-only catalog)."""
        metadata_location = require_iceberg(identifier, definition)
        metadata = self._files.table_metadata(identifier, metadata_location)
        read_only = self._path.read_only_why("change a table") is not None
        table_class = ReadOnlyTable if read_only else Table
        return table_class(
            identifier=identifier,
            metadata=metadata,
            metadata_location=metadata_location,
            io=self._load_file_io(location=metadata_location),
            catalog=self,
        )

    def table_exists(self, identifier: str | Identifier) -> bool:
        """Whether ``load_table`` would find the table: it exists and has Iceberg metadata (a
        table made through the lakehouse API has none; it is listed, but loads as
        ``NoSuchIcebergTableError``). Reads its definition, not its Iceberg metadata."""
        try:
            ns, table = table_of(identifier)
        except NoSuchTableError:
            return False
        try:
            with translated(invalid=NoSuchTableError):
                view = self._path.read()
                if not view.table_exists(ns, table):
                    return False
                definition = view.load_table(ns, table)
        except NoSuchTableError:  # an invalid name, or dropped meanwhile: no such table
            return False
        return bool(
            definition.table_format == "ICEBERG"
            and definition.format_properties.get(METADATA_LOCATION_PROPERTY)
        )

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        """Every table of the namespace (any lakecore table of it, Iceberg metadata or not).

        Raises:
            NoSuchNamespaceError: no such namespace.
        """
        ns = namespace_of(namespace)
        with (
            translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=f"Namespace does not exist: {ns}",
            ),
        ):
            return [(*NS.levels(ns), table) for table in self._path.read().list_tables(ns)]

    # -- tables: changes ----------------------------------------------------------------------

    def create_table(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> Table:
        """Write the table's first metadata file, then commit the table to the lakehouse.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            TableAlreadyExistsError: the table exists (its new metadata file is left unreferenced).
            ValidationError: a bad name, or a location outside the warehouse.
        """
        self._refuse_read_only("create_table")
        ns, name = table_of(identifier, NoSuchNamespaceError)
        location = canonical(location, "table location")
        staged = self._create_staged_table(
            # pyiceberg's staging takes (database, table): the namespace as its stored name.
            (ns, name),
            schema,
            location,
            partition_spec,
            sort_order,
            properties,
        )
        self._checks.check_metadata(staged.metadata, staged.metadata_location)
        self._refuse_taken_or_homeless(ns, name)
        self._placement.precheck_folders(ns, name, staged.metadata)
        self._write_new_metadata(staged.metadata, staged.io, staged.metadata_location)
        self._commit_new_table(ns, name, staged.metadata, staged.metadata_location, "MANAGED")
        return self.load_table(identifier_of(ns, name))

    def create_table_transaction(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> CreateTableTransaction:
        """A pyiceberg create-table transaction; its commit goes through ``commit_table``."""
        self._refuse_read_only("create_table_transaction")
        ns, name = table_of(identifier, NoSuchNamespaceError)
        location = canonical(location, "table location")
        self._refuse_taken_or_homeless(ns, name)
        txn = super().create_table_transaction(
            # pyiceberg's staging takes (database, table): the namespace as its stored name.
            (ns, name),
            schema,
            location,
            partition_spec,
            sort_order,
            properties,
        )
        # Before the caller writes any data file for it (its commit checks again).
        self._checks.check_metadata(txn.table_metadata, txn.table_metadata.location + "/metadata")
        self._placement.precheck_folders(ns, name, txn.table_metadata)
        return txn

    def _refuse_taken_or_homeless(self, ns: str, name: str) -> None:
        """Fail before anything is written: a bad name, a missing namespace, a table that exists
        (the commit checks again; this spares a metadata file nobody will reference)."""
        with translated(not_found=NoSuchNamespaceError):
            refuse_unclear_name(name, "table")
            view = self._path.latest()
            if not view.namespace_exists(ns):
                raise NotFoundError(f"namespace {ns!r} does not exist; create it first")
            if view.table_exists(ns, name):
                raise AlreadyExistsError(f"table {ns}.{name} already exists")

    def _commit_new_table(
        self, ns: str, name: str, metadata: TableMetadata, metadata_location: str, table_type: str
    ) -> None:
        def create(tx: Transaction) -> None:
            tx.create_table(
                ns,
                name,
                columns=columns_of(metadata.schema()),
                table_type=table_type,
                format_properties=pointer_properties(metadata_location),
                checked_by_catalog=True,
            )
            self._placement.check_folders(tx, ns, name, metadata)

        self._path.change("create_table", create, not_found=NoSuchNamespaceError)

    def register_table(
        self, identifier: str | Identifier, metadata_location: str, overwrite: bool = False
    ) -> Table:
        """Register an existing metadata file (under the warehouse) as a table.

        With ``overwrite`` an existing table is pointed at ``metadata_location`` instead. Either
        way the table is ``EXTERNAL``: its files were not written for it, so ``purge_table``
        refuses it. Every manifest the metadata names is read once, to record where it names
        files outside its own folders (``lakecore.iceberg.references``).

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            TableAlreadyExistsError: the table exists and ``overwrite`` is false.
            ValidationError: a bad name, or a metadata or table location outside the warehouse.
        """
        self._refuse_read_only("register_table")
        ns, name = table_of(identifier, NoSuchNamespaceError)
        self._checks.check(metadata_location, "metadata location")
        io = self._checks.guarded(self._load_file_io(location=metadata_location))
        try:
            with translated():
                metadata = FromInputFile.table_metadata(io.new_input(metadata_location))
        except (OSError, ValueError) as exc:
            # The client named the file: a missing or unreadable one is its mistake, and no
            # table points at it yet (read_metadata's "restore it or drop the table" is for
            # a table's own metadata).
            reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:300]
            raise ValidationError(
                f"metadata location {metadata_location} cannot be registered: it is not a "
                f"readable Iceberg metadata file ({type(exc).__name__}: {reason})"
            ) from exc
        self._checks.check_metadata(metadata, metadata_location)
        references = self._placement.table_references(metadata, metadata_location)

        def register(tx: Transaction) -> None:
            self._placement.check_folders(tx, ns, name, metadata)
            tx.set_definition_properties(
                refs_property(
                    ns, name, reduce_folders(self.warehouse, references, MAX_REFERENCE_FOLDERS)
                )
            )
            columns = columns_of(metadata.schema())
            if overwrite and tx.table_exists(ns, name):
                current = tx.load_table(ns, name).format_properties.get(METADATA_LOCATION_PROPERTY)
                # EXTERNAL, as a new registration is: pointing a MANAGED table at files
                # written for another would have let purge_table delete them.
                tx.update_table(
                    ns,
                    name,
                    columns=columns,
                    table_type="EXTERNAL",
                    format_properties=pointer_properties(metadata_location, current),
                    checked_by_catalog=True,
                )
            else:
                tx.create_table(
                    ns,
                    name,
                    columns=columns,
                    table_type="EXTERNAL",
                    format_properties=pointer_properties(metadata_location),
                    checked_by_catalog=True,
                )

        self._path.change("register_table", register, not_found=NoSuchNamespaceError)
        return self.load_table(identifier_of(ns, name))

    def drop_table(self, identifier: str | Identifier) -> None:
        """Remove the table from the lakehouse; its files stay (``purge_table`` deletes them).

        Raises:
            NoSuchTableError: no such table.
        """
        self._refuse_read_only("drop_table")
        ns, name = table_of(identifier)
        self._path.change(
            "drop_table",
            lambda tx: drop_with_entries(tx, ns, name),
            invalid=NoSuchTableError,
            wording=f"Table does not exist: {ns}.{name}",
        )

    def rename_table(
        self, from_identifier: str | Identifier, to_identifier: str | Identifier
    ) -> Table:
        """Move the table's definition to the new name in one lakehouse commit (its files stay
        where they are, as in every Iceberg catalog).

        Raises:
            NoSuchTableError: ``from_identifier`` does not exist.
            NoSuchNamespaceError: the target namespace does not exist.
            TableAlreadyExistsError: ``to_identifier`` exists.
            ValidationError: the new name is invalid.
        """
        self._refuse_read_only("rename_table")
        from_ns, from_name = table_of(from_identifier)
        to_ns, to_name = table_of(to_identifier, NoSuchNamespaceError)

        def rename(tx: Transaction) -> None:
            with translated(
                not_found=NoSuchTableError,
                invalid=NoSuchTableError,
                wording=f"Table does not exist: {from_ns}.{from_name}",
            ):
                current = tx.load_table(from_ns, from_name)
            # Refused before the commit: rename_table answers with the renamed Iceberg table,
            # which a table without Iceberg metadata cannot give.
            require_iceberg(identifier_of(from_ns, from_name), current)
            with translated(not_found=NoSuchNamespaceError):
                if not tx.namespace_exists(to_ns):
                    raise NotFoundError(f"namespace {to_ns!r} does not exist; create it first")
                if tx.table_exists(to_ns, to_name):
                    raise AlreadyExistsError(f"table {to_ns}.{to_name} already exists")
                tx.create_table(
                    to_ns,
                    to_name,
                    columns=list(current.schema.columns),
                    table_format=current.table_format or "ICEBERG",
                    table_type=current.table_type or "MANAGED",
                    properties=current.properties,
                    format_properties=current.format_properties,
                    distribution_keys=current.distribution_keys,
                    primary_key=current.primary_key,
                    sort_keys=current.sort_keys,
                    unique_columns=current.unique_columns,
                    checked_by_catalog=True,
                )
            references = tx.definition_property(refs_key(from_ns, from_name))
            drop_with_entries(tx, from_ns, from_name)
            if references is not None:
                tx.set_definition_properties({refs_key(to_ns, to_name): references})
            # The folders stay; under the new name the old default location is an explicit one.
            moved = self._table_from(identifier_of(from_ns, from_name), current)
            self._placement.check_folders(
                tx, to_ns, to_name, moved.metadata, also_not=(from_ns, from_name)
            )

        self._path.change("rename_table", rename)
        return self.load_table(identifier_of(to_ns, to_name))

    # -- commits ------------------------------------------------------------------------------

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """Apply ``updates`` to the table's current metadata if ``requirements`` hold, and
        commit the new metadata with the other commits of its batch
        (``lakecore.iceberg.commits``).

        Raises:
            NoSuchTableError: the table does not exist (and this is not a create).
            CommitFailedException: a requirement failed (a create of a table that exists, too),
                or other writers kept changing the table.
            CommitStateUnknownException: the lakehouse commit may or may not have landed.
            ValidationError: the new metadata breaks a location or transform rule.
        """
        return self.commit_changes(table.name(), requirements, updates)

    def commit_changes(
        self,
        identifier: str | Identifier,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """``commit_table`` by the table's identifier (the REST server's ``updateTable``: no
        metadata of the caller's needed)."""
        self._refuse_read_only("commit_table")
        ns, name = table_of(identifier)
        return self._commits.commit([TableChange(ns, name, requirements, updates)])[0]

    def written_metadata_json(self, location: str) -> bytes | None:
        """The JSON this catalog wrote lately as the metadata file at ``location`` (a commit's
        answer sends it as its metadata), or None."""
        return self._files.written_text(location)

    def commit_tables(
        self,
        changes: Sequence[
            tuple[str | Identifier, tuple[TableRequirement, ...], tuple[TableUpdate, ...]]
        ],
    ) -> list[CommitTableResponse]:
        """Commit changes to several tables as one unit: all land in one lakehouse version or
        none does.

        A change whose requirements hold ``assert-create`` creates its table (a staged create
        committed with the others, as DuckDB sends ``CREATE TABLE`` and ``INSERT`` in one
        transaction). Each table is named once.

        Raises:
            NoSuchTableError: a table to change does not exist.
            NoSuchNamespaceError: the namespace of a table to create does not exist.
            CommitFailedException: a requirement failed (``assert-create`` of a table that
                exists too), or other writers kept changing a table.
            CommitStateUnknownException: the lakehouse commit may or may not have landed.
            ValidationError: a table named twice, or new metadata outside the warehouse or in
                another table's folder.
        """
        self._refuse_read_only("commit_tables")
        names = [table_of(identifier) for identifier, _, _ in changes]
        repeated = sorted({f"{ns}.{name}" for ns, name in names if names.count((ns, name)) > 1})
        if repeated:
            raise ValidationError(
                f"a transaction names each table once; named more than once: {', '.join(repeated)}"
            )
        return self._commits.commit(
            [
                TableChange(ns, name, requirements, updates)
                for (ns, name), (_, requirements, updates) in zip(names, changes, strict=True)
            ]
        )

    # -- purge, undrop and the location registry ----------------------------------------------

    def purge_table(self, identifier: str | Identifier) -> None:
        """Drop the table and mark its files for deletion, in one commit
        (``lakecore.iceberg.purge``).

        Table maintenance deletes them once no retained lakehouse version holds the table, and
        only files under the table's location or its own write paths (``write.data.path``,
        ...), inside the warehouse and outside lakecore's directories, that no retained metadata
        of any table names. Until then ``undrop_table`` brings the table back.

        Refused: a table registered with ``register_table`` (``EXTERNAL``), whose files were not
        written for it and may be another table's (``drop_table`` forgets it and leaves them);
        and a table that other code (a client of an older lakecore) wrote around the location
        registry (placed at a folder the registry does not know, or changed after this catalog
        checked it), which may name files no registry entry records. A table without
        Iceberg metadata (made through the lakehouse API) is dropped: it has no files.

        Raises:
            NoSuchTableError: no such table.
            ValidationError: the table is EXTERNAL, or was written around the registry.
        """
        self._refuse_read_only("purge_table")
        ns, name = table_of(identifier)
        self._purger.purge(ns, name)

    def undrop_table(
        self, identifier: str | Identifier, version: int | None = None
    ) -> Table | None:
        """Bring a dropped table back as the newest retained lakehouse version (or ``version``)
        held it (``lakecore.iceberg.undrop``); returns it (None for a table without Iceberg
        metadata).

        Raises:
            TableAlreadyExistsError: a table of that name exists now.
            NoSuchTableError: no retained version holds it (or ``version`` is not retained or
                does not hold it), or its files were purged already.
            NoSuchNamespaceError: its namespace does not exist now.
            ValidationError: a table has taken one of its folders since, or table
                maintenance is deleting its files.
        """
        self._refuse_read_only("undrop_table")
        ns, name = table_of(identifier)
        if not undrop_table(self._path, self._files, self._placement, ns, name, version):
            return None
        return self.load_table(identifier_of(ns, name))

    def start_purges(
        self, marks: Sequence[PurgeMark], expected_latest: int
    ) -> list[PurgeMark] | None:
        """Mark these purges ``purging``, in one commit, if the latest version is still
        ``expected_latest``; returns the marks that are ``purging`` now (None: the latest
        moved). See ``lakecore.iceberg.purge_marks``."""
        return start_purges(self._path, marks, expected_latest)

    def finish_purges(self, marks: Sequence[PurgeMark]) -> int | None:
        """Remove these marks (their files are gone), in one commit; the version it made, or
        None when none of them was left to remove."""
        return finish_purges(self._path, marks)

    def rebuild_location_registry(self) -> None:
        """Read every Iceberg table's metadata and manifests once and rewrite the location
        registry (``lakecore.maintenance.tables.table_folders``) from them, in one commit.

        For a lakehouse that clients of an older lakecore wrote to after its registry was
        built: what they created, placed or referenced is not recorded, and a purge could
        delete files their tables name. Run it once every client runs this release. Tables
        such a client changed after this catalog checked them (which ``purge_table`` refuses)
        become purgeable again. Costs one read of every table's metadata and manifests.

        Raises:
            InvalidLocationError: a table lies outside the warehouse, or another lakehouse
                owns the warehouse.
            CorruptFileError: a table's metadata cannot be read.
        """
        self._refuse_read_only("rebuild_location_registry")
        self._path.change(
            "rebuild_location_registry",
            lambda tx: self._placement.build_registry(tx, restamp=True),
        )

    # -- views (lakecore.iceberg.views) -------------------------------------------------------

    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        """Every view of the namespace.

        Raises:
            NoSuchNamespaceError: no such namespace.
        """
        return self._views.names_in(namespace_of(namespace))

    def view_exists(self, identifier: str | Identifier) -> bool:
        try:
            ns, name = view_of(identifier)
        except NoSuchViewError:
            return False
        return self._views.exists(ns, name)

    def load_view(self, identifier: str | Identifier) -> View:
        """The view at its current metadata (at this catalog's version when time-travelling).

        Raises:
            NoSuchViewError: no such view.
        """
        metadata, _ = self.load_view_metadata(identifier)
        ns, name = view_of(identifier)
        return View(identifier_of(ns, name), metadata)

    def load_view_metadata(self, identifier: str | Identifier) -> tuple[ViewMetadata, str]:
        """The view's current metadata and its location (what the REST server answers).

        Raises:
            NoSuchViewError: no such view.
        """
        ns, name = view_of(identifier)
        return self._views.load_metadata(ns, name)

    def create_view(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        view_version: ViewVersion,
        location: str | None = None,
        properties: Properties = EMPTY_DICT,
    ) -> View:
        """Write the view's first metadata file, then commit the view to the lakehouse.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            ViewAlreadyExistsError: a view or a table of that name exists.
            ValidationError: a bad name, or a location outside the warehouse.
        """
        self._refuse_read_only("create_view")
        ns, name = view_of(identifier, NoSuchNamespaceError)
        metadata = self._views.create(ns, name, schema, view_version, location, properties)
        return View(identifier_of(ns, name), metadata)

    def register_view(self, identifier: str | Identifier, metadata_location: str) -> View:
        """Register an existing view metadata file (inside the warehouse) as a view.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            ViewAlreadyExistsError: a view or a table of that name exists.
            ValidationError: a metadata or view location outside the warehouse, or a file that
                is no view metadata.
        """
        self._refuse_read_only("register_view")
        ns, name = view_of(identifier, NoSuchNamespaceError)
        metadata = self._views.register(ns, name, metadata_location)
        return View(identifier_of(ns, name), metadata)

    def drop_view(self, identifier: str | Identifier) -> None:
        """Remove the view from the lakehouse; its files stay.

        Raises:
            NoSuchViewError: no such view.
        """
        self._refuse_read_only("drop_view")
        ns, name = view_of(identifier)
        self._views.drop(ns, name)

    def rename_view(
        self, from_identifier: str | Identifier, to_identifier: str | Identifier
    ) -> None:
        """Move the view's definition to the new name in one lakehouse commit (its files stay).

        Raises:
            NoSuchViewError: ``from_identifier`` does not exist.
            NoSuchNamespaceError: the target namespace does not exist.
            ViewAlreadyExistsError: a view or a table named ``to_identifier`` exists.
        """
        self._refuse_read_only("rename_view")
        from_ns, from_name = view_of(from_identifier)
        to_ns, to_name = view_of(to_identifier, NoSuchNamespaceError)
        self._views.rename(from_ns, from_name, to_ns, to_name)

    def commit_view(
        self,
        identifier: str | Identifier,
        requirements: tuple[Any, ...] | list[Any],
        updates: tuple[Any, ...] | list[Any],
    ) -> tuple[ViewMetadata, str]:
        """Apply a REST ``CommitViewRequest`` (``replaceView``): check the requirements against
        the current metadata, apply the updates, write the new metadata file and commit it.
        Returns the new metadata and its location (the current ones when nothing changed).

        Raises:
            NoSuchViewError: no such view.
            CommitFailedException: a requirement does not hold.
            ValidationError: an update names what the view does not have, or a location is
                outside the warehouse.
        """
        self._refuse_read_only("replace_view")
        ns, name = view_of(identifier)
        return self._views.commit(ns, name, requirements, updates)


class ReadOnlyTable(Table):
    """A table of a read-only catalog. Its writes are refused before pyiceberg writes a data
    file: an append writes its data files first and, when the commit is refused, deletes its
    manifests but not those files (they would stay in the live table's directory, which an
    exported copy's metadata also names)."""

    def transaction(self) -> IcebergTransaction:
        catalog = self.catalog
        assert isinstance(catalog, LakecoreCatalog)
        catalog._refuse_read_only(f"write to table {'.'.join(self.name())}")
        return super().transaction()  # the catalog became writable: not for a version or a copy


def _open(uri: str, options: dict[str, Any] | None, create: bool) -> Lakehouse:
    """The lakehouse at ``uri``; with ``create``, created when there is none."""
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


def _warehouse_of(lakehouse: Lakehouse, given: Any) -> str:
    """The lakehouse's recorded warehouse, or the one given (default ``<uri>/warehouse``)
    until a first change records it; a warehouse given that differs from the recorded one
    is refused: every Iceberg table of a lakehouse lives in its one warehouse."""
    recorded = FolderRegistry.of(lakehouse.lakehouse_def.properties).warehouse
    if recorded is None:
        root_uri = lakehouse.storage.root_uri
        if given:  # before it is recorded for good: every table location starts with it
            canonical_location(str(given), "the warehouse")
        return normalize_location(str(given or root_uri + DEFAULT_WAREHOUSE_DIRECTORY))
    if given and normalize_location(str(given)) != recorded:
        raise InvalidLocationError(
            f"the warehouse {given} is not this lakehouse's: its Iceberg tables live in "
            f"{recorded} (recorded at its first catalog change); give warehouse={recorded} or "
            "leave the property out"
        )
    return recorded


__all__ = [
    "CHECKED_PROPERTY",
    "DEFAULT_WAREHOUSE_DIRECTORY",
    "METADATA_LOCATION_PROPERTY",
    "PREVIOUS_METADATA_LOCATION_PROPERTY",
    "LakecoreCatalog",
    "ReadOnlyCatalogError",
    "ReadOnlyTable",
    "normalize_location",
]
