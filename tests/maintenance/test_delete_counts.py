"""Delete counts of gc and version compaction when two runs race: a delete that finds the file
already gone is not this run's, so two racing runs' reports add up to what really went."""

from __future__ import annotations

import time
from pathlib import Path

from lakecore.core.locations import new_node_file_path
from lakecore.core.storage import Storage
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.delete import delete_files
from lakecore.maintenance.expire import delete_expired_roots, plan_expiry


def test_a_racing_delete_is_not_counted_twice(tmp_path: Path) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"))
    storage = lh.storage
    files = [(new_node_file_path(), 10) for _ in range(4)]
    for path, _ in files:
        storage.write(path, b"x" * 10)
    first = delete_files(storage, files[:3], 100)  # the other run got there first for 3 of 4
    second = delete_files(storage, files, 100)
    assert (first.deleted, first.bytes_freed, first.already_gone) == (3, 30, 0)
    assert (second.deleted, second.bytes_freed, second.already_gone) == (1, 10, 3)
    assert second.deleted_paths == [files[3][0]]


def test_a_size_looked_up_as_missing_counts_as_already_gone(tmp_path: Path) -> None:
    storage = Lakehouse.create(str(tmp_path / "lake")).storage
    outcome = delete_files(
        storage, [(new_node_file_path(), -1)], 100
    )  # UNKNOWN_SIZE, and never written
    assert (outcome.deleted, outcome.already_gone, outcome.bytes_freed) == (0, 1, 0)


def test_two_expiry_runs_racing_count_each_root_once(tmp_path: Path) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"))
    for name in "abcdef":
        with lh.transaction() as tx:
            tx.create_namespace(name)
    storage = Storage(str(tmp_path / "lake"))
    now = int(time.time() * 1000) + 10**12
    one, two = plan_expiry(storage, now), plan_expiry(storage, now)
    assert one.expired and one.expired == two.expired
    first, second = delete_expired_roots(storage, one), delete_expired_roots(storage, two)
    assert first.deleted == one.expired and first.bytes_freed > 0
    assert second.deleted == [] and second.already_gone == one.expired and second.bytes_freed == 0
