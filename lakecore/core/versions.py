"""Versions: root files, latest-version discovery, the hint, time travel and retention.

A version ``v`` is the root node file ``_<32 bits of v reversed>.arrow`` at the top of the
root (not optimized). Root ``v+1`` carries ``previous_root`` = root ``v``, and every root
carries ``lakehouse_def`` (the definition in force) and ``created_at_millis``. Roots are created
with an exclusive create, so the chain has no gaps: ``v+1`` exists only if ``v`` did.

Latest version (docs/format.md#latest-version): read ``_latest_hint.txt`` and probe upward from
it until a root is missing. Without a hint that names an existing root (missing, unreadable, or
naming an expired version), list the top-level root files and probe upward from the largest:
never from 0, since the log may have gaps. A store that does not answer is no missing hint.

Retention (docs/format.md#retention): a version is expired when it is not the latest, not among the
newest ``minimum_versions_to_keep``, older than its maximum age (the per-version override, else
the lakehouse's), and not the root of an exported snapshot.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from lakecore.core import keys as K
from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import (
    LATEST_HINT_FILE_NAME,
    MAX_VERSION,
    is_root_node_file_name,
    root_node_file_name,
    version_from_root_node_file_name,
)
from lakecore.core.node import Node, decode_node, encode_node
from lakecore.core.storage import Storage
from lakecore.core.units import format_time_millis
from lakecore.errors import (
    CorruptNodeFileError,
    InvalidArgumentError,
    InvalidLocationError,
    LakecoreError,
    NoLakehouseError,
    NotFoundError,
    StorageError,
    StorageTimeoutError,
    VersionExpiredError,
    is_damage,
)

# Longest run of versions probed one by one before switching to galloping; beyond it the hint
# is far behind and a doubling search finds the end in O(log gap) probes.
_LINEAR_PROBES = 8
HINT_MAX_BYTES = 32


@dataclass(frozen=True)
class RootInfo:
    """A decoded root and what its system rows say."""

    version: int
    node: Node
    size: int
    lakehouse_def_path: str
    previous_root: str | None
    rollback_from_root: str | None
    created_at_millis: int

    @property
    def path(self) -> str:
        return root_node_file_name(self.version)


def encode_root(
    node: Node,
    order: int,
    *,
    lakehouse_def_path: str,
    previous_root: str | None,
    created_at_millis: int,
    rollback_from_root: str | None = None,
) -> bytes:
    system = {
        K.LAKEHOUSE_DEF_KEY: lakehouse_def_path,
        K.CREATED_AT_MILLIS_KEY: str(created_at_millis),
    }
    if previous_root is not None:
        system[K.PREVIOUS_ROOT_KEY] = previous_root
    if rollback_from_root is not None:
        system[K.ROLLBACK_FROM_ROOT_KEY] = rollback_from_root
    return encode_node(Node(node.keys, node.values, node.children, node.buffer, system), order)


def decode_root(data: bytes, version: int, location: str, order: int | None = None) -> RootInfo:
    """Decode a root file and check its system rows against the version its name gives."""
    node = decode_node(data, location, order)
    system = node.system
    def_path = system.get(K.LAKEHOUSE_DEF_KEY)
    if def_path is None:
        raise CorruptNodeFileError(location, "root node has no lakehouse_def system row")
    created = system.get(K.CREATED_AT_MILLIS_KEY)
    if created is None:
        raise CorruptNodeFileError(location, "root node has no created_at_millis system row")
    previous = system.get(K.PREVIOUS_ROOT_KEY)
    if version == 0 and previous is not None:
        raise CorruptNodeFileError(location, "root of version 0 names a previous root")
    if version > 0:
        expected = root_node_file_name(version - 1)
        if previous != expected:
            raise CorruptNodeFileError(
                location,
                f"root of version {version} names previous_root {previous!r}, expected {expected!r}: "
                "the file does not belong at this name",
            )
    rollback = system.get(K.ROLLBACK_FROM_ROOT_KEY)
    if rollback is not None and not is_root_node_file_name(rollback):
        raise CorruptNodeFileError(
            location, f"rollback_from_root {rollback!r} is not a root file name"
        )
    return RootInfo(version, node, len(data), def_path, previous, rollback, int(created))


def read_root(storage: Storage, version: int, order: int | None = None) -> RootInfo:
    path = root_node_file_name(version)
    try:
        data = storage.read(path)
    except NotFoundError:
        raise NotFoundError(f"version {version} ({storage.uri(path)}) does not exist") from None
    return decode_root(data, version, storage.uri(path), order)


def read_hint(storage: Storage) -> int | None:
    """The hinted latest version, or None when the hint is missing or unreadable.

    A store that does not answer is not a missing hint: ``StorageTimeoutError`` goes to the
    caller, whose next request (the probe past the hint) would only wait out the same timeout
    again (a hung endpoint made gc fail after twice its timeout)."""
    try:
        data = storage.read(LATEST_HINT_FILE_NAME)
    except StorageTimeoutError:
        raise
    except (NotFoundError, StorageError):
        return None
    text = data[:HINT_MAX_BYTES].decode("ascii", errors="replace").strip()
    if not text.isdigit():
        return None
    value = int(text)
    return value if value <= MAX_VERSION else None


def write_hint(storage: Storage, version: int) -> bool:
    """Best effort: a failed hint write never fails a commit (readers probe past it)."""
    try:
        write_hint_or_raise(storage, version)
    except (StorageError, OSError):
        return False
    return True


def write_hint_or_raise(storage: Storage, version: int) -> None:
    """Write the hint; ``StorageError`` with its cause (``No space left on device``) when it
    cannot be, for the callers whose next step depends on it (version compaction, repair)."""
    storage.write(LATEST_HINT_FILE_NAME, str(version).encode("ascii"))


def list_root_versions(storage: Storage) -> list[int]:
    """Every version whose root file is at the top of the root, ascending."""
    versions = []
    for info in storage.list_top_level():
        if is_root_node_file_name(info.path):
            versions.append(version_from_root_node_file_name(info.path))
    return sorted(versions)


def probe_up(storage: Storage, start: int) -> int:
    """The last existing version at or after ``start`` (which exists)."""
    latest = start
    for _ in range(_LINEAR_PROBES):
        if latest >= MAX_VERSION or not storage.exists(root_node_file_name(latest + 1)):
            return latest
        latest += 1
    # Far behind: gallop, then binary search the gap (roots above an existing one are contiguous).
    step = 1
    low = latest
    while low + step <= MAX_VERSION and storage.exists(root_node_file_name(low + step)):
        low += step
        step *= 2
    high = min(low + step, MAX_VERSION + 1)  # high does not exist (or is past the end)
    while high - low > 1:
        mid = (low + high) // 2
        if storage.exists(root_node_file_name(mid)):
            low = mid
        else:
            high = mid
    return low


def refuse_a_file_as_root(storage: Storage) -> None:
    """InvalidArgumentError (exit 2) when a local root is a file: a mistyped path, where "no
    lakehouse here" (exit 5) would send the operator to ``lakecore init``."""
    blocking = storage.file_in_the_way()
    if blocking is not None:
        what = "a file" if os.path.isfile(blocking) else "a device, a pipe or a socket"
        raise InvalidArgumentError(
            f"file://{blocking} is {what}, not a folder: a lakehouse root is a folder; check the path"
            + (
                ""
                if blocking == storage.root_uri.removeprefix("file://").rstrip("/")
                else f" ({storage.root_uri.rstrip('/')} would be inside it)"
            )
        )


