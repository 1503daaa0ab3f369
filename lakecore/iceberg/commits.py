"""Commits: ``commit_table`` (one table) and ``commit_tables`` (several, as one lakehouse version).

Rules:

* **Grouped.** Every commit is a unit of the catalog's group committer
  (``lakecore.lakehouse.group_commit``): the commits that arrive while one root write is in
  flight share the next lakehouse version, each staged on what the batch built before it, and
  each answered only once the root holding it exists. ``commit_tables`` is one unit: all its
  tables or none.
* **Optimistic, per unit.** A unit reads its table's current metadata (the batch's newer one if
  an earlier unit of the batch changed the table), checks the requirements against it, applies
  the updates, checks the new metadata's locations and transforms
  (``lakecore.iceberg.path_rules``, ``transforms``) and what the change records in the
  registry (``lakecore.iceberg.placement``), stages the new metadata file and the table's new
  definition. A failed requirement is ``CommitFailedException`` for that unit alone. Snapshot
  isolation makes the lakehouse commit fail if another writer changed one of the batch's
  tables since; the batch is then staged again on the latest version
  (``GroupCommitter``), so a concurrent change is never a lost update.
* **Files before the root.** The batch's new metadata files are written side by side before its
  root; a unit staged again on an unchanged table reuses the file it wrote.
* **Unknown is unknown.** An ambiguous root write, or any storage failure during the lakecore
  commit, is ``CommitStateUnknownException``: pyiceberg then keeps every file it wrote. A
  metadata file whose commit lost is never referenced; it is left for an Iceberg orphan-file
  cleanup.
* **A create transaction** (``assert-create``) commits as a create; a commit to a table that
  does not exist (dropped since the client loaded it) is ``NoSuchTableError``.
* A commit that changes nothing writes nothing and answers the current metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import AddSnapshotUpdate, AssertCreate
from pyiceberg.typedef import Identifier

from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.commit_path import CommitPath
from lakecore.iceberg.errors import translated
from lakecore.iceberg.location_checks import LocationChecks
from lakecore.iceberg.metadata_files import MetadataFiles
from lakecore.iceberg.placement import PlacementRules
from lakecore.iceberg.pointer import (
    commit_response,
    identifier_of,
    pointer_properties,
    require_iceberg,
)
from lakecore.iceberg.references import NamedFiles, read_named_files
from lakecore.lakehouse.group_commit import Batch

if TYPE_CHECKING:
    from pyiceberg.table.update import TableRequirement, TableUpdate

    from lakecore.lakehouse import Transaction


def record_metadata(
    tx: Transaction, ns: str, name: str, new: Table, previous_location: str | None
) -> None:
    """Point table ``ns.name``'s definition in ``tx`` at ``new``'s metadata file: a create when
    the table had none (``previous_location`` None), else an update that keeps the previous
    metadata location (``pointer_properties``). Its columns follow the new schema."""
    columns = columns_of(new.metadata.schema())
    if previous_location is None:
        tx.create_table(
            ns,
            name,
            columns=columns,
            format_properties=pointer_properties(new.metadata_location),
            checked_by_catalog=True,
        )
    else:
        tx.update_table(
            ns,
            name,
            columns=columns,
            format_properties=pointer_properties(new.metadata_location, previous_location),
            checked_by_catalog=True,
        )


@dataclass
class TableChange:
    """One table's requirements and updates, and what staging them has prepared: the files its
    new snapshots name (read before it was queued, ``TableCommits.commit``) and, by the
    metadata location it was staged on, the staged table (a batch staged again on an
    unchanged table reuses the metadata file it wrote)."""

    ns: str
    name: str
    requirements: tuple[TableRequirement, ...]
    updates: tuple[TableUpdate, ...]
    named_files: NamedFiles | None = None
    prepared: dict[str, Table] = field(default_factory=dict)


# Stages a table's requirements and updates on its current metadata (None: a create) as the
# catalog's ``_staged_table`` does: the staged table, at its new metadata location.
StageTable = Callable[
    [Table | None, Identifier, tuple["TableRequirement", ...], tuple["TableUpdate", ...]], Table
]
# Writes a new metadata file (the catalog's ``_write_new_metadata``).
WriteMetadata = Callable[[TableMetadata, FileIO, str], None]


class TableCommits:
    """Staging table commits into the group committer's batches (see the module docstring)."""

    def __init__(
        self,
        catalog: Catalog,
        path: CommitPath,
        files: MetadataFiles,
        checks: LocationChecks,
        placement: PlacementRules,
        stage_table: StageTable,
        write_metadata: WriteMetadata,
    ) -> None:
        """``catalog`` is the one the tables it answers belong to."""
        self._catalog = catalog
        self._path = path
        self._files = files
        self._checks = checks
        self._placement = placement
        self._stage_table = stage_table
        self._write_metadata = write_metadata

    def commit(self, changes: list[TableChange]) -> list[CommitTableResponse]:
        """Commit ``changes`` as one unit of the group committer: all land in one lakehouse
        version or none does. What their new snapshots name is read first, in the caller's
        thread (``_prefetch_named_files``)."""
        for change in changes:
            self._prefetch_current(change)
            self._prefetch_named_files(change)
        return self._path.run(lambda batch: [self._stage_one(batch, c) for c in changes])

    def _prefetch_current(self, change: TableChange) -> None:
        """Read the table's definition and current metadata, as of the latest version this
        process knows (no request to ask), in the caller's thread: a batch of tables nobody
        read lately would otherwise read them one after another in the committer's turn, two
        round trips a table, while every unit of the batch waits. Both are immutable files and
        land in the caches the staging reads. A failure is left for the staging to report."""
        view = self._path.known()
        if view is None:
            return
        try:
            if not view.table_exists(change.ns, change.name):
                return
            identifier = identifier_of(change.ns, change.name)
            location = require_iceberg(identifier, view.load_table(change.ns, change.name))
            self._files.table_metadata(identifier, location)
        except Exception:  # the staging reads it again and reports it as the unit's error
            return

    def _prefetch_named_files(self, change: TableChange) -> None:
        """Read what the new snapshots of ``change`` name (its ``add-snapshot`` updates' manifest
        lists, and the manifests they add) in the caller's thread, before the change is queued:
        side by side with other requests, not in the committer's turn. Each path is checked
        first (``GuardedFileIO``). A file that cannot be read is left for the committer, which
        says why."""
        snapshots = [u.snapshot for u in change.updates if isinstance(u, AddSnapshotUpdate)]
        if not snapshots:
            return
        try:
            change.named_files = read_named_files(
                self._checks.guarded(self._files.file_io()), snapshots
            )
        except Exception:  # the committer reads it again and reports it as the unit's error
            change.named_files = None

    def _stage_one(self, batch: Batch, change: TableChange) -> CommitTableResponse:
        tx = batch.tx
        ns, name = change.ns, change.name
        identifier = identifier_of(ns, name)
        with translated(invalid=NoSuchTableError):
            definition = tx.load_table(ns, name) if tx.table_exists(ns, name) else None
        creating = any(isinstance(r, AssertCreate) for r in change.requirements)
        if definition is None and not creating:
            # Dropped since the caller loaded it (a commit racing a drop): not a create.
            raise NoSuchTableError(f"Table does not exist: {ns}.{name}")
        current: Table | None = None
        if definition is not None:
            location = require_iceberg(identifier, definition)
            # A table an earlier unit of this batch changed: its new metadata, not written yet
            # (``MetadataFiles.table_metadata`` knows what the batch staged).
            metadata = self._files.table_metadata(identifier, location)
            current = Table(identifier, metadata, location, self._files.file_io(), self._catalog)
        base_location = None if current is None else current.metadata_location
        reused = change.prepared.get(base_location or "")
        if reused is not None:
            staged = reused
        else:
            staged = self._stage_table(current, identifier, change.requirements, change.updates)
        if current is not None and (not change.updates or staged.metadata == current.metadata):
            return commit_response(current.metadata, current.metadata_location)
        self._checks.check_metadata(
            staged.metadata,
            staged.metadata_location,
            None if current is None else current.metadata,
        )
        # The location rule between tables: against what the batch staged so far, whose
        # creates are in ``tx`` already (two creates at one location are refused).
        with translated():
            self._placement.check_change(
                tx, ns, name, definition, current, staged, prefetched=change.named_files
            )
        with translated(not_found=NoSuchNamespaceError):
            record_metadata(tx, ns, name, staged, base_location)
        self._files.stage(staged.metadata_location, staged.metadata)
        if reused is None:
            change.prepared[base_location or ""] = staged
            batch.write_before_root(
                staged.metadata_location,
                lambda: self._write_metadata(staged.metadata, staged.io, staged.metadata_location),
            )
        # else: written by an earlier staging of this batch, on the same base: not again.
        return commit_response(staged.metadata, staged.metadata_location)


__all__ = ["StageTable", "TableChange", "TableCommits", "WriteMetadata", "record_metadata"]
