"""The catalog API: ``Lakehouse``, one lakehouse at its latest version, and its operations.

Objects live in the tree under their encoded keys (``lakecore.core.keys``); each key's pvalue is the
location of the object's definition file (``.binpb``). ``Lakehouse`` opens and creates a
lakehouse, travels in time, and makes the changes of the whole lakehouse (rollback, definition
and settings changes, exports), each committed through ``commit_plan``, where an exported copy
refuses every commit. Namespace and table changes are staged in a ``Transaction``
(``lakecore.lakehouse.transaction``, with the isolation levels). This module holds that one
concept, the lakehouse object; reading a version is ``lakecore.core.view``, exporting
``lakecore.lakehouse.export``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from lakecore.core.commit import CommitOutcome, CommitPolicy, RootPlan, commit
from lakecore.core.defs import LakehouseDef
from lakecore.core.export_records import (
    ROLLBACK_PIN_PREFIX,
    check_export_name_free,
    check_user_properties,
    with_export_recorded,
    with_rollback_pin,
    without_export,
)
from lakecore.core.locations import new_lakehouse_def_path, root_node_file_name
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeStore, TreeShape
from lakecore.core.versions import (
    RootInfo,
    read_version,
    refuse_a_file_as_root,
    version_as_of,
    write_hint,
)
from lakecore.core.view import (
    LakehouseView,
    VersionInfo,
    has_lakehouse,
    lakehouse_above,
    list_versions,
    read_lakehouse_def,
    read_root_and_def,
    store_for,
)
from lakecore.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LakecoreError,
    NotFoundError,
    ReadOnlyLakehouseError,
)
from lakecore.lakehouse.export import CopyFiles, copy_snapshot, export_target
from lakecore.lakehouse.transaction import Isolation, Transaction

_LOG = logging.getLogger(__name__)

ExportMode = Literal["minimal", "partial", "full"]


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
        other = lakehouse_above(storage)
        if other is not None:
            # Its files would lie in the other's root, where no command writes
            # (lakecore.contract.outputs); its gc would count them as foreign files.
            raise AlreadyExistsError(
                f"{storage.root_uri} is inside the lakehouse at {other} (links resolved); "
                "create the lakehouse in a folder outside every lakehouse"
            )
        present = storage.first_files(3)
        if present:
            raise AlreadyExistsError(
                f"{storage.root_uri} already holds other files ({', '.join(present)}"
                f"{', ...' if len(present) == 3 else ''}); create the lakehouse in an empty or new folder"
            )
        def_path = new_lakehouse_def_path()
        storage.write(def_path, lakehouse_def.to_bytes())
        from lakecore.core.versions import encode_root

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

    def move_to(self, view: LakehouseView) -> Lakehouse:
        """Move to the version ``view`` reads, learnt without this object
        (``lakecore.lakehouse.latest.LatestVersion``): no request."""
        self._install(view.root_info, view.lakehouse_def)
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
            policy = replace(policy, max_retries=max_retries)
        return Transaction(self, isolation, policy)

    def commit_plan(
        self,
        plan: Callable[[RootInfo], RootPlan],
        still_valid: Callable[[RootInfo], str | None],
        *,
        policy: CommitPolicy | None = None,
        files_since: float | None = None,
    ) -> CommitOutcome:
        """Commit on top of this object's version; on success this object moves to it.
        ``files_since``: when the caller wrote this commit's first file (``commit``'s timeout
        counts from it).

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
            files_since=files_since,
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