def no_lakehouse(storage: Storage) -> LakecoreError:
    """The error for a root that holds no root node file (``refuse_a_file_as_root`` first)."""
    refuse_a_file_as_root(storage)
    if storage.local_root_is_missing():
        return NoLakehouseError(
            f"no lakehouse at {storage.root_uri}: the folder does not exist; check the path "
            "(or create a lakehouse there with `lakecore init`)"
        )
    return NoLakehouseError(
        f"no lakehouse at {storage.root_uri}: no root node file found (create one with `lakecore init`)"
    )


def latest_version(storage: Storage) -> int:
    """The latest-version discovery of docs/format.md#latest-version; NotFoundError if no root
    exists.

    Without a readable hint it lists the root files and probes up from the largest, rather than
    from version 0: the log may have gaps (``repair drop-damaged``, versions expired below an
    export's pin or between age overrides), and a probe from below a gap would stop there and
    let a commit take a number under newer roots, where no reader would find it."""
    hint = read_hint(storage)
    if hint is not None and storage.exists(root_node_file_name(hint)):
        return probe_up(storage, hint)
    versions = list_root_versions(storage)
    if not versions:
        raise no_lakehouse(storage)
    return probe_up(storage, versions[-1])


def highest_version(storage: Storage) -> int | None:
    """The highest version whose root file exists, readable or not, or None if there is none.

    Unlike ``latest_version`` it trusts neither the hint nor a contiguous chain: it lists the
    roots and probes upward from the largest. Repair commits above it, so that no version
    number is ever used twice, even when the hint is stale below a missing root in the middle."""
    listed = list_root_versions(storage)
    candidates = [probe_up(storage, listed[-1])] if listed else []
    with contextlib.suppress(NotFoundError):
        candidates.append(latest_version(storage))
    return max(candidates) if candidates else None


