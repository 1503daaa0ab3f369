"""Version expiry ("version compaction", docs/format.md#retention): drop old versions and the files
only they reach.

A version is expired (``versions.expired_versions``, with the settings of the latest lakehouse
definition) when it is not the latest, not among the newest ``minimum_versions_to_keep``,
older at ``now`` than its maximum age, and not the root of an exported snapshot. ``now`` is a
parameter, never the clock inside the computation, so that a retried run with the same ``now``
makes the same decision.

Order of effects, so that a crash at any point leaves at worst orphans, never a dangling
pointer (a root that names a missing file):

    0. plan (nothing changes): read every root; compute the expired versions; walk what the
       retained versions and the exports reach and what the expired ones reach; the
       difference is the set of files only expired versions reach (including lakehouse
       definitions only expired roots name). A retained version that cannot be walked stops
       the run here, before anything is deleted (exit 6 with the damaged versions and the next
       step when its files are damaged, exit 4 when a read failed). An *expired* version whose
       tree cannot be read still expires: the difference is against the retained side, which
       is complete, so knowing less of the expired side only deletes less. Only its root file
       goes; the files it alone reached are left for gc (``unreadable_expired``).
    1. hint: write the latest version to ``_latest_hint.txt`` (a hint naming an expired
       version would send readers to a missing root; readers cope, but need not).
    2. roots: delete the expired root files one at a time, oldest first, so that the retained
       versions always form one unbroken chain ending at the latest.
    3. re-check versions committed since the plan (a rollback may have revived an expired
       version's tree), then delete the files of step 0's difference that none of them reaches.

A crash after step 2 leaves the files of step 3 unreferenced: gc removes them as orphans.
Never deleted: a file a retained version or an export reaches, a root of a retained version,
the hint, or anything whose name is not a lakecore name.

Exports pin their versions. The settings (ages, overrides, minimum versions) come from the
latest definition; the exports considered are those of every retained root's definition (the
retained set grown until closed), a superset of the latest's, so that no definition a retained
version still carries names a missing root. An export dropped (``Lakehouse.drop_export``) pins
nothing once the versions whose definitions still name it expire too, in the same run.

Rollbacks and exports racing a compaction: only a rollback can bring back files that only
expired versions reached (any other commit builds on the retained latest version), and an
export copies them. Both pin their version before they read it (``Lakehouse.rollback``,
``Lakehouse.export_snapshot``). A pin seen before step 2 keeps the version (``check_exports_
unchanged``); after step 3's re-check, ``refuse_late_revivals`` reads the roots committed since
and the latest pins, and refuses step 3's deletes (``ExpiryConflictError``, exit 3) when a
rollback landed unwalked or a pin names an expired version. A rollback or export that pins
later reads its version after its root is gone, and fails: none of them ever names a deleted
file.

This module holds one concept, version expiry, and stays one file: the order of effects above
is its safety argument, and the plan, each step and ``expire_in_process``, which runs them in
that order (as the Spark job does), are the argument's parts; the shared units (listing,
reach, tally, delete) are already modules of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache
from lakecore.core.versions import expired_versions, latest_version, read_hint, write_hint_or_raise
from lakecore.errors import (
    ExitCode,
    InvalidArgumentError,
    LakecoreError,
    NotFoundError,
    ReadOnlyLakehouseError,
    StorageError,
    UnsafeOptionError,
)
from lakecore.maintenance.clock import Clocks, ahead_of_clock, read_clocks
from lakecore.maintenance.damage import is_damage_reason, may_be_damage, refusal_or_damage
from lakecore.maintenance.delete import DeleteOutcome, chunks, delete_files
from lakecore.maintenance.listing import (
    list_top,
    root_version_of,
)
from lakecore.maintenance.reach import ReachPlan, plan_reach, reach_in_memory
from lakecore.maintenance.recheck import NewVersionsReach, reach_new_versions
from lakecore.maintenance.roots import LoadedRoot, exports_of, load_root, load_roots
from lakecore.maintenance.samples import capped
from lakecore.maintenance.settings import DEFAULT_SETTINGS
from lakecore.maintenance.tally import ExpiryTally, difference_in_memory


class ExpiryRefusedError(LakecoreError):
    """Version expiry cannot go on safely (a retained version cannot be read, the hint cannot
    be written, an export pins a missing root); the message says what was deleted so far."""

    exit_code = 4


class ExpiryDamagedError(ExpiryRefusedError):
    """Version expiry refused before deleting anything because a retained version's files are
    damaged (their bytes, not a failed read): a rerun cannot help, so exit 6; the message names
    the versions and the repair."""

    exit_code = ExitCode.DAMAGED

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; nothing was deleted")


class ExpiryConflictError(LakecoreError):
    """The lakehouse changed under the run in a way that invalidates its plan (an export now
    pins an expired version): nothing was deleted; run again."""

    exit_code = 3


def check_expiry_now(now_millis: int, clocks: Clocks, *, override: bool) -> str | None:
    """Judge a ``--now`` against the earlier of ``clocks``: one ahead of it by more than the
    tolerance expires versions before their age, for good. Raises ``UnsafeOptionError`` unless
    ``override``; with ``override`` returns what it allows (for a dry run's summary), else None."""
    ahead = ahead_of_clock(now_millis, clocks.now_millis, clocks.now_name)
    if ahead is None:
        return None
    if override:
        return ahead
    raise UnsafeOptionError(
        f"{ahead}: versions would expire before their age, and time travel to them is lost for good. "
        "Check the date; see what it would do with --dry-run, or pass --i-understand-expiry-risk to do it anyway"
    )


@dataclass(frozen=True)
class ExpiryOptions:
    """What a version expiry run (compact-versions) is asked to do, typed."""

    now_millis: int | None = None  # None: the earlier of this machine's clock and the store's
    dry_run: bool = False
    override_now: bool = False  # --i-understand-expiry-risk
    delete_batch_size: int = DEFAULT_SETTINGS.gc_delete_batch_size


def check_options(options: ExpiryOptions, clocks: Clocks) -> tuple[int, str | None]:
    """``check_expiry_now`` of ``options`` against ``clocks`` (a dry run needs no permission);
    returns the run's ``now`` and, for a dry run of a ``--now`` a real run would refuse, why."""
    now = options.now_millis if options.now_millis is not None else clocks.now_millis
    allowed = check_expiry_now(now, clocks, override=options.dry_run or options.override_now)
    return now, (allowed if options.dry_run and not options.override_now else None)


# ---------------------------------------------------------------------------------------------
# Planning


@dataclass
class ExpiryPlan:
    """Which versions go, decided once with a fixed ``now``."""

    now_millis: int
    latest: int
    roots: dict[int, LoadedRoot]
    lakehouse_def: LakehouseDef  # the latest version's: its settings decide
    expired: list[int]  # oldest first
    pinned: dict[str, int] = field(default_factory=dict)  # export name -> version

    @property
    def retained(self) -> list[int]:  # loaded roots only: an abandoned one is always expired
        gone = set(self.expired)
        return [v for v in sorted(self.roots) if v not in gone]

    @property
    def expired_roots(self) -> list[LoadedRoot]:
        # Abandoned (damaged) roots are expired but not loaded: they reach nothing.
        return [self.roots[v] for v in self.expired if v in self.roots]

    @property
    def retained_roots(self) -> list[LoadedRoot]:
        return [self.roots[v] for v in self.retained]


def plan_expiry(storage: Storage, now_millis: int) -> ExpiryPlan:
    """Read every root (listed at the top, plus any that landed up to the latest) and decide.
    Fails closed (``ExpiryRefusedError``) when any root or definition cannot be read."""
    try:
        top = list_top(storage)
        latest = latest_version(storage)
    except (NotFoundError, InvalidArgumentError):
        raise  # no lakehouse there, or a bad setting: nothing to expire, and a rerun will not change it
    except LakecoreError as exc:
        raise ExpiryRefusedError(
            f"cannot list the versions of {storage.root_uri}: {exc.one_line()}"
        ) from exc
    versions = {v for f in top if (v := root_version_of(f.path)) is not None}
    if versions:
        versions.update(range(max(versions) + 1, latest + 1))
    versions.add(latest)
    roots, abandoned = load_roots(storage, versions, ExpiryRefusedError, ExpiryDamagedError)
    if latest not in roots:
        raise ExpiryRefusedError(
            f"the latest version {latest} cannot be read; repair the lakehouse first "
            "(`lakecore repair rollback --to-last-valid`); nothing was deleted"
        )
    lakehouse_def = roots[latest].lakehouse_def
    created = {v: r.info.created_at_millis for v, r in roots.items()}
    # Pinned: what the definitions of the retained versions name. Keeping a pinned version
    # retains its own definition, which may pin more (an export since dropped), so grow the
    # retained set until it is closed; an export dropped from every retained definition no
    # longer pins, and one run collects it together with the versions that still named it.
    expired = expired_versions(created, latest, lakehouse_def, now_millis)
    while True:
        gone = set(expired)
        pinned = exports_of(r for v, r in roots.items() if v not in gone)
        kept = [v for v in expired if v in set(pinned.values())]
        if not kept:
            break
        expired = [v for v in expired if v not in set(kept)]
    for name, version in sorted(pinned.items()):
        if version not in roots:
            raise ExpiryRefusedError(
                f"export {name!r} pins version {version}, whose root "
                f"{storage.uri(root_node_file_name(version))} is missing; nothing was deleted"
            )
    _refuse_on_export_copy(storage, lakehouse_def, expired)
    # Damaged roots a repair rolled forward past go now, whatever their age: they can never be
    # read, reach nothing, and would otherwise block version compaction and gc for good.
    expired = sorted(set(expired) | set(abandoned))
    return ExpiryPlan(now_millis, latest, roots, lakehouse_def, expired, pinned)


def unreadable_expired(plan: ExpiryPlan, gone: ReachPlan) -> list[int]:
    """Expired versions whose tree (or root) could not be read: only their root files are
    deleted. Whatever else they reach is left where it is; once their roots are gone, gc's walk
    over the retained versions finds which of those files nothing reaches any more."""
    return sorted(set(gone.unwalked) | {v for v in plan.expired if v not in plan.roots})


def _refuse_on_export_copy(
    storage: Storage, lakehouse_def: LakehouseDef, expired: list[int]
) -> None:
    """An exported copy is a read-only snapshot: its versions never expire. (A copy holds only
    its version 0, the latest, unless commits reached it before copies refused them.)"""
    from lakecore.core.export_records import read_only_reason

    reason = read_only_reason(lakehouse_def)
    if reason is not None and expired:
        raise ReadOnlyLakehouseError(
            f"cannot expire versions {expired} of {storage.root_uri}: it is {reason}, whose versions are "
            "kept as exported; nothing was deleted"
        )


def plan_reaches(
    storage: Storage, plan: ExpiryPlan, target_tasks: int, cache: NodeCache
) -> tuple[ReachPlan, ReachPlan, list[str]]:
    """The reach plans of both sides: (retained + exports, expired, tolerated problems).

    The expired side skips every subtree the retained side covers: all of it is reachable
    from a retained version, so none of it can be deleted."""
    try:
        kept = plan_reach(
            storage, plan.retained_roots, target_tasks, cache=cache, refused=ExpiryRefusedError
        )
    except ExpiryRefusedError as exc:
        raise refusal_for_damage(storage, plan, exc, damaged=may_be_damage(exc)) from exc
    tolerated: list[str] = []
    gone = plan_reach(
        storage,
        plan.expired_roots,
        target_tasks,
        cache=cache,
        skip=kept.covered,
        tolerated=tolerated,
    )
    return kept, gone, tolerated


def refusal_for_damage(
    storage: Storage, plan: ExpiryPlan, refusal: ExpiryRefusedError, *, damaged: bool
) -> ExpiryRefusedError:
    """Expiry's refusal over a retained version it cannot walk: exit 6 with the damaged
    versions and the next step when it is damage (``damaged``: the failure said so) that a walk
    of the retained versions confirms; else ``refusal`` as it is (exit 4, retryable)."""
    retained = {v: plan.roots[v] for v in plan.retained}
    return refusal_or_damage(
        storage, retained, refusal, ExpiryDamagedError, "version compaction", damaged=damaged
    )


# ---------------------------------------------------------------------------------------------
# Effects, in order


def ensure_hint(storage: Storage, plan: ExpiryPlan) -> int:
    """Step 1: point the hint at the latest version (never an expired one); returns it."""
    try:
        current = latest_version(storage)
    except LakecoreError as exc:
        raise ExpiryRefusedError(
            f"cannot re-read the latest version: {exc.one_line()}; nothing was deleted"
        ) from exc
    hint = read_hint(storage)
    if hint == current:
        return current  # right already: a run with nothing to expire writes nothing
    try:
        write_hint_or_raise(storage, current)
        return current
    except StorageError as exc:
        failure = exc.one_line()  # the cause: this job is the one that would free the space
    hint = read_hint(storage)
    # A reader starts at the hint and probes upwards while the next root exists; it never looks
    # below the hint's gaps. A hint under an expired version (a retained one pinned by an export,
    # say) would, once that root is deleted, stop the probe there: readers would see an old
    # version as the latest and the next commit would land beneath newer roots.
    highest_expired = max(plan.expired, default=-1)
    if hint is not None and hint > highest_expired and (hint in plan.roots or hint > plan.latest):
        return hint
    raise ExpiryRefusedError(
        f"could not point the hint at version {current} ({failure}), and it names {hint!r}, not "
        f"a retained version above every version to expire (the highest is {highest_expired}); "
        "nothing was deleted"
    )


def check_exports_unchanged(storage: Storage, plan: ExpiryPlan) -> None:
    """Before step 2: an export recorded since the plan must not pin an expired version."""
    try:
        latest = load_root(storage, latest_version(storage), ExpiryRefusedError)
    except LakecoreError as exc:
        raise ExpiryRefusedError(
            f"cannot re-read the latest version: {exc.one_line()}; nothing was deleted"
        ) from exc
    pinned = exports_of([latest])
    revived = sorted({v for v in pinned.values() if v in set(plan.expired)})
    if revived:
        raise ExpiryConflictError(
            f"an export recorded during the run pins expired version(s) {revived}; nothing was "
            "deleted; run again"
        )


@dataclass
class RootDeletion:
    deleted: list[int] = field(default_factory=list)  # by this run
    already_gone: list[int] = field(
        default_factory=list
    )  # another run (or repair) deleted them first
    bytes_freed: int = 0


def delete_expired_roots(storage: Storage, plan: ExpiryPlan) -> RootDeletion:
    """Step 2: delete expired root files one at a time, oldest first (a crash leaves the
    retained versions one unbroken chain)."""
    out = RootDeletion()
    for version in sorted(plan.expired):
        path = root_node_file_name(version)
        try:
            removed = storage.delete([path])
        except LakecoreError as exc:
            raise ExpiryRefusedError(
                f"deleting the root of expired version {version} ({storage.uri(path)}) failed: "
                f"{exc.one_line()}; versions {out.deleted or 'none'} were expired, no other file "
                "was deleted (run again)"
            ) from exc
        if not removed:
            out.already_gone.append(version)  # a racing run's delete, not this one's
            continue
        out.deleted.append(version)
        loaded = plan.roots.get(version)
        out.bytes_freed += loaded.info.size if loaded is not None else 0
    return out


def recheck(
    storage: Storage,
    plan: ExpiryPlan,
    known_reachable: Callable[[set[str]], set[str]],
    cache: NodeCache,
    covered: set[str] | frozenset[str] = frozenset(),
) -> NewVersionsReach:
    """Step 3's guard: what versions committed since the plan reach, beyond the retained set
    (``covered``: the retained side's top nodes and subtree roots, known without asking).

    Then the last look before any file goes (``refuse_late_revivals``): the roots committed
    since the re-check's last round, and the pins of the latest definition."""
    rechecked = reach_new_versions(
        storage,
        plan.latest,
        known_reachable,
        cache=cache,
        refused=ExpiryRefusedError,
        covered=covered,
    )
    refuse_late_revivals(storage, plan, max([plan.latest, *rechecked.versions]))
    return rechecked


def refuse_late_revivals(storage: Storage, plan: ExpiryPlan, walked_through: int) -> None:
    """After the re-check, before step 3's deletes: ``ExpiryConflictError`` when a version the
    re-check did not walk may name a file only expired versions reached, or when a pin names
    an expired version. Expired roots are deleted by now (step 2).

    Only a rollback (a root with ``rollback_from_root``) can bring back files only expired
    versions reached: any other commit builds on the latest version, which is retained. A
    rollback pins its target before it reads it (``Lakehouse.rollback``), and takes the pin
    back in the commit that rolls forward. So, with the latest version ``L`` read here: a
    rollback that landed up to ``L`` but after the re-check's last round is among the roots
    read here; one in flight has its pin in ``L``'s definition; and one that pins after ``L``
    reads its target after that, when its root is gone, and fails. The same holds for an export
    of an expired version, which pins before it copies."""
    try:
        latest = latest_version(storage)
        for version in range(walked_through + 1, latest + 1):
            root = load_root(storage, version, ExpiryRefusedError)
            if root.info.rollback_from_root is not None:
                raise ExpiryConflictError(
                    f"version {version}, a rollback, landed after the re-check of new versions; "
                    f"the expired roots ({_versions(plan.expired)}) are gone but no other file "
                    "was deleted; run again"
                )
        pins = exports_of([load_root(storage, latest, ExpiryRefusedError)])
    except ExpiryConflictError:
        raise
    except LakecoreError as exc:
        raise ExpiryRefusedError(
            f"cannot re-read the versions committed during the run: {exc.one_line()}; the "
            f"expired roots are gone but no other file was deleted; run again"
        ) from exc
    expired = set(plan.expired)
    revived = sorted(name for name, version in pins.items() if version in expired)
    if revived:
        named = ", ".join(f"{name!r} (version {pins[name]})" for name in revived)
        raise ExpiryConflictError(
            f"a rollback or an export in progress pins expired version(s): {named}; their roots "
            "are gone but no other file was deleted, so what they read stays whole. Run again "
            "once it has finished (a pin a rollback left when it failed: `lakecore export drop "
            "NAME`)"
        )


def _versions(versions: Iterable[int]) -> str:
    listed = sorted(versions)
    if len(listed) > 6:
        return f"{len(listed)} versions, {listed[0]}..{listed[-1]}"
    return ", ".join(str(v) for v in listed)


# ---------------------------------------------------------------------------------------------
# The whole of it in one process


@dataclass
class ExpiryDifference:
    """reach(expired) minus reach(retained + exports), as the report counts it."""

    expired_reach: int  # files the expired versions reach
    candidates: int  # ... of them deletable, and reached by no retained version or export
    candidate_sample: list[str]
    candidate_node_bytes: int  # the node files' sizes (the walk read them; definitions' not)
    walk_problems: list[str]  # parts of expired versions that could not be walked (a sample)
    unreadable_subtrees: int  # subtrees of expired versions that could not be read (capped)
    unreadable_versions: list[int]  # expired, root file only (``unreadable_expired``)


@dataclass
class ExpiryResult:
    """What a version expiry run saw and did, filled step by step: a field is None until its
    step has run, so that a run stopped part-way reports what it had done. At the end
    ``roots``, ``rechecked`` and ``files`` are set, empty for a dry run.

    The Spark job and ``expire_in_process`` fill the same fields, and the report is made from
    those alone. The in-process run also keeps the whole difference (``tally``), which the
    tests compare with the job."""

    now_millis: int
    dry_run: bool
    clocks: Clocks
    now_given: bool  # --now: versions were aged by it, not by a clock
    # A dry run's --now that a real run would refuse (ahead of the clocks), and why.
    refused_ahead: str | None = None
    plan: ExpiryPlan | None = None
    retained_subtree_tasks: int | None = None
    expired_subtree_tasks: int = 0
    expired_subtrees_shared: int = 0  # expired subtrees a retained version has too: skipped
    difference: ExpiryDifference | None = None
    hint: int | None = None  # the version the hint names after step 1
    roots: RootDeletion | None = None
    rechecked: NewVersionsReach | None = None
    kept_for_new_versions: int = 0  # candidates that versions committed since the plan reach
    files: DeleteOutcome | None = None
    # The in-process run's whole difference (a test oracle):
    tally: ExpiryTally | None = None

    def end_without_deleting(self) -> None:
        """The end of a run that deletes nothing (a dry run, or nothing to expire)."""
        self.roots, self.rechecked, self.files = RootDeletion(), NewVersionsReach(), DeleteOutcome()

    @property
    def bytes_to_free_at_least(self) -> int:
        """What the run frees, as far as is known before deleting: the expired roots' and the
        node files' sizes (a definition's size is read when it is deleted)."""
        if self.plan is None or self.difference is None:
            return 0
        roots = sum(self.plan.roots[v].info.size for v in self.plan.expired if v in self.plan.roots)
        return roots + self.difference.candidate_node_bytes


def expire_in_process(
    storage: Storage,
    *,
    now_millis: int,
    dry_run: bool = False,
    batch_size: int = DEFAULT_SETTINGS.gc_delete_batch_size,
    target_tasks: int = 8,
    clocks: Clocks | None = None,
    now_given: bool = True,
) -> ExpiryResult:
    """Version expiry without Spark: the same steps, with the sets held in memory. The caller
    judges ``now_millis`` first (``check_options``; ``run_expire_in_process`` does both). Used
    by ``lakecore compact-versions``, and by the tests as the oracle of the Spark job."""
    result = ExpiryResult(
        now_millis, dry_run, clocks if clocks is not None else Clocks(now_millis), now_given
    )
    result.plan = plan = plan_expiry(storage, now_millis)
    if not plan.expired:
        if not dry_run:
            result.hint = ensure_hint(storage, plan)
        result.end_without_deleting()
        return result
    cache = NodeCache()
    kept_plan, gone_plan, tolerated = plan_reaches(storage, plan, target_tasks, cache)
    result.retained_subtree_tasks = len(kept_plan.tasks)
    result.expired_subtree_tasks = len(gone_plan.tasks)
    result.expired_subtrees_shared = gone_plan.skipped_tasks
    kept = reach_in_memory(storage, kept_plan)
    gone = reach_in_memory(storage, gone_plan)
    result.tally = tally = difference_in_memory(gone, kept)
    if tally.retained_errors:
        refusal = ExpiryRefusedError(
            f"a retained version cannot be walked: {tally.retained_errors[0]}; nothing was deleted"
        )
        raise refusal_for_damage(
            storage, plan, refusal, damaged=any(map(is_damage_reason, tally.retained_errors))
        )
    result.difference = ExpiryDifference(
        expired_reach=tally.expired_reach,
        candidates=len(tally.candidates),
        candidate_sample=capped(p for p, _ in tally.candidates),
        candidate_node_bytes=sum(size for _, size in tally.candidates if size >= 0),
        walk_problems=capped(tolerated + tally.expired_errors),
        unreadable_subtrees=len(tally.expired_errors),
        unreadable_versions=unreadable_expired(plan, gone_plan),
    )
    if dry_run:
        result.end_without_deleting()
        return result
    result.hint = ensure_hint(storage, plan)
    check_exports_unchanged(storage, plan)
    result.roots = delete_expired_roots(storage, plan)
    reachable = {p for p, _ in kept}
    result.rechecked = recheck(
        storage, plan, lambda paths: paths & reachable, cache, kept_plan.covered
    )
    files = [(p, s) for p, s in sorted(tally.candidates) if p not in result.rechecked.paths]
    result.kept_for_new_versions = len(tally.candidates) - len(files)
    deleted = DeleteOutcome()
    for batch in chunks(files, batch_size):
        deleted.add(delete_files(storage, batch, batch_size))
    result.files = deleted
    return result


def run_expire_in_process(
    storage: Storage, options: ExpiryOptions, *, target_tasks: int = 8
) -> ExpiryResult:
    """``lakecore compact-versions``: the clocks read, ``now`` judged against them
    (``check_options``), then ``expire_in_process``."""
    clocks = read_clocks(storage)
    now, refused_ahead = check_options(options, clocks)
    result = expire_in_process(
        storage,
        now_millis=now,
        dry_run=options.dry_run,
        batch_size=options.delete_batch_size,
        target_tasks=target_tasks,
        clocks=clocks,
        now_given=options.now_millis is not None,
    )
    result.refused_ahead = refused_ahead
    return result


__all__ = [
    "ExpiryConflictError",
    "ExpiryDamagedError",
    "ExpiryDifference",
    "ExpiryOptions",
    "ExpiryPlan",
    "ExpiryRefusedError",
    "ExpiryResult",
    "check_expiry_now",
    "check_exports_unchanged",
    "check_options",
    "delete_expired_roots",
    "ensure_hint",
    "expire_in_process",
    "plan_expiry",
    "plan_reaches",
    "recheck",
    "refusal_for_damage",
    "refuse_late_revivals",
    "run_expire_in_process",
    "unreadable_expired",
]
