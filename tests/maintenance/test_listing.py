"""``list_directories``: the threaded listing gives what the sequential one gives, in order."""

from __future__ import annotations

from pathlib import Path

from lakecore.errors import StorageError
from lakecore.locations import hash_directories
from lakecore.maintenance import listing
from lakecore.storage import FileInfo, Storage


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
