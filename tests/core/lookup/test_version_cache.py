"""Version caches backed by lookup files, and diffs between versions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from lakecore.cli import main
from lakecore.core.lookup.cache import VersionCache, diff_versions
from lakecore.lakehouse import Lakehouse


def _lake(tmp_path: Path, tables: int = 40) -> Lakehouse:
    lh = Lakehouse.create(
        str(tmp_path / "lake"),
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("a")
    for i in range(tables):
        with lh.transaction() as tx:
            tx.create_table("a", f"t{i:03d}")
    return lh


def test_cached_lookups_equal_tree_lookups(tmp_path: Path) -> None:
    lh = _lake(tmp_path)
    cache = VersionCache(tmp_path / "cache")
    view = lh.at_version(lh.version)
    keys = [k for k, _ in view.items()] + ["C===missing"]
    expected = [view.get(k) for k in keys]
    cached = lh.at_version(lh.version).use_lookup_cache(cache)
    assert [cached.get(k) for k in keys] == expected
    assert cached.get_many(list(reversed(keys))) == list(reversed(expected))
    assert cached.list_tables("a") == view.list_tables("a")
    assert cache.stats.builds == 1
    lh.at_version(lh.version).use_lookup_cache(cache)
    assert cache.stats.builds == 1 and cache.stats.hits == 1, (
        "a cached version must never be rebuilt"
    )


def test_cache_evicts_least_recently_used_under_the_cap(tmp_path: Path) -> None:
    import os
    import time

    lh = _lake(tmp_path)
    cache = VersionCache(tmp_path / "cache")
    sizes = {}
    for version in (lh.version - 2, lh.version - 1, lh.version):
        sizes[version] = cache.file_for(lh.at_version(version)).stat().st_size
        time.sleep(0.01)
    # Touch the oldest so that the middle one is the least recently used.
    oldest = cache.path_for(lh.at_version(lh.version - 2))
    os.utime(oldest)
    cap = sizes[lh.version - 2] + sizes[lh.version] + 10
    small = VersionCache(tmp_path / "cache", max_bytes=cap)
    small.file_for(lh.at_version(lh.version))  # a hit: nothing built, no eviction yet
    assert small.stats.builds == 0
    small._evict(keep=small.path_for(lh.at_version(lh.version)))
    remaining = {p.name for p in small.files()}
    assert small.path_for(lh.at_version(lh.version - 1)).name not in remaining
    assert {
        small.path_for(lh.at_version(v)).name for v in (lh.version - 2, lh.version)
    } <= remaining
    assert small.size_bytes() <= cap


def test_eviction_deletes_only_the_caches_own_files(tmp_path: Path) -> None:
    """A cache folder shared with other data (``--cache-dir ~/data``): another tool's
    ``.lookup`` files, one in a folder named like a store, and a link to a file elsewhere are
    neither counted nor evicted, however old, while the cache's own files still are."""
    import os

    lh = _lake(tmp_path)
    folder = tmp_path / "data"
    theirs = [
        folder / "paimon" / "bucket-0.lookup",
        folder / "0123456789abcdef" / "bucket-1.lookup",
        folder / "v1-0123456789ab.lookup",
    ]
    elsewhere = tmp_path / "elsewhere" / "v2-0123456789ab.lookup"
    for path in [*theirs, elsewhere]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 20_000)
        os.utime(path, (1_000_000, 1_000_000))  # 1970: the least recently used of all
    cache = VersionCache(folder, max_bytes=1)
    older = cache.file_for(lh.at_version(lh.version - 1))
    link = older.parent / "v3-0123456789ab.lookup"
    link.symlink_to(elsewhere)
    newer = cache.file_for(lh.at_version(lh.version))
    assert cache.stats.evictions == 1 and not older.exists() and newer.exists()
    assert all(path.read_bytes() == b"x" * 20_000 for path in [*theirs, elsewhere])
    assert cache.files() == [newer]


