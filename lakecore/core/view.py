"""The read-only view of one version: a root with its definition and exports, and its reads.

This is the format core's one path for reading roots (docs/format.md#versions and
#object-definitions): the root file is decoded loosely, its lakehouse definition read, then the root
decoded again strictly with the order the definition gives (the key table's length must match it).
Everything that reads a version goes through here: the catalog API, maintenance, repair and the
command line.

Rules:

- A latest root (or the definition it names) that exists but cannot be decoded is
  ``DamagedLakehouseError``, which names the file and the repair. A version asked for by
  number fails with the plain error of what is wrong.
- Definitions are immutable files, so they are cached per process: lakehouse definitions
  decoded, namespace and table definitions as their bytes, at most
  ``DEFINITION_CACHE_BYTES`` of them (``clear_definition_cache`` for tests that rewrite files
  behind lakecore's back). A catalog read of a table that did not change reads no definition
  file twice. The checkers (``fsck``, validate) read through ``read_location``, which never
  caches: a file damaged since it was cached must show.
- A value is a path under the root or, in an exported copy, a full URI into the one source
  root its definition names (``lakecore.export.source_root``); anything else is refused.
- An exported copy's definition carries ``lakecore.export.mode``: such a lakehouse is a
  read-only snapshot (``lakecore.core.export_records``).
- The version log (``list_versions``) comes from a listing, so that a damaged root, or a pinned
  version below a gap left by version compaction, still shows.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from lakecore.core import keys as K
from lakecore.core import namespaces as N
from lakecore.core import tree
from lakecore.core.defs import (
    LakehouseDef,
    decode_namespace_def,
    decode_table_def,
    decode_view_def,
    pb,
)
from lakecore.core.export_records import (
    ExportInfo,
    export_infos,
    external_roots_of,
    read_only_reason,
)
from lakecore.core.locations import (
    LATEST_HINT_FILE_NAME,
    FileKind,
    check_relative_path,
    classify_path,
    external_root_for,
    is_full_uri,
    real_root_uri,
    root_node_file_name,
    version_from_root_node_file_name,
)
from lakecore.core.node import Node
from lakecore.core.sized_lru import SizedLRU
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeStore, TreeShape
from lakecore.core.versions import (
    RootInfo,
    decode_root,
    export_pins,
    latest_version,
    list_root_versions,
    no_lakehouse,
    probe_up,
    read_version,
)
from lakecore.errors import (
    CorruptFileError,
    DamagedLakehouseError,
    InvalidLocationError,
    LakecoreError,
    MissingDefinitionError,
    NotFoundError,
    UnsupportedFormatVersionError,
    VersionExpiredError,
)

if TYPE_CHECKING:
    from lakecore.core.lookup import LookupReader


def _definition_cache_key(storage: Storage, location: str) -> tuple[str, str]:
    return (storage.root_uri, location)


_DEF_CACHE: dict[tuple[str, str], LakehouseDef] = {}
# Namespace and table definition files: a few hundred bytes each, so 64 MiB holds those of
# some hundred thousand objects.
DEFINITION_CACHE_BYTES: Final = 64 << 20
_OBJECT_DEF_CACHE: Final = SizedLRU[tuple[str, str], bytes](DEFINITION_CACHE_BYTES)


def remember_definition(storage: Storage, location: str, data: bytes) -> None:
    """Keep a definition file this process just wrote: a read of it soon (the commit's next
    reader) needs no request."""
    _OBJECT_DEF_CACHE.put(_definition_cache_key(storage, location), data, len(data))


def clear_definition_cache() -> None:
    """Forget every cached definition (tests that rewrite files by hand)."""
    _DEF_CACHE.clear()
    _OBJECT_DEF_CACHE.clear()


class LookupSource(Protocol):
    """Where a view's point lookups can come from instead of the tree (``lookup.cache``)."""

    def reader(self, view: LakehouseView) -> LookupReader: ...


def read_lakehouse_def(storage: Storage, location: str) -> LakehouseDef:
    """A lakehouse definition file (immutable, so cached per process)."""
    key = _definition_cache_key(storage, location)
    cached = _DEF_CACHE.get(key)
    if cached is not None:
        return cached
    path = check_relative_path(location)
    try:
        data = storage.read(path)
    except NotFoundError:
        raise NotFoundError(f"lakehouse definition {storage.uri(path)} is missing") from None
    definition = LakehouseDef.from_bytes(data, storage.uri(path))
    if len(_DEF_CACHE) > 1024:
        _DEF_CACHE.clear()
    _DEF_CACHE[key] = definition
    return definition


