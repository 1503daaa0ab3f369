"""Golden bytes: tiny files derived by hand from docs/lookup-format.md, not from the writer."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.lookup.murmur import murmur3_paimon

MAGIC_BYTES = bytes.fromhex("61FD4E58")


def crc_trailer(stored: bytes, codec: int = 0) -> bytes:
    return bytes([codec]) + struct.pack("<I", zlib.crc32(stored + bytes([codec])))


def write(path: Path, entries: list[tuple[bytes, bytes]], **options: object) -> bytes:
    with LookupWriter(path, **options) as writer:  # type: ignore[arg-type]
        for key, value in entries:
            writer.put(key, value)
    return path.read_bytes()


def test_two_entries_one_unaligned_block(tmp_path: Path) -> None:
    data_block = (
        bytes.fromhex("02 6B31 02 7631")  # klen 2, "k1", vlen 2, "v1"      (entry at 0)
        + bytes.fromhex("02 6B32 03 76616C")  # klen 2, "k2", vlen 3, "val" (entry at 6)
        + bytes.fromhex("00000000 06000000")  # entry offsets 0 and 6 (int32 LE)
        + bytes.fromhex("02000000 01")  # n = 2, unaligned
    )
    assert len(data_block) == 26
    index_block = (
        bytes.fromhex("02 6B32 02 00 1A")  # last key "k2" -> handle (offset 0, size 26)
        + bytes.fromhex("06000000 00")  # one entry, so aligned: entry size 6
    )
    footer = (
        bytes(8 + 4 + 8)  # no bloom filter
        + struct.pack("<q", 31)  # index offset: 26 bytes of block + 5 of trailer
        + struct.pack("<i", 11)  # index size
        + MAGIC_BYTES
    )
    expected = (
        data_block + crc_trailer(data_block) + index_block + crc_trailer(index_block) + footer
    )
    assert len(expected) == 83
    actual = write(
        tmp_path / "golden.lk",
        [(b"k1", b"v1"), (b"k2", b"val")],
        compression="none",
        bloom_fpp=None,
    )
    assert actual == expected
    with LookupReader(tmp_path / "golden.lk") as reader:
        assert reader.get(b"k2") == b"val"
        assert reader.get(b"k0") is None


def test_three_aligned_blocks_of_one_entry(tmp_path: Path) -> None:
    # block_size 1: every entry crosses the limit and closes its block.
    blocks = [bytes.fromhex(f"02 6B3{i} 01 7{i}") + bytes.fromhex("05000000 00") for i in (1, 2, 3)]
    assert [len(b) for b in blocks] == [10, 10, 10]
    body = b"".join(b + crc_trailer(b) for b in blocks)
    index_block = (
        bytes.fromhex("02 6B31 02 00 0A")  # "k1" -> (0, 10)
        + bytes.fromhex("02 6B32 02 0F 0A")  # "k2" -> (15, 10)
        + bytes.fromhex("02 6B33 02 1E 0A")  # "k3" -> (30, 10)
        + bytes.fromhex("06000000 00")
    )
    footer = bytes(20) + struct.pack("<qi", 45, len(index_block)) + MAGIC_BYTES
    expected = body + index_block + crc_trailer(index_block) + footer
    actual = write(
        tmp_path / "golden3.lk",
        [(b"k1", b"q"), (b"k2", b"r"), (b"k3", b"s")],
        compression="none",
        bloom_fpp=None,
        block_size=1,
    )
    assert actual == expected


def test_bloom_bitset_and_footer(tmp_path: Path) -> None:
    keys = [b"a", b"abc", b"hello world"]
    # n = 3, p = 0.05: bits = floor(-3 ln 0.05 / ln^2 2) = 18, bytes = 3, k = round(24/3 ln 2) = 6
    size, k = 3, 6
    bits = bytearray(size)
    for key in keys:
        h1 = murmur3_paimon(key)
        h2 = (h1 & 0xFFFFFFFF) >> 16
        for i in range(1, k + 1):
            c = (h1 + i * h2 + 2**31) % 2**32 - 2**31
            c = ~c if c < 0 else c
            bits[(c % (size * 8)) >> 3] |= 1 << ((c % (size * 8)) & 7)
    data = write(
        tmp_path / "bloom.lk", [(key, b"") for key in keys], compression="none", bloom_fpp=0.05
    )
    bloom_offset, bloom_size, bloom_entries, index_offset, _, _ = struct.unpack(
        "<qiqqii", data[-36:]
    )
    assert (bloom_size, bloom_entries) == (size, 3)
    assert index_offset == bloom_offset + size
    assert data[bloom_offset:index_offset] == bytes(bits)


def test_empty_file(tmp_path: Path) -> None:
    empty_index = bytes.fromhex("00000000 01")
    expected = empty_index + crc_trailer(empty_index) + bytes(20) + struct.pack("<qi", 0, 5)
    expected += MAGIC_BYTES
    assert write(tmp_path / "empty.lk", [], compression="zstd") == expected
    with LookupReader(tmp_path / "empty.lk") as reader:
        assert len(reader) == 0
        assert reader.get(b"x") is None
        assert reader.get_many([b"x", b""]) == [None, None]
        assert list(reader.items()) == []
