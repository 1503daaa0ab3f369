"""The clocks maintenance jobs age files by: this machine's and the store's."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecore.core.storage import Storage
from lakecore.errors import UnsafeOptionError
from lakecore.maintenance.clock import (
    CLOCK_SKEW_TOLERANCE_MILLIS,
    Clocks,
    ahead_of_clock,
    check_grace,
    read_clocks,
)
from lakecore.maintenance.expire import check_expiry_now

HOUR = 3600 * 1000
T = 1_795_800_000_000


def test_without_a_store_clock_this_machine_decides_alone() -> None:
    clocks = Clocks(T)
    assert clocks.now_millis == T
    assert clocks.skew_millis is None and clocks.note() is None
    unreadable = Clocks(T, store_unreadable=True)
    assert unreadable.now_millis == T
    assert unreadable.note() == (
        "the store's answer carried no readable Date, so files were aged by this "
        "machine's clock alone: keep it right (NTP)"
    )
    assert clocks.as_details() == {
        "machine_clock_millis": T,
        "store_clock_millis": None,
        "clock_skew_millis": None,
    }


def test_a_machine_ahead_of_the_store_ages_files_by_the_store() -> None:
    clocks = Clocks(T + 3 * HOUR, store_millis=T)
    assert clocks.now_millis == T
    assert clocks.now_name == "the store's clock"
    assert clocks.skew_millis == 3 * HOUR
    assert clocks.note() == (
        "this machine's clock is 3h ahead of the store's: files were aged by the "
        "earlier of the two; set this machine's clock right (NTP)"
    )


def test_a_machine_behind_the_store_keeps_its_own_earlier_now() -> None:
    clocks = Clocks(T, store_millis=T + HOUR)
    assert clocks.now_millis == T
    assert clocks.now_name == "this machine's clock"
    assert clocks.skew_millis == -HOUR
    note = clocks.note()
    assert note is not None and "1h behind the store's" in note


def test_skew_within_the_tolerance_says_nothing() -> None:
    assert Clocks(T + CLOCK_SKEW_TOLERANCE_MILLIS, store_millis=T).note() is None
    assert Clocks(T - CLOCK_SKEW_TOLERANCE_MILLIS, store_millis=T).note() is None
    assert Clocks(T + CLOCK_SKEW_TOLERANCE_MILLIS + 1000, store_millis=T).note() is not None


def test_a_now_ahead_of_the_store_clock_is_refused_unless_the_operator_means_it() -> None:
    clocks = Clocks(T + 3 * HOUR, store_millis=T)

    def check(now_millis: int, *, override: bool) -> None:
        check_grace(
            86400,
            commit_timeout_seconds=600,
            now_millis=now_millis,
            clocks=clocks,
            override=override,
            job="gc",
        )

    # The scheduler's --now by this machine's clock: 3 h ahead of the clock that dates the files.
    with pytest.raises(
        UnsafeOptionError,
        match=r"is 3h ahead of the store's clock, which shortens the grace period",
    ):
        check(T + 3 * HOUR, override=False)
    check(T + 3 * HOUR, override=True)
    check(T, override=False)
    assert ahead_of_clock(T + HOUR, T) is not None and "this machine's clock" in str(
        ahead_of_clock(T + HOUR, T)
    )


def test_version_expiry_judges_its_now_by_the_same_earlier_clock() -> None:
    clocks = Clocks(T + 3 * HOUR, store_millis=T)
    assert clocks.note(aged="versions") == (
        "this machine's clock is 3h ahead of the store's: versions were aged "
        "by the earlier of the two; set this machine's clock right (NTP)"
    )
    # A --now given aged them, not a clock: the line only says the clocks differ.
    assert clocks.note(aged=None) == (
        "this machine's clock is 3h ahead of the store's (--now was given); "
        "set this machine's clock right (NTP)"
    )
    assert Clocks(T, store_unreadable=True).note(aged=None) is None
    # This machine's now is 3 h ahead of the store's: versions would expire 3 h before their age.
    with pytest.raises(
        UnsafeOptionError,
        match=r"is 3h ahead of the store's clock: versions would expire before "
        r"their age.*--i-understand-expiry-risk",
    ):
        check_expiry_now(T + 3 * HOUR, clocks, override=False)
    # Allowed, it says what it allowed (a dry run's summary line); within the tolerance, nothing.
    assert "3h ahead of the store's clock" in str(
        check_expiry_now(T + 3 * HOUR, clocks, override=True)
    )
    assert check_expiry_now(T + CLOCK_SKEW_TOLERANCE_MILLIS, clocks, override=False) is None
    assert check_expiry_now(T - HOUR, Clocks(T), override=False) is None
    with pytest.raises(UnsafeOptionError, match=r"ahead of this machine's clock"):
        check_expiry_now(T + HOUR, Clocks(T), override=False)


def test_a_local_root_has_no_clock_of_its_own(tmp_path: Path) -> None:
    clocks = read_clocks(Storage(str(tmp_path)))
    assert clocks.store_millis is None and clocks.now_millis == clocks.machine_millis