def refuse_unsupported_format(storage: Storage) -> None:
    """Raise ``UnsupportedFormatVersionError`` if the latest version's definition has a format
    major version this code does not know; say nothing about any other problem.

    Maintenance jobs call this first: a lakehouse written by a newer lakecore must be left alone
    with exit 2 ("use a newer lakecore"), not be judged damaged by validate, refused as
    unreadable by gc, or have its hint rewritten by repair. Everything else (a missing or corrupt
    root, say) is for the job itself to report, so that validate and repair still run on damage."""
    try:
        loose, _data = read_latest_root_loose(storage)
        read_lakehouse_def(storage, loose.lakehouse_def_path)
    except UnsupportedFormatVersionError:
        raise
    except LakecoreError:
        return


VersionState = Literal["latest", "retained", "pinned", "unreadable"]


@dataclass(frozen=True)
class VersionInfo:
    """One root file of the version log. An unreadable root keeps its place in the log (its
    number is taken: no commit may reuse it) with ``state == "unreadable"`` and the error."""

    version: int
    created_at_millis: int | None
    rollback_from_version: int | None
    lakehouse_def_path: str | None
    n_root_keys: int | None
    root_buffer_messages: int | None
    state: VersionState = "retained"
    pinned_by: tuple[str, ...] = ()  # export names that pin this version against expiry
    error: str | None = None

    @property
    def readable(self) -> bool:
        return self.state != "unreadable"

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "created_at_millis": self.created_at_millis,
            "rollback_from_version": self.rollback_from_version,
            "lakehouse_def_path": self.lakehouse_def_path,
            "n_root_keys": self.n_root_keys,
            "root_buffer_messages": self.root_buffer_messages,
            "state": self.state,
            "pinned_by": list(self.pinned_by),
            "error": self.error,
        }


def root_file_versions(storage: Storage) -> list[int]:
    """The versions whose root file exists, ascending: one listing of the top level, probed
    upward for commits that landed since. NotFoundError when there is none."""
    listed = list_root_versions(storage)
    if not listed:
        raise no_lakehouse(storage)
    return sorted(set(listed) | set(range(listed[-1], probe_up(storage, listed[-1]) + 1)))


def list_versions(storage: Storage) -> list[VersionInfo]:
    """Every version whose root file exists, newest first, readable or not.

    The log comes from one listing of the root's top level, probed upward for commits that
    landed since (so a hint or a root in the middle that cannot be read hides nothing), and not
    from walking ``previous_root``: after version compaction an exported, pinned version stands
    alone below a gap, and it is retained all the same. Exports pin versions through the
    definition of the newest readable version."""
    listed = root_file_versions(storage)
    infos: list[VersionInfo] = []
    pins: dict[int, list[str]] | None = None
    for version in sorted(listed, reverse=True):
        path = root_node_file_name(version)
        try:
            info, lakehouse_def = read_root_and_def(storage, version)
        except NotFoundError as exc:
            if storage.exists(path):
                infos.append(
                    VersionInfo(
                        version, None, None, None, None, None, "unreadable", (), exc.one_line()
                    )
                )
            continue  # expired between the listing and the read
        except (CorruptFileError, InvalidLocationError) as exc:
            infos.append(
                VersionInfo(version, None, None, None, None, None, "unreadable", (), exc.one_line())
            )
            continue
        if pins is None:
            pins = {}
            for name, pinned in sorted(export_pins(lakehouse_def).items()):
                pins.setdefault(pinned, []).append(name)
        rollback = info.rollback_from_root
        infos.append(
            VersionInfo(
                version,
                info.created_at_millis,
                version_from_root_node_file_name(rollback) if rollback else None,
                info.lakehouse_def_path,
                len(info.node.keys),
                len(info.node.buffer),
                "retained",
                (),
                None,
            )
        )
    pins = pins or {}
    out = []
    for position, entry in enumerate(infos):
        state: VersionState = entry.state
        if state != "unreadable":
            if position == 0:
                state = "latest"
            elif entry.version in pins:
                state = "pinned"
        out.append(
            VersionInfo(
                entry.version,
                entry.created_at_millis,
                entry.rollback_from_version,
                entry.lakehouse_def_path,
                entry.n_root_keys,
                entry.root_buffer_messages,
                state,
                tuple(pins.get(entry.version, ())),
                entry.error,
            )
        )
    return out


