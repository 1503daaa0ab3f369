"""Orphan-file removal ("gc"): delete lakecore files that no retained version reaches.

The units here are engine-neutral: the Spark job (``jobs/gc.py``) runs the listing, the
reachability walk and the deletes on executors and keeps the big sets distributed;
``gc_in_process`` composes the same units with plain Python sets (``lakecore gc`` on a small
lakehouse, and the tests' oracle). Both take ``GcOptions`` and return a ``GcResult``, which
``lakecore.contract.gc.render_gc`` turns into the report.

What is live
    Every retained version (every root file at the top of the root), every exported snapshot
    root named by one of their lakehouse definitions, and everything those roots reach: their
    node files, the definition files their keys point to, and each root's ``lakehouse_def``.

What may be deleted
    Only files whose *names* follow lakecore's rules (``locations.classify_path``): node files,
    namespace and table definitions, lakehouse definitions, and ``.lakecore-tmp-*`` leftovers of
    an interrupted write. Root files and ``_latest_hint.txt`` are never deleted here (expiring
    versions is ``compact-versions``' job). Any other file is *foreign*: reported, never touched.
    Only the top level and the 4,096 hash directories are listed (lakecore writes nowhere
    else), so files in other directories are neither reported nor deleted.

Steps
    1. list: the top level (driver) first, then the hash directories: a small lakehouse in
       one flat paged listing, a large one 16, 256 or 4,096 directories at a time, each listed
       recursively (executors, a few requests in flight per task); see ``listing``.
    2. retained: read every listed root strictly (with the order its definition gives), its
       definition, and the exports the definitions name. Any failure stops gc before it deletes
       anything (``GcRefusedError``, exit 4; ``GcDamagedError``, exit 6, when a retained version's
       files are damaged, naming the versions and the repair: see ``damage``): gc only
       deletes what it can *prove* unreachable.
    3. reach: the driver cuts each retained tree into subtrees (``partition.cut_tree``) and
       de-duplicates subtree locations across versions (consecutive versions share almost every
       subtree); executors walk the subtrees (``tree_files.reachable_from_subtree``); the
       driver adds the root files, definitions, top nodes and their values.
    4. orphans = deletable listed files minus reachable paths (``tally`` judges each path from
       its listing entries and its reach records: a cogroup in Spark, dicts in one process);
       only those older than the grace period (modification time before ``now - grace``) are
       deleted. Reachable paths that are not listed are reported as missing.
    5. re-check: versions committed since the listing are walked on the driver, descending only
       into nodes not already known reachable (a known-reachable node's subtree is reachable
       too), and whatever they reach is taken out of the orphans. Repeated while versions keep
       landing, a bounded number of rounds.
    6. delete in batches (executors); every name is classified again right before deleting.

Why a grace period
    A commit writes its nodes and definitions *before* its root: until the root lands they
    look like orphans. The grace period must exceed the longest commit (``commit_timeout``), so
    a grace under one hour, or under the configured commit timeout, is refused unless the
    caller says it understands the risk. The re-check in step 5 narrows the window further but
    cannot close it: a commit that started before the listing and lands after the deletes is
    only protected by the grace period. Files are aged by the earlier of this machine's clock
    and the store's (``clock``): a driver whose clock runs ahead would otherwise shorten the
    grace period by the difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache
from lakecore.maintenance.clock import Clocks, check_grace_options, grace_millis_of, read_clocks
from lakecore.maintenance.damage import is_damage_reason, may_be_damage, refusal_or_damage
from lakecore.maintenance.delete import DeleteOutcome, chunks, delete_files
from lakecore.maintenance.listing import (
    FLAT,
    FOREIGN,
    HASH_DIRECTORIES,
    GcDamagedError,
    GcRefusedError,
    ListedFile,
    list_directories,
    list_top,
    listing_way,
)
from lakecore.maintenance.reach import plan_reach, reach_in_memory
from lakecore.maintenance.recheck import NewVersionsReach, reach_new_versions
from lakecore.maintenance.roots import Retained, read_retained
from lakecore.maintenance.samples import capped
from lakecore.maintenance.settings import DEFAULT_SETTINGS, MaintenanceSettings
from lakecore.maintenance.tally import Tally, select_by_age, tally_in_memory

# ---------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class GcOptions:
    """What a gc run is asked to do, typed. ``from_settings`` fills what the command line
    leaves out from the environment's settings (``MaintenanceSettings``)."""

    grace_millis: int
    now_millis: int | None = None  # None: the earlier of this machine's clock and the store's
    dry_run: bool = False
    override_grace: bool = False  # --i-understand-grace-risk
    commit_timeout_seconds: float = DEFAULT_SETTINGS.commit_timeout_seconds
    delete_batch_size: int = DEFAULT_SETTINGS.gc_delete_batch_size
    list_threads_per_task: int = DEFAULT_SETTINGS.gc_list_threads_per_task
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
    ) -> GcOptions:
        return cls(
            grace_millis=grace_millis_of(
                older_than_millis, settings.gc_older_than, "gc_older_than"
            ),
            now_millis=now_millis,
            dry_run=dry_run,
            override_grace=override_grace,
            commit_timeout_seconds=settings.commit_timeout_seconds,
            delete_batch_size=settings.gc_delete_batch_size,
            list_threads_per_task=settings.gc_list_threads_per_task,
            flat_listing_max_files=settings.gc_flat_listing_max_files,
        )


