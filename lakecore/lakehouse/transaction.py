"""``Transaction``: catalog changes staged, then committed together as one new version.

A change writes new definition files and new nodes and commits a new root (``lakecore.core.commit``).
Reads inside a transaction see its own writes.

Isolation (docs/format.md#isolation), validated by value when a commit loses a race:

* ``snapshot``: every key the transaction wrote must hold, at the new latest version, the value
  it held at the transaction's base. Write skew is allowed.
* ``serializable``: also every key read and every range listed must be unchanged.

Under both levels the catalog's own structure is guarded: creating a table or a view requires
its namespace to be unchanged, and dropping a namespace requires its table and view ranges to be
unchanged, so that concurrent commits can never leave a table or view without its namespace.
Tables and views share a namespace's names (docs/format.md#view-definition): creating either
guards the other kind's key of that name, so two concurrent commits cannot make a table and a
view of one name.

A table's or view's format properties ``metadata_location`` and ``lakecore.*`` are the Iceberg
catalog's (``lakecore.iceberg``): set through this API they are refused, unless the caller says
the catalog checked them (``checked_by_catalog``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, Protocol, Unpack

from lakecore.core import keys as K
from lakecore.core import namespaces as N
from lakecore.core.commit import CommitOutcome, CommitPolicy, RootPlan
from lakecore.core.defs import (
    LakehouseDef,
    TableFields,
    check_table_fields,
    decode_namespace_def,
    decode_table_def,
    decode_view_def,
    encode_def,
    namespace_def,
    pb,
    properties_after,
    table_def,
    table_fields,
    view_def,
)
from lakecore.core.locations import (
    new_lakehouse_def_path,
    new_namespace_def_path,
    new_table_def_path,
    new_view_def_path,
)
from lakecore.core.storage import Storage, request_pool
from lakecore.core.tree import NodeStore, TreeShape, TreeWriter
from lakecore.core.versions import RootInfo
from lakecore.core.view import LakehouseView, read_lakehouse_def, remember_definition, store_for
from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    InvalidArgumentError,
    NamespaceNotEmptyError,
    NotFoundError,
)

Isolation = Literal["snapshot", "serializable"]

# Table format properties only the Iceberg catalog (lakecore.iceberg) sets: the full URI of a
# table's Iceberg metadata, and lakecore's own bookkeeping. A table pointed at Iceberg metadata
# around the catalog escapes the location registry that keeps a purge of one table from deleting
# the files another names (docs/format.md#iceberg-tables).
CATALOG_FORMAT_PROPERTIES = ("metadata_location",)
CATALOG_FORMAT_PROPERTY_PREFIX = "lakecore."


def _refuse_catalog_format_properties(
    ns: str, table: str, format_properties: Mapping[str, str] | None, kind: str = "table"
) -> None:
    for key in format_properties or {}:
        if key in CATALOG_FORMAT_PROPERTIES or key.startswith(CATALOG_FORMAT_PROPERTY_PREFIX):
            raise InvalidArgumentError(
                f"{kind} {ns}.{table}: the format property {key!r} is set by the Iceberg catalog only "
                "(it checks that every Iceberg file lies in the warehouse, where no purge of "
                f"another object deletes it); make the {kind} with LakecoreCatalog.create_{kind} "
                f"or register_{kind}"
            )


# Definition files written at once by one commit (each a round trip on an object store).
DEFINITION_WRITE_THREADS: Final = 16


@dataclass(frozen=True)
class Savepoint:
    """A transaction's staged state at one moment (``Transaction.savepoint``)."""

    writes: dict[str, str | None]
    new_files: dict[str, bytes]
    reads: dict[str, str | None]
    ranges: dict[str, list[tuple[str, str]]]
    guard_keys: dict[str, str | None]
    guard_ranges: dict[str, list[tuple[str, str]]]
    definition_changes: dict[str, str | None]


