"""Paimon's MurmurHash3 x86 32-bit variant (seed 42), the key hash of the lookup bloom filter.

Definition (docs/lookup-format.md#bloom-filter), all arithmetic on unsigned 32-bit words::

    h = seed (42)
    for each 4-byte word w of the key, little-endian:   h = mixH1(h, mixK1(w))
    for each remaining tail byte b (len % 4 of them):    h = mixH1(h, mixK1(int32(int8(b))))
    h ^= len;  h = fmix(h);  result is h as a signed int32

    mixK1(k) = rotl(k * 0xCC9E2D51, 15) * 0x1B873593
    mixH1(h, k) = rotl(h ^ k, 13) * 5 + 0xE6546B64
    fmix(h): h ^= h >> 16; h *= 0x85EBCA6B; h ^= h >> 13; h *= 0xC2B2AE35; h ^= h >> 16

The body is standard MurmurHash3; only the tail differs (standard murmur3 folds the tail bytes
into one unsigned word and skips the h1 mix). So a key whose length is a multiple of 4 hashes
the same as standard murmur3, and ``"abcd"`` gives -396302900 both ways.

Speed: :func:`murmur3_paimon` is the plain reference. The fast paths hash the 4-byte-aligned
body with the ``mmh3`` C extension, which returns ``fmix(h_body ^ body_len)``; ``fmix`` is a
bijection, so inverting it recovers ``h_body``, and the few tail bytes are mixed on top, one key
at a time (:func:`hash_key`) or for many keys at once with numpy (:class:`KeyHashes`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Final

import mmh3
import numpy as np
import numpy.typing as npt

SEED: Final = 42
_MASK: Final = 0xFFFFFFFF
_C1: Final = 0xCC9E2D51
_C2: Final = 0x1B873593
_H_ADD: Final = 0xE6546B64
_F1: Final = 0x85EBCA6B
_F2: Final = 0xC2B2AE35
# Multiplicative inverses modulo 2**32, for undoing fmix.
_F1_INV: Final = pow(_F1, -1, 1 << 32)
_F2_INV: Final = pow(_F2, -1, 1 << 32)


def _to_int32(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _mix_k1(k: int) -> int:
    k = (k * _C1) & _MASK
    k = ((k << 15) | (k >> 17)) & _MASK
    return (k * _C2) & _MASK


def _mix_h1(h: int, k: int) -> int:
    h ^= k
    h = ((h << 13) | (h >> 19)) & _MASK
    return (h * 5 + _H_ADD) & _MASK


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * _F1) & _MASK
    h ^= h >> 13
    h = (h * _F2) & _MASK
    return h ^ (h >> 16)


def _fmix_inverse(h: int) -> int:
    h ^= h >> 16
    h = (h * _F2_INV) & _MASK
    h ^= (h >> 13) ^ (h >> 26)
    h = (h * _F1_INV) & _MASK
    return h ^ (h >> 16)


def murmur3_paimon(data: bytes, seed: int = SEED) -> int:
    """Reference implementation, one byte at a time in Python: the signed 32-bit hash."""
    h = seed & _MASK
    body = len(data) - len(data) % 4
    for i in range(0, body, 4):
        h = _mix_h1(h, _mix_k1(int.from_bytes(data[i : i + 4], "little")))
    for i in range(body, len(data)):
        signed = data[i] - 256 if data[i] >= 128 else data[i]
        h = _mix_h1(h, _mix_k1(signed & _MASK))
    return _to_int32(_fmix(h ^ len(data)))


def hash_key(key: bytes) -> int:
    """The same hash as :func:`murmur3_paimon` with seed 42, the body hashed in C."""
    n = len(key)
    body = n & ~3
    if body == n:
        # No tail: Paimon's variant and standard murmur3 agree.
        result: int = mmh3.hash(key, SEED)
        return result
    h = _fmix_inverse(mmh3.hash(key[:body], SEED) & _MASK) ^ body
    for byte in key[body:]:
        h = _mix_h1(h, _mix_k1((byte - 256 if byte >= 128 else byte) & _MASK))
    return _to_int32(_fmix(h ^ n))


class KeyHashes:
    """Collects the hashes of many keys cheaply, finishing the tails for all of them at once.

    ``add`` costs one C call and three appends per key; :meth:`finish` applies the tail mixing
    and the final mix with numpy. The writer uses this to hash every key it is given.
    """

    __slots__ = ("_body", "_lengths", "_tails")

    def __init__(self) -> None:
        self._body = array("i")  # mmh3 of the 4-byte-aligned body, as returned
        self._lengths = array("q")  # full key length
        self._tails = array("I")  # the 0-3 tail bytes, first byte in the low 8 bits

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, key: bytes) -> None:
        n = len(key)
        body = n & ~3
        if body == n:
            self._body.append(mmh3.hash(key, SEED))
            self._tails.append(0)
        else:
            self._body.append(mmh3.hash(key[:body], SEED))
            self._tails.append(int.from_bytes(key[body:], "little"))
        self._lengths.append(n)

    def extend(self, keys: Iterable[bytes]) -> None:
        for key in keys:
            self.add(key)

    def finish(self) -> npt.NDArray[np.int32]:
        """The signed 32-bit hash of every key added, in order."""
        n = len(self._lengths)
        if n == 0:
            return np.zeros(0, dtype=np.int32)
        mmh = np.frombuffer(self._body, dtype=np.int32, count=n).view(np.uint32)
        lengths = np.frombuffer(self._lengths, dtype=np.int64, count=n)
        tails = np.frombuffer(self._tails, dtype=np.uint32, count=n)
        tail_len = (lengths & 3).astype(np.uint32)
        body_len = (lengths & ~3).astype(np.uint32)
        out = mmh.copy()
        has_tail = tail_len != 0
        if has_tail.any():
            h = _fmix_inverse_np(mmh[has_tail]) ^ body_len[has_tail]
            t = tails[has_tail]
            tl = tail_len[has_tail]
            for i in range(3):
                # Tail byte i, sign-extended to 32 bits as Java's byte-to-int conversion does.
                byte = ((t >> np.uint32(8 * i)) & np.uint32(0xFF)).astype(np.uint8)
                k = byte.view(np.int8).astype(np.int32).view(np.uint32)
                mixed = _mix_h1_np(h, _mix_k1_np(k))
                h = np.where(tl > i, mixed, h)
            h ^= lengths[has_tail].astype(np.uint32)
            out[has_tail] = _fmix_np(h)
        return out.view(np.int32)


def hash_keys(keys: Iterable[bytes]) -> npt.NDArray[np.int32]:
    """Vectorised :func:`hash_key` over many keys."""
    collected = KeyHashes()
    collected.extend(keys)
    return collected.finish()


def _rotl_np(x: npt.NDArray[np.uint32], r: int) -> npt.NDArray[np.uint32]:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1_np(k: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    return _rotl_np(k * np.uint32(_C1), 15) * np.uint32(_C2)


def _mix_h1_np(h: npt.NDArray[np.uint32], k: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    return _rotl_np(h ^ k, 13) * np.uint32(5) + np.uint32(_H_ADD)


def _fmix_np(h: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(_F1)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(_F2)
    return h ^ (h >> np.uint32(16))


def _fmix_inverse_np(h: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(_F2_INV)
    h = h ^ (h >> np.uint32(13)) ^ (h >> np.uint32(26))
    h = h * np.uint32(_F1_INV)
    return h ^ (h >> np.uint32(16))
