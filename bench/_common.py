"""Helpers shared by the benchmarks: timing, summaries, JSON and table output, scratch
directories, and catalog-shaped keys and values.

Importing this module also makes ``lakecore`` importable when a benchmark runs as a script
from a checkout (``.venv/bin/python bench/bench_tree.py``) without an installed package, so
benchmarks import it before anything from ``lakecore``.

Data shape (the default lakehouse limits): a table key is ``"C===" + namespace padded with
spaces to 100 bytes + table padded to 100 bytes`` (204 bytes); its value is the relative,
path-optimized location of a table definition file, about 93 bytes
(``0101/1100/0011/01101001-table-<table>-<ns>-<uuid>.binpb``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from lakecore.core.locations import optimize_path  # noqa: E402

T = TypeVar("T")

NAMESPACE_NAME_MAX_BYTES = 100
TABLE_NAME_MAX_BYTES = 100
TABLE_KEY_PREFIX = "C==="
NAMESPACE_KEY_PREFIX = "B==="
#: Tables per namespace in the generated catalogs.
TABLES_PER_NAMESPACE = 1000
_WORDS = ("sales", "orders", "events", "users", "clicks", "ledger", "stock", "audit")

KiB = 1 << 10
MiB = 1 << 20


# ---------------------------------------------------------------------------------------------
# Catalog-shaped keys and values


def namespace_name(i: int) -> str:
    return f"ns_{i:05d}"


def table_name(j: int) -> str:
    return f"{_WORDS[j % len(_WORDS)]}_{j:04d}"


def namespace_key(ns: str) -> str:
    return NAMESPACE_KEY_PREFIX + ns.ljust(NAMESPACE_NAME_MAX_BYTES)


def table_key(ns: str, table: str) -> str:
    """The tree key of a table (ASCII names: characters are bytes)."""
    return TABLE_KEY_PREFIX + ns.ljust(NAMESPACE_NAME_MAX_BYTES) + table.ljust(TABLE_NAME_MAX_BYTES)


def split_table_key(key: str) -> tuple[str, str]:
    body = key[len(TABLE_KEY_PREFIX) :]
    return body[:NAMESPACE_NAME_MAX_BYTES].rstrip(" "), body[NAMESPACE_NAME_MAX_BYTES:].rstrip(" ")


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def table_value(ns: str, table: str, rng: random.Random) -> str:
    """A fresh table definition location, as ``lakecore.core.locations.new_table_def_path`` makes
    them, but reproducible from ``rng``."""
    return optimize_path(f"table-{table}-{ns}-{random_uuid(rng)}.binpb")


def catalog(n: int, seed: int = 42) -> tuple[list[str], list[str]]:
    """``n`` table keys in ascending order (``TABLES_PER_NAMESPACE`` per namespace) and their
    values."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        ns = namespace_name(i // TABLES_PER_NAMESPACE)
        table = table_name(i % TABLES_PER_NAMESPACE)
        pairs.append((table_key(ns, table), table_value(ns, table, rng)))
    pairs.sort()
    return [k for k, _ in pairs], [v for _, v in pairs]


@dataclass
class OpStream:
    """Single-key writes against a catalog: updates of existing tables and inserts of new ones.

    Updates pick a uniformly random key of ``base_keys`` (the initial catalog); inserts add a
    new table next to a random existing one (``<table>_n<counter>``), so they land all over the
    key space and never collide. Every op gets a fresh definition location."""

    base_keys: Sequence[str]
    insert_fraction: float = 0.2
    seed: int = 7
    rng: random.Random = field(init=False)
    _counter: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next(self) -> tuple[str, str, bool]:
        """(key, value, is_insert)."""
        rng = self.rng
        key = self.base_keys[rng.randrange(len(self.base_keys))]
        ns, table = split_table_key(key)
        insert = rng.random() < self.insert_fraction
        if insert:
            self._counter += 1
            table = f"{table}_n{self._counter}"
            key = table_key(ns, table)
        return key, table_value(ns, table, rng), insert

    def take(self, n: int) -> list[tuple[str, str, bool]]:
        return [self.next() for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Timing and summaries


def now_ms() -> int:
    return int(time.time() * 1000)


@contextlib.contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` is the elapsed seconds."""
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) with linear interpolation; NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples: Sequence[float], scale: float = 1.0, digits: int = 3) -> dict[str, Any]:
    """n, median, p90, p99, mean, min, max of ``samples`` multiplied by ``scale``."""
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "median": round(statistics.median(samples) * scale, digits),
        "p90": round(percentile(samples, 0.9) * scale, digits),
        "p99": round(percentile(samples, 0.99) * scale, digits),
        "mean": round(statistics.fmean(samples) * scale, digits),
        "min": round(min(samples) * scale, digits),
        "max": round(max(samples) * scale, digits),
    }


def ratio(numerator: float, denominator: float, digits: int = 3) -> float | None:
    if not denominator or math.isnan(numerator) or math.isnan(denominator):
        return None
    return round(numerator / denominator, digits)


def goal(name: str, target: str, value: Any, met: bool, **extra: Any) -> dict[str, Any]:
    return {"goal": name, "target": target, "value": value, "met": bool(met), **extra}


# ---------------------------------------------------------------------------------------------
# Output


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, default=_json_default))
    sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def format_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            if value == 0 or abs(value) >= 100:
                return f"{value:,.0f}"
            return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
        if isinstance(value, bool):
            return "yes" if value else "NO"
        return "-" if value is None else str(value)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = [title, "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    print("\n" + format_table(title, headers, rows), file=sys.stderr, flush=True)


def environment() -> dict[str, Any]:
    import pyarrow

    return {
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


# ---------------------------------------------------------------------------------------------
# How much CPU the machine offers (it is shared)

#: Loops of pure-Python work per calibration process (about a second each on the dev VM).
CALIBRATION_LOOPS = 12_000_000


def _burn(loops: int) -> None:
    total = 0
    for i in range(loops):
        total += i
    os._exit(0 if total else 1)


def _run_burners(count: int, loops: int) -> float:
    t0 = time.perf_counter()
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            _burn(loops)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return time.perf_counter() - t0


def cpu_calibration(loops: int = CALIBRATION_LOOPS) -> dict[str, Any]:
    """The same pure-Python CPU work in one process, then in two at once: ``effective_cores``
    (2 x one / two) is how many cores two busy processes get right now (2.0 on an idle 2-core
    machine; other processes on the machine take the rest)."""
    one = _run_burners(1, loops)
    two = _run_burners(2, loops)
    return {
        "one_process_seconds": round(one, 3),
        "two_processes_seconds": round(two, 3),
        "effective_cores": round(2 * one / two, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


# ---------------------------------------------------------------------------------------------
# Scratch space


@contextlib.contextmanager
def temp_dir(prefix: str, base: str | None = None, keep: bool = False) -> Iterator[str]:
    """A fresh directory (on ``base``, created if missing; default the system temp dir), removed
    afterwards unless ``keep``."""
    if base is not None:
        os.makedirs(base, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    try:
        yield path
    finally:
        if keep:
            log(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def parse_size(text: str) -> int:
    """``"128K"``, ``"1M"``, ``"4MiB"`` or a plain byte count."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": KiB, "M": MiB, "G": 1 << 30}
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def format_size(n: int) -> str:
    if n % MiB == 0:
        return f"{n // MiB}MiB"
    if n % KiB == 0:
        return f"{n // KiB}KiB"
    return str(n)


def parse_int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