class CommitTarget(Protocol):
    """What a transaction reads its base from and commits through: a ``Lakehouse``."""

    @property
    def storage(self) -> Storage: ...
    @property
    def root_info(self) -> RootInfo: ...
    @property
    def lakehouse_def(self) -> LakehouseDef: ...
    @property
    def store(self) -> NodeStore: ...
    @property
    def commit_policy(self) -> CommitPolicy: ...

    def commit_plan(
        self,
        plan: Callable[[RootInfo], RootPlan],
        still_valid: Callable[[RootInfo], str | None],
        *,
        policy: CommitPolicy | None = None,
        files_since: float | None = None,
    ) -> CommitOutcome: ...


class Transaction:
    """A set of catalog changes committed together as one new version.

    Use as a context manager: a clean exit commits, an exception aborts and writes no root.
    Reads inside the transaction see its own writes."""

    def __init__(self, lakehouse: CommitTarget, isolation: Isolation, policy: CommitPolicy) -> None:
        self.lakehouse = lakehouse
        self.isolation = isolation
        self.policy = policy
        self.base = lakehouse.root_info
        self.base_view = LakehouseView(
            lakehouse.storage, lakehouse.root_info, lakehouse.lakehouse_def, lakehouse.store
        )
        self.lakehouse_def = lakehouse.lakehouse_def
        self.writes: dict[str, str | None] = {}
        self.new_files: dict[str, bytes] = {}
        self._files_written: set[str] = set()
        # When the first file of this commit was written (on ``policy.clock``): the commit's
        # timeout counts from it (``lakecore.core.commit``).
        self.files_since: float | None = None
        self.reads: dict[str, str | None] = {}
        self.ranges: dict[str, list[tuple[str, str]]] = {}
        self.guard_keys: dict[str, str | None] = {}
        self.guard_ranges: dict[str, list[tuple[str, str]]] = {}
        self.definition_changes: dict[str, str | None] = {}
        self._new_definition_path: str | None = None
        self.committed_version: int | None = None
        self.outcome: CommitOutcome | None = None
        self._closed = False

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    # -- reads that see own writes --------------------------------------------------------------

    def _get(self, key: str, record: bool = True) -> str | None:
        if key in self.writes:
            return self.writes[key]
        value = self.base_view.get(key)
        if record:
            self.reads.setdefault(key, value)
        return value

    def _scan(self, prefix: str, record: bool = True) -> list[tuple[str, str]]:
        base = list(self.base_view.items(prefix))
        if record:
            self.ranges.setdefault(prefix, base)
        merged = dict(base)
        for key, value in self.writes.items():
            if key.startswith(prefix):
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        return sorted(merged.items())

    def _read_def(
        self, location: str, ns: str, table: str | None = None, kind: str = "table"
    ) -> bytes:
        if location in self.new_files:
            return self.new_files[location]
        return self.base_view.read_definition(location, ns, table, kind=kind)

    def namespace_exists(self, ns: str) -> bool:
        return self._get(K.namespace_key(ns, self.lakehouse_def)) is not None

    def table_exists(self, ns: str, table: str) -> bool:
        return self._get(K.table_key(ns, table, self.lakehouse_def)) is not None

    def view_exists(self, ns: str, view: str) -> bool:
        return self._get(K.view_key(ns, view, self.lakehouse_def)) is not None

    def list_namespaces(self) -> list[str]:
        return [
            K.parse_namespace_key(k, self.lakehouse_def)
            for k, _ in self._scan(K.NAMESPACE_KEY_PREFIX)
        ]

    def namespaces_starting_with(self, name_prefix: str, limit: int | None = None) -> list[str]:
        """Names of the namespaces whose name starts with ``name_prefix`` (at most ``limit``,
        in key order). The range is guarded: a commit that creates or drops such a namespace
        meanwhile makes this transaction conflict, so a decision taken on the answer holds."""
        prefix = K.NAMESPACE_KEY_PREFIX + name_prefix
        found = self._scan(prefix, record=False)
        self.guard_ranges.setdefault(prefix, list(self.base_view.items(prefix)))
        names = [K.parse_namespace_key(k, self.lakehouse_def) for k, _ in found]
        return names if limit is None else names[:limit]

    def list_tables(self, ns: str) -> list[str]:
        self._require_namespace(ns, guard=False)
        return [
            K.parse_table_key(k, self.lakehouse_def)[1]
            for k, _ in self._scan(K.table_key_prefix(ns, self.lakehouse_def))
        ]

    def list_views(self, ns: str) -> list[str]:
        self._require_namespace(ns, guard=False)
        return [
            K.parse_view_key(k, self.lakehouse_def)[1]
            for k, _ in self._scan(K.view_key_prefix(ns, self.lakehouse_def))
        ]

    def all_views(self) -> list[tuple[str, str]]:
        """(namespace, view) of every view of the lakehouse, as this transaction would commit
        it: one scan of the view keys (their range is after every table's)."""
        return [K.parse_view_key(k, self.lakehouse_def) for k, _ in self._scan(K.VIEW_KEY_PREFIX)]

    def load_view(self, ns: str, view: str) -> pb.ViewDef:
        location = self._get(K.view_key(ns, view, self.lakehouse_def))
        if location is None:
            raise NotFoundError(f"view {ns}.{view} does not exist")
        return decode_view_def(self._read_def(location, ns, view, "view"), location)

    def load_namespace(self, ns: str) -> pb.NamespaceDef:
        location = self._get(K.namespace_key(ns, self.lakehouse_def))
        if location is None:
            raise NotFoundError(f"namespace {ns!r} does not exist")
        return decode_namespace_def(self._read_def(location, ns), location)

    def load_table(self, ns: str, table: str) -> pb.TableDef:
        location = self._get(K.table_key(ns, table, self.lakehouse_def))
        if location is None:
            raise NotFoundError(f"table {ns}.{table} does not exist")
        return decode_table_def(self._read_def(location, ns, table), location)

    # -- writes ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError("this transaction has already been committed or aborted")

    def _require_namespace(self, ns: str, *, guard: bool) -> str:
        key = K.namespace_key(ns, self.lakehouse_def)
        value = self._get(key)
        if value is None:
            raise NotFoundError(f"namespace {ns!r} does not exist; create it first")
        if guard and key not in self.writes:
            self.guard_keys.setdefault(key, value)
        return key

    def _stage(self, key: str, location: str | None, data: bytes | None = None) -> None:
        if location is not None and data is not None:
            self.new_files[location] = data
        self.writes[key] = location

    def create_namespace(
        self, ns: str, properties: Mapping[str, str] | None = None, *, parents: bool = False
    ) -> None:
        """Create namespace ``ns`` (``a.b`` is ``b`` inside ``a``: ``lakecore.core.namespaces``).
        With ``parents`` every missing ancestor is created too (with no properties); without,
        a missing parent stays implied, as before namespaces nested.

        Raises:
            InvalidNameError: a level is empty, or the name breaks the name rule.
            AlreadyExistsError: it exists.
        """
        self._check_open()
        N.check_new_name(ns, K.namespace_name_max_bytes(self.lakehouse_def))
        for level in N.levels(ns):
            K.refuse_unclear_name(level, "namespace")
        key = K.namespace_key(ns, self.lakehouse_def)
        if self._get(key) is not None:
            raise AlreadyExistsError(f"namespace {ns!r} already exists")
        up = N.parent(ns)
        if up is not None:
            if self._get(K.namespace_key(up, self.lakehouse_def)) is not None:
                # Guarded: a parent dropped meanwhile makes this commit conflict.
                self._require_namespace(up, guard=True)
            elif parents:
                self.create_namespace(up, parents=True)
        definition = namespace_def(ns, properties)
        self._stage(key, new_namespace_def_path(ns), encode_def(definition))

    def has_child_namespaces(self, ns: str) -> bool:
        """Whether ``ns`` has a child namespace (as this transaction would commit)."""
        return bool(self._child_namespaces_sample(ns, 1))

    def _child_namespaces_sample(self, ns: str, limit: int) -> list[str]:
        """Up to ``limit`` descendants of ``ns``, read lazily (never the whole range)."""
        prefix = K.NAMESPACE_KEY_PREFIX + N.descendants_prefix(ns)
        found = sorted(k for k, v in self.writes.items() if v is not None and k.startswith(prefix))
        for key, _ in self.base_view.items(prefix):
            if len(found) >= limit:
                break
            if key not in self.writes:  # a key this transaction deleted is gone
                found.append(key)
        return [K.parse_namespace_key(k, self.lakehouse_def) for k in found[:limit]]

    def update_namespace(
        self,
        ns: str,
        properties: Mapping[str, str] | None = None,
        remove_properties: Iterable[str] = (),
    ) -> None:
        self._check_open()
        current = self.load_namespace(ns)
        definition = namespace_def(
            ns, properties_after(current.properties, properties, remove_properties)
        )
        self._stage(
            K.namespace_key(ns, self.lakehouse_def),
            new_namespace_def_path(ns),
            encode_def(definition),
        )

    def drop_namespace(self, ns: str) -> None:
        self._check_open()
        key = self._require_namespace(ns, guard=False)
        children_prefix = K.NAMESPACE_KEY_PREFIX + N.descendants_prefix(ns)
        children = self._child_namespaces_sample(ns, 5)
        if children:
            raise NamespaceNotEmptyError(
                f"namespace {ns!r} still holds namespace(s) ({', '.join(children)}"
                f"{', ...' if len(children) >= 5 else ''}); drop them first"
            )
        # Guarded: a child created meanwhile makes this commit conflict.
        self.guard_ranges.setdefault(children_prefix, [])
        prefix = K.table_key_prefix(ns, self.lakehouse_def)
        tables = self._scan(prefix)
        if tables:
            names = [K.parse_table_key(k, self.lakehouse_def)[1] for k, _ in tables[:5]]
            raise NamespaceNotEmptyError(
                f"namespace {ns!r} still holds {len(tables)} table(s) ({', '.join(names)}"
                f"{', ...' if len(tables) > 5 else ''}); drop them first"
            )
        self.guard_ranges.setdefault(prefix, self.ranges.get(prefix, []))
        view_prefix = K.view_key_prefix(ns, self.lakehouse_def)
        views = self._scan(view_prefix)
        if views:
            names = [K.parse_view_key(k, self.lakehouse_def)[1] for k, _ in views[:5]]
            raise NamespaceNotEmptyError(
                f"namespace {ns!r} still holds {len(views)} view(s) ({', '.join(names)}"
                f"{', ...' if len(views) > 5 else ''}); drop them first"
            )
        self.guard_ranges.setdefault(view_prefix, self.ranges.get(view_prefix, []))
        self._stage(key, None)

    def create_table(
        self,
        ns: str,
        table: str,
        *,
        checked_by_catalog: bool = False,
        **fields: Unpack[TableFields],
    ) -> None:
        """Create table ``ns.table`` of the definition ``fields`` (``table_def``'s). The format
        properties ``CATALOG_FORMAT_PROPERTIES`` (and ``lakecore.*``) are refused unless
        ``checked_by_catalog``: only the Iceberg catalog, which checks where the table's files
        live, passes it.

        Raises:
            AlreadyExistsError: it exists.
            NotFoundError: its namespace does not exist.
            InvalidArgumentError: a catalog-only format property, or a bad definition.
        """
        self._check_open()
        check_table_fields(fields)
        if not checked_by_catalog:
            _refuse_catalog_format_properties(ns, table, fields.get("format_properties"))
        key = K.table_key(ns, table, self.lakehouse_def)
        K.refuse_unclear_name(table, "table")
        self._require_namespace(ns, guard=True)
        if self._get(key) is not None:
            raise AlreadyExistsError(f"table {ns}.{table} already exists")
        self._refuse_other_kind(K.view_key(ns, table, self.lakehouse_def), f"{ns}.{table}", "view")
        definition = table_def(table, **fields)
        self._stage(key, new_table_def_path(ns, table), encode_def(definition))

    def update_table(
        self,
        ns: str,
        table: str,
        *,
        properties: Mapping[str, str] | None = None,
        remove_properties: Iterable[str] = (),
        columns: Iterable[Mapping[str, Any] | pb.Column] | None = None,
        format_properties: Mapping[str, str] | None = None,
        table_type: str | None = None,
        checked_by_catalog: bool = False,
    ) -> None:
        """Merge ``properties`` (and ``format_properties``) into the table's, drop
        ``remove_properties``, replace the schema when ``columns`` is given and the type when
        ``table_type`` is. Catalog-only format properties as in ``create_table``."""
        self._check_open()
        if not checked_by_catalog:
            _refuse_catalog_format_properties(ns, table, format_properties)
        current = self.load_table(ns, table)
        fields = table_fields(current)
        fields["properties"] = properties_after(current.properties, properties, remove_properties)
        fields["format_properties"] = properties_after(current.format_properties, format_properties)
        if columns is not None:
            fields["columns"] = columns
        if table_type:
            fields["table_type"] = table_type
        definition = table_def(table, **fields)
        self._stage(
            K.table_key(ns, table, self.lakehouse_def),
            new_table_def_path(ns, table),
            encode_def(definition),
        )

    def drop_table(self, ns: str, table: str) -> None:
        self._check_open()
        self._drop(K.table_key(ns, table, self.lakehouse_def), f"table {ns}.{table}")

    def _drop(self, key: str, what: str) -> None:
        """Unset ``key`` (a table's or a view's, named ``what``), which must be set."""
        if self._get(key) is None:
            raise NotFoundError(f"{what} does not exist")
        self._stage(key, None)

    def _refuse_other_kind(self, key: str, name: str, kind: str) -> None:
        """A table and a view of one name cannot both exist: refuse when the other kind's key
        is set, and guard it (unset) so a concurrent create of it makes this commit conflict."""
        value = self._get(key, record=False)
        if value is not None:
            raise AlreadyExistsError(
                f"{name} already exists as a {kind}: a namespace's tables and views share names"
            )
        if key not in self.writes:
            self.guard_keys.setdefault(key, None)

    # -- views ----------------------------------------------------------------------------------

    def create_view(
        self,
        ns: str,
        view: str,
        columns: Iterable[Mapping[str, Any] | pb.Column] = (),
        *,
        view_format: str = "ICEBERG",
        properties: Mapping[str, str] | None = None,
        format_properties: Mapping[str, str] | None = None,
        checked_by_catalog: bool = False,
    ) -> None:
        """Create view ``ns.view`` (docs/format.md#view-definition). Its name may not be a
        table's. Catalog-only format properties as in ``create_table``.

        Raises:
            AlreadyExistsError: it exists, or a table of that name does.
            NotFoundError: its namespace does not exist.
            InvalidArgumentError: a catalog-only format property, or a bad definition.
        """
        self._check_open()
        if not checked_by_catalog:
            _refuse_catalog_format_properties(ns, view, format_properties, "view")
        key = K.view_key(ns, view, self.lakehouse_def)
        K.refuse_unclear_name(view, "view")
        self._require_namespace(ns, guard=True)
        if self._get(key) is not None:
            raise AlreadyExistsError(f"view {ns}.{view} already exists")
        self._refuse_other_kind(K.table_key(ns, view, self.lakehouse_def), f"{ns}.{view}", "table")
        definition = view_def(
            view,
            columns=columns,
            view_format=view_format,
            format_properties=format_properties,
            properties=properties,
        )
        self._stage(key, new_view_def_path(ns, view), encode_def(definition))

    def update_view(
        self,
        ns: str,
        view: str,
        *,
        columns: Iterable[Mapping[str, Any] | pb.Column] | None = None,
        properties: Mapping[str, str] | None = None,
        remove_properties: Iterable[str] = (),
        format_properties: Mapping[str, str] | None = None,
        checked_by_catalog: bool = False,
    ) -> None:
        """Merge ``properties`` and ``format_properties`` into the view's, drop
        ``remove_properties``, replace the columns when given.

        Raises:
            NotFoundError: no such view.
        """
        self._check_open()
        if not checked_by_catalog:
            _refuse_catalog_format_properties(ns, view, format_properties, "view")
        current = self.load_view(ns, view)
        definition = view_def(
            view,
            columns=list(current.schema.columns) if columns is None else columns,
            view_format=current.view_format or "ICEBERG",
            format_properties=properties_after(current.format_properties, format_properties),
            properties=properties_after(current.properties, properties, remove_properties),
        )
        self._stage(
            K.view_key(ns, view, self.lakehouse_def),
            new_view_def_path(ns, view),
            encode_def(definition),
        )

    def drop_view(self, ns: str, view: str) -> None:
        self._check_open()
        self._drop(K.view_key(ns, view, self.lakehouse_def), f"view {ns}.{view}")

    def definition_property(self, key: str) -> str | None:
        """A lakehouse definition property as this transaction would commit it."""
        if key in self.definition_changes:
            return self.definition_changes[key]
        return self.lakehouse_def.properties.get(key)

    def set_definition_properties(self, changes: Mapping[str, str | None]) -> None:
        """Set (``None``: remove) lakehouse definition properties in this commit, for lakecore's
        own bookkeeping kept beside the keys (the Iceberg catalog's location registry). Such a
        commit never lands on a version whose definition another commit changed after this
        transaction's base: it conflicts instead, and the caller redoes it on the new
        definition, so one writer's bookkeeping never overwrites another's."""
        self._check_open()
        self.definition_changes.update(changes)

    # -- commit ---------------------------------------------------------------------------------

    def abort(self) -> None:
        """Drop the staged changes; nothing has been written."""
        self._closed = True
        self.writes.clear()
        self.new_files.clear()

    def savepoint(self) -> Savepoint:
        """What this transaction has staged so far, to go back to with ``rollback_to``: a
        caller staging several independent changes in one transaction (the Iceberg catalog's
        group commit) drops one that fails without dropping the others."""
        self._check_open()
        return Savepoint(
            dict(self.writes),
            dict(self.new_files),
            dict(self.reads),
            dict(self.ranges),
            dict(self.guard_keys),
            dict(self.guard_ranges),
            dict(self.definition_changes),
        )

    def rollback_to(self, savepoint: Savepoint) -> None:
        """Forget everything staged since ``savepoint`` was taken."""
        self._check_open()
        self.writes = dict(savepoint.writes)
        self.new_files = dict(savepoint.new_files)
        self.reads = dict(savepoint.reads)
        self.ranges = dict(savepoint.ranges)
        self.guard_keys = dict(savepoint.guard_keys)
        self.guard_ranges = dict(savepoint.guard_ranges)
        self.definition_changes = dict(savepoint.definition_changes)

    def write_new_files(self) -> None:
        """Write the definition files staged so far now (the commit writes any left): a caller
        with other files to write before the root writes these beside them, in one round."""
        self._check_open()
        self._files_written_now()  # the caller's own files go out beside these
        self._write_new_files()

    def _files_written_now(self) -> None:
        if self.files_since is None:
            self.files_since = self.policy.clock()

    def _write_new_files(self) -> None:
        # Only definitions a key still points to: a table created and then updated in the same
        # transaction needs its last definition file, not the first.
        live = {location for location in self.writes.values() if location is not None}
        todo = [
            (path, data)
            for path, data in self.new_files.items()
            if path in live and path not in self._files_written
        ]
        if not todo:
            return
        self._files_written_now()
        storage = self.lakehouse.storage

        def write(item: tuple[str, bytes]) -> None:
            storage.write(item[0], item[1], durable=False)

        # Side by side: on S3 each write is a round trip, and a batch of commits writes one
        # definition per table. One sync for all, before the root can name any of them.
        if len(todo) == 1:
            write(todo[0])
        else:
            list(request_pool(DEFINITION_WRITE_THREADS).map(write, todo))
        storage.sync()
        self._files_written.update(path for path, _ in todo)
        for path, data in todo:
            remember_definition(storage, path, data)

    def _plan(self, base: RootInfo) -> RootPlan:
        self._write_new_files()
        writer = TreeWriter(self.lakehouse.store, TreeShape.of(self.lakehouse_def), base.node)
        for key in sorted(self.writes):
            writer.put(key, self.writes[key])
        return RootPlan(writer.finish(), self._definition_path(base))

    def _definition_path(self, base: RootInfo) -> str:
        """The base's definition, or a new one with ``definition_changes`` applied (written
        once; ``_still_valid`` keeps every attempt on the same base definition)."""
        if not self.definition_changes:
            return base.lakehouse_def_path
        if self._new_definition_path is None:
            properties = dict(self.lakehouse_def.properties)
            for key, value in self.definition_changes.items():
                if value is None:
                    properties.pop(key, None)
                else:
                    properties[key] = value
            new_def = self.lakehouse_def.with_changes(properties=properties).validate()
            path = new_lakehouse_def_path()
            self._files_written_now()
            self.lakehouse.storage.write(path, new_def.to_bytes())
            self._new_definition_path = path
        return self._new_definition_path

    def _still_valid(self, latest: RootInfo) -> str | None:
        latest_def = read_lakehouse_def(self.lakehouse.storage, latest.lakehouse_def_path)
        view = LakehouseView(
            self.lakehouse.storage,
            latest,
            latest_def,
            store_for(self.lakehouse.storage, latest_def),
        )
        if (
            latest_def.namespace_name_max_size_bytes,
            latest_def.table_name_max_size_bytes,
            latest_def.order,
        ) != (
            self.lakehouse_def.namespace_name_max_size_bytes,
            self.lakehouse_def.table_name_max_size_bytes,
            self.lakehouse_def.order,
        ):
            return "the lakehouse definition changed its key layout"
        if self.definition_changes and latest.lakehouse_def_path != self.base.lakehouse_def_path:
            return "the lakehouse definition this transaction changes was changed by another commit"
        base_values = {key: self.base_view.get(key) for key in self.writes}
        for key, before in base_values.items():
            if view.get(key) != before:
                return f"key {key.rstrip()!r} was changed by another commit"
        checks: list[tuple[dict[str, str | None], dict[str, list[tuple[str, str]]]]] = [
            (self.guard_keys, self.guard_ranges)
        ]
        if self.isolation == "serializable":
            checks.append((self.reads, self.ranges))
        for keys, ranges in checks:
            for key, before in keys.items():
                if view.get(key) != before:
                    return f"key {key.rstrip()!r} that this transaction read was changed by another commit"
            for prefix, listed in ranges.items():
                if list(view.items(prefix)) != listed:
                    return f"the range {prefix.rstrip()!r} that this transaction listed was changed by another commit"
        return None

    def commit(self) -> int:
        """Commit the staged changes; returns the new version (the base version if nothing changed)."""
        self._check_open()
        self._closed = True
        if not self.writes and not self.definition_changes:
            self.committed_version = self.base.version
            return self.base.version
        if self.lakehouse.root_info.version != self.base.version:
            raise CommitConflictError(
                "the lakehouse object moved to another version while this transaction was open; "
                "start transactions from the object you commit them with"
            )
        self.outcome = self.lakehouse.commit_plan(
            self._plan, self._still_valid, policy=self.policy, files_since=self.files_since
        )
        self.committed_version = self.outcome.version
        return self.outcome.version


__all__ = ["CATALOG_FORMAT_PROPERTIES", "CommitTarget", "Isolation", "Savepoint", "Transaction"]
