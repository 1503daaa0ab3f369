"""Block compression of the sorted lookup file: codec ids, the 12.5% rule, zstd and lz4 bodies.

Byte layout of a stored block body (LOOKUP-FORMAT.md, "Compressed block body")::

    codec 0 (none):  the block bytes as they are
    codec 1 (zstd):  varint32 uncompressedLength, one zstd frame (no content size in its header)
    codec 2 (lz4):   varint32 uncompressedLength,
                     int32 compressedLength, int32 originalLength (little-endian),
                     one raw LZ4 block of compressedLength bytes

The codec id itself is not part of the body: it is the first byte of the block trailer
(``block.py``). A compressed body is kept only if it is smaller than ``len - len // 8`` (integer
division) of the raw block, i.e. it must save more than 12.5%; otherwise the block is stored raw
with codec 0, whatever codec the writer was asked for.

Compressed blocks are capped at ``MAX_COMPRESSED_BLOCK_BYTES`` of raw data: the writer stores a
larger block raw (codec 0, which the format allows for any block), and the reader refuses a
compressed body declaring more. A raw block costs no more memory than its bytes in the file,
while a compressed one of a few KB could otherwise make the reader allocate 2 GiB.

Decompression trusts no length it reads: a declared length is checked against what the codec can
physically produce from the stored bytes before anything is allocated, and the output must have
exactly the declared length. Failures raise ``ValueError``; the reader names file and offset.
"""

from __future__ import annotations

import struct
from typing import Final

import lz4.block
import zstandard

from lakecore.lookup.varint import MAX_INT32, VARINT32_MAX_BYTES, decode_varint, encode_varint

CODEC_NONE: Final = 0
CODEC_ZSTD: Final = 1
CODEC_LZ4: Final = 2

#: Names accepted by the writer, and the id each one is written with.
CODEC_IDS: Final[dict[str, int]] = {"none": CODEC_NONE, "zstd": CODEC_ZSTD, "lz4": CODEC_LZ4}
CODEC_NAMES: Final[dict[int, str]] = {v: k for k, v in CODEC_IDS.items()}

#: Paimon's default zstd level for lookup files: level 1 compresses the space-padded catalog
#: keys about 30x already, and higher levels only slow the build.
ZSTD_LEVEL: Final = 1

#: LZ4 header inside the body: int32 compressedLength, int32 originalLength.
_LZ4_HEADER: Final = struct.Struct("<ii")
#: LZ4 cannot expand data more than about 255x (one length byte per 255 bytes of match); the
#: slack covers the fixed cost of the last literals of a tiny block.
_LZ4_MAX_RATIO: Final = 256
_LZ4_SLACK: Final = 64
#: Up to this declared size a zstd body is decompressed in one call into a buffer of exactly
#: the declared size; a larger declaration is only believed as far as the frame really produces
#: output, read in chunks, so a corrupt length cannot make the reader allocate it up front.
_ZSTD_ONE_SHOT_LIMIT: Final = 8 << 20
_ZSTD_CHUNK: Final = 1 << 20
#: The largest raw block written (and read) compressed; 256 default-sized blocks.
MAX_COMPRESSED_BLOCK_BYTES: Final = 16 << 20


def keep_compressed(raw_size: int, compressed_size: int) -> bool:
    """The 12.5% rule: keep a compressed body only if it saves more than an eighth."""
    return compressed_size < raw_size - raw_size // 8


class BlockCompressor:
    """Compresses finished blocks for one writer with one codec (reused across blocks)."""

    __slots__ = ("_codec", "_zstd")

    def __init__(self, codec: str) -> None:
        if codec not in CODEC_IDS:
            raise ValueError(f"unknown compression {codec!r}")
        self._codec = CODEC_IDS[codec]
        self._zstd = (
            zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False)
            if self._codec == CODEC_ZSTD
            else None
        )

    def compress(self, raw: bytes) -> tuple[int, bytes]:
        """``(codec id, stored bytes)`` for a finished block, after the 12.5% rule."""
        if self._codec == CODEC_NONE or len(raw) > MAX_COMPRESSED_BLOCK_BYTES:
            return CODEC_NONE, raw
        prefix = encode_varint(len(raw))
        if self._zstd is not None:
            payload = self._zstd.compress(raw)
        else:
            block = lz4.block.compress(raw, store_size=False)
            payload = _LZ4_HEADER.pack(len(block), len(raw)) + block
        if keep_compressed(len(raw), len(prefix) + len(payload)):
            return self._codec, prefix + payload
        return CODEC_NONE, raw


