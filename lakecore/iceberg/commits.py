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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import Identifier

from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.errors import translated
from lakecore.iceberg.placement import PlacementRules
from lakecore.iceberg.pointer import (
    commit_response,
    identifier_of,
    pointer_properties,
    require_iceberg,
)
from lakecore.iceberg.references import NamedFiles
from lakecore.iceberg.updates import apply_updates
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
class _TableChange:
    """One table's requirements and updates, and what staging them has prepared: the files its
    new snapshots name (read before it was queued, ``_prefetch_named_files``) and, by the
    metadata location it was staged on, the staged table (a batch staged again on an
    unchanged table reuses the metadata file it wrote)."""

    ns: str
    name: str
    requirements: tuple[TableRequirement, ...]
    updates: tuple[TableUpdate, ...]
    named_files: NamedFiles | None = None
    prepared: dict[str, Table] = field(default_factory=dict)


class CommitOps(PlacementRules):
    """``commit_table`` and ``commit_tables`` (see the module docstring)."""

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """Apply ``updates`` to the table's current metadata if ``requirements`` hold, and
        commit the new metadata with the other commits of its batch.

        Raises:
            NoSuchTableError: the table does not exist (and this is not a create).
            CommitFailedException: a requirement failed (a create of a table that exists, too),
                or other writers kept changing the table.
            CommitStateUnknownException: the lakehouse commit may or may not have landed.
            ValidationError: the new metadata breaks a location or transform rule.
        """
        return self.commit_changes(table.name(), requirements, updates)

    def commit_changes(
        self,
        identifier: str | Identifier,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """``commit_table`` by the table's identifier (the REST server's ``updateTable``: no
        metadata of the caller's needed)."""
        self._refuse_read_only("commit_table")
        ns, name = self._table(identifier)
        change = _TableChange(ns, name, requirements, updates)
        self._prefetch_named_files(change)
        return self._committer.run(lambda batch: self._stage(batch, [change])[0])

    def commit_tables(
        self,
        changes: Sequence[
            tuple[str | Identifier, tuple[TableRequirement, ...], tuple[TableUpdate, ...]]
        ],
    ) -> list[CommitTableResponse]:
        """Commit changes to several tables as one unit: all land in one lakehouse version or
        none does.

        A change whose requirements hold ``assert-create`` creates its table (a staged create
        committed with the others, as DuckDB sends ``CREATE TABLE`` and ``INSERT`` in one
        transaction). Each table is named once.

        Raises:
            NoSuchTableError: a table to change does not exist.
            NoSuchNamespaceError: the namespace of a table to create does not exist.
            CommitFailedException: a requirement failed (``assert-create`` of a table that
                exists too), or other writers kept changing a table.
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
        units = [
            _TableChange(ns, name, requirements, updates)
            for (ns, name), (_, requirements, updates) in zip(names, changes, strict=True)
        ]
        for unit in units:
            self._prefetch_named_files(unit)
        return self._committer.run(lambda batch: self._stage(batch, units))

    # -- staging ------------------------------------------------------------------------------

    def _stage(self, batch: Batch, changes: list[_TableChange]) -> list[CommitTableResponse]:
        """Stage ``changes`` into ``batch``, all or none (the committer rolls the unit back when
        this raises)."""
        return [self._stage_one(batch, change) for change in changes]

    def _staged_table(
        self,
        current: Table | None,
        identifier: Identifier,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> Table:
        """pyiceberg's ``_update_and_stage_table`` with ``apply_updates`` (no deep copy of the
        metadata): the requirements checked against ``current`` (None: a create), the updates
        applied, the next metadata file's location chosen by the table's location provider.

        Raises:
            CommitFailedException: a requirement does not hold.
        """
        base = None if current is None else current.metadata
        for requirement in requirements:
            requirement.validate(base)
        try:
            metadata = apply_updates(
                base if base is not None else self._empty_table_metadata(),
                updates,
                enforce_validation=current is None,
                metadata_location=None if current is None else current.metadata_location,
            )
        except StopIteration:
            # pyiceberg looks the current schema, spec and sort order up with next(): updates
            # that leave one of them unnamed ({"requirements": [{"type": "assert-create"}],
            # "updates": []}) raised StopIteration, a 500 at the REST server.
            what = "create" if current is None else "change"
            raise ValidationError(
                f"the updates of this {what} of table {'.'.join(identifier)} leave it without "
                "the current schema, partition spec or sort order its metadata names; a create "
                "must add a schema, a partition spec and a sort order and set each as current "
                "(-1: the last added)"
            ) from None
        version = (
            0 if current is None else self._parse_metadata_version(current.metadata_location) + 1
        )
        provider = load_location_provider(metadata.location, metadata.properties)
        location = provider.new_table_metadata_file_location(version)
        return StagedTable(
            identifier=identifier,
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(location=location),
            catalog=self,
        )

    def _stage_one(self, batch: Batch, change: _TableChange) -> CommitTableResponse:
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
            # (``_metadata_at`` knows what the batch staged).
            metadata = self._metadata_at(identifier, location)
            current = Table(identifier, metadata, location, self._load_file_io(), self)
        base_location = None if current is None else current.metadata_location
        reused = change.prepared.get(base_location or "")
        if reused is not None:
            staged = reused
        else:
            staged = self._staged_table(current, identifier, change.requirements, change.updates)
        if current is not None and (not change.updates or staged.metadata == current.metadata):
            return commit_response(current.metadata, current.metadata_location)
        self._check_metadata(
            staged.metadata,
            staged.metadata_location,
            None if current is None else current.metadata,
        )
        # The location rule between tables: against what the batch staged so far, whose
        # creates are in ``tx`` already (two creates at one location are refused).
        with translated():
            self._check_change(
                tx, ns, name, definition, current, staged, prefetched=change.named_files
            )
        with translated(not_found=NoSuchNamespaceError):
            record_metadata(tx, ns, name, staged, base_location)
        self._staged_metadata[staged.metadata_location] = staged.metadata
        if reused is None:
            change.prepared[base_location or ""] = staged
            batch.write_before_root(
                staged.metadata_location,
                lambda: self._write_new_metadata(
                    staged.metadata, staged.io, staged.metadata_location
                ),
            )
        # else: written by an earlier staging of this batch, on the same base: not again.
        return commit_response(staged.metadata, staged.metadata_location)


__all__ = ["CommitOps"]
