"""``list_directories`` and its columnar form: the threaded listing gives what the sequential
one gives, in order; the columns hold what the rows hold; a failure is a record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import hash_directories, hash_directory_prefixes
from lakecore.core.storage import FileInfo, ListedPage, PathListing, Storage
from lakecore.errors import StorageError
from lakecore.maintenance import listing


def _lake(tmp_path: Path) -> tuple[Storage, list[str]]:
    storage = Storage(str(tmp_path / "lake"))
    directories = list(hash_directories())[:40]
    for i, directory in enumerate(directories):
        for j in range(i % 3):  # some directories empty, some with one or two files
            storage.write(f"{directory}/0000000{j}-node-{i:04d}.arrow", b"x" * (i + 1))
    return storage, directories


def test_threads_list_the_same_files_in_the_same_order(tmp_path: Path) -> None:
    storage, directories = _lake(tmp_path)
    sequential = list(listing.list_directories(storage, directories, threads=1))
    assert len(sequential) == sum(i % 3 for i in range(40))
    for threads in (2, 3, 16, 64):  # windows smaller than, and larger than, the directory count
        assert list(listing.list_directories(storage, directories, threads=threads)) == sequential


class _OneDirectoryFails(Storage):
    failing = ""

    def list(self, prefix: str = "", limit: int | None = None) -> list[FileInfo]:
        if prefix == self.failing:
            raise StorageError(f"listing {prefix} refused")
        return super().list(prefix, limit=limit)

    def list_paths(self, prefix: str = "") -> PathListing:
        if prefix == self.failing:
            raise StorageError(f"listing {prefix} refused")
        return super().list_paths(prefix)


def _rows_of(chunks: list[listing.ListedColumns]) -> list[tuple[object, ...]]:
    return [row for chunk in chunks for row in zip(*chunk.columns(), strict=True)]


@pytest.mark.parametrize("threads", [1, 4])
def test_columns_hold_the_rows_paths_and_kinds_and_chunk_as_asked(
    tmp_path: Path, threads: int
) -> None:
    storage, directories = _lake(tmp_path)
    rows = list(listing.list_directories(storage, directories, threads=1))
    chunks = list(listing.list_directories_columns(storage, directories, threads=threads, rows=7))
    assert all(len(chunk) >= 7 for chunk in chunks[:-1]) and len(chunks[-1]) > 0
    # A local listing carries no size or time: only orphans get a stat, later.
    assert _rows_of(chunks) == [(f.path, None, None, f.kind) for f in rows]


def test_a_failed_directory_is_an_error_record_in_the_columns_too(tmp_path: Path) -> None:
    _, directories = _lake(tmp_path)
    storage = _OneDirectoryFails(str(tmp_path / "lake"))
    storage.failing = directories[5]
    listed = _rows_of(list(listing.list_directories_columns(storage, directories, threads=4)))
    errors = [row for row in listed if listing.is_error(str(row[3]))]
    assert (
        len(errors) == 1 and directories[5] in str(errors[0][0]) and "refused" in str(errors[0][0])
    )
    assert len(listed) - 1 == sum(i % 3 for i in range(40)) - 5 % 3


def test_stat_listed_skips_the_vanished_and_records_the_unreadable(tmp_path: Path) -> None:
    from tests.reliability.faulty_storage import Fault, FaultyStorage

    storage, directories = _lake(tmp_path)
    present = [f.path for f in listing.list_directories(storage, directories)][:3]
    vanished = f"{directories[0]}/00000000-node-gone.arrow"
    stats = list(
        listing.stat_listed(
            storage, [(present[0], "node"), (vanished, "node"), (present[1], "node")]
        )
    )
    assert [(f.path, f.kind) for f in stats] == [(present[0], "node"), (present[1], "node")]
    assert [f.size for f in stats] == [storage.size(present[0]), storage.size(present[1])]
    assert all(f.mtime_millis > 0 for f in stats)
    faulty = FaultyStorage(storage.root_uri, faults=[Fault("stat", 2)])
    stats = list(listing.stat_listed(faulty, [(p, "node") for p in present]))
    assert [f.kind for f in stats] == ["node", listing.ERROR_KEY, "node"]
    assert stats[1].path.startswith(f"statting {storage.uri(present[1])}: ")


def test_a_failed_directory_is_an_error_record_not_an_exception(tmp_path: Path) -> None:
    _, directories = _lake(tmp_path)
    storage = _OneDirectoryFails(str(tmp_path / "lake"))
    storage.failing = directories[5]
    listed = list(listing.list_directories(storage, directories, threads=4))
    errors = [f for f in listed if listing.is_error(f.kind)]
    assert len(errors) == 1 and directories[5] in errors[0].path and "refused" in errors[0].path
    assert len(listed) - 1 == sum(i % 3 for i in range(40)) - 5 % 3


def test_a_consumer_that_stops_early_gets_the_first_files(tmp_path: Path) -> None:
    storage, directories = _lake(tmp_path)
    stream = listing.list_directories(storage, directories, threads=4)
    first = next(stream)
    stream.close()
    assert first == next(iter(listing.list_directories(storage, directories, threads=1)))


@pytest.mark.parametrize(
    ("concurrency", "levels"), [(1, 1), (8, 1), (16, 1), (17, 2), (256, 2), (257, 3), (10**6, 3)]
)
def test_listing_levels_give_each_request_in_flight_a_directory(
    concurrency: int, levels: int
) -> None:
    assert listing.listing_levels(concurrency) == levels


@pytest.mark.parametrize("levels", [1, 2])
def test_a_directory_above_the_hash_directories_lists_only_what_they_hold(
    tmp_path: Path, levels: int
) -> None:
    storage, directories = _lake(tmp_path)
    # Files lakecore never writes: outside any hash directory, though under a listed prefix.
    for stray in ("0000/stray.txt", "0000/0000/stray.txt", "0000/0000/00000/x"):
        storage.write(stray, b"?")
    by_hash_directory = list(listing.list_directories(storage, directories))
    prefixes = hash_directory_prefixes(levels)
    rows = list(listing.list_directories(storage, prefixes))
    assert sorted(rows) == sorted(by_hash_directory) and not any("stray" in f.path for f in rows)
    columns = _rows_of(list(listing.list_directories_columns(storage, prefixes)))
    assert sorted(columns) == sorted((f.path, None, None, f.kind) for f in by_hash_directory)


# -- the flat listing of a small root, and when it gives up -----------------------------------


def _uniform_paths(count: int) -> list[str]:
    """``count`` optimized-looking paths spread evenly over the 4,096 hash directories, in key
    order, as a listing of a lakehouse returns them."""
    directories = hash_directories()
    return sorted(
        f"{directories[i * len(directories) // count]}/00000000-node-{i}.arrow"
        for i in range(count)
    )


class _PagedRoot(Storage):
    """A root whose listing comes in pages of 1,000 in key order, as S3 gives it, counting the
    pages asked for."""

    def __init__(self, root: str, paths: list[str]) -> None:
        super().__init__(root)
        self.paths = paths
        self.pages_asked = 0

    def list_pages(self, prefix: str = "", limit: int | None = None) -> Iterator[ListedPage]:
        for start in range(0, len(self.paths), 1000):
            self.pages_asked += 1
            chunk = self.paths[start : start + 1000]
            yield ListedPage(
                [FileInfo(p, 1, 0) for p in chunk], more=start + 1000 < len(self.paths)
            )


def test_the_estimate_from_the_first_pages_is_close(tmp_path: Path) -> None:
    for count in (2_000, 20_000, 100_000):
        paths = _uniform_paths(count)
        first_page = [FileInfo(p, 1, 0) for p in paths[:1000]]
        assert 0.95 * count <= listing.estimated_files(first_page) <= 1.05 * count
    # Nothing in a hash directory at the end of the page: nothing to judge by.
    assert listing.estimated_files([FileInfo("_latest_hint.txt", 1, 0)]) == 0
    assert listing.estimated_files([]) == 0


@pytest.mark.parametrize(
    ("files", "pages", "flat"),
    [
        (20_000, 1, False),  # clearly larger: one request, not the eleven it took to find out
        (12_000, 11, False),  # within the margin: listed up to the limit, then given up
        (9_500, 10, True),  # small: the whole listing, every page
        (900, 1, True),
    ],
)
def test_the_flat_listing_gives_up_after_the_first_page_of_a_large_root(
    tmp_path: Path, files: int, pages: int, flat: bool
) -> None:
    storage = _PagedRoot(str(tmp_path / "lake"), _uniform_paths(files))
    listed = listing.list_small_root(storage, 10_000)
    assert storage.pages_asked == pages
    assert (listed is not None) == flat
    if listed is not None:
        assert [f.path for f in listed] == storage.paths


@pytest.mark.s3
def test_s3_lists_a_page_at_a_time_in_key_order(s3_server: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    root, options = s3_server.new_root()
    storage = Storage(root, options)
    prefix = root.removeprefix(f"s3://{s3_server.bucket}/")
    client = s3_server.client()
    paths = _uniform_paths(1_500)
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda p: client.put_object(Bucket=s3_server.bucket, Key=prefix + p, Body=b"x"),
                paths,
            )
        )
    pages = list(storage.list_pages(""))
    assert [len(p.files) for p in pages] == [1000, 500] and [p.more for p in pages] == [True, False]
    assert [f.path for p in pages for f in p.files] == paths
    assert len(list(storage.list_pages("", limit=999))) == 1  # more than the limit after one page


def test_a_local_root_is_one_page_whatever_its_size(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path / "lake"))
    for path in _uniform_paths(1_500):
        storage.write(path, b"x")
    pages = list(storage.list_pages(""))
    assert [p.more for p in pages] == [False] and len(pages[0].files) == 1_500
    (limited,) = storage.list_pages("", limit=10)
    assert len(limited.files) > 10  # stops once over the limit, as ``list`` does


def test_a_missing_bucket_is_not_found_not_a_retryable_refusal(tmp_path: Path) -> None:
    """gc on a mistyped bucket said "GcRefusedError: could not list the top ...: NotFoundError:
    ..." with exit 4, which the DAGs retry; validate and the CLI said exit 5. A trial found it."""
    from lakecore.errors import ExitCode, NotFoundError
    from lakecore.maintenance.listing import GcRefusedError

    class _NoBucket(Storage):
        error: type[Exception] = NotFoundError

        def list_top_level(self) -> list[FileInfo]:
            raise self.error(
                "could not list s3://bukcet/lake/: The specified bucket does not exist "
                "(does the bucket exist?)"
            )

    storage = _NoBucket(str(tmp_path / "lake"))
    with pytest.raises(NotFoundError, match="bucket does not exist") as missing:
        listing.list_top(storage)
    assert missing.value.exit_code == ExitCode.NOT_FOUND
    storage.error = StorageError
    with pytest.raises(GcRefusedError, match="could not list the top") as failed:
        listing.list_top(storage)
    assert failed.value.exit_code == ExitCode.FAILURE


@pytest.mark.s3
def test_an_unknown_aws_profile_is_a_bad_setting_not_a_retryable_refusal(
    s3_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc and compact-versions on a mistyped profile said "GcRefusedError: could not list the
    top ...: ProfileNotFound ..." with exit 4, which the DAGs retry for ever; validate, flush
    and the CLI said exit 2. A trial found it. Both listings on the driver pass it through."""
    from lakecore.errors import ExitCode, InvalidArgumentError
    from lakecore.maintenance.expire import plan_expiry

    config = tmp_path / "aws-config"
    config.write_text("[profile lakecore-test]\naws_access_key_id = k\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    root, options = s3_server.new_root()
    storage = Storage(root, {**options, "profile": "lakecore-tset"})
    for attempt in (
        lambda: listing.list_top(storage),
        lambda: listing.list_small_root(storage, 10_000),
        lambda: plan_expiry(storage, 0),
    ):
        with pytest.raises(
            InvalidArgumentError, match=r"ProfileNotFound: .*lakecore-tset"
        ) as refused:
            attempt()
        assert refused.value.exit_code == ExitCode.BAD_INPUT
