"""The commit protocol: write new files, then create root ``v+1`` exclusively
(docs/format.md#commit-protocol).

    1. the caller's plan writes every new non-root node and object definition; the hint is
       read meanwhile, side by side (a round trip on an object store that need not wait)
    2. unless the hint names v+1 or later, root v+1 is created with an exclusive create;
       success commits
    3. the hint is written, best effort (or handed to a ``BackgroundHint``, which writes it
       after the commit has returned)
    on a lost race: read the latest version w, ask the caller whether its change still holds
    there (validation by value), rebase onto w and try w+1, with jittered backoff, a bounded
    number of times; then CommitConflictError.

A commit has a timeout (``CommitPolicy.timeout_seconds``, 600 s unless set): root v+1 is never
created once the commit's first new file is older than that (``CommitTimeoutError``: nothing was
committed, run it again). gc takes every file older than its grace period that no version
reaches for an orphan, and its grace may not be shorter than the commit timeout, so a commit
stalled past it (a paused process, a sync that waits on a busy disk) must not land a root that
names files gc may have deleted meanwhile. The clock counts from the transaction's first file
write (``files_since``; else from ``commit`` being called) and includes time asleep
(``commit_clock``); what it cannot bound is the root write itself, one request.

An ambiguous root write (a timeout, a dropped connection) may or may not have landed. The
committer never guesses: it reads the root back and compares it with the bytes it sent (every
attempt's bytes are unique, they carry ``created_at_millis`` and fresh node paths). If the root
cannot be read back either, CommitStateUnknownError says so. New files are never deleted on
failure: a root that landed unseen may point at them; gc removes true orphans later.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field

from lakecore.core.background_hint import BackgroundHint
from lakecore.core.locations import root_node_file_name
from lakecore.core.node import Node
from lakecore.core.storage import Storage, request_pool
from lakecore.core.units import format_seconds, plural
from lakecore.core.versions import (
    RootInfo,
    decode_root,
    encode_root,
    latest_version,
    read_hint,
    read_root,
    write_hint,
)
from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    CommitTimeoutError,
    LakecoreError,
    NotFoundError,
    StorageError,
    StorageRefusedError,
)

DEFAULT_MAX_RETRIES = 25
# The longest a commit may take, from its first new file to its root. gc's grace period may not
# be shorter than one hour or the settings' ``commit_timeout_seconds`` (whose default this is),
# whichever is longer (``lakecore.maintenance.clock``), unless the caller takes the risk.
DEFAULT_COMMIT_TIMEOUT_SECONDS = 600.0
DEFAULT_BACKOFF_BASE_SECONDS = 0.002
DEFAULT_BACKOFF_CAP_SECONDS = 0.25
# Root writes that failed ambiguously (a timeout, a reset) and had not landed when read back,
# sent again before the commit's state is declared unknown. Few: each already waited out the
# store's own timeout and retries.
AMBIGUOUS_WRITE_RETRIES = 3
# The hint is read in the process's request pool while the plan writes its files; after a
# plan that took longer than this, it is read again right before the root's create.
HINT_READ_THREADS = 2
HINT_READ_EARLY_SECONDS = 1.0


@dataclass
class RootPlan:
    """What to commit on top of a base version: the new root's content and definition."""

    node: Node
    lakehouse_def_path: str
    rollback_from_root: str | None = None


@dataclass
class CommitOutcome:
    version: int
    root: RootInfo
    attempts: int
    conflicts: int
    ambiguous_writes: int = 0
    hint_written: bool = True


def commit_clock() -> float:
    """Seconds on a clock that never steps and counts time asleep (Linux's boot time; elsewhere
    the monotonic clock): what a commit's age is measured on."""
    return time.clock_gettime(_COMMIT_CLOCK)


_COMMIT_CLOCK: int = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


