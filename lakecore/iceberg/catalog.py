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
  ``("a", "b")`` is the lakecore namespace ``a.b`` (``lakecore.namespaces``); creating one
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
  lists only the root's top level and its hash directories and deletes only files with
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
* **No two tables share a folder** (``lakecore.iceberg.roots`` has the details). A table's
  location and write paths (its *roots*) may not equal or contain the warehouse, a namespace's
  folder (``<warehouse>/<namespace levels>`` or its ``location``) or a root of another live
  table, nor lie inside another table's root; and a namespace's folder may not equal or lie
  inside a table's root. Checked at ``create_table`` (and a create transaction, before any
  file is written), ``register_table``, ``rename_table``, ``create_namespace``, every
  namespace ``location`` change and every commit that changes a root. The tables a path could
  overlap are found without a scan: a default location names its table, and every other root
  is kept in a registry in the lakehouse definition, written in the same commit.
* **References.** A table's metadata may name files outside its roots (``add_files``). Each
  commit reads what it added (its manifest list and its new manifests: two small reads for an
  append) and records, in the registry, the folders inside the warehouse but outside the
  table's roots where it names files (``lakecore.iceberg.references``); only a folder not yet
  recorded changes the definition. ``register_table`` reads every manifest once to the same
  end. The lakehouse API refuses to set ``metadata_location`` (or any ``lakecore.*`` format
  property) itself: a table pointed at Iceberg metadata around the catalog would escape the
  registry.
* **Storage options** for lakecore's own files: ``storage_options`` (a mapping, when the catalog
  is built in Python), else ``lakecore.storage-options`` (a JSON object), else derived from
  pyiceberg's ``s3.*``/``client.*`` properties (endpoint, keys, session token, region). Iceberg
  data and metadata files go through pyiceberg's FileIO with the catalog's properties as usual.
* **Purge** deletes only files under the table's own location and write paths, never what
  its metadata merely names elsewhere (another table's files, lakecore's), and never a file the
  current metadata of another live table names: the tables whose roots overlap the purged
  table's (none when every table was made under the rule above; in a lakehouse from before it,
  those the registry and the names find) and the tables the registry says name files in them
  are read, and their files kept. A registered (``EXTERNAL``) table is refused
  (``register_table`` with ``overwrite`` makes the table ``EXTERNAL`` too): ``drop_table``
  forgets it and leaves its files. A table without Iceberg metadata is dropped: it has none.
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
  no type for them. Views are not supported: every view method raises ``NotImplementedError``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from pyiceberg.catalog import (
    LOCATION,
    MANIFEST,
    MANIFEST_LIST,
    METADATA,
    METADATA_LOCATION,
    PREVIOUS_METADATA,
    PREVIOUS_METADATA_LOCATION,
    WAREHOUSE_LOCATION,
    Catalog,
    MetastoreCatalog,
    PropertiesUpdateSummary,
    delete_files,
)
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NamespaceAlreadyExistsError,
    NoSuchIcebergTableError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
    ValidationException,
)
from pyiceberg.exceptions import NamespaceNotEmptyError as IcebergNamespaceNotEmptyError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from lakecore import namespaces as NS
from lakecore.defs import pb
from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptFileError,
    InvalidArgumentError,
    InvalidLocationError,
    NamespaceNotEmptyError,
    NoLakehouseError,
    NotFoundError,
    ReadOnlyLakehouseError,
    StorageError,
)
from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.references import ReferenceFinder
from lakecore.iceberg.roots import (
    MAX_REFERENCE_FOLDERS,
    REGISTRY_FORMAT,
    REGISTRY_MARKER_PROPERTY,
    WAREHOUSE_PROPERTY,
    WRITE_PATH_PROPERTIES,
    Registry,
    contains,
    default_located_ancestors,
    is_registry_key,
    named_by,
    namespace_location_key,
    namespace_name_of_folder,
    overlaps,
    reduce_folders,
    refs_key,
    refs_property,
    registered_roots,
    roots_key,
    roots_property,
    table_roots,
)
from lakecore.iceberg.warehouse import claim_warehouse, claimed_between
from lakecore.keys import namespace_name_max_bytes
from lakecore.lakehouse import Lakehouse, LakehouseView, Transaction
from lakecore.locations import normalize_root_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.io import FileIO
    from pyiceberg.table import CreateTableTransaction
    from pyiceberg.table import Transaction as IcebergTransaction
    from pyiceberg.table.update import TableRequirement, TableUpdate
    from pyiceberg.view import View
    from pyiceberg.view.metadata import ViewVersion

T = TypeVar("T")
_LOG = logging.getLogger(__name__)


class _CatalogReader(Protocol):
    """What the location checks read: a transaction (sees its own writes) or a version."""

    def table_exists(self, ns: str, table: str) -> bool: ...
    def load_table(self, ns: str, table: str) -> pb.TableDef: ...
    def list_tables(self, ns: str) -> list[str]: ...
    def list_namespaces(self) -> list[str]: ...
    def namespaces_starting_with(self, name_prefix: str, limit: int | None = None) -> list[str]: ...


#: format_properties key: full URI of the table's current Iceberg metadata file.
METADATA_LOCATION_PROPERTY: Final = METADATA_LOCATION
#: format_properties key: the metadata file the current one replaced (absent after create).
PREVIOUS_METADATA_LOCATION_PROPERTY: Final = PREVIOUS_METADATA_LOCATION
#: format_properties key: the metadata location this catalog checked and recorded in the
#: registry when it wrote the definition; another value means that other code changed the
#: table since (see the module docstring, "What is not guaranteed").
CHECKED_PROPERTY: Final = "lakecore.checked-metadata-location"
STORAGE_OPTIONS_PROPERTY: Final = "lakecore.storage-options"
CREATE_PROPERTY: Final = "lakecore.create"
VERSION_PROPERTY: Final = "version"
AS_OF_PROPERTY: Final = "as_of"
DEFAULT_WAREHOUSE_DIRECTORY: Final = "warehouse"
# Catalog operations other than commit_table re-run on a conflict (they re-check existence
# against the new state, so a rerun is what the caller asked for); commit_table never does:
# pyiceberg must re-apply its changes to the new metadata itself.
CATALOG_OP_ATTEMPTS: Final = 5
# Threads reading tables' metadata and manifests when the registry is built.
REGISTRY_BUILD_THREADS: Final = 8
_HASH_SEGMENT_RE: Final = re.compile(r"^[01]{4}$")
_SCHEME_RE: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class ReadOnlyCatalogError(ValidationError, ValidationException):
    """A change was asked of a catalog opened at a past version (``version=``/``as_of=``) or
    over an exported copy. Also pyiceberg's ``ValidationException``: pyiceberg writes an
    append's data files and manifests before it asks the catalog to commit, and deletes them
    again only after that exception (or ``CommitFailedException``), so a refused append leaves
    no file behind."""


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


def _views_unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: views are not supported by LakecoreCatalog (a TrinityLake lakehouse holds "
        "namespaces and tables only)"
    )


# ---------------------------------------------------------------------------------------------
# Options


