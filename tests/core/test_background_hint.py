"""The hint written off a commit's path (``lakecore.core.background_hint``): newest wins, one
write in flight, a failed write never raises into a commit."""

from __future__ import annotations

import threading
import uuid

import pytest

from lakecore.core import background_hint
from lakecore.core.storage import Storage
from lakecore.core.versions import read_hint, write_hint
from lakecore.errors import StorageError


def memory_storage() -> Storage:
    return Storage(f"memory://hint-{uuid.uuid4().hex}")


def test_versions_published_during_a_write_are_written_once_newest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = memory_storage()
    release = threading.Event()
    started = threading.Event()
    written: list[int] = []

    def held_write(target: Storage, version: int) -> bool:
        started.set()
        release.wait(10)
        written.append(version)
        return write_hint(target, version)

    monkeypatch.setattr(background_hint, "write_hint", held_write)
    hint = background_hint.BackgroundHint(storage)
    hint.publish(1)
    assert started.wait(10)
    for version in (2, 4, 3):  # 3 arrives after 4: never moves the hint back
        hint.publish(version)
    assert read_hint(storage) is None  # the first write is still held
    release.set()
    assert hint.flush(10)
    assert written == [1, 4]
    assert read_hint(storage) == 4
    assert (hint.writes, hint.failed) == (2, 0)


def test_a_failed_write_is_counted_and_the_next_version_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = memory_storage()
    failing = [True]
    real_write = storage.write

    def write(path: str, data: bytes) -> None:
        if failing[0]:
            raise StorageError(f"could not write {path}: no space left on device")
        real_write(path, data)

    monkeypatch.setattr(storage, "write", write)
    hint = background_hint.BackgroundHint(storage)
    hint.publish(7)
    assert hint.flush(10)
    assert (hint.failed, read_hint(storage)) == (1, None)
    failing[0] = False
    hint.publish(8)
    assert hint.flush(10)
    assert (hint.writes, hint.failed, read_hint(storage)) == (2, 1, 8)


def test_flush_says_when_a_write_is_still_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(background_hint, "write_hint", lambda storage, v: release.wait(10))
    hint = background_hint.BackgroundHint(memory_storage())
    hint.publish(1)
    assert hint.flush(0.05) is False
    release.set()
    assert hint.flush(10) is True