def over_retained_refusal(reason: str) -> GcRefusedError:
    """The refusal of a retained tree whose top cannot be cut (``plan_reach``'s ``refused``):
    one that ``explained_refusal`` tells damage in."""
    return GcRefusedError(reason, over_retained=True)


def explained_refusal(
    storage: Storage, retained: Retained | None, refusal: GcRefusedError
) -> GcRefusedError:
    """gc's refusal as it leaves the run, told in one place for both engines: exit 6 with the
    damaged versions and the next step when the refusal is over what a retained version reaches
    (``over_retained``), may be damage (its cause, or a record marked as damage) and a walk of
    the retained versions confirms it; else ``refusal`` as it is (exit 4: a failed read may
    succeed on the next run)."""
    if retained is None or not refusal.over_retained:
        return refusal
    damaged = refusal.damage_marked or may_be_damage(refusal)
    return refusal_or_damage(
        storage, retained.roots, refusal, GcDamagedError, "gc", damaged=damaged
    )


# ---------------------------------------------------------------------------------------------
# The result


@dataclass
class GcFound:
    """The listing judged against the reach: what the report counts, with capped samples."""

    listed_by_kind: dict[str, int]
    listed_bytes: int
    reachable: int
    orphans: int
    orphan_bytes: int
    too_young: int  # orphans not older than the grace period
    too_young_sample: list[str]
    foreign_sample: list[str]
    missing: int = 0  # reached, not listed: a dangling definition (damage, not gc's to repair)
    missing_sample: list[str] = field(default_factory=list)
    # Listed files whose size the listing did not read (a local listing stats only orphans):
    # left out of ``listed_bytes``.
    unsized: int = 0

    @property
    def files_listed(self) -> int:
        return sum(self.listed_by_kind.values())

    @property
    def foreign(self) -> int:
        return self.listed_by_kind.get(FOREIGN, 0)


@dataclass
class GcResult:
    """What a gc run saw and did, filled stage by stage: a field is None until its stage has
    run, so that a run stopped part-way (an interruption, a refusal) reports what it had found.

    The Spark job and ``gc_in_process`` fill the same fields, and the report is made from those
    alone. The in-process run also keeps its full lists (``seen``, ``too_young``,
    ``would_delete``, every path in ``deleted``), which the tests compare with the job."""

    now_millis: int
    grace_millis: int
    dry_run: bool
    clocks: Clocks
    now_given: bool  # --now: files were aged by it, not by a clock
    delete_batch_size: int
    retained: Retained | None = None
    subtree_tasks: int | None = None
    subtree_tasks_shared: int = 0  # subtree tasks that more than one retained version has
    listing_directories: int | None = None  # directories listed one by one (none: flat)
    listing: str | None = None  # how the lakehouse was listed
    found: GcFound | None = None
    orphans_dataset: str | None = None  # --full-list's Parquet dataset
    # Set once the orphans to delete are chosen (after the re-check):
    rechecked: NewVersionsReach | None = None
    to_delete: int = 0
    bytes_to_delete: int = 0
    to_delete_sample: list[str] = field(default_factory=list)
    rescued: int = 0  # old orphans that versions committed since the listing reach
    deleted: DeleteOutcome | None = None  # set when the run has ended (empty for a dry run)
    # The in-process run's full lists (test oracles):
    seen: Tally | None = None
    too_young: list[ListedFile] = field(default_factory=list)
    would_delete: list[ListedFile] = field(default_factory=list)

    @property
    def cutoff_millis(self) -> int:
        """Orphans modified before this are old enough to delete."""
        return self.now_millis - self.grace_millis


# ---------------------------------------------------------------------------------------------
# The whole of gc in one process


def raise_explained(
    storage: Storage, retained: Retained | None, refusal: GcRefusedError
) -> NoReturn:
    """Raise ``refusal`` as it leaves the run (``explained_refusal``): the damage refusal, from
    it, or ``refusal`` itself."""
    explained = explained_refusal(storage, retained, refusal)
    if explained is refusal:
        raise refusal
    raise explained from refusal