def open_version(
    uri: str, version: int, *, storage_options: Mapping[str, Any] | None = None
) -> LakehouseView:
    """A read-only view of one version, opened without reading the latest one (which may be
    damaged): what repair and ``fsck --all`` use to look at older versions."""
    storage = Storage(uri, storage_options)
    root, lakehouse_def = read_root_and_def(storage, version)
    return LakehouseView(storage, root, lakehouse_def, store_for(storage, lakehouse_def))


class LakehouseView:
    """A read-only view of one version of a lakehouse."""

    def __init__(
        self, storage: Storage, root: RootInfo, lakehouse_def: LakehouseDef, store: NodeStore
    ) -> None:
        self.storage = storage
        self.root_info = root
        self.lakehouse_def = lakehouse_def
        self.store = store
        self.shape = TreeShape.of(lakehouse_def)
        self._lookup_reader: LookupReader | None = None

    # -- identity -----------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self.storage.root_uri

    @property
    def version(self) -> int:
        return self.root_info.version

    @property
    def root(self) -> Node:
        return self.root_info.node

    @property
    def created_at_millis(self) -> int:
        return self.root_info.created_at_millis

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r}, version={self.version})"

    def open_version(self, version: int) -> LakehouseView:
        """Another version of the same lakehouse, read-only."""
        root, lakehouse_def = read_root_and_def(self.storage, version)
        return LakehouseView(
            self.storage, root, lakehouse_def, store_for(self.storage, lakehouse_def)
        )

    @property
    def read_only_reason(self) -> str | None:
        """None, or why this lakehouse accepts no commits (it is an exported copy)."""
        return read_only_reason(self.lakehouse_def)

    def list_exports(self) -> list[ExportInfo]:
        """The exports this version's definition records (each pins its version), by name."""
        return export_infos(self.lakehouse_def)

    # -- raw tree access ------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        """The pvalue stored under an object key at this version (None if absent)."""
        reader = self._lookup_reader
        if reader is not None:
            found = reader.get(key.encode("utf-8"))
            return None if found is None else found.decode("utf-8")
        return tree.get(self.store, self.root, key)

    def get_many(self, keys: Iterable[str]) -> list[str | None]:
        """Point lookups of many keys (batched through the lookup file when one is in use)."""
        keys = list(keys)
        reader = self._lookup_reader
        if reader is None:
            return [tree.get(self.store, self.root, key) for key in keys]
        return [
            None if v is None else v.decode("utf-8")
            for v in reader.get_many([k.encode("utf-8") for k in keys])
        ]

    def use_lookup_cache(self, cache: LookupSource) -> LakehouseView:
        """Serve point lookups of this version from a local lookup file (built on first use),
        e.g. ``view.use_lookup_cache(lakecore.core.lookup.cache.VersionCache())``.

        Only for a fixed version: versions never change, so the file never goes stale."""
        self._lookup_reader = cache.reader(self)
        return self

    def items(self, prefix: str = "") -> Iterator[tuple[str, str]]:
        return tree.scan_prefix(self.store, self.root, prefix)

    def read_location(self, location: str) -> bytes:
        """Bytes of a stored location: a path under the root, or a full URI under an allowed
        export source; anything else is refused."""
        if is_full_uri(location):
            root = external_root_for(location, self.store.external_roots)
            if root is not None:
                return Storage(root, self.storage.storage_options).read(location[len(root) :])
            raise InvalidLocationError(
                f"location {location!r} is outside the lakehouse {self.uri}; refusing to read it"
            )
        return self.storage.read(check_relative_path(location))

    # -- catalog reads --------------------------------------------------------------------------

    def namespace_exists(self, ns: str) -> bool:
        return self.get(K.namespace_key(ns, self.lakehouse_def)) is not None

    def table_exists(self, ns: str, table: str) -> bool:
        return self.get(K.table_key(ns, table, self.lakehouse_def)) is not None

    def list_namespaces(self) -> list[str]:
        return [
            K.parse_namespace_key(k, self.lakehouse_def)
            for k, _ in self.items(K.NAMESPACE_KEY_PREFIX)
        ]

    def namespaces_starting_with(self, name_prefix: str, limit: int | None = None) -> list[str]:
        """Names of the namespaces whose name starts with ``name_prefix`` (at most ``limit``,
        in key order): one range of the namespace keys."""
        names: list[str] = []
        for key, _ in self.items(K.NAMESPACE_KEY_PREFIX + name_prefix):
            if limit is not None and len(names) >= limit:
                break
            names.append(K.parse_namespace_key(key, self.lakehouse_def))
        return names

    def child_namespaces(self, parent: str | None = None) -> list[str]:
        """The direct children of ``parent`` (None: the top-level namespaces), sorted: a
        skip-scan of the parent's key range, one seek per child (``lakecore.core.namespaces``).

        Raises:
            NotFoundError: ``parent`` is given and does not exist.
        """
        # A parent with children but no key of its own: a lakehouse from before nesting may
        # hold "a.b" without "a".
        if parent is not None and not (
            self.namespace_exists(parent) or self.has_child_namespaces(parent)
        ):
            raise NotFoundError(f"namespace {parent!r} does not exist at version {self.version}")
        return N.skip_scan_children(parent, self._first_key, self.lakehouse_def)

    def has_child_namespaces(self, ns: str) -> bool:
        start, stop = N.key_range(ns)
        return self._first_key(start, stop) is not None

    def _first_key(self, start: str, stop: str | None) -> str | None:
        first = next(tree.scan(self.store, self.root, start, stop), None)
        return None if first is None else first[0]

    def list_tables(self, ns: str) -> list[str]:
        if not self.namespace_exists(ns):
            raise NotFoundError(f"namespace {ns!r} does not exist at version {self.version}")
        prefix = K.table_key_prefix(ns, self.lakehouse_def)
        return [K.parse_table_key(k, self.lakehouse_def)[1] for k, _ in self.items(prefix)]

    def read_definition(
        self, location: str, ns: str, table: str | None = None, *, kind: str = "table"
    ) -> bytes:
        """The bytes of the definition file of namespace ``ns`` (or of its ``table``, or its
        view when ``kind`` is ``view``) that this version names at ``location``.

        A missing file is damage (``MissingDefinitionError``, exit 6), not "no such table": the
        key is in the tree. Unless this version expired while it was being read: compact-versions
        deletes what only expired versions reach, the root file first."""
        key = _definition_cache_key(self.storage, location)
        cached = _OBJECT_DEF_CACHE.get(key)
        if cached is not None:
            return cached[0]
        try:
            data = self.read_location(location)
            _OBJECT_DEF_CACHE.put(key, data, len(data))
            return data
        except NotFoundError:
            if not self.storage.exists(root_node_file_name(self.version)):
                raise VersionExpiredError(
                    f"version {self.version} was expired by version compaction while it was being read; "
                    "read the latest version"
                ) from None
            quoted = " ".join(shlex.quote(name) for name in (ns, table) if name is not None)
            raise MissingDefinitionError(
                f"namespace {ns!r}" if table is None else f"{kind} {ns}.{table}",
                self.storage.uri(location) if not is_full_uri(location) else location,
                self.version,
                self.storage.root_uri,
                f"namespace drop {quoted}" if table is None else f"{kind} drop {quoted}",
                " once it holds no table" if table is None else "",
            ) from None

    def load_namespace(self, ns: str) -> pb.NamespaceDef:
        location = self.get(K.namespace_key(ns, self.lakehouse_def))
        if location is None:
            raise NotFoundError(f"namespace {ns!r} does not exist at version {self.version}")
        return decode_namespace_def(self.read_definition(location, ns), location)

    def load_table(self, ns: str, table: str) -> pb.TableDef:
        location = self.get(K.table_key(ns, table, self.lakehouse_def))
        if location is None:
            raise NotFoundError(f"table {ns}.{table} does not exist at version {self.version}")
        return decode_table_def(self.read_definition(location, ns, table), location)

    def view_exists(self, ns: str, view: str) -> bool:
        return self.get(K.view_key(ns, view, self.lakehouse_def)) is not None

    def list_views(self, ns: str) -> list[str]:
        """The Iceberg views of namespace ``ns`` (docs/format.md#view-definition), sorted."""
        if not self.namespace_exists(ns):
            raise NotFoundError(f"namespace {ns!r} does not exist at version {self.version}")
        prefix = K.view_key_prefix(ns, self.lakehouse_def)
        return [K.parse_view_key(k, self.lakehouse_def)[1] for k, _ in self.items(prefix)]

    def load_view(self, ns: str, view: str) -> pb.ViewDef:
        location = self.get(K.view_key(ns, view, self.lakehouse_def))
        if location is None:
            raise NotFoundError(f"view {ns}.{view} does not exist at version {self.version}")
        return decode_view_def(self.read_definition(location, ns, view, kind="view"), location)


