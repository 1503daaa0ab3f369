"""The catalog API: a lakehouse of namespaces and tables, versions, transactions and exports.

Objects live in the tree under their encoded keys (``lakecore.keys``); each key's pvalue is the
location of the object's definition file (``.binpb``). A change writes new definition files and
new nodes and commits a new root (``lakecore.commit``).

Isolation (docs/format.md#isolation), validated by value when a commit loses a race:

* ``snapshot``: every key the transaction wrote must hold, at the new latest version, the value
  it held at the transaction's base. Write skew is allowed.
* ``serializable``: also every key read and every range listed must be unchanged.

Under both levels the catalog's own structure is guarded: creating a table requires its
namespace to be unchanged, and dropping a namespace requires its table range to be unchanged,
so that concurrent commits can never leave a table without its namespace.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from lakecore import keys as K
from lakecore import namespaces as N
from lakecore.commit import CommitOutcome, CommitPolicy, RootPlan, commit
from lakecore.defs import (
    LakehouseDef,
    decode_namespace_def,
    decode_table_def,
    encode_def,
    namespace_def,
    pb,
    table_def,
)
from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    InvalidArgumentError,
    LakecoreError,
    NamespaceNotEmptyError,
    NotFoundError,
    ReadOnlyLakehouseError,
)
from lakecore.lakehouse.export import CopyFiles, copy_snapshot, export_target
from lakecore.locations import (
    new_lakehouse_def_path,
    new_namespace_def_path,
    new_table_def_path,
    root_node_file_name,
)
from lakecore.node import Node
from lakecore.storage import Storage
from lakecore.tree import NodeStore, TreeShape, TreeWriter
from lakecore.versions import (
    RootInfo,
    read_version,
    refuse_a_file_as_root,
    version_as_of,
    write_hint,
)
from lakecore.view import (
    ROLLBACK_PIN_PREFIX,
    ExportInfo,
    LakehouseView,
    VersionInfo,
    check_export_name_free,
    check_user_properties,
    has_lakehouse,
    list_versions,
    open_version,
    read_lakehouse_def,
    read_root_and_def,
    store_for,
    with_export_recorded,
    with_rollback_pin,
    without_export,
)

_LOG = logging.getLogger(__name__)

Isolation = Literal["snapshot", "serializable"]
ExportMode = Literal["minimal", "partial", "full"]

# Table format properties only the Iceberg catalog (lakecore.iceberg) sets: the full URI of a
# table's Iceberg metadata, and lakecore's own bookkeeping. A table pointed at Iceberg metadata
# around the catalog escapes the location registry that keeps a purge of one table from deleting
# the files another names (docs/format.md#iceberg-tables).
CATALOG_FORMAT_PROPERTIES = ("metadata_location",)
CATALOG_FORMAT_PROPERTY_PREFIX = "lakecore."


def _refuse_catalog_format_properties(
    ns: str, table: str, format_properties: Mapping[str, str] | None
) -> None:
    for key in format_properties or {}:
        if key in CATALOG_FORMAT_PROPERTIES or key.startswith(CATALOG_FORMAT_PROPERTY_PREFIX):
            raise InvalidArgumentError(
                f"table {ns}.{table}: the format property {key!r} is set by the Iceberg catalog only "
                "(it checks that no two tables share a folder, so a purge never deletes another "
                "table's files); make the table with LakecoreCatalog.create_table or register_table"
            )


def _now_millis() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class SettingsChange:
    """The outcome of ``Lakehouse.update_settings``: the version in force afterwards, whether a
    version was committed, and the definitions before and after."""

    version: int
    committed: bool
    before: LakehouseDef
    after: LakehouseDef


class _Unchanged(Exception):
    """A definition change that changes nothing: commit nothing."""

    def __init__(self, base: RootInfo) -> None:
        super().__init__("unchanged")
        self.base = base


class Lakehouse(LakehouseView):
    """A lakehouse at its latest version (as of open or the last refresh or commit)."""

    def __init__(
        self,
        storage: Storage,
        root: RootInfo,
        lakehouse_def: LakehouseDef,
        store: NodeStore,
        *,
        commit_policy: CommitPolicy | None = None,
    ) -> None:
        super().__init__(storage, root, lakehouse_def, store)
        self.commit_policy = commit_policy or CommitPolicy()
        self.last_commit: CommitOutcome | None = None

    # -- opening --------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        uri: str,
        name: str = "lakehouse",
        *,
        storage_options: Mapping[str, Any] | None = None,
        properties: Mapping[str, str] | None = None,
        **definition: Any,
    ) -> Lakehouse:
        """Create a lakehouse (version 0, an empty tree) at ``uri``; AlreadyExistsError if one is there."""
        unknown = set(definition) - set(LakehouseDef.__dataclass_fields__) - {"properties"}
        if unknown:
            raise InvalidArgumentError(
                f"unknown lakehouse definition fields: {', '.join(sorted(unknown))}"
            )
        if "major_version" in definition and definition["major_version"] != 0:
            from lakecore.errors import UnsupportedFormatVersionError

            raise UnsupportedFormatVersionError(
                f"this lakecore writes format major version 0, not {definition['major_version']}"
            )
        check_user_properties(dict(properties or {}))
        lakehouse_def = LakehouseDef(
            name=name, properties=dict(properties or {}), **definition
        ).validate()
        storage = Storage(uri, storage_options)
        refuse_a_file_as_root(storage)
        if has_lakehouse(storage):
            raise AlreadyExistsError(
                f"a lakehouse already exists at {storage.root_uri}; open it instead"
            )
        present = storage.first_files(3)
        if present:
            raise AlreadyExistsError(
                f"{storage.root_uri} already holds other files ({', '.join(present)}"
                f"{', ...' if len(present) == 3 else ''}); create the lakehouse in an empty or new folder"
            )
        def_path = new_lakehouse_def_path()
        storage.write(def_path, lakehouse_def.to_bytes())
        from lakecore.versions import encode_root

        created = _now_millis()
        data = encode_root(
            Node(),
            lakehouse_def.order,
            lakehouse_def_path=def_path,
            previous_root=None,
            created_at_millis=created,
        )
        try:
            storage.create_exclusive(root_node_file_name(0), data)
        except AlreadyExistsError:
            raise AlreadyExistsError(
                f"another process created a lakehouse at {storage.root_uri} at the same time"
            ) from None
        write_hint(storage, 0)
        return cls.open(storage.root_uri, storage_options=storage_options)

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        version: int | None = None,
        commit_policy: CommitPolicy | None = None,
    ) -> Lakehouse:
        """Open the latest version (or ``version``); NotFoundError if there is no lakehouse."""
        storage = Storage(uri, storage_options)
        root, lakehouse_def = read_root_and_def(storage, version)
        return cls(
            storage,
            root,
            lakehouse_def,
            store_for(storage, lakehouse_def),
            commit_policy=commit_policy,
        )

    def refresh(self) -> Lakehouse:
        """Move to the latest version."""
        root, lakehouse_def = read_root_and_def(self.storage, None)
        self._install(root, lakehouse_def)
        return self

    def _install(self, root: RootInfo, lakehouse_def: LakehouseDef) -> None:
        self.root_info = root
        self._lookup_reader = None  # a lookup file belongs to one version
        if lakehouse_def != self.lakehouse_def:
            self.lakehouse_def = lakehouse_def
            self.store = store_for(self.storage, lakehouse_def)
            self.shape = TreeShape.of(lakehouse_def)

    # -- time travel ----------------------------------------------------------------------------

    def at_version(self, version: int) -> LakehouseView:
        root, lakehouse_def = read_root_and_def(self.storage, version)
        return LakehouseView(
            self.storage, root, lakehouse_def, store_for(self.storage, lakehouse_def)
        )

    def as_of(self, timestamp_millis: int) -> LakehouseView:
        latest, _ = read_root_and_def(self.storage, None)
        found = version_as_of(self.storage, int(timestamp_millis), latest)
        return self.at_version(found.version)

    def versions(self) -> list[VersionInfo]:
        """Every version whose root file exists, newest first (see ``list_versions``)."""
        return list_versions(self.storage)

    # -- changes --------------------------------------------------------------------------------

    def transaction(
        self, isolation: Isolation = "snapshot", *, max_retries: int | None = None
    ) -> Transaction:
        if isolation not in ("snapshot", "serializable"):
            raise InvalidArgumentError(
                f"isolation {isolation!r} must be 'snapshot' or 'serializable'"
            )
        policy = self.commit_policy
        if max_retries is not None:
            policy = CommitPolicy(
                max_retries, policy.backoff_base_seconds, policy.backoff_cap_seconds, policy.rng
            )
        return Transaction(self, isolation, policy)

    def commit_plan(
        self,
        plan: Callable[[RootInfo], RootPlan],
        still_valid: Callable[[RootInfo], str | None],
        *,
        policy: CommitPolicy | None = None,
    ) -> CommitOutcome:
        """Commit on top of this object's version; on success this object moves to it.

        Once the root has landed nothing may raise: the commit is acknowledged even when the new
        lakehouse definition cannot be read back (a caller that saw an error would retry and
        commit twice). In that rare case this object stays at its old version, and its next
        commit moves past the new one like any concurrent commit.

        Every commit goes through here (transactions, rollback, definition changes, exports'
        records, the maintenance jobs), so this is where an exported copy refuses them."""
        self.require_writable("commit a new version")
        outcome = commit(
            self.storage,
            self.lakehouse_def.order,
            self.root_info,
            plan,
            still_valid,
            policy or self.commit_policy,
        )
        self.last_commit = outcome
        lakehouse_def = self._definition_of_landed_root(outcome.root)
        if lakehouse_def is not None:
            self._install(outcome.root, lakehouse_def)
        return outcome

    def require_writable(self, action: str) -> None:
        """ReadOnlyLakehouseError if this lakehouse is an exported copy. ``commit_plan`` calls it
        for every commit; a job that writes files before it commits calls it first."""
        reason = self.read_only_reason
        if reason is not None:
            raise ReadOnlyLakehouseError(
                f"cannot {action} in {self.uri}: it is {reason}; make changes in the source lakehouse "
                "(and export again), and read this copy as it is"
            )

    def _definition_of_landed_root(self, root: RootInfo) -> LakehouseDef | None:
        if root.lakehouse_def_path == self.root_info.lakehouse_def_path:
            return self.lakehouse_def  # the usual case: the definition did not change
        try:
            return read_lakehouse_def(self.storage, root.lakehouse_def_path)
        except LakecoreError as exc:
            _LOG.warning(
                "version %d committed, but its lakehouse definition %s could not be read (%s); "
                "this Lakehouse object stays at version %d",
                root.version,
                root.lakehouse_def_path,
                exc,
                self.version,
            )
            return None

    def rollback(self, to_version: int) -> int:
        """Roll forward to the content of ``to_version``; returns the new version, or the
        latest one when it already has that content (then nothing is committed)."""
        return self.rollback_if_needed(to_version)[0]

    def rollback_if_needed(self, to_version: int) -> tuple[int, bool]:
        """``rollback``, and whether it committed: a version whose tree is ``to_version``'s
        already (the latest itself, or a later one that undid every change) gets no new version.

        A rollback pins its target before it reads it, as an export does, and takes the pin back
        in the commit that rolls forward: two versions. Version compaction may be expiring the
        target meanwhile; it honours pins it sees before it deletes the target's root, and it
        re-reads them after its last re-check, before it deletes any other file
        (``maintenance.expire.recheck``). So either compaction sees the pin and keeps the
        target's files, or it had deleted the target's root already and the read after the pin
        fails (``VersionExpiredError``): the rolled-back version never names a deleted file."""
        self.require_writable("roll back")
        order = self.lakehouse_def.order
        target = read_version(self.storage, to_version, order)  # its errors, before any commit
        if self.root_info.node.same_tree_as(target.node):
            return self.version, False
        pin = f"{ROLLBACK_PIN_PREFIX}{uuid.uuid4().hex[:12]}"
        root_file = root_node_file_name(to_version)
        seen_version = self.version

        def still_valid(latest: RootInfo) -> str | None:
            # A rollback discards what came after the version it was asked on: never more.
            return (
                f"version {latest.version} was committed after {seen_version} while rolling "
                "back; rerun the rollback"
            )

        no_retry = CommitPolicy(max_retries=0)
        self._update_definition(
            lambda current: with_rollback_pin(current, pin, root_file),
            still_valid=still_valid,
            policy=no_retry,
        )
        try:
            target = read_version(self.storage, to_version, order)  # after the pin: see above

            def plan(base: RootInfo) -> RootPlan:
                if base.node.same_tree_as(target.node):
                    raise _Unchanged(base)
                current = read_lakehouse_def(self.storage, base.lakehouse_def_path)
                path = new_lakehouse_def_path()
                self.storage.write(path, without_export(current, pin).to_bytes())
                node = Node(
                    target.node.keys, target.node.values, target.node.children, target.node.buffer
                )
                # The version the rollback was asked on, whose content the pin's version (the
                # previous root) carries: where the operator rolled back from.
                return RootPlan(node, path, rollback_from_root=root_node_file_name(seen_version))

            return self.commit_plan(plan, still_valid, policy=no_retry).version, True
        except _Unchanged as unchanged:
            self.refresh()
            self._release_rollback_pin(pin, None)
            return unchanged.base.version, False
        except BaseException as exc:
            self._release_rollback_pin(pin, exc)
            raise

    def _release_rollback_pin(self, pin: str, failure: BaseException | None) -> None:
        """Take back a rollback's pin after the rollback did not commit. A release that fails
        too says what to run: the pin keeps the target from expiring until it is dropped."""
        try:
            self.update_definition(
                lambda current: (
                    without_export(current, pin) if pin in current.exported_snapshots else current
                )
            )
        except LakecoreError as exc:
            advice = (
                f"the rollback's pin {pin!r} could not be taken back ({exc.one_line()}): run "
                f"`lakecore -l {self.uri} export drop {pin}`"
            )
            if failure is None or not isinstance(failure, LakecoreError):
                _LOG.warning("%s", advice)
                return
            raise LakecoreError(f"{failure.one_line()}; and {advice}") from failure

    def update_definition(self, change: Callable[[LakehouseDef], LakehouseDef]) -> int:
        """Commit a new lakehouse definition (same tree content); returns the new version.

        ``change`` is applied to the latest definition at each commit attempt (so a concurrent
        definition change is never lost). When it changes nothing, nothing is committed and the
        version it was applied to is returned."""
        return self._update_definition(change)[0]

    def _update_definition(
        self,
        change: Callable[[LakehouseDef], LakehouseDef],
        *,
        still_valid: Callable[[RootInfo], str | None] = lambda latest: None,
        policy: CommitPolicy | None = None,
    ) -> tuple[int, bool]:
        """``update_definition``, and whether it committed. By default a concurrent commit is
        no conflict (``change`` is applied to the latest definition); ``still_valid`` and
        ``policy`` say otherwise (a rollback's pin: its base is what the caller saw)."""

        def plan(base: RootInfo) -> RootPlan:
            current = read_lakehouse_def(self.storage, base.lakehouse_def_path)
            new_def = change(current).validate()
            if (
                new_def.order,
                new_def.namespace_name_max_size_bytes,
                new_def.table_name_max_size_bytes,
            ) != (
                current.order,
                current.namespace_name_max_size_bytes,
                current.table_name_max_size_bytes,
            ):
                raise InvalidArgumentError(
                    "the order and the name limits of a lakehouse cannot change"
                )
            if new_def == current:
                raise _Unchanged(base)
            path = new_lakehouse_def_path()
            self.storage.write(path, new_def.to_bytes())
            return RootPlan(
                Node(base.node.keys, base.node.values, base.node.children, base.node.buffer), path
            )

        try:
            return self.commit_plan(plan, still_valid, policy=policy).version, True
        except _Unchanged as unchanged:
            if unchanged.base.version != self.version:
                self.refresh()
            return unchanged.base.version, False

    def update_settings(
        self,
        *,
        maximum_version_age_millis: int | None = None,
        minimum_versions_to_keep: int | None = None,
        set_version_age_overrides: Mapping[int, int] | None = None,
        unset_version_age_overrides: Iterable[int] = (),
        set_properties: Mapping[str, str] | None = None,
        unset_properties: Iterable[str] = (),
    ) -> SettingsChange:
        """Change the retention settings and properties after ``create``, validated as there
        (``LakehouseDef.validate`` and the reserved property keys). Unsetting an override or a
        property that is not set is an error (NotFoundError), so a typo does not pass as done.
        A change that changes nothing commits nothing (``committed`` is False)."""
        set_overrides = dict(set_version_age_overrides or {})
        unset_overrides = list(unset_version_age_overrides)
        props = dict(set_properties or {})
        unset_props = list(unset_properties)
        check_user_properties([*props, *unset_props])
        for key, value in props.items():
            if not isinstance(value, str):
                raise InvalidArgumentError(
                    f"lakehouse property {key!r} must have a string value; got {value!r}"
                )
        both = sorted(set(set_overrides) & set(unset_overrides))
        if both:
            raise InvalidArgumentError(
                f"version {both[0]}'s age override is both set and unset; choose one"
            )
        both_props = sorted(set(props) & set(unset_props))
        if both_props:
            raise InvalidArgumentError(
                f"property {both_props[0]!r} is both set and unset; choose one"
            )
        seen: dict[str, LakehouseDef] = {}

        def change(current: LakehouseDef) -> LakehouseDef:
            overrides = dict(current.maximum_version_age_millis_overrides)
            for version in unset_overrides:
                if version not in overrides:
                    raise NotFoundError(
                        f"version {version} has no maximum-version-age override to unset (overridden: "
                        f"{', '.join(map(str, sorted(overrides))) or 'none'})"
                    )
                del overrides[version]
            overrides.update(set_overrides)
            properties = dict(current.properties)
            for key in unset_props:
                if key not in properties:
                    raise NotFoundError(
                        f"lakehouse property {key!r} is not set, so it cannot be unset"
                    )
                del properties[key]
            properties.update(props)
            changes: dict[str, Any] = {
                "maximum_version_age_millis_overrides": overrides,
                "properties": properties,
            }
            if maximum_version_age_millis is not None:
                changes["maximum_version_age_millis"] = maximum_version_age_millis
            if minimum_versions_to_keep is not None:
                changes["minimum_versions_to_keep"] = minimum_versions_to_keep
            new_def = current.with_changes(**changes)
            seen["before"], seen["after"] = current, new_def
            return new_def

        version, committed = self._update_definition(change)
        return SettingsChange(version, committed, seen["before"], seen["after"])

    def drop_export(self, name: str) -> int:
        """Commit a definition without export ``name``; returns the new version. The version it
        pinned is then retained by the usual rules only, so the next version expiry and gc may
        collect it. NotFoundError if there is no such export (in the latest definition)."""

        def change(current: LakehouseDef) -> LakehouseDef:
            if name not in current.exported_snapshots:
                known = ", ".join(repr(n) for n in sorted(current.exported_snapshots)) or "none"
                raise NotFoundError(
                    f"there is no export named {name!r} in {self.uri} (exports: {known}); "
                    "see `lakecore export list`"
                )
            return without_export(current, name)

        self.require_writable(f"drop export {name!r}")
        return self.update_definition(change)

    def export_snapshot(
        self,
        name: str,
        mode: ExportMode = "minimal",
        *,
        target: str | None = None,
        target_storage_options: Mapping[str, Any] | None = None,
        version: int | None = None,
        copy_files: CopyFiles | None = None,
    ) -> int:
        """Export a version (default: this one) under ``name``; returns the new source version.

        The source's lakehouse definition records ``exported_snapshots[name]`` = the exported
        root file, which pins that version against expiry. With ``target``, a read-only copy is
        made there: ``minimal`` copies the root node only, ``partial`` every node file, and
        ``full`` every node and definition file; what is not copied is referenced by full URI.
        ``copy_files`` does a full copy's bulk work (the Spark job passes a distributed one).

        Raises ReadOnlyLakehouseError (this is a copy), InvalidArgumentError (bad name or mode),
        AlreadyExistsError (the name is taken, or the target holds a lakehouse), NotFoundError
        (no such version), CommitConflictError, StorageError."""
        self.require_writable("export a snapshot")  # before the copy: it records in a commit
        if mode not in ("minimal", "partial", "full"):
            raise InvalidArgumentError(f"export mode {mode!r} must be minimal, partial or full")
        if not name or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in name):
            raise InvalidArgumentError(
                f"export name {name!r} must be non-empty with no spaces or control characters"
            )
        if name.startswith(ROLLBACK_PIN_PREFIX):
            raise InvalidArgumentError(
                f"export name {name!r} starts with {ROLLBACK_PIN_PREFIX!r}, which names the pins "
                "of rollbacks in progress; choose another name"
            )
        check_export_name_free(self.lakehouse_def, name)
        exported = (
            self.root_info
            if version is None
            else read_version(self.storage, version, self.lakehouse_def.order)
        )
        target_storage = (
            None if target is None else export_target(self.storage, target, target_storage_options)
        )
        root_file = root_node_file_name(exported.version)
        target_uri = None if target_storage is None else target_storage.root_uri
        # The pin first, the copy after (lakecore/lakehouse/export.py): a version compaction that plans
        # from here on keeps the exported version; one that planned earlier re-reads the exports
        # before it deletes a root. One that had already passed that re-check may have deleted
        # the root meanwhile: then nothing is exported.
        recorded = self.update_definition(
            lambda current: with_export_recorded(current, name, root_file, mode, target_uri)
        )
        try:
            if not self.storage.exists(root_file):
                raise NotFoundError(
                    f"version {exported.version} was expired by a version compaction while its export was being "
                    "recorded; nothing was exported"
                )
            if target_storage is not None:
                copy_snapshot(self, exported, mode, target_storage, name, copy_files=copy_files)
        except BaseException as exc:
            self._withdraw_export(name, exc)
            raise
        return recorded

    def _withdraw_export(self, name: str, failure: BaseException) -> None:
        """Take back export ``name``'s record after its copy failed (or was interrupted): the
        version stays pinned by nothing that exists. A withdrawal that fails too says what to run."""
        try:
            self.drop_export(name)
        except LakecoreError as exc:
            advice = (
                f"the record of export {name!r} could not be taken back ({exc.one_line()}): run "
                f"`lakecore -l {self.uri} export drop {name}`"
            )
            if not isinstance(failure, LakecoreError):  # an interrupt stays an interrupt
                _LOG.warning("%s", advice)
                return
            raise LakecoreError(f"{failure.one_line()}; and {advice}") from failure


