"""Group commit: many changes to a lakehouse version, as databases batch their log writes.

Every commit of a lakehouse creates the next root file, one writer at a time; on S3 a root
write is a few requests of tens of milliseconds, so one change per version caps a lakehouse at
some commits a second. ``GroupCommitter`` puts the changes that arrive while one root write is
in flight into the next version together. Its user (the Iceberg catalog, ``lakecore.iceberg``)
says how to begin a transaction, how to commit it, and which of its errors mean "another
writer changed what this batch changes" (``retryable``) and "the outcome is unknown".

Rules:

* **Units.** A unit is one change as its caller asked for it: one table's commit, a
  multi-table transaction (all its tables or none), a create, a drop, a rename. ``run(apply)``
  queues it and returns its answer once the root holding it exists (or raises its own error).
* **Leader and followers; no thread of its own.** The thread that queues a unit while no batch
  is being committed leads: it takes up to ``max_batch`` units from the head of the queue (its
  own first), commits them, then hands the lead to the thread of the oldest unit still queued
  and returns. Units that arrive meanwhile wait in the queue for the next batch. With
  ``max_wait_seconds`` the leader, holding fewer than ``max_batch``, waits that long for more
  before it stages (0, the default: a batch is what queued during the previous root write).
* **Lingering for the writers just answered.** Writers that commit in a loop send their next
  change a few milliseconds after their answer; by then the next batch has left without them,
  and a closed loop of N writers takes turns in two batches of N/2, each change waiting two
  root writes. So a leader waits up to ``linger_seconds`` (10 ms by default) for as many
  arrivals as the previous batch answered; N writers then share one batch. A wait that ends
  with them missing (callers with work of their own between commits) turns the lingering off
  for ``LINGER_BACKOFF_BATCHES`` batches, so that such callers do not pay it every time. A lone
  writer never lingers: its own next change is the arrival its leader would wait for.
* **Staged in order, on what the batch built so far.** Each unit stages into the batch's one
  lakecore transaction, whose reads see the units before it. A unit whose own checks fail (a
  requirement, a name, a location) is rolled back to the savepoint taken before it and
  answered alone; it never fails the others.
* **Staged at once, checked beside.** A batch stands first on the latest version this process
  knows (its own last commit, or what a read saw since), without a request; a check of the
  latest version that started after every unit was queued runs meanwhile, beside the staging
  and the file writes. If it finds a newer version, the staged units commit anyway (the
  lakecore commit rebases them, or a change to one of their objects stages the batch again),
  and a unit refused on the older version is judged again on the newer one before it is
  answered: no answer rests on a version older than its request.
* **Files before the root.** The new files the units stage (Iceberg metadata files) and the
  transaction's definitions are written side by side, with the read of the hint the root's
  create needs, once all are staged; then the root. A batch costs two round trips on an
  object store: the files, then the root.
* **A lost race.** The lakecore commit rebases by itself onto versions that changed other
  objects. When another writer changed an object of the batch (another process committed to
  one of its tables), the whole batch is staged again on the new latest version and only a
  unit whose own checks then fail is refused; after ``BATCH_ATTEMPTS`` stagings every unit
  left is answered that error (its client retries).
* **Answered at the root.** A unit is answered once the root holding it exists; on an object
  store the hint follows off the path (``BackgroundHint``: one write in flight, newest wins),
  so neither the answer nor the next batch waits for its round trip. On local disk it is
  written before the answer (``HINT_BEFORE_THE_ANSWER_SCHEMES``).
* **Unknown is unknown.** If the root write's outcome is unknown, every unit of the batch gets
  that error; any other failure of the commit, every unit of the batch gets too, and nothing of
  it landed.
* ``max_batch=1`` commits one unit per version, in arrival order: the behaviour before group
  commit (``lakecore serve --no-group-commit``).
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from lakecore.core.background_hint import BackgroundHint
from lakecore.core.commit import CommitPolicy
from lakecore.core.storage import Storage, request_pool
from lakecore.core.versions import read_hint
from lakecore.core.view import LakehouseView
from lakecore.errors import CommitConflictError, CommitStateUnknownError, VersionExpiredError
from lakecore.lakehouse.transaction import Savepoint, Transaction

T = TypeVar("T")

# Stagings of one batch that lost to a writer changing one of its objects, before its units are
# refused (each restaging reads the new version's changed tables again).
BATCH_ATTEMPTS: Final = 5
# New files of one batch written at once (each a round trip on an object store): a batch's
# metadata files and definitions go out in one wave.
FILE_WRITE_THREADS: Final = 64
# The batch's check of the latest version and its read of the hint, beside its file writes.
CHECK_THREADS: Final = 2
# The defaults of ``lakecore serve`` (docs/scaling.md measures why): batches of up to 64 units,
# and no waiting for a batch to fill.
DEFAULT_MAX_BATCH: Final = 64
DEFAULT_MAX_WAIT_SECONDS: Final = 0.0
# How long a leader waits for the callers its previous batch answered to send their next
# change (a closed loop of writers then shares one batch instead of alternating between two),
# and the batches it does not wait after a wait in vain.
DEFAULT_LINGER_SECONDS: Final = 0.010
LINGER_BACKOFF_BATCHES: Final = 16
# The most changes a batch may hold, and the longest wait: beyond these a batch's one
# transaction grows past what a request should wait for.
MAX_BATCH_LIMIT: Final = 4096
MAX_WAIT_MILLIS_LIMIT: Final = 10_000
# Stores whose hint is written before the answer, as Lakehouse writes it: a local write is an
# fsync, not a round trip, and a local lakehouse is what tools and tests list right after a
# change (a hint written later shows up there as a temporary file of its atomic write).
HINT_BEFORE_THE_ANSWER_SCHEMES: Final = ("file", "memory")


@dataclass
class BatchSavepoint:
    transaction: Savepoint
    files: dict[str, Callable[[], None]]


class Batch:
    """What the units of one batch stage into: one lakecore transaction, and the new files to
    write before its root."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self._files: dict[str, Callable[[], None]] = {}

    def write_before_root(self, location: str, write: Callable[[], None]) -> None:
        """Write the file at ``location`` (by calling ``write``) before the root, unless the
        unit that staged it is rolled back or the batch does not commit."""
        self._files[location] = write

    def savepoint(self) -> BatchSavepoint:
        return BatchSavepoint(self.tx.savepoint(), dict(self._files))

    def rollback_to(self, savepoint: BatchSavepoint) -> None:
        self.tx.rollback_to(savepoint.transaction)
        self._files = dict(savepoint.files)

    def write_files(self) -> None:
        """Write the staged files, and the transaction's definition files, side by side (an
        error goes to the caller: nothing of the batch is committed then).

        Each write is one request, run in the process's request pool (a pool per batch started
        threads for every commit); the definitions are written from this thread meanwhile."""
        pool = request_pool(FILE_WRITE_THREADS)
        pending = [pool.submit(write) for write in self._files.values()]
        try:
            self.tx.write_new_files()
        finally:
            # Every write has ended before an error is raised: none lands after the caller
            # has given the batch up.
            errors = [f.exception() for f in pending]
        for error in errors:
            if error is not None:
                raise error