def has_lakehouse(storage: Storage) -> bool:
    """True when the root holds a root node file or a lakehouse definition at its top."""
    for info in storage.list_top_level():
        kind = classify_path(info.path)
        if kind is not None and kind.kind in (FileKind.ROOT_NODE, FileKind.LAKEHOUSE_DEF):
            return True
    return False


def lakehouse_above(storage: Storage) -> str | None:
    """The root of a lakehouse that ``storage``'s root lies inside (a folder or prefix above it,
    links resolved, holding the hint or version 0's root file), or None. A look per level: a
    stat on local disk, two small reads on an object store; a level that cannot be read (a
    policy that allows only the target's prefix) counts as no lakehouse."""
    marks = (LATEST_HINT_FILE_NAME, root_node_file_name(0))
    root = real_root_uri(storage.root_uri)
    scheme, _, rest = root.partition("://")
    parts = rest.rstrip("/").split("/")
    # Proper ancestors only, nearest first: up to the file system's root, or the bucket.
    for end in range(len(parts) - 1, 0, -1):
        ancestor = f"{scheme}://{'/'.join(parts[:end])}/"
        if scheme == "file":
            folder = ancestor.removeprefix("file://")
            if any(os.path.isfile(os.path.join(folder, mark)) for mark in marks):
                return ancestor
            continue
        try:
            above = Storage(ancestor, storage.storage_options)
            if any(above.exists(mark) for mark in marks):
                return ancestor
        except LakecoreError:
            continue
    return None


