"""Block compression of the sorted lookup file: codec ids, the 12.5% rule, the bodies, and the
bound on what a body may declare.

Byte layout of a stored block body (docs/lookup-format.md#compression; Paimon's
``BlockCompressionType`` for the ids)::

    codec 0 (none):  the block bytes as they are
    codec 1 (zstd):  varint32 uncompressedLength, one zstd frame (no content size in its header)
    codec 2 (lz4):   varint32 uncompressedLength,
                     int32 compressedLength, int32 originalLength (little-endian),
                     one raw LZ4 block of compressedLength bytes
    codec 3 (lzo):   varint32 uncompressedLength,
                     int32 compressedLength, int32 originalLength (little-endian),
                     one raw LZO1X stream of compressedLength bytes (ending in its EOF marker;
                     Paimon writes it with aircompressor's LzoCompressor)

The codec id itself is not part of the body: it is the first byte of the block trailer
(``block.py``). A compressed body is kept only if it is smaller than ``len - len // 8`` (integer
division) of the raw block, i.e. it must save more than 12.5%; otherwise the block is stored raw
with codec 0, whatever codec the writer was asked for.

**What a body may declare** (docs/lookup-format.md#compression). The uncompressed length is read
from the file, so it is believed only within two bounds, both checked before anything is
allocated:

1. what the codec can physically produce from the stored payload: zstd at most
   ``ZSTD_MAX_RATIO`` (32768) bytes per stored byte (a zstd block decodes to at most 128 KiB and
   takes at least 4 bytes), lz4 and lzo at most ``BYTE_CODEC_MAX_RATIO`` (256) per stored byte
   plus a few bytes (both extend a match length by 255 per extra byte). An honest body is never
   refused by this bound; a body over it is a lie.
2. an absolute cap per block, ``max_block_bytes`` of the reader (default
   ``DEFAULT_MAX_BLOCK_BYTES``, 256 MiB, at most 2 GiB - 1), which bounds the memory one block
   can cost however compressible it is.

The writer compresses blocks up to ``DEFAULT_MAX_BLOCK_BYTES`` and stores larger ones raw
(codec 0, allowed for any block), so a default reader reads every file lakecore writes. A raw
block costs no more memory than its bytes in the file.

Decompression then trusts the codec no further: the output must have exactly the declared length.
Failures raise ``ValueError``; the reader names file and offset.
"""

from __future__ import annotations

import struct
from typing import Final

import lz4.block
import lzokay
import zstandard

from lakecore.core.lookup.varint import MAX_INT32, VARINT32_MAX_BYTES, decode_varint, encode_varint

CODEC_NONE: Final = 0
CODEC_ZSTD: Final = 1
CODEC_LZ4: Final = 2
CODEC_LZO: Final = 3

#: Names accepted by the writer, and the id each one is written with.
CODEC_IDS: Final[dict[str, int]] = {
    "none": CODEC_NONE,
    "zstd": CODEC_ZSTD,
    "lz4": CODEC_LZ4,
    "lzo": CODEC_LZO,
}
CODEC_NAMES: Final[dict[int, str]] = {v: k for k, v in CODEC_IDS.items()}

#: Paimon's default zstd level for lookup files: level 1 compresses the space-padded catalog
#: keys about 30x already, and higher levels only slow the build.
ZSTD_LEVEL: Final = 1

#: LZ4 and LZO header inside the body: int32 compressedLength, int32 originalLength.
_LENGTHS_HEADER: Final = struct.Struct("<ii")
#: Most bytes a zstd frame can decode to per stored byte: a block holds at most 128 KiB of
#: output and takes at least 4 bytes (3-byte header + 1 byte of an RLE block).
ZSTD_MAX_RATIO: Final = 32768
#: LZ4 and LZO1X grow a match by 255 bytes per extra length byte, so neither can expand data
#: more than about 255x; the slack covers the fixed cost of a tiny block's last instructions.
BYTE_CODEC_MAX_RATIO: Final = 256
_BYTE_CODEC_SLACK: Final = 64
#: Up to this declared size a zstd body is decompressed in one call into a buffer of exactly
#: the declared size; a larger declaration is only believed as far as the frame really produces
#: output, read in chunks, so a corrupt length cannot make the reader allocate it up front.
_ZSTD_ONE_SHOT_LIMIT: Final = 8 << 20
_ZSTD_CHUNK: Final = 1 << 20
#: Default cap on a block's declared uncompressed size (Paimon's default lookup cache memory),
#: and the largest raw block the writer compresses.
DEFAULT_MAX_BLOCK_BYTES: Final = 256 << 20


