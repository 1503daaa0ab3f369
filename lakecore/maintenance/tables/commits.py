"""What table maintenance asks the catalog to commit, and what the catalog answers.

Maintenance (this package) does not import the catalog: it plans, and a ``Committer``
(``lakecore.iceberg.expiry.CatalogCommitter`` over ``LakecoreCatalog``) commits. The rules a
committer follows:

* **A batch is one lakehouse version** (``commit_expirations``), through the catalog's
  multi-table commit (``LakecoreCatalog.commit_tables``, the REST server's transactions): all
  of its tables' expirations land, or none.
* **Optimistic.** Each expiry names the metadata file it was planned on. A table whose
  current metadata is another one (a writer committed meanwhile) is planned again on its
  current metadata with the same rules and ``now`` (``replanned``), or left alone when that
  expires nothing; a table that changes again, or was dropped, is ``skipped``. A commit that
  loses its race (``CommitFailedException``) is redone on the latest version; the requirements
  (the table's UUID, every ref's snapshot) make sure no change is ever overwritten.
* **Purge marks** (``lakecore.maintenance.tables.marks``) change only through
  ``start_purges`` (``waiting`` -> ``purging``, before any file is deleted) and
  ``finish_purges`` (the mark removed, after the deletes). ``start_purges`` commits only while
  the latest version is the one the caller checked (``expected_latest``): a version committed
  since may hold the table again (a rollback), so the caller checks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lakecore.maintenance.tables.marks import PurgeMark
from lakecore.maintenance.tables.policy import SnapshotExpiry


@dataclass(frozen=True)
class PlannedExpiry:
    """One table's expiry, planned on one metadata file."""

    namespace: str
    table: str
    metadata_location: str  # the metadata file the plan was made on, as the definition names it
    table_uuid: str
    refs: dict[str, int]  # name -> snapshot id, for the commit's requirements
    partition_statistics: tuple[int, ...]  # snapshots with partition statistics
    expiry: SnapshotExpiry

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"


COMMITTED = "committed"
REPLANNED = "replanned"  # committed, planned again on metadata a writer committed meanwhile
UNCHANGED = "unchanged"  # planned again on new metadata: nothing expires there any more
SKIPPED = "skipped"  # changed again, or dropped: left alone this run


@dataclass(frozen=True)
class ExpiryAnswer:
    """What became of one planned expiry. ``metadata_location`` is the file the expiry that
    landed was planned on (the original or, replanned, the new one), ``new_metadata_location``
    the file the commit wrote; ``expiry`` what landed."""

    namespace: str
    table: str
    state: str
    metadata_location: str
    new_metadata_location: str | None = None
    expiry: SnapshotExpiry = field(default_factory=SnapshotExpiry)
    reason: str | None = None

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"

    @property
    def landed(self) -> bool:
        return self.state in (COMMITTED, REPLANNED)


@dataclass(frozen=True)
class BatchAnswer:
    version: int | None  # the lakehouse version the batch committed (None: nothing landed)
    answers: list[ExpiryAnswer]


class Committer(Protocol):
    def commit_expirations(self, batch: Sequence[PlannedExpiry]) -> BatchAnswer: ...

    def start_purges(
        self, marks: Sequence[PurgeMark], expected_latest: int
    ) -> list[PurgeMark] | None:
        """The marks now ``purging`` (committed, or already so); None when the latest version is
        not ``expected_latest`` any more (check again)."""
        ...

    def finish_purges(self, marks: Sequence[PurgeMark]) -> int | None:
        """Remove the marks; the version that did, or None when none was left to remove."""
        ...


__all__ = [
    "COMMITTED",
    "REPLANNED",
    "SKIPPED",
    "UNCHANGED",
    "BatchAnswer",
    "Committer",
    "ExpiryAnswer",
    "PlannedExpiry",
]
