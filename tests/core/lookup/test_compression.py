"""Codecs and the 12.5% rule."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import lz4.block
import pytest
import zstandard

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.lookup.compression import (
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_ZSTD,
    BlockCompressor,
    BlockDecompressor,
    keep_compressed,
)
from lakecore.core.lookup.varint import encode_varint


def test_rule_boundary() -> None:
    # len 80: keep only if compressed < 80 - 10 = 70.
    assert keep_compressed(80, 69)
    assert not keep_compressed(80, 70)


@pytest.mark.parametrize("codec", ["zstd", "lz4", "lzo"])
def test_incompressible_block_stored_raw(codec: str) -> None:
    raw = os.urandom(4096)
    assert BlockCompressor(codec).compress(raw) == (CODEC_NONE, raw)


def test_zstd_body_layout() -> None:
    raw = b"catalog " * 500
    codec, stored = BlockCompressor("zstd").compress(raw)
    assert codec == CODEC_ZSTD
    prefix = encode_varint(len(raw))
    assert stored.startswith(prefix)
    frame = stored[len(prefix) :]
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert zstandard.ZstdDecompressor().decompress(frame, max_output_size=len(raw)) == raw
    assert BlockDecompressor().decompress(codec, stored) == raw


def test_lz4_body_layout() -> None:
    raw = b"catalog " * 500
    codec, stored = BlockCompressor("lz4").compress(raw)
    assert codec == CODEC_LZ4
    prefix = encode_varint(len(raw))
    compressed_length, original_length = struct.unpack_from("<ii", stored, len(prefix))
    block = stored[len(prefix) + 8 :]
    assert compressed_length == len(block)
    assert original_length == len(raw)
    assert lz4.block.decompress(block, uncompressed_size=len(raw)) == raw
    assert BlockDecompressor().decompress(codec, stored) == raw


def test_none_is_identity() -> None:
    assert BlockCompressor("none").compress(b"aaaa" * 100) == (CODEC_NONE, b"aaaa" * 100)


@pytest.mark.parametrize(
    "stored",
    [
        b"",  # no length
        b"\x80",  # varint runs out
        encode_varint(100) + b"not a zstd frame",
        encode_varint(2**31 - 1)
        + zstandard.ZstdCompressor(write_content_size=False).compress(b"x"),
        encode_varint(5) + zstandard.ZstdCompressor(write_content_size=True).compress(b"xyz"),
    ],
)
def test_malformed_zstd(stored: bytes) -> None:
    with pytest.raises(ValueError):
        BlockDecompressor().decompress(CODEC_ZSTD, stored)


@pytest.mark.parametrize(
    "stored",
    [
        encode_varint(10) + b"\x01\x00",  # short header
        encode_varint(10) + struct.pack("<ii", 5, 10) + b"\x00" * 3,  # lengths disagree
        encode_varint(10) + struct.pack("<ii", 2, 11) + b"\x00\x00",  # header vs varint
        encode_varint(10**6) + struct.pack("<ii", 2, 10**6) + b"\x00\x00",  # impossible ratio
        encode_varint(8) + struct.pack("<ii", 3, 8) + b"\xff\xff\xff",  # garbage
    ],
)
def test_malformed_lz4(stored: bytes) -> None:
    with pytest.raises(ValueError):
        BlockDecompressor().decompress(CODEC_LZ4, stored)


def test_unknown_codec_names_the_supported_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown codec id 7; .*0 \(none\), 1 \(zstd\), 2 \(lz4\), 3 \(lzo\)"
    ):
        BlockDecompressor().decompress(7, b"abc")


@pytest.mark.parametrize("codec", ["zstd", "lz4", "lzo"])
def test_incompressible_file_blocks_stored_raw(tmp_path: Path, codec: str) -> None:
    rng = random.Random(5)
    entries = sorted((rng.randbytes(16), rng.randbytes(200)) for _ in range(500))
    path = tmp_path / "random.lk"
    with LookupWriter(path, compression=codec, block_size=4096) as writer:
        for key, value in entries:
            writer.put(key, value)
    data = path.read_bytes()
    with LookupReader(path) as reader:
        stats = reader.stats()
        assert stats.codec_blocks == {"none": stats.blocks}
        assert stats.codec == "none"
        # Every data trailer's first byte is codec id 0.
        for handle in reader._handles:
            assert data[handle.offset + handle.size] == CODEC_NONE
        assert list(reader.items()) == entries


@pytest.mark.parametrize("codec", ["zstd", "lz4", "lzo"])
def test_a_block_over_the_writers_cap_is_stored_raw(codec: str) -> None:
    """The writer compresses blocks only up to the default reader's cap (here made small), so a
    default reader opens every file it writes."""
    big = b"v" * 1001
    assert BlockCompressor(codec, max_block_bytes=1000).compress(big) == (CODEC_NONE, big)
    assert BlockCompressor(codec, max_block_bytes=1001).compress(big)[0] != CODEC_NONE
