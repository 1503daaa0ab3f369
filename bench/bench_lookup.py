"""Benchmark of the sorted lookup file against RocksDB (rocksdict) and sqlite3.

Builds the same catalog-shaped data set (default 1M keys) with each store and measures, in one
run: build rate, file size, single-lookup latency (median of many individually timed calls),
and batched lookups per second over random present keys and over a 50/50 mix of present and
absent keys. For lakecore the batch is one ``get_many`` call; for rocksdict and sqlite it is a
Python loop of per-key gets, the way a caller without a batched API would write it (rocksdict's
own multi-key ``get`` is reported too). The stores are built one after another, then timed
interleaved: each of ``--reps`` repetitions runs every store in turn, so load drifting on a
shared machine hits all of them alike. Rates are medians over the repetitions.

Single gets, per repetition, on a fresh slice of ``--singles / --reps`` random present keys:

- ``single_get_us_p50`` (warm): one untimed pass over the slice, then the timed pass, for every
  store alike. lakecore's reader uses its own ``BlockCache`` of ``--cache-mib`` (default: the
  library's default capacity), so the timed pass finds its blocks decoded;
  ``warm_cache_hit_rate`` says how many it found. rocksdict runs with its default options.
- ``single_get_cold_us_p50``: a second reader of the same file with ``block_cache=None``
  (lakecore), or the same database opened read-only with RocksDB's block cache disabled
  (rocksdict), so every get reads, checks and decompresses its block; the file's bytes are in
  the OS page cache for both.
- ``single_get_absent_us_p50``: keys that fall between present ones, on the cold reader (for
  lakecore the bloom filter answers before any block is read; rocksdict's default options
  write no filter).

The goals (``goals``): single get p50 at most 1.5x rocksdict's, warm against warm and cold
against cold (``..._cold_vs_rocksdict_warm`` adds the harshest pairing); ``get_many`` at least
as fast as a rocksdict get loop; the file no larger than rocksdict's SST. The JSON also states
the effective cores the machine offered before and after the timed part.

Prints JSON on stdout and a short table on stderr. ``--keys 100000`` gives a quick check.

Shape of the data: keys are ``b"C===" + namespace padded to 100 with spaces + table padded to
100`` (204 bytes), values a relative ``.binpb`` path of about 100 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import _common as C
import rocksdict

from lakecore.core.lookup import LookupReader, LookupWriter
from lakecore.core.lookup.blockcache import DEFAULT_BLOCK_CACHE_BYTES, BlockCache
from lakecore.core.lookup.writer import DEFAULT_BLOCK_SIZE

#: Goal of issue #17: single get p50 at most this many times rocksdict's, warm and cold.
SINGLE_GET_GOAL_RATIO = 1.5

#: Tables per namespace in the generated catalog.
TABLES_PER_NAMESPACE = 1000


def catalog(n: int, seed: int) -> tuple[list[bytes], list[bytes]]:
    """``n`` sorted catalog keys and their values."""
    rng = random.Random(seed)
    keys: list[bytes] = []
    values: list[bytes] = []
    words = ["sales", "orders", "events", "users", "clicks", "ledger", "stock", "audit"]
    for i in range(n):
        ns = f"{words[(i // TABLES_PER_NAMESPACE) % len(words)]}_ns_{i // TABLES_PER_NAMESPACE:05d}"
        table = f"{words[i % len(words)]}_{i % TABLES_PER_NAMESPACE:04d}_t"
        keys.append(b"C===" + ns.encode().ljust(100, b" ") + table.encode().ljust(100, b" "))
        uuid = rng.getrandbits(128).to_bytes(16, "big").hex()
        values.append(f"tables/{ns}/{table}/metadata/00001-{uuid}.binpb".encode())
    order = sorted(range(n), key=keys.__getitem__)
    return [keys[i] for i in order], [values[i] for i in order]


def absent_like(keys: Sequence[bytes]) -> list[bytes]:
    """Keys that fall between present ones: the table name gets a ``~`` after its last letter."""
    out = []
    for key in keys:
        table = key[104:].rstrip(b" ")
        out.append(key[:104] + (table + b"~").ljust(100, b" "))
    return out


def check_answers(get_many: Callable[[list[bytes]], list[Any]], check: dict[bytes, bytes]) -> None:
    """Refuse to time a store that gives wrong answers."""
    probe = list(check)
    absent = absent_like(probe)
    got = get_many(probe + absent)
    if got[: len(probe)] != list(check.values()) or any(v is not None for v in got[len(probe) :]):
        raise SystemExit("a store returned wrong answers; not benchmarking it")


@dataclass
class Store:
    """One built store, ready to be timed: its build facts and how to look keys up in it."""

    facts: dict[str, Any]
    get: Callable[[bytes], object]
    batch: Callable[[list[bytes]], object]  # the store's batched form (or a per-key loop)
    close: Callable[[], None]
    extra_batches: dict[str, Callable[[], object]] = field(default_factory=dict)
    get_cold: Callable[[bytes], object] | None = None  # lakecore: a reader without block cache
    cache: BlockCache | None = None  # lakecore: the warm reader's block cache


def build_lakecore(
    directory: str,
    compression: str,
    keys: list[bytes],
    values: list[bytes],
    check: dict[bytes, bytes],
    block_size: int = DEFAULT_BLOCK_SIZE,
    cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES,
) -> Store:
    path = os.path.join(directory, f"catalog-{compression}-{block_size}.lk")
    start = time.perf_counter()
    with LookupWriter(path, compression=compression, block_size=block_size) as writer:
        put = writer.put
        for key, value in zip(keys, values, strict=True):
            put(key, value)
    build = time.perf_counter() - start
    cache = BlockCache(cache_bytes)
    reader = LookupReader(path, block_cache=cache)
    cold = LookupReader(path, block_cache=None)
    stats = reader.stats()
    check_answers(reader.get_many, check)
    check_answers(lambda ks: [cold.get(k) for k in ks], check)
    cache.clear()  # the check's blocks must not make the first measurement warm
    facts = {
        "build_keys_per_s": len(keys) / build,
        "file_bytes": os.path.getsize(path),
        "blocks": stats.blocks,
        "bloom_bytes": stats.bloom_bytes,
        "block_cache_bytes": cache_bytes,
    }

    def close() -> None:
        reader.close()
        cold.close()

    return Store(facts, reader.get, reader.get_many, close, get_cold=cold.get, cache=cache)


def build_rocksdict(
    directory: str, keys: list[bytes], values: list[bytes], check: dict[bytes, bytes]
) -> Store:
    sst = os.path.join(directory, "catalog.sst")
    options = rocksdict.Options(raw_mode=True)
    options.set_compression_type(rocksdict.DBCompressionType.zstd())
    start = time.perf_counter()
    writer = rocksdict.SstFileWriter(options)
    writer.open(sst)
    for key, value in zip(keys, values, strict=True):
        writer[key] = value
    writer.finish()
    build = time.perf_counter() - start
    sst_bytes = os.path.getsize(sst)
    start = time.perf_counter()
    db = rocksdict.Rdict(os.path.join(directory, "rocks"), options)
    db.ingest_external_file([sst])
    ingest = time.perf_counter() - start
    get = db.get
    check_answers(lambda ks: [get(k) for k in ks], check)
    # The same database opened read-only without a block cache: RocksDB's cold reads (each get
    # reads and decompresses its block; the file is in the OS page cache, as for lakecore).
    cold_options = rocksdict.Options(raw_mode=True)
    table = rocksdict.BlockBasedOptions()
    table.disable_cache()
    cold_options.set_block_based_table_factory(table)
    cold_db = rocksdict.Rdict(
        os.path.join(directory, "rocks"), cold_options, access_type=rocksdict.AccessType.read_only()
    )
    cold_get = cold_db.get
    check_answers(lambda ks: [cold_get(k) for k in ks], check)
    facts = {"build_keys_per_s": len(keys) / build, "file_bytes": sst_bytes, "ingest_s": ingest}

    def close() -> None:
        cold_db.close()
        db.close()

    return Store(facts, get, lambda ks: [get(k) for k in ks], close, get_cold=cold_get)


def build_sqlite(
    directory: str, keys: list[bytes], values: list[bytes], check: dict[bytes, bytes]
) -> Store:
    path = os.path.join(directory, "catalog.sqlite")
    start = time.perf_counter()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
    with con:
        con.executemany("INSERT INTO kv VALUES (?, ?)", zip(keys, values, strict=True))
    con.close()
    build = time.perf_counter() - start
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    cursor = con.cursor()
    query = "SELECT v FROM kv WHERE k = ?"

    def get(key: bytes) -> bytes | None:
        row = cursor.execute(query, (key,)).fetchone()
        return None if row is None else bytes(row[0])

    check_answers(lambda ks: [get(k) for k in ks], check)
    facts = {"build_keys_per_s": len(keys) / build, "file_bytes": os.path.getsize(path)}
    return Store(facts, get, lambda ks: [get(k) for k in ks], con.close)


def time_interleaved(
    gets: dict[str, Callable[[bytes], object]], keys: Sequence[bytes]
) -> dict[str, list[int]]:
    """Nanoseconds of each call, key by key across the stores (each key is looked up in every
    store in turn, the first store rotating), so load that comes and goes on a shared machine
    falls on all stores alike rather than on whichever runs its whole pass at that moment."""
    names = list(gets)
    samples: dict[str, list[int]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    for i, key in enumerate(keys):
        first = i % len(names)
        for name in names[first:] + names[:first]:
            get = gets[name]
            start = clock()
            get(key)
            samples[name].append(clock() - start)
    return samples


def p50_us(samples: list[int]) -> float:
    return sorted(samples)[len(samples) // 2] / 1000


def measure(
    stores: dict[str, Store],
    batches: dict[str, list[bytes]],
    singles: list[bytes],
    reps: int,
) -> dict[str, dict[str, float]]:
    """Time every store, interleaved: each repetition runs every store once in turn.

    Interleaving keeps the ratios fair when the machine's load drifts during the run (other
    work on a shared machine slows whichever store happens to run at that moment): single gets
    key by key, batches run by run.
    """
    times: dict[str, dict[str, list[float]]] = {name: {} for name in stores}
    samples: dict[str, list[int]] = {name: [] for name in stores}
    cold: dict[str, list[int]] = {name: [] for name in stores}
    absent: dict[str, list[int]] = {name: [] for name in stores}
    hits: dict[str, list[int]] = {name: [0, 0] for name in stores}
    chunk = max(1, len(singles) // reps)
    for rep in range(reps):
        keys = singles[rep * chunk : (rep + 1) * chunk]
        for store in stores.values():
            for key in keys:  # the warm-up pass: every store gets one
                store.get(key)
        before = {n: (s.cache, s.cache.stats()) for n, s in stores.items() if s.cache is not None}
        for name, timed in time_interleaved({n: s.get for n, s in stores.items()}, keys).items():
            samples[name] += timed
        for name, (cache, stats) in before.items():
            after = cache.stats()
            hits[name][0] += after.hits - stats.hits
            hits[name][1] += after.hits - stats.hits + after.misses - stats.misses
        colds = {n: s.get_cold for n, s in stores.items() if s.get_cold is not None}
        for name, timed in time_interleaved(colds, keys).items():
            cold[name] += timed
        absents = {n: s.get_cold or s.get for n, s in stores.items()}
        for name, timed in time_interleaved(absents, absent_like(keys)).items():
            absent[name] += timed
        for name, store in stores.items():
            for metric, batch_keys in batches.items():
                start = time.perf_counter()
                store.batch(batch_keys)
                times[name].setdefault(metric, []).append(time.perf_counter() - start)
            for metric, run in store.extra_batches.items():
                start = time.perf_counter()
                run()
                times[name].setdefault(metric, []).append(time.perf_counter() - start)
    results: dict[str, dict[str, float]] = {}
    for name in stores:
        ordered = sorted(samples[name])
        result = {
            "single_get_us_p50": ordered[len(ordered) // 2] / 1000,
            "single_get_us_p99": ordered[int(len(ordered) * 0.99)] / 1000,
            "single_get_absent_us_p50": p50_us(absent[name]),
        }
        if cold[name]:
            result["single_get_cold_us_p50"] = p50_us(cold[name])
        if hits[name][1]:
            result["warm_cache_hit_rate"] = hits[name][0] / hits[name][1]
        for metric, values in times[name].items():
            size = len(batches[metric]) if metric in batches else len(batches["batched_present"])
            result[f"{metric}_per_s"] = size / statistics.median(values)
        results[name] = result
    return results


#: Metrics compared across systems: name -> True if higher is better.
COMPARED = {
    "build_keys_per_s": True,
    "file_bytes": False,
    "single_get_us_p50": False,
    "batched_present_per_s": True,
    "batched_mixed_per_s": True,
    "batched_absent_per_s": True,
}


def ratios(results: dict[str, dict[str, Any]], baseline: str) -> dict[str, dict[str, float]]:
    """Each system's metrics divided by the baseline's (>1 = the system has more of it)."""
    base = results[baseline]
    return {
        name: {metric: round(values[metric] / base[metric], 3) for metric in COMPARED}
        for name, values in results.items()
        if name != baseline
    }


def table(results: dict[str, dict[str, Any]]) -> str:
    columns = [
        ("build k/s", "build_keys_per_s", 1e3),
        ("MB", "file_bytes", 1e6),
        ("get p50 us", "single_get_us_p50", 1),
        ("cold p50 us", "single_get_cold_us_p50", 1),
        ("absent us", "single_get_absent_us_p50", 1),
        ("batch k/s", "batched_present_per_s", 1e3),
        ("mixed k/s", "batched_mixed_per_s", 1e3),
        ("absent k/s", "batched_absent_per_s", 1e3),
    ]
    lines = [f"{'system':<22}" + "".join(f"{title:>12}" for title, _, _ in columns)]
    for name, values in results.items():
        lines.append(
            f"{name:<22}"
            + "".join(
                f"{values[key] / scale:>12.1f}" if key in values else f"{'-':>12}"
                for _, key, scale in columns
            )
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="entries in the data set")
    parser.add_argument("--batch", type=int, default=100_000, help="keys per batched run")
    parser.add_argument(
        "--singles", type=int, default=6_000, help="individually timed gets (per kind)"
    )
    parser.add_argument(
        "--cache-mib",
        type=int,
        default=DEFAULT_BLOCK_CACHE_BYTES >> 20,
        help="block cache of each lakecore reader, MiB (default: the library default)",
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each measurement")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dir", help="scratch directory (default: a temporary one)")
    parser.add_argument(
        "--only", nargs="*", default=None, help="systems to run (lakecore_zstd, ..., sqlite)"
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    keys, values = catalog(args.keys, args.seed)
    rng = random.Random(args.seed + 1)
    batch = min(args.batch, len(keys))
    present = rng.sample(keys, batch)
    mixed = [
        k for pair in zip(present[::2], absent_like(present[1::2]), strict=False) for k in pair
    ]
    absent = absent_like(present)
    singles = rng.sample(keys, min(args.singles, len(keys)))
    stride = max(1, len(keys) // 500)
    check = dict(zip(keys[::stride], values[::stride], strict=True))
    print(f"generated {len(keys)} keys in {time.perf_counter() - started:.1f}s", file=sys.stderr)

    directory = args.dir or tempfile.mkdtemp(prefix="bench_lookup_")
    os.makedirs(directory, exist_ok=True)
    cache_bytes = args.cache_mib << 20
    builders: dict[str, Callable[[], Store]] = {
        "lakecore_zstd": lambda: build_lakecore(
            directory, "zstd", keys, values, check, cache_bytes=cache_bytes
        ),
        "lakecore_none": lambda: build_lakecore(
            directory, "none", keys, values, check, cache_bytes=cache_bytes
        ),
        # Not the default layout (8 KiB): what other block sizes buy single lookups, and cost.
        # 64 KiB is Paimon's default and lakecore's before issue #17.
        "lakecore_zstd_64k": lambda: build_lakecore(
            directory, "zstd", keys, values, check, 65536, cache_bytes
        ),
        "lakecore_zstd_4k": lambda: build_lakecore(
            directory, "zstd", keys, values, check, 4096, cache_bytes
        ),
        "rocksdict_sst_zstd": lambda: build_rocksdict(directory, keys, values, check),
        "sqlite": lambda: build_sqlite(directory, keys, values, check),
    }
    stores: dict[str, Store] = {}
    try:
        for name, build in builders.items():
            if args.only is not None and name not in args.only:
                continue
            t0 = time.perf_counter()
            stores[name] = build()
            print(f"built {name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        if "rocksdict_sst_zstd" in stores:
            # rocksdict's own multi-key get, for reference (the baseline is its per-key loop).
            many: Any = present  # rocksdict's stub types the multi-key get loosely
            rocks_get = stores["rocksdict_sst_zstd"].get
            stores["rocksdict_sst_zstd"].extra_batches["multi_get_present"] = lambda: rocks_get(
                many
            )
        t0 = time.perf_counter()
        batches = {"batched_present": present, "batched_mixed": mixed, "batched_absent": absent}
        calibration_before = C.cpu_calibration()
        measured = measure(stores, batches, singles, args.reps)
        calibration_after = C.cpu_calibration()
        print(f"measured in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    finally:
        for store in stores.values():
            store.close()
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    results: dict[str, dict[str, Any]] = {
        name: {
            k: round(v, 3) if isinstance(v, float) else v
            for k, v in {**stores[name].facts, **measured[name]}.items()
        }
        for name in stores
    }

    report: dict[str, Any] = {
        "keys": len(keys),
        "batch": batch,
        "reps": args.reps,
        "singles": len(singles),
        "block_cache_bytes": cache_bytes,
        "effective_cores": {
            "before": calibration_before["effective_cores"],
            "after": calibration_after["effective_cores"],
            "load_average_after": calibration_after["load_average"],
        },
        "avg_key_bytes": round(sum(map(len, keys)) / len(keys), 1),
        "avg_value_bytes": round(sum(map(len, values)) / len(values), 1),
        "note": (
            "rates are medians over reps; ratios are system value / baseline value, so for "
            "*_per_s above 1 is faster, for file_bytes and single_get_us_p50 above 1 is "
            "bigger/slower; lakecore batches are one get_many call, the others per-key loops; "
            "single_get_us_p50 is warm (after an untimed pass over the same keys), "
            "single_get_cold_us_p50 is lakecore without a block cache"
        ),
        "results": results,
    }
    if "rocksdict_sst_zstd" in results:
        report["ratios_vs_rocksdict"] = ratios(results, "rocksdict_sst_zstd")
    if "sqlite" in results:
        report["ratios_vs_sqlite"] = ratios(results, "sqlite")
    if "rocksdict_sst_zstd" in results:
        report["goals"] = goals(results, "rocksdict_sst_zstd")
    report["total_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
    print(table(results), file=sys.stderr)
    for name, entry in report.get("goals", {}).items():
        print(f"goal {name}: {entry}", file=sys.stderr)
    return 0


def goals(results: dict[str, dict[str, Any]], baseline: str) -> dict[str, dict[str, Any]]:
    """Every lakecore store's goals against rocksdict, as ``{store.goal: {ratio, met}}``."""
    base = results[baseline]
    out: dict[str, dict[str, Any]] = {}
    for name, values in results.items():
        if not name.startswith("lakecore"):
            continue
        checks = {
            "single_get_warm_vs_rocksdict": (
                values["single_get_us_p50"] / base["single_get_us_p50"],
                SINGLE_GET_GOAL_RATIO,
                "at_most",
            ),
            "single_get_cold_vs_rocksdict_cold": (
                values["single_get_cold_us_p50"] / base["single_get_cold_us_p50"],
                SINGLE_GET_GOAL_RATIO,
                "at_most",
            ),
            "single_get_cold_vs_rocksdict_warm": (
                values["single_get_cold_us_p50"] / base["single_get_us_p50"],
                SINGLE_GET_GOAL_RATIO,
                "at_most",
            ),
            "get_many_vs_rocksdict_loop": (
                values["batched_present_per_s"] / base["batched_present_per_s"],
                1.0,
                "at_least",
            ),
            "file_bytes_vs_rocksdict_sst": (
                values["file_bytes"] / base["file_bytes"],
                1.0,
                "at_most",
            ),
        }
        for goal, (ratio, bound, kind) in checks.items():
            met = ratio <= bound if kind == "at_most" else ratio >= bound
            out[f"{name}.{goal}"] = {"ratio": round(ratio, 3), kind: bound, "met": met}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
