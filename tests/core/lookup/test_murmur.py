"""Paimon's MurmurHash3 variant: published values, and the fast paths agree with the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakecore.core.lookup.murmur import hash_key, hash_keys, murmur3_paimon

PUBLISHED = [
    (b"a", 1485273170),
    (b"abc", 1322437556),
    (b"abcd", -396302900),
    (b"hello world", -1528836094),
]


@pytest.mark.parametrize(("data", "expected"), PUBLISHED)
def test_published_values(data: bytes, expected: int) -> None:
    assert murmur3_paimon(data) == expected
    assert hash_key(data) == expected
    assert hash_keys([data]).tolist() == [expected]


def test_empty_key() -> None:
    assert hash_key(b"") == murmur3_paimon(b"")


def test_tail_bytes_are_signed() -> None:
    # A tail byte >= 0x80 is sign-extended: hashing must differ from treating it as unsigned.
    assert hash_key(b"\xff") == murmur3_paimon(b"\xff")
    assert hash_key(b"abcd\x80\x81\xfe") == murmur3_paimon(b"abcd\x80\x81\xfe")


@given(st.lists(st.binary(max_size=40), max_size=50))
def test_fast_paths_match_reference(keys: list[bytes]) -> None:
    expected = [murmur3_paimon(k) for k in keys]
    assert [hash_key(k) for k in keys] == expected
    assert hash_keys(keys).tolist() == expected
