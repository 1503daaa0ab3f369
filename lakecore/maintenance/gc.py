"""Orphan-file removal ("gc"): delete lakecore files that no retained version reaches.

The units here are engine-neutral: the Spark job (``jobs/gc.py``) runs the listing, the
reachability walk and the deletes on executors and keeps the big sets distributed;
``gc_in_process`` composes the same units with plain Python sets for the CLI, the tests and
small lakes.

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
       subtree); executors walk the subtrees (``reachable.reachable_from_subtree``); the
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

from dataclasses import dataclass
from typing import Final

from lakecore.errors import (
    UnsafeOptionError,
)
from lakecore.locations import (
    hash_directory_prefixes,
)
from lakecore.maintenance.clock import Clocks, ahead_of_clock
from lakecore.maintenance.damage import explain_damage, is_damage_reason, may_be_damage
from lakecore.maintenance.delete import DeleteOutcome, chunks, delete_files
from lakecore.maintenance.listing import (
    GcDamagedError,
    GcRefusedError,
    ListedFile,
    list_directories,
    list_small_root,
    list_top,
    listing_levels,
)
from lakecore.maintenance.reach import (
    NewVersionsReach,
    plan_reach,
    reach_new_versions,
    run_reach_tasks,
)
from lakecore.maintenance.roots import Retained, read_retained
from lakecore.maintenance.tally import Tally, select_by_age, tally_in_memory
from lakecore.storage import Storage
from lakecore.tree.store import NodeCache
from lakecore.units import format_seconds

# Shorter than any sane commit: below it gc could delete the files of a commit in flight.
MIN_GRACE_SECONDS: Final = 3600


# ---------------------------------------------------------------------------------------------
# Options


def check_grace(
    grace_seconds: float,
    *,
    commit_timeout_seconds: float,
    now_millis: int,
    clocks: Clocks,
    override: bool,
    given: str | None = None,
) -> None:
    """Refuse a grace period (or a ``--now`` ahead of the earlier of ``clocks``, which shortens
    it) that could delete the files of a commit in flight, unless ``override``. ``given``: the
    grace period as the operator wrote it, for the message."""
    said = given if given is not None else format_seconds(grace_seconds)
    if grace_seconds < 0:
        raise UnsafeOptionError(f"--older-than {said} is negative")
    if override:
        return
    floor = max(float(MIN_GRACE_SECONDS), float(commit_timeout_seconds))
    if grace_seconds < floor:
        raise UnsafeOptionError(
            f"--older-than {said} is shorter than {format_seconds(floor)} (one hour, or "
            f"the commit timeout of {format_seconds(commit_timeout_seconds)} if longer): gc could delete the "
            "files of a commit in flight. Pass --i-understand-grace-risk to do it anyway"
        )
    ahead = ahead_of_clock(now_millis, clocks.now_millis, clocks.now_name)
    if ahead is not None:
        raise UnsafeOptionError(
            f"{ahead}, which shortens the grace period by as much. Pass --i-understand-grace-risk to do it anyway"
        )


def refusal_for_damage(
    storage: Storage, retained: Retained, refusal: GcRefusedError, *, damaged: bool
) -> GcRefusedError:
    """gc's refusal: exit 6 with the damaged versions and the next step when what stopped it is
    damage (``damaged``: the failure said so) that a walk of the retained versions confirms;
    else ``refusal`` as it is (exit 4: a failed read may succeed on the next run)."""
    if not damaged:
        return refusal
    explained = explain_damage(storage, retained.roots, GcDamagedError, "gc")
    return refusal if explained is None else explained


# ---------------------------------------------------------------------------------------------
# The whole of gc in one process


@dataclass
class GcResult:
    """What a gc run saw and did (single-process runs; the job fills a JobReport instead)."""

    retained: Retained
    seen: Tally
    too_young: list[ListedFile]
    would_delete: list[ListedFile]
    rechecked: NewVersionsReach
    deleted: DeleteOutcome


def gc_in_process(
    storage: Storage,
    *,
    now_millis: int,
    grace_millis: int,
    dry_run: bool = False,
    batch_size: int = 1000,
    target_tasks: int = 8,
    list_threads: int = 8,
    flat_listing_max_files: int = 10000,
) -> GcResult:
    """gc without Spark: the same units, with the sets held in memory. The caller checks the
    grace period (``check_grace``) first, and takes ``now_millis`` from ``read_clocks(storage)``
    (the earlier of this machine's clock and the store's) unless it has a fixed time to give."""
    top = list_top(storage)
    retained = read_retained(storage, top)
    hashed = list_small_root(storage, flat_listing_max_files)
    if hashed is None:
        directories = hash_directory_prefixes(
            listing_levels(list_threads if storage.waits_on_network else 1)
        )
        hashed = list(list_directories(storage, directories, list_threads))
    listing = list(top) + hashed
    cache = NodeCache()
    try:
        plan = plan_reach(storage, retained.roots.values(), target_tasks, cache=cache)
    except GcRefusedError as exc:
        raise refusal_for_damage(storage, retained, exc, damaged=may_be_damage(exc)) from exc
    reach = list(plan.driver_paths.items()) + list(run_reach_tasks(storage, plan.tasks))
    seen = tally_in_memory(listing, reach)
    if seen.error_count:
        refusal = GcRefusedError(
            f"a retained version cannot be walked or the root listed: {seen.errors[0]}"
        )
        raise refusal_for_damage(
            storage, retained, refusal, damaged=any(map(is_damage_reason, seen.errors))
        )
    reachable = {path for path, _ in reach}
    selection = select_by_age(seen.orphans, now_millis - grace_millis)
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
    would_delete = [f for f in selection.old if f.path not in rechecked.paths]
    deleted = DeleteOutcome()
    if not dry_run:
        for batch in chunks([(f.path, f.size) for f in would_delete], batch_size):
            deleted.add(delete_files(storage, batch, batch_size))
    return GcResult(retained, seen, selection.too_young, would_delete, rechecked, deleted)
