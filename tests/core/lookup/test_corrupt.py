"""Corrupt and foreign files: only CorruptLookupFileError, naming the file and the byte."""

from __future__ import annotations

import os
import random
import re
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

import lz4.block
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecore.core.lookup import LookupReader
from lakecore.errors import CorruptLookupFileError

from ._helpers import (
    FOOTER,
    MAGIC,
    aligned_block,
    assemble,
    catalog_entries,
    footer_fields,
    scratch,
    trailer,
    unaligned_block,
    varint,
    with_footer,
    write_file,
)

ENTRIES = catalog_entries(120)


def valid_file(directory: Path, **options: object) -> bytes:
    opts: dict[str, object] = {"block_size": 2048, "compression": "zstd"}
    opts.update(options)
    return write_file(directory / "valid.lk", ENTRIES, **opts).read_bytes()


def read_everything(path: str) -> None:
    with LookupReader(path) as reader:
        len(reader)
        for key, _ in ENTRIES[::5]:
            reader.get(key)
        reader.get_many([k for k, _ in ENTRIES])
        list(reader.items())


def assert_corrupt(
    path: str, action: Callable[[str], object] = read_everything
) -> CorruptLookupFileError:
    with pytest.raises(CorruptLookupFileError) as caught:
        action(path)
    error = caught.value
    assert error.location.startswith(path)
    assert re.search(r"at byte \d+", error.location)
    assert path in str(error)
    return error


def test_flipped_byte_in_a_data_block(tmp_path: Path) -> None:
    data = bytearray(valid_file(tmp_path))
    data[10] ^= 0x40
    path = scratch(str(tmp_path), "flip.lk", bytes(data))
    reader = LookupReader(path)  # the index is intact, so opening works
    error = assert_corrupt(path, lambda p: reader.get(ENTRIES[0][0]))
    assert error.location == f"{path} at byte 0"
    assert "CRC" in error.rule
    assert reader.get(ENTRIES[-1][0]) == ENTRIES[-1][1]  # other blocks still answer
    for action in (
        lambda p: len(reader),
        lambda p: list(reader.items()),
        lambda p: reader.get_many([ENTRIES[0][0]]),
    ):
        assert_corrupt(path, action)
    reader.close()


def test_flipped_byte_in_the_index(tmp_path: Path) -> None:
    data = bytearray(valid_file(tmp_path))
    index_offset = footer_fields(bytes(data))[3]
    data[index_offset + 3] ^= 0x01
    error = assert_corrupt(scratch(str(tmp_path), "flip.lk", bytes(data)))
    assert f"at byte {index_offset}" in error.location


@pytest.mark.parametrize("cut", [1, 4, 20, 35, 36, 37, 200])
def test_truncated(tmp_path: Path, cut: int) -> None:
    data = valid_file(tmp_path)
    assert_corrupt(scratch(str(tmp_path), "cut.lk", data[:-cut]))


@pytest.mark.parametrize("size", [0, 1, 35])
def test_shorter_than_a_footer(tmp_path: Path, size: int) -> None:
    error = assert_corrupt(scratch(str(tmp_path), "tiny.lk", os.urandom(size)))
    assert "shorter than" in error.rule


def test_wrong_magic(tmp_path: Path) -> None:
    data = with_footer(valid_file(tmp_path), magic=0x12345678)
    error = assert_corrupt(scratch(str(tmp_path), "magic.lk", data))
    assert "magic" in error.rule
    assert error.location.endswith(f"at byte {len(data) - 4}")


@pytest.mark.parametrize(
    "change",
    [
        {"index_offset": 10**9},
        {"index_offset": -5},
        {"index_size": 10**6},
        {"index_size": -1},
        {"index_offset": 0},
        {"bloom_offset": 10**12},
        {"bloom_size": 1},
        {"bloom_entries": 0},
        {"bloom_entries": -3},
        {"bloom_entries": 1},  # a 94-byte filter for one entry would need 521 probes
    ],
)
def test_footer_out_of_range(tmp_path: Path, change: dict[str, int]) -> None:
    data = with_footer(valid_file(tmp_path), **change)
    error = assert_corrupt(scratch(str(tmp_path), "range.lk", data))
    assert "footer" in error.rule or "index" in error.rule


