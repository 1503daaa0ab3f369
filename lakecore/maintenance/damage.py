"""Damaged versions: telling damage from a failed read, naming the damaged versions, and the
operator's next step.

Rules:

- **Damage is a property of the bytes.** A read that failed because a file's bytes break the
  format (``CorruptFileError``) or the tree's shape is impossible (``TreeStructureError``) is
  damage: a rerun gives the same answer, so it is exit 6 (DAMAGED) and the message says which
  repair to run. Anything else (a storage error, a timeout) stays the caller's retryable
  refusal (exit 4): the same file may read fine on the next run.
- **A deleting job still stops.** gc and version compaction cannot know what a damaged
  retained version reaches, so they delete nothing while one is retained; only the exit code
  and the advice change here.
- **The advice follows the state.** A damaged latest version needs a roll forward
  (``repair rollback --to-last-valid``). Damaged versions below a whole latest version wait
  for version compaction to expire them (their root file only: the rest is gc's), or an
  operator drops them now (``repair drop-damaged``, a dry run unless ``--yes``).
- Executors report a subtree they could not walk as an error record (``listing.ERROR_KEY``);
  ``DAMAGED_MARK`` at the start of its reason says the failure was damage, so that the driver
  can tell the two apart without the exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol, TypeVar

from lakecore.core.defs import LakehouseDef
from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeCache, NodeStore
from lakecore.core.versions import RootInfo, is_damage_in_version
from lakecore.errors import (
    CorruptFileError,
    LakecoreError,
    NotFoundError,
    TreeStructureError,
    in_cause_chain,
    is_damage,
)
from lakecore.maintenance.tree_files import reachable_from_root


class LoadedRoot(Protocol):
    """What the walk needs of a retained root (``roots.LoadedRoot``, which imports this module)."""

    @property
    def info(self) -> RootInfo: ...
    @property
    def lakehouse_def(self) -> LakehouseDef: ...
    @property
    def external_roots(self) -> tuple[str, ...]: ...
    @property
    def exports(self) -> Mapping[str, int]: ...
    @property
    def version(self) -> int: ...


# Starts the reason of an error record for a subtree whose files are damaged.
DAMAGED_MARK: Final = "[damaged] "

E = TypeVar("E", bound=LakecoreError)


def is_damage_reason(reason: str) -> bool:
    """True for an error record's reason that ``mark_damage`` marked."""
    return reason.startswith(DAMAGED_MARK)


def may_be_damage(exc: BaseException | None) -> bool:
    """True for damage, and for a file that is missing (``NotFoundError``): a missing node is
    damage unless its version expired meanwhile, which ``damaged_versions`` tells apart (the
    root file is gone then). A refusal for it is explained by that walk: exit 6 when it finds
    damage, else the retryable refusal."""
    return in_cause_chain(exc, lambda e: isinstance(e, NotFoundError)) or is_damage(exc)


def mark_damage(reason: str, exc: BaseException) -> str:
    return DAMAGED_MARK + reason if may_be_damage(exc) else reason


def with_next_step(exc: LakecoreError, root_uri: str | None) -> str:
    """``exc``'s one line; for damage that does not yet say what to do (a node file met while
    reading: the latest root and definition were whole), the next step too. Without it an
    operator got ``CorruptNodeFileError: ...: truncated or foreign file`` and nothing else."""
    line = exc.one_line()
    # Only the readers' own errors: the maintenance jobs' refusals compose their own advice.
    if not isinstance(exc, (CorruptFileError, TreeStructureError)) or "repair" in line:
        return line
    return f"{line}. {damage_next_step(root_uri)}"


def damage_next_step(root_uri: str | None) -> str:
    """What an operator does about a damaged node file: find the damaged versions, roll forward."""
    where = f"-l {root_uri} " if root_uri else ""
    return (
        f"A file of the lakehouse is damaged: `lakecore {where}fsck --all` names the damaged versions, "
        f"and `lakecore {where}repair rollback --to-last-valid` rolls forward to the newest clean one "
        "(a plan first; add --yes)"
    )


def drop_damaged_command(root_uri: str) -> str:
    return f"`lakecore -l {root_uri} repair drop-damaged` (a dry run; add --yes to act)"


def rollback_command(root_uri: str) -> str:
    # The words of DamagedLakehouseError, which flush and export print for the same state.
    return (
        f"`lakecore -l {root_uri} repair rollback --to-last-valid` (or `./spark-submit.sh repair "
        f"--lakehouse {root_uri} rollback --to-last-valid`); add --yes to carry out the plan it prints"
    )


# Per damaged version an export pins: the export's name -> the retained versions whose
# definition names it (an export pins its version while any retained definition names it).
Pins = Mapping[int, Mapping[str, list[int]]]


def pins_of(
    roots: Iterable[LoadedRoot], versions: Iterable[int]
) -> dict[int, dict[str, list[int]]]:
    """Which exports pin each of ``versions``, and which of ``roots`` name them."""
    wanted = set(versions)
    out: dict[int, dict[str, list[int]]] = {}
    for root in sorted(roots, key=lambda r: r.version):
        for name, pinned in root.exports.items():
            if pinned in wanted:
                out.setdefault(pinned, {}).setdefault(name, []).append(root.version)
    return out


