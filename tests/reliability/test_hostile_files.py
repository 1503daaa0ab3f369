"""Hostile files: fuzz the node decoder, the lookup-file reader and the definition decoders.

Inputs (hypothesis): random bytes (also wrapped in Arrow's ``ARROW1`` magic, to get past the
first check), valid files mutated (bit flips, truncations, insertions, deletions, overwrites),
and Arrow IPC files with random schemas, rows, batch counts and compression, built with
pyarrow. For every input:

* only a ``LakecoreError`` subclass may come out (a typed error naming the file), never any
  other exception;
* no hang: each example runs under a wall-clock budget (``BUDGET_SECONDS``), with an alarm
  that interrupts a runaway Python loop;
* no unbounded memory: the process's peak resident set is reset before each example
  (``/proc/self/clear_refs``) and its growth must stay under ``MEMORY_BOUND_BYTES``; where
  that is unavailable tracemalloc's peak is used (Python allocations only).

Standard runs draw a few hundred examples per target; ``-m slow`` draws thousands. atheris
(coverage-guided) runs when it is installed.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lakecore.core.defs import LakehouseDef, decode_namespace_def, decode_table_def
from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.node import NODE_SCHEMA, Node, decode_node, encode_node
from lakecore.core.versions import decode_root
from lakecore.errors import CorruptLookupFileError, CorruptNodeFileError, LakecoreError
from tests.reliability.faulty_storage import emit_summary

pytestmark = pytest.mark.reliability

BUDGET_SECONDS = 3.0  # generous: the CI machine is shared; a healthy example takes milliseconds
ALARM_SECONDS = 20
MEMORY_BOUND_BYTES = 64 << 20
STANDARD = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HEAVY = settings(
    max_examples=4000,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

STATS: dict[str, dict[str, Any]] = {}


# -- the guard ---------------------------------------------------------------------------------


class Hang(Exception):
    """Raised by the alarm: an example ran far past its budget."""


def _status_kib(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


@contextmanager
def guarded(target: str) -> Iterator[None]:
    """Run one example: typed errors only, within time and memory bounds."""
    stats = STATS.setdefault(
        target,
        {
            "examples": 0,
            "typed_errors": 0,
            "accepted": 0,
            "over_time": 0,
            "over_memory": 0,
            "max_seconds": 0.0,
            "max_peak_growth_bytes": 0,
        },
    )
    use_rss = _reset_peak_rss()
    base_rss = (_status_kib("VmRSS") or 0) * 1024
    if not use_rss:
        tracemalloc.start()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(ALARM_SECONDS)
    started = time.monotonic()
    outcome = "accepted"
    try:
        yield
    except LakecoreError:
        outcome = "typed_errors"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        elapsed = time.monotonic() - started
        if use_rss:
            growth = (_status_kib("VmHWM") or 0) * 1024 - base_rss
        else:
            growth = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    stats["examples"] += 1
    stats[outcome] += 1
    stats["max_seconds"] = max(stats["max_seconds"], round(elapsed, 3))
    stats["max_peak_growth_bytes"] = max(stats["max_peak_growth_bytes"], growth)
    stats["over_time"] += elapsed >= BUDGET_SECONDS
    stats["over_memory"] += growth >= MEMORY_BOUND_BYTES
    assert elapsed < BUDGET_SECONDS, f"{target}: one example took {elapsed:.1f}s"
    assert growth < MEMORY_BOUND_BYTES, (
        f"{target}: one example grew the peak memory by {growth >> 20} MiB"
    )


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise Hang(f"no answer within {ALARM_SECONDS}s")


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    targets = {name: stats for name, stats in STATS.items() if stats["examples"]}
    if targets:
        # An untyped error or a hang fails its test before it is counted: the test result is the
        # record of those; over_time / over_memory count the examples past the bounds.
        emit_summary(
            "hostile_files",
            targets=targets,
            inputs=sum(s["examples"] for s in targets.values()),
            over_time=sum(s["over_time"] for s in targets.values()),
            over_memory=sum(s["over_memory"] for s in targets.values()),
        )


# -- inputs --------------------------------------------------------------------------------------

# A small alphabet that hits the interesting cases: catalog-like keys, control bytes, non-ASCII.
_TEXT = st.text(alphabet=st.sampled_from(list("abcC=B/_-. 0123\x00\x7f\u00e9\u4e2d")), max_size=24)


@st.composite
def valid_nodes(draw: st.DrawFn) -> tuple[bytes, int]:
    """(bytes, order) of a well-formed node file."""
    order = draw(st.sampled_from([3, 4, 8, 16]))
    n_keys = draw(st.integers(0, order - 1))
    keys = sorted(draw(st.sets(_TEXT.filter(bool), min_size=n_keys, max_size=n_keys)))
    values = [draw(_TEXT.filter(bool)) for _ in keys]
    internal = bool(keys) and draw(st.booleans())
    children = (
        [f"0000/0000/0000/0000000{i % 2}-node-{i}.arrow" for i in range(len(keys) + 1)]
        if internal
        else []
    )
    buffer = draw(st.dictionaries(_TEXT.filter(bool), st.none() | _TEXT, max_size=6))
    system = draw(
        st.sampled_from(
            [
                {},
                {"created_at_millis": "123"},
                {
                    "lakehouse_def": "_lakehouse_def_x.binpb",
                    "created_at_millis": "1",
                    "previous_root": "_00000000000000000000000000000000.arrow",
                },
                # a root of version 3 (what _node_target decodes roots as)
                {
                    "lakehouse_def": "_lakehouse_def_x.binpb",
                    "created_at_millis": "1",
                    "previous_root": "_01000000000000000000000000000000.arrow",
                },
            ]
        )
    )
    return encode_node(Node(keys, values, children, buffer, system), order), order


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[tuple[bytes, int]]) -> tuple[bytes, int]:
    data, order = draw(base)
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "overwrite"]))
        at = draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del buf[at:]
        elif op == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del buf[at : at + draw(st.integers(1, 16))]
        elif op == "overwrite" and buf:
            chunk = draw(
                st.sampled_from(
                    [b"\xff\xff\xff\x7f", b"\x00\x00\x00\x00", b"\xff" * 8, b"\x80\x00\x00\x00"]
                )
            )
            buf[at : at + len(chunk)] = chunk
    return bytes(buf), order


_ARROW_TYPES = [
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.int32(),
    pa.int64(),
    pa.float64(),
    pa.bool_(),
    pa.null(),
    pa.list_(pa.string()),
    pa.struct([("a", pa.string())]),
    pa.dictionary(pa.int8(), pa.string()),
    pa.string_view(),
]


def _column(typ: pa.DataType, rows: int, draw: st.DrawFn) -> pa.Array:
    if pa.types.is_null(typ):
        return pa.nulls(rows)
    if pa.types.is_dictionary(typ):
        return pa.array(
            [draw(st.none() | _TEXT) for _ in range(rows)], pa.string()
        ).dictionary_encode()
    if typ in (pa.string(), pa.large_string(), pa.string_view()):
        return pa.array([draw(st.none() | _TEXT) for _ in range(rows)], typ)
    if typ == pa.binary():
        return pa.array([draw(st.none() | st.binary(max_size=12)) for _ in range(rows)], typ)
    if pa.types.is_integer(typ):
        return pa.array(
            [draw(st.none() | st.integers(-(2**31), 2**31 - 1)) for _ in range(rows)], typ
        )
    if pa.types.is_floating(typ):
        return pa.array([draw(st.none() | st.floats(allow_nan=True)) for _ in range(rows)], typ)
    if pa.types.is_boolean(typ):
        return pa.array([draw(st.none() | st.booleans()) for _ in range(rows)], typ)
    if pa.types.is_list(typ):
        return pa.array([draw(st.none() | st.lists(_TEXT, max_size=3)) for _ in range(rows)], typ)
    return pa.array(
        [draw(st.none() | st.fixed_dictionaries({"a": _TEXT})) for _ in range(rows)], typ
    )


@st.composite
def arrow_files(draw: st.DrawFn) -> tuple[bytes, int | None]:
    """Arrow IPC files (or streams) with random schemas and rows: the node schema's names with
    wrong types, extra or missing columns, several batches, compressed bodies, metadata."""
    if draw(st.booleans()):
        names = ["key", "pvalue", "pnode"]
        types = [
            draw(st.sampled_from(_ARROW_TYPES)) if draw(st.integers(0, 3)) == 0 else pa.string()
            for _ in names
        ]
    else:
        names = draw(
            st.lists(st.sampled_from(["key", "pvalue", "pnode", "x", ""]), min_size=0, max_size=5)
        )
        types = [draw(st.sampled_from(_ARROW_TYPES)) for _ in names]
    nullable = [
        pa.types.is_null(t) or (draw(st.booleans()) if draw(st.integers(0, 3)) == 0 else True)
        for t in types
    ]
    schema = pa.schema(
        [pa.field(n, t, nullable=nb) for n, t, nb in zip(names, types, nullable, strict=True)],
        metadata=draw(st.none() | st.just({b"k": b"v"})),
    )
    compression = draw(st.sampled_from([None, None, "lz4", "zstd"]))
    options = pa.ipc.IpcWriteOptions(compression=compression)
    sink = pa.BufferOutputStream()
    n_batches = draw(st.integers(0, 3))
    writer_factory = pa.ipc.new_file if draw(st.integers(0, 4)) else pa.ipc.new_stream
    try:
        with writer_factory(sink, schema, options=options) as writer:
            for _ in range(n_batches):
                rows = draw(st.integers(0, 12))
                arrays = [_column(t, rows, draw) for t in types]
                writer.write_batch(
                    pa.RecordBatch.from_arrays(arrays, schema=schema)
                    if names
                    else pa.RecordBatch.from_pylist([{}] * rows, schema=schema)
                )
    except pa.ArrowException:
        # A combination pyarrow itself will not write (e.g. a second dictionary in a file):
        # not an input any writer could produce this way.
        assume(False)
    return bytes(sink.getvalue()), draw(st.sampled_from([None, 3, 4, 16]))


@st.composite
def node_shaped_files(draw: st.DrawFn) -> tuple[bytes, int | None]:
    """The node schema exactly, with rows drawn at random: every row-level rule of section 3."""
    rows = draw(st.integers(0, 14))
    cell = (
        st.none()
        | st.sampled_from(
            [
                "n_keys",
                "created_at_millis",
                "lakehouse_def",
                "previous_root",
                "2",
                "-1",
                "99999999999",
                "a",
                "b",
                "../x",
                "/abs",
                "s3://o/x",
                "0000/0000/0000/00000000-node-x.arrow",
            ]
        )
        | _TEXT
    )
    cols = [[draw(cell) for _ in range(rows)] for _ in range(3)]
    batch = pa.RecordBatch.from_arrays([pa.array(c, pa.string()) for c in cols], schema=NODE_SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, NODE_SCHEMA) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue()), draw(st.sampled_from([None, 3, 4]))


def _node_inputs() -> st.SearchStrategy[tuple[bytes, int | None]]:
    magic_wrapped = st.binary(max_size=512).map(lambda b: b"ARROW1\x00\x00" + b + b"ARROW1")
    return st.one_of(
        st.tuples(st.binary(max_size=2048), st.sampled_from([None, 4])),
        st.tuples(magic_wrapped, st.sampled_from([None, 4])),
        valid_nodes(),
        mutated(valid_nodes()),
        arrow_files(),
        mutated(arrow_files()),  # type: ignore[arg-type]
        node_shaped_files(),
    )


# -- node files --------------------------------------------------------------------------------


def _node_target(data: bytes, order: int | None) -> None:
    with guarded("decode_node"):
        node = decode_node(data, "fuzz.arrow", order)
        # A node the decoder accepted must be one the encoder can write back (same order).
        try:
            again = decode_node(
                encode_node(node, order or max(3, len(node.keys) + 1)), "again.arrow", order
            )
        except ValueError as exc:
            raise AssertionError(f"decode_node accepted a node encode_node refuses: {exc}") from exc
        assert (again.keys, again.values, again.children, again.buffer) == (
            node.keys,
            node.values,
            node.children,
            node.buffer,
        ), "the node did not survive a round trip"
    with guarded("decode_root"):
        decode_root(data, 3, "fuzz-root.arrow", order)


@STANDARD
@given(_node_inputs())
def test_decode_node_only_raises_typed_errors(case: tuple[bytes, int | None]) -> None:
    _node_target(*case)


@pytest.mark.slow
@HEAVY
@given(_node_inputs())
def test_decode_node_only_raises_typed_errors_heavy(case: tuple[bytes, int | None]) -> None:
    _node_target(*case)


def _compressed_node(payload_bytes: int, codec: str = "zstd") -> bytes:
    big = "a" * payload_bytes
    keys = ["n_keys", None, None, None, None, "k"]
    pvalues = ["0", None, None, None, None, big]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.string()),
            pa.array(pvalues, pa.string()),
            pa.array([None] * 6, pa.string()),
        ],
        schema=NODE_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(
        sink, NODE_SCHEMA, options=pa.ipc.IpcWriteOptions(compression=codec)
    ) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_regression_compressed_node_file_is_refused_before_it_expands(codec: str) -> None:
    """A 3 KB node file whose zstd-compressed body expands to 48 MiB: a decompression bomb. A
    node file must be uncompressed; the decoder should refuse it before decompressing."""
    data = _compressed_node(48 << 20, codec)
    assert len(data) < 256 << 10
    with guarded("decode_node.bomb"), pytest.raises(CorruptNodeFileError, match="compressed"):
        decode_node(data, "bomb.arrow", 4)


def test_a_small_compressed_node_file_is_refused_too() -> None:
    """Not only bombs: any compressed body breaks docs/format.md#arrow-ipc-layout, whatever its
    size."""
    with pytest.raises(CorruptNodeFileError, match=r"bomb\.arrow.*compressed"):
        decode_node(_compressed_node(10), "bomb.arrow", 4)


# -- lookup files ------------------------------------------------------------------------------


# Hypothesis strategies cannot take pytest's tmp_path, so the scratch folder is made at import
# and removed when the test process ends, rather than left in the system's temp folder.
_LOOKUP_DIR = tempfile.mkdtemp(prefix="lakecore-hostile-lookup-")
atexit.register(shutil.rmtree, _LOOKUP_DIR, True)


@st.composite
def valid_lookup_files(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    keys = sorted(draw(st.sets(st.binary(min_size=1, max_size=24), min_size=0, max_size=40)))
    path = os.path.join(_LOOKUP_DIR, "valid.lk")
    with LookupWriter(
        path,
        compression=draw(st.sampled_from(["none", "zstd", "lz4"])),
        bloom_fpp=draw(st.sampled_from([None, 0.01, 0.3])),
        block_size=draw(st.sampled_from([64, 256, 4096])),
    ) as writer:
        for key in keys:
            writer.put(key, draw(st.binary(max_size=40)))
    data = Path(path).read_bytes()
    return data, keys


@st.composite
def lookup_inputs(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    kind = draw(st.sampled_from(["random", "valid", "mutated", "mutated", "footer"]))
    if kind == "random":
        return draw(st.binary(max_size=2048)), [draw(st.binary(max_size=8))]
    data, keys = draw(valid_lookup_files())
    if kind == "valid":
        return data, keys
    buf = bytearray(data)
    if kind == "footer" and len(buf) >= 36:
        # Overwrite one footer field with an extreme value: offsets and sizes out of range.
        at = len(buf) - 36 + draw(st.sampled_from([0, 8, 12, 20, 28, 32]))
        buf[at : at + 4] = draw(
            st.sampled_from([b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\x01\x00\x00\x00"])
        )
    else:
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, max(0, len(buf) - 1)))
            op = draw(st.sampled_from(["flip", "truncate", "insert"]))
            if op == "flip" and buf:
                buf[at] ^= 1 << draw(st.integers(0, 7))
            elif op == "truncate":
                del buf[at:]
            else:
                buf[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(buf), [*keys, b"absent"]


def _lookup_target(data: bytes, keys: list[bytes]) -> None:
    path = os.path.join(_LOOKUP_DIR, "fuzz.lk")
    Path(path).write_bytes(data)
    with guarded("LookupReader"):
        reader = LookupReader(path)
        try:
            reader.stats()
            for key in keys[:8]:
                reader.get(key)
            reader.get_many(keys)
            for _ in reader.items():
                pass
            len(reader)
        finally:
            reader.close()


@STANDARD
@given(lookup_inputs())
def test_lookup_reader_only_raises_typed_errors(case: tuple[bytes, list[bytes]]) -> None:
    _lookup_target(*case)


@pytest.mark.slow
@HEAVY
@given(lookup_inputs())
def test_lookup_reader_only_raises_typed_errors_heavy(case: tuple[bytes, list[bytes]]) -> None:
    _lookup_target(*case)


def test_regression_lookup_block_bomb_stays_bounded(tmp_path: Path) -> None:
    """A lookup file whose one data block is a zstd frame of 64 MiB of zeros (a few KB stored),
    declared at its true size. The frame is honest (zstd can expand that much), so only the
    reader's absolute cap stands between it and a 64 MiB allocation: a reader capped at 32 MiB
    must refuse it before allocating anything."""
    import zstandard

    from tests.core.lookup._helpers import assemble, varint

    raw = b"\x00" * (64 << 20)
    stored = varint(len(raw)) + zstandard.ZstdCompressor(write_content_size=False).compress(raw)
    path = tmp_path / "bomb.lk"
    path.write_bytes(assemble([(b"k", stored, 1)]))
    assert path.stat().st_size < 64 << 10
    del raw
    with (
        guarded("LookupReader.bomb"),
        LookupReader(str(path), max_block_bytes=32 << 20) as reader,
        pytest.raises(
            CorruptLookupFileError, match="declares 67108864 uncompressed bytes, more than"
        ),
    ):
        reader.get(b"k")


def test_regression_lookup_block_bomb_beyond_any_codec_is_refused(tmp_path: Path) -> None:
    """The same few KB declaring 1 GiB: more than zstd can produce from them, refused with the
    default reader before anything is allocated."""
    import zstandard

    from tests.core.lookup._helpers import assemble, varint

    frame = zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * (1 << 20))
    path = tmp_path / "bomb.lk"
    path.write_bytes(assemble([(b"k", varint(1 << 30) + frame, 1)]))
    with (
        guarded("LookupReader.bomb"),
        LookupReader(str(path)) as reader,
        pytest.raises(CorruptLookupFileError, match="zstd cannot expand"),
    ):
        reader.get(b"k")


# -- definition files ---------------------------------------------------------------------------


def _definition_target(data: bytes) -> None:
    for decode in (
        lambda d: LakehouseDef.from_bytes(d, "fuzz.binpb").validate(),
        lambda d: decode_namespace_def(d, "fuzz.binpb"),
        lambda d: decode_table_def(d, "fuzz.binpb"),
    ):
        with guarded("definitions"):
            decode(data)


@st.composite
def definition_inputs(draw: st.DrawFn) -> bytes:
    from lakecore.core.defs import pb

    if draw(st.booleans()):
        return draw(st.binary(max_size=512))
    message = pb.LakehouseDef(
        name=draw(_TEXT),
        major_version=draw(st.integers(0, 3)),
        order=draw(st.integers(0, 2**32 - 1)),
        node_file_max_size_bytes=draw(st.integers(0, 2**64 - 1)),
        minimum_versions_to_keep=draw(st.integers(0, 5)),
    )
    data = bytearray(message.SerializeToString())
    if data and draw(st.booleans()):
        data[draw(st.integers(0, len(data) - 1))] ^= 0xFF
    return bytes(data)


@STANDARD
@given(definition_inputs())
def test_definition_decoders_only_raise_typed_errors(data: bytes) -> None:
    _definition_target(data)


# -- atheris (coverage-guided), when installed ---------------------------------------------------

_ATHERIS_SCRIPT = r"""
import sys
import atheris