def gc_in_process(
    storage: Storage,
    *,
    now_millis: int,
    grace_millis: int,
    dry_run: bool = False,
    batch_size: int = DEFAULT_SETTINGS.gc_delete_batch_size,
    target_tasks: int = 8,
    list_threads: int = DEFAULT_SETTINGS.gc_list_threads_per_task,
    flat_listing_max_files: int = DEFAULT_SETTINGS.gc_flat_listing_max_files,
    clocks: Clocks | None = None,
    now_given: bool = True,
) -> GcResult:
    """gc without Spark: the same units, with the sets held in memory. The caller checks the
    grace period first (``clock.check_grace_options``; ``run_gc_in_process`` does both), and takes
    ``now_millis`` from ``read_clocks(storage)`` (the earlier of this machine's clock and the
    store's) unless it has a fixed time to give. Used by ``lakecore gc``, and by the tests as
    the oracle of the Spark job."""
    result = GcResult(
        now_millis,
        grace_millis,
        dry_run,
        clocks if clocks is not None else Clocks(now_millis),
        now_given,
        batch_size,
    )
    top = list_top(storage)
    result.retained = retained = read_retained(storage, top)
    cache = NodeCache()
    try:
        plan = plan_reach(
            storage,
            retained.roots.values(),
            target_tasks,
            cache=cache,
            refused=over_retained_refusal,
        )
        result.subtree_tasks, result.subtree_tasks_shared = len(plan.tasks), plan.shared_tasks
        # One process lists one directory after another, ``list_threads`` requests in flight.
        way = listing_way(
            storage,
            plan.files_at_least,
            max_flat_files=flat_listing_max_files,
            parallelism=1,
            cores=lambda: 1,
            threads_per_task=list_threads,
        )
        result.listing = FLAT if way.flat is not None else HASH_DIRECTORIES
        result.listing_directories = way.directories_listed
        hashed = (
            way.flat
            if way.flat is not None
            else list(list_directories(storage, way.directories, list_threads))
        )
        listing = list(top) + hashed
        reach = reach_in_memory(storage, plan)
        result.seen = seen = tally_in_memory(listing, reach)
        if seen.error_count:
            raise GcRefusedError(
                f"a retained version cannot be walked or the root listed: {seen.errors[0]}",
                over_retained=True,
                damage_marked=any(map(is_damage_reason, seen.errors)),
            )
    except GcRefusedError as refusal:
        raise_explained(storage, retained, refusal)
    reachable = {path for path, _ in reach}
    selection = select_by_age(seen.orphans, result.cutoff_millis)
    result.too_young = selection.too_young
    result.found = GcFound(
        listed_by_kind={kind: n for kind, (n, _) in sorted(seen.listed_by_kind.items())},
        listed_bytes=seen.bytes_listed,
        reachable=seen.reachable,
        orphans=len(seen.orphans),
        orphan_bytes=sum(f.size for f in seen.orphans),
        too_young=len(selection.too_young),
        too_young_sample=capped(f.path for f in selection.too_young),
        foreign_sample=capped(seen.foreign),
        missing=seen.missing,
        missing_sample=capped(seen.missing_sample),
    )
    rechecked = NewVersionsReach()
    if selection.old:  # nothing to delete: nothing to protect
        rechecked = reach_new_versions(
            storage,
            retained.latest,
            lambda paths: paths & reachable,
            cache=cache,
            covered=plan.covered,
            unreached={f.path for f in seen.orphans},
        )
    result.rechecked = rechecked
    result.would_delete = [f for f in selection.old if f.path not in rechecked.paths]
    result.to_delete = len(result.would_delete)
    result.bytes_to_delete = sum(f.size for f in result.would_delete)
    result.to_delete_sample = capped(f.path for f in result.would_delete)
    result.rescued = len(selection.old) - result.to_delete
    deleted = DeleteOutcome()
    if not dry_run:
        for batch in chunks([(f.path, f.size) for f in result.would_delete], batch_size):
            deleted.add(delete_files(storage, batch, batch_size))
    result.deleted = deleted
    return result


def run_gc_in_process(storage: Storage, options: GcOptions, *, target_tasks: int = 8) -> GcResult:
    """``lakecore gc``: the clocks read, the options checked against them (``check_grace_options``),
    then ``gc_in_process``."""
    clocks = read_clocks(storage)
    now = check_grace_options(options, clocks, job="gc")
    return gc_in_process(
        storage,
        now_millis=now,
        grace_millis=options.grace_millis,
        dry_run=options.dry_run,
        batch_size=options.delete_batch_size,
        target_tasks=target_tasks,
        list_threads=options.list_threads_per_task,
        flat_listing_max_files=options.flat_listing_max_files,
        clocks=clocks,
        now_given=options.now_millis is not None,
    )
