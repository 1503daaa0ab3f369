"""``purge_table``: a drop that marks the table's files for deletion, and which tables it refuses.

Rules:

* **A purge drops and marks; it deletes nothing.** In one commit the table is dropped (with its
  registry entries) and a purge mark is recorded in the lakehouse definition
  (``lakecore.maintenance.tables.marks``, docs/format.md#purge-marks): the table's UUID, its
  metadata file and the folders a purge may delete in. Table maintenance
  (``spark-submit.sh table-maintenance``, ``lakecore table-maintenance``) deletes the files once
  no retained lakehouse version holds the table any more; until then ``undrop_table`` brings it
  back as it was. The REST server's ``DELETE .../tables/t?purgeRequested=true`` is this call:
  the request no longer waits for the deletes.
* **Only the table's own folders.** The mark's folders are the table's location and its own
  write paths (``write.data.path``, ...), each inside the warehouse and out of lakecore's
  directories (``purgeable_folders``), never what its metadata merely names elsewhere (another
  table's files, lakecore's). The maintenance job deletes there only, and never a file that a
  retained version of any table names (``lakecore.maintenance.tables.rules``).
* **Refused:** a registered (``EXTERNAL``) table, whose files were not written for it
  (``drop_table`` forgets it and leaves its files); and a table other code (a client of an
  older lakecore) wrote around the registry, which may name files no registry entry records
  (``rebuild_location_registry`` makes it purgeable again). A table without Iceberg metadata
  is dropped: it has no files, and no mark is recorded.

Its log records go to the catalog's logger, ``lakecore.iceberg.catalog``.
"""

from __future__ import annotations

import logging
import time

from pyiceberg.exceptions import NoSuchTableError, ValidationError
from pyiceberg.table.metadata import TableMetadata

from lakecore.iceberg.commit_path import CommitPath
from lakecore.iceberg.errors import translated
from lakecore.iceberg.location_checks import LocationChecks
from lakecore.iceberg.metadata_files import MetadataFiles
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.placement import PlacementRules, drop_with_entries
from lakecore.iceberg.pointer import METADATA_LOCATION_PROPERTY, identifier_of, require_iceberg
from lakecore.lakehouse import Transaction
from lakecore.maintenance.tables.marks import PurgeMark
from lakecore.maintenance.tables.table_folders import WRITE_PATH_PROPERTIES

# The catalog's logger: a purge's notes (what it marked, and why) are the catalog's.
_LOG = logging.getLogger("lakecore.iceberg.catalog")


class Purger:
    """``purge_table``'s drop and mark (see the module docstring)."""

    def __init__(
        self,
        path: CommitPath,
        files: MetadataFiles,
        checks: LocationChecks,
        placement: PlacementRules,
    ) -> None:
        self._path = path
        self._files = files
        self._checks = checks
        self._placement = placement

    def purge(self, ns: str, name: str) -> None:
        """Drop table ``ns.name`` and mark its files for deletion, in one commit (the catalog's
        ``purge_table`` has the whole contract).

        Raises:
            NoSuchTableError: no such table.
            ValidationError: the table is EXTERNAL, or was written around the registry.
        """
        with translated(invalid=NoSuchTableError, wording=f"Table does not exist: {ns}.{name}"):
            before = self._path.latest()
            definition = before.load_table(ns, name)
        if definition.table_type == "EXTERNAL":
            raise ValidationError(
                f"table {ns}.{name} was registered (EXTERNAL): its files were not written for it and may belong "
                "to another table, so purge_table does not delete them; drop_table removes it from the lakehouse "
                "and leaves its files"
            )
        if not definition.format_properties.get(METADATA_LOCATION_PROPERTY):
            self._path.change(
                "drop_table",
                lambda tx: drop_with_entries(tx, ns, name),
                invalid=NoSuchTableError,
                wording=f"Table does not exist: {ns}.{name}",
            )
            _LOG.info(
                "purge_table %s.%s: it had no Iceberg metadata, so no file to delete", ns, name
            )
            return
        # What is deleted is decided from the file as it is now, not from a cached copy.
        identifier = identifier_of(ns, name)
        metadata_location = require_iceberg(identifier, definition)
        metadata = self._files.read_uncached(identifier, metadata_location)
        if self._placement.written_around_registry(
            ns, name, definition, metadata, before.lakehouse_def.properties.get
        ):
            raise ValidationError(
                f"table {ns}.{name} was written by other code (a client of an older lakecore) around the "
                "location registry, which may then not know its folders, the files it names, or other tables "
                "that code made: purge_table deletes nothing; once every client runs this release, "
                "rebuild_location_registry() reads every table once and makes it purgeable, or drop_table "
                "removes it and leaves its files"
            )
        folders = self.purgeable_folders(metadata)
        mark = PurgeMark(
            namespace=ns,
            table=name,
            table_uuid=str(metadata.table_uuid),
            metadata_location=metadata_location,
            folders=tuple(folders),
            dropped_at_millis=int(time.time() * 1000),
        )

        def drop(tx: Transaction) -> None:
            self._placement.ensure_registry(
                tx
            )  # a lakehouse from before the rule: find its overlaps
            drop_with_entries(tx, ns, name)
            tx.set_definition_properties({mark.key: mark.value()})

        self._path.change("purge_table", drop, invalid=NoSuchTableError)
        _LOG.info(
            "purge_table %s.%s: dropped; its files under %s are deleted by table maintenance once "
            "no retained lakehouse version holds the table (until then undrop_table brings it back)",
            ns,
            name,
            ", ".join(folders),
        )

    def purgeable_folders(self, metadata: TableMetadata) -> list[str]:
        """Where a purge may delete: the table's location and its own write paths (each checked
        as ``LocationChecks.check_metadata`` checks them; one that fails is left out)."""
        locations = (
            metadata.location,
            *(metadata.properties.get(n) for n in WRITE_PATH_PROPERTIES),
        )
        return [
            normalize_location(str(loc))
            for loc in locations
            if loc and self._checks.allows_purge_at(str(loc))
        ]


__all__ = ["Purger"]
