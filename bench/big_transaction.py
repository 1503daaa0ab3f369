"""One transaction that creates N tables (a new-user trial: 100k tables, 82 s and 228 MB), and
its baseline: the same version built the bulk way. A part of ``bench_commit.py``
(``--big-transaction N``); also runnable alone::

    .venv/bin/python bench/big_transaction.py --tables 100000 > big.json
    .venv/bin/python bench/big_transaction.py --tables 5000 --rounds 1   # about a minute

Both cases run on local disk, each in a fresh child process (``--child``), so that its peak
resident memory is its own:

* ``transaction``: ``Lakehouse.create``, then one ``with lh.transaction() as tx:`` holding
  ``tx.create_namespace`` for each namespace of 1000 tables and ``tx.create_table`` (five
  columns, as bench_commit's) for each table; the block's exit commits (each definition is
  written and fsynced on its own, then the tree, then the root).
* ``bulk`` (the baseline, what the same version costs at least): the same definitions, encoded
  the same way, written by 8 threads without an fsync each and made durable by one
  ``Storage.sync()`` (as ``NodeStore.write_many`` writes node files), then ``bulk_build`` of the
  same keys and one commit of the root.

Per case: wall seconds (for the transaction also the staging, ``create_table`` calls, and the
commit apart), the peak resident set (``VmHWM``, reset after the lakehouse is created) and its
growth over the resident set at that moment, the files written, and a check that the version
holds every table. Rounds alternate which case goes first; medians over rounds, the ratios
transaction / bulk, and the effective cores the machine offered (``_common.cpu_calibration``).
No goal is stated: the numbers say what a transaction of that size costs and where.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import _common as C

from lakecore.core.commit import RootPlan
from lakecore.core.defs import encode_def, namespace_def, table_def
from lakecore.core.keys import namespace_key, table_key
from lakecore.core.locations import new_namespace_def_path, new_table_def_path
from lakecore.core.tree import bulk_build
from lakecore.core.versions import RootInfo
from lakecore.lakehouse import Lakehouse

CASES = ("transaction", "bulk")
COLUMNS = [
    {"id": 1, "name": "id", "type": "INT8", "nullable": False},
    {"id": 2, "name": "event_time", "type": "TIMESTAMPTZ"},
    {"id": 3, "name": "user_id", "type": "INT8"},
    {"id": 4, "name": "payload", "type": "VARCHAR"},
    {"id": 5, "name": "amount", "type": "DECIMAL"},
]
WRITE_THREADS = 8


def _names(tables: int) -> list[tuple[str, str]]:
    return [
        (C.namespace_name(i // C.TABLES_PER_NAMESPACE), C.table_name(i % C.TABLES_PER_NAMESPACE))
        for i in range(tables)
    ]


def _status_kib(name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM back to the current resident set (Linux >= 4.0)


def _files_under(directory: str) -> int:
    return sum(len(files) for _, _, files in os.walk(directory))


# ---------------------------------------------------------------------------------------------
# The two cases, each in a child process


def _transaction(lh: Lakehouse, names: list[tuple[str, str]]) -> dict[str, float]:
    t0 = time.perf_counter()
    with lh.transaction() as tx:
        for ns in sorted({ns for ns, _ in names}):
            tx.create_namespace(ns)
        for ns, table in names:
            tx.create_table(ns, table, columns=COLUMNS)
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    return {"staging_seconds": t1 - t0, "commit_seconds": t2 - t1}


def _bulk(lh: Lakehouse, names: list[tuple[str, str]]) -> dict[str, float]:
    t0 = time.perf_counter()
    items: list[tuple[str, str]] = []
    files: list[tuple[str, bytes]] = []
    for ns in sorted({ns for ns, _ in names}):
        path = new_namespace_def_path(ns)
        files.append((path, encode_def(namespace_def(ns))))
        items.append((namespace_key(ns, lh.lakehouse_def), path))
    for ns, table in names:
        path = new_table_def_path(ns, table)
        files.append((path, encode_def(table_def(table, columns=COLUMNS))))
        items.append((table_key(ns, table, lh.lakehouse_def), path))
    storage = lh.storage

    def write(chunk: list[tuple[str, bytes]]) -> None:
        for path, data in chunk:
            storage.write(path, data, durable=False)

    step = max(1, len(files) // (WRITE_THREADS * 4))
    with cf.ThreadPoolExecutor(WRITE_THREADS) as pool:
        list(pool.map(write, [files[i : i + step] for i in range(0, len(files), step)]))
    storage.sync()
    t1 = time.perf_counter()
    items.sort()

    def plan(base: RootInfo) -> RootPlan:
        return RootPlan(bulk_build(lh.store, lh.shape, items), base.lakehouse_def_path)

    lh.commit_plan(plan, lambda latest: None)
    return {"definitions_seconds": t1 - t0, "tree_and_commit_seconds": time.perf_counter() - t1}


def run_child(case: str, tables: int, directory: str) -> dict[str, Any]:
    """One case, in this (fresh) process; returns its measurements."""
    names = _names(tables)
    lh = Lakehouse.create(directory, "big-transaction")
    _reset_peak_rss()
    rss_before = _status_kib("VmRSS")
    t0 = time.perf_counter()
    parts = _transaction(lh, names) if case == "transaction" else _bulk(lh, names)
    seconds = time.perf_counter() - t0
    peak = _status_kib("VmHWM")
    reopened = Lakehouse.open(directory)
    held = sum(len(reopened.list_tables(ns)) for ns in reopened.list_namespaces())
    return {
        "case": case,
        "tables": tables,
        "seconds": round(seconds, 2),
        **{k: round(v, 2) for k, v in parts.items()},
        "peak_rss_mib": round(peak / 1024, 1),
        "rss_before_mib": round(rss_before / 1024, 1),
        "rss_growth_mib": round((peak - rss_before) / 1024, 1),
        "files_written": _files_under(directory),
        "version": reopened.version,
        "all_tables_held": held == tables,
    }


# ---------------------------------------------------------------------------------------------
# The parent: rounds, medians, ratios


def _run_case(case: str, tables: int, tmpdir: str | None) -> dict[str, Any]:
    with C.temp_dir("big_transaction_", tmpdir) as directory:
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", case, str(tables), directory],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"big transaction, {case}: the child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure(tables: int, rounds: int, tmpdir: str | None = None) -> dict[str, Any]:
    """Both cases ``rounds`` times, alternating which goes first; medians and ratios."""
    calibration = C.cpu_calibration()
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    for r in range(rounds):
        for case in CASES if r % 2 == 0 else tuple(reversed(CASES)):
            C.log(f"big transaction: round {r}, {case}, {tables:,} tables")
            result = _run_case(case, tables, tmpdir)
            C.log(
                f"  {result['seconds']} s, peak {result['peak_rss_mib']} MiB "
                f"(+{result['rss_growth_mib']} MiB), {result['files_written']:,} files"
            )
            runs[case].append(result)

    def median(case: str, key: str) -> float:
        return round(float(statistics.median(r[key] for r in runs[case])), 2)

    keys = ("seconds", "peak_rss_mib", "rss_growth_mib")
    medians = {case: {key: median(case, key) for key in keys} for case in CASES}
    medians["transaction"]["staging_seconds"] = median("transaction", "staging_seconds")
    medians["transaction"]["commit_seconds"] = median("transaction", "commit_seconds")
    medians["bulk"]["definitions_seconds"] = median("bulk", "definitions_seconds")
    tx, bulk = medians["transaction"], medians["bulk"]
    return {
        "tables": tables,
        "rounds": rounds,
        "medians": medians,
        "ratios": {
            "seconds_transaction_over_bulk": C.ratio(tx["seconds"], bulk["seconds"]),
            "rss_growth_transaction_over_bulk": C.ratio(
                tx["rss_growth_mib"], bulk["rss_growth_mib"]
            ),
        },
        "checks": {
            "every_table_held": all(r["all_tables_held"] for rs in runs.values() for r in rs),
            "one_version": all(r["version"] == 1 for rs in runs.values() for r in rs),
        },
        "runs": runs,
        "cpu_calibration": calibration,
        "notes": [
            "local disk, each case in a fresh child process; peak = VmHWM reset after Lakehouse.create",
            "bulk: the same definition bytes, 8 writer threads, no fsync per file, one syncfs; "
            "bulk_build; one root commit",
        ],
    }


def print_table(result: dict[str, Any]) -> None:
    rows = []
    for case in CASES:
        m = result["medians"][case]
        rows.append([case, m["seconds"], m["peak_rss_mib"], m["rss_growth_mib"]])
    ratios = result["ratios"]
    rows.append(
        [
            "ratio",
            ratios["seconds_transaction_over_bulk"],
            None,
            ratios["rss_growth_transaction_over_bulk"],
        ]
    )
    C.print_table(
        f"{result['tables']:,} tables in one version (medians of {result['rounds']} rounds; "
        "ratio: transaction / bulk)",
        ["case", "seconds", "peak MiB", "growth MiB"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tmpdir", default=None, help="where the lakehouses go")
    parser.add_argument(
        "--child", nargs=3, metavar=("CASE", "TABLES", "DIR"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        case, tables, directory = args.child
        print(json.dumps(run_child(case, int(tables), directory)))
        return 0
    result = measure(args.tables, args.rounds, args.tmpdir)
    C.print_json({"benchmark": "big_transaction", "environment": C.environment(), **result})
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
