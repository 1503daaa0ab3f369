"""LZO blocks (codec id 3 in Paimon's BlockCompressionType): read Paimon's, write our own.

The golden stream below is liblzo2's own ``lzo1x_1_compress`` output (liblzo2 2.10, Debian's
liblzo2-2), the algorithm aircompressor's LzoCompressor ports for Paimon's writer, so this
checks lzokay's decoder against the reference encoder rather than against itself.
"""

from __future__ import annotations

import struct
from pathlib import Path

import lzokay
import pytest

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.lookup.compression import CODEC_LZO, BlockCompressor, BlockDecompressor
from lakecore.errors import CorruptLookupFileError

from ._helpers import assemble, catalog_entries, scratch, unaligned_block, varint

GOLDEN_ENTRIES = [
    (b"C===ns_%02d".ljust(40, b" ") % i, b"tables/ns_%02d/metadata.binpb" % i) for i in range(8)
]
#: liblzo2 lzo1x_1_compress of unaligned_block(GOLDEN_ENTRIES) (573 bytes).
GOLDEN_LZO = bytes.fromhex(
    "0826433d3d3d6e735f3030203a0000051b7461626c65732f84050c2f6d657461646174612e62696e7062"
    "270901313a0501202a0901313609013220080901323609013320080901333609013420080901343609013520"
    "080901353609013620080901363609013720080901372d08010013000000004300000086000000c90000000c"
    "0100004f01000092010000d50100000800000001110000"
)


def paimon_lzo_body(stream: bytes, raw_length: int) -> bytes:
    """What Paimon's AirBlockCompressor stores: varint length, int32 compressed, int32 raw."""
    return varint(raw_length) + struct.pack("<ii", len(stream), raw_length) + stream


def test_reference_stream_decodes() -> None:
    raw = unaligned_block(GOLDEN_ENTRIES)
    assert len(raw) == 573
    assert BlockDecompressor().decompress(CODEC_LZO, paimon_lzo_body(GOLDEN_LZO, 573)) == raw


def test_paimon_layout_file_with_an_lzo_block(tmp_path: Path) -> None:
    path = scratch(
        str(tmp_path),
        "paimon-lzo.lk",
        assemble([(GOLDEN_ENTRIES[-1][0], paimon_lzo_body(GOLDEN_LZO, 573), CODEC_LZO)]),
    )
    with LookupReader(path) as reader:
        assert reader.stats().codec == "lzo"
        for key, value in GOLDEN_ENTRIES:
            assert reader.get(key) == value
        assert reader.get(b"C===absent") is None
        assert list(reader.items()) == GOLDEN_ENTRIES


def test_writer_round_trip(tmp_path: Path) -> None:
    entries = catalog_entries(400)
    path = tmp_path / "lzo.lk"
    with LookupWriter(path, compression="lzo", block_size=4096) as writer:
        for key, value in entries:
            writer.put(key, value)
    with LookupReader(path) as reader:
        stats = reader.stats()
        assert stats.codec == "lzo" and stats.codec_blocks == {"lzo": stats.blocks}
        assert reader.get_many([k for k, _ in entries]) == [v for _, v in entries]
        assert list(reader.items()) == entries


def test_writer_body_layout() -> None:
    raw = unaligned_block(GOLDEN_ENTRIES)
    codec, stored = BlockCompressor("lzo").compress(raw)
    assert codec == CODEC_LZO
    prefix = varint(len(raw))
    compressed_length, original_length = struct.unpack_from("<ii", stored, len(prefix))
    assert (compressed_length, original_length) == (len(stored) - len(prefix) - 8, len(raw))
    assert lzokay.decompress(stored[len(prefix) + 8 :], len(raw)) == raw


@pytest.mark.parametrize(
    ("stored", "rule"),
    [
        # The stream ends 1 byte short of the declaration (lzokay would pad it with a zero).
        (paimon_lzo_body(GOLDEN_LZO, 574), "ends before the 574 bytes"),
        # Truncated stream: no end-of-stream marker.
        (paimon_lzo_body(GOLDEN_LZO[:-3], 573), "does not decompress"),
        # Bytes after the end-of-stream marker.
        (paimon_lzo_body(GOLDEN_LZO + b"\x00", 573), "does not decompress"),
        # The stream writes more than declared.
        (paimon_lzo_body(GOLDEN_LZO, 572), "does not decompress"),
        (varint(573) + struct.pack("<ii", 10, 573) + GOLDEN_LZO, "compressed bytes"),
        (varint(573) + struct.pack("<ii", len(GOLDEN_LZO), 572) + GOLDEN_LZO, "header says 572"),
        (varint(573) + b"\x00\x00", "shorter than its 8-byte header"),
        # Paimon's rule: a non-empty stream never stands for 0 bytes.
        (varint(0) + struct.pack("<ii", 3, 0) + b"\x11\x00\x00", "lzo body of 3 bytes"),
        # More than LZO can expand 3 bytes to.
        (paimon_lzo_body(b"\x11\x00\x00", 10_000), "lzo cannot expand"),
    ],
)
def test_malformed_lzo_bodies(stored: bytes, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        BlockDecompressor().decompress(CODEC_LZO, stored)


def test_empty_stream_is_empty() -> None:
    assert BlockDecompressor().decompress(CODEC_LZO, paimon_lzo_body(b"", 0)) == b""


def test_short_stream_in_a_file_is_reported_with_its_offset(tmp_path: Path) -> None:
    path = scratch(
        str(tmp_path),
        "short.lk",
        assemble([(GOLDEN_ENTRIES[-1][0], paimon_lzo_body(GOLDEN_LZO, 574), CODEC_LZO)]),
    )
    with LookupReader(path) as reader, pytest.raises(CorruptLookupFileError) as caught:
        reader.get(GOLDEN_ENTRIES[0][0])
    assert caught.value.location == f"{path} at byte 0"
    assert "lzo stream ends before" in caught.value.rule
