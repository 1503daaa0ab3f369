"""Shared helpers of the lookup-file tests: catalog-shaped data and file surgery."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

from lakecore.core.lookup import LookupWriter

FOOTER = struct.Struct("<qiqqii")
MAGIC = 1481571681


def catalog_entries(n: int) -> list[tuple[bytes, bytes]]:
    """Sorted ``(key, value)`` pairs shaped like catalog table keys (about 200 + 40 bytes)."""
    entries = []
    for i in range(n):
        ns = f"ns_{i // 50:04d}".encode().ljust(100, b" ")
        table = f"table_{i % 50:03d}".encode().ljust(100, b" ")
        value = f"tables/ns_{i // 50:04d}/table_{i % 50:03d}/v{i}.binpb".encode()
        entries.append((b"C===" + ns + table, value))
    entries.sort()
    return entries


def write_file(path: Path, entries: list[tuple[bytes, bytes]], **options: object) -> Path:
    with LookupWriter(path, **options) as writer:  # type: ignore[arg-type]
        for key, value in entries:
            writer.put(key, value)
    return path


def footer_fields(data: bytes) -> tuple[int, int, int, int, int, int]:
    fields: tuple[int, int, int, int, int, int] = FOOTER.unpack(data[-36:])
    return fields


def with_footer(data: bytes, **changes: int) -> bytes:
    names = ["bloom_offset", "bloom_size", "bloom_entries", "index_offset", "index_size", "magic"]
    fields = dict(zip(names, footer_fields(data), strict=True))
    fields.update(changes)
    return data[:-36] + FOOTER.pack(*(fields[name] for name in names))


def trailer(stored: bytes, codec: int = 0) -> bytes:
    return struct.pack("<BI", codec, zlib.crc32(stored + bytes((codec,))))


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def aligned_block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(varint(len(k)) + k + varint(len(v)) + v for k, v in entries)
    size = len(body) // len(entries)
    return body + struct.pack("<i", size) + b"\x00"


def unaligned_block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b""
    starts = []
    for k, v in entries:
        starts.append(len(body))
        body += varint(len(k)) + k + varint(len(v)) + v
    return (
        body + struct.pack(f"<{len(starts)}i", *starts) + struct.pack("<i", len(starts)) + b"\x01"
    )


def assemble(
    data_blocks: list[tuple[bytes, bytes, int]], bloom: bytes = b"", bloom_entries: int = 0
) -> bytes:
    """A file from stored data blocks ``(last key, stored bytes, codec)``, with correct CRCs."""
    out = b""
    index_entries = []
    for last_key, stored, codec in data_blocks:
        index_entries.append((last_key, varint(len(out)) + varint(len(stored))))
        out += stored + trailer(stored, codec)
    bloom_offset = len(out) if bloom else 0
    out += bloom
    index = unaligned_block(index_entries) if index_entries else struct.pack("<i", 0) + b"\x01"
    index_offset = len(out)
    out += index + trailer(index)
    return out + FOOTER.pack(
        bloom_offset, len(bloom), bloom_entries, index_offset, len(index), MAGIC
    )


def scratch(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return path
