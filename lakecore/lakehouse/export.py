"""Snapshot export: copy one version to a target URI as a lakehouse of its own.

Modes (docs/format.md#exported-copies: an export may stop replicating at any level):

    minimal   the root node only; its pointers become full URIs into the source
    partial   the root and every internal node; leaves and definitions stay in the source
    full      every reachable node and definition file; nothing points back

The copy is written as version 0 of the target, with a lakehouse definition that records the
source (``lakecore.export.source``), the mode, the export name and the version, and, for
minimal and partial copies, the root readers of the copy may follow pointers into and nowhere
else (``lakecore.export.source_root``). The copy is a read-only snapshot: a lakehouse whose
definition carries ``lakecore.export.mode`` refuses every commit (``Lakehouse.commit_plan``). A relative
location is always relative to the lakehouse the file holding it lives in, which is why copied
nodes that keep pointing at the source have those pointers made absolute.

The caller (``Lakehouse.export_snapshot``) records the export in the source's definition
(``exported_snapshots[name]``, plus ``lakecore.exports.<name>.mode`` and ``.target``) *before*
it copies: the record pins the exported version against expiry until ``Lakehouse.drop_export``
removes it, and a copy made first could be of a version that a version compaction running
meanwhile expires, its files deleted under the copy's pointers. A copy that fails withdraws the
record; so does a version found expired once the record has landed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakecore.core.locations import (
    classify_path,
    new_lakehouse_def_path,
    real_root_uri,
    root_contains,
    root_node_file_name,
)
from lakecore.core.node import Node, encode_node, encoded_size
from lakecore.core.storage import Storage
from lakecore.core.tree.store import NodeStore, absolute_location
from lakecore.core.versions import RootInfo, encode_root, refuse_a_file_as_root, write_hint
from lakecore.errors import AlreadyExistsError, LakecoreError
from lakecore.maintenance.tree_files import reachable_from_root

if TYPE_CHECKING:
    from lakecore.core.view import LakehouseView

# Copies every file a root reaches from the source to the target (a full export's bulk work);
# the Spark export job passes one that computes the set and copies on executors.
CopyFiles = Callable[[Storage, Storage, NodeStore, Node], None]


@dataclass
class ExportResult:
    """What an export did, for its report (the Spark job fills it; ``Lakehouse.export_snapshot``
    is the export in one process). Filled step by step: a field is None until its step ran."""

    name: str
    mode: str
    target: str  # as given; ``recorded_target`` once the export is recorded
    source_version: int  # the source's latest version when the export began
    exported_version: int
    exported_root: str
    subtree_tasks: int | None = None  # a full export's copy, cut into subtrees
    reachable_node_files: int | None = None
    reachable_definition_files: int | None = None
    copy_tasks: int | None = None
    files_copied: int | None = None
    bytes_copied: int = 0
    copied_sample: list[str] | None = None
    recorded_version: int | None = None  # the source's version that records the export
    recorded_target: str | None = None


def copy_reachable_files(source: Storage, target: Storage, store: NodeStore, root: Node) -> None:
    """The single-process ``CopyFiles``: every reachable node and definition file, in order."""
    reach = reachable_from_root(store, root)
    for path in sorted(reach.files):
        target.write(path, source.read(path))


def _absolute_values(node: Node, source_root_uri: str) -> Node:
    return Node(
        list(node.keys),
        [absolute_location(v, source_root_uri) for v in node.values],
        list(node.children),
        {
            k: (None if v is None else absolute_location(v, source_root_uri))
            for k, v in node.buffer.items()
        },
        dict(node.system),
    )


# How many of the target's files are looked at before a copy: one request on S3.
TARGET_FILES_LOOKED_AT = 1000


def refuse_foreign_files(target: Storage) -> None:
    """Refuse an export target that holds files lakecore did not name (a mistyped ``--target
    .``, a home folder): a copy would scatter thousands of files among them. Lakehouse files
    are allowed: a copy that failed part-way left them, and a rerun overwrites them. Only the
    first ``TARGET_FILES_LOOKED_AT`` files listed are looked at; lakecore's own names sort
    first (hash directories are digits), so a folder of anyone else's shows them at once."""
    listed = target.first_files(TARGET_FILES_LOOKED_AT)
    foreign = [path for path in listed if classify_path(path) is None]
    if foreign:
        raise AlreadyExistsError(
            f"the export target {target.root_uri} already holds other files ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); export to an empty or new folder"
        )


