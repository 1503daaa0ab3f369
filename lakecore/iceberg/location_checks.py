"""The catalog's checks of one location on its own: canonical, qualified, strictly inside the
warehouse, out of lakecore's directories (``lakecore.iceberg.path_rules`` has the rules), for
every location a client names and every location new table metadata holds.

Rules:

* **Every location a client names is checked before it is read or written**: a table's
  location, its write paths (``WRITE_PATH_PROPERTIES``), its metadata file, the manifest lists
  and statistics files a commit adds, a namespace's or a view's location; and the files a
  client's metadata names when they are read (``guarded``, ``lakecore.iceberg.guarded_io``).
* **Only what is new is checked.** New metadata is held to the rules for what it holds that
  the metadata it replaces did not: what that held was checked when it was committed (or
  predates the rules: a table from before them keeps working). A new partition spec's or sort
  order's transforms are checked too (``lakecore.iceberg.transforms``).
* A purge deletes only where the rules allow a location (``allows_purge_at``), canonical or
  not (see ``check_warehouse_location``).
"""

from __future__ import annotations

from pyiceberg.exceptions import ValidationError
from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata

from lakecore.iceberg.errors import translated
from lakecore.iceberg.guarded_io import GuardedFileIO
from lakecore.iceberg.path_rules import canonical_location, check_warehouse_location
from lakecore.iceberg.transforms import check_new_transforms
from lakecore.maintenance.tables.table_folders import WRITE_PATH_PROPERTIES


def canonical(location: str | None, what: str) -> str | None:
    """``location`` in its canonical form (``lakecore.iceberg.path_rules``), None for None.

    Raises:
        ValidationError: it has no canonical form (a query, an escape, a '..', ...).
    """
    if location is None:
        return None
    with translated():
        return canonical_location(location, what)


class LocationChecks:
    """The location rules of one catalog's warehouse (see the module docstring)."""

    def __init__(self, warehouse: str, lakehouse_root: str) -> None:
        self.warehouse = warehouse
        self.lakehouse_root = lakehouse_root

    def check(self, location: str, what: str, *, strict: bool = True) -> None:
        """Refuse a location that is not canonical (with ``strict``, every location a client
        names), outside the warehouse, the warehouse itself, or one inside lakecore's own
        directories (``lakecore.iceberg.path_rules``).

        Raises:
            ValidationError: with the reason.
        """
        with translated():
            check_warehouse_location(
                location, what, self.warehouse, self.lakehouse_root, strict=strict
            )

    def check_metadata(
        self, metadata: TableMetadata, metadata_location: str, base: TableMetadata | None = None
    ) -> None:
        """The rules for what ``metadata`` holds that ``base`` (the metadata it replaces; None
        for a new table) did not: the location rules for its metadata file, its location and
        write paths, and the manifest lists and statistics files it adds, checked before any of
        them is read or written; and the transforms of the partition specs and sort orders it
        adds.

        Raises:
            ValidationError: a location is not canonical, or lies outside the warehouse; a
                transform is unknown or does not apply to its column.
        """
        check_new_transforms(metadata, base)
        # What the client gave first, so that the message names it (the metadata location is
        # derived from the table location).
        if base is None or metadata.location != base.location:
            self.check(metadata.location, "table location")
        for name in WRITE_PATH_PROPERTIES:
            path = metadata.properties.get(name)
            if path and (base is None or base.properties.get(name) != path):
                self.check(str(path), f"the table property {name}")
        self.check(metadata_location, "metadata location")
        known = set() if base is None else {s.manifest_list for s in base.snapshots}
        for snapshot in metadata.snapshots:
            if snapshot.manifest_list not in known:
                self.check(
                    snapshot.manifest_list, f"the manifest list of snapshot {snapshot.snapshot_id}"
                )
        known_stats = (
            set()
            if base is None
            else {s.statistics_path for s in [*base.statistics, *base.partition_statistics]}
        )
        for stats in [*metadata.statistics, *metadata.partition_statistics]:
            if stats.statistics_path not in known_stats:
                self.check(
                    stats.statistics_path,
                    f"the statistics file of snapshot {stats.snapshot_id}",
                )

    def guarded(self, io: FileIO) -> GuardedFileIO:
        """``io`` for reading files a client named: each checked before it is opened
        (``lakecore.iceberg.guarded_io``)."""
        return GuardedFileIO(io, self.check)

    def allows_purge_at(self, location: str) -> bool:
        """Whether a purge may delete at ``location`` (qualified, in the warehouse, out of
        lakecore's directories; not necessarily canonical: see ``check_warehouse_location``)."""
        try:
            self.check(location, "location", strict=False)
        except ValidationError:
            return False
        return True


__all__ = ["LocationChecks", "canonical"]