def read_version(storage: Storage, version: int, order: int | None = None) -> RootInfo:
    """A root by version, with a clear error when it is not there: not committed yet, expired
    (below the oldest root), or missing from the middle of the log (``missing_version_reason``)."""
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION:
        raise InvalidLocationError(f"version {version!r} is outside 0..{MAX_VERSION}")
    try:
        return read_root(storage, version, order)
    except NotFoundError:
        latest = latest_version(storage)
        if version > latest:
            raise NotFoundError(
                f"version {version} does not exist yet; the latest is {latest}"
            ) from None
        listed = list_root_versions(storage)
        if version in listed:  # committed between the read and the listing: read it again
            return read_root(storage, version, order)
        if listed and listed[0] < version < listed[-1]:
            raise VersionExpiredError(missing_version_reason(version, listed)) from None
        raise VersionExpiredError(
            f"version {version} has been expired by version compaction; the oldest retained "
            f"version is {listed[0] if listed else latest} (time travel works from there to {latest})"
        ) from None


def missing_version_reason(version: int, listed: list[int]) -> str:
    """Why a version between two root files has none.

    ``repair drop-damaged`` deletes damaged roots wherever they are; compaction expires by age,
    and keeps older versions that an export pins or that a longer age override keeps (or
    expires one a shorter override lets go). The files alone cannot tell which happened."""
    before = max(v for v in listed if v < version)
    after = min(v for v in listed if v > version)
    return (
        f"version {version} is missing from the log (no root file between versions {before} and {after}): "
        "it was dropped as damaged by `repair drop-damaged`, or expired by version compaction while an "
        "older version was kept (an export's pin, an age override); `lakecore versions` lists the "
        "versions there are"
    )


