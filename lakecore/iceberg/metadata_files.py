"""The catalog's Iceberg metadata files: reading them (cached), writing new ones, and the FileIO
and storage they go through.

Rules:

* **Immutable, so cached.** A metadata file never changes once written (its location holds a
  version number and a UUID): what is read is kept decoded, at most ``METADATA_CACHE_BYTES``
  by the size of its JSON. A purge reads the file as it is now (``read_uncached``): what it
  deletes is decided from the file, not from a copy.
* **The batch's own files first.** A file the batch being staged has yet to write is answered
  from what it staged (``stage``): nothing committed names its (unique) location before the
  batch's root, so only the batch's own checks ask for it. The staged files are forgotten when
  the next batch begins (``forget_staged``).
* **One request a file.** On an object store, a file in the warehouse (every file the catalog
  places) is read and written through lakecore's storage rooted at the warehouse, with the
  lakehouse's storage options: one request (pyarrow's FileIO makes three, a multipart upload,
  for any size). On a local disk a new file is synced before the root that will name it is
  written (pyarrow's local writes are not).
* **Written once, rendered once.** The JSON of the last ``WRITTEN_TEXTS`` files this catalog
  wrote is kept (``written_text``): the commit's answer carries the same metadata, and the
  server sends those bytes instead of rendering them again.
* **FileIO.** Made from the catalog's own properties, one per scheme and kept, never from a
  table's properties: they come from the table's writers, and pyiceberg would otherwise let
  ``py-io-impl`` pick any class to import, or ``s3.endpoint`` send the server's requests,
  with its credentials, elsewhere.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlparse

from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import Compressor
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Identifier
from pyiceberg.utils.config import Config

from lakecore.core.sized_lru import SizedLRU
from lakecore.core.storage import Storage
from lakecore.errors import InvalidArgumentError
from lakecore.iceberg.guarded_io import sync_local_file
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.pointer import read_metadata_bytes, read_metadata_sized

# Iceberg metadata files kept decoded, by the size of their JSON: a table of a few hundred
# snapshots has some 100 KB, so 256 MiB holds those of thousands of busy tables.
METADATA_CACHE_BYTES: Final = 256 << 20
# The JSON of this many files the catalog wrote, kept for their commits' answers (a batch
# holds at most a few hundred changes; an answer is rendered right after its batch).
WRITTEN_TEXTS: Final = 1024


class MetadataFiles:
    """The metadata files of one catalog's warehouse (see the module docstring)."""

    def __init__(
        self,
        warehouse: str,
        warehouse_options: dict[str, Any] | None,
        properties: Mapping[str, str],
    ) -> None:
        """``properties`` are the catalog's, read whenever a FileIO is made."""
        self.warehouse = warehouse
        self.warehouse_options = warehouse_options
        self._properties = properties
        self._cache = SizedLRU[str, TableMetadata](METADATA_CACHE_BYTES)
        # The metadata files of the batch being staged, by location, until they are written.
        self._staged: dict[str, TableMetadata] = {}
        self._legacy_snapshot_id = Config().get_bool("legacy-current-snapshot-id") or False
        self._file_ios: dict[str, FileIO] = {}
        self._warehouse_files: Storage | None = None
        self._texts: OrderedDict[str, bytes] = OrderedDict()
        self._texts_lock = threading.Lock()

    # -- FileIO and storage -------------------------------------------------------------------

    def file_io(self, location: str | None = None) -> FileIO:
        """The catalog's FileIO for ``location``'s scheme (see the module docstring)."""
        scheme = urlparse(location).scheme if location else ""
        io = self._file_ios.get(scheme)
        if io is None:
            io = load_file_io(dict(self._properties), location)
            self._file_ios[scheme] = io
        return io

    def warm_up(self) -> None:
        """Make the FileIO for the warehouse's scheme now, not in the first request that needs
        one (importing pyarrow's costs about a CPU-second)."""
        self.file_io(self.warehouse)

    def inside_warehouse(self, location: str) -> str | None:
        """``location`` relative to the warehouse when it lies inside it, else None."""
        try:
            normalized = normalize_location(location)
        except InvalidArgumentError:
            return None
        prefix = self.warehouse + "/"
        return normalized[len(prefix) :] if normalized.startswith(prefix) else None

    def warehouse_storage(self) -> Storage:
        """lakecore's storage rooted at the warehouse, with the lakehouse's storage options."""
        if self._warehouse_files is None:
            self._warehouse_files = Storage(self.warehouse, self.warehouse_options)
        return self._warehouse_files

    # -- table metadata files -----------------------------------------------------------------

    def table_metadata(self, identifier: Identifier, location: str) -> TableMetadata:
        """The metadata file at ``location``: what the batch being staged staged there, else
        the cached copy, else read (and cached)."""
        staged = self._staged.get(location)
        if staged is not None:
            return staged
        cached = self._cache.get(location)
        if cached is not None:
            return cached[0]
        inside = self.inside_warehouse(location)
        if inside is None or location.startswith("file:"):
            io = self.file_io(location)
            metadata, size = read_metadata_sized(io, ".".join(identifier), location)
        else:
            metadata, size = read_metadata_bytes(
                self.warehouse_storage().read, inside, ".".join(identifier), location
            )
        self._cache.put(location, metadata, size)
        return metadata

    def read_uncached(self, identifier: Identifier, location: str) -> TableMetadata:
        """The metadata file at ``location`` as it is now (no cache)."""
        io = self.file_io(location)
        return read_metadata_sized(io, ".".join(identifier), location)[0]

    def write_table_metadata(self, metadata: TableMetadata, io: FileIO, metadata_path: str) -> None:
        """Write a new metadata file and keep it in the cache: the commit's next reader finds it
        without a read."""
        # As pyiceberg's ToOutputFile writes it (its legacy option, its compression by name).
        text = metadata.model_dump_json(exclude_none=not self._legacy_snapshot_id).encode("utf-8")
        if not self._legacy_snapshot_id:  # as an answer renders it: nulls left out
            with self._texts_lock:
                self._texts[metadata_path] = text
                if len(self._texts) > WRITTEN_TEXTS:
                    self._texts.popitem(last=False)
        data = Compressor.get_compressor(metadata_path).bytes_compressor()(text)
        inside = self.inside_warehouse(metadata_path)
        if inside is not None and not metadata_path.startswith("file:"):
            self.warehouse_storage().write(inside, data)
        else:
            # Every metadata location is new (a version number and a UUID): no file is there
            # to keep, and not asking whether one is saves a request on an object store.
            with io.new_output(metadata_path).create(overwrite=True) as out:
                out.write(data)
            sync_local_file(metadata_path)
        self._cache.put(metadata_path, metadata, len(text))

    def written_text(self, location: str) -> bytes | None:
        """The JSON (nulls left out) of the metadata file this catalog wrote at ``location``
        lately, or None."""
        with self._texts_lock:
            return self._texts.get(location)

    def stage(self, location: str, metadata: TableMetadata) -> None:
        """The batch being staged will write ``metadata`` at ``location``."""
        self._staged[location] = metadata

    def forget_staged(self) -> None:
        """A new batch begins: the last one's files are written or abandoned."""
        self._staged = {}


__all__ = ["METADATA_CACHE_BYTES", "MetadataFiles"]
