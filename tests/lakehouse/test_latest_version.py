"""``LatestVersion``'s full look (``lakecore.lakehouse.latest``): the hint is read once a
period, or when a commit's own read of it says nothing changed, never more."""

from __future__ import annotations

from pathlib import Path

from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.latest import LatestVersion
from tests.conftest import ManualClock as Clock


def latest_over(tmp_path: Path) -> tuple[Lakehouse, LatestVersion, Clock]:
    lakehouse = Lakehouse.create(str(tmp_path / "lake"))
    clock = Clock()
    return lakehouse, LatestVersion(lakehouse.storage, full_check_seconds=10, clock=clock), clock


def test_the_hint_is_read_once_a_period(tmp_path: Path) -> None:
    _, latest, clock = latest_over(tmp_path)
    latest.view()
    latest.view()
    assert (latest.checks, latest.full_checks) == (2, 1)
    clock.now += 11
    latest.view()
    assert latest.full_checks == 2


def test_a_commits_read_of_the_hint_serves_as_the_full_look(tmp_path: Path) -> None:
    _, latest, clock = latest_over(tmp_path)
    known = latest.view()
    clock.now += 8
    latest.hint_seen(known.version, latest.now())  # a commit read the hint: nothing new
    clock.now += 8  # 16 s after the last full look, 8 after the commit's read
    latest.view()
    assert latest.full_checks == 1


def test_a_hint_above_the_known_version_makes_the_next_check_full(tmp_path: Path) -> None:
    lakehouse, latest, _ = latest_over(tmp_path)
    known = latest.view()
    with lakehouse.transaction() as tx:
        tx.create_namespace("ns")
    latest.hint_seen(known.version + 1, latest.now())
    assert latest.view().version == known.version + 1
    assert latest.full_checks == 2