def test_random_bytes(tmp_path: Path) -> None:
    rng = random.Random(3)
    for i in range(20):
        blob = rng.randbytes(rng.randint(36, 5000))
        assert_corrupt(scratch(str(tmp_path), f"r{i}.lk", blob))
        # Even with the right magic at the end, nothing else can line up.
        assert_corrupt(scratch(str(tmp_path), f"m{i}.lk", blob + bytes.fromhex("61FD4E58")))


def test_handles_must_tile_the_data(tmp_path: Path) -> None:
    block = aligned_block([(b"k", b"v")])
    # Index says the block is at offset 3 instead of 0.
    index = unaligned_block([(b"k", varint(3) + varint(len(block)))])
    data = block + trailer(block) + index + trailer(index)
    data += FOOTER.pack(0, 0, 0, len(block) + 5, len(index), MAGIC)
    error = assert_corrupt(scratch(str(tmp_path), "tile.lk", data))
    assert "expected one at 0" in error.rule


CRAFTED_BODIES = {
    "bad tail flag": b"\x01k\x01v" + struct.pack("<i", 4) + b"\x07",
    "aligned size 0": b"\x01k\x01v" + struct.pack("<i", 0) + b"\x00",
    "too many offsets": b"\x01k\x01v" + struct.pack("<i", 99) + b"\x01",
    "key overruns": b"\x09k\x01v" + struct.pack("<i", 4) + b"\x00",
    "endless varint": b"\xff\xff\xff\xff\xff\xff\x01v" + struct.pack("<i", 8) + b"\x00",
    "short": b"\x01",
}


@pytest.mark.parametrize("name", sorted(CRAFTED_BODIES))
def test_crafted_block_with_valid_crc(tmp_path: Path, name: str) -> None:
    data = assemble([(b"k", CRAFTED_BODIES[name], 0)])
    path = scratch(str(tmp_path), "crafted.lk", data)
    error = assert_corrupt(path, lambda p: LookupReader(p).get(b"k"))
    assert error.location == f"{path} at byte 0"


@pytest.mark.parametrize(
    ("codec", "stored"),
    [
        (1, varint(50) + b"definitely not zstd"),
        (1, varint(5000) + zstandard.ZstdCompressor(write_content_size=False).compress(b"x" * 50)),
        (2, varint(50) + struct.pack("<ii", 4, 50) + b"\xff\xff\xff\xff"),
        (2, varint(10**9) + struct.pack("<ii", 4, 10**9) + b"\x00\x00\x00\x00"),
        (9, b"\x01k\x01v" + struct.pack("<i", 4) + b"\x00"),
    ],
)
def test_crafted_compressed_block(tmp_path: Path, codec: int, stored: bytes) -> None:
    path = scratch(str(tmp_path), "c.lk", assemble([(b"k", stored, codec)]))
    assert_corrupt(path, lambda p: LookupReader(p).get(b"k"))


def test_bloom_bitset_is_read_in_range(tmp_path: Path) -> None:
    body = aligned_block([(b"k", b"v")])
    path = scratch(
        str(tmp_path), "b.lk", assemble([(b"k", body, 0)], bloom=b"\xff" * 8, bloom_entries=1)
    )
    with LookupReader(path) as reader:
        assert reader.get(b"k") == b"v"


# -- fuzzing ------------------------------------------------------------------------------


def _outcome_ok(path: str, data: bytes, mutated: set[int]) -> None:
    """Reading a mutated file gives CorruptLookupFileError or right answers, nothing else.

    The bloom bitset and its footer fields carry no checksum
    (docs/lookup-format.md#trailer-and-checksum), so a change there may turn a present key into
    None; it must never produce a wrong value.
    """
    fields = footer_fields(data) if len(data) >= 36 else None
    try:
        with LookupReader(path) as reader:
            bloom_touched = reader._bloom is not None and any(
                fields is not None
                and (fields[0] <= m < fields[0] + fields[1] or len(data) - 36 <= m < len(data) - 16)
                for m in mutated
            )
            answers = [reader.get(k) for k, _ in ENTRIES]
            many = reader.get_many([k for k, _ in ENTRIES] + [b"absent"])
            scanned = list(reader.items())
            count = len(reader)
    except CorruptLookupFileError as error:
        assert error.location.startswith(path)
        return
    for (key, value), got, got_many in zip(ENTRIES, answers, many, strict=False):
        if bloom_touched:
            assert got in (value, None) and got_many in (value, None)
        else:
            assert got == value == got_many, key
    assert many[-1] is None
    assert scanned == ENTRIES
    assert count == len(ENTRIES)