def export_target(
    source: Storage, target: str, target_storage_options: Mapping[str, Any] | None
) -> Storage:
    """The target of an export, refused before anything is recorded or written when it is the
    source, inside it, a file, a lakehouse already, or a folder of other files."""
    from lakecore.core.view import has_lakehouse, lakehouse_above

    target_storage = Storage(target, target_storage_options or source.storage_options)
    # Compared with links resolved: a target reached through a link to the source wrote the
    # copy's files into the source's hash folders.
    same = real_root_uri(target_storage.root_uri) == real_root_uri(source.root_uri)
    if same:
        raise AlreadyExistsError(
            f"the export target {target_storage.root_uri} is the lakehouse {source.root_uri} "
            "itself (links resolved); an export target must be another folder"
        )
    if root_contains(source.root_uri, target_storage.root_uri):
        # gc would see the copy's files as foreign files of the source, and a full copy of the
        # source would include the copy: a mistake, whatever the folder's name.
        raise AlreadyExistsError(
            f"the export target {target_storage.root_uri} is inside the lakehouse {source.root_uri} "
            "(links resolved); export to a folder outside it"
        )
    if root_contains(target_storage.root_uri, source.root_uri):
        raise AlreadyExistsError(
            f"the export target {target_storage.root_uri} holds the lakehouse {source.root_uri} "
            "(links resolved); export to a folder outside it"
        )
    other = lakehouse_above(target_storage)
    if other is not None:
        # Another lakehouse's gc and exports never list the copy, but the copy's files would
        # lie in that lakehouse's root, where no command writes (lakecore.contract.outputs).
        raise AlreadyExistsError(
            f"the export target {target_storage.root_uri} is inside the lakehouse at {other} "
            "(links resolved); export to a folder outside every lakehouse"
        )
    refuse_a_file_as_root(target_storage)  # a target that is a file, or under one
    if target_storage.scheme == "file":
        # A link among the target's folders would take the copy's files wherever it leads (the
        # source's own hash folders, once). The store refuses to write through one anyway; say so
        # before anything is recorded.
        folder = target_storage.root_uri.removeprefix("file://")
        if os.path.isdir(folder):
            links = sorted(e.name for e in os.scandir(folder) if e.is_symlink())
            if links:
                raise AlreadyExistsError(
                    f"the export target {target_storage.root_uri} holds a symbolic link "
                    f"({links[0]}); export to an empty or new folder"
                )
    if has_lakehouse(target_storage):
        raise AlreadyExistsError(
            f"a lakehouse already exists at the export target {target_storage.root_uri}"
        )
    refuse_foreign_files(target_storage)
    return target_storage


def copy_snapshot(
    view: LakehouseView,
    exported: RootInfo,
    mode: str,
    target_storage: Storage,
    name: str,
    copy_files: CopyFiles | None = None,
) -> Storage:
    """Write the copy of ``exported`` to ``target_storage`` (``export_target``) as its version 0."""
    from lakecore.core.export_records import (
        EXPORT_MODE_PROPERTY,
        EXPORT_NAME_PROPERTY,
        EXPORT_ORIGIN_PROPERTY,
        EXPORT_SOURCE_PROPERTY,
        EXPORT_VERSION_PROPERTY,
        EXPORTS_PROPERTY_PREFIX,
    )
    from lakecore.core.view import read_lakehouse_def

    source = view.storage
    source_def = read_lakehouse_def(source, exported.lakehouse_def_path)
    # The source's own export records describe the source's exports, not the copy's.
    properties = {
        k: v for k, v in source_def.properties.items() if not k.startswith(EXPORTS_PROPERTY_PREFIX)
    }
    properties.update(
        {
            EXPORT_MODE_PROPERTY: mode,
            EXPORT_NAME_PROPERTY: name,
            EXPORT_VERSION_PROPERTY: str(exported.version),
            EXPORT_ORIGIN_PROPERTY: source.root_uri,
        }
    )
    if mode != "full":
        properties[EXPORT_SOURCE_PROPERTY] = source.root_uri
    target_def = source_def.with_changes(
        properties=properties, exported_snapshots={}, maximum_version_age_millis_overrides={}
    )
    order = source_def.order
    store = view.store
    root = exported.node
    max_bytes = source_def.node_file_max_size_bytes

    def check_size(node: Node, what: str) -> None:
        size = encoded_size(node, order)
        if size > max_bytes:
            raise LakecoreError(
                f"{what} would be {size} bytes with full URIs into {source.root_uri}, over "
                f"node_file_max_size_bytes={max_bytes}; use a full export instead"
            )

    if mode == "full":
        (copy_files or copy_reachable_files)(source, target_storage, store, root)
        new_root = root
    elif mode == "minimal":
        new_root = _absolute_values(root, source.root_uri)
        new_root.children = [absolute_location(c, source.root_uri) for c in root.children]
    else:
        new_root = _copy_internal(store, source, target_storage, root, order, check_size)
    target_def_path = new_lakehouse_def_path()
    target_storage.write(target_def_path, target_def.to_bytes())
    check_size(new_root, "the exported root")
    data = encode_root(
        Node(new_root.keys, new_root.values, new_root.children, new_root.buffer),
        order,
        lakehouse_def_path=target_def_path,
        previous_root=None,
        created_at_millis=exported.created_at_millis,
    )
    try:
        target_storage.create_exclusive(root_node_file_name(0), data)
    except AlreadyExistsError:
        # Another export to this target committed first (two runs at once). This run's
        # definition file, uuid-named, is named by no root: take it back. The files it copied
        # are the winner's files too, or orphans there that gc deletes.
        with contextlib.suppress(LakecoreError):  # left behind, it is an orphan gc deletes
            target_storage.delete([target_def_path])
        raise AlreadyExistsError(
            f"another export to {target_storage.root_uri} committed its version 0 first (two exports to one "
            f"target at once?); that copy stands and this one records nothing. `lakecore -l "
            f"{target_storage.root_uri} describe` shows what is there; export to a new folder to make another copy"
        ) from None
    write_hint(target_storage, 0)
    return target_storage


def _copy_internal(
    store: Any, source: Storage, target: Storage, node: Node, order: int, check_size: Any
) -> Node:
    """Copy ``node``'s internal descendants to ``target`` (partial export); leaves stay."""
    copied = _absolute_values(node, source.root_uri)
    if not node.children:
        return copied
    children = []
    for child in node.children:
        loaded = store.load(child)
        if loaded.children:
            new_child = _copy_internal(store, source, target, loaded, order, check_size)
            check_size(new_child, f"internal node {child}")
            target.write(child, encode_node(new_child, order))
            children.append(child)
        else:
            children.append(absolute_location(child, source.root_uri))
    copied.children = children
    return copied
