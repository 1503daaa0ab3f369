"""The catalog's path to its lakehouse: the version reads see, the read-only rule, and the
group committer every change goes through.

Rules:

* **Which version reads see.** The latest, as of a check that started after the read was
  asked for (``lakecore.lakehouse.latest``: one request when nothing changed, shared by the
  reads that wait for it); with ``version=`` or ``as_of=`` that one version, for every read.
  Reads take no lock a change holds: the Lakehouse object is the committer's alone.
* **Read-only.** A catalog at a past version, or over an exported copy, refuses every change
  with ``ReadOnlyCatalogError`` before anything is written.
* **Changes are grouped.** Every change (a commit, a create, a drop, ...) is a unit of the
  group committer (``lakecore.lakehouse.group_commit``): the changes that arrive while a root
  write is in flight share the next lakehouse version, each staged on what its batch built
  before it. When another writer changed what a batch changes, the batch is staged again on
  the new latest version: each change re-checks what it relies on, so a rerun is what the
  caller asked for.
* **One transaction a batch**, on the latest version known (checked beside the batch,
  ``lakecore.lakehouse.group_commit``); the batch's new Iceberg metadata files
  are forgotten when the next batch begins (``on_new_batch``). A failure of the lakecore commit
  whose outcome is unknown is ``CommitStateUnknownException`` (``lakecore.iceberg.errors``);
  a lost race is ``CommitFailedException``, and the committer stages the batch again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

from lakecore.core.storage import Storage
from lakecore.core.versions import read_hint
from lakecore.errors import ReadOnlyLakehouseError
from lakecore.iceberg.errors import ReadOnlyCatalogError, translated
from lakecore.lakehouse import Lakehouse, LakehouseView, Transaction
from lakecore.lakehouse.group_commit import Batch, CommitStats, GroupCommitter
from lakecore.lakehouse.latest import LatestVersion

T = TypeVar("T")


class CommitPath:
    """The lakehouse a catalog reads and changes (see the module docstring)."""

    def __init__(
        self,
        lakehouse: Lakehouse,
        fixed: LakehouseView | None,
        *,
        full_check_seconds: float,
        max_batch: int,
        max_wait_seconds: float,
        linger_seconds: float,
        on_new_batch: Callable[[], None],
    ) -> None:
        """``fixed`` is the one version a time-travel catalog reads (None: the latest);
        ``on_new_batch`` runs in the committer's thread before each batch is staged."""
        self._lakehouse = lakehouse
        self._fixed = fixed
        self._on_new_batch = on_new_batch
        # Reads learn the latest version from here (one request per check, shared); the
        # Lakehouse object is the committer's alone (``_begin_batch``), so no read waits for a
        # commit's IO and no lock is shared between them.
        self._latest = LatestVersion(lakehouse.storage, full_check_seconds=full_check_seconds)
        self._latest.installed(lakehouse.root_info, lakehouse.lakehouse_def)
        self._committer = GroupCommitter(
            self._latest.view,
            self._begin_batch,
            self._commit_batch,
            self._batch_landed,
            max_batch=max_batch,
            max_wait_seconds=max_wait_seconds,
            linger_seconds=linger_seconds,
            retryable=(CommitFailedException,),
            unknown=(CommitStateUnknownException,),
            stale=self._latest.suspect,
            hint_reader=self._read_hint,
        )

    # -- reads --------------------------------------------------------------------------------

    @property
    def lakehouse(self) -> Lakehouse:
        """The lakehouse object the committer commits through (at its last batch)."""
        return self._lakehouse

    @property
    def fixed_version(self) -> int | None:
        """The one version a time-travel catalog reads; None for the live catalog."""
        return None if self._fixed is None else self._fixed.version

    def read(self) -> LakehouseView:
        """The version reads see: the fixed one, or the latest (``latest``)."""
        if self._fixed is not None:
            return self._fixed
        return self.latest()

    def known(self) -> LakehouseView | None:
        """The latest version this process knows, without asking the store (None before the
        first look): for reads that only warm caches."""
        if self._fixed is not None:
            return self._fixed
        return self._latest.known

    def latest(self) -> LakehouseView:
        """A read-only view of the latest version, as of a check that started after this call
        (``LatestVersion``: one request when nothing changed, shared by concurrent reads),
        independent of the Lakehouse object the committer moves."""
        return self._latest.view()

    def scratch_lakehouse(self) -> Lakehouse:
        """A Lakehouse object of its own at the latest version, for a transaction that only
        checks and is aborted, or that commits as another writer would (the committer then
        rebases on it)."""
        view = self.latest()
        return Lakehouse(view.storage, view.root_info, view.lakehouse_def, view.store)

    # -- the read-only rule -------------------------------------------------------------------

    def read_only_why(self, what: str) -> str | None:
        """Why ``what`` is refused (a time-travel catalog, an exported copy); None if it is not."""
        if self._fixed is not None:
            return (
                f"{what}: this catalog is read-only, opened at lakehouse version {self._fixed.version}; "
                "open it without 'version'/'as_of' to make changes"
            )
        try:
            self._lakehouse.require_writable(what)
        except ReadOnlyLakehouseError as exc:
            return str(exc)
        return None

    def refuse_read_only(self, what: str) -> None:
        """Raises ReadOnlyCatalogError when ``what`` is refused (``read_only_why``)."""
        why = self.read_only_why(what)
        if why is not None:
            raise ReadOnlyCatalogError(why)

    # -- changes ------------------------------------------------------------------------------

    def change(self, what: str, change: Callable[[Transaction], T], **translate: Any) -> T:
        """Run ``change`` in the transaction of the group committer's next batch and commit it
        with the batch (lakecore's errors translated by ``translate``); when another writer
        changed what the batch changes, it runs again on the new latest version (it re-checks
        what it relies on)."""
        self.refuse_read_only(what)

        def apply(batch: Batch) -> T:
            with translated(**translate):
                return change(batch.tx)

        return self._committer.run(apply)

    def run(self, unit: Callable[[Batch], T]) -> T:
        """Run ``unit`` as one unit of the group committer: staged into a batch (again when the
        batch is staged again), answered once the root holding it exists."""
        return self._committer.run(unit)

    @property
    def stats(self) -> CommitStats:
        """What the group committer did (batches, their sizes, conflicts), for metrics."""
        return self._committer.stats

    def settle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for what the committer writes after its answers (the
        hint); False if a write was still in flight."""
        hint = self._committer.hint
        return True if hint is None else hint.flush(timeout)

    # -- the committer's side: one transaction a batch ----------------------------------------

    def _begin_batch(self, view: LakehouseView | None) -> Transaction:
        """A transaction on ``view`` or, with None, on the latest version known without a
        request, for the committer (its thread alone moves the Lakehouse object)."""
        self._on_new_batch()
        if view is None:
            view = self._latest.known
        if view is not None and view.version > self._lakehouse.version:
            self._lakehouse.move_to(view)
        return self._lakehouse.transaction()

    def _read_hint(self, storage: Storage) -> int | None:
        """The hint, read for a batch's root; the read serves the latest version's periodic
        full look too (``LatestVersion.hint_seen``)."""
        started = self._latest.now()
        hint = read_hint(storage)
        self._latest.hint_seen(hint, started)
        return hint

    @staticmethod
    def _commit_batch(tx: Transaction) -> None:
        with translated(in_commit=True):
            tx.commit()

    def _batch_landed(self, tx: Transaction) -> None:
        if tx.outcome is not None:
            self._latest.installed(self._lakehouse.root_info, self._lakehouse.lakehouse_def)


__all__ = ["CommitPath"]