def _storage_options_of(properties: Mapping[str, Any]) -> dict[str, Any] | None:
    """Storage options for the lakehouse's own files (see the module docstring)."""
    explicit = properties.get("storage_options")
    if explicit is not None:
        if not isinstance(explicit, Mapping):
            raise InvalidArgumentError(
                f"storage_options must be a mapping, got {type(explicit).__name__}"
            )
        return dict(explicit)
    text = properties.get(STORAGE_OPTIONS_PROPERTY)
    if text is not None:
        try:
            parsed = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{STORAGE_OPTIONS_PROPERTY} must be a JSON object: {exc}"
            ) from None
        if not isinstance(parsed, dict):
            raise InvalidArgumentError(
                f"{STORAGE_OPTIONS_PROPERTY} must be a JSON object, got {text!r}"
            )
        return parsed

    def first(*names: str) -> Any:
        for name in names:
            if properties.get(name):
                return properties[name]
        return None

    client_kwargs = {
        k: v
        for k, v in {
            "endpoint_url": first("s3.endpoint"),
            "region_name": first("s3.region", "client.region"),
        }.items()
        if v
    }
    options: dict[str, Any] = {
        k: v
        for k, v in {
            "key": first("s3.access-key-id", "client.access-key-id"),
            "secret": first("s3.secret-access-key", "client.secret-access-key"),
            "token": first("s3.session-token", "client.session-token"),
        }.items()
        if v
    }
    if client_kwargs:
        options["client_kwargs"] = client_kwargs
    return options or None


# The properties this catalog reads itself; the rest are pyiceberg's (FileIO, ...).
OWN_PROPERTIES: Final = (
    "uri",
    WAREHOUSE_LOCATION,
    VERSION_PROPERTY,
    AS_OF_PROPERTY,
    CREATE_PROPERTY,
    STORAGE_OPTIONS_PROPERTY,
)


def _refuse_misspelt_properties(properties: Mapping[str, Any]) -> None:
    """A misspelt property is ignored by pyiceberg, and some are dangerous to ignore: with
    ``verison=5`` a caller meaning to read version 5 got the latest version, writable. Refuse
    any ``lakecore.*`` key not ours, and any key that is not a known property but nearly spells
    one of ours or one of pyiceberg's ``s3.*``/``client.*`` keys."""
    import difflib

    import pyiceberg.io

    known_io = sorted(
        {
            v
            for v in vars(pyiceberg.io).values()
            if isinstance(v, str) and v.startswith(("s3.", "client."))
        }
    )
    for key in properties:
        if key in OWN_PROPERTIES or key in known_io:
            continue
        candidates = list(OWN_PROPERTIES) + (known_io if key.startswith(("s3.", "client.")) else [])
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.8)
        if key.startswith("lakecore.") or close:
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else f"this catalog's own are {', '.join(OWN_PROPERTIES)}"
            )
            raise ValidationError(
                f"unknown catalog property {key!r}: {hint} (a misspelt property would be ignored)"
            )


def _version_number(value: Any) -> int:
    """A lakehouse version from an int or a string of ASCII digits; nothing else (``int()``
    would take True as 1, 1.9 as 1 and "1_0" as 10)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    raise InvalidArgumentError(
        f"{VERSION_PROPERTY} {value!r} is not a lakehouse version number (digits only)"
    )


def _as_of_millis(value: Any) -> int:
    """Epoch milliseconds from an int, a digit string, a datetime or an ISO-8601 string."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{AS_OF_PROPERTY} {value!r} is not a time")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    when: dt.datetime
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidArgumentError(
                f"{AS_OF_PROPERTY} {value!r} is neither epoch milliseconds nor an ISO-8601 time"
            ) from None
    else:
        raise InvalidArgumentError(
            f"{AS_OF_PROPERTY} {value!r} is neither epoch milliseconds nor a time"
        )
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def normalize_location(location: str) -> str:
    """A location as comparable text: ``s3a``/``s3n`` read as ``s3``, a bare path as
    ``file://``, no trailing ``/``."""
    if _SCHEME_RE.match(location) is None:
        return normalize_root_uri(location).rstrip("/")
    scheme, rest = location.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    return f"{scheme}://{rest}".rstrip("/")


def _check_qualified(location: str, what: str) -> None:
    body = location.split("://", 1)[-1]
    segments = body.split("/")[1:] if "://" in location else body.split("/")
    if any(s in ("", ".", "..") for s in segments[:-1]) or segments[-1] in (".", ".."):
        raise InvalidLocationError(
            f"{what} {location!r} is not qualified ('.', '..' or empty segments)"
        )


def _refuse_lakecore_directory(location: str, root_uri: str, what: str) -> None:
    """Refuse a location inside the lakehouse root that is, or is inside, a place where
    lakecore keeps (and its gc lists) its own files."""
    root = root_uri.rstrip("/")
    if location == root:
        raise InvalidLocationError(
            f"{what} {location} is the lakehouse root itself; use a directory of its own such as {root}/warehouse"
        )
    if not location.startswith(root + "/"):
        return
    first = location[len(root) + 1 :].split("/", 1)[0]
    if first.startswith(("_", ".")) or _HASH_SEGMENT_RE.match(first):
        raise InvalidLocationError(
            f"{what} {location} lies in {root}/{first}, a name lakecore uses for its own files "
            f"(leading '_' or '.', or a 4-binary-digit hash directory); use a directory such as {root}/warehouse"
        )


# ---------------------------------------------------------------------------------------------
# Errors


@contextmanager
def _translated(
    *,
    not_found: type[Exception] = NoSuchTableError,
    exists: type[Exception] = TableAlreadyExistsError,
    invalid: type[Exception] = ValidationError,
    in_commit: bool = False,
    wording: str | None = None,
    not_empty_wording: str | None = None,
) -> Iterator[None]:
    """Re-raise lakecore errors as pyiceberg's types with lakecore's message (the lakecore
    error stays chained as ``__cause__``). ``wording`` is pyiceberg's own text for a not-found
    or not-empty error (``Table does not exist: ns.t``): lakecore's detail follows it."""

    def text(exc: Exception) -> str:
        return str(exc) if wording is None else f"{wording}: {exc}"

    try:
        yield
    except CommitStateUnknownError as exc:
        raise CommitStateUnknownException(str(exc)) from exc
    except CommitConflictError as exc:
        raise CommitFailedException(str(exc)) from exc
    except NamespaceNotEmptyError as exc:
        raise IcebergNamespaceNotEmptyError(
            str(exc) if not_empty_wording is None else f"{not_empty_wording}: {exc}"
        ) from exc
    except NotFoundError as exc:
        raise not_found(text(exc)) from exc
    except AlreadyExistsError as exc:
        raise exists(str(exc)) from exc
    except ReadOnlyLakehouseError as exc:
        raise ReadOnlyCatalogError(str(exc)) from exc
    except InvalidArgumentError as exc:
        raise invalid(
            text(exc) if invalid in (NoSuchTableError, NoSuchNamespaceError) else str(exc)
        ) from exc
    except StorageError as exc:
        if not in_commit:
            raise
        # A failure inside the lakecore commit may follow a root write whose outcome is
        # unknown; pyiceberg deletes its new files only after CommitFailedException, so only
        # "unknown" is safe here.
        raise CommitStateUnknownException(
            f"the lakehouse commit failed ({exc.one_line()}); it may or may not have landed: "
            "reload the table before retrying"
        ) from exc


