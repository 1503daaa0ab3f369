"""Commits: ``commit_table`` (one table) and ``commit_tables`` (several, as one lakehouse version).

Rules:

* **Optimistic.** A commit applies the requirements and updates to the current metadata,
  checks the new metadata's locations (``lakecore.iceberg.path_rules``) and what the change
  records in the registry (``lakecore.iceberg.placement``), writes the new metadata file, then
  commits a lakecore transaction that replaces the table's definition. Snapshot isolation
  makes that commit fail if any other commit changed the table's key since the current metadata
  was read, so a concurrent change is never a lost update.
* **Redone once, fresh.** The first attempt runs on the lakehouse version the catalog already
  holds when it knows the table at the caller's metadata (a single writer saves the
  latest-version lookup); when that was stale, the commit is redone once on the latest version,
  as a catalog that reads first would have done. A second loss is ``CommitFailedException``:
  pyiceberg refreshes and retries.
* **Unknown is unknown.** An ambiguous root write, or any storage failure during the lakecore
  commit, is ``CommitStateUnknownException``: pyiceberg then keeps every file it wrote. The
  losing writer's metadata file is never referenced; it is left for an Iceberg orphan-file
  cleanup.
* **A create transaction** (``assert-create``) commits as a create: a table another commit
  created meanwhile is ``TableAlreadyExistsError``.
* **All or none.** ``commit_tables`` checks every table's requirements and applies its updates
  before anything is written, then writes each changed table's metadata file and replaces all
  their definitions in one lakehouse commit (the REST server's multi-table transactions). Each
  table is named once.
* A commit that changes nothing writes nothing and answers the current metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import Identifier

from lakecore.defs import pb
from lakecore.errors import AlreadyExistsError, CommitConflictError, InvalidLocationError
from lakecore.iceberg.columns import columns_of
from lakecore.iceberg.errors import translated
from lakecore.iceberg.placement import PlacementRules
from lakecore.iceberg.pointer import (
    METADATA_LOCATION_PROPERTY,
    commit_response,
    identifier_of,
    pointer_properties,
)
from lakecore.iceberg.roots import overlaps

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


class CommitOps(PlacementRules):
    """``commit_table`` and ``commit_tables`` (see the module docstring)."""

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
        with self._write_lock:
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
        with translated(invalid=NoSuchTableError):
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
        if definition is None and not any(isinstance(r, AssertCreate) for r in requirements):
            # Dropped since the caller loaded it (a commit racing a drop): not a create.
            tx.abort()
            raise NoSuchTableError(f"Table does not exist: {ns}.{name}")
        if definition is not None:
            if base_location == table.metadata_location:
                # Metadata files are immutable: the caller's copy is the current one.
                current = Table(
                    identifier_of(ns, name), table.metadata, table.metadata_location, table.io, self
                )
            else:
                current = self._table_from(identifier_of(ns, name), definition)
        staged = self._update_and_stage_table(
            current, identifier_of(ns, name), requirements, updates
        )
        if current is not None and staged.metadata == current.metadata:
            tx.abort()
            return commit_response(current.metadata, current.metadata_location)
        self._check_metadata(
            staged.metadata,
            staged.metadata_location,
            None if current is None else current.metadata,
        )
        try:
            with translated():
                self._check_change(tx, ns, name, definition, current, staged)
        except BaseException:
            tx.abort()
            raise
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        with translated(not_found=NoSuchNamespaceError, in_commit=True):
            try:
                record_metadata(
                    tx,
                    ns,
                    name,
                    staged,
                    None if current is None else current.metadata_location,
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
        return commit_response(staged.metadata, staged.metadata_location)

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
        with self._write_lock:
            tx = self._lakehouse.refresh().transaction()
            try:
                # (namespace, table, definition and current or None for a create, staged) of
                # each change, and the answer for each table in the caller's order.
                to_write: list[tuple[str, str, pb.TableDef | None, Table | None, Table]] = []
                answers: list[CommitTableResponse] = []
                for (ns, name), (_, requirements, updates) in zip(names, changes, strict=True):
                    current: Table | None = None
                    definition: pb.TableDef | None = None
                    with translated(invalid=NoSuchTableError):
                        exists = tx.table_exists(ns, name)
                        if exists:
                            definition = tx.load_table(ns, name)
                            current = self._table_from(identifier_of(ns, name), definition)
                    if not exists and not any(isinstance(r, AssertCreate) for r in requirements):
                        raise NoSuchTableError(f"Table does not exist: {ns}.{name}")
                    staged: Table = self._update_and_stage_table(
                        current, identifier_of(ns, name), requirements, updates
                    )
                    if current is not None and staged.metadata == current.metadata:
                        answers.append(commit_response(current.metadata, current.metadata_location))
                        continue
                    to_write.append((ns, name, definition, current, staged))
                    answers.append(commit_response(staged.metadata, staged.metadata_location))
                # Tables this commit creates are not in ``tx`` until below: the rule between
                # them is checked here (two creates at one location were both accepted).
                placed: list[tuple[str, str, str]] = []
                for ns, name, definition, base, new in to_write:
                    self._check_metadata(
                        new.metadata,
                        new.metadata_location,
                        None if base is None else base.metadata,
                    )
                    with translated():
                        self._check_change(tx, ns, name, definition, base, new)
                        forms = [
                            f for r in self._roots(new.metadata) for f in self._physical_forms(r)
                        ]
                        for root, other_ns, other_name in placed:
                            clash = next((f for f in forms if overlaps(f, root)), None)
                            if clash is not None:
                                raise InvalidLocationError(
                                    f"table {ns}.{name} has a folder {clash} that overlaps {root}, a "
                                    f"folder of table {other_ns}.{other_name} in the same transaction: "
                                    "tables never share a folder; choose another location"
                                )
                        placed += [(f, ns, name) for f in forms]
                for ns, name, _, base, new in to_write:
                    self._write_metadata(new.metadata, new.io, new.metadata_location)
                    with translated(not_found=NoSuchNamespaceError):
                        record_metadata(
                            tx, ns, name, new, None if base is None else base.metadata_location
                        )
            except BaseException:
                tx.abort()
                raise
            with translated(in_commit=True):
                tx.commit()
        return answers

    # -- the location registry ----------------------------------------------------------------


__all__ = ["CommitOps"]
