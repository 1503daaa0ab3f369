"""The lookup file's bloom filter: sizing, building the bitset, and testing keys against it.

Byte layout (docs/lookup-format.md#bloom-filter): the bitset is ``bytes`` raw bytes stored between
the last data block and the index block, with no trailer and no checksum; bit ``b`` is bit
``b & 7`` (least significant first) of byte ``b >> 3``. The footer records its offset, its size
in bytes and the expected entry count ``n`` it was sized for; the reader derives everything
else from those two numbers::

    bits_wanted = floor(-n * ln(p) / ln(2)^2)      (p = false-positive rate, default 0.05)
    bytes       = ceil(bits_wanted / 8)
    bit_count   = bytes * 8                        (the modulus below: all bytes are used)
    k           = max(1, round(bit_count / n * ln 2))

    for a key with h1 = murmur3_paimon(key) (murmur.py), h2 = h1 >>> 16 (unsigned shift):
        for i in 1..k:  c = int32(h1 + i * h2);  if c < 0: c = ~c;  set/test bit c % bit_count

Paimon refuses a filter that would have zero bytes (p too close to 1 for the entry count), and
so does this module.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from lakecore.core.lookup.varint import MAX_INT32

#: The writer's default false-positive rate, Paimon's default.
DEFAULT_FPP: Final = 0.05
#: Most probes a reader accepts. k is about -log2(fpp), so 64 probes means a rate of 2**-64;
#: a larger k can only come from a damaged expected-entries field (the footer has no checksum),
#: and believing it would make every lookup loop millions of times.
MAX_HASH_COUNT: Final = 64
#: Smallest false-positive rate a writer accepts: it keeps k within MAX_HASH_COUNT.
MIN_FPP: Final = 1e-18
#: Keys tested per numpy pass in might_contain_many, to bound the (keys, k) position matrix.
_TEST_CHUNK: Final = 1 << 14


def bloom_bytes(expected_entries: int, fpp: float) -> int:
    """Size of the bitset in bytes for ``expected_entries`` keys at rate ``fpp``."""
    if expected_entries <= 0:
        raise ValueError(
            f"a bloom filter needs at least one expected entry, not {expected_entries}"
        )
    if not MIN_FPP <= fpp < 1.0:
        raise ValueError(f"bloom false-positive rate must be in [{MIN_FPP}, 1), not {fpp}")
    bits = math.floor(-expected_entries * math.log(fpp) / (math.log(2) * math.log(2)))
    if bits > MAX_INT32:
        # Paimon's reader holds the bit count and every probe position in a Java int.
        raise ValueError(
            f"a bloom filter for {expected_entries} entries at rate {fpp} would have {bits} bits, over "
            f"the format's limit of {MAX_INT32} (a Java int); raise the rate or write several files"
        )
    size = math.ceil(bits / 8)
    if size <= 0:
        raise ValueError(
            f"a bloom filter for {expected_entries} entries at rate {fpp} would have no bits"
        )
    return size


def bloom_hash_count(expected_entries: int, size_bytes: int) -> int:
    """Number of probes k for a bitset of ``size_bytes`` sized for ``expected_entries`` keys."""
    # floor(x + 0.5) is Java's Math.round; Python's round() would round halves to even.
    return max(1, math.floor(size_bytes * 8 / expected_entries * math.log(2) + 0.5))


def _positions(hashes: npt.NDArray[np.int32], k: int, bit_count: int) -> npt.NDArray[np.int64]:
    """Bit positions, shape (len(hashes), k), of the double-hashing probes."""
    h1 = hashes.astype(np.int64)
    h2 = (h1 & 0xFFFFFFFF) >> 16
    i = np.arange(1, k + 1, dtype=np.int64)
    combined = h1[:, None] + i[None, :] * h2[:, None]
    # Wrap to a signed 32-bit int as Java's int addition does, then flip negatives.
    combined = ((combined + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    combined = np.where(combined < 0, ~combined, combined)
    result: npt.NDArray[np.int64] = combined % bit_count
    return result


def build_bitset(hashes: npt.NDArray[np.int32], size_bytes: int, k: int) -> bytes:
    """The bitset with the probes of every hash set."""
    bit_count = size_bytes * 8
    bits = np.zeros(bit_count, dtype=np.bool_)
    # Chunked so the (n, k) position matrix stays small for large files.
    chunk = 1 << 18
    for start in range(0, len(hashes), chunk):
        bits[_positions(hashes[start : start + chunk], k, bit_count).ravel()] = True
    return np.packbits(bits, bitorder="little").tobytes()


class BloomFilter:
    """A read-only view of a stored bitset."""

    __slots__ = ("_bit_count", "_bits", "_k", "bitset", "expected_entries")

    def __init__(self, bitset: bytes, expected_entries: int) -> None:
        if not bitset:
            raise ValueError("bloom filter bitset is empty")
        if expected_entries <= 0:
            raise ValueError(f"bloom filter expected entries {expected_entries} is not positive")
        self.bitset = bitset
        self.expected_entries = expected_entries
        self._bit_count = len(bitset) * 8
        self._k = bloom_hash_count(expected_entries, len(bitset))
        if self._k > MAX_HASH_COUNT:
            raise ValueError(
                f"a {len(bitset)}-byte filter for {expected_entries} entries would need "
                f"{self._k} probes (at most {MAX_HASH_COUNT} are plausible)"
            )
        self._bits: npt.NDArray[np.uint8] | None = None

    @property
    def hash_count(self) -> int:
        return self._k

    def might_contain(self, key_hash: int) -> bool:
        """False only if the key with this hash was certainly never added."""
        h2 = (key_hash & 0xFFFFFFFF) >> 16
        bitset = self.bitset
        bit_count = self._bit_count
        for i in range(1, self._k + 1):
            c = (key_hash + i * h2) & 0xFFFFFFFF
            if c & 0x80000000:
                # int32(c) is negative; ~int32(c) == 0xFFFFFFFF - c as an unsigned value.
                c = 0xFFFFFFFF - c
            pos = c % bit_count
            if not bitset[pos >> 3] >> (pos & 7) & 1:
                return False
        return True

    def might_contain_many(self, hashes: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_]:
        """:meth:`might_contain` for many hashes at once."""
        if self._bits is None:
            self._bits = np.unpackbits(
                np.frombuffer(self.bitset, dtype=np.uint8), bitorder="little"
            )
        bits = self._bits
        result = np.empty(len(hashes), dtype=np.bool_)
        for start in range(0, len(hashes), _TEST_CHUNK):
            chunk = hashes[start : start + _TEST_CHUNK]
            result[start : start + len(chunk)] = bits[
                _positions(chunk, self._k, self._bit_count)
            ].all(axis=1)
        return result