@pytest.fixture(scope="module")
def originals() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        return {
            codec: valid_file(Path(tmp), compression=codec, bloom_fpp=0.05)
            for codec in ("none", "zstd", "lz4")
        }


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["none", "zstd", "lz4"]),
    st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=4
    ),
    st.one_of(st.none(), st.floats(0, 1)),
)
def test_fuzz_flips_and_truncation(
    originals: dict[str, bytes], codec: str, flips: list[tuple[float, int]], truncate: float | None
) -> None:
    data = bytearray(originals[codec])
    mutated: set[int] = set()
    # Flips favour the end of the file, where the footer, index and bloom filter live.
    for where, xor in flips:
        at = int(len(data) * (1 - where**3)) if xor & 1 else int(len(data) * where)
        at = min(at, len(data) - 1)
        data[at] ^= xor
        mutated.add(at)
    if truncate is not None:
        data = data[: int(len(data) * truncate)]
    with tempfile.TemporaryDirectory() as tmp:
        path = scratch(tmp, "fuzz.lk", bytes(data))
        _outcome_ok(path, bytes(data), mutated)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0, 1, 2]), st.binary(max_size=200), st.binary(min_size=1, max_size=8))
def test_fuzz_block_contents_with_valid_crc(codec: int, body: bytes, key: bytes) -> None:
    """Whatever a block holds, a valid CRC never lets a decoder fail with another error."""
    if codec == 1 and body:
        body = varint(len(body) * 3) + zstandard.ZstdCompressor(write_content_size=False).compress(
            body
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = scratch(tmp, "crafted.lk", assemble([(key, body, codec)]))
        try:
            with LookupReader(path) as reader:
                reader.get(key)
                reader.get_many([key, b"", key + b"\x00"])
                list(reader.items())
                len(reader)
        except CorruptLookupFileError as error:
            assert error.location.startswith(path)


BLOCK_ENTRIES = [(b"k%d" % i, b"v" * (i % 3)) for i in range(12)]
BLOCK_ENTRIES_ALIGNED = [(b"k%d" % i, b"v%d" % i) for i in range(10)]


@settings(max_examples=400, deadline=None)
@given(
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
    st.sampled_from([0, 1, 2]),
)
def test_fuzz_valid_crc_over_a_damaged_block(
    aligned: bool, flips: list[tuple[int, int]], codec: int
) -> None:
    """A block damaged before its CRC was computed (a buggy or hostile writer) is caught by
    the block and entry checks, or still answers; no other error, no hang."""
    entries = BLOCK_ENTRIES_ALIGNED if aligned else BLOCK_ENTRIES
    raw = bytearray(aligned_block(entries) if aligned else unaligned_block(entries))
    for at, xor in flips:
        raw[at % len(raw)] ^= xor
    stored = bytes(raw)
    if codec == 1:
        stored = varint(len(raw)) + zstandard.ZstdCompressor(write_content_size=False).compress(
            stored
        )
    elif codec == 2:
        block = lz4.block.compress(stored, store_size=False)
        stored = varint(len(raw)) + struct.pack("<ii", len(block), len(raw)) + block
    last = entries[-1][0]
    with tempfile.TemporaryDirectory() as tmp:
        path = scratch(tmp, "damaged.lk", assemble([(last, stored, codec)]))
        try:
            with LookupReader(path) as reader:
                for key, _ in entries:
                    reader.get(key)
                reader.get_many([k for k, _ in entries] * 2)
                list(reader.items())
                len(reader)
        except CorruptLookupFileError as error:
            assert error.location.startswith(path)
