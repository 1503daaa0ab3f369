"""Honest big blocks are read, bombs are not, and empty files with a bloom filter stay valid.

Issue #17: a Paimon file holding one compressible 17 MiB value was refused on open ("compressed
block declares 17825806 uncompressed bytes, more than the 16777216..."). The rule now is the
codec's physical expansion bound plus the reader's ``max_block_bytes`` (compression.py).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import lz4.block
import lzokay
import pytest
import zstandard

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.lookup.compression import CODEC_IDS, CODEC_NONE
from lakecore.errors import CorruptLookupFileError, InvalidArgumentError

from ._helpers import FOOTER, MAGIC, aligned_block, assemble, scratch, trailer, varint

#: 17 MiB of a repeated random 4 KiB pattern: every codec compresses it, none trivially.
BIG = random.Random(17).randbytes(4096) * (17 * 256)
KEY = b"key1"


def paimon_body(codec: str, raw: bytes) -> bytes:
    """A block body as Paimon's compressors store it."""
    if codec == "zstd":
        # ZstdOutputStream: a streamed frame, no content size in its header.
        compressor = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
        frame = b"".join(
            compressor.compress(raw[i : i + (1 << 20)]) for i in range(0, len(raw), 1 << 20)
        )
        return varint(len(raw)) + frame + compressor.flush()
    block = lz4.block.compress(raw, store_size=False) if codec == "lz4" else lzokay.compress(raw)
    return varint(len(raw)) + struct.pack("<ii", len(block), len(raw)) + block


@pytest.mark.parametrize("codec", ["zstd", "lz4", "lzo"])
def test_a_17_mib_value_in_a_paimon_layout_file(tmp_path: Path, codec: str) -> None:
    raw = aligned_block([(KEY, BIG)])
    assert len(raw) == 17825806  # the block of the issue: 1 + 4 + 4 + 17 MiB + 5
    path = scratch(
        str(tmp_path), "big.lk", assemble([(KEY, paimon_body(codec, raw), CODEC_IDS[codec])])
    )
    with LookupReader(path) as reader:
        assert reader.get(KEY) == BIG
        assert reader.stats().codec == codec


@pytest.mark.parametrize("codec", ["zstd", "lz4", "lzo"])
def test_a_17_mib_value_written_by_lakecore(tmp_path: Path, codec: str) -> None:
    path = tmp_path / "big.lk"
    with LookupWriter(path, compression=codec) as writer:
        writer.put(b"a", b"small" * 100)
        writer.put(KEY, BIG)
        writer.put(b"z", b"small" * 100)
    data = path.read_bytes()
    with LookupReader(path) as reader:
        big_block = reader._handles[0]  # "a" and KEY: KEY crossed the block size and closed it
        assert data[big_block.offset + big_block.size] == CODEC_IDS[codec], "stored compressed"
        assert big_block.size < len(BIG) // 8
        assert reader.get_many([b"a", KEY, b"z"]) == [b"small" * 100, BIG, b"small" * 100]


def test_an_honest_block_over_the_readers_cap_is_refused_and_names_the_option(
    tmp_path: Path,
) -> None:
    raw = aligned_block([(KEY, BIG)])
    path = scratch(str(tmp_path), "big.lk", assemble([(KEY, paimon_body("zstd", raw), 1)]))
    with (
        LookupReader(path, max_block_bytes=16 << 20) as reader,
        pytest.raises(
            CorruptLookupFileError,
            match="declares 17825806 uncompressed bytes, more than this reader's max_block_bytes",
        ),
    ):
        reader.get(KEY)
    with LookupReader(path, max_block_bytes=len(raw)) as reader:
        assert reader.get(KEY) == BIG


@pytest.mark.parametrize(
    ("codec", "declared", "payload"),
    [
        # 1 MiB of zeros is ~40 bytes of zstd; declaring 1 GiB is more than zstd can produce.
        (
            "zstd",
            1 << 30,
            zstandard.ZstdCompressor(write_content_size=False).compress(bytes(1 << 20)),
        ),
        ("lz4", 1 << 24, struct.pack("<ii", 4, 1 << 24) + b"\x00" * 4),
        ("lzo", 1 << 24, struct.pack("<ii", 3, 1 << 24) + b"\x11\x00\x00"),
    ],
)
def test_a_decompression_bomb_is_refused_before_allocating(
    tmp_path: Path, codec: str, declared: int, payload: bytes
) -> None:
    path = scratch(
        str(tmp_path), "bomb.lk", assemble([(KEY, varint(declared) + payload, CODEC_IDS[codec])])
    )
    with (
        LookupReader(path) as reader,
        pytest.raises(
            CorruptLookupFileError,
            match=f"declares {declared} uncompressed bytes, but {codec} cannot expand",
        ),
    ):
        reader.get(KEY)


@pytest.mark.parametrize("bad", [0, -1, 2**31])
def test_max_block_bytes_must_be_a_positive_int32(tmp_path: Path, bad: int) -> None:
    path = scratch(str(tmp_path), "empty.lk", assemble([]))
    with pytest.raises(InvalidArgumentError, match="max_block_bytes"):
        LookupReader(path, max_block_bytes=bad)


def test_empty_file_written_with_a_bloom_filter_reads(tmp_path: Path) -> None:
    path = tmp_path / "empty.lk"
    with LookupWriter(path, bloom_fpp=0.05, expected_entries=100):
        pass
    with LookupReader(path) as reader:
        assert len(reader) == 0
        assert reader.get(b"x") is None
        assert reader.get_many([b"x", b""]) == [None, None]
        assert list(reader.items()) == []


def test_empty_file_with_a_bitset_as_paimon_writes_it_reads(tmp_path: Path) -> None:
    """Paimon's writer sizes its filter from the expected entries and writes the bitset even
    when no record came: the bitset starts at offset 0, where the (absent) data blocks end."""
    bitset = bytes(78)  # n = 100, p = 0.05: 623 bits
    index = struct.pack("<i", 0) + b"\x01"
    data = bitset + index + trailer(index)
    data += FOOTER.pack(0, len(bitset), 100, len(bitset), len(index), MAGIC)
    assert data[:-36] == assemble([], bloom=bitset, bloom_entries=100)[:-36]
    path = scratch(str(tmp_path), "paimon-empty.lk", data)
    with LookupReader(path) as reader:
        assert reader.stats().bloom_bytes == 78 and reader.stats().entries == 0
        assert reader.get(b"x") is None
        assert reader.get_many([b"x"]) == [None]
        assert list(reader.items()) == []


def test_raw_blocks_are_never_bounded(tmp_path: Path) -> None:
    """A raw block costs no more memory than its bytes in the file: no cap applies."""
    raw = aligned_block([(KEY, BIG)])
    path = scratch(str(tmp_path), "raw.lk", assemble([(KEY, raw, CODEC_NONE)]))
    with LookupReader(path, max_block_bytes=1 << 20) as reader:
        assert reader.get(KEY) == BIG
