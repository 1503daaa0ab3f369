"""What a lakecore table definition holds of its Iceberg table: the pointer to its metadata.

Rules:

* An Iceberg table is a lakecore table with ``table_format = ICEBERG`` whose
  ``format_properties["metadata_location"]`` is the full URI of its current metadata file
  (``previous_metadata_location`` the one before; absent after a create). A table without it
  was made through the lakehouse API: it has no Iceberg metadata
  (``NoSuchIcebergTableError``), and dropping it deletes no file.
* Every catalog write also sets ``CHECKED_PROPERTY`` to the metadata location it checked and
  recorded in the location registry. Another value means that other code (a client of an older
  lakecore) changed the table since; no stamp at all means a definition from before the stamp,
  which the registry's build read (``is_checked``).
* A metadata file that is missing or unreadable is one ``CorruptFileError`` naming the table
  and the way out (``read_metadata``).
* A table's pyiceberg identifier is its namespace's levels, then its name (``identifier_of``).
"""

from __future__ import annotations

from collections.abc import Callable
from io import BytesIO
from typing import TYPE_CHECKING, Final

from pyiceberg.catalog import METADATA_LOCATION, PREVIOUS_METADATA_LOCATION
from pyiceberg.exceptions import NoSuchIcebergTableError
from pyiceberg.serializers import Compressor
from pyiceberg.table import CommitTableResponse
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.typedef import Identifier

from lakecore.core import namespaces as NS
from lakecore.core.defs import pb
from lakecore.errors import CorruptFileError, NotFoundError, StorageError
from lakecore.maintenance.tables.pointer_keys import CHECKED_PROPERTY, METADATA_LOCATION_PROPERTY

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

# pyiceberg's name, and the one table maintenance reads (maintenance.tables.pointer_keys).
assert METADATA_LOCATION == METADATA_LOCATION_PROPERTY
#: format_properties key: the metadata file the current one replaced (absent after create).
PREVIOUS_METADATA_LOCATION_PROPERTY: Final = PREVIOUS_METADATA_LOCATION
#: format_properties key of a view definition: the view's location (its folder), a full URI;
#: the table placement rule reads it without Iceberg files (``lakecore.iceberg.views``).
VIEW_LOCATION_PROPERTY: Final = "location"


def identifier_of(ns: str, name: str) -> Identifier:
    """The pyiceberg identifier of a table: its namespace's levels, then its name."""
    return (*NS.levels(ns), name)


def require_iceberg(identifier: Identifier, definition: pb.TableDef) -> str:
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


def read_metadata(io: FileIO, identifier: str, metadata_location: str) -> TableMetadata:
    """A table's current metadata; a file that is missing or unreadable is one line naming the
    table and the way out."""
    return read_metadata_sized(io, identifier, metadata_location)[0]


def read_metadata_sized(
    io: FileIO, identifier: str, metadata_location: str
) -> tuple[TableMetadata, int]:
    """``read_metadata``, and the size of its JSON (what a cache of it counts)."""

    def read(_: str) -> bytes:
        with io.new_input(metadata_location).open() as stream:
            return stream.read()

    return read_metadata_bytes(read, metadata_location, identifier, metadata_location)


def read_metadata_bytes(
    read: Callable[[str], bytes], path: str, identifier: str, metadata_location: str
) -> tuple[TableMetadata, int]:
    """A table's metadata from ``read(path)`` (the file at ``metadata_location``), and the size
    of its JSON. A file that is missing or is no metadata is one line naming the table and the
    way out (``CorruptFileError``); a store that fails to answer is a ``StorageError`` naming
    the file and the cause, never damage."""
    try:
        try:
            data = read(path)
        except NotFoundError as exc:
            raise FileNotFoundError(str(exc)) from exc
        with Compressor.get_compressor(metadata_location).stream_decompressor(
            BytesIO(data)
        ) as plain:
            text = plain.read()
        return TableMetadataUtil.parse_raw(text.decode("utf-8")), len(text)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError | IsADirectoryError):
            raise StorageError(
                f"could not read the Iceberg metadata file {metadata_location} of table "
                f"{identifier}: {getattr(exc, 'strerror', None) or ' '.join(str(exc).split())}"
            ) from exc
        raise _unreadable(exc, identifier, metadata_location) from exc
    except ValueError as exc:
        raise _unreadable(exc, identifier, metadata_location) from exc


def _unreadable(exc: Exception, identifier: str, metadata_location: str) -> CorruptFileError:
    reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
    return CorruptFileError(
        metadata_location,
        f"the Iceberg metadata file of table {identifier} cannot be read "
        f"({type(exc).__name__}: {reason}); restore the file, or drop the table (drop_table "
        "reads no metadata and deletes no file)",
    )


def pointer_properties(metadata_location: str, previous: str | None = None) -> dict[str, str]:
    """The format properties a catalog write sets: the metadata location, the one it replaced,
    and the stamp that this catalog checked it."""
    properties = {
        METADATA_LOCATION_PROPERTY: metadata_location,
        CHECKED_PROPERTY: metadata_location,
    }
    if previous:
        properties[PREVIOUS_METADATA_LOCATION_PROPERTY] = previous
    return properties


def is_checked(definition: pb.TableDef | None) -> bool:
    """Whether this catalog checked the table's current metadata (see ``CHECKED_PROPERTY``):
    a definition it wrote and no other code changed since, or one that holds no stamp (from
    before the stamp, which the registry's build read)."""
    if definition is None:
        return True
    stamp = definition.format_properties.get(CHECKED_PROPERTY)
    return stamp is None or stamp == definition.format_properties.get(METADATA_LOCATION_PROPERTY)


def commit_response(metadata: TableMetadata, metadata_location: str) -> CommitTableResponse:
    """What ``commit_table`` answers: the metadata and where it lies."""
    # The pydantic model is populated by field name at run time (as SqlCatalog does); mypy only
    # sees the JSON alias "metadata-location".
    return CommitTableResponse(metadata=metadata, metadata_location=metadata_location)  # type: ignore[call-arg]


__all__ = [
    "CHECKED_PROPERTY",
    "METADATA_LOCATION_PROPERTY",
    "PREVIOUS_METADATA_LOCATION_PROPERTY",
    "commit_response",
    "identifier_of",
    "is_checked",
    "pointer_properties",
    "read_metadata",
    "read_metadata_bytes",
    "read_metadata_sized",
    "require_iceberg",
]