@dataclass
class CommitPolicy:
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_base_seconds: float = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = DEFAULT_BACKOFF_CAP_SECONDS
    rng: random.Random = field(default_factory=random.Random)
    # When set, the hint is handed to it and written off the commit's path (group commit
    # answers its callers once the root exists); else it is written before commit returns.
    hint: BackgroundHint | None = None
    # The hint as read by the caller side by side with its own file writes, for the first
    # attempt (group commit starts it with the batch's files); else the commit reads it beside
    # its plan.
    hint_read: Future[int | None] | None = None
    # No root is created once the commit's first file is older than this (None: no limit).
    timeout_seconds: float | None = DEFAULT_COMMIT_TIMEOUT_SECONDS
    # What the commit's age is measured on (a test gives a clock it moves).
    clock: Callable[[], float] = commit_clock

    def backoff(self, attempt: int) -> float:
        # Full jitter: spreads retrying writers apart so one of them wins the next round.
        return self.rng.uniform(
            0, min(self.backoff_cap_seconds, self.backoff_base_seconds * (2**attempt))
        )


def _check_age(
    policy: CommitPolicy, since: float, storage: Storage, target: int, ambiguous: int
) -> None:
    """Refuse to create root ``target`` once the commit is older than its timeout."""
    limit = policy.timeout_seconds
    age = policy.clock() - since
    if limit is None or age <= limit:
        return
    what = (
        f"its first new file was written {format_seconds(age)} ago, past the commit timeout of "
        f"{format_seconds(limit)} (gc may take files that old for orphans)"
    )
    if ambiguous:
        raise CommitStateUnknownError(
            f"writing root {target} at {storage.uri(root_node_file_name(target))} failed "
            f"{plural(ambiguous, 'time')} and it is not sent again: {what}; an earlier write may yet land: "
            "reopen the lakehouse to see whether the commit landed before retrying it"
        )
    raise CommitTimeoutError(
        f"gave up before creating root {target}: {what}; nothing was committed, run it again"
    )


def _root_holds(storage: Storage, version: int, data: bytes) -> bool | None:
    """True if root ``version`` holds exactly ``data``, False if it holds something else,
    None if it does not exist."""
    try:
        return storage.read(root_node_file_name(version)) == data
    except NotFoundError:
        return None


