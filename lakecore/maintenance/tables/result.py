"""A table-maintenance run's options and result: one shape for the Spark job and the in-process
run (``lakecore table-maintenance``), which ``lakecore.contract.table_maintenance`` renders.

The result is filled stage by stage; a field is None (or empty) until its stage has run, so a
run that stops part-way reports what it had found and done. The in-process run also keeps full
sets (``reachable``, ``expired``, ``orphans``, ``chosen``) that the tests compare with the job's
capped samples and counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakecore.maintenance.clock import Clocks, check_grace_options, grace_millis_of
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.settings import DEFAULT_SETTINGS, MaintenanceSettings
from lakecore.maintenance.tables.commits import ExpiryAnswer, PlannedExpiry
from lakecore.maintenance.tables.marks import PurgeMark
from lakecore.maintenance.tables.named import Unreadable
from lakecore.maintenance.tables.policy import ExpiryDefaults


@dataclass(frozen=True)
class TableMaintenanceOptions:
    """What a run is asked to do, typed; ``from_settings`` fills what the command line leaves
    out from the environment's settings."""

    grace_millis: int
    defaults: ExpiryDefaults = field(default_factory=ExpiryDefaults)
    now_millis: int | None = None  # None: the earlier of this machine's clock and the store's
    dry_run: bool = False
    override_grace: bool = False  # --i-understand-grace-risk
    namespace: str | None = None  # --namespace: this namespace and those inside it
    expire: bool = True  # --skip-expiry: False
    orphans: bool = True  # --skip-orphans: False
    commit_timeout_seconds: float = DEFAULT_SETTINGS.commit_timeout_seconds
    commit_batch_tables: int = DEFAULT_SETTINGS.table_commit_batch_tables
    delete_batch_size: int = DEFAULT_SETTINGS.gc_delete_batch_size
    list_threads: int = DEFAULT_SETTINGS.gc_list_threads_per_task
    flat_listing_max_files: int = DEFAULT_SETTINGS.gc_flat_listing_max_files

    @classmethod
    def from_settings(
        cls,
        settings: MaintenanceSettings,
        *,
        older_than_millis: int | None = None,
        now_millis: int | None = None,
        dry_run: bool = False,
        override_grace: bool = False,
        namespace: str | None = None,
        expire: bool = True,
        orphans: bool = True,
    ) -> TableMaintenanceOptions:
        return cls(
            grace_millis=grace_millis_of(
                older_than_millis, settings.table_orphan_older_than, "table_orphan_older_than"
            ),
            defaults=ExpiryDefaults.from_settings(settings),
            now_millis=now_millis,
            dry_run=dry_run,
            override_grace=override_grace,
            namespace=namespace,
            expire=expire,
            orphans=orphans,
            commit_timeout_seconds=settings.commit_timeout_seconds,
            commit_batch_tables=settings.table_commit_batch_tables,
            delete_batch_size=settings.gc_delete_batch_size,
            list_threads=settings.gc_list_threads_per_task,
            flat_listing_max_files=settings.gc_flat_listing_max_files,
        )


def check_options(options: TableMaintenanceOptions, clocks: Clocks) -> int:
    """Refuse a grace period that could delete the files of a write in flight (under one hour,
    or the commit timeout if longer) or a ``--now`` ahead of the clocks, unless
    ``--i-understand-grace-risk``; returns the run's ``now``. (``--skip-expiry`` with
    ``--skip-orphans`` is a run that does the purges alone.)"""
    return check_grace_options(options, clocks, job="table maintenance")


@dataclass
class Blocked:
    """What an unreadable file stopped: the file, the tables whose reach met it, the folders
    nothing is deleted in, or (``everything``) why nothing at all is."""

    problems: list[Unreadable] = field(default_factory=list)
    tables: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    everything: str | None = None

    @property
    def damaged(self) -> bool:
        return any(p.damaged for p in self.problems)


@dataclass
class TableMaintenanceResult:
    """What a run saw and did (see the module doc)."""

    now_millis: int
    grace_millis: int
    dry_run: bool
    clocks: Clocks
    now_given: bool
    namespace: str | None
    defaults: ExpiryDefaults
    delete_batch_size: int
    commit_batch_tables: int
    expire: bool = True
    orphans_enabled: bool = True
    noop_reason: str | None = None
    warehouse: str | None = None
    retained_versions: list[int] | None = None
    retained_after: list[int] | None = None
    tables_in_scope: int | None = None  # None until the tables were read
    iceberg_tables: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> table names
    planned: list[PlannedExpiry] = field(default_factory=list)
    answers: list[ExpiryAnswer] = field(default_factory=list)
    versions_committed: list[int] = field(default_factory=list)
    reads: dict[str, int] = field(default_factory=dict)
    reachable_files: int | None = None
    marks: list[PurgeMark] = field(default_factory=list)
    marks_due: list[PurgeMark] = field(default_factory=list)
    marks_started: list[PurgeMark] = field(default_factory=list)
    marks_finished: list[PurgeMark] = field(default_factory=list)
    marks_version: int | None = None
    blocked: Blocked = field(default_factory=Blocked)
    expired_files: int = 0  # files only the expired snapshots and due marks reached
    expired_kept: int = 0  # of those, kept: a retained snapshot of some table names them
    expired_refused: int = 0  # of those, not deletable here (outside the owner's folders, ...)
    listing: str | None = None
    files_listed: int | None = None
    orphans_found: int = 0
    orphan_bytes: int = 0
    too_young: int = 0
    orphans_refused: int = 0
    to_delete: int = 0
    bytes_to_delete: int = 0
    unsized_to_delete: int = 0  # chosen files whose size no manifest or listing gave
    to_delete_sample: list[str] = field(default_factory=list)
    too_young_sample: list[str] = field(default_factory=list)
    refused_sample: list[str] = field(default_factory=list)
    deleted: DeleteOutcome | None = None
    # The in-process run's full sets (test oracles):
    reachable: set[str] = field(default_factory=set)
    expired: dict[str, list[str]] = field(default_factory=dict)  # path -> owner folders
    orphans: set[str] = field(default_factory=set)
    chosen: set[str] = field(default_factory=set)

    @property
    def cutoff_millis(self) -> int:
        return self.now_millis - self.grace_millis

    @property
    def snapshots_expired(self) -> int:
        source = self.answers if not self.dry_run else []
        if self.dry_run:
            return sum(len(p.expiry.snapshot_ids) for p in self.planned)
        return sum(len(a.expiry.snapshot_ids) for a in source if a.landed)

    @property
    def refs_expired(self) -> int:
        if self.dry_run:
            return sum(len(p.expiry.refs) for p in self.planned)
        return sum(len(a.expiry.refs) for a in self.answers if a.landed)

    def skip(self, reason: str, name: str) -> None:
        self.skipped.setdefault(reason, []).append(name)

    def as_details(self) -> dict[str, Any]:
        return {"defaults": self.defaults.as_details()}


__all__ = ["Blocked", "TableMaintenanceOptions", "TableMaintenanceResult", "check_options"]
