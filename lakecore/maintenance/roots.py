"""The retained versions: every root at the top of the root, read strictly, and what they pin.

A maintenance job that deletes must first know every retained version, so reading them fails
closed: a root or a definition that cannot be read stops the job before it deletes anything,
with the caller's error type (gc's ``GcRefusedError``, expiry's ``ExpiryRefusedError``).

One exception, ``load_roots``: a root whose *bytes* are damaged and that a later repair has
rolled forward past is *abandoned*. It can never be read again and reaches nothing; version
compaction deletes it, and until then gc and compaction skip it rather than stop for good.

Exports pin versions: every definition of a retained version may name exported roots, which
must exist (``read_retained``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from lakecore.core.defs import LakehouseDef
from lakecore.core.export_records import external_roots_of
from lakecore.core.locations import root_node_file_name, version_from_root_node_file_name
from lakecore.core.storage import Storage, request_pool
from lakecore.core.versions import (
    RootInfo,
    decode_root,
    export_pins,
    is_damage_in_version,
    no_lakehouse,
)
from lakecore.errors import (
    CorruptFileError,
    LakecoreError,
    NotFoundError,
)
from lakecore.maintenance.damage import next_step
from lakecore.maintenance.listing import GcDamagedError, GcRefusedError, ListedFile, root_version_of

# Roots read at once on storage that waits on the network: a lakehouse keeps hundreds of
# versions, and read one by one at S3's 20-50 ms a GET, 1,000 roots took 20 to 50 s.
ROOT_READ_THREADS: Final = 16

# ---------------------------------------------------------------------------------------------
# Retained versions


@dataclass(frozen=True)
class LoadedRoot:
    """A root read strictly, with what the maintenance jobs derive from its definition, once:
    the roots its nodes may point into and the versions its exports pin."""

    info: RootInfo
    lakehouse_def: LakehouseDef
    external_roots: tuple[str, ...]
    exports: Mapping[str, int]  # export name -> the version of this lakehouse it pins

    @property
    def version(self) -> int:
        return self.info.version


@dataclass
class Retained:
    """The versions gc (or expiry) must keep whole: every listed root, and the exports."""

    roots: dict[int, LoadedRoot]
    exports: dict[str, int] = field(default_factory=dict)  # export name -> pinned version

    @property
    def versions(self) -> list[int]:
        return sorted(self.roots)

    @property
    def latest(self) -> int:
        return max(self.roots)


def load_root(
    storage: Storage, version: int, refused: type[LakecoreError] = GcRefusedError
) -> LoadedRoot:
    """Read root ``version`` and its definition strictly; any failure is ``refused``, naming
    the file and the reason."""
    from lakecore.core.view import read_lakehouse_def

    path = root_node_file_name(version)
    uri = storage.uri(path)
    try:
        data = storage.read(path)
        loose = decode_root(data, version, uri)
        lakehouse_def = read_lakehouse_def(storage, loose.lakehouse_def_path)
        # What the definition says for the jobs (read once here), then the root by its order.
        external_roots, exports = external_roots_of(lakehouse_def), export_pins(lakehouse_def)
        info = decode_root(data, version, uri, lakehouse_def.order)
    except LakecoreError as exc:
        raise refused(
            f"retained version {version} ({uri}) cannot be read: {exc.one_line()}"
        ) from exc
    return LoadedRoot(info, lakehouse_def, external_roots, exports)


def load_roots(
    storage: Storage,
    versions: Iterable[int],
    refused: type[LakecoreError] = GcRefusedError,
    damaged: type[LakecoreError] = GcDamagedError,
) -> tuple[dict[int, LoadedRoot], list[int]]:
    """Load these roots strictly, tolerating only *abandoned* ones: returns (loaded, abandoned).

    A root is abandoned when its bytes are damaged (not when storage failed to read it) and a
    newer readable root was committed by a repair that rolled forward from it or from a later
    version (``rollback_from_root`` at or above it). Such a root can never be read again, holds
    no reachable content, and only waits for version compaction to delete it. Any other
    unreadable root is ``refused``: what it reaches cannot be known, so nothing may be deleted.
    Damaged roots that no repair rolled past are ``damaged`` (exit 6), naming every one of them
    and the next step; a read that failed for another reason (storage) stays ``refused``."""
    ordered = sorted(set(versions))

    def attempt(version: int) -> LoadedRoot | LakecoreError:
        try:
            return load_root(storage, version, refused)
        except LakecoreError as exc:
            return exc

    if storage.waits_on_network and len(ordered) > 1:
        outcomes = list(request_pool(ROOT_READ_THREADS).map(attempt, ordered))
    else:  # local storage: reading is CPU, threads would only contend for the interpreter
        outcomes = [attempt(version) for version in ordered]
    loaded: dict[int, LoadedRoot] = {}
    broken: dict[int, LakecoreError] = {}
    for version, outcome in zip(ordered, outcomes, strict=True):  # the oldest failure decides
        if isinstance(outcome, LoadedRoot):
            loaded[version] = outcome
        elif isinstance(outcome.__cause__, CorruptFileError) or (
            isinstance(outcome.__cause__, NotFoundError)
            and is_damage_in_version(storage, version, outcome.__cause__)
        ):
            broken[version] = (
                outcome  # damaged bytes, or a definition missing under a root that is there
            )
        else:
            raise outcome
    rolled_past = [
        (root.version, version_from_root_node_file_name(root.info.rollback_from_root))
        for root in loaded.values()
        if root.info.rollback_from_root is not None
    ]
    abandoned = []
    unrepaired: dict[int, LakecoreError] = {}
    for version, error in broken.items():
        if any(at > version and start >= version for at, start in rolled_past):
            abandoned.append(version)
        else:
            unrepaired[version] = error
    if unrepaired:
        first = unrepaired[min(unrepaired)]
        cause = (
            first.__cause__.one_line() if isinstance(first.__cause__, LakecoreError) else str(first)
        )
        raise damaged(
            f"retained version(s) {', '.join(str(v) for v in sorted(unrepaired))} of {storage.root_uri} cannot "
            f"be read ({cause}); {next_step(storage.root_uri, unrepaired, ordered[-1], roots_damaged=True)}"
        ) from first
    return loaded, abandoned


def exports_of(roots: Iterable[LoadedRoot]) -> dict[str, int]:
    """Exports named by any of these roots' definitions that pin a root of this lakehouse."""
    out: dict[str, int] = {}
    for root in roots:
        out.update(root.exports)
    return out