def max_decoded_size(codec: int, stored_payload: int) -> int:
    """The most bytes a payload of ``stored_payload`` bytes can decode to with ``codec``."""
    if codec == CODEC_ZSTD:
        return ZSTD_MAX_RATIO * stored_payload
    return BYTE_CODEC_MAX_RATIO * stored_payload + _BYTE_CODEC_SLACK


def keep_compressed(raw_size: int, compressed_size: int) -> bool:
    """The 12.5% rule: keep a compressed body only if it saves more than an eighth."""
    return compressed_size < raw_size - raw_size // 8


class BlockCompressor:
    """Compresses finished blocks for one writer with one codec (reused across blocks)."""

    __slots__ = ("_codec", "_max_block_bytes", "_zstd")

    def __init__(self, codec: str, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES) -> None:
        if codec not in CODEC_IDS:
            raise ValueError(f"unknown compression {codec!r}")
        self._codec = CODEC_IDS[codec]
        # Blocks above the default reader's cap are stored raw, so that every file this writer
        # produces opens with a default reader.
        self._max_block_bytes = max_block_bytes
        self._zstd = (
            zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False)
            if self._codec == CODEC_ZSTD
            else None
        )

    def compress(self, raw: bytes) -> tuple[int, bytes]:
        """``(codec id, stored bytes)`` for a finished block, after the 12.5% rule."""
        # A block is never empty (its tail alone is 5 bytes); an empty input is refused here
        # because lzokay writes a stream for it that liblzo2 rejects.
        if self._codec == CODEC_NONE or not raw or len(raw) > self._max_block_bytes:
            return CODEC_NONE, raw
        prefix = encode_varint(len(raw))
        if self._zstd is not None:
            payload = self._zstd.compress(raw)
        else:
            block = (
                lz4.block.compress(raw, store_size=False)
                if self._codec == CODEC_LZ4
                else lzokay.compress(raw)
            )
            payload = _LENGTHS_HEADER.pack(len(block), len(raw)) + block
        if keep_compressed(len(raw), len(prefix) + len(payload)):
            return self._codec, prefix + payload
        return CODEC_NONE, raw