# ---------------------------------------------------------------------------------------------
# Transactions


class Transaction:
    """A set of catalog changes committed together as one new version.

    Use as a context manager: a clean exit commits, an exception aborts and writes no root.
    Reads inside the transaction see its own writes."""

    def __init__(self, lakehouse: Lakehouse, isolation: Isolation, policy: CommitPolicy) -> None:
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

    def _read_def(self, location: str, ns: str, table: str | None = None) -> bytes:
        if location in self.new_files:
            return self.new_files[location]
        return self.base_view.read_definition(location, ns, table)

    def namespace_exists(self, ns: str) -> bool:
        return self._get(K.namespace_key(ns, self.lakehouse_def)) is not None

    def table_exists(self, ns: str, table: str) -> bool:
        return self._get(K.table_key(ns, table, self.lakehouse_def)) is not None

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
        """Create namespace ``ns`` (``a.b`` is ``b`` inside ``a``: ``lakecore.namespaces``).
        With ``parents`` every missing ancestor is created too (with no properties); without,
        a missing parent stays implied, as before namespaces nested.

        Raises:
            InvalidNameError: a level is empty, or the name breaks the name rule.
            AlreadyExistsError: it exists.
        """
        self._check_open()
        N.check_new_name(ns, K.namespace_name_max_bytes(self.lakehouse_def))
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
            ns,
            {
                **{k: v for k, v in current.properties.items() if k not in set(remove_properties)},
                **dict(properties or {}),
            },
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
        self._stage(key, None)

    def create_table(
        self,
        ns: str,
        table: str,
        columns: Iterable[Mapping[str, Any] | pb.Column] = (),
        *,
        table_format: str = "ICEBERG",
        table_type: str = "MANAGED",
        properties: Mapping[str, str] | None = None,
        format_properties: Mapping[str, str] | None = None,
        distribution_keys: Iterable[int] = (),
        primary_key: Iterable[int] = (),
        sort_keys: Iterable[int] = (),
        unique_columns: Iterable[int] = (),
        checked_by_catalog: bool = False,
    ) -> None:
        """Create table ``ns.table``. The format properties ``CATALOG_FORMAT_PROPERTIES`` (and
        ``lakecore.*``) are refused unless ``checked_by_catalog``: only the Iceberg catalog,
        which checks where the table's files live, passes it.

        Raises:
            AlreadyExistsError: it exists.
            NotFoundError: its namespace does not exist.
            InvalidArgumentError: a catalog-only format property, or a bad definition.
        """
        self._check_open()
        if not checked_by_catalog:
            _refuse_catalog_format_properties(ns, table, format_properties)
        key = K.table_key(ns, table, self.lakehouse_def)
        self._require_namespace(ns, guard=True)
        if self._get(key) is not None:
            raise AlreadyExistsError(f"table {ns}.{table} already exists")
        definition = table_def(
            table,
            columns=columns,
            table_type=table_type,
            table_format=table_format,
            properties=properties,
            format_properties=format_properties,
            distribution_keys=distribution_keys,
            primary_key=primary_key,
            sort_keys=sort_keys,
            unique_columns=unique_columns,
        )
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
        removed = set(remove_properties)
        merged_properties = {k: v for k, v in current.properties.items() if k not in removed}
        merged_properties.update(properties or {})
        merged_format = dict(current.format_properties)
        merged_format.update(format_properties or {})
        definition = table_def(
            table,
            columns=list(current.schema.columns) if columns is None else columns,
            table_type=table_type or current.table_type or "MANAGED",
            table_format=current.table_format or "ICEBERG",
            properties=merged_properties,
            format_properties=merged_format,
            distribution_keys=current.distribution_keys,
            primary_key=current.primary_key,
            sort_keys=current.sort_keys,
            unique_columns=current.unique_columns,
        )
        self._stage(
            K.table_key(ns, table, self.lakehouse_def),
            new_table_def_path(ns, table),
            encode_def(definition),
        )

    def drop_table(self, ns: str, table: str) -> None:
        self._check_open()
        key = K.table_key(ns, table, self.lakehouse_def)
        if self._get(key) is None:
            raise NotFoundError(f"table {ns}.{table} does not exist")
        self._stage(key, None)

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

    def _write_new_files(self) -> None:
        # Only definitions a key still points to: a table created and then updated in the same
        # transaction needs its last definition file, not the first.
        live = {location for location in self.writes.values() if location is not None}
        for path, data in self.new_files.items():
            if path in live and path not in self._files_written:
                self.lakehouse.storage.write(path, data)
                self._files_written.add(path)

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
        self.outcome = self.lakehouse.commit_plan(self._plan, self._still_valid, policy=self.policy)
        self.committed_version = self.outcome.version
        return self.outcome.version


# ---------------------------------------------------------------------------------------------
# helpers


__all__ = [
    "ExportInfo",
    "Lakehouse",
    "LakehouseView",
    "SettingsChange",
    "Transaction",
    "VersionInfo",
    "list_versions",
    "open_version",
    "read_lakehouse_def",
]
