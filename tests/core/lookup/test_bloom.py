"""The bloom filter: sizing formulas, no false negatives, measured false-positive rate."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.core.lookup.bloom import (
    MAX_HASH_COUNT,
    MIN_FPP,
    BloomFilter,
    bloom_bytes,
    bloom_hash_count,
    build_bitset,
)
from lakecore.core.lookup.murmur import hash_key, hash_keys, murmur3_paimon


def test_sizing_follows_the_formulas() -> None:
    n, p = 1000, 0.05
    bits = math.floor(-n * math.log(p) / math.log(2) ** 2)
    assert bloom_bytes(n, p) == math.ceil(bits / 8) == 780
    assert bloom_hash_count(n, 780) == max(1, round(780 * 8 / n * math.log(2))) == 4


def test_refuses_a_filter_without_bits() -> None:
    with pytest.raises(ValueError):
        bloom_bytes(1, 0.9)


def test_probe_positions_by_hand() -> None:
    # One key, k probes, bits set exactly where docs/lookup-format.md#bloom-filter says.
    key = b"hello world"
    size, n = 16, 3
    k = bloom_hash_count(n, size)
    h1 = murmur3_paimon(key)
    h2 = (h1 & 0xFFFFFFFF) >> 16
    expected = bytearray(size)
    for i in range(1, k + 1):
        c = (h1 + i * h2 + 2**31) % 2**32 - 2**31
        if c < 0:
            c = ~c
        bit = c % (size * 8)
        expected[bit >> 3] |= 1 << (bit & 7)
    assert build_bitset(hash_keys([key]), size, k) == bytes(expected)


@settings(max_examples=30, deadline=None)
@given(
    st.sets(st.binary(max_size=24), min_size=1, max_size=300), st.sampled_from([0.3, 0.05, 0.01])
)
def test_no_false_negatives(keys: set[bytes], fpp: float) -> None:
    n = len(keys)
    size = bloom_bytes(n, fpp)
    bloom = BloomFilter(build_bitset(hash_keys(keys), size, bloom_hash_count(n, size)), n)
    assert all(bloom.might_contain(hash_key(k)) for k in keys)
    assert bloom.might_contain_many(hash_keys(keys)).all()


@pytest.mark.parametrize("fpp", [0.05, 0.01])
def test_false_positive_rate(fpp: float) -> None:
    rng = random.Random(7)
    present = [rng.randbytes(rng.randint(1, 40)) for _ in range(20_000)]
    absent = [b"absent:" + rng.randbytes(rng.randint(1, 40)) for _ in range(20_000)]
    size = bloom_bytes(len(present), fpp)
    bloom = BloomFilter(
        build_bitset(hash_keys(present), size, bloom_hash_count(len(present), size)),
        len(present),
    )
    rate = float(bloom.might_contain_many(hash_keys(absent)).mean())
    assert rate <= 1.5 * fpp
    scalar = sum(bloom.might_contain(hash_key(k)) for k in absent[:2000]) / 2000
    assert scalar <= 2.0 * fpp  # a smaller sample, so a looser bound


def test_smallest_rate_stays_within_probe_limit() -> None:
    for n in (1, 7, 1000, 10**6):
        size = bloom_bytes(n, MIN_FPP)
        assert bloom_hash_count(n, size) <= MAX_HASH_COUNT
    with pytest.raises(ValueError):
        bloom_bytes(10, MIN_FPP / 10)


def test_implausible_probe_count_is_refused() -> None:
    with pytest.raises(ValueError, match="probes"):
        BloomFilter(bytes(1000), 1)
