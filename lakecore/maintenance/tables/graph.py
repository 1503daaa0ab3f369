"""The graph of files Iceberg metadata names, held in memory, and what is reachable in it.

``FileGraph`` holds, by path, what each metadata file, manifest list and manifest names
(``lakecore.maintenance.tables.named``), each read at most once however many tables, snapshots
and lakehouse versions share it. ``reach`` walks it from a set of *units* (a metadata file,
optionally only some of its snapshots) and answers every file reached and every file it could
not read on the way. The in-process run (``lakecore table-maintenance``, the tests' oracle) and
the Spark job's driver-side re-check use it; the Spark job walks the same edges as DataFrames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from lakecore.maintenance.tables.named import (
    Kind,
    MetadataFacts,
    PathForm,
    Unreadable,
    read_manifest,
    read_manifest_list,
    read_metadata,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Unit:
    """A metadata file, whole (``snapshots`` None) or with only some of its snapshots: what a
    table's metadata names once its expired snapshots are gone."""

    metadata: str
    snapshots: frozenset[int] | None = None


@dataclass
class Reached:
    """Files reached from some units: path -> (kind, size or -1), and what could not be read,
    with the units whose walk met it."""

    files: dict[str, tuple[Kind, int]] = field(default_factory=dict)
    unreadable: dict[str, tuple[Unreadable, set[str]]] = field(default_factory=dict)

    def add(self, path: str, kind: Kind, size: int = -1) -> None:
        known = self.files.get(path)
        if known is None or (known[1] < 0 <= size):
            self.files[path] = (kind, size)

    def fail(self, problem: Unreadable, unit: Unit) -> None:
        found = self.unreadable.setdefault(problem.path, (problem, set()))
        found[1].add(unit.metadata)


@dataclass
class FileGraph:
    """What each metadata file, manifest list and manifest names (see the module doc), keyed
    by the names they are read by; what is reached is in ``form`` (where each name leads)."""

    form: PathForm = field(default_factory=PathForm)
    metadata: dict[str, MetadataFacts | Unreadable] = field(default_factory=dict)
    lists: dict[str, list[tuple[str, int]] | Unreadable] = field(default_factory=dict)
    manifests: dict[str, list[tuple[str, Kind, int]] | Unreadable] = field(default_factory=dict)
    # Parsed metadata of the files read with ``keep`` (the tables a run may change).
    parsed: dict[str, TableMetadata] = field(default_factory=dict)

    @property
    def reads(self) -> dict[str, int]:
        return {
            "metadata_files_read": len(self.metadata),
            "manifest_lists_read": len(self.lists),
            "manifests_read": len(self.manifests),
        }

    def read(
        self,
        io: FileIO,
        metadata_locations: Iterable[str],
        *,
        keep: Iterable[str] = (),
        threads: int = 1,
    ) -> None:
        """Read every metadata file not read yet, then every manifest list and manifest they
        name not read yet, ``threads`` at a time; the parsed metadata of ``keep`` is kept."""
        keep = set(keep)
        fresh = sorted({m for m in metadata_locations if m not in self.metadata})
        for location, answer in zip(
            fresh, _mapped(threads, lambda m: read_metadata(io, m, self.form), fresh), strict=True
        ):
            if isinstance(answer, Unreadable):
                self.metadata[location] = answer
            else:
                parsed, facts = answer
                self.metadata[location] = facts
                if location in keep:
                    self.parsed[location] = parsed
        lists = sorted(
            {
                path
                for facts in self.metadata.values()
                if isinstance(facts, MetadataFacts)
                for path in facts.manifest_lists()
                if path not in self.lists
            }
        )
        for path, listed in zip(
            lists,
            _mapped(threads, lambda p: read_manifest_list(io, p, self.form), lists),
            strict=True,
        ):
            self.lists[path] = listed
        manifests = sorted(
            {
                manifest
                for listed in self.lists.values()
                if not isinstance(listed, Unreadable)
                for manifest, _ in listed
                if manifest not in self.manifests
            }
        )
        for path, named in zip(
            manifests,
            _mapped(threads, lambda p: read_manifest(io, p, self.form), manifests),
            strict=True,
        ):
            self.manifests[path] = named

    def reach(self, units: Iterable[Unit]) -> Reached:
        """Every file the units name, directly or through their manifest lists and manifests,
        and every file on the way that could not be read (each with every unit that met it)."""
        out = Reached()
        problems_of_list: dict[str, list[Unreadable]] = {}
        for unit in units:
            facts = self.metadata.get(unit.metadata)
            if facts is None:
                raise KeyError(f"metadata {unit.metadata} was not read")
            if isinstance(facts, Unreadable):
                out.fail(facts, unit)
                continue
            ids = None if unit.snapshots is None else set(unit.snapshots)
            for path, kind in facts.direct_files(ids):
                out.add(path, kind)
            for list_path in facts.manifest_lists(ids):
                out.add(self.form(list_path), Kind.MANIFEST_LIST)
                problems = problems_of_list.get(list_path)
                if problems is None:
                    problems = problems_of_list[list_path] = self._walk_list(list_path, out)
                for problem in problems:
                    out.fail(problem, unit)
        return out

    def _walk_list(self, path: str, out: Reached) -> list[Unreadable]:
        """Add what a manifest list names to ``out``; returns what could not be read."""
        listed = self.lists[path]
        if isinstance(listed, Unreadable):
            return [listed]
        problems = []
        for manifest, length in listed:
            out.add(self.form(manifest), Kind.MANIFEST, length)
            named = self.manifests[manifest]
            if isinstance(named, Unreadable):
                problems.append(named)
                continue
            for file_path, kind, size in named:
                out.add(file_path, kind, size)
        return problems


def _mapped(threads: int, work: Callable[[T], R], items: list[T]) -> Iterator[R]:
    if threads <= 1 or len(items) <= 1:
        return map(work, items)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakecore-tables")
    try:
        return iter(list(pool.map(work, items)))
    finally:
        pool.shutdown(wait=False)


__all__ = ["FileGraph", "Reached", "Unit"]
