"""Version compaction next to exports and a hint it cannot rewrite: what an export pins is
never deleted under its copy, and a stale hint never makes readers go back in time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.versions import list_root_versions
from lakecore.errors import AlreadyExistsError, NotFoundError, StorageError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse import export as export_module
from lakecore.maintenance import expire
from lakecore.maintenance.expire import ExpiryRefusedError, expire_in_process

FUTURE_MS = int(time.time() * 1000) + 30 * 86_400_000


def _commits(lh: Lakehouse, names: str) -> None:
    for name in names:
        with lh.transaction() as tx:
            tx.create_namespace(name)


def test_compaction_refuses_a_stale_hint_below_the_versions_it_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export pins version 3; the hint cannot be written from then on and stays at 3; six
    commits later compaction would expire 4..8. Deleting them with the hint at 3 made readers
    stop at 3 (two namespaces instead of eight) and the next commit land as version 4."""
    lh = Lakehouse.create(str(tmp_path / "lake"))
    _commits(lh, "abc")  # versions 1..3
    lh.export_snapshot("keep3", version=3)  # version 4
    monkeypatch.setattr("lakecore.core.versions.write_hint", lambda storage, version: False)

    def refused(storage: Storage, version: int) -> None:
        raise StorageError("could not write _latest_hint.txt: Permission denied")

    monkeypatch.setattr(expire, "write_hint_or_raise", refused)
    _commits(lh, "defghi")  # versions 5..10, the hint left at 4 by the export's commit
    storage = Storage(str(tmp_path / "lake"))
    (tmp_path / "lake" / "_latest_hint.txt").write_text("3")
    roots_before = list_root_versions(storage)
    with pytest.raises(
        ExpiryRefusedError, match=r"names 3, not a retained version above every version to expire"
    ):
        expire_in_process(storage, now_millis=FUTURE_MS)
    assert list_root_versions(storage) == roots_before
    assert len(Lakehouse.open(str(tmp_path / "lake")).list_namespaces()) == 9


def test_an_export_pins_its_version_before_copying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction that runs while the copy is made keeps the exported version: its root and
    the files the copy points at are still there, and the copy reads."""
    lh = Lakehouse.create(str(tmp_path / "lake"))
    _commits(lh, "abcdefghi")  # versions 1..9
    copy = export_module.copy_snapshot
    expired: list[int] = []

    def compaction_during_the_copy(*args: Any, **kwargs: Any) -> Any:
        expired.extend(
            expire_in_process(Storage(str(tmp_path / "lake")), now_millis=FUTURE_MS).plan.expired
        )
        return copy(*args, **kwargs)

    monkeypatch.setattr("lakecore.lakehouse.lakehouse.copy_snapshot", compaction_during_the_copy)
    lh.export_snapshot("snap", "minimal", target=str(tmp_path / "copy"), version=3)
    assert expired and 3 not in expired
    assert 3 in list_root_versions(Storage(str(tmp_path / "lake")))
    assert Lakehouse.open(str(tmp_path / "copy")).list_namespaces() == ["a", "b", "c"]


def test_an_export_of_a_version_expired_before_its_record_landed_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction past its re-check of exports deletes the root while the record commits:
    the export says so, copies nothing and takes its record back."""
    lh = Lakehouse.create(str(tmp_path / "lake"))
    _commits(lh, "abcdefghi")
    storage = Storage(str(tmp_path / "lake"))
    update = Lakehouse.update_definition

    def record_then_lose_the_root(self: Lakehouse, change: Any) -> int:
        version = update(self, change)
        if "snap" in self.lakehouse_def.exported_snapshots:
            storage.delete([root_node_file_name(3)])
        return version

    monkeypatch.setattr(Lakehouse, "update_definition", record_then_lose_the_root)
    with pytest.raises(
        NotFoundError, match=r"version 3 was expired by a version compaction while its export"
    ):
        lh.export_snapshot("snap", "minimal", target=str(tmp_path / "copy"), version=3)
    assert not (tmp_path / "copy").exists() or not any((tmp_path / "copy").iterdir())
    assert Lakehouse.open(str(tmp_path / "lake")).list_exports() == []


def test_the_second_of_two_exports_with_one_name_copies_nothing(tmp_path: Path) -> None:
    """Two stale objects export "nightly" to two targets: the second is refused at its record,
    before it writes a file (it used to leave a whole unpinned copy behind its error)."""
    Lakehouse.create(str(tmp_path / "lake"))
    first, second = Lakehouse.open(str(tmp_path / "lake")), Lakehouse.open(str(tmp_path / "lake"))
    first.export_snapshot("nightly", target=str(tmp_path / "copy1"))
    with pytest.raises(AlreadyExistsError, match="an export named 'nightly' already exists"):
        second.export_snapshot("nightly", target=str(tmp_path / "copy2"))
    assert not (tmp_path / "copy2").exists() or not any((tmp_path / "copy2").iterdir())


def test_an_interrupted_copy_takes_its_record_back(tmp_path: Path) -> None:
    """Ctrl-C during a full copy: the interrupt goes on, and the record made before the copy
    is gone again, so nothing pins the version for a copy that never finished."""
    lh = Lakehouse.create(str(tmp_path / "lake"))
    _commits(lh, "a")

    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lh.export_snapshot("x", "full", target=str(tmp_path / "copy"), copy_files=interrupted)
    assert Lakehouse.open(str(tmp_path / "lake")).list_exports() == []
