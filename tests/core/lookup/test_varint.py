"""LEB128 varints: known encodings, round trips, and strict decoding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakecore.core.lookup.varint import decode_varint, decode_varints, encode_varint


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0, len(encoded), 5) == (value, len(encoded))


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded + b"junk", 0, len(encoded) + 4, 10) == (value, len(encoded))


def test_runs_past_end() -> None:
    with pytest.raises(ValueError, match="past the end"):
        decode_varint(b"\x80\x80", 0, 2, 5)


def test_too_long() -> None:
    with pytest.raises(ValueError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01", 0, 6, 5)


def test_negative_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_varint(-1)


@given(st.lists(st.integers(min_value=0, max_value=2**32), min_size=1, max_size=30))
def test_vectorised_matches_scalar(values: list[int]) -> None:
    blob = b""
    starts = []
    for v in values:
        starts.append(len(blob))
        blob += encode_varint(v) + b"\xee"  # one byte of something else after each
    buf = np.frombuffer(blob, dtype=np.uint8)
    pos = np.asarray(starts, dtype=np.int64)
    end = np.append(pos[1:], len(blob)).astype(np.int64)
    decoded, after = decode_varints(buf, pos, end, 5)
    assert decoded.tolist() == values
    assert after.tolist() == [decode_varint(blob, s, len(blob), 5)[1] for s in starts]


def test_vectorised_rejects_overrun() -> None:
    buf = np.frombuffer(b"\x05\x80\x80", dtype=np.uint8)
    with pytest.raises(ValueError):
        decode_varints(buf, np.array([0, 1]), np.array([1, 3]), 5)