def test_a_lakehouse_made_again_at_the_same_place_never_reads_the_old_ones_cache(
    tmp_path: Path,
) -> None:
    """Version 1 of a lakehouse deleted and created again at the same URI is another tree: the
    cache answered from the old one's file (a review found it)."""
    import shutil

    from lakecore.core.tree import SHARED_CACHE

    cache = VersionCache(tmp_path / "cache")
    uri = str(tmp_path / "lake")
    first = Lakehouse.create(uri)
    with first.transaction() as tx:
        tx.create_namespace("alpha")
    assert first.at_version(1).use_lookup_cache(cache).namespace_exists("alpha")
    shutil.rmtree(uri)
    SHARED_CACHE.clear()
    second = Lakehouse.create(uri)
    with second.transaction() as tx:
        tx.create_namespace("beta")
    again = second.at_version(1).use_lookup_cache(cache)
    assert again.namespace_exists("beta") and not again.namespace_exists("alpha")
    assert cache.stats.builds == 2 and len(cache.files()) == 2


def test_diff_equals_a_dict_diff(tmp_path: Path) -> None:
    lh = _lake(tmp_path, tables=30)
    old_version = lh.version
    rnd = random.Random(5)
    with lh.transaction() as tx:
        for i in rnd.sample(range(30), 8):
            tx.drop_table("a", f"t{i:03d}")
        for i in range(30, 36):
            tx.create_table("a", f"t{i:03d}")
    with lh.transaction() as tx:
        tx.update_table(
            "a", "t029" if lh.table_exists("a", "t029") else "t030", properties={"x": "y"}
        )
    old = dict(lh.at_version(old_version).items())
    new = dict(lh.at_version(lh.version).items())
    diff = diff_versions(
        lh.at_version(old_version), lh.at_version(lh.version), VersionCache(tmp_path / "c")
    )
    assert dict(diff.added) == {k: v for k, v in new.items() if k not in old}
    assert dict(diff.removed) == {k: v for k, v in old.items() if k not in new}
    assert {k: (a, b) for k, a, b in diff.changed} == {
        k: (old[k], new[k]) for k in old.keys() & new.keys() if old[k] != new[k]
    }
    assert not diff_versions(
        lh.at_version(old_version), lh.at_version(old_version), VersionCache(tmp_path / "c")
    ).changed


def test_lookup_and_diff_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lh = _lake(tmp_path, tables=5)
    lake, cache = lh.uri, str(tmp_path / "cache")
    assert main(["-l", lake, "--json", "lookup", "build", "--cache-dir", cache]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["version"] == lh.version and Path(built["path"]).exists()
    key = next(k for k, _ in lh.items("C==="))
    assert main(["-l", lake, "--json", "lookup", "get", key, "--cache-dir", cache]) == 0
    assert json.loads(capsys.readouterr().out)[key] == lh.get(key)
    assert main(["-l", lake, "--json", "lookup", "stats", "--cache-dir", cache]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == lh.version
    assert main(["-l", lake, "--json", "diff", "1", str(lh.version), "--cache-dir", cache]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert sorted(d["object"] for d in diff["added"]) == [f"a.t{i:03d}" for i in range(5)]


def test_an_unusable_cache_folder_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--cache-dir` under a file, or somewhere that cannot be made, said "unexpected
    NotADirectoryError" with exit 4 (a trial found it)."""
    lh = _lake(tmp_path, tables=3)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for folder in (a_file / "sub", Path("/proc/lakecore-no-such-folder")):
        code = main(
            [
                "-l",
                lh.uri,
                "lookup",
                "get",
                "--namespace",
                "a",
                "--table",
                "t000",
                "--cache-dir",
                str(folder),
            ]
        )
        err = capsys.readouterr().err
        assert code == 2, err
        assert (
            err.count("\n") == 1
            and "lookup cache folder" in err
            and "give --cache-dir a folder" in err
        ), err


def test_lookup_refuses_stray_arguments_and_says_why_an_unpadded_key_is_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lh = _lake(tmp_path, tables=2)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    for argv in (
        ["lookup", "build", "extra"],
        ["lookup", "stats", "a"],
        ["lookup", "stats", "--cache-max-bytes", "0"],
    ):
        assert main(["-l", lh.uri, *argv, *cache]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and (
            "takes no KEY" in err or "--cache-max-bytes must be" in err
        ), err
    assert main(["-l", lh.uri, "lookup", "get", "a", *cache]) == 5
    captured = capsys.readouterr()
    assert "(absent)" in captured.out and "'a' is not an object key as stored" in captured.err
    assert main(["-l", lh.uri, "lookup", "get", "--namespace", "a", *cache]) == 0
    assert capsys.readouterr().err == ""