def _ident(ns: str, name: str) -> Identifier:
    """The pyiceberg identifier of a table: its namespace's levels, then its name."""
    return (*NS.levels(ns), name)


def _require_iceberg(identifier: Identifier, definition: pb.TableDef) -> str:
    """The table's metadata location; NoSuchIcebergTableError when it has none."""
    metadata_location = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
    if definition.table_format != "ICEBERG" or not metadata_location:
        raise NoSuchIcebergTableError(
            f"table {'.'.join(identifier)} has no Iceberg metadata "
            f"(format {definition.table_format or '-'}, no format property {METADATA_LOCATION_PROPERTY!r}): "
            "it was made through the lakehouse API or `lakecore table create`, not an Iceberg catalog; "
            "drop_table (or purge_table) removes it"
        )
    return str(metadata_location)


def _read_metadata(io: FileIO, identifier: str, metadata_location: str) -> TableMetadata:
    """A table's current metadata; a file that is missing or unreadable is one line naming the
    table and the way out."""
    try:
        return FromInputFile.table_metadata(io.new_input(metadata_location))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise CorruptFileError(
            metadata_location,
            f"the Iceberg metadata file of table {identifier} cannot be read "
            f"({type(exc).__name__}: {reason}); restore the file, or drop the table (drop_table "
            "reads no metadata and deletes no file)",
        ) from exc


def _pointer(metadata_location: str, previous: str | None = None) -> dict[str, str]:
    """The format properties a catalog write sets: the metadata location, the one it replaced,
    and the stamp that this catalog checked it."""
    pointer = {METADATA_LOCATION_PROPERTY: metadata_location, CHECKED_PROPERTY: metadata_location}
    if previous:
        pointer[PREVIOUS_METADATA_LOCATION_PROPERTY] = previous
    return pointer


def _checked(definition: pb.TableDef | None) -> bool:
    """Whether this catalog checked the table's current metadata (see ``CHECKED_PROPERTY``):
    a definition it wrote and no other code changed since, or one that holds no stamp (from
    before the stamp, which the registry's build read)."""
    if definition is None:
        return True
    stamp = definition.format_properties.get(CHECKED_PROPERTY)
    return stamp is None or stamp == definition.format_properties.get(METADATA_LOCATION_PROPERTY)


def _response(metadata: TableMetadata, metadata_location: str) -> CommitTableResponse:
    # The pydantic model is populated by field name at run time (as SqlCatalog does); mypy only
    # sees the JSON alias "metadata-location".
    return CommitTableResponse(metadata=metadata, metadata_location=metadata_location)  # type: ignore[call-arg]


# ---------------------------------------------------------------------------------------------
# The catalog