def store_for(storage: Storage, lakehouse_def: LakehouseDef) -> NodeStore:
    return NodeStore(storage, lakehouse_def.order, external_roots=external_roots_of(lakehouse_def))


def read_latest_root_loose(storage: Storage) -> tuple[RootInfo, bytes]:
    """The latest root, decoded before its definition (and so its order) is known, and its bytes.

    A latest root that exists but cannot be decoded is ``DamagedLakehouseError``: the message
    names the file and the repair."""
    version = latest_version(storage)
    try:
        data = storage.read(root_node_file_name(version))
    except NotFoundError:
        # Expired between discovery and read: look again once.
        version = latest_version(storage)
        data = storage.read(root_node_file_name(version))
    location = storage.uri(root_node_file_name(version))
    try:
        return decode_root(data, version, location), data
    except CorruptFileError as exc:
        raise DamagedLakehouseError(location, exc.rule, storage.root_uri, version) from None


def read_root_and_def(storage: Storage, version: int | None) -> tuple[RootInfo, LakehouseDef]:
    """The root of ``version`` (None: the latest) and its definition, decoded strictly.

    Raises NotFoundError / VersionExpiredError (no such version), DamagedLakehouseError (the
    latest root or its definition is damaged), CorruptFileError, StorageError."""
    if version is None:
        loose, data = read_latest_root_loose(storage)
    else:
        path = root_node_file_name(version)  # refuses a version out of range
        try:
            data = storage.read(path)
        except NotFoundError:
            read_version(storage, version)  # says why: not committed yet, or expired
            raise
        loose = decode_root(data, version, storage.uri(path))
    location = storage.uri(root_node_file_name(loose.version))
    try:
        lakehouse_def = read_lakehouse_def(storage, loose.lakehouse_def_path)
        # Decode again with the order now known: the key table length must match it exactly.
        strict = decode_root(data, loose.version, location, lakehouse_def.order)
    except (CorruptFileError, NotFoundError) as exc:
        if version is not None:
            raise
        where = (
            exc.location
            if isinstance(exc, CorruptFileError)
            else storage.uri(loose.lakehouse_def_path)
        )
        rule = exc.rule if isinstance(exc, CorruptFileError) else str(exc)
        raise DamagedLakehouseError(where, rule, storage.root_uri, loose.version) from None
    return strict, lakehouse_def
