"""Round trips through LookupWriter and LookupReader, for every codec, block size and filter."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.lookup.blockcache import BlockCache
from lakecore.errors import InvalidArgumentError, NotFoundError

from ._helpers import catalog_entries, write_file

CODECS = ["none", "zstd", "lz4", "lzo"]
BLOCK_SIZES = [1, 7, 40, 300, 4096, 65536]

varied_entries = st.dictionaries(
    st.one_of(
        st.binary(min_size=1, max_size=3),
        st.binary(max_size=40),
        st.binary(min_size=130, max_size=300),
    ),
    st.one_of(st.just(b""), st.binary(max_size=20), st.binary(min_size=128, max_size=400)),
    max_size=60,
).map(lambda d: sorted(d.items()))

# Every entry has the same encoded length, so blocks are aligned.
aligned_entries = (
    st.integers(min_value=1, max_value=12)
    .flatmap(
        lambda klen: st.tuples(
            st.sets(st.binary(min_size=klen, max_size=klen), max_size=60),
            st.integers(min_value=0, max_value=30),
        )
    )
    .map(lambda t: [(k, k[:1] * t[1]) for k in sorted(t[0])])
)

options = st.fixed_dictionaries(
    {
        "compression": st.sampled_from(CODECS),
        "block_size": st.sampled_from(BLOCK_SIZES),
        "bloom_fpp": st.sampled_from([None, 0.05, 0.01]),
    }
)


# Probe keys around the present ones: before, between, after.
def probes(entries: list[tuple[bytes, bytes]]) -> list[bytes]:
    out = [b"", b"\x00", b"\xff" * 301]
    for key, _ in entries:
        out += [
            key + b"\x00",
            key[:-1],
            key + b"\xff",
            bytes([(key[:1] or b"\x00")[0] ^ 1]) + key[1:],
        ]
    return out


def check(entries: list[tuple[bytes, bytes]], opts: dict[str, object], extra: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_file(Path(tmp) / "f.lk", entries, **opts)
        expected = dict(entries)
        with LookupReader(path, block_cache=BlockCache(64 << 10)) as reader:
            assert len(reader) == len(entries)
            for key, value in entries:
                assert reader.get(key) == value
            queries = [k for k, _ in entries] + probes(entries) + extra
            singles = [reader.get(q) for q in queries]
            assert singles == [expected.get(q) for q in queries]
            assert reader.get_many(queries) == singles
            assert reader.get_many(list(reversed(queries))) == list(reversed(singles))
            assert list(reader.items()) == entries
            if entries:
                middle = entries[len(entries) // 2][0]
                assert list(reader.items(middle)) == [e for e in entries if e[0] >= middle]
                assert list(reader.items(middle + b"\x00")) == [e for e in entries if e[0] > middle]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(varied_entries, options, st.lists(st.binary(max_size=20), max_size=10))
def test_varied_round_trip(
    entries: list[tuple[bytes, bytes]], opts: dict[str, object], extra: list[bytes]
) -> None:
    check(entries, opts, extra)


@settings(max_examples=80, deadline=None)
@given(aligned_entries, options)
def test_aligned_round_trip(entries: list[tuple[bytes, bytes]], opts: dict[str, object]) -> None:
    check(entries, opts, [])


@settings(max_examples=60, deadline=None)
@given(varied_entries, options, st.data())
def test_get_many_with_duplicates_matches_get(
    entries: list[tuple[bytes, bytes]], opts: dict[str, object], data: st.DataObject
) -> None:
    assume(entries)
    keys = [k for k, _ in entries]
    pool = keys + probes(entries)
    queries = data.draw(st.lists(st.sampled_from(pool), max_size=80))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_file(Path(tmp) / "f.lk", entries, **opts)
        with LookupReader(path, block_cache=BlockCache(1)) as reader:
            assert reader.get_many(queries) == [reader.get(q) for q in queries]
            assert reader.get_many(iter(queries)) == [dict(entries).get(q) for q in queries]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("block_size", [64, 65536])
def test_catalog_shape(tmp_path: Path, codec: str, block_size: int) -> None:
    entries = catalog_entries(3000)
    path = write_file(tmp_path / "c.lk", entries, compression=codec, block_size=block_size)
    absent = [k[:-1] + b"!" for k, _ in entries[::7]]
    with LookupReader(path) as reader:
        stats = reader.stats()
        assert stats.entries == len(entries) == len(reader)
        assert stats.blocks > 1
        assert stats.codec == codec
        assert stats.bloom_bytes > 0
        queries = [k for k, _ in entries[::3]] + absent
        assert reader.get_many(queries) == [dict(entries).get(q) for q in queries]
        assert [reader.get(q) for q in queries[:300]] == reader.get_many(queries[:300])
        assert list(reader.items()) == entries


def test_blocks_are_aligned_or_not(tmp_path: Path) -> None:
    same = [(b"key%03d" % i, b"v%03d" % i) for i in range(100)]
    mixed = [(b"key%03d" % i, b"v" * (i % 5)) for i in range(100)]
    for name, entries, expect_aligned in [("a", same, True), ("u", mixed, False)]:
        path = write_file(tmp_path / name, entries, compression="none", block_size=200)
        raw = path.read_bytes()
        # The first data block starts at 0; its tail flag is its last byte before the trailer.
        with LookupReader(path) as reader:
            first = reader._handles[0]
            assert raw[first.offset + first.size - 1] == (0 if expect_aligned else 1)
            assert list(reader.items()) == entries


def test_expected_entries_sizes_the_filter(tmp_path: Path) -> None:
    entries = catalog_entries(200)
    path = write_file(tmp_path / "e.lk", entries, expected_entries=10_000)
    with LookupReader(path) as reader:
        assert reader.stats().bloom_expected_entries == 10_000
        assert reader.get_many([k for k, _ in entries]) == [v for _, v in entries]
    path = write_file(tmp_path / "n.lk", entries)
    with LookupReader(path) as reader:
        assert reader.stats().bloom_expected_entries == 200


def test_writer_accepts_bytes_like(tmp_path: Path) -> None:
    path = tmp_path / "b.lk"
    with LookupWriter(path) as writer:
        writer.put(bytearray(b"a"), memoryview(b"1"))  # type: ignore[arg-type]
        writer.put(b"b", b"2")
    with LookupReader(path) as reader:
        assert list(reader.items()) == [(b"a", b"1"), (b"b", b"2")]


@pytest.mark.parametrize("absent_share", [0.0, 0.3, 0.9, 1.0])
@pytest.mark.parametrize("bloom_fpp", [None, 0.05])
def test_get_many_present_and_absent_mixes(
    tmp_path: Path, absent_share: float, bloom_fpp: float | None
) -> None:
    # Large batches take the bloom-first path when many keys are absent; all paths agree.
    entries = catalog_entries(2000)
    path = write_file(tmp_path / "m.lk", entries, bloom_fpp=bloom_fpp, block_size=1024)
    expected = dict(entries)
    absent = [k[:-1] + b"#" for k, _ in entries]
    cut = int(len(entries) * absent_share)
    queries = absent[:cut] + [k for k, _ in entries[cut:]]
    queries = queries[::-1]
    with LookupReader(path) as reader:
        got = reader.get_many(queries)
        assert got == [expected.get(q) for q in queries]
        assert got[:50] == [reader.get(q) for q in queries[:50]]


def test_missing_file_and_closed_reader(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        LookupReader(tmp_path / "nothing.lk")
    path = write_file(tmp_path / "c.lk", [(b"a", b"1")])
    reader = LookupReader(path)
    reader.close()
    reader.close()
    with pytest.raises(InvalidArgumentError):
        reader.get(b"a")