def pin_reason(root_uri: str, version: int, pins: Mapping[str, list[int]], latest: int) -> str:
    """Why a pinned damaged version stays, and what releases it."""
    parts = []
    for name, naming in sorted(pins.items()):
        if latest in naming:
            parts.append(
                f"export {name!r} pins it: drop the export first (`lakecore -l {root_uri} export drop "
                f"{name}`); retained version(s) {_names(naming)} name it, and the pin lasts until they expire"
            )
        else:
            parts.append(
                f"export {name!r} was dropped, but retained version(s) {_names(naming)} still name it: "
                "the pin lasts until compact-versions expires them"
            )
    return f"version {version} stays while an export pins it ({'; '.join(parts)})"


def next_step(
    root_uri: str,
    damaged: Iterable[int],
    latest: int,
    *,
    roots_damaged: bool = False,
    pinned: Pins | None = None,
) -> str:
    """What an operator does about ``damaged`` retained versions, given the latest version.

    ``roots_damaged``: their root files themselves cannot be read, so no age is known and
    retention can never expire them until a repair rolls past them. ``pinned`` (``pins_of``):
    damaged versions an export pins, which neither waiting nor ``drop-damaged`` removes until
    the pin is gone."""
    versions = sorted(set(damaged))
    if latest in versions or not versions:
        return (
            f"the latest version {latest} is damaged: roll forward to the newest readable version with "
            f"{rollback_command(root_uri)}"
        )
    held = {v: p for v, p in (pinned or {}).items() if v in versions}
    free = [v for v in versions if v not in held]
    steps = [pin_reason(root_uri, v, p, latest) for v, p in sorted(held.items())]
    if free and roots_damaged:
        steps.append(
            f"drop the damaged root(s) {_names(free)} with {drop_damaged_command(root_uri)}"
        )
    elif free:
        steps.append(
            f"wait until compact-versions expires version(s) {_names(free)} (their root files go; gc "
            f"removes what only they reached), or drop them now with {drop_damaged_command(root_uri)}"
        )
    return f"the latest version {latest} is readable: " + "; ".join(steps)


def damaged_versions(storage: Storage, roots: Iterable[LoadedRoot]) -> dict[int, str]:
    """Walk every node of each root's tree (values are not read); returns version -> the first
    damage met. A failure that is not damage (storage) is raised: the caller cannot tell then.

    A node file that is missing is damage while the version's root file is still there
    (``versions.is_damage_in_version``).

    One node cache for all of them: consecutive versions share almost every node, so each
    readable node is read once. Used on the failure path and by ``repair drop-damaged``."""
    cache = NodeCache()
    out: dict[int, str] = {}
    for root in sorted(roots, key=lambda r: r.version):
        store = NodeStore(
            storage, root.lakehouse_def.order, cache=cache, external_roots=root.external_roots
        )
        try:
            reachable_from_root(store, root.info.node, include_values=False)
        except LakecoreError as exc:
            if is_damage_in_version(storage, root.version, exc):
                out[root.version] = exc.one_line()
            elif not isinstance(exc, NotFoundError):  # missing with its root: expired meanwhile
                raise
    return out


def explain_damage(
    storage: Storage, roots: Mapping[int, LoadedRoot], damaged: type[E], job: str
) -> E | None:
    """The exit-6 refusal for a run that met damage in a retained version: names every damaged
    retained version and the next step. None when the walk finds no damage or fails for a
    storage reason (the caller then raises its retryable refusal)."""
    try:
        found = damaged_versions(storage, roots.values())
    except LakecoreError:
        return None
    if not found:
        return None
    latest = max(roots)
    first = found[min(found)]
    pinned = pins_of(roots.values(), found)
    return damaged(
        f"retained version(s) {_names(found)} of {storage.root_uri} cannot be read ({first}), so {job} cannot "
        f"know what they reach; {next_step(storage.root_uri, found, latest, pinned=pinned)}"
    )


def refusal_or_damage(
    storage: Storage,
    roots: Mapping[int, LoadedRoot],
    refusal: E,
    damaged_error: type[E],
    job: str,
    *,
    damaged: bool,
) -> E:
    """A deleting job's refusal over a retained version (of ``roots``) it could not walk: when
    the failure said it may be damage (``damaged``) and a walk of the retained versions confirms
    it, ``explain_damage``'s exit-6 refusal; else ``refusal`` as it is (exit 4: a failed read
    may succeed on the next run)."""
    if not damaged:
        return refusal
    explained = explain_damage(storage, roots, damaged_error, job)
    return refusal if explained is None else explained


def _names(versions: Iterable[int]) -> str:
    ordered = sorted(set(versions))
    shown = ", ".join(str(v) for v in ordered[:20])
    return shown + (f" and {len(ordered) - 20} more" if len(ordered) > 20 else "")


__all__ = [
    "DAMAGED_MARK",
    "damage_next_step",
    "damaged_versions",
    "drop_damaged_command",
    "explain_damage",
    "is_damage_reason",
    "mark_damage",
    "may_be_damage",
    "next_step",
    "pin_reason",
    "pins_of",
    "refusal_or_damage",
    "rollback_command",
]
