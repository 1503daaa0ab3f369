"""Blocks: the builder's tails and close rule, and strict decoding of a raw block."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakecore.core.lookup.block import Block, BlockBuilder, index_blocks

from ._helpers import aligned_block, unaligned_block


def test_aligned_tail() -> None:
    builder = BlockBuilder()
    builder.add(b"k1", b"v1")
    builder.add(b"k2", b"v2")
    assert builder.memory() == 12 + 5  # aligned: no offsets counted
    assert builder.finish() == aligned_block([(b"k1", b"v1"), (b"k2", b"v2")])


def test_unaligned_tail() -> None:
    builder = BlockBuilder()
    builder.add(b"k1", b"v1")
    builder.add(b"k2", b"val")
    assert builder.memory() == 13 + 5 + 2 * 4
    assert builder.finish() == unaligned_block([(b"k1", b"v1"), (b"k2", b"val")])


def test_empty_block_is_unaligned_with_zero_entries() -> None:
    assert BlockBuilder().finish() == b"\x00\x00\x00\x00\x01"
    assert Block(b"\x00\x00\x00\x00\x01").count == 0


def test_builder_resets_after_finish() -> None:
    builder = BlockBuilder()
    builder.add(b"a", b"bb")
    builder.finish()
    assert len(builder) == 0
    builder.add(b"c", b"d")
    assert builder.finish() == aligned_block([(b"c", b"d")])


entries_strategy = st.lists(
    st.tuples(st.binary(max_size=300), st.binary(max_size=300)), min_size=1, max_size=40
).map(lambda es: sorted({k: v for k, v in es}.items()))


@given(entries_strategy)
def test_decode_matches_build(entries: list[tuple[bytes, bytes]]) -> None:
    builder = BlockBuilder()
    for k, v in entries:
        builder.add(k, v)
    block = Block(builder.finish())
    assert block.count == len(entries)
    for i, (k, v) in enumerate(entries):
        assert block.find(k) == i
        assert block.get(k) == v
    assert list(block.items()) == entries
    assert block.get(b"\xff" * 301) is None


@given(st.lists(entries_strategy, min_size=1, max_size=5), st.sampled_from([1, 2, 3, 8, 64]))
def test_indexing_many_blocks_at_once(groups: list[list[tuple[bytes, bytes]]], stride: int) -> None:
    blocks = []
    for entries in groups:
        builder = BlockBuilder()
        for k, v in entries:
            builder.add(k, v)
        blocks.append(Block(builder.finish()))
    blocks.append(Block(BlockBuilder().finish()))  # an empty block among them
    index_blocks(blocks, stride)
    for block, entries in zip(blocks, [*groups, []], strict=True):
        assert block.indexed
        for i, (k, v) in enumerate(entries):
            assert block.find(k) == i
            assert block.get(k) == v
            assert block.get(k + b"\x00") == dict(entries).get(k + b"\x00")
        assert block.get(b"") == dict(entries).get(b"")
        assert list(block.items()) == entries


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        (b"", "shorter than"),
        (b"\x00\x00\x00\x00\x02", "neither"),
        (b"ab" + struct.pack("<i", 0) + b"\x00", "does not divide"),
        (b"abc" + struct.pack("<i", 2) + b"\x00", "does not divide"),
        (b"" + struct.pack("<i", 4) + b"\x00", "does not divide"),
        (struct.pack("<i", 1000) + b"\x01", "cannot fit"),
        (struct.pack("<i", -1) + b"\x01", "cannot fit"),
        (b"\x01a\x00" + struct.pack("<i", 1) + struct.pack("<i", 1) + b"\x01", "out of order"),
        (b"ab" + b"\x00" + struct.pack("<i", 0) + b"\x01", "empty block holds"),
    ],
)
def test_inconsistent_tails(raw: bytes, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        Block(raw)


@pytest.mark.parametrize(
    "body",
    [
        b"\x05ab\x01c",  # key longer than the entry
        b"\x01a\x05c",  # value longer than the entry
        b"\x80\x80",  # key length varint runs out
    ],
)
def test_malformed_entries(body: bytes) -> None:
    raw = body + struct.pack("<ii", 0, 1) + b"\x01"
    block = Block(raw)
    with pytest.raises(ValueError):
        index_blocks([block], 1)
    with pytest.raises(ValueError):
        block.get(b"a")


@given(entries_strategy, st.lists(st.binary(max_size=20), max_size=30), st.randoms())
def test_repeated_searches_agree_with_a_dict(
    entries: list[tuple[bytes, bytes]], absent: list[bytes], rng: random.Random
) -> None:
    """find() remembers the keys of its top levels; searches in any order, many times over,
    must still answer exactly what the entries say."""
    builder = BlockBuilder()
    for k, v in entries:
        builder.add(k, v)
    block = Block(builder.finish())
    expected = dict(entries)
    queries = [k for k, _ in entries] + absent
    for _ in range(3):
        rng.shuffle(queries)
        assert [block.get(q) for q in queries] == [expected.get(q) for q in queries]


@pytest.mark.parametrize(
    "offsets",
    [
        [0, 3, 2],  # out of order: entry 1 runs past entry 2's start
        [0, 9, 4],  # entry 1 starts past the entries
        [0, -4, 4],
    ],
)
def test_a_search_through_bad_offsets_raises_or_stays_inside(offsets: list[int]) -> None:
    """Construction checks only the first and last offsets; a probe of any other entry checks
    its own extent, so bad offsets give ValueError or a plain miss, never an IndexError."""
    body = b"\x01a\x01x" + b"\x01b\x01y"[:2] + b"\x01c\x01z"  # 10 bytes, entries at 0, 4, 6
    raw = body + struct.pack(f"<{len(offsets)}i", *offsets) + struct.pack("<i", 3) + b"\x01"
    block = Block(raw)
    for key in (b"a", b"b", b"c", b"", b"zz"):
        try:
            value = block.get(key)
        except ValueError:
            continue
        assert value in (None, b"x", b"z")
    with pytest.raises(ValueError):
        index_blocks([block], 1)
