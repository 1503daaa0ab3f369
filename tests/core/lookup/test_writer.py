"""The writer's contract: strictly ascending keys, atomic publication, argument checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.errors import InvalidArgumentError


def leftovers(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize(
    ("keys", "bad", "relation"),
    [
        ([b"a", b"b", b"b"], 2, "equals"),
        ([b"a", b"c", b"b"], 2, "sorts before"),
        ([b"b", b"a"], 1, "sorts before"),
        ([b"ab", b"a"], 1, "sorts before"),
        ([b"", b""], 1, "equals"),
        ([b"\x7f", b"\x80", b"\x01"], 2, "sorts before"),
    ],
)
def test_refuses_non_ascending_keys(
    tmp_path: Path, keys: list[bytes], bad: int, relation: str
) -> None:
    target = tmp_path / "out.lk"
    with pytest.raises(InvalidArgumentError) as caught, LookupWriter(target) as writer:
        for key in keys:
            writer.put(key, b"v")
    message = str(caught.value)
    assert repr(keys[bad]) in message
    assert repr(keys[bad - 1]) in message
    assert f"entry {bad}" in message
    assert relation in message
    assert leftovers(tmp_path) == []


def test_unsigned_byte_order(tmp_path: Path) -> None:
    # 0x80 sorts after 0x7f as an unsigned byte (it would not as a signed Java byte).
    target = tmp_path / "u.lk"
    with LookupWriter(target) as writer:
        writer.put(b"\x7f", b"1")
        writer.put(b"\x80", b"2")
    with LookupReader(target) as reader:
        assert reader.get(b"\x80") == b"2"


def test_long_keys_are_shortened_in_the_message(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError) as caught, LookupWriter(tmp_path / "x") as writer:
        writer.put(b"z" * 1000, b"")
        writer.put(b"a" * 1000, b"")
    assert "(1000 bytes)" in str(caught.value)
    assert len(str(caught.value)) < 1000


def test_exception_in_with_block_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.lk"
    with pytest.raises(RuntimeError), LookupWriter(target) as writer:
        writer.put(b"a", b"1")
        raise RuntimeError("boom")
    assert leftovers(tmp_path) == []


def test_failed_rewrite_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.lk"
    with LookupWriter(target) as writer:
        writer.put(b"old", b"1")
    before = target.read_bytes()
    with pytest.raises(InvalidArgumentError), LookupWriter(target) as writer:
        writer.put(b"b", b"1")
        writer.put(b"a", b"1")
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == ["out.lk"]


def test_nothing_at_target_until_close(tmp_path: Path) -> None:
    target = tmp_path / "out.lk"
    writer = LookupWriter(target, block_size=10)
    for i in range(100):
        writer.put(b"%03d" % i, b"x" * 20)
    assert not target.exists()
    assert len(leftovers(tmp_path)) == 1  # the temporary file, hidden beside the target
    writer.close()
    writer.close()  # harmless
    assert leftovers(tmp_path) == ["out.lk"]
    with pytest.raises(InvalidArgumentError):
        writer.put(b"999", b"")


def test_abort(tmp_path: Path) -> None:
    writer = LookupWriter(tmp_path / "out.lk")
    writer.put(b"a", b"")
    writer.abort()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "options",
    [
        {"compression": "snappy"},
        {"bloom_fpp": 0.0},
        {"bloom_fpp": 1.0},
        {"bloom_fpp": 1e-30},
        {"expected_entries": 0},
        {"block_size": 0},
        {"bloom_fpp": 0.9, "expected_entries": 1},
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        LookupWriter(tmp_path / "out.lk", **options)  # type: ignore[arg-type]
    assert leftovers(tmp_path) == []


def test_filter_too_small_for_real_count(tmp_path: Path) -> None:
    # fpp 0.9 with one key gives a zero-byte filter, which Paimon refuses too.
    with pytest.raises(InvalidArgumentError), LookupWriter(tmp_path / "o", bloom_fpp=0.9) as w:
        w.put(b"a", b"")
    assert leftovers(tmp_path) == []


def test_non_bytes_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError), LookupWriter(tmp_path / "o") as writer:
        writer.put("text", b"")  # type: ignore[arg-type]
    assert leftovers(tmp_path) == []


def test_dropped_writer_removes_its_temporary_file(tmp_path: Path) -> None:
    writer = LookupWriter(tmp_path / "out.lk")
    writer.put(b"a", b"")
    assert len(leftovers(tmp_path)) == 1
    del writer
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("empty", [False, True])
def test_the_reader_takes_keys_as_the_writer_does_and_refuses_a_str(
    tmp_path: Path, empty: bool
) -> None:
    path = tmp_path / "f.lookup"
    with LookupWriter(str(path)) as writer:
        if not empty:
            writer.put(b"abc", b"1")
    with LookupReader(str(path)) as reader:
        expected = None if empty else b"1"
        assert (
            reader.get(bytearray(b"abc")) == expected and reader.get(memoryview(b"abc")) == expected
        )
        assert reader.get_many([b"abc", bytearray(b"abc"), b"zz"]) == [expected, expected, None]
        for call in (lambda: reader.get("abc"), lambda: reader.get_many([b"abc", "abc"])):  # type: ignore[arg-type,list-item]
            with pytest.raises(InvalidArgumentError, match="a key must be bytes, got str"):
                call()


def test_a_bloom_filter_over_the_formats_int32_bit_count_is_refused_up_front(
    tmp_path: Path,
) -> None:
    with pytest.raises(InvalidArgumentError, match="bits, over the format's limit of 2147483647"):
        LookupWriter(str(tmp_path / "f.lookup"), expected_entries=3 * 10**9)
    assert leftovers(tmp_path) == []