def read_retained(
    storage: Storage,
    top: Sequence[ListedFile],
    refused: type[LakecoreError] = GcRefusedError,
    damaged: type[LakecoreError] = GcDamagedError,
) -> Retained:
    """Read every root listed at the top level, strictly; check that every definition they
    name and every export root their definitions pin is there. Fails closed."""
    versions = sorted(v for v in (root_version_of(f.path) for f in top) if v is not None)
    if not versions:
        missing = no_lakehouse(storage)
        raise type(missing)(f"{missing}; nothing was deleted")
    listed = {f.path for f in top}
    roots, _abandoned = load_roots(
        storage, versions, refused, damaged
    )  # version compaction deletes those
    unlisted = {
        v: root.info.lakehouse_def_path
        for v, root in sorted(roots.items())
        if root.info.lakehouse_def_path not in listed
    }
    if unlisted:
        # A listing is no instant: a compaction may have deleted a root and its definition
        # meanwhile (refused: a rerun decides). A definition missing under a root that is still
        # there was deleted by other hands: damage to every version naming it, with a way out.
        definition_gone = [
            v
            for v, path in unlisted.items()
            if not storage.exists(path) and storage.exists(root_node_file_name(v))
        ]
        if definition_gone:
            raise damaged(
                f"retained version(s) {', '.join(str(v) for v in definition_gone)} of {storage.root_uri} name a "
                f"lakehouse definition that is missing ({storage.uri(unlisted[definition_gone[0]])}); "
                f"{next_step(storage.root_uri, definition_gone, versions[-1], roots_damaged=True)}"
            )
        version, def_path = next(iter(unlisted.items()))
        raise refused(
            f"retained version {version} names lakehouse definition "
            f"{storage.uri(def_path)}, which is not in the listing of the root"
        )
    exports = exports_of(roots.values())
    for name, version in sorted(exports.items()):
        if version not in roots:
            raise refused(
                f"export {name!r} pins version {version}, whose root "
                f"{storage.uri(root_node_file_name(version))} is missing: its files cannot be "
                "told apart from orphans. Restore the root or remove the export first"
            )
    return Retained(roots, exports)