class BlockDecompressor:
    """Turns stored block bodies back into raw blocks for one reader (not thread-safe)."""

    __slots__ = ("_zstd",)

    def __init__(self) -> None:
        # One decompression context per reader: creating one costs more than decompressing a
        # typical 64 KiB block of catalog keys.
        self._zstd = zstandard.ZstdDecompressor()

    def decompress(self, codec: int, stored: bytes) -> bytes:
        """The raw block of a body stored with ``codec``; ``ValueError`` if it is malformed."""
        if codec == CODEC_NONE:
            return stored
        if codec not in (CODEC_ZSTD, CODEC_LZ4):
            raise ValueError(f"unknown codec id {codec}")
        declared, start = decode_varint(stored, 0, len(stored), VARINT32_MAX_BYTES)
        if declared > MAX_INT32:
            raise ValueError(f"uncompressed length {declared} exceeds a 32-bit int")
        if declared > MAX_COMPRESSED_BLOCK_BYTES:
            raise ValueError(
                f"compressed block declares {declared} uncompressed bytes, more than the "
                f"{MAX_COMPRESSED_BLOCK_BYTES} lakecore writes or reads compressed (larger blocks are stored raw); "
                "the file is corrupt or was not written by lakecore: rebuild it"
            )
        payload = stored[start:]
        if codec == CODEC_ZSTD:
            raw = self._zstd_decompress(payload, declared)
        else:
            raw = _lz4_decompress(payload, declared)
        if len(raw) != declared:
            raise ValueError(f"block decompressed to {len(raw)} bytes, its header says {declared}")
        return raw

    def _zstd_decompress(self, payload: bytes, declared: int) -> bytes:
        try:
            params = zstandard.get_frame_parameters(payload)
            if params.content_size not in (zstandard.CONTENTSIZE_UNKNOWN, declared):
                raise ValueError(
                    f"zstd frame says {params.content_size} bytes, the block header {declared}"
                )
            if declared <= _ZSTD_ONE_SHOT_LIMIT:
                out: bytes = self._zstd.decompress(payload, max_output_size=max(declared, 1))
                return out
            return self._zstd_decompress_chunked(payload, declared)
        except zstandard.ZstdError as error:
            raise ValueError(f"zstd body does not decompress: {error}") from None

    def _zstd_decompress_chunked(self, payload: bytes, declared: int) -> bytes:
        chunks: list[bytes] = []
        total = 0
        with self._zstd.stream_reader(payload) as reader:
            while True:
                chunk = reader.read(_ZSTD_CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > declared:
                    raise ValueError(f"zstd body decompresses past its declared {declared} bytes")
                chunks.append(chunk)
        return b"".join(chunks)


def _lz4_decompress(payload: bytes, declared: int) -> bytes:
    if len(payload) < _LZ4_HEADER.size:
        raise ValueError("lz4 body shorter than its 8-byte header")
    compressed_length, original_length = _LZ4_HEADER.unpack_from(payload)
    if compressed_length != len(payload) - _LZ4_HEADER.size:
        raise ValueError(
            f"lz4 header says {compressed_length} compressed bytes, "
            f"the body holds {len(payload) - _LZ4_HEADER.size}"
        )
    if original_length != declared:
        raise ValueError(f"lz4 header says {original_length} bytes, the block header {declared}")
    if declared > compressed_length * _LZ4_MAX_RATIO + _LZ4_SLACK:
        raise ValueError(f"lz4 cannot expand {compressed_length} bytes to {declared}")
    try:
        out: bytes = lz4.block.decompress(
            payload[_LZ4_HEADER.size :], uncompressed_size=max(declared, 1)
        )
    except lz4.block.LZ4BlockError as error:
        raise ValueError(f"lz4 body does not decompress: {error}") from None
    return out