def version_as_of(
    storage: Storage, timestamp_millis: int, latest: RootInfo, order: int | None = None
) -> RootInfo:
    """The newest root with ``created_at_millis <= timestamp_millis``.

    Walks back one version at a time from ``latest`` (versions are created in order, so their
    times ascend). A version it cannot read, missing (dropped by a repair, or expired while an
    older version was kept) or damaged, is a hole it steps over to the next readable root below. When
    that root is old enough, a version of the hole may have been the newest one at the time:
    the answer cannot be told, and the error names the readable version and the hole."""
    listed: list[int] | None = None
    current = latest
    oldest = latest
    hole: list[int] = []  # versions just stepped over, newest first
    while True:
        if current.created_at_millis <= timestamp_millis:
            if hole:
                raise VersionExpiredError(
                    f"the version as of {format_time_millis(timestamp_millis)} cannot be told: version "
                    f"{current.version} (created {format_time_millis(current.created_at_millis)}) is the newest "
                    f"readable one before that time, but {_versions_text(hole)}, after it, "
                    f"{'is' if len(hole) == 1 else 'are'} missing or damaged and may have been created before "
                    f"that time too; `--version {current.version}` reads version {current.version}"
                )
            return current
        oldest = current
        hole = []
        if current.previous_root is None:
            break
        below = current.version - 1
        following = _readable_root(storage, below, order)
        if following is None:  # a hole: the next readable root under it, if any
            if listed is None:
                listed = list_root_versions(storage)
            for candidate in (v for v in reversed(listed) if v < below):
                following = _readable_root(storage, candidate, order)
                if following is not None:
                    break
            if following is None:
                damaged_below = [v for v in listed if v < current.version]
                if damaged_below:  # roots that are there but cannot be read: one may be the answer
                    raise VersionExpiredError(
                        f"no readable version was created at or before {format_time_millis(timestamp_millis)}: "
                        f"the oldest readable one is {current.version} (created "
                        f"{format_time_millis(current.created_at_millis)}), and the root files of "
                        f"{_versions_text(damaged_below)} under it cannot be read"
                    )
                break
            hole = list(range(current.version - 1, following.version, -1))
        current = following
    if oldest.version > 0:
        raise VersionExpiredError(
            f"no retained version was created at or before {format_time_millis(timestamp_millis)}; the oldest "
            f"retained version {oldest.version} was created at {format_time_millis(oldest.created_at_millis)}"
        )
    raise NotFoundError(
        f"the lakehouse did not exist yet at {format_time_millis(timestamp_millis)} "
        f"(it was created at {format_time_millis(oldest.created_at_millis)})"
    )


def _readable_root(storage: Storage, version: int, order: int | None) -> RootInfo | None:
    """Root ``version``, or None when it is missing or damaged (a failed read still raises)."""
    try:
        return read_root(storage, version, order)
    except NotFoundError:
        return None
    except LakecoreError as exc:
        if is_damage(exc):
            return None
        raise


def is_damage_in_version(storage: Storage, version: int, exc: BaseException) -> bool:
    """Whether ``exc``, met reading version ``version``'s tree, is damage: a file that cannot be
    decoded, or a node file that is missing while the version's root file is still there.
    Version compaction deletes an expired version's root before its files, so a node missing
    under a root that is there is no race with it (a deletion outside lakecore, most likely)."""
    if isinstance(exc, NotFoundError):
        return storage.exists(root_node_file_name(version))
    return is_damage(exc)


def _versions_text(versions: list[int]) -> str:
    low, high = min(versions), max(versions)
    if low == high:
        return f"version {low}"
    return f"versions {low}..{high}"


# ---------------------------------------------------------------------------------------------
# Retention arithmetic (docs/format.md#retention)


def maximum_age_millis(lakehouse_def: LakehouseDef, version: int) -> int:
    return int(
        lakehouse_def.maximum_version_age_millis_overrides.get(
            version, lakehouse_def.maximum_version_age_millis
        )
    )


def export_pins(lakehouse_def: LakehouseDef) -> dict[str, int]:
    """Export name -> the version it pins: the exports whose recorded location is a root file
    of this lakehouse (a root file name, not a full URI into another one)."""
    pins = {}
    for name, location in lakehouse_def.exported_snapshots.items():
        file_name = location.rsplit("/", 1)[-1]
        if is_root_node_file_name(file_name) and "://" not in location:
            pins[name] = version_from_root_node_file_name(file_name)
    return pins


def exported_root_versions(lakehouse_def: LakehouseDef) -> set[int]:
    """Versions pinned by exports (only roots of this lakehouse, named by file name)."""
    return set(export_pins(lakehouse_def).values())


def expired_versions(
    created_at: Mapping[int, int], latest: int, lakehouse_def: LakehouseDef, now_millis: int
) -> list[int]:
    """The versions in ``created_at`` (version -> created_at_millis) that are expired, oldest first."""
    keep_newest = set(sorted(created_at, reverse=True)[: lakehouse_def.minimum_versions_to_keep])
    pinned = exported_root_versions(lakehouse_def)
    out = []
    for version in sorted(created_at):
        if version == latest or version in keep_newest or version in pinned:
            continue
        if now_millis - created_at[version] > maximum_age_millis(lakehouse_def, version):
            out.append(version)
    return out