class BlockDecompressor:
    """Turns stored block bodies back into raw blocks for one reader (not thread-safe).

    ``max_block_bytes`` is the absolute cap on a block's declared uncompressed size.
    """

    __slots__ = ("_max_block_bytes", "_zstd")

    def __init__(self, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES) -> None:
        if not 0 < max_block_bytes <= MAX_INT32:
            raise ValueError(f"max_block_bytes must be in [1, {MAX_INT32}], not {max_block_bytes}")
        self._max_block_bytes = max_block_bytes
        # One decompression context per reader: creating one costs more than decompressing a
        # typical 64 KiB block of catalog keys.
        self._zstd = zstandard.ZstdDecompressor()

    def decompress(self, codec: int, stored: bytes) -> bytes:
        """The raw block of a body stored with ``codec``; ``ValueError`` if it is malformed."""
        if codec == CODEC_NONE:
            return stored
        if codec not in CODEC_NAMES:
            raise ValueError(
                f"unknown codec id {codec}; this reader supports the ids of Paimon's "
                "BlockCompressionType: "
                + ", ".join(f"{i} ({name})" for i, name in sorted(CODEC_NAMES.items()))
            )
        # Lengths below 2 MiB (one to three varint bytes) are decoded inline: this runs for every
        # block a lookup reads.
        if len(stored) > 3 and stored[0] < 0x80:
            declared, start = stored[0], 1
        elif len(stored) > 3 and stored[1] < 0x80:
            declared, start = (stored[0] & 0x7F) | stored[1] << 7, 2
        else:
            declared, start = decode_varint(stored, 0, len(stored), VARINT32_MAX_BYTES)
        self._check_declared(codec, declared, len(stored) - start)
        if codec == CODEC_ZSTD:
            # A view, not a copy: zstd reads the frame in place.
            raw = self._zstd_decompress(memoryview(stored)[start:], declared)
            if len(raw) != declared:
                raise ValueError(
                    f"block decompressed to {len(raw)} bytes, its header says {declared}"
                )
            return raw
        payload = stored[start:]
        if codec == CODEC_LZ4:
            raw = _lz4_decompress(_framed_block(payload, declared, "lz4"), declared)
        else:
            raw = _lzo_decompress(_framed_block(payload, declared, "lzo"), declared)
        if len(raw) != declared:
            raise ValueError(f"block decompressed to {len(raw)} bytes, its header says {declared}")
        return raw

    def _check_declared(self, codec: int, declared: int, payload: int) -> None:
        """The two bounds of the module docstring, before anything is allocated."""
        possible = max_decoded_size(codec, payload)
        if declared > possible:
            raise ValueError(
                f"compressed block declares {declared} uncompressed bytes, but "
                f"{CODEC_NAMES[codec]} cannot expand its {payload} stored bytes to more than "
                f"{possible} (a decompression bomb or a corrupt length)"
            )
        if declared > self._max_block_bytes:
            raise ValueError(
                f"compressed block declares {declared} uncompressed bytes, more than this "
                f"reader's max_block_bytes ({self._max_block_bytes}); open the file with a "
                "larger max_block_bytes (at most 2 GiB - 1) if it is trusted"
            )

    def _zstd_decompress(self, payload: memoryview, declared: int) -> bytes:
        try:
            # The frame header descriptor (byte 4) says whether a content size follows: none
            # when its size flag (bits 6-7) and single-segment flag (bit 5) are 0, as in the
            # frames lakecore and Paimon write. Only a frame with one has it checked, so that
            # zstd never sizes its output by a number the block header contradicts.
            if len(payload) < 5 or payload[4] & 0xE0:
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

    def _zstd_decompress_chunked(self, payload: memoryview, declared: int) -> bytes:
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


def _framed_block(payload: bytes, declared: int, name: str) -> bytes:
    """The raw lz4/lzo block after the ``int32 compressedLength, int32 originalLength`` header,
    once both lengths agree with the body and the block header (Paimon checks the same)."""
    if len(payload) < _LENGTHS_HEADER.size:
        raise ValueError(f"{name} body shorter than its 8-byte header")
    compressed_length, original_length = _LENGTHS_HEADER.unpack_from(payload)
    if compressed_length != len(payload) - _LENGTHS_HEADER.size:
        raise ValueError(
            f"{name} header says {compressed_length} compressed bytes, "
            f"the body holds {len(payload) - _LENGTHS_HEADER.size}"
        )
    if original_length != declared:
        raise ValueError(f"{name} header says {original_length} bytes, the block header {declared}")
    return payload[_LENGTHS_HEADER.size :]


def _lz4_decompress(block: bytes, declared: int) -> bytes:
    try:
        out: bytes = lz4.block.decompress(block, uncompressed_size=max(declared, 1))
    except lz4.block.LZ4BlockError as error:
        raise ValueError(f"lz4 body does not decompress: {error}") from None
    return out


def _lzo_decompress(block: bytes, declared: int) -> bytes:
    if declared == 0 or not block:
        # Paimon's rule: an empty block and an empty stream go together.
        if declared or block:
            raise ValueError(f"lzo body of {len(block)} bytes for {declared} bytes of output")
        return b""
    try:
        # lzokay fills a buffer of exactly ``declared`` bytes and raises if the stream writes
        # past it, so the allocation is the bounded declaration, never more.
        out = lzokay.decompress(block, declared)
    except lzokay.LzokayError as error:
        raise ValueError(f"lzo body does not decompress: {type(error).__name__}") from None
    # lzokay returns the whole buffer even when the stream ends early (the rest is zeros), so
    # prove the stream is not short: one byte less of room must overrun.
    try:
        lzokay.decompress(block, declared - 1)
    except lzokay.OutputOverrunError:
        return out
    except lzokay.LzokayError as error:
        raise ValueError(f"lzo body does not decompress: {type(error).__name__}") from None
    raise ValueError(f"lzo stream ends before the {declared} bytes its header declares")