with atheris.instrument_imports():
    from lakecore.errors import LakecoreError
    from lakecore.core.node import decode_node

def one(data):
    try:
        decode_node(bytes(data), "atheris.arrow", 4 if data[:1] == b"4" else None)
    except LakecoreError:
        pass

atheris.Setup(sys.argv, one)
atheris.Fuzz()
"""


@pytest.mark.parametrize(
    "runs",
    [
        pytest.param(20_000, id="standard"),
        pytest.param(1_000_000, id="heavy", marks=pytest.mark.slow),
    ],
)
def test_atheris_decode_node(tmp_path: Path, runs: int) -> None:
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, (keys, children) in enumerate(
        [
            ([], []),
            (["a", "b"], []),
            (
                ["m"],
                ["0000/0000/0000/00000000-node-a.arrow", "0000/0000/0000/00000000-node-b.arrow"],
            ),
        ]
    ):
        (corpus / f"seed{i}").write_bytes(
            encode_node(Node(keys, [k.upper() for k in keys], children, {"z": None}), 4)
        )
    script = tmp_path / "fuzz_node.py"
    script.write_text(_ATHERIS_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            f"-runs={runs}",
            "-max_len=4096",
            "-rss_limit_mb=2048",
            "-timeout=10",
            str(corpus),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    emit_summary(
        "hostile_files.atheris",
        runs=runs,
        exit_code=proc.returncode,
        seconds=round(time.monotonic() - started, 1),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