class _Unit(Generic[T]):
    def __init__(self, apply: Callable[[Batch], T]) -> None:
        self.apply = apply
        self.wake = threading.Event()  # done, or this unit's thread is to lead
        self.lead = False
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None

    def finish(self, result: T | None = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.done = result, error, True
        self.wake.set()

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set by finish when no error


@dataclass
class CommitStats:
    """What the committer did, for the server's metrics (read without a lock: counters)."""

    batches: int = 0
    units_committed: int = 0
    units_refused: int = 0
    restagings: int = 0
    linger_misses: int = 0
    root_conflicts: int = 0
    unknown: int = 0
    batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=4096))


class GroupCommitter:
    """Commits units in batches (see the module docstring).

    ``latest()`` is the latest version, from a check that started after the call;
    ``begin(view)`` gives a transaction on ``view``, or with None on the latest version the
    caller knows without asking the store; ``commit(tx)`` commits it, raising one of
    ``retryable`` when an object of the batch was changed by another writer (the batch is
    then staged again), one of ``unknown`` when the outcome is unknown, and any other error
    when nothing landed; ``landed(tx)`` is told about each committed transaction before its
    units are answered. A unit that meets ``VersionExpiredError`` while it is staged (the
    batch's version was expired under it) makes the whole batch start again, after
    ``stale()``: the next ``latest()`` must look at the store afresh. ``hint_reader`` reads
    the hint a batch's root create needs (the caller may learn from it)."""

    def __init__(
        self,
        latest: Callable[[], LakehouseView],
        begin: Callable[[LakehouseView | None], Transaction],
        commit: Callable[[Transaction], None],
        landed: Callable[[Transaction], None],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS,
        retryable: tuple[type[Exception], ...] = (CommitConflictError,),
        unknown: tuple[type[Exception], ...] = (CommitStateUnknownError,),
        stale: Callable[[], None] | None = None,
        hint_reader: Callable[[Storage], int | None] = read_hint,
        linger_seconds: float = DEFAULT_LINGER_SECONDS,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if max_wait_seconds < 0:
            raise ValueError(f"max_wait_seconds must not be negative, got {max_wait_seconds}")
        self._latest = latest
        self._begin = begin
        self._commit = commit
        self._landed = landed
        self.max_batch = max_batch
        self.max_wait_seconds = max_wait_seconds
        self._retryable = retryable
        self._unknown = unknown
        self._stale = stale
        self._read_hint = hint_reader
        self.stats = CommitStats()
        self._lock = threading.Condition()
        self._queue: deque[_Unit[Any]] = deque()
        self._leading = False
        self.linger_seconds = linger_seconds
        self._expected = 0  # callers the last batch answered that have not come back yet
        self._linger_off = 0  # batches left without lingering, after one that waited in vain
        self.hint: BackgroundHint | None = None  # made by the first batch, for its storage
        # The batch's check and hint read run here, not in the request pool: a check that
        # finds a new version reads it through that pool, and must never wait behind itself.
        self._beside = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="lakecore-batch-check")

    def run(self, apply: Callable[[Batch], T]) -> T:
        """Queue a unit and answer it once committed (see the module docstring)."""
        unit = _Unit(apply)
        with self._lock:
            self._queue.append(unit)
            if self._expected:
                self._expected -= 1
            lead = not self._leading
            self._leading = True
            self._lock.notify_all()
        if not lead:
            unit.wake.wait()
            if not unit.lead:
                return unit.outcome()
        self._lead(unit)
        return unit.outcome()

    def _lead(self, own: _Unit[Any]) -> None:
        batch: list[_Unit[Any]] = []
        try:
            batch = self._take()
            assert batch and batch[0] is own  # the leader's unit heads the queue
            self._commit_batch(batch)
        except BaseException as exc:
            for unit in batch:
                if not unit.done:
                    unit.finish(error=exc)
            raise
        finally:
            with self._lock:
                # The callers just answered are likely to send their next change soon.
                self._expected = len(batch)
                if self._queue:
                    successor = self._queue[0]
                    successor.lead = True
                    successor.wake.set()
                else:
                    self._leading = False

    def _take(self) -> list[_Unit[Any]]:
        """Up to ``max_batch`` units from the head of the queue, after waiting up to
        ``max_wait_seconds`` for it to hold that many, and up to ``linger_seconds`` for the
        callers the last batch answered to come back (see the module docstring)."""
        started = time.monotonic()
        deadline = started + self.max_wait_seconds
        with self._lock:
            linger = self.linger_seconds > 0 and self._expected > 0 and not self._linger_off
            linger_until = started + self.linger_seconds if linger else started
            while len(self._queue) < self.max_batch:
                until = max(deadline, linger_until if self._expected > 0 else started)
                left = until - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            if linger and self._expected > 0:
                # They did not come back in time (callers with work of their own between
                # commits): no lingering for a while, so as not to delay every batch.
                self.stats.linger_misses += 1
                self._linger_off = LINGER_BACKOFF_BATCHES
            elif self._linger_off:
                self._linger_off -= 1
            self._expected = 0
            return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]

    def _commit_batch(self, units: list[_Unit[Any]]) -> None:
        self.stats.batches += 1
        self.stats.batch_sizes.append(len(units))
        live = units
        last_error: Exception = CommitConflictError("the batch was staged too many times")
        for attempt in range(BATCH_ATTEMPTS):
            # The first staging stands on the latest version this process knows, while a check
            # that started after every unit of the batch was queued runs beside the staging
            # and the file writes; a later staging stands on the latest version, checked first.
            check = None if attempt else self._beside.submit(self._latest)
            try:
                tx = self._begin(None if check is not None else self._latest())
            except BaseException:
                _settle(check)
                raise
            batch = Batch(tx)
            staged, refused, expired = self._stage(batch, live)
            if expired is not None:
                # The version the batch stands on was expired under it (version compaction
                # between the look at the latest version and a read): not a unit's fault; the
                # batch starts again on the latest.
                tx.abort()
                _settle(check)
                self.stats.restagings += 1
                last_error = expired
                if self._stale is not None:
                    self._stale()
                continue
            try:
                if staged:
                    tx.policy = self._policy_for(tx)
                    batch.write_files()
                moved = check is not None and _moved(check, tx)
            except Exception as exc:
                _settle(check)
                tx.abort()
                self._fail(staged, exc)
                judged = check is None or (check.exception() is None and not _moved(check, tx))
                self._refuse(refused, None if judged else exc)
                return
            # A unit refused on a version older than the latest is judged again on the latest,
            # after the others commit (they rebase onto it by themselves).
            again = [unit for unit, _ in refused] if moved else []
            if not moved:
                self._refuse(refused, None)
            if staged:
                try:
                    self._commit(tx)
                except self._retryable as exc:
                    self.stats.restagings += 1
                    last_error = exc
                    live = staged + again
                    continue
                except Exception as exc:
                    self._fail(staged + again, exc)
                    return
                if tx.outcome is not None:
                    self.stats.root_conflicts += tx.outcome.conflicts
                self._landed(tx)
                self.stats.units_committed += len(staged)
                for unit in staged:
                    unit.finish(unit.result)
            else:
                tx.abort()
            if not again:
                return
            self.stats.restagings += 1
            live = again
        self._fail(live, last_error)

    def _stage(
        self, batch: Batch, units: list[_Unit[Any]]
    ) -> tuple[list[_Unit[Any]], list[tuple[_Unit[Any], Exception]], VersionExpiredError | None]:
        """Each unit staged on what the batch built before it: the staged units, the refused
        ones (rolled back to their savepoints) with their errors, or the VersionExpiredError
        that stopped the staging."""
        staged: list[_Unit[Any]] = []
        refused: list[tuple[_Unit[Any], Exception]] = []
        for unit in units:
            savepoint = batch.savepoint()
            try:
                unit.result = unit.apply(batch)
            except VersionExpiredError as exc:
                return staged, refused, exc
            except Exception as exc:
                batch.rollback_to(savepoint)
                refused.append((unit, exc))
            else:
                staged.append(unit)
        return staged, refused, None

    def _refuse(
        self, refused: list[tuple[_Unit[Any], Exception]], instead: Exception | None
    ) -> None:
        """Answer each refused unit its own error (or ``instead``, when the version it was
        judged on could not be confirmed as the latest)."""
        for unit, error in refused:
            self.stats.units_refused += 1
            if instead is None:
                unit.finish(error=error)
            else:
                self._fail([unit], instead)

    def _policy_for(self, tx: Transaction) -> CommitPolicy:
        """The batch's commit policy: the hint read beside the batch's file writes, and, on an
        object store, written after the answers (``BackgroundHint``)."""
        storage = tx.lakehouse.storage
        policy = tx.policy or tx.lakehouse.commit_policy
        hint_read = self._beside.submit(self._read_hint, storage)
        if storage.scheme in HINT_BEFORE_THE_ANSWER_SCHEMES:
            return dataclasses.replace(policy, hint_read=hint_read)
        if self.hint is None or self.hint.storage is not storage:
            self.hint = BackgroundHint(storage)
        return dataclasses.replace(policy, hint=self.hint, hint_read=hint_read)

    def _fail(self, units: list[_Unit[Any]], error: Exception) -> None:
        if isinstance(error, self._unknown):
            self.stats.unknown += len(units)
        for unit in units:
            # An exception of its own for each waiting thread (raised in several at once, one
            # object would collect all their tracebacks).
            own = copy.copy(error)
            own.__cause__ = error.__cause__
            unit.finish(error=own)


def _settle(check: Future[LakehouseView] | None) -> None:
    """Wait for a batch's check to end (its outcome is not needed any more)."""
    if check is not None:
        wait([check])


def _moved(check: Future[LakehouseView], tx: Transaction) -> bool:
    """Whether the check found a version newer than the one ``tx`` stands on."""
    return check.result().version > tx.base.version


__all__ = [
    "BATCH_ATTEMPTS",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_WAIT_SECONDS",
    "HINT_BEFORE_THE_ANSWER_SCHEMES",
    "MAX_BATCH_LIMIT",
    "MAX_WAIT_MILLIS_LIMIT",
    "Batch",
    "CommitStats",
    "GroupCommitter",
]
