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

from lakecore.defs import LakehouseDef
from lakecore.errors import ExitCode, LakecoreError
from lakecore.maintenance.reachable import reachable_from_root
from lakecore.storage import Storage
from lakecore.tree.store import NodeCache, NodeStore
from lakecore.versions import RootInfo


class LoadedRoot(Protocol):
    """What the walk needs of a retained root (``roots.LoadedRoot``, which imports this module)."""

    @property
    def info(self) -> RootInfo: ...
    @property
    def lakehouse_def(self) -> LakehouseDef: ...
    @property
    def external_roots(self) -> tuple[str, ...]: ...
    @property
    def version(self) -> int: ...

# Starts the reason of an error record for a subtree whose files are damaged.
DAMAGED_MARK: Final = "[damaged] "

E = TypeVar("E", bound=LakecoreError)


def is_damage(exc: BaseException | None) -> bool:
    """True when ``exc``, or an error it was raised from, is damage (exit code DAMAGED)."""
    seen = 0
    while exc is not None and seen < 16:  # a cause chain is short; bound it all the same
        if isinstance(exc, LakecoreError) and exc.exit_code == ExitCode.DAMAGED:
            return True
        exc = exc.__cause__
        seen += 1
    return False


def is_damage_reason(reason: str) -> bool:
    """True for an error record's reason that ``mark_damage`` marked."""
    return reason.startswith(DAMAGED_MARK)


def mark_damage(reason: str, exc: BaseException) -> str:
    return DAMAGED_MARK + reason if is_damage(exc) else reason


def with_next_step(exc: LakecoreError, root_uri: str | None) -> str:
    """``exc``'s one line; for damage that does not yet say what to do (a node file met while
    reading: the latest root and definition were whole), the next step too. Without it an
    operator got ``CorruptNodeFileError: ...: truncated or foreign file`` and nothing else."""
    line = exc.one_line()
    if exc.exit_code != ExitCode.DAMAGED or "repair" in line:
        return line
    where = f"-l {root_uri} " if root_uri else ""
    return (f"{line}. A file of the lakehouse is damaged: `lakecore {where}fsck --all` names the damaged versions, "
            f"and `lakecore {where}repair rollback --to-last-valid` rolls forward to the newest clean one "
            "(a plan first; add --yes)")


def drop_damaged_command(root_uri: str) -> str:
    return f"`lakecore -l {root_uri} repair drop-damaged` (a dry run; add --yes to act)"


def rollback_command(root_uri: str) -> str:
    # The words of DamagedLakehouseError, which flush and export print for the same state.
    return (f"`lakecore -l {root_uri} repair rollback --to-last-valid` (or `./spark-submit.sh repair "
            f"--lakehouse {root_uri} rollback --to-last-valid`); add --yes to carry out the plan it prints")


def next_step(root_uri: str, damaged: Iterable[int], latest: int, *, roots_damaged: bool = False) -> str:
    """What an operator does about ``damaged`` retained versions, given the latest version.

    ``roots_damaged``: their root files themselves cannot be read, so no age is known and
    retention can never expire them until a repair rolls past them."""
    versions = sorted(set(damaged))
    if latest in versions or not versions:
        return (f"the latest version {latest} is damaged: roll forward to the newest readable version with "
                f"{rollback_command(root_uri)}")
    if roots_damaged:
        return (f"the latest version {latest} is readable: drop the damaged root(s) with "
                f"{drop_damaged_command(root_uri)}")
    return (f"the latest version {latest} is readable: wait until compact-versions expires version(s) "
            f"{_names(versions)} (their root files go; gc removes what only they reached), or drop them now "
            f"with {drop_damaged_command(root_uri)}")


def damaged_versions(storage: Storage, roots: Iterable[LoadedRoot]) -> dict[int, str]:
    """Walk every node of each root's tree (values are not read); returns version -> the first
    damage met. A failure that is not damage (storage) is raised: the caller cannot tell then.

    One node cache for all of them: consecutive versions share almost every node, so each
    readable node is read once. Used on the failure path and by ``repair drop-damaged``."""
    cache = NodeCache()
    out: dict[int, str] = {}
    for root in sorted(roots, key=lambda r: r.version):
        store = NodeStore(storage, root.lakehouse_def.order, cache=cache, external_roots=root.external_roots)
        try:
            reachable_from_root(store, root.info.node, include_values=False)
        except LakecoreError as exc:
            if not is_damage(exc):
                raise
            out[root.version] = exc.one_line()
    return out


def explain_damage(storage: Storage, roots: Mapping[int, LoadedRoot], damaged: type[E], job: str) -> E | None:
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
    return damaged(
        f"retained version(s) {_names(found)} of {storage.root_uri} cannot be read ({first}), so {job} cannot "
        f"know what they reach; {next_step(storage.root_uri, found, latest)}"
    )


def _names(versions: Iterable[int]) -> str:
    ordered = sorted(set(versions))
    shown = ", ".join(str(v) for v in ordered[:20])
    return shown + (f" and {len(ordered) - 20} more" if len(ordered) > 20 else "")


__all__ = [
    "DAMAGED_MARK",
    "damaged_versions",
    "drop_damaged_command",
    "explain_damage",
    "is_damage",
    "is_damage_reason",
    "mark_damage",
    "next_step",
    "rollback_command",
]
