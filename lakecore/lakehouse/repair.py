"""Repair: put a damaged lakehouse back in order. Engine-neutral; the CLI and the repair job use it.

Actions:

    rebuild-hint             write ``_latest_hint.txt`` from the highest existing root file
    rollback --to-version V  roll forward: commit a new version with version V's content
    rollback --to-last-valid roll forward to the newest version the tree checker finds clean
    drop-damaged             delete the root files of retained versions that cannot be read,
                             below a whole latest version (gc then removes what only they reached)

Rules:

- **Plan first.** Every action returns its plan; with ``apply=False`` nothing is written.
- **A damaged root still counts as existing.** The new version goes above the highest root
  file that exists, readable or not (``versions.highest_version``: a listing plus a probe, never
  the hint alone), so no version number is ever used twice. The damaged roots stay where they
  are: they are evidence, and version compaction expires them like any other version.
- **Roll forward, never back.** The new root holds the chosen version's tree, names the
  highest existing root as ``previous_root`` and records it as ``rollback_from_root``. Its
  lakehouse definition is the newest readable one, so exports and settings recorded after the
  chosen version survive the repair.
- **The hint first.** A hint that is unreadable or wrong is rewritten before the commit: the
  commit protocol reads a hint at or past its target as a lost race.
- **Damage below a clean latest version.** Damaged older roots cannot be read, but version
  compaction and gc refuse to guess what they reach. Rolling forward to the latest version's
  own content records that a repair has rolled past them, and compaction then expires them.
- **Dropping is narrow.** ``drop-damaged`` deletes root files only, of versions whose root,
  definition or tree is damaged (never after a failed read that is not damage), never the
  latest, never one an export pins, and only while the latest version is whole. Until damaged
  versions are dropped or expired, gc and version compaction refuse with exit 6 and name them.
- **One try.** A commit that lands meanwhile makes the repair stop with ``CommitConflictError``
  (exit 3): the plan was made for a lakehouse that has moved on. Run it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakecore.core.commit import CommitPolicy, RootPlan, commit
from lakecore.core.export_records import read_only_reason
from lakecore.core.locations import LATEST_HINT_FILE_NAME, root_node_file_name
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeCache, NodeStore
from lakecore.core.versions import (
    RootInfo,
    decode_root,
    highest_version,
    is_damage_in_version,
    no_lakehouse,
    read_hint,
    write_hint_or_raise,
)
from lakecore.core.view import (
    LakehouseView,
    list_versions,
    open_version,
    read_lakehouse_def,
    root_file_versions,
)
from lakecore.errors import (
    CorruptFileError,
    ExitCode,
    InvalidArgumentError,
    NotFoundError,
    ReadOnlyLakehouseError,
    StorageError,
    TreeStructureError,
)
from lakecore.lakehouse.version_check import check_version

# Violations quoted per damaged version in the outcome.
VIOLATIONS_SHOWN = 3

Say = Callable[[str], None]


@dataclass
class RepairOutcome:
    """What a repair found, planned and did."""

    action: str
    applied: bool
    status: str = "ok"  # ok | planned | noop | failed
    highest_version: int | None = None
    new_version: int | None = None
    rollback_to: int | None = None
    plan: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    damaged_versions: dict[int, list[str]] = field(default_factory=dict)
    versions_checked: int = 0
    hint_before: int | None = None
    hint_after: int | None = None
    dropped_versions: list[int] = field(default_factory=list)
    error: str | None = None
    exit_code: int = ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "applied": self.applied,
            "status": self.status,
            "highest_version": self.highest_version,
            "new_version": self.new_version,
            "rollback_to": self.rollback_to,
            "plan": self.plan,
            "damaged_versions": {str(v): p for v, p in self.damaged_versions.items()},
            "versions_checked": self.versions_checked,
            "hint_before": self.hint_before,
            "hint_after": self.hint_after,
            "dropped_versions": self.dropped_versions,
        }


def _quiet(_line: str) -> None:
    return None


class _Planner:
    def __init__(self, outcome: RepairOutcome, say: Say) -> None:
        self.outcome = outcome
        self.say = say

    def step(self, line: str) -> None:
        text = f"{'will' if self.outcome.applied else 'would'} {line}"
        self.outcome.plan.append(text)
        self.say(text)

    def stop_if_planning(self) -> bool:
        if self.outcome.applied:
            return False
        self.outcome.status = "planned"
        self.outcome.summary.append("nothing written; rerun with --yes to carry out the plan")
        return True


def _highest(storage: Storage) -> int:
    top = highest_version(storage)
    if top is None:
        raise no_lakehouse(storage)
    return top


def rebuild_hint(storage: Storage, *, apply: bool, say: Say = _quiet) -> RepairOutcome:
    """Point the hint at the highest existing root file.

    Raises NotFoundError (no lakehouse) or StorageError (the hint cannot be written)."""
    outcome = RepairOutcome("rebuild-hint", apply)
    planner = _Planner(outcome, say)
    top = _highest(storage)
    outcome.highest_version = top
    outcome.hint_before = read_hint(storage)
    if outcome.hint_before == top:
        outcome.status = "noop"
        outcome.summary.append(f"the hint already names the latest version {top}; nothing to do")
        return outcome
    held = "nothing readable" if outcome.hint_before is None else outcome.hint_before
    planner.step(f"write {LATEST_HINT_FILE_NAME} = {top} (it holds {held})")
    if planner.stop_if_planning():
        return outcome
    _write_hint(storage, top)
    outcome.hint_after = top
    outcome.summary.append(f"hint rewritten: it held {held}, now {top}")
    return outcome


def rollback(
    storage: Storage,
    *,
    to_version: int | None = None,
    to_last_valid: bool = False,
    apply: bool,
    say: Say = _quiet,
) -> RepairOutcome:
    """Roll forward to ``to_version``'s content, or to the newest clean version.

    Raises InvalidArgumentError (neither or both targets, or the target is the latest clean
    version), NotFoundError (no such version), CorruptFileError (the chosen version is
    damaged), CommitConflictError (a commit landed meanwhile) or StorageError."""
    if (to_version is None) == (not to_last_valid):
        raise InvalidArgumentError(
            "rollback needs exactly one of --to-version V and --to-last-valid"
        )
    outcome = RepairOutcome("rollback", apply)
    planner = _Planner(outcome, say)
    top = _highest(storage)
    outcome.highest_version = top
    log = list_versions(storage)
    readable = [info for info in log if info.readable]
    for info in log:
        if not info.readable:
            outcome.damaged_versions[info.version] = [info.error or "unreadable"]
    if readable and readable[0].lakehouse_def_path is not None:
        reason = read_only_reason(read_lakehouse_def(storage, readable[0].lakehouse_def_path))
        if reason is not None:
            raise ReadOnlyLakehouseError(
                f"cannot roll back {storage.root_uri}: it is {reason}; make changes in the source lakehouse"
            )
    if to_version is not None:
        target = open_version(storage.root_uri, to_version, storage_options=storage.storage_options)
        if to_version == top and not outcome.damaged_versions:
            raise InvalidArgumentError(
                f"--to-version {top} is already the latest version; nothing to roll back "
                "(use --to-last-valid to find the newest clean version)"
            )
    else:
        found = _newest_clean(storage, [info.version for info in readable], outcome, say)
        if found is None:
            outcome.status = "failed"
            outcome.exit_code = ExitCode.DAMAGED
            outcome.error = (
                f"no retained version of {storage.root_uri} is clean (checked {outcome.versions_checked}); "
                "restore the missing files from a backup or an export"
            )
            return outcome
        if found.version == top and not outcome.damaged_versions:
            outcome.status = "noop"
            outcome.summary.append(f"the latest version {top} is clean; nothing to roll back")
            return outcome
        target = found
    outcome.rollback_to = target.version
    definition = readable[0].lakehouse_def_path if readable else None
    assert definition is not None  # the target itself is readable

    hint = read_hint(storage)
    outcome.hint_before = hint
    if hint != top:
        planner.step(
            f"write {LATEST_HINT_FILE_NAME} = {top} (it holds {'nothing readable' if hint is None else hint})"
        )
    if target.version == top:
        # The latest version is fine but older roots are damaged: a roll forward to the same
        # content marks them as rolled past, so that version compaction may expire them (until
        # then gc and compaction refuse to guess what they reach).
        damaged = ", ".join(str(v) for v in sorted(outcome.damaged_versions))
        planner.step(
            f"commit version {top + 1} with the content of the latest version {top}, rolling past the damaged "
            f"version(s) {damaged} so that version compaction can expire them"
        )
    else:
        damaged_note = f" (version {top} is damaged)" if top in outcome.damaged_versions else ""
        planner.step(
            f"roll forward from version {top}{damaged_note} to the content of version {target.version} "
            f"as version {top + 1}"
        )
    if planner.stop_if_planning():
        return outcome
    if hint != top:
        _write_hint(storage, top)
        outcome.hint_after = top
    outcome.new_version = _commit_content(storage, top, target, definition)
    outcome.hint_after = outcome.new_version
    outcome.summary.append(
        f"rolled back to the content of version {target.version}: new version {outcome.new_version}"
    )
    return outcome


def drop_damaged(storage: Storage, *, apply: bool, say: Say = _quiet) -> RepairOutcome:
    """Delete the root files of retained versions that cannot be read (their root, their
    definition or any node of their tree is damaged), below a whole latest version.

    Only root files go, oldest first: whatever else a dropped version reached is left for gc,
    whose walk over the remaining versions keeps every file they still reach. Never the latest
    version, never a version an export pins, never after a failed read that is not damage
    (StorageError: a rerun may read it). Refused (exit 6) while the latest version is damaged:
    roll forward first (``rollback --to-last-valid``)."""
    from lakecore.maintenance.damage import damaged_versions, pin_reason, pins_of, rollback_command
    from lakecore.maintenance.roots import LoadedRoot, load_root

    outcome = RepairOutcome("drop-damaged", apply)
    planner = _Planner(outcome, say)
    top = _highest(storage)
    outcome.highest_version = top
    loaded: dict[int, LoadedRoot] = {}
    for version in root_file_versions(storage):
        try:
            loaded[version] = load_root(storage, version, StorageError)
        except StorageError as exc:
            cause = exc.__cause__
            if isinstance(cause, NotFoundError) and not is_damage_in_version(
                storage, version, cause
            ):
                continue  # expired since the listing (its root is gone too)
            if not isinstance(cause, (CorruptFileError, TreeStructureError, NotFoundError)):
                raise  # a failed read, not damage: nothing is dropped on a guess
            outcome.damaged_versions[version] = [
                cause.one_line()
            ]  # a missing definition file included
    read_only = read_only_reason(loaded[max(loaded)].lakehouse_def) if loaded else None
    if read_only is not None:
        raise ReadOnlyLakehouseError(
            f"cannot drop versions of {storage.root_uri}: it is {read_only}"
        )
    for version, reason in damaged_versions(storage, loaded.values()).items():
        outcome.damaged_versions[version] = [reason]
    if top in outcome.damaged_versions or top not in loaded:
        outcome.status = "failed"
        outcome.exit_code = ExitCode.DAMAGED
        outcome.error = (
            f"the latest version {top} of {storage.root_uri} is damaged "
            f"({outcome.damaged_versions.get(top, ['unreadable'])[0]}); nothing was deleted. Roll forward first "
            f"with {rollback_command(storage.root_uri)}"
        )
        return outcome
    damaged = sorted(outcome.damaged_versions)
    # A damaged version an export pins stays: its pin holds while any retained definition that
    # is not dropped here names the export (the damaged ones that name it go with this run).
    # The others are dropped; the kept ones are named with what releases them.
    kept_roots = [r for v, r in loaded.items() if v not in set(damaged)]
    pins = pins_of(kept_roots, damaged)
    drop = [v for v in damaged if v not in pins]
    kept = [pin_reason(storage.root_uri, v, p, top) for v, p in sorted(pins.items())]
    if kept and not drop:
        outcome.status = "failed"
        outcome.exit_code = ExitCode.DAMAGED
        outcome.error = f"nothing was deleted: {'; '.join(kept)}"
        return outcome
    if not drop:
        outcome.status = "noop"
        outcome.summary.append(
            f"every retained version of {storage.root_uri} can be read; nothing to drop"
        )
        return outcome
    hint = read_hint(storage)
    outcome.hint_before = hint
    if hint != top:
        planner.step(
            f"write {LATEST_HINT_FILE_NAME} = {top} (it holds {'nothing readable' if hint is None else hint})"
        )
    for version in drop:
        planner.step(
            f"delete {root_node_file_name(version)}, the root of damaged version {version} "
            f"({outcome.damaged_versions[version][0]})"
        )
    for reason in kept:
        planner.step(f"keep: {reason}")
    if planner.stop_if_planning():
        return outcome
    if hint != top:
        _write_hint(storage, top)  # never leave the hint naming a dropped version
        outcome.hint_after = top
    removed: list[int] = []
    for version in drop:  # oldest first: a crash leaves the newer ones, never a hole above them
        if storage.delete([root_node_file_name(version)]):
            removed.append(version)
    outcome.dropped_versions = removed
    gone = [v for v in drop if v not in set(removed)]
    outcome.summary.append(
        f"dropped {len(removed)} damaged version(s) {', '.join(map(str, removed)) or '-'} (their root files only; "
        f"gc removes the files no retained version reaches once they are older than its grace period)"
        + (f"; {', '.join(map(str, gone))} were already gone" if gone else "")
    )
    outcome.summary.extend(kept)
    return outcome


def _write_hint(storage: Storage, version: int) -> None:
    try:
        write_hint_or_raise(storage, version)
    except StorageError as exc:
        raise type(exc)(
            f"could not point {storage.uri(LATEST_HINT_FILE_NAME)} at version {version}: "
            f"{exc}; fix that and run the repair again"
        ) from exc


def _newest_clean(
    storage: Storage, readable: list[int], outcome: RepairOutcome, say: Say
) -> LakehouseView | None:
    """The newest readable version the (not deep) tree checker finds clean, newest first."""
    # A cache of this run's own: nodes read earlier by this process (the shared cache) may have
    # been deleted since; versions share most nodes, so each is still read only once.
    cache = NodeCache()
    for version in readable:
        try:
            view = open_version(storage.root_uri, version, storage_options=storage.storage_options)
        except NotFoundError as exc:
            if is_damage_in_version(
                storage, version, exc
            ):  # its root is there: a file of it is missing
                outcome.damaged_versions[version] = [exc.one_line()]
            continue  # else expired since the listing
        except (CorruptFileError, TreeStructureError) as exc:
            outcome.damaged_versions[version] = [exc.one_line()]
            continue
        outcome.versions_checked += 1
        store = NodeStore(
            view.storage,
            view.lakehouse_def.order,
            cache=cache,
            external_roots=view.store.external_roots,
        )
        try:
            result = check_version(
                LakehouseView(view.storage, view.root_info, view.lakehouse_def, store), deep=False
            )
            problems = [str(v) for v in result.violations[:VIOLATIONS_SHOWN]]
        except (CorruptFileError, TreeStructureError, NotFoundError) as exc:
            problems = [exc.one_line()]
        if not problems:
            return view
        outcome.damaged_versions[version] = problems
        say(f"version {version} is damaged: {problems[0]}")
    return None


def _commit_content(storage: Storage, top: int, target: LakehouseView, definition_path: str) -> int:
    """Commit root ``top + 1`` holding ``target``'s tree; returns the new version."""
    order = target.lakehouse_def.order
    base = _base_root(storage, top, target, definition_path)
    content = target.root

    def plan(current: RootInfo) -> RootPlan:
        node = Node(content.keys, content.values, content.children, content.buffer)
        return RootPlan(
            node, definition_path, rollback_from_root=root_node_file_name(current.version)
        )

    def still_valid(latest: RootInfo) -> str | None:
        return f"version {latest.version} was committed while repairing; run the repair again"

    return commit(storage, order, base, plan, still_valid, CommitPolicy(max_retries=0)).version


def _base_root(storage: Storage, top: int, target: LakehouseView, definition_path: str) -> RootInfo:
    """Root ``top`` as a commit base: decoded when it can be, else a stand-in that carries only
    its number (all the commit needs of a base besides its creation time)."""
    path = root_node_file_name(top)
    try:
        return decode_root(storage.read(path), top, storage.uri(path))
    except (CorruptFileError, NotFoundError):
        return RootInfo(top, Node(), 0, definition_path, None, None, target.created_at_millis)


__all__ = ["RepairOutcome", "drop_damaged", "rebuild_hint", "rollback"]
