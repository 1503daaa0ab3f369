"""The clocks a maintenance job's "now" is read from, and ``--now`` and the grace period against them.

A ``--now`` is how a scheduler makes a retry decide the same (Airflow's ``data_interval_end``)
and how a test ages a lakehouse. In the past it only makes a job do less than it could. In the
future it makes the job act on files and versions younger than its settings allow: gc's grace
period shrinks by as much, and compaction expires versions before their age. So a ``--now``
more than ``CLOCK_SKEW_TOLERANCE_MILLIS`` ahead of the clock is refused unless the operator
says they mean it (a mistyped year is the usual cause).

The store's clock
    gc ages a file by its modification time, which the *store* gives it: on S3 the time S3
    received it, by S3's clock. A driver whose clock runs ahead of the store's (a host without
    NTP, a VM resumed from a snapshot) would see every file as older than it is and shorten
    the grace period by the difference: hours of skew, and a commit in flight loses its files.
    So gc reads the store's clock (``Storage.clock_millis``: the Date of one listing, rounded
    up to its next whole second, so clocks that agree leave this machine's in charge) and takes
    the *earlier* of the two as its now (``Clocks.now_millis``): a file is never judged older
    than this machine's clock says, nor by more than the Date's lost fraction of a second
    older than the store's. A store whose clock cannot be read without a write
    (a local root, dated by this machine's kernel; the generic fsspec schemes) leaves this
    machine's clock alone in charge, and so does an S3 answer without a readable Date, which
    the job then says. Not covered: a shared mount's files are dated by its server, and a store
    of several nodes (MinIO, Ceph) may date a file by another node's clock than the one that
    answers the listing; both want their clocks kept right by NTP.

Commit timestamps are another clock: the writers' (``lakecore.core.commit``). Version compaction
ages a version by its commit timestamp against the same earlier of the two clocks: a driver
ahead of the store would otherwise expire versions before their age, for good. The store's
clock stands in for the writers' there (they write to it; nothing else of theirs can be asked),
so a store behind its writers keeps versions longer than their age, never shorter.

The grace period
    A deleting job (gc, table maintenance) deletes only files older than its grace period
    (``--older-than``, else a setting: ``grace_millis_of``). A commit writes its files before the
    pointer that makes them live, so a grace period shorter than the longest commit (one hour,
    ``MIN_GRACE_SECONDS``, or the commit timeout if longer) could delete the files of a commit
    in flight, and a ``--now`` ahead of the clocks shortens it by as much: both are refused
    unless the operator passes ``--i-understand-grace-risk`` (``check_grace``;
    ``check_grace_options`` for a run's options, which returns the run's now).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final, Protocol

from lakecore.core.storage import Storage
from lakecore.core.units import (
    format_duration_millis,
    format_seconds,
    format_time_millis,
    parse_duration_millis,
)
from lakecore.errors import UnsafeOptionError

# How far --now may run ahead of the clock, and how far the driver's and the store's clocks may
# differ before a job says so: the clocks of a scheduler, a cluster and a store differ.
CLOCK_SKEW_TOLERANCE_MILLIS: Final = 5 * 60 * 1000

THIS_MACHINE: Final = "this machine's clock"
THE_STORE: Final = "the store's clock"

# Shorter than any sane commit: below it a deleting job could delete the files of a commit in flight.
MIN_GRACE_SECONDS: Final = 3600


@dataclass(frozen=True)
class Clocks:
    """This machine's clock and the store's (None: not to be had), read at one moment."""

    machine_millis: int
    store_millis: int | None = None
    store_unreadable: bool = False  # the store keeps a clock, but its answer gave no readable date

    @property
    def now_millis(self) -> int:
        """The earlier of the two clocks: the "now" files are aged by."""
        if self.store_millis is None:
            return self.machine_millis
        return min(self.machine_millis, self.store_millis)

    @property
    def now_name(self) -> str:
        """Which clock ``now_millis`` is, for messages."""
        if self.store_millis is not None and self.store_millis < self.machine_millis:
            return THE_STORE
        return THIS_MACHINE

    @property
    def skew_millis(self) -> int | None:
        """This machine's clock minus the store's (positive: this machine is ahead), or None."""
        return None if self.store_millis is None else self.machine_millis - self.store_millis

    def note(self, aged: str | None = "files") -> str | None:
        """One line when the clocks differ beyond the tolerance or the store's could not be
        read, else None. ``aged``: what the job aged by the clocks; None when a ``--now`` given
        aged them instead (the line then only says the clocks differ)."""
        if self.store_unreadable:
            if aged is None:
                return None  # nothing was aged by a clock: there is nothing to say about one
            return (
                f"the store's answer carried no readable Date, so {aged} were aged by this machine's clock "
                "alone: keep it right (NTP)"
            )
        skew = self.skew_millis
        if skew is None or abs(skew) <= CLOCK_SKEW_TOLERANCE_MILLIS:
            return None
        side = "ahead of" if skew > 0 else "behind"
        aged_by = (
            f": {aged} were aged by the earlier of the two"
            if aged is not None
            else " (--now was given)"
        )
        return (
            f"this machine's clock is {format_seconds(abs(skew) / 1000)} {side} the store's{aged_by}; "
            "set this machine's clock right (NTP)"
        )

    def as_details(self) -> dict[str, int | None]:
        """The clocks for a JSON report."""
        return {
            "machine_clock_millis": self.machine_millis,
            "store_clock_millis": self.store_millis,
            "clock_skew_millis": self.skew_millis,
        }


def machine_clock_millis() -> int:
    """This machine's clock, in epoch milliseconds."""
    return int(time.time() * 1000)


