"""Where, outside a table's own folders, its metadata names files: the reference folders
the location registry keeps (``lakecore.maintenance.tables.table_folders``), so that a purge of another table
finds this one and keeps the files it names.

Rules:

* A file counts when it lies strictly inside the warehouse and under none of the table's own folders
  (a file outside the warehouse lies under no table folder of this lakehouse, so no purge here can
  delete it). Its folder is what is recorded.
* The files a table's metadata names are the ones pyiceberg's purge would delete: the metadata
  file and its log, every snapshot's manifest list, every manifest, and every entry of every
  manifest, data and delete files alike, deleted entries too.
* **A commit** reads only what it added (``added_by_commit``): the manifest list of each snapshot
  the new metadata has and the base had not (one read each), and the manifests of those lists
  that one of the new snapshots added (``added_snapshot_id``, as pyiceberg writes it) or that lie
  in a folder not yet recorded (a manifest taken from elsewhere). An append reads its manifest
  list and its one new manifest: two small reads. Manifests carried over from older snapshots
  were read when they were added.
* **Read ahead.** What a commit's new snapshots name can be read before the commit is queued
  (``read_named_files``, in the request's own thread, side by side with other requests); the
  committer then reads only what that did not cover (a manifest in a folder not yet recorded,
  a snapshot the read-ahead did not see).
* **A whole table** (``named_by_table``: a register, the registry's first build, a table last
  changed by code that does not check) has every snapshot read.
* **A folder given up** (a write path moved elsewhere) is a reference folder from then on: the
  files written there are still named, and the folder is free for another table to take.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakecore.maintenance.tables.table_folders import contains, parent_folder

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot


@dataclass
class NamedFiles:
    """What some snapshots name, read ahead: each manifest list's manifests, and the file
    paths of the manifests that the snapshots added (deleted entries too)."""

    manifests: dict[str, list[ManifestFile]] = field(default_factory=dict)
    entries: dict[str, list[str]] = field(default_factory=dict)


def read_named_files(io: FileIO, snapshots: Sequence[Snapshot]) -> NamedFiles:
    """Read what ``snapshots`` (a commit's new ones) name: their manifest lists, and the
    manifests one of them added (two small reads for an append)."""
    named = NamedFiles()
    added_ids = {s.snapshot_id for s in snapshots}
    for snapshot in snapshots:
        manifests = snapshot.manifests(io)
        named.manifests[snapshot.manifest_list] = manifests
        for manifest in manifests:
            if (
                manifest.added_snapshot_id in added_ids
                and manifest.manifest_path not in named.entries
            ):
                named.entries[manifest.manifest_path] = [
                    entry.data_file.file_path
                    for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
                ]
    return named


class ReferenceFinder:
    """Collects the reference folders of one table: files inside ``warehouse`` and under none
    of ``own_folders`` (all normalized with ``normalize``)."""

    def __init__(
        self,
        warehouse: str,
        own_folders: Sequence[str],
        normalize: Callable[[str], str],
        known: Iterable[str] = (),
        ahead: NamedFiles | None = None,
    ) -> None:
        self._normalize = normalize
        self._ahead = ahead or NamedFiles()
        self.warehouse = warehouse
        self.own_folders = list(own_folders)
        self.known = list(known)
        self.folders: set[str] = set()

    def _foreign(self, path: str) -> str | None:
        """The folder of ``path`` when it is a reference, else None."""
        normalized = self._normalize(path)
        if not normalized.startswith(self.warehouse + "/"):
            return None
        if any(contains(own, normalized) for own in self.own_folders):
            return None
        return parent_folder(normalized)

    def add(self, paths: Iterable[str]) -> None:
        for path in paths:
            folder = self._foreign(path)
            if folder is not None:
                self.folders.add(folder)

    def add_folders(self, folders: Iterable[str]) -> None:
        """Record whole folders the table names files in (normalized), where they are
        references: inside the warehouse and under none of its own folders."""
        for folder in folders:
            if folder.startswith(self.warehouse + "/") and not any(
                contains(own, folder) for own in self.own_folders
            ):
                self.folders.add(folder)

    def _recorded_before(self, path: str) -> bool:
        """Whether ``path`` is no reference or lies in a folder recorded before this read."""
        folder = self._foreign(path)
        return folder is None or any(contains(k, folder) for k in self.known)

    def _read_manifest(self, io: FileIO, manifest: ManifestFile) -> None:
        read_ahead = self._ahead.entries.get(manifest.manifest_path)
        if read_ahead is not None:
            self.add(read_ahead)
            return
        self.add(
            entry.data_file.file_path
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
        )

    def _manifests(self, io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
        read_ahead = self._ahead.manifests.get(snapshot.manifest_list)
        return read_ahead if read_ahead is not None else snapshot.manifests(io)

    def added_by_commit(
        self,
        io: FileIO,
        base: TableMetadata | None,
        new: TableMetadata,
        new_metadata_location: str,
    ) -> set[str]:
        """The reference folders of what ``new`` adds to ``base`` (None: a new table)."""
        before = set() if base is None else {s.snapshot_id for s in base.snapshots}
        added = [s for s in new.snapshots if s.snapshot_id not in before]
        added_ids = {s.snapshot_id for s in added}
        self.add([new_metadata_location])
        read: set[str] = set()
        for snapshot in added:
            self.add([snapshot.manifest_list])
            for manifest in self._manifests(io, snapshot):
                # Entries of a manifest in an unrecorded foreign folder were never seen.
                first_sight = not self._recorded_before(manifest.manifest_path)
                self.add([manifest.manifest_path])
                if manifest.manifest_path in read:
                    continue
                if manifest.added_snapshot_id in added_ids or first_sight:
                    read.add(manifest.manifest_path)
                    self._read_manifest(io, manifest)
        return self.folders

    def named_by_table(
        self, io: FileIO, metadata: TableMetadata, metadata_location: str
    ) -> set[str]:
        """The reference folders of everything ``metadata`` names."""
        self.add([metadata_location, *(log.metadata_file for log in metadata.metadata_log)])
        read: set[str] = set()
        for snapshot in metadata.snapshots:
            self.add([snapshot.manifest_list])
            for manifest in snapshot.manifests(io):
                if manifest.manifest_path not in read:
                    read.add(manifest.manifest_path)
                    self.add([manifest.manifest_path])
                    self._read_manifest(io, manifest)
        return self.folders


__all__ = ["NamedFiles", "ReferenceFinder", "read_named_files"]
