"""The 36-byte footer at the very end of a lookup file, and its consistency with the file size.

Byte layout (docs/lookup-format.md#footer), little-endian::

    offset  size  field
         0     8  int64 bloomOffset             file offset of the bloom bitset
         8     4  int32 bloomSize               bitset size in bytes
        12     8  int64 bloomExpectedEntries    n the filter was sized for
        20     8  int64 indexOffset             file offset of the index block
        28     4  int32 indexSize               stored index block size, excluding its trailer
        32     4  int32 magic                   1481571681 = 0x584EFD61, bytes 61 FD 4E 58

All three bloom fields zero means the file has no bloom filter.

Beyond the layout, the reader holds a file to the order the writer produces (data blocks from
offset 0, then the bitset, then the index block and its trailer, then the footer), so
:meth:`Footer.check` requires each region to end exactly where the next one starts.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from lakecore.core.lookup.block import TRAILER_SIZE
from lakecore.core.lookup.corruption import corrupt
from lakecore.errors import CorruptLookupFileError

MAGIC: Final = 1481571681
FOOTER_SIZE: Final = 36
_LAYOUT: Final = struct.Struct("<qiqqii")

# Byte positions of the fields inside the footer, for error messages.
_AT_BLOOM_OFFSET: Final = 0
_AT_BLOOM_SIZE: Final = 8
_AT_BLOOM_ENTRIES: Final = 12
_AT_INDEX_OFFSET: Final = 20
_AT_INDEX_SIZE: Final = 28
_AT_MAGIC: Final = 32


@dataclass(frozen=True, slots=True)
class Footer:
    bloom_offset: int
    bloom_size: int
    bloom_expected_entries: int
    index_offset: int
    index_size: int

    @property
    def has_bloom(self) -> bool:
        return not (
            self.bloom_offset == 0 and self.bloom_size == 0 and self.bloom_expected_entries == 0
        )

    @property
    def data_end(self) -> int:
        """Where the data blocks end: at the bitset, or at the index block without one."""
        return self.bloom_offset if self.has_bloom else self.index_offset

    def encode(self) -> bytes:
        return _LAYOUT.pack(
            self.bloom_offset,
            self.bloom_size,
            self.bloom_expected_entries,
            self.index_offset,
            self.index_size,
            MAGIC,
        )

    @classmethod
    def decode(cls, raw: bytes, path: str, file_size: int) -> Footer:
        """Decode the last 36 bytes of the file at ``path``, which has ``file_size`` bytes."""
        footer_at = file_size - FOOTER_SIZE
        if len(raw) != FOOTER_SIZE or footer_at < 0:
            raise corrupt(
                path,
                0,
                f"file of {file_size} bytes is shorter than the {FOOTER_SIZE}-byte footer",
            )
        bloom_offset, bloom_size, bloom_entries, index_offset, index_size, magic = _LAYOUT.unpack(
            raw
        )
        if magic != MAGIC:
            raise corrupt(
                path,
                footer_at + _AT_MAGIC,
                f"bad magic number {magic & 0xFFFFFFFF:#010x}, expected {MAGIC:#010x}: "
                "not a sorted lookup file",
            )
        return cls(bloom_offset, bloom_size, bloom_entries, index_offset, index_size)

    def check(self, path: str, file_size: int) -> None:
        """Check every offset and size against the file at ``path`` of ``file_size`` bytes."""
        footer_at = file_size - FOOTER_SIZE

        def error(field: int, rule: str) -> CorruptLookupFileError:
            return corrupt(path, footer_at + field, f"footer: {rule}")

        if self.index_offset < 0 or self.index_offset > footer_at:
            raise error(
                _AT_INDEX_OFFSET,
                f"index offset {self.index_offset} outside the file's {footer_at} bytes of blocks",
            )
        if self.index_size < 0 or self.index_offset + self.index_size + TRAILER_SIZE != footer_at:
            raise error(
                _AT_INDEX_SIZE,
                f"index block at {self.index_offset} of {self.index_size} bytes plus its "
                f"trailer does not end where the footer starts ({footer_at})",
            )
        if not self.has_bloom:
            return
        if self.bloom_offset < 0 or self.bloom_offset > self.index_offset:
            raise error(
                _AT_BLOOM_OFFSET,
                f"bloom offset {self.bloom_offset} is not before the index block at "
                f"{self.index_offset}",
            )
        if self.bloom_size <= 0 or self.bloom_offset + self.bloom_size != self.index_offset:
            raise error(
                _AT_BLOOM_SIZE,
                f"bloom bitset at {self.bloom_offset} of {self.bloom_size} bytes does not end "
                f"where the index block starts ({self.index_offset})",
            )
        if self.bloom_expected_entries <= 0:
            raise error(
                _AT_BLOOM_ENTRIES,
                f"bloom expected entries {self.bloom_expected_entries} is not positive",
            )