def read_clocks(storage: Storage) -> Clocks:
    """This machine's clock and ``storage``'s, read one after the other (one request on S3;
    this machine's first, so a slow answer makes its now no later than the store's). A failure
    to read the store's is the store's failure (``StorageError``): a job that lists the store
    next would fail the same way, and must not fall back to a clock it cannot check."""
    machine = machine_clock_millis()
    store = storage.clock_millis()
    return Clocks(machine, store, store_unreadable=store is None and storage.keeps_its_own_clock)


def ahead_of_clock(
    now_millis: int, clock_millis: int, clock_name: str = THIS_MACHINE
) -> str | None:
    """ "--now T is D ahead of <clock_name>" when it is beyond the tolerance, else None."""
    if now_millis <= clock_millis + CLOCK_SKEW_TOLERANCE_MILLIS:
        return None
    return (
        f"--now {format_time_millis(now_millis)} is "
        f"{format_seconds((now_millis - clock_millis) / 1000)} ahead of {clock_name}"
    )


def check_grace(
    grace_seconds: float,
    *,
    commit_timeout_seconds: float,
    now_millis: int,
    clocks: Clocks,
    override: bool,
    job: str,
) -> None:
    """Refuse a grace period (or a ``--now`` ahead of the earlier of ``clocks``, which shortens
    it) that could delete the files of a commit in flight, unless ``override``; ``job`` names
    the job in the refusal."""
    said = format_duration_millis(round(abs(grace_seconds) * 1000))
    if grace_seconds < 0:
        raise UnsafeOptionError(f"--older-than -{said} is negative")
    if override:
        return
    floor = max(float(MIN_GRACE_SECONDS), float(commit_timeout_seconds))
    if grace_seconds < floor:
        raise UnsafeOptionError(
            f"--older-than {said} is shorter than {format_seconds(floor)} (one hour, or "
            f"the commit timeout of {format_seconds(commit_timeout_seconds)} if longer): {job} could delete the "
            "files of a commit in flight. Pass --i-understand-grace-risk to do it anyway"
        )
    ahead = ahead_of_clock(now_millis, clocks.now_millis, clocks.now_name)
    if ahead is not None:
        raise UnsafeOptionError(
            f"{ahead}, which shortens the grace period by as much. Pass --i-understand-grace-risk to do it anyway"
        )


class GraceOptions(Protocol):
    """What ``check_grace_options`` needs of a deleting run's options (``GcOptions``, and table
    maintenance's)."""

    @property
    def grace_millis(self) -> int: ...
    @property
    def now_millis(self) -> int | None: ...
    @property
    def override_grace(self) -> bool: ...
    @property
    def commit_timeout_seconds(self) -> float: ...


def grace_millis_of(older_than_millis: int | None, setting: str, what: str) -> int:
    """The grace period: ``--older-than`` when given, else the setting ``what`` (a duration; a
    bare number is seconds)."""
    if older_than_millis is not None:
        return older_than_millis
    return parse_duration_millis(setting, what=what, plain_unit="s")


def check_grace_options(options: GraceOptions, clocks: Clocks, *, job: str) -> int:
    """``check_grace`` of ``options`` against ``clocks`` (``job`` names the job in a refusal);
    returns the run's ``now``: the one given, else the earlier of the clocks (files are aged by
    it)."""
    now = options.now_millis if options.now_millis is not None else clocks.now_millis
    check_grace(
        options.grace_millis / 1000,
        commit_timeout_seconds=options.commit_timeout_seconds,
        now_millis=now,
        clocks=clocks,
        override=options.override_grace,
        job=job,
    )
    return now


__all__ = [
    "CLOCK_SKEW_TOLERANCE_MILLIS",
    "MIN_GRACE_SECONDS",
    "Clocks",
    "GraceOptions",
    "ahead_of_clock",
    "check_grace",
    "check_grace_options",
    "grace_millis_of",
    "machine_clock_millis",
    "read_clocks",
]
