"""Reading the retained versions: strict, except for roots a repair has rolled past."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.errors import CorruptFileError
from lakecore.lakehouse import Lakehouse, repair
from lakecore.maintenance.expire import ExpiryRefusedError, expire_in_process
from lakecore.maintenance.gc import GcRefusedError, gc_in_process
from lakecore.maintenance.listing import list_top, root_version_of
from lakecore.maintenance.roots import load_roots, read_retained


def _lake(path: Path) -> Storage:
    lh = Lakehouse.create(str(path))
    for name in ("a", "b", "c"):
        with lh.transaction() as tx:
            tx.create_namespace(name)
    return lh.storage


def test_root_version_of_reads_only_root_file_names() -> None:
    assert root_version_of(root_node_file_name(5)) == 5
    assert root_version_of("_latest_hint.txt") is None
    assert root_version_of("0000/0000/0000/abc") is None


@pytest.fixture(params=["one by one", "in threads"])
def read_in_threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Roots are read on a pool where storage waits on the network (S3): the same verdicts."""
    threads = request.param == "in threads"
    monkeypatch.setattr(Storage, "waits_on_network", property(lambda self: threads))
    return threads


def test_a_damaged_root_stops_gc_and_expiry_until_a_repair_rolls_past_it(
    tmp_path: Path, read_in_threads: bool
) -> None:
    storage = _lake(tmp_path / "lake")
    assert storage.waits_on_network is read_in_threads
    storage.write(root_node_file_name(2), b"not a root")
    with pytest.raises(GcRefusedError, match="cannot be read"):
        read_retained(storage, list_top(storage))
    now = int(time.time() * 1000)
    with pytest.raises(ExpiryRefusedError):
        expire_in_process(storage, now_millis=now)

    outcome = repair.rollback(storage, to_last_valid=True, apply=True)
    assert outcome.new_version == 4 and outcome.rollback_to == 3
    loaded, abandoned = load_roots(storage, range(5), GcRefusedError)
    assert abandoned == [2] and sorted(loaded) == [0, 1, 3, 4]
    result = expire_in_process(storage, now_millis=now)
    assert result.roots.deleted == [2]
    assert gc_in_process(
        storage, now_millis=now, grace_millis=0, dry_run=True
    ).retained.roots.keys() == {0, 1, 3, 4}


def test_a_storage_failure_is_never_taken_for_damage(tmp_path: Path, read_in_threads: bool) -> None:
    """Only damaged *bytes* make a root abandoned: a root that cannot be read for another reason
    (here a directory where the file should be: the read fails with an OS error) stops gc."""
    storage = _lake(tmp_path / "lake")
    repair.rollback(storage, to_version=1, apply=True)  # a later root rolled past versions 0..3
    path = tmp_path / "lake" / root_node_file_name(2)
    path.unlink()
    path.mkdir()
    storage.write(root_node_file_name(3), b"damaged too, and younger: the older failure decides")
    with pytest.raises(GcRefusedError) as caught:
        load_roots(storage, range(5), GcRefusedError)
    assert not isinstance(caught.value.__cause__, CorruptFileError), caught.value
    assert root_node_file_name(2) in str(caught.value)
