"""Writing a sorted lookup file: ``LookupWriter``.

File layout written (docs/lookup-format.md#file-layout)::

    data block 0, trailer 0, data block 1, trailer 1, ...   (block.py, compression.py)
    bloom bitset (optional, raw)                            (bloom.py)
    index block, trailer                                    (an ordinary block mapping each data
                                                             block's last key to its handle)
    footer (36 bytes)                                       (footer.py)

The writer streams blocks to a temporary file beside the target and renames it into place only
in :meth:`LookupWriter.close`, after an fsync, so the target path holds either nothing (or its
previous file) or a complete lookup file, never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from types import TracebackType
from typing import BinaryIO, Final

from lakecore.core.lookup.block import BYTES_LIKE, TRAILER_SIZE, BlockBuilder, encode_trailer
from lakecore.core.lookup.bloom import (
    DEFAULT_FPP,
    MIN_FPP,
    bloom_bytes,
    bloom_hash_count,
    build_bitset,
)
from lakecore.core.lookup.compression import CODEC_IDS, BlockCompressor
from lakecore.core.lookup.footer import Footer
from lakecore.core.lookup.handle import BlockHandle
from lakecore.core.lookup.murmur import KeyHashes
from lakecore.core.lookup.varint import MAX_INT32, VARINT32_MAX_BYTES
from lakecore.errors import InvalidArgumentError

#: Default block size: 8 KiB, not Paimon's 64 KiB (its lookup cache page size). A single get
#: that misses the block cache decompresses one whole block, and zstd alone takes 15-25 us for
#: 64 KiB here, more than RocksDB's whole cold get; 8 KiB blocks bring a cold get to ~1.35x
#: RocksDB's while the file stays smaller than its SST, at the cost of batched lookups
#: (bench/bench_lookup.py; docs/lookup-format.md#why-8-kib-blocks has the numbers).
#: Paimon reads any block size.
DEFAULT_BLOCK_SIZE: Final = 8 * 1024
#: Write buffer of the temporary file; blocks are written whole, so this only batches syscalls.
_WRITE_BUFFER: Final = 1 << 20
#: How much of a key an error message shows.
_SHOW_KEY_BYTES: Final = 120


def _show(key: bytes) -> str:
    if len(key) <= _SHOW_KEY_BYTES:
        return repr(key)
    return f"{key[:_SHOW_KEY_BYTES]!r}... ({len(key)} bytes)"


class LookupWriter:
    """Writes keys in strictly ascending unsigned-byte order, with their values, to ``path``.

    ``compression`` is "none", "zstd", "lz4" or "lzo"; ``bloom_fpp=None`` writes no bloom filter;
    ``expected_entries=None`` sizes the filter from the real number of keys at close.
    Use as a context manager: an exception inside the ``with`` block leaves nothing at ``path``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        compression: str = "zstd",
        bloom_fpp: float | None = DEFAULT_FPP,
        expected_entries: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
    ) -> None:
        if compression not in CODEC_IDS:
            raise InvalidArgumentError(
                f"lookup file compression must be one of {sorted(CODEC_IDS)}, not {compression!r}"
            )
        if bloom_fpp is not None and not MIN_FPP <= bloom_fpp < 1.0:
            raise InvalidArgumentError(
                f"bloom_fpp must be in [{MIN_FPP}, 1) or None, not {bloom_fpp!r}"
            )
        if expected_entries is not None and expected_entries <= 0:
            raise InvalidArgumentError(
                f"expected_entries must be positive or None, not {expected_entries!r}"
            )
        if bloom_fpp is not None and expected_entries is not None:
            try:
                bloom_bytes(expected_entries, bloom_fpp)
            except ValueError as error:
                raise InvalidArgumentError(str(error)) from None
        if block_size <= 0:
            raise InvalidArgumentError(f"block_size must be positive, not {block_size!r}")
        self.path = os.fspath(path)
        self._compressor = BlockCompressor(compression)
        self._bloom_fpp = bloom_fpp
        self._expected_entries = expected_entries
        self._block_size = block_size
        self._hashes = KeyHashes() if bloom_fpp is not None else None
        self._data = BlockBuilder()
        self._index = BlockBuilder()
        self._last_key: bytes | None = None
        self._count = 0
        self._position = 0
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, self._temp_path = tempfile.mkstemp(
            prefix=f".{os.path.basename(self.path)}.", suffix=".tmp", dir=directory
        )
        self._file: BinaryIO | None = os.fdopen(fd, "wb", buffering=_WRITE_BUFFER)
        # A writer dropped without close() or abort() must not leave its temporary file behind.
        self._discard = weakref.finalize(self, _discard, self._file, self._temp_path)

    @property
    def entries(self) -> int:
        """Number of entries put so far."""
        return self._count

    def put(self, key: bytes, value: bytes) -> None:
        """Append one entry; ``key`` must be greater than every key before it."""
        if self._file is None:
            raise InvalidArgumentError(f"lookup writer for {self.path} is already closed")
        if type(key) is not bytes or type(value) is not bytes:
            key, value = self._coerce(key, value)
        last = self._last_key
        if last is not None and key <= last:
            relation = "equals" if key == last else "sorts before"
            raise InvalidArgumentError(
                f"lookup file {self.path}: keys must be strictly ascending as unsigned bytes, "
                f"but entry {self._count} (counting from 0) has key {_show(key)}, which "
                f"{relation} the previous key {_show(last)}"
            )
        # An entry alone in its block stores its encoded size (two varint lengths and both
        # byte strings) as an int32: the bound is on that, not on each part.
        if len(key) + len(value) + 2 * VARINT32_MAX_BYTES > MAX_INT32:
            raise InvalidArgumentError(
                f"lookup file {self.path}: entry {self._count} is larger than 2 GiB (key and value together)"
            )
        self._data.add(key, value)
        if self._hashes is not None:
            self._hashes.add(key)
        self._last_key = key
        self._count += 1
        if self._data.memory() > self._block_size:
            self._flush_data_block()

    def _coerce(self, key: object, value: object) -> tuple[bytes, bytes]:
        if not isinstance(key, BYTES_LIKE) or not isinstance(value, BYTES_LIKE):
            raise InvalidArgumentError(
                f"lookup file {self.path}: keys and values must be bytes, got "
                f"{type(key).__name__} and {type(value).__name__}"
            )
        return bytes(key), bytes(value)

    def _write_block(self, raw: bytes) -> BlockHandle:
        assert self._file is not None
        codec, stored = self._compressor.compress(raw)
        handle = BlockHandle(self._position, len(stored))
        self._file.write(stored)
        self._file.write(encode_trailer(stored, codec))
        self._position += len(stored) + TRAILER_SIZE
        return handle

    def _flush_data_block(self) -> None:
        if not len(self._data):
            return
        assert self._last_key is not None
        handle = self._write_block(self._data.finish())
        self._index.add(self._last_key, handle.encode())

    def close(self) -> None:
        """Finish the file and move it to ``path``. Closing twice is harmless."""
        file = self._file
        if file is None:
            return
        try:
            self._flush_data_block()
            bloom_offset = bloom_size = bloom_entries = 0
            if self._hashes is not None and self._bloom_fpp is not None:
                n = self._expected_entries if self._expected_entries is not None else self._count
                # An empty file gets no filter: there is nothing it could answer.
                if n > 0 and self._count > 0:
                    try:
                        size = bloom_bytes(n, self._bloom_fpp)
                    except ValueError as error:
                        raise InvalidArgumentError(f"lookup file {self.path}: {error}") from None
                    bitset = build_bitset(self._hashes.finish(), size, bloom_hash_count(n, size))
                    bloom_offset, bloom_size, bloom_entries = self._position, size, n
                    file.write(bitset)
                    self._position += size
            index = self._write_block(self._index.finish())
            file.write(
                Footer(bloom_offset, bloom_size, bloom_entries, index.offset, index.size).encode()
            )
            file.flush()
            os.fsync(file.fileno())
            file.close()
            self._file = None
            os.replace(self._temp_path, self.path)
            self._discard.detach()
        except BaseException:
            self.abort()
            raise
        _fsync_directory(os.path.dirname(os.path.abspath(self.path)))

    def abort(self) -> None:
        """Drop everything written; nothing is left at ``path`` (or its old file stays)."""
        self._file = None
        self._discard()

    def __enter__(self) -> LookupWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _discard(file: BinaryIO, temp_path: str) -> None:
    with contextlib.suppress(OSError):
        file.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp_path)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; best effort, as not every platform can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