def commit(
    storage: Storage,
    order: int,
    base: RootInfo,
    plan: Callable[[RootInfo], RootPlan],
    still_valid: Callable[[RootInfo], str | None],
    policy: CommitPolicy | None = None,
    *,
    now_millis: Callable[[], int] = lambda: int(time.time() * 1000),
    files_since: float | None = None,
) -> CommitOutcome:
    """Commit ``plan(base)`` as the next version; on a lost race rebase onto the latest version
    if ``still_valid(latest)`` returns None, else raise CommitConflictError with its reason.

    A root write the store refused (``StorageRefusedError``: no space, no permission) and that
    did not land is that error, at once: nothing was committed, and retrying it as a lost race
    only wrote more orphans. An ambiguous failure (a timeout, a reset) that did not land is sent
    again, the same bytes for the same version, ``AMBIGUOUS_WRITE_RETRIES`` times at most.

    ``files_since``: when (on ``policy.clock``) the caller wrote its first file for this
    commit; the timeout counts from it, or from now when None."""
    policy = policy or CommitPolicy()
    since = policy.clock() if files_since is None else files_since
    current = base
    conflicts = 0
    ambiguous = 0
    sent: dict[int, list[bytes]] = {}
    data: bytes | None = None  # kept across an ambiguous retry: its nodes are written already
    for attempt in range(policy.max_retries + 1):
        target = current.version + 1
        hint_read: Future[int | None] | None = None
        if data is None:
            if attempt == 0 and policy.hint_read is not None:
                hint_read = policy.hint_read
            else:
                hint_read = request_pool(HINT_READ_THREADS).submit(read_hint, storage)
            planning_started = time.monotonic()
            try:
                root_plan = plan(current)
            finally:
                # Ended before anything is raised or the root is created.
                wait([hint_read])
            if time.monotonic() - planning_started > HINT_READ_EARLY_SECONDS:
                # A long plan (a job writing many nodes): the hint is read again right before
                # the create, so that the window the check leaves stays as short as it was.
                hint_read = None
            data = encode_root(
                root_plan.node,
                order,
                lakehouse_def_path=root_plan.lakehouse_def_path,
                previous_root=root_node_file_name(current.version),
                created_at_millis=max(now_millis(), current.created_at_millis),
                rollback_from_root=root_plan.rollback_from_root,
            )
            sent.setdefault(target, []).append(data)
        landed: bytes | None = None
        hint = read_hint(storage) if hint_read is None else hint_read.result()
        if hint is not None and hint >= target:
            # The base is stale in a way the exclusive create cannot see: version compaction
            # may have deleted root `target` long after it was committed, and creating it again
            # would land this commit in the past, below the real latest version. Compaction
            # points the hint at a retained version before it deletes any root, so a hint at
            # or past the target means: lost race, rebase.
            pass
        else:
            _check_age(policy, since, storage, target, ambiguous)
            try:
                storage.create_exclusive(root_node_file_name(target), data)
                landed = data
            except AlreadyExistsError:
                landed = _landed_earlier(storage, target, sent[target])
            except StorageError as exc:
                holds = _read_back(storage, target, data, exc)
                if holds is None:
                    if isinstance(exc, StorageRefusedError):
                        raise StorageRefusedError(
                            f"version {target} was not committed: {exc}; nothing changed "
                            "(the root file was not created)"
                        ) from exc
                    ambiguous += 1
                    if ambiguous > AMBIGUOUS_WRITE_RETRIES:
                        raise CommitStateUnknownError(
                            f"writing root {target} at {storage.uri(root_node_file_name(target))} "
                            f"failed {ambiguous} times (last: {exc}); it had not landed when read "
                            "back, but a late write may yet: reopen the lakehouse to see whether "
                            "the commit landed before retrying it"
                        ) from exc
                    # Did not land (yet). Send the same bytes for the same version again: if
                    # the first write lands in between, the exclusive create fails and the
                    # comparison above recognises it.
                    continue
                landed = data if holds else _landed_earlier(storage, target, sent[target])
        if landed is not None:
            root = decode_root(landed, target, storage.uri(root_node_file_name(target)), order)
            if policy.hint is not None:
                policy.hint.publish(target)
                hint_written = True  # handed on; BackgroundHint counts a failed write
            else:
                hint_written = write_hint(storage, target)
            return CommitOutcome(target, root, attempt + 1, conflicts, ambiguous, hint_written)
        conflicts += 1
        data = None  # the next attempt plans on the latest version
        latest = read_root(storage, latest_version(storage), order)
        reason = still_valid(latest)
        if reason is not None:
            raise CommitConflictError(
                f"commit on version {base.version} conflicts with version {latest.version}: {reason}; "
                "reload and redo the change"
            )
        current = latest
        time.sleep(policy.backoff(attempt))
    raise CommitConflictError(
        f"gave up after {policy.max_retries + 1} attempts: other writers kept committing first "
        f"(last seen version {current.version}); retry later or raise max_retries"
    )


def _read_back(storage: Storage, target: int, data: bytes, failure: StorageError) -> bool | None:
    """After a failed root write: ``_root_holds``, or CommitStateUnknownError when the root
    cannot be read back either."""
    try:
        return _root_holds(storage, target, data)
    except LakecoreError as check_exc:
        raise CommitStateUnknownError(
            f"writing root {target} at {storage.uri(root_node_file_name(target))} failed ({failure}) "
            f"and reading it back failed too ({check_exc}); reopen the lakehouse to see whether "
            "the commit landed before retrying it"
        ) from failure


def _landed_earlier(storage: Storage, target: int, attempts: list[bytes]) -> bytes | None:
    """The bytes of root ``target`` if one of our own attempts wrote it, else None."""
    try:
        existing = storage.read(root_node_file_name(target))
    except NotFoundError:
        return None
    return existing if any(existing == data for data in attempts) else None