class LakecoreCatalog(MetastoreCatalog):
    """A pyiceberg catalog backed by a lakecore lakehouse (see the module docstring)."""

    def __init__(self, name: str, **properties: Any) -> None:
        """Open the lakehouse at ``properties["uri"]``.

        Raises:
            ValidationError: no ``uri``, unusable options, or a warehouse in a lakecore directory.
            lakecore.errors.NotFoundError: no lakehouse at ``uri`` (and ``lakecore.create`` is
                not "true"), or the requested version does not exist or was expired.
        """
        storage_options = properties.pop("storage_options", None)
        _refuse_misspelt_properties(properties)
        super().__init__(name, **properties)
        self._lock = threading.RLock()
        uri = properties.get("uri")
        if not uri:
            raise ValidationError(
                "LakecoreCatalog needs a 'uri': the lakehouse root, such as s3://bucket/lake"
            )
        try:
            options = _storage_options_of(
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
                self._view = self._lakehouse.at_version(_version_number(version))
            elif as_of is not None:
                self._view = self._lakehouse.as_of(_as_of_millis(as_of))
            root = self._lakehouse.storage.root_uri
            self._storage_options = options
            self.warehouse = self._warehouse_of(properties.get(WAREHOUSE_LOCATION))
            _check_qualified(self.warehouse, "the warehouse")
            _refuse_lakecore_directory(self.warehouse, root, "the warehouse")
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
        """The version reads see: the fixed one, or the latest."""
        if self._view is not None:
            return self._view
        return self._lakehouse.refresh()

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
        with self._lock:
            for attempt in range(CATALOG_OP_ATTEMPTS):
                tx = self._lakehouse.refresh().transaction()
                try:
                    with _translated(**translate):
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

    # -- locations ----------------------------------------------------------------------------

    def check_location(self, location: str, what: str) -> None:
        """Refuse a location outside the warehouse, the warehouse itself, or one inside
        lakecore's own directories.

        Raises:
            ValidationError: with the reason.
        """
        with _translated():
            normalized = normalize_location(location)
            _check_qualified(normalized, what)
            if normalized == self.warehouse:
                raise InvalidLocationError(
                    f"{what} {location} is the warehouse itself; a table's files go in a folder of "
                    "their own inside it"
                )
            if not normalized.startswith(self.warehouse + "/"):
                raise InvalidLocationError(
                    f"{what} {location} is outside the warehouse {self.warehouse}; tables of this catalog "
                    "keep their files under it"
                )
            _refuse_lakecore_directory(normalized, self._lakehouse.storage.root_uri, what)

    def _check_namespace_location(self, properties: Properties) -> None:
        """A namespace's ``location`` is where its tables go by default: held to the tables'
        rule when it is set, not found wrong at every later create."""
        location = properties.get(LOCATION)
        if location:
            self.check_location(str(location), "namespace location")

    def _check_metadata(self, metadata: TableMetadata, metadata_location: str) -> None:
        self.check_location(metadata_location, "metadata location")
        self.check_location(metadata.location, "table location")
        for name in WRITE_PATH_PROPERTIES:
            path = metadata.properties.get(name)
            if path:
                self.check_location(str(path), f"the table property {name}")

    def _location_allowed(self, location: str) -> bool:
        try:
            self.check_location(location, "location")
        except ValidationError:
            return False
        return True

    # -- the location rule (lakecore.iceberg.roots) -------------------------------------------

    @staticmethod
    def _named_roots(metadata: TableMetadata) -> list[tuple[str, str]]:
        """(what, normalized root) for each root of the table."""
        named = [("table location", metadata.location)]
        named += [
            (f"the table property {n}", str(metadata.properties[n]))
            for n in WRITE_PATH_PROPERTIES
            if metadata.properties.get(n)
        ]
        return [(what, normalize_location(root)) for what, root in named]

    def _roots(self, metadata: TableMetadata) -> list[str]:
        return sorted({root for _, root in self._named_roots(metadata)})

    def _metadata_of(self, ns: str, name: str, definition: pb.TableDef) -> TableMetadata | None:
        """A table's current metadata (None for a table without Iceberg metadata)."""
        metadata_location = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
        if definition.table_format != "ICEBERG" or not metadata_location:
            return None
        io = self._load_file_io(location=str(metadata_location))
        return _read_metadata(io, f"{ns}.{name}", str(metadata_location))

    def _definition_roots(self, ns: str, name: str, definition: pb.TableDef) -> list[str]:
        """The roots of a table from its current metadata (none for a non-Iceberg table)."""
        metadata = self._metadata_of(ns, name, definition)
        if metadata is None:
            return []
        return sorted(
            normalize_location(r) for r in table_roots(metadata.location, metadata.properties)
        )

    def _table_references(self, metadata: TableMetadata, metadata_location: str) -> set[str]:
        """The reference folders of everything a table's metadata names (reads every manifest)."""
        io = self._load_file_io(metadata.properties, metadata_location)
        finder = ReferenceFinder(self.warehouse, self._roots(metadata), normalize_location)
        return finder.named_by_table(io, metadata, metadata_location)

    def _registry(self, tx: Transaction) -> Registry:
        """The registry as ``tx`` would commit it."""
        properties = dict(tx.lakehouse_def.properties)
        for key, value in tx.definition_changes.items():
            if value is None:
                properties.pop(key, None)
            else:
                properties[key] = value
        return Registry.of(properties)

    def _lakehouse_uri(self) -> str:
        return normalize_location(self._lakehouse.storage.root_uri)

    def _ensure_registry(self, tx: Transaction) -> Registry:
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
            self._build_registry(tx)
            return self._registry(tx)
        if registry.warehouse != self.warehouse:
            raise InvalidLocationError(
                f"this catalog's warehouse {self.warehouse} is not the lakehouse's: its Iceberg "
                f"tables live in {registry.warehouse}; reopen the catalog with "
                f"warehouse={registry.warehouse} or without the property"
            )
        return registry

    def _build_registry(self, tx: Transaction, *, restamp: bool = False) -> None:
        """Write the whole registry in ``tx`` from every table's metadata and manifests,
        replacing any older one, and claim the warehouse. With ``restamp`` a table whose
        definition another writer changed after this catalog checked it is stamped checked
        again (its current state is what the registry now holds)."""
        claim_warehouse(self.warehouse, self._lakehouse_uri(), self._storage_options)
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
            return self._roots(metadata), self._table_references(metadata, location)

        with ThreadPoolExecutor(REGISTRY_BUILD_THREADS) as pool:
            scanned = list(pool.map(scan, tables))
        for (ns, name, definition), found in zip(tables, scanned, strict=True):
            if found is None:
                continue
            roots, references = found
            outside = [r for r in roots if not r.startswith(self.warehouse + "/")]
            if outside:
                raise InvalidLocationError(
                    f"table {ns}.{name} keeps files in {outside[0]}, outside the warehouse "
                    f"{self.warehouse} this catalog was given: all of a lakehouse's Iceberg tables "
                    "live in its one warehouse; open the catalog with a warehouse that holds every "
                    "table's folders"
                )
            changes.update(roots_property(self.warehouse, ns, name, roots))
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
        self, reader: _CatalogReader, registry: Registry, path: str
    ) -> dict[tuple[str, str], list[str]]:
        """Every live table with a root overlapping ``path``, with its roots: the registry's,
        the default-located tables at ``path`` and its ancestors, and the tables of every
        namespace whose folder ``path`` contains (see lakecore.iceberg.roots)."""
        candidates: dict[tuple[str, str], list[str] | None] = {
            name: roots
            for name, roots in registry.tables.items()
            if any(overlaps(r, path) for r in roots)
        }
        for ns, name, _ in default_located_ancestors(self.warehouse, path):
            candidates.setdefault((ns, name), None)
        for ns in self._namespaces_in_folder(reader, registry, path):
            for name in reader.list_tables(ns):
                candidates.setdefault((ns, name), None)
        return self._live_with_roots(
            reader, candidates, lambda roots: any(overlaps(r, path) for r in roots)
        )

    def _live_with_roots(
        self,
        reader: _CatalogReader,
        candidates: Mapping[tuple[str, str], list[str] | None],
        keep: Callable[[list[str]], bool],
    ) -> dict[tuple[str, str], list[str]]:
        """The candidates that exist, with their roots (the registry's, which list only roots
        the name does not give away, joined with the metadata's), where ``keep(roots)``."""
        found: dict[tuple[str, str], list[str]] = {}
        for (ns, name), known in candidates.items():
            try:
                if not reader.table_exists(ns, name):
                    continue
                definition = reader.load_table(ns, name)
            except InvalidArgumentError:  # a path segment that is no valid name names nothing
                continue
            roots = sorted(set(known or []) | set(self._definition_roots(ns, name, definition)))
            if keep(roots):
                found[(ns, name)] = roots
        return found

    def _tables_holding(
        self, reader: _CatalogReader, registry: Registry, folder: str
    ) -> dict[tuple[str, str], list[str]]:
        """Every live table with a root that equals or contains ``folder``: the registry's and
        the default-located tables at ``folder`` and its ancestors (no scan)."""
        candidates: dict[tuple[str, str], list[str] | None] = {
            name: roots
            for name, roots in registry.tables.items()
            if any(contains(r, folder) for r in roots)
        }
        for ns, name, _ in default_located_ancestors(self.warehouse, folder):
            candidates.setdefault((ns, name), None)
        return self._live_with_roots(
            reader, candidates, lambda roots: any(contains(r, folder) for r in roots)
        )

    def _namespaces_in_folder(
        self, reader: _CatalogReader, registry: Registry, path: str
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

    def _check_roots(
        self,
        tx: Transaction,
        ns: str,
        name: str,
        metadata: TableMetadata,
        *,
        also_not: tuple[str, str] | None = None,
    ) -> None:
        """The location rule for every root of table ``ns.name`` (see lakecore.iceberg.roots),
        and the registry entry that records its roots, both in ``tx``.

        Raises:
            InvalidLocationError: a root breaks the rule (the message names the other party).
        """
        registry = self._ensure_registry(tx)
        named = self._named_roots(metadata)
        for what, root in named:
            if named_by(self.warehouse, root) != (ns, name):
                # Placed explicitly: it may lie in a folder another lakehouse claimed.
                self._refuse_claimed(root, f"{what} {root} of table {ns}.{name}")
            folders = self._namespaces_in_folder(tx, registry, root)
            if folders:
                raise InvalidLocationError(
                    f"{what} {root} of table {ns}.{name} equals or contains the folder of namespace "
                    f"{folders[0]!r}; a table "
                    "needs a folder of its own (leave the location out for a default one)"
                )
            others = {
                k: v
                for k, v in self._tables_overlapping(tx, registry, root).items()
                if k not in ((ns, name), also_not)
            }
            if others:
                (other_ns, other_name), roots = next(iter(sorted(others.items())))
                clash = next(r for r in roots if overlaps(r, root))
                raise InvalidLocationError(
                    f"{what} {root} of table {ns}.{name} overlaps {clash}, a folder of table "
                    f"{other_ns}.{other_name}: tables never "
                    "share a folder (a purge of one would delete the other's files); choose another location"
                )
        tx.set_definition_properties(
            roots_property(self.warehouse, ns, name, [root for _, root in named])
        )

    def _refuse_claimed(self, folder: str, what: str) -> None:
        """Refuse a folder inside another lakehouse's warehouse (lakecore.iceberg.warehouse)."""
        claim = claimed_between(
            self.warehouse, folder, self._lakehouse_uri(), self._storage_options
        )
        if claim is not None:
            raise InvalidLocationError(
                f"{what} lies in {claim.folder}, the Iceberg warehouse of the lakehouse at "
                f"{claim.lakehouse}: a table never keeps files in another lakehouse's warehouse; "
                "choose another location"
            )

    def _check_namespace_folder(self, tx: Transaction, ns: str, folder: str, what: str) -> None:
        """A namespace's folder is where its tables go: it may not equal or lie inside a table's
        root (that table's purge would then reach the namespace's tables), nor another
        lakehouse's warehouse.

        Raises:
            ValidationError: it does (pyiceberg's type already: a namespace operation maps
                lakecore's invalid-argument errors to NoSuchNamespaceError, for bad names).
        """
        with _translated():
            registry = self._ensure_registry(tx)
            holders = self._tables_holding(tx, registry, folder)
            if holders:
                (other_ns, other_name), roots = next(iter(sorted(holders.items())))
                clash = next(r for r in roots if contains(r, folder))
                where = "is" if clash == folder else f"lies inside {clash},"
                raise InvalidLocationError(
                    f"{what} {folder} of namespace {ns!r} {where} a folder of table "
                    f"{other_ns}.{other_name}: a namespace's tables never go inside another "
                    "table's folder; choose another location"
                )
            self._refuse_claimed(folder, f"{what} {folder} of namespace {ns!r}")

    def _written_around_registry(
        self,
        ns: str,
        name: str,
        definition: pb.TableDef | None,
        metadata: TableMetadata,
        definition_property: Callable[[str], str | None],
    ) -> bool:
        """Whether code that does not keep the registry (a client of an older lakecore) changed
        the table since this catalog checked it: its stamp (``CHECKED_PROPERTY``) names another
        metadata file, or, with a complete registry, it has a root that neither its name gives
        away nor the registry records (every root this catalog, or the registry's build, saw is
        recorded). Property lookups only, no read."""
        if not _checked(definition):
            return True
        if definition_property(REGISTRY_MARKER_PROPERTY) != REGISTRY_FORMAT:
            return False  # the build that comes with the next change reads the table as it is
        recorded = definition_property(roots_key(ns, name))
        known = set(json.loads(recorded)) if recorded else set()
        return not set(registered_roots(self.warehouse, ns, name, self._roots(metadata))) <= known

    def _precheck_roots(self, ns: str, name: str, metadata: TableMetadata) -> None:
        """The rule, before any file is written (the commit checks again)."""
        with self._lock, _translated():
            tx = self._lakehouse.refresh().transaction()
            try:
                self._check_roots(tx, ns, name, metadata)
            finally:
                tx.abort()

    def _check_change(
        self,
        tx: Transaction,
        ns: str,
        name: str,
        definition: pb.TableDef | None,
        current: Table | None,
        staged: Table,
    ) -> None:
        """What a commit of ``staged`` over ``current`` (None: a create) checks and records in
        ``tx``: the lakehouse's warehouse is this catalog's; the location rule when the roots
        change; and the reference folders (lakecore.iceberg.references) of the files the commit
        adds. A table other code wrote around the registry (``_written_around_registry``) is
        recorded whole, as the registry's build records a table: its roots, and the references
        of every file it names. The registry changes only for something not yet recorded: an
        append that writes under the table's own roots changes no definition, and so never
        conflicts with another table's commit.

        Raises:
            InvalidLocationError: a root breaks the rule, or the warehouse is not this
                catalog's.
        """
        # Three property lookups, not the whole registry: this runs for every commit.
        recorded = tx.definition_property(WAREHOUSE_PROPERTY)
        if recorded is not None and recorded != self.warehouse:
            self._ensure_registry(tx)  # refuses: the lakehouse's warehouse is another
        adopted = current is not None and self._written_around_registry(
            ns, name, definition, current.metadata, tx.definition_property
        )
        roots = self._roots(staged.metadata)
        if current is None or roots != self._roots(current.metadata):
            self._check_roots(tx, ns, name, staged.metadata)
        elif adopted:
            # Recorded as the registry's build records a table: the folders it already has are
            # not judged (it cannot move), only what this commit changes is.
            self._ensure_registry(tx)
            tx.set_definition_properties(roots_property(self.warehouse, ns, name, roots))
        recorded_refs = tx.definition_property(refs_key(ns, name))
        known = json.loads(recorded_refs) if recorded_refs else []
        finder = ReferenceFinder(self.warehouse, roots, normalize_location, known)
        if current is not None:
            # A root given up (a write path moved elsewhere) still holds files the metadata
            # names, now outside the table's roots: another table may take the folder later.
            finder.add_folders(self._roots(current.metadata))
        try:
            if adopted:
                folders = finder.named_by_table(
                    staged.io, staged.metadata, staged.metadata_location
                )
            else:
                folders = finder.added_by_commit(
                    staged.io,
                    None if current is None else current.metadata,
                    staged.metadata,
                    staged.metadata_location,
                )
        except FileNotFoundError as exc:
            raise InvalidArgumentError(
                f"the commit to table {ns}.{name} names a manifest list or manifest that does not "
                f"exist ({exc.filename or exc}); write the snapshot's files before committing it"
            ) from exc
        except OSError as exc:
            raise StorageError(
                f"could not read the files the commit to table {ns}.{name} adds, to record where "
                f"they lie ({type(exc).__name__}: {exc}); retry the commit"
            ) from exc
        if all(any(contains(k, f) for k in known) for f in folders):
            return
        known = self._ensure_registry(tx).refs.get((ns, name), [])
        merged = reduce_folders(self.warehouse, [*known, *folders], MAX_REFERENCE_FOLDERS)
        tx.set_definition_properties(refs_property(ns, name, merged))

    def _files_named_by(self, table: Table) -> set[str]:
        """Every file a table's current metadata names, normalized."""
        io = table.io
        metadata = table.metadata
        manifests = [m for snapshot in metadata.snapshots for m in snapshot.manifests(io)]
        named = {table.metadata_location}
        named.update(log.metadata_file for log in metadata.metadata_log)
        named.update(s.manifest_list for s in metadata.snapshots)
        named.update(m.manifest_path for m in manifests)
        named.update(
            entry.data_file.file_path
            for manifest in manifests
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
        )
        return {normalize_location(p) for p in named}

    def _purgeable_roots(self, metadata: TableMetadata) -> list[str]:
        """Where a purge may delete: the table's location and its own write paths (each checked
        as ``_check_metadata`` checks them; one that fails is left out)."""
        locations = (
            metadata.location,
            *(metadata.properties.get(n) for n in WRITE_PATH_PROPERTIES),
        )
        return [
            normalize_location(str(loc))
            for loc in locations
            if loc and self._location_allowed(str(loc))
        ]

    def _may_purge(self, path: str, roots: list[str]) -> bool:
        # The path's own check too: a '..' segment would lead out of a root it textually starts with.
        normalized = normalize_location(path)
        return any(normalized.startswith(root + "/") for root in roots) and self._location_allowed(
            path
        )

    def _get_default_warehouse_location(self, database_name: str, table_name: str) -> str:
        # Unique per table (see the module docstring); pyiceberg's is <warehouse>/<ns>/<table>.
        properties = self.load_namespace_properties(database_name)
        # As a full URI (a bare path in a namespace's location would be stored as one, and
        # metadata_location is a full URI by the format's rule).
        # A nested namespace's folder nests too: <warehouse>/a/b for a.b.
        folder = "/".join([self.warehouse, *NS.levels(database_name)])
        base = normalize_location(properties.get(LOCATION) or folder)
        return f"{base}/{table_name}-{uuid.uuid4().hex}"

    # -- tables: reads ------------------------------------------------------------------------

    def _table_from(self, identifier: Identifier, definition: pb.TableDef) -> Table:
        metadata_location = _require_iceberg(identifier, definition)
        io = self._load_file_io(location=metadata_location)
        metadata = _read_metadata(io, ".".join(identifier), metadata_location)
        table_class = Table if self._read_only_why("change a table") is None else ReadOnlyTable
        return table_class(
            identifier=identifier,
            metadata=metadata,
            metadata_location=metadata_location,
            io=self._load_file_io(metadata.properties, metadata_location),
            catalog=self,
        )

    def load_table(self, identifier: str | Identifier) -> Table:
        """The table at its current metadata (at this catalog's version when time-travelling).

        Raises:
            NoSuchTableError: no such table (``NoSuchIcebergTableError`` if it has no Iceberg
                metadata).
        """
        ns, table = self._table(identifier)
        with (
            self._lock,
            _translated(invalid=NoSuchTableError, wording=f"Table does not exist: {ns}.{table}"),
        ):
            definition = self._read().load_table(ns, table)
        return self._table_from(_ident(ns, table), definition)

    def table_exists(self, identifier: str | Identifier) -> bool:
        """Whether the table exists (without reading its Iceberg metadata)."""
        try:
            ns, table = self._table(identifier)
        except NoSuchTableError:
            return False
        try:
            with self._lock, _translated(invalid=NoSuchTableError):
                return self._read().table_exists(ns, table)
        except NoSuchTableError:  # an invalid name: no table can have it
            return False

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        """Every table of the namespace (any lakecore table of it, Iceberg metadata or not).

        Raises:
            NoSuchNamespaceError: no such namespace.
        """
        ns = self._namespace(namespace)
        with (
            self._lock,
            _translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=f"Namespace does not exist: {ns}",
            ),
        ):
            return [(*NS.levels(ns), table) for table in self._read().list_tables(ns)]

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
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self._commit_new_table(ns, name, staged.metadata, staged.metadata_location, "MANAGED")
        return self.load_table(_ident(ns, name))

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
        with self._lock, _translated(not_found=NoSuchNamespaceError):
            view = self._lakehouse.refresh()
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
                format_properties=_pointer(metadata_location),
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
        io = self._load_file_io(location=metadata_location)
        metadata = _read_metadata(io, f"{ns}.{name}", metadata_location)
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
                    format_properties=_pointer(metadata_location, current),
                    checked_by_catalog=True,
                )
            else:
                tx.create_table(
                    ns,
                    name,
                    columns=columns,
                    table_type="EXTERNAL",
                    format_properties=_pointer(metadata_location),
                    checked_by_catalog=True,
                )

        self._change("register_table", register, not_found=NoSuchNamespaceError)
        return self.load_table(_ident(ns, name))

    def drop_table(self, identifier: str | Identifier) -> None:
        """Remove the table from the lakehouse; its files stay (``purge_table`` deletes them).

        Raises:
            NoSuchTableError: no such table.
        """
        self._refuse_read_only("drop_table")
        ns, name = self._table(identifier)
        self._change(
            "drop_table",
            lambda tx: self._drop(tx, ns, name),
            invalid=NoSuchTableError,
            wording=f"Table does not exist: {ns}.{name}",
        )

    @staticmethod
    def _drop(tx: Transaction, ns: str, name: str) -> None:
        """Drop the table and its registry entries (lakecore.iceberg.roots) in ``tx``."""
        tx.drop_table(ns, name)
        for key in (roots_key(ns, name), refs_key(ns, name)):
            if tx.definition_property(key) is not None:
                tx.set_definition_properties({key: None})

    def purge_table(self, identifier: str | Identifier) -> None:
        """Drop the table, then delete its data and metadata files.

        Only files this catalog placed for the table: those under the table's location or its
        own write paths (``write.data.path``, ...), inside the warehouse and outside lakecore's
        directories. A metadata file can name any path (its ``metadata-log``, its manifests),
        and pyiceberg's purge deletes whatever it names: a crafted or registered file could have
        taken another table's files, or the lakehouse's own root files, with it. Other paths are
        left and logged. Of those, a file that another live table's current metadata names is
        kept too: the tables whose folders overlap the purged table's, or that name files in
        them (the registry's references), are read (``lakecore.iceberg.roots``).

        Refused: a table registered with ``register_table`` (``EXTERNAL``), whose files were not
        written for it and may be another table's (``drop_table`` forgets it and leaves them);
        and a table that other code (a client of an older lakecore) wrote around the location
        registry (placed at a folder the registry does not know, or changed after this catalog
        checked it), which may name files no registry entry records. A table without
        Iceberg metadata (made through the lakehouse API) is dropped: it has no files. Older
        lakehouse versions that still name the table can no longer be scanned.

        Raises:
            NoSuchTableError: no such table.
            ValidationError: the table is EXTERNAL, or was written around the registry.
        """
        self._refuse_read_only("purge_table")
        ns, name = self._table(identifier)
        with (
            self._lock,
            _translated(invalid=NoSuchTableError, wording=f"Table does not exist: {ns}.{name}"),
        ):
            definition = self._lakehouse.refresh().load_table(ns, name)
        if definition.table_type == "EXTERNAL":
            raise ValidationError(
                f"table {ns}.{name} was registered (EXTERNAL): its files were not written for it and may belong "
                "to another table, so purge_table does not delete them; drop_table removes it from the lakehouse "
                "and leaves its files"
            )
        if not definition.format_properties.get(METADATA_LOCATION_PROPERTY):
            self.drop_table(_ident(ns, name))
            _LOG.info(
                "purge_table %s.%s: it had no Iceberg metadata, so no file to delete", ns, name
            )
            return
        table = self._table_from(_ident(ns, name), definition)
        if self._written_around_registry(
            ns, name, definition, table.metadata, self._lakehouse.lakehouse_def.properties.get
        ):
            raise ValidationError(
                f"table {ns}.{name} was written by other code (a client of an older lakecore) around the "
                "location registry, which may then not know its folders, the files it names, or other tables "
                "that code made: purge_table deletes nothing; once every client runs this release, "
                "rebuild_location_registry() reads every table once and makes it purgeable, or drop_table "
                "removes it and leaves its files"
            )
        roots = self._purgeable_roots(table.metadata)

        def drop(tx: Transaction) -> None:
            self._ensure_registry(tx)  # a lakehouse from before the rule: find its overlaps
            self._drop(tx, ns, name)

        self._change("purge_table", drop, invalid=NoSuchTableError)
        # The files any other table's current metadata names stay, whoever placed them; only
        # the tables whose roots overlap this one's, or that the registry says name files in
        # them, can name a file under them (lakecore.iceberg.roots), so only those are read.
        view = self._lakehouse
        registry = Registry.of(view.lakehouse_def.properties)
        neighbours: set[tuple[str, str]] = set()
        for root in roots:
            neighbours.update(self._tables_overlapping(view, registry, root))
            neighbours.update(
                other for other in registry.tables_referencing(root) if view.table_exists(*other)
            )
        protected: set[str] = set()
        for other_ns, other_name in sorted(neighbours):
            protected |= self._files_named_by(
                self._table_from(
                    _ident(other_ns, other_name), view.load_table(other_ns, other_name)
                )
            )
        io = table.io
        metadata = table.metadata
        manifests = [m for snapshot in metadata.snapshots for m in snapshot.manifests(io)]
        data_files = {
            entry.data_file.file_path
            for manifest in manifests
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
        }
        skipped: list[str] = []
        shared: list[str] = []

        def ours(paths: set[str]) -> set[str]:
            kept = set()
            for path in paths:
                if not self._may_purge(path, roots):
                    skipped.append(path)
                elif normalize_location(path) in protected:
                    shared.append(path)
                else:
                    kept.add(path)
            return kept

        delete_files(io, ours(data_files), "data")
        delete_files(io, ours({m.manifest_path for m in manifests}), MANIFEST)
        delete_files(io, ours({s.manifest_list for s in metadata.snapshots}), MANIFEST_LIST)
        delete_files(
            io, ours({log.metadata_file for log in metadata.metadata_log}), PREVIOUS_METADATA
        )
        delete_files(io, ours({table.metadata_location}), METADATA)
        if skipped:
            _LOG.warning(
                "purge_table %s.%s left %d file(s) outside the table's own locations %s: %s",
                ns,
                name,
                len(skipped),
                roots,
                ", ".join(sorted(skipped)[:5]) + (" ..." if len(skipped) > 5 else ""),
            )
        if shared:
            _LOG.warning(
                "purge_table %s.%s left %d file(s) that table(s) %s still name: %s",
                ns,
                name,
                len(shared),
                ", ".join(f"{a}.{b}" for a, b in sorted(neighbours)),
                ", ".join(sorted(shared)[:5]) + (" ..." if len(shared) > 5 else ""),
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
            with _translated(
                not_found=NoSuchTableError,
                invalid=NoSuchTableError,
                wording=f"Table does not exist: {from_ns}.{from_name}",
            ):
                current = tx.load_table(from_ns, from_name)
            # Refused before the commit: rename_table answers with the renamed Iceberg table,
            # which a table without Iceberg metadata cannot give.
            _require_iceberg(_ident(from_ns, from_name), current)
            with _translated(not_found=NoSuchNamespaceError):
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
            self._drop(tx, from_ns, from_name)
            if references is not None:
                tx.set_definition_properties({refs_key(to_ns, to_name): references})
            # The roots stay; under the new name the old default location is an explicit one.
            moved = self._table_from(_ident(from_ns, from_name), current)
            self._check_roots(tx, to_ns, to_name, moved.metadata, also_not=(from_ns, from_name))

        self._change("rename_table", rename)
        return self.load_table(_ident(to_ns, to_name))

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """Apply ``updates`` to the current metadata if ``requirements`` hold, write the new
        metadata file, and commit it to the lakehouse if the table is still at the metadata
        the change was based on.

        Raises:
            NoSuchTableError: the table does not exist (and this is not a create).
            TableAlreadyExistsError: a create-table transaction found the table created.
            CommitFailedException: a requirement failed, or another commit changed the table.
            CommitStateUnknownException: the lakehouse commit may or may not have landed.
            ValidationError: the new metadata lies outside the warehouse.
        """
        self._refuse_read_only("commit_table")
        ns, name = self._table(table.name())
        with self._lock:
            # First try on the lakehouse version this object already holds when it knows the
            # table at the caller's metadata (a single writer saves the latest-version lookup).
            # If it was stale, the lakehouse commit conflicts; then start again from the
            # latest version, as a catalog that reads first would have.
            response = self._commit_once(ns, name, table, requirements, updates, fresh=False)
            if response is None:
                response = self._commit_once(ns, name, table, requirements, updates, fresh=True)
            assert response is not None  # a fresh attempt returns or raises
            return response

    def _commit_once(
        self,
        ns: str,
        name: str,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
        *,
        fresh: bool,
    ) -> CommitTableResponse | None:
        """One commit attempt; None when a non-fresh attempt lost a race it may redo fresh."""
        lakehouse = self._lakehouse.refresh() if fresh else self._lakehouse
        tx = lakehouse.transaction()
        with _translated(invalid=NoSuchTableError):
            definition = tx.load_table(ns, name) if tx.table_exists(ns, name) else None
        base_location = (
            None
            if definition is None
            else definition.format_properties.get(METADATA_LOCATION_PROPERTY)
        )
        if not fresh and (base_location is None or base_location != table.metadata_location):
            tx.abort()
            return None  # the caller knows a newer state than this object: read the latest
        current: Table | None = None
        if definition is not None:
            if base_location == table.metadata_location:
                # Metadata files are immutable: the caller's copy is the current one.
                current = Table(
                    _ident(ns, name), table.metadata, table.metadata_location, table.io, self
                )
            else:
                current = self._table_from(_ident(ns, name), definition)
        staged = self._update_and_stage_table(current, _ident(ns, name), requirements, updates)
        if current is not None and staged.metadata == current.metadata:
            tx.abort()
            return _response(current.metadata, current.metadata_location)
        self._check_metadata(staged.metadata, staged.metadata_location)
        try:
            with _translated():
                self._check_change(tx, ns, name, definition, current, staged)
        except BaseException:
            tx.abort()
            raise
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        columns = columns_of(staged.metadata.schema())
        with _translated(not_found=NoSuchNamespaceError, in_commit=True):
            try:
                if current is None:
                    tx.create_table(
                        ns,
                        name,
                        columns=columns,
                        format_properties=_pointer(staged.metadata_location),
                        checked_by_catalog=True,
                    )
                else:
                    tx.update_table(
                        ns,
                        name,
                        columns=columns,
                        format_properties=_pointer(
                            staged.metadata_location, current.metadata_location
                        ),
                        checked_by_catalog=True,
                    )
            except BaseException:
                tx.abort()
                raise
            try:
                tx.commit()
            except CommitConflictError:
                # The new metadata file stays unreferenced, like any losing writer's.
                if not fresh:
                    return None
                if current is None and lakehouse.refresh().table_exists(ns, name):
                    raise AlreadyExistsError(
                        f"table {ns}.{name} was created by another commit"
                    ) from None
                raise
        return _response(staged.metadata, staged.metadata_location)

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
        ns = self._new_namespace(namespace)
        self._check_namespace_location(properties)

        def create(tx: Transaction) -> None:
            tx.create_namespace(ns, dict(properties), parents=True)
            default_folder = "/".join([self.warehouse, *NS.levels(ns)])
            self._check_namespace_folder(tx, ns, default_folder, "the folder")
            self._register_namespace_location(tx, ns, properties.get(LOCATION))

        self._change("create_namespace", create, exists=NamespaceAlreadyExistsError)

    def _register_namespace_location(self, tx: Transaction, ns: str, location: Any) -> None:
        """Record (or with None, forget) a namespace's own folder in the registry."""
        key = namespace_location_key(ns)
        if location:
            folder = normalize_location(str(location))
            self._check_namespace_folder(tx, ns, folder, "the location")
            tx.set_definition_properties({key: folder})
        elif tx.definition_property(key) is not None:
            tx.set_definition_properties({key: None})

    def drop_namespace(self, namespace: str | Identifier) -> None:
        """Drop an empty namespace.

        Raises:
            NoSuchNamespaceError: it does not exist.
            NamespaceNotEmptyError: it still holds tables or namespaces.
        """
        self._refuse_read_only("drop_namespace")
        ns = self._namespace(namespace)

        def drop(tx: Transaction) -> None:
            tx.drop_namespace(ns)
            self._register_namespace_location(tx, ns, None)

        self._change(
            "drop_namespace",
            drop,
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace {ns} does not exists",
            not_empty_wording=f"Namespace {ns} is not empty",
        )

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        """The direct children of ``namespace`` (the top-level namespaces without one), sorted.
        One seek per child, whatever lies deeper (``lakecore.namespaces``).

        Raises:
            NoSuchNamespaceError: ``namespace`` is given and does not exist.
        """
        parent = self._namespace(namespace) if namespace else None
        with (
            self._lock,
            _translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=None if parent is None else f"Namespace does not exist: {parent}",
            ),
        ):
            return [tuple(NS.levels(child)) for child in self._read().child_namespaces(parent)]

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        """The namespace's properties.

        Raises:
            NoSuchNamespaceError: it does not exist.
        """
        ns = self._namespace(namespace)
        with (
            self._lock,
            _translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=f"Namespace {ns} does not exists",
            ),
        ):
            return dict(self._read().load_namespace(ns).properties)

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
        ns = self._namespace(namespace)
        self._check_namespace_location(updates)

        def update(tx: Transaction) -> PropertiesUpdateSummary:
            current = dict(tx.load_namespace(ns).properties)
            summary, _ = self._get_updated_props_and_update_summary(current, removals, updates)
            tx.update_namespace(ns, dict(updates), remove_properties=removals or ())
            if LOCATION in updates or LOCATION in (removals or ()):
                self._register_namespace_location(tx, ns, updates.get(LOCATION))
            return summary

        return self._change(
            "update_namespace_properties",
            update,
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace {ns} does not exists",
        )

    # -- multi-table transactions (the REST server's POST /v1/transactions/commit) ----------

    def commit_tables(
        self,
        changes: Sequence[
            tuple[str | Identifier, tuple[TableRequirement, ...], tuple[TableUpdate, ...]]
        ],
    ) -> list[CommitTableResponse]:
        """Commit changes to several tables as one lakehouse version: all land or none does.

        Every table's requirements are checked against its metadata at the latest version and
        its updates applied, all before anything is written; then each changed table's new
        metadata file is written and one lakehouse commit replaces all their definitions. A
        change whose requirements hold ``assert-create`` creates its table (a staged create
        committed with the others, as DuckDB sends ``CREATE TABLE`` and ``INSERT`` in one
        transaction). A commit that changed one of these tables meanwhile makes the lakehouse
        commit conflict: nothing lands and the caller gets ``CommitFailedException`` to retry on
        fresh metadata (the new metadata files stay unreferenced, like any losing writer's).
        Each table is named once.

        Raises:
            NoSuchTableError: a table to change does not exist.
            NoSuchNamespaceError: the namespace of a table to create does not exist.
            CommitFailedException: a requirement failed (``assert-create`` of a table that
                exists too), or another commit changed a table.
            CommitStateUnknownException: the lakehouse commit may or may not have landed.
            ValidationError: a table named twice, or new metadata outside the warehouse or in
                another table's folder.
        """
        self._refuse_read_only("commit_tables")
        names = [self._table(identifier) for identifier, _, _ in changes]
        repeated = sorted({f"{ns}.{name}" for ns, name in names if names.count((ns, name)) > 1})
        if repeated:
            raise ValidationError(
                f"a transaction names each table once; named more than once: {', '.join(repeated)}"
            )
        with self._lock:
            tx = self._lakehouse.refresh().transaction()
            try:
                # (namespace, table, definition and current or None for a create, staged) of
                # each change, and the answer for each table in the caller's order.
                to_write: list[tuple[str, str, pb.TableDef | None, Table | None, Table]] = []
                answers: list[CommitTableResponse] = []
                for (ns, name), (_, requirements, updates) in zip(names, changes, strict=True):
                    current: Table | None = None
                    definition: pb.TableDef | None = None
                    with _translated(invalid=NoSuchTableError):
                        exists = tx.table_exists(ns, name)
                        if exists:
                            definition = tx.load_table(ns, name)
                            current = self._table_from(_ident(ns, name), definition)
                    if not exists and not any(isinstance(r, AssertCreate) for r in requirements):
                        raise NoSuchTableError(f"Table does not exist: {ns}.{name}")
                    staged: Table = self._update_and_stage_table(
                        current, _ident(ns, name), requirements, updates
                    )
                    if current is not None and staged.metadata == current.metadata:
                        answers.append(_response(current.metadata, current.metadata_location))
                        continue
                    to_write.append((ns, name, definition, current, staged))
                    answers.append(_response(staged.metadata, staged.metadata_location))
                for ns, name, definition, base, new in to_write:
                    self._check_metadata(new.metadata, new.metadata_location)
                    with _translated():
                        self._check_change(tx, ns, name, definition, base, new)
                for ns, name, _, base, new in to_write:
                    self._write_metadata(new.metadata, new.io, new.metadata_location)
                    columns = columns_of(new.metadata.schema())
                    with _translated(not_found=NoSuchNamespaceError):
                        if base is None:
                            tx.create_table(
                                ns,
                                name,
                                columns=columns,
                                format_properties=_pointer(new.metadata_location),
                                checked_by_catalog=True,
                            )
                        else:
                            tx.update_table(
                                ns,
                                name,
                                columns=columns,
                                format_properties=_pointer(
                                    new.metadata_location, base.metadata_location
                                ),
                                checked_by_catalog=True,
                            )
            except BaseException:
                tx.abort()
                raise
            with _translated(in_commit=True):
                tx.commit()
        return answers

    # -- the location registry ----------------------------------------------------------------

    def rebuild_location_registry(self) -> None:
        """Read every Iceberg table's metadata and manifests once and rewrite the location
        registry (``lakecore.iceberg.roots``) from them, in one commit.

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
        self._change("rebuild_location_registry", lambda tx: self._build_registry(tx, restamp=True))

    # -- views: not supported -----------------------------------------------------------------

    def create_view(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        view_version: ViewVersion,
        location: str | None = None,
        properties: Properties = EMPTY_DICT,
    ) -> View:
        """Raises: NotImplementedError: views are not supported."""
        raise _views_unsupported("create_view")

    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        """Raises: NotImplementedError: views are not supported."""
        raise _views_unsupported("list_views")

    def view_exists(self, identifier: str | Identifier) -> bool:
        """Raises: NotImplementedError: views are not supported."""
        raise _views_unsupported("view_exists")

    def load_view(self, identifier: str | Identifier) -> View:
        """Raises: NotImplementedError: views are not supported."""
        raise _views_unsupported("load_view")

    def register_view(self, identifier: str | Identifier, metadata_location: str) -> View:
        """Raises: NotImplementedError: views are not supported."""
        raise _views_unsupported("register_view")

    def drop_view(self, identifier: str | Identifier) -> None:
        """Raises: NotImplementedError: views are not supported."""
        raise _views_unsupported("drop_view")


__all__ = [
    "CHECKED_PROPERTY",
    "METADATA_LOCATION_PROPERTY",
    "PREVIOUS_METADATA_LOCATION_PROPERTY",
    "LakecoreCatalog",
    "ReadOnlyCatalogError",
    "normalize_location",
]
