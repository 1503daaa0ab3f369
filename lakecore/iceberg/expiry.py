"""``CatalogCommitter``: table maintenance's commits through ``LakecoreCatalog``.

It is the ``Committer`` of ``lakecore.maintenance.tables.commits`` (whose docstring has the
rules): a batch of expirations is one ``commit_tables`` (one lakehouse version, all or none),
guarded by each table's UUID and refs; a table whose metadata changed since it was planned is
planned again once on its current metadata (same rules, same ``now``), or left alone; a lost
race is redone on the latest version, a bounded number of times. Purge marks go through the
catalog's ``start_purges`` and ``finish_purges``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

from lakecore.core.storage import Storage
from lakecore.errors import NotFoundError
from lakecore.iceberg.pointer import METADATA_LOCATION_PROPERTY, identifier_of
from lakecore.maintenance.clock import read_clocks
from lakecore.maintenance.tables.commits import (
    COMMITTED,
    REPLANNED,
    SKIPPED,
    UNCHANGED,
    BatchAnswer,
    ExpiryAnswer,
    PlannedExpiry,
)
from lakecore.maintenance.tables.fileio import file_io_properties
from lakecore.maintenance.tables.marks import PurgeMark
from lakecore.maintenance.tables.policy import (
    ExpiryDefaults,
    expiry_change,
    plan_snapshot_expiry,
)
from lakecore.maintenance.tables.result import (
    TableMaintenanceOptions,
    TableMaintenanceResult,
    check_options,
)
from lakecore.maintenance.tables.run import table_maintenance_in_process

if TYPE_CHECKING:
    from lakecore.iceberg.catalog import LakecoreCatalog

# Attempts at one batch's commit before the tables still pending are skipped for this run.
BATCH_ATTEMPTS: Final = 4


class CatalogCommitter:
    """Commits expirations and purge marks through a ``LakecoreCatalog`` (see the module doc)."""

    def __init__(
        self,
        catalog: LakecoreCatalog | Callable[[], LakecoreCatalog],
        now_millis: int,
        defaults: ExpiryDefaults,
    ) -> None:
        """``catalog``: the catalog, or how to open it when a commit first needs it (a run with
        nothing to commit opens none)."""
        self._catalog = catalog
        self.now_millis = now_millis
        self.defaults = defaults

    @property
    def catalog(self) -> LakecoreCatalog:
        from lakecore.iceberg.catalog import LakecoreCatalog

        if not isinstance(self._catalog, LakecoreCatalog):
            self._catalog = self._catalog()
        return self._catalog

    def commit_expirations(self, batch: Sequence[PlannedExpiry]) -> BatchAnswer:
        pending = {plan.name: plan for plan in batch}
        replanned: set[str] = set()
        answers: dict[str, ExpiryAnswer] = {}
        for _ in range(BATCH_ATTEMPTS):
            view = self.catalog.lakehouse.refresh()
            changes = []
            current: dict[str, PlannedExpiry] = {}
            for name, plan in sorted(pending.items()):
                try:
                    definition = view.load_table(plan.namespace, plan.table)
                except NotFoundError:
                    answers[name] = ExpiryAnswer(
                        plan.namespace,
                        plan.table,
                        SKIPPED,
                        plan.metadata_location,
                        reason="dropped while the job ran",
                    )
                    continue
                location = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
                if location != plan.metadata_location:
                    if name in replanned or location is None:
                        answers[name] = ExpiryAnswer(
                            plan.namespace,
                            plan.table,
                            SKIPPED,
                            plan.metadata_location,
                            reason="changed again while the job ran",
                        )
                        continue
                    replanned.add(name)
                    fresh = self._replan(plan, str(location))
                    if fresh is None:
                        answers[name] = ExpiryAnswer(
                            plan.namespace,
                            plan.table,
                            UNCHANGED,
                            str(location),
                            reason="changed while the job ran; nothing expires in its new metadata",
                        )
                        continue
                    plan = fresh
                current[name] = plan
                requirements, updates = expiry_change(
                    plan.table_uuid, plan.refs, plan.partition_statistics, plan.expiry
                )
                changes.append((identifier_of(plan.namespace, plan.table), requirements, updates))
            for name in answers:
                pending.pop(name, None)
            if not changes:
                return BatchAnswer(None, list(answers.values()))
            try:
                responses = self.catalog.commit_tables(changes)
            except (CommitFailedException, NoSuchTableError):
                # A table changed or went between the read and the commit: nothing landed;
                # look again (the changed ones are planned again, once).
                for name, plan in current.items():
                    pending[name] = plan
                continue
            version = self.catalog.lakehouse.version
            for (name, plan), response in zip(sorted(current.items()), responses, strict=True):
                answers[name] = ExpiryAnswer(
                    plan.namespace,
                    plan.table,
                    REPLANNED if name in replanned else COMMITTED,
                    plan.metadata_location,
                    response.metadata_location,
                    plan.expiry,
                )
            return BatchAnswer(version, list(answers.values()))
        for name, plan in pending.items():
            answers[name] = ExpiryAnswer(
                plan.namespace,
                plan.table,
                SKIPPED,
                plan.metadata_location,
                reason=f"other commits won the race {BATCH_ATTEMPTS} times",
            )
        return BatchAnswer(None, list(answers.values()))

    def _replan(self, plan: PlannedExpiry, location: str) -> PlannedExpiry | None:
        table = self.catalog.load_table(identifier_of(plan.namespace, plan.table))
        metadata = table.metadata
        expiry = plan_snapshot_expiry(metadata, self.now_millis, self.defaults)
        if not expiry.changes:
            return None
        return PlannedExpiry(
            namespace=plan.namespace,
            table=plan.table,
            metadata_location=table.metadata_location,
            table_uuid=str(metadata.table_uuid),
            refs={name: ref.snapshot_id for name, ref in metadata.refs.items()},
            partition_statistics=tuple(s.snapshot_id for s in metadata.partition_statistics),
            expiry=expiry,
        )

    def start_purges(
        self, marks: Sequence[PurgeMark], expected_latest: int
    ) -> list[PurgeMark] | None:
        return self.catalog.start_purges(marks, expected_latest)

    def finish_purges(self, marks: Sequence[PurgeMark]) -> int | None:
        return self.catalog.finish_purges(marks)


def maintenance_catalog(storage: Storage) -> LakecoreCatalog:
    """The catalog table maintenance commits through: the lakehouse at ``storage``, its
    recorded warehouse, and pyiceberg FileIO properties from the same storage options (new
    metadata files are written with them)."""
    from lakecore.iceberg.catalog import LakecoreCatalog

    return LakecoreCatalog(
        "lakecore-maintenance",
        uri=storage.root_uri,
        storage_options=storage.storage_options,
        **file_io_properties(storage.storage_options),
    )


def run_table_maintenance_in_process(
    storage: Storage, options: TableMaintenanceOptions
) -> TableMaintenanceResult:
    """``lakecore table-maintenance``: the clocks read, the options checked against them, then
    ``table_maintenance_in_process`` committing through ``maintenance_catalog``."""
    clocks = read_clocks(storage)
    now = check_options(options, clocks)
    committer = CatalogCommitter(lambda: maintenance_catalog(storage), now, options.defaults)
    return table_maintenance_in_process(storage, committer, options, clocks=clocks)


__all__ = [
    "BATCH_ATTEMPTS",
    "CatalogCommitter",
    "maintenance_catalog",
    "run_table_maintenance_in_process",
]
