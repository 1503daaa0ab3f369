"""Tables: reading them, and the changes other than a commit (create, register, drop, rename).

Rules:

* **A table is a lakehouse object** (``lakecore.iceberg.pointer``): created with its first
  metadata file's location, its columns mirroring the Iceberg schema
  (``lakecore.iceberg.columns``); ``list_tables`` lists every lakecore table of the namespace,
  Iceberg metadata or not.
* **Nothing is written before it can be refused.** ``create_table`` and a create transaction
  check the name, the namespace, that the table does not exist, and every location rule
  (``lakecore.iceberg.path_rules``, ``lakecore.iceberg.placement``) before the first metadata
  file is written; the commit checks all again.
* **A default location is unique:** ``<warehouse or namespace location>/<namespace levels>/<table>-<uuid>``,
  so a table created after a rename or a drop never shares a folder (and an orphan cleanup)
  with the old one.
* **A registered table is EXTERNAL**, also one that ``register_table(overwrite=True)`` points
  at new metadata: its files were not written for it, so ``purge_table`` refuses it. Every
  manifest it names is read once, to record where it names files outside its own folders.
* **Rename moves the definition** in one lakehouse commit; the files stay, and the old default
  location becomes an explicit root under the new name (recorded in the registry). A table
  without Iceberg metadata cannot be renamed here (the answer is the renamed Iceberg table).
* **Drop forgets the table** and its registry entries; its files stay. The lakehouse versions
  still retained hold it, so ``undrop_table`` (``lakecore.iceberg.undrop``) can bring it back
  until they leave retention.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pyiceberg.catalog import LOCATION
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from lakecore.core import namespaces as NS
from lakecore.core.keys import refuse_unclear_name
from lakecore.errors import AlreadyExistsError, NotFoundError
from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.errors import translated
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.placement import PlacementRules, drop_with_entries
from lakecore.iceberg.pointer import (
    METADATA_LOCATION_PROPERTY,
    identifier_of,
    pointer_properties,
    require_iceberg,
)
from lakecore.iceberg.table_folders import (
    MAX_REFERENCE_FOLDERS,
    reduce_folders,
    refs_key,
    refs_property,
)
from lakecore.lakehouse import Transaction

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import CreateTableTransaction


class TableOps(PlacementRules):
    """Reading tables and changing them outside a commit (see the module docstring)."""

    # -- tables: reads ------------------------------------------------------------------------

    def load_table(self, identifier: str | Identifier) -> Table:
        """The table at its current metadata (at this catalog's version when time-travelling).

        Raises:
            NoSuchTableError: no such table (``NoSuchIcebergTableError`` if it has no Iceberg
                metadata).
        """
        ns, table = self._table(identifier)
        with (
            translated(invalid=NoSuchTableError, wording=f"Table does not exist: {ns}.{table}"),
        ):
            definition = self._read().load_table(ns, table)
        return self._table_from(identifier_of(ns, table), definition)

    def table_exists(self, identifier: str | Identifier) -> bool:
        """Whether ``load_table`` would find the table: it exists and has Iceberg metadata (a
        table made through the lakehouse API has none; it is listed, but loads as
        ``NoSuchIcebergTableError``). Reads its definition, not its Iceberg metadata."""
        try:
            ns, table = self._table(identifier)
        except NoSuchTableError:
            return False
        try:
            with translated(invalid=NoSuchTableError):
                view = self._read()
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
        ns = self._namespace(namespace)
        with (
            translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=f"Namespace does not exist: {ns}",
            ),
        ):
            return [(*NS.levels(ns), table) for table in self._read().list_tables(ns)]

    def namespace_location(self, namespace: str | Identifier) -> str:
        """Where the namespace's tables go by default: its ``location`` property, else
        ``<warehouse>/<level 1>/.../<level n>``, as a full URI (a bare path in a namespace's
        location would be stored as one, and metadata_location is a full URI by the format's
        rule).

        Raises:
            NoSuchNamespaceError: it does not exist.
        """
        properties = self.load_namespace_properties(namespace)
        folder = "/".join([self.warehouse, *NS.levels(self._namespace(namespace))])
        return normalize_location(properties.get(LOCATION) or folder)

    def _get_default_warehouse_location(self, database_name: str, table_name: str) -> str:
        # Unique per table (see the module docstring); pyiceberg's is <warehouse>/<ns>/<table>.
        return f"{self.namespace_location(database_name)}/{table_name}-{uuid.uuid4().hex}"

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
        ns, name = self._table(identifier, NoSuchNamespaceError)
        location = self._canonical(location, "table location")
        staged = self._create_staged_table(
            # pyiceberg's staging takes (database, table): the namespace as its stored name.
            (ns, name),
            schema,
            location,
            partition_spec,
            sort_order,
            properties,
        )
        self._check_metadata(staged.metadata, staged.metadata_location)
        self._refuse_taken_or_homeless(ns, name)
        self._precheck_roots(ns, name, staged.metadata)
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
        ns, name = self._table(identifier, NoSuchNamespaceError)
        location = self._canonical(location, "table location")
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
        self._check_metadata(txn.table_metadata, txn.table_metadata.location + "/metadata")
        self._precheck_roots(ns, name, txn.table_metadata)
        return txn

    def _refuse_taken_or_homeless(self, ns: str, name: str) -> None:
        """Fail before anything is written: a bad name, a missing namespace, a table that exists
        (the commit checks again; this spares a metadata file nobody will reference)."""
        with translated(not_found=NoSuchNamespaceError):
            refuse_unclear_name(name, "table")
            view = self._latest_view()
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
            self._check_roots(tx, ns, name, metadata)

        self._change("create_table", create, not_found=NoSuchNamespaceError)

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
        ns, name = self._table(identifier, NoSuchNamespaceError)
        self.check_location(metadata_location, "metadata location")
        io = self._guarded(self._load_file_io(location=metadata_location))
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
        self._check_metadata(metadata, metadata_location)
        references = self._table_references(metadata, metadata_location)

        def register(tx: Transaction) -> None:
            self._check_roots(tx, ns, name, metadata)
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

        self._change("register_table", register, not_found=NoSuchNamespaceError)
        return self.load_table(identifier_of(ns, name))

    def drop_table(self, identifier: str | Identifier) -> None:
        """Remove the table from the lakehouse; its files stay (``purge_table`` deletes them).

        Raises:
            NoSuchTableError: no such table.
        """
        self._refuse_read_only("drop_table")
        ns, name = self._table(identifier)
        self._change(
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
        from_ns, from_name = self._table(from_identifier)
        to_ns, to_name = self._table(to_identifier, NoSuchNamespaceError)

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
            # The roots stay; under the new name the old default location is an explicit one.
            moved = self._table_from(identifier_of(from_ns, from_name), current)
            self._check_roots(tx, to_ns, to_name, moved.metadata, also_not=(from_ns, from_name))

        self._change("rename_table", rename)
        return self.load_table(identifier_of(to_ns, to_name))


__all__ = ["TableOps"]
