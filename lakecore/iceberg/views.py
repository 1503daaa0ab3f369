"""Iceberg views: a view is a lakecore view object pointing at its Iceberg view metadata.

(Not ``lakecore.core.view``, which is a read-only look at one lakehouse *version*.)

Rules:

* **A view is a lakehouse object** (docs/format.md#view-definition): a ``ViewDef`` under the key
  ``D===`` + namespace + name, whose ``format_properties["metadata_location"]`` is the full URI
  of its current Iceberg view metadata file (``previous_metadata_location`` the one before, and
  the ``lakecore.checked-metadata-location`` stamp, as a table's), and whose columns mirror the
  current version's schema (``lakecore.iceberg.columns``). A lakehouse version points at exactly
  one metadata file per view: time travel (``version=``/``as_of=``) shows each view as it was.
* **Tables and views share names.** A view cannot take a table's name nor a table a view's
  (``ViewAlreadyExistsError``/``TableAlreadyExistsError``); the lakehouse transaction guards the
  other kind's key, so two concurrent creates cannot both land.
* **Locations.** A view's location and every metadata file lie strictly inside the warehouse,
  in canonical form (``lakecore.iceberg.path_rules``), and not inside a live table's folder
  nor a purge mark's: table maintenance deletes the files there that no table names (the
  table side, ``PlacementRules.check_folders``, keeps an explicitly placed table folder
  off a view's folder). The folder is kept in the definition (``VIEW_LOCATION_PROPERTY``). The default location is unique:
  ``<namespace folder>/<view>-<32 hex digits>``. Metadata files are
  ``<location>/metadata/<NNNNN>-<uuid>.metadata.json``, numbered on from the file replaced.
* **A change writes a new metadata file, then commits** the new definition through the group
  committer; snapshot isolation lands it only if nobody changed the view since the metadata it
  started from (it is redone on the latest version otherwise). A commit's requirements
  (``assert-view-uuid``) are checked against the current metadata: a failed one is
  ``CommitFailedException``. Updates follow the view spec: ``add-schema`` reuses an equal
  schema's id, ``add-view-version`` reuses an equal version's id (equal but for its id and
  time) and ``-1`` names the last one added; ``version.history.num-entries`` (default 10) caps
  the versions kept, never dropping the current one.
* **Drop forgets the view; its files stay** (a retained lakehouse version may still name them;
  lakecore's gc never deletes a file in the warehouse). Rename moves the definition in one
  commit; the files stay where they are. ``register_view`` points a new view at an existing
  metadata file inside the warehouse.
* **pyiceberg 0.12's view calls** are all here: ``create_view``, ``load_view``, ``list_views``,
  ``view_exists``, ``drop_view``, ``register_view``; ``rename_view`` and ``commit_view`` are the
  REST server's (pyiceberg has no call for them).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from io import BytesIO
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import Field
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchViewError,
    ValidationError,
    ViewAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.serializers import Compressor
from pyiceberg.typedef import EMPTY_DICT, IcebergBaseModel, Identifier, Properties
from pyiceberg.view.metadata import ViewHistoryEntry, ViewMetadata, ViewVersion

from lakecore.core import namespaces as NS
from lakecore.core.keys import refuse_unclear_name
from lakecore.core.sized_lru import SizedLRU
from lakecore.errors import AlreadyExistsError, CorruptFileError, NotFoundError, StorageError
from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.commit_path import CommitPath
from lakecore.iceberg.errors import translated
from lakecore.iceberg.guarded_io import sync_local_file
from lakecore.iceberg.location_checks import LocationChecks, canonical
from lakecore.iceberg.metadata_files import MetadataFiles
from lakecore.iceberg.placement import PlacementRules
from lakecore.iceberg.pointer import (
    METADATA_LOCATION_PROPERTY,
    VIEW_LOCATION_PROPERTY,
    pointer_properties,
)
from lakecore.lakehouse import Transaction
from lakecore.lakehouse.group_commit import Batch
from lakecore.maintenance.tables.marks import marks_of
from lakecore.maintenance.tables.table_folders import contains

if TYPE_CHECKING:
    import pyarrow as pa

    from lakecore.core.defs import pb

# How many view versions a view keeps (Iceberg's view property and its default).
VERSION_HISTORY_PROPERTY: Final = "version.history.num-entries"
DEFAULT_VERSION_HISTORY: Final = 10
# View metadata files kept decoded, by the size of their JSON (a view's is a few KB).
VIEW_METADATA_CACHE_BYTES: Final = 32 << 20
LAST_ADDED: Final = -1


# -- the view spec's requirements and updates (REST CommitViewRequest) ----------------------------


class AssertViewUUID(IcebergBaseModel):
    type: Literal["assert-view-uuid"]
    uuid: str


ViewRequirement = Annotated[AssertViewUUID, Field(discriminator="type")]


class AssignUUIDUpdate(IcebergBaseModel):
    action: Literal["assign-uuid"]
    uuid: str


class UpgradeFormatVersionUpdate(IcebergBaseModel):
    action: Literal["upgrade-format-version"]
    format_version: int = Field(alias="format-version")


class AddSchemaUpdate(IcebergBaseModel):
    action: Literal["add-schema"]
    schema_: Schema = Field(alias="schema")
    last_column_id: int | None = Field(alias="last-column-id", default=None)


class SetLocationUpdate(IcebergBaseModel):
    action: Literal["set-location"]
    location: str


class SetPropertiesUpdate(IcebergBaseModel):
    action: Literal["set-properties"]
    updates: dict[str, str]


class RemovePropertiesUpdate(IcebergBaseModel):
    action: Literal["remove-properties"]
    removals: list[str]


class AddViewVersionUpdate(IcebergBaseModel):
    action: Literal["add-view-version"]
    view_version: ViewVersion = Field(alias="view-version")


class SetCurrentViewVersionUpdate(IcebergBaseModel):
    action: Literal["set-current-view-version"]
    view_version_id: int = Field(alias="view-version-id")


ViewUpdate = Annotated[
    AssignUUIDUpdate
    | UpgradeFormatVersionUpdate
    | AddSchemaUpdate
    | SetLocationUpdate
    | SetPropertiesUpdate
    | RemovePropertiesUpdate
    | AddViewVersionUpdate
    | SetCurrentViewVersionUpdate,
    Field(discriminator="action"),
]


def _same_schema(a: Schema, b: Schema) -> bool:
    return a.fields == b.fields and a.identifier_field_ids == b.identifier_field_ids


def _same_version(a: ViewVersion, b: ViewVersion) -> bool:
    """Equal but for the id and the time (Iceberg reuses such a version's id)."""
    return (
        a.schema_id == b.schema_id
        and a.representations == b.representations
        and a.default_catalog == b.default_catalog
        and tuple(a.default_namespace) == tuple(b.default_namespace)
        and a.summary == b.summary
    )


def apply_view_updates(
    metadata: ViewMetadata, updates: tuple[Any, ...] | list[Any]
) -> ViewMetadata:
    """The metadata after ``updates`` (the view spec's, see the module docstring).

    Raises:
        ValidationError: an update names an unknown schema or version, or a format version
            other than 1.
    """
    schemas = list(metadata.schemas)
    versions = list(metadata.versions)
    log = list(metadata.version_log)
    properties = dict(metadata.properties)
    location = metadata.location
    view_uuid = metadata.view_uuid
    current = metadata.current_version_id
    last_schema: int | None = None
    last_version: int | None = None
    for update in updates:
        if isinstance(update, AssignUUIDUpdate):
            if update.uuid != view_uuid:
                raise ValidationError(
                    f"assign-uuid {update.uuid}: the view's UUID is {view_uuid} and never changes"
                )
        elif isinstance(update, UpgradeFormatVersionUpdate):
            if update.format_version != 1:
                raise ValidationError(
                    f"upgrade-format-version {update.format_version}: view format version 1 is "
                    "the only one"
                )
        elif isinstance(update, AddSchemaUpdate):
            same = next((s for s in schemas if _same_schema(s, update.schema_)), None)
            if same is not None:
                last_schema = same.schema_id
            else:
                new_id = max((s.schema_id for s in schemas), default=-1) + 1
                schemas.append(update.schema_.model_copy(update={"schema_id": new_id}))
                last_schema = new_id
        elif isinstance(update, SetLocationUpdate):
            location = update.location.rstrip("/")
        elif isinstance(update, SetPropertiesUpdate):
            properties.update(update.updates)
        elif isinstance(update, RemovePropertiesUpdate):
            for key in update.removals:
                properties.pop(key, None)
        elif isinstance(update, AddViewVersionUpdate):
            version = update.view_version
            if version.schema_id == LAST_ADDED:
                if last_schema is None:
                    raise ValidationError(
                        "add-view-version names schema -1 (the last added), but no schema was "
                        "added before it"
                    )
                version = version.model_copy(update={"schema_id": last_schema})
            if not any(s.schema_id == version.schema_id for s in schemas):
                raise ValidationError(
                    f"add-view-version names schema {version.schema_id}, which the view does "
                    "not have"
                )
            same_version = next((v for v in versions if _same_version(v, version)), None)
            if same_version is not None:
                last_version = same_version.version_id
            else:
                new_id = max((v.version_id for v in versions), default=0) + 1
                versions.append(version.model_copy(update={"version_id": new_id}))
                last_version = new_id
        elif isinstance(update, SetCurrentViewVersionUpdate):
            wanted = update.view_version_id
            if wanted == LAST_ADDED:
                if last_version is None:
                    raise ValidationError(
                        "set-current-view-version -1 (the last added), but no version was added "
                        "before it"
                    )
                wanted = last_version
            if not any(v.version_id == wanted for v in versions):
                raise ValidationError(
                    f"set-current-view-version {wanted}: the view has no such version"
                )
            if wanted != current:
                current = wanted
                version_ms = next(v.timestamp_ms for v in versions if v.version_id == wanted)
                log.append(_history_entry(version_ms, wanted))
        else:  # pragma: no cover - the models admit no other
            raise ValidationError(f"unknown view update {update!r}")
    versions = _keep_versions(versions, current, properties)
    kept = {v.version_id for v in versions}
    return metadata.model_copy(
        update={
            "view_uuid": view_uuid,
            "location": location,
            "schemas": schemas,
            "current_version_id": current,
            "versions": versions,
            "version_log": [e for e in log if e.version_id in kept],
            "properties": properties,
        }
    )


def _history_entry(timestamp_ms: int, version_id: int) -> ViewHistoryEntry:
    return ViewHistoryEntry.model_validate({"timestamp-ms": timestamp_ms, "version-id": version_id})


def _keep_versions(
    versions: list[ViewVersion], current: int, properties: dict[str, str]
) -> list[ViewVersion]:
    """The newest ``version.history.num-entries`` versions (at least 1), and the current one."""
    try:
        keep = max(1, int(properties.get(VERSION_HISTORY_PROPERTY, DEFAULT_VERSION_HISTORY)))
    except ValueError:
        raise ValidationError(
            f"view property {VERSION_HISTORY_PROPERTY}="
            f"{properties[VERSION_HISTORY_PROPERTY]!r} is not a whole number"
        ) from None
    if len(versions) <= keep:
        return versions
    newest = sorted(versions, key=lambda v: v.version_id)[-keep:]
    ids = {v.version_id for v in newest} | {current}
    return [v for v in versions if v.version_id in ids]


def view_metadata_from_bytes(data: bytes, metadata_location: str) -> ViewMetadata:
    with Compressor.get_compressor(metadata_location).stream_decompressor(BytesIO(data)) as plain:
        text = plain.read()
    return ViewMetadata.model_validate_json(text)


class IcebergViews:
    """The views of one catalog: what pyiceberg's view calls and the REST server's rename and
    commit do once the catalog has parsed the identifier (see the module docstring)."""

    def __init__(
        self,
        path: CommitPath,
        files: MetadataFiles,
        checks: LocationChecks,
        placement: PlacementRules,
        namespace_location: Callable[[str | Identifier], str],
        metadata_version: Callable[[str], int],
        convert_schema: Callable[[Schema | pa.Schema], Schema],
    ) -> None:
        """``namespace_location`` is the catalog's (where a namespace's objects go by default),
        ``metadata_version`` the version number of a metadata file's name (-1: none), and
        ``convert_schema`` makes an Iceberg schema of a pyarrow one (pyiceberg's catalogs')."""
        self._path = path
        self._files = files
        self._checks = checks
        self._placement = placement
        self._namespace_location = namespace_location
        self._metadata_version = metadata_version
        self._convert_schema = convert_schema
        self._view_metadata = SizedLRU[str, ViewMetadata](VIEW_METADATA_CACHE_BYTES)

    # -- reads --------------------------------------------------------------------------------

    def names_in(self, ns: str) -> list[Identifier]:
        """Every view of namespace ``ns``.

        Raises:
            NoSuchNamespaceError: no such namespace.
        """
        with translated(
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace does not exist: {ns}",
        ):
            return [(*NS.levels(ns), view) for view in self._path.read().list_views(ns)]

    def exists(self, ns: str, name: str) -> bool:
        """Whether view ``ns.name`` exists (an invalid name names no view)."""
        try:
            with translated(invalid=NoSuchViewError, not_found=NoSuchViewError):
                return self._path.read().view_exists(ns, name)
        except NoSuchViewError:  # an invalid name names no view
            return False

    def load_metadata(self, ns: str, name: str) -> tuple[ViewMetadata, str]:
        """View ``ns.name``'s current metadata and its location.

        Raises:
            NoSuchViewError: no such view.
        """
        with translated(
            not_found=NoSuchViewError,
            invalid=NoSuchViewError,
            wording=f"View does not exist: {ns}.{name}",
        ):
            definition = self._path.read().load_view(ns, name)
        location = self._view_pointer(ns, name, definition)
        return self._view_metadata_at(f"{ns}.{name}", location), location

    @staticmethod
    def _view_pointer(ns: str, name: str, definition: pb.ViewDef) -> str:
        location = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
        if definition.view_format != "ICEBERG" or not location:
            raise CorruptFileError(
                f"view {ns}.{name}",
                f"its definition names no Iceberg metadata (format {definition.view_format or '-'}, "
                f"no format property {METADATA_LOCATION_PROPERTY!r}); drop the view",
            )
        return str(location)

    def _view_metadata_at(self, what: str, location: str) -> ViewMetadata:
        """The view metadata file at ``location`` (immutable once written: cached)."""
        cached = self._view_metadata.get(location)
        if cached is not None:
            return cached[0]
        try:
            data = self._read_view_file(location)
            metadata = view_metadata_from_bytes(data, location)
        except FileNotFoundError as exc:
            raise CorruptFileError(
                location,
                f"the Iceberg metadata file of view {what} is missing ({exc}); restore the "
                "file, or drop the view (drop_view reads no metadata)",
            ) from exc
        except ValueError as exc:
            raise CorruptFileError(
                location,
                f"the Iceberg metadata file of view {what} cannot be read "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                "restore the file, or drop the view",
            ) from exc
        self._view_metadata.put(location, metadata, len(data))
        return metadata

    def _read_view_file(self, location: str) -> bytes:
        inside = self._files.inside_warehouse(location)
        if inside is not None and not location.startswith("file:"):
            try:
                return self._files.warehouse_storage().read(inside)
            except NotFoundError as exc:
                raise FileNotFoundError(str(exc)) from exc
        io = self._files.file_io(location)
        try:
            with io.new_input(location).open() as stream:
                return stream.read()
        except (FileNotFoundError, IsADirectoryError):
            raise
        except OSError as exc:
            raise StorageError(
                f"could not read the Iceberg view metadata file {location}: "
                f"{getattr(exc, 'strerror', None) or exc}"
            ) from exc

    def _write_view_file(self, metadata: ViewMetadata, location: str) -> None:
        text = metadata.model_dump_json().encode("utf-8")
        inside = self._files.inside_warehouse(location)
        if inside is not None and not location.startswith("file:"):
            self._files.warehouse_storage().write(inside, text)
        else:
            io = self._files.file_io(location)
            with io.new_output(location).create(overwrite=True) as out:
                out.write(text)
            sync_local_file(location)
        self._view_metadata.put(location, metadata, len(text))

    def _new_view_metadata_location(self, metadata: ViewMetadata, previous: str | None) -> str:
        version = 0 if previous is None else self._metadata_version(previous) + 1
        return f"{metadata.location}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"

    # -- checks -------------------------------------------------------------------------------

    def _check_view_locations(self, metadata: ViewMetadata, metadata_location: str) -> None:
        self._checks.check(metadata.location, "view location")
        self._checks.check(metadata_location, "view metadata location")

    def _check_view_placement(self, tx: Transaction, ns: str, name: str, location: str) -> None:
        """A view's folder may not lie in a live table's folder, nor in the folders of a table
        dropped with purge and not purged yet: table maintenance deletes the files there that
        no table's metadata names."""
        for mark in marks_of(tx.lakehouse_def.properties):
            clash = next((r for r in mark.folders if contains(r, location)), None)
            if clash is not None:
                raise ValidationError(
                    f"view location {location} of view {ns}.{name} lies in {clash}, a folder of "
                    f"table {mark.name}, dropped with purge: table maintenance deletes the "
                    "files there; choose another location"
                )
        registry = self._placement.ensure_registry(tx)
        holders = self._placement.tables_holding(tx, registry, location)
        if holders:
            (other_ns, other_name), theirs = next(iter(sorted(holders.items())))
            clash = next(r for r in theirs if contains(r, location))
            raise ValidationError(
                f"view location {location} of view {ns}.{name} lies in {clash}, a folder of "
                f"table {other_ns}.{other_name}: a view needs a folder outside every table's "
                "(a table's purge deletes files in its folders); choose another location"
            )

    def _refuse_taken_view_name(self, ns: str, name: str) -> None:
        with translated(not_found=NoSuchNamespaceError, exists=ViewAlreadyExistsError):
            refuse_unclear_name(name, "view")
            view = self._path.latest()
            if not view.namespace_exists(ns):
                raise NotFoundError(f"namespace {ns!r} does not exist; create it first")
            if view.view_exists(ns, name):
                raise AlreadyExistsError(f"view {ns}.{name} already exists")
            if view.table_exists(ns, name):
                raise AlreadyExistsError(
                    f"{ns}.{name} already exists as a table: a namespace's tables and views "
                    "share names"
                )

    # -- changes ------------------------------------------------------------------------------

    def create(
        self,
        ns: str,
        name: str,
        schema: Schema | pa.Schema,
        view_version: ViewVersion,
        location: str | None = None,
        properties: Properties = EMPTY_DICT,
    ) -> ViewMetadata:
        """Write view ``ns.name``'s first metadata file, then commit the view to the lakehouse;
        its metadata.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            ViewAlreadyExistsError: a view or a table of that name exists.
            ValidationError: a bad name, or a location outside the warehouse.
        """
        self._refuse_taken_view_name(ns, name)
        location = canonical(location, "view location")
        if location is None:
            folder = self._namespace_location(tuple(NS.levels(ns)))
            location = f"{folder}/{name}-{uuid.uuid4().hex}"
        iceberg_schema = self._convert_schema(schema)
        iceberg_schema = iceberg_schema.model_copy(update={"schema_id": 0})
        now = int(time.time() * 1000)
        version = view_version.model_copy(
            update={
                "version_id": 1,
                "schema_id": 0,
                "timestamp_ms": view_version.timestamp_ms or now,
            }
        )
        metadata = ViewMetadata.model_validate(
            {
                "view-uuid": str(uuid.uuid4()),
                "format-version": 1,
                "location": location.rstrip("/"),
                "schemas": [iceberg_schema],
                "current-version-id": 1,
                "versions": [version],
                "version-log": [_history_entry(version.timestamp_ms, 1)],
                "properties": dict(properties),
            }
        )
        metadata_location = self._new_view_metadata_location(metadata, None)
        self._check_view_locations(metadata, metadata_location)
        self._commit_view_change(
            "create_view",
            ns,
            name,
            lambda batch: self._stage_new_view(batch, ns, name, metadata, metadata_location),
        )
        return metadata

    def _stage_new_view(
        self, batch: Batch, ns: str, name: str, metadata: ViewMetadata, metadata_location: str
    ) -> None:
        tx = batch.tx
        tx.create_view(
            ns,
            name,
            columns=columns_of(metadata.schemas[-1]),
            format_properties=view_pointer(metadata_location, metadata.location),
            checked_by_catalog=True,
        )
        self._check_view_placement(tx, ns, name, metadata.location)
        batch.write_before_root(
            metadata_location, lambda: self._write_view_file(metadata, metadata_location)
        )

    def _commit_view_change(self, what: str, ns: str, name: str, stage: Any) -> Any:
        """Run ``stage(batch)`` as a unit of the group committer (rerun on a lost race)."""
        self._path.refuse_read_only(what)

        def apply(batch: Batch) -> Any:
            with translated(
                not_found=NoSuchNamespaceError,
                exists=ViewAlreadyExistsError,
            ):
                return stage(batch)

        return self._path.run(apply)

    def register(self, ns: str, name: str, metadata_location: str) -> ViewMetadata:
        """Register an existing view metadata file (inside the warehouse) as view ``ns.name``;
        its metadata.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            ViewAlreadyExistsError: a view or a table of that name exists.
            ValidationError: a metadata or view location outside the warehouse, or a file that
                is no view metadata.
        """
        self._checks.check(metadata_location, "view metadata location")
        self._refuse_taken_view_name(ns, name)
        try:
            metadata = view_metadata_from_bytes(
                self._read_view_file(metadata_location), metadata_location
            )
        except (OSError, ValueError, StorageError) as exc:
            raise ValidationError(
                f"view metadata location {metadata_location} cannot be registered: it is not a "
                f"readable Iceberg view metadata file ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:300]})"
            ) from exc
        self._checks.check(metadata.location, "view location")

        def stage(batch: Batch) -> None:
            batch.tx.create_view(
                ns,
                name,
                columns=columns_of(_current_schema(metadata)),
                format_properties=view_pointer(metadata_location, metadata.location),
                checked_by_catalog=True,
            )
            self._check_view_placement(batch.tx, ns, name, metadata.location)

        self._commit_view_change("register_view", ns, name, stage)
        return metadata

    def drop(self, ns: str, name: str) -> None:
        """Remove view ``ns.name`` from the lakehouse; its files stay.

        Raises:
            NoSuchViewError: no such view.
        """
        self._path.change(
            "drop_view",
            lambda tx: tx.drop_view(ns, name),
            not_found=NoSuchViewError,
            invalid=NoSuchViewError,
            wording=f"View does not exist: {ns}.{name}",
        )

    def rename(self, from_ns: str, from_name: str, to_ns: str, to_name: str) -> None:
        """Move the view's definition to the new name in one lakehouse commit (its files stay).

        Raises:
            NoSuchViewError: ``from_ns.from_name`` does not exist.
            NoSuchNamespaceError: the target namespace does not exist.
            ViewAlreadyExistsError: a view or a table named ``to_ns.to_name`` exists.
        """

        def rename(tx: Transaction) -> None:
            with translated(
                not_found=NoSuchViewError,
                invalid=NoSuchViewError,
                wording=f"View does not exist: {from_ns}.{from_name}",
            ):
                current = tx.load_view(from_ns, from_name)
            with translated(not_found=NoSuchNamespaceError, exists=ViewAlreadyExistsError):
                if not tx.namespace_exists(to_ns):
                    raise NotFoundError(f"namespace {to_ns!r} does not exist; create it first")
                tx.drop_view(from_ns, from_name)
                tx.create_view(
                    to_ns,
                    to_name,
                    columns=list(current.schema.columns),
                    view_format=current.view_format or "ICEBERG",
                    properties=current.properties,
                    format_properties=current.format_properties,
                    checked_by_catalog=True,
                )

        self._path.change("rename_view", rename)

    def commit(
        self,
        ns: str,
        name: str,
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

        def stage(batch: Batch) -> tuple[ViewMetadata, str]:
            tx = batch.tx
            with translated(
                not_found=NoSuchViewError,
                invalid=NoSuchViewError,
                wording=f"View does not exist: {ns}.{name}",
            ):
                definition = tx.load_view(ns, name)
            base_location = self._view_pointer(ns, name, definition)
            base = self._view_metadata_at(f"{ns}.{name}", base_location)
            for requirement in requirements:
                if isinstance(requirement, AssertViewUUID) and requirement.uuid != base.view_uuid:
                    raise CommitFailedException(
                        f"Requirement failed: view UUID does not match: expected "
                        f"{requirement.uuid} != {base.view_uuid} (view {ns}.{name} was replaced "
                        "by another view of that name)"
                    )
            metadata = apply_view_updates(base, updates)
            if metadata == base:
                return base, base_location
            metadata_location = self._new_view_metadata_location(metadata, base_location)
            if metadata.location != base.location:
                self._check_view_placement(tx, ns, name, metadata.location)
            self._check_view_locations(metadata, metadata_location)
            tx.update_view(
                ns,
                name,
                columns=columns_of(_current_schema(metadata)),
                format_properties=view_pointer(metadata_location, metadata.location, base_location),
                checked_by_catalog=True,
            )
            batch.write_before_root(
                metadata_location, lambda: self._write_view_file(metadata, metadata_location)
            )
            return metadata, metadata_location

        result: tuple[ViewMetadata, str] = self._commit_view_change("replace_view", ns, name, stage)
        return result


def view_pointer(
    metadata_location: str, location: str, previous: str | None = None
) -> dict[str, str]:
    """A view definition's format properties: a table's pointer, and the view's folder
    (``VIEW_LOCATION_PROPERTY``), which the table placement rule reads without Iceberg files."""
    return {**pointer_properties(metadata_location, previous), VIEW_LOCATION_PROPERTY: location}


def _current_schema(metadata: ViewMetadata) -> Schema:
    version = next(
        (v for v in metadata.versions if v.version_id == metadata.current_version_id), None
    )
    schema = None
    if version is not None:
        schema = next((s for s in metadata.schemas if s.schema_id == version.schema_id), None)
    if schema is None:
        raise ValidationError(
            f"view metadata names current version {metadata.current_version_id} and a schema "
            "it does not have"
        )
    return schema


__all__ = [
    "VIEW_LOCATION_PROPERTY",
    "AssertViewUUID",
    "IcebergViews",
    "ViewRequirement",
    "ViewUpdate",
    "apply_view_updates",
    "view_metadata_from_bytes",
    "view_pointer",
]
