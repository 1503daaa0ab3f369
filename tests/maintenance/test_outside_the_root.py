"""Nothing outside the lakehouse root is listed or deleted, whatever links or neighbours lie
about it: a hash directory that is a symlink to another lakehouse's is not this one's."""

from __future__ import annotations

import os
import time
from pathlib import Path

from lakecore.core.storage import Storage
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.gc import gc_in_process

DAY_MS = 86_400_000


def _lakehouse(path: Path, namespaces: str) -> Lakehouse:
    lh = Lakehouse.create(str(path))
    for name in namespaces:
        with lh.transaction() as tx:
            tx.create_namespace(name)
    return lh


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def _age(root: Path, days: int) -> None:
    then = time.time() - days * 86_400
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def _a_directory_only_b_uses(a: Path, b: Path) -> str:
    used_by_a = {p.name for p in a.iterdir() if p.is_dir()}
    for directory in sorted(p.name for p in b.iterdir() if p.is_dir()):
        if directory not in used_by_a and len(directory) == 4:
            return directory
    raise AssertionError("the two lakehouses share every hash directory; add namespaces to b")


def test_gc_does_not_delete_through_a_symlinked_hash_directory(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _lakehouse(a, "xy")
    _lakehouse(b, "abcdefghijklmnop")
    _age(b, 10)
    linked = _a_directory_only_b_uses(a, b)
    (a / linked).symlink_to(b / linked, target_is_directory=True)
    before = _files(b)
    now = int(time.time() * 1000)
    # flat_listing_max_files=0: the hash directories are listed one by one, as for any
    # lakehouse of more than 10,000 files (the flat listing of the root never followed links).
    for flat_max in (0, 10_000):
        result = gc_in_process(
            Storage(str(a)), now_millis=now, grace_millis=DAY_MS, flat_listing_max_files=flat_max
        )
        assert result.deleted.requested == 0 and result.deleted.deleted == 0, (
            flat_max,
            result.deleted,
        )
    assert _files(b) == before
    assert Lakehouse.open(str(b)).list_namespaces()


def test_the_local_backend_neither_lists_nor_deletes_through_a_linked_directory(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _lakehouse(a, "")
    (b / "0001" / "0010").mkdir(parents=True)
    victim = b / "0001" / "0010" / "file"
    victim.write_bytes(b"keep me")
    (a / "0001").symlink_to(b / "0001", target_is_directory=True)
    storage = Storage(str(a))
    assert storage.list("0001") == []
    assert storage.list("0001/0010") == []
    assert storage.list_paths("0001").paths == []
    assert storage.delete(["0001/0010/file"]) == 0
    assert victim.read_bytes() == b"keep me"


def test_a_root_reached_through_a_symlink_still_lists_and_deletes(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _lakehouse(real, "xy")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    storage = Storage(str(tmp_path / "link"))
    listed = {
        info.path
        for d in (
            "0000",
            "0001",
            "0010",
            "0011",
            "0100",
            "0101",
            "0110",
            "0111",
            "1000",
            "1001",
            "1010",
            "1011",
            "1100",
            "1101",
            "1110",
            "1111",
        )
        for info in storage.list(d)
    }
    assert listed and listed <= _files(real)
    orphan = next(iter(sorted(listed)))
    assert storage.delete([orphan]) == 1
    assert orphan not in _files(real)
