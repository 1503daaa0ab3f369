"""Benchmark of pyiceberg commits through ``lakecore.iceberg.LakecoreCatalog`` against
pyiceberg's own ``SqlCatalog`` on SQLite, in the same run, on local disk and on moto's S3.

Two workloads, ``--commits`` commits each (default 150), on one unpartitioned table of three
columns per catalog, by a single writer:

* ``append``: ``table.append(<--rows rows>)``: a Parquet data file, a manifest, a manifest list,
  a metadata file, and the catalog commit. What an engine's small appends cost end to end.
* ``set_properties``: ``with table.transaction() as tx: tx.set_properties(...)``: a metadata
  file and the catalog commit only, so the catalog's own share is not hidden by data files.

**Baseline**, interleaved commit by commit (which catalog goes first alternates, since disk and
CPU latency drift on a shared machine): ``SqlCatalog`` with a SQLite file in the scratch
directory and its warehouse on the same storage as the lakehouse's. Its commit is one SQLite
``UPDATE ... WHERE metadata_location = <base>``; lakecore's writes a table definition, the
changed tree nodes and a root file (plus the hint), after reading the latest root.

Reported per storage and workload: latency n/median/p90/p99/mean (ms) of each catalog, commits
per second (1 / mean latency: one writer, back to back), and ``ratios.median_lakecore_over_sql``
and ``p90_lakecore_over_sql``. ``cpu_calibration.effective_cores`` (bench_jobs' calibration, 2.0
on an idle 2-core machine) is measured before each storage. Goal: lakecore's median append
latency within 1.5x of SqlCatalog's on each storage. moto runs inside this process, so its CPU
time is part of the S3 latencies of both catalogs.

Prints one JSON document on stdout and a table on stderr; ``--quick`` runs in under a minute.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import _common as C
import pyarrow as pa
from bench_commit import S3_BUCKET, S3_REGION, moto_s3
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
)
GOAL_RATIO = 1.5
WORKLOADS = ("append", "set_properties")


def batch(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": pa.array([f"row-{i}" for i in range(start, start + n)], pa.string()),
            "amount": pa.array([i * 0.5 for i in range(start, start + n)], pa.float64()),
        }
    )


def make_catalogs(base: str, local_dir: str, s3_properties: dict[str, str]) -> dict[str, Catalog]:
    """The two catalogs: lakecore's (lakehouse at ``<base>/lake``, warehouse inside it) and
    SqlCatalog (SQLite file in ``local_dir``, warehouse at ``<base>/sql-warehouse``)."""
    options = None
    if s3_properties:
        options = {"client_kwargs": {"endpoint_url": s3_properties["s3.endpoint"]}}
    Lakehouse.create(f"{base}/lake", storage_options=options)
    lakecore = LakecoreCatalog("lakecore", uri=f"{base}/lake", **s3_properties)
    sql = SqlCatalog(
        "sql",
        uri=f"sqlite:///{local_dir}/sql-catalog.db",
        warehouse=f"{base}/sql-warehouse",
        **s3_properties,
    )
    return {"lakecore": lakecore, "sql": sql}


def run_storage(
    name: str, base: str, local_dir: str, s3_properties: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    C.log(f"== {name}")
    calibration = C.cpu_calibration()
    C.log(f"   effective cores {calibration['effective_cores']}")
    catalogs = make_catalogs(base, local_dir, s3_properties)
    out: dict[str, Any] = {"cpu_calibration": calibration, "workloads": {}}
    for workload in WORKLOADS:
        tables: dict[str, Table] = {}
        for cname, catalog in catalogs.items():
            catalog.create_namespace(f"bench_{workload}")
            tables[cname] = catalog.create_table(f"bench_{workload}.events", SCHEMA)
        ops: dict[str, Callable[[int], None]] = {}
        for cname, table in tables.items():
            if workload == "append":

                def append(i: int, t: Table = table) -> None:
                    t.append(batch(i * args.rows, args.rows))

                ops[cname] = append
            else:

                def set_props(i: int, t: Table = table) -> None:
                    with t.transaction() as tx:
                        tx.set_properties(counter=str(i))

                ops[cname] = set_props
        for cname in ops:  # warm-up, not measured: imports, connections, first files
            for i in range(args.warmup):
                ops[cname](10**6 + i)
        samples: dict[str, list[float]] = {cname: [] for cname in ops}
        order = list(ops)
        started = time.perf_counter()
        for i in range(args.commits):
            for cname in order if i % 2 == 0 else reversed(order):
                t0 = time.perf_counter()
                ops[cname](i)
                samples[cname].append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
        checks = {}
        for cname, catalog in catalogs.items():
            table = catalog.load_table(f"bench_{workload}.events")
            expected_snapshots = args.commits + args.warmup if workload == "append" else 0
            checks[cname] = len(table.metadata.snapshots) == expected_snapshots
        result: dict[str, Any] = {
            "latency_ms": {cname: C.summarize(s, 1000.0) for cname, s in samples.items()},
            "commits_per_second": {
                cname: round(len(s) / sum(s), 1) for cname, s in samples.items()
            },
            "wall_seconds": round(elapsed, 1),
            "checks_snapshot_count_ok": checks,
        }
        med = {c: result["latency_ms"][c]["median"] for c in samples}
        p90 = {c: result["latency_ms"][c]["p90"] for c in samples}
        result["ratios"] = {
            "median_lakecore_over_sql": C.ratio(med["lakecore"], med["sql"]),
            "p90_lakecore_over_sql": C.ratio(p90["lakecore"], p90["sql"]),
        }
        C.log(
            f"   {workload}: lakecore median {med['lakecore']:.1f} ms, sql {med['sql']:.1f} ms, "
            f"ratio {result['ratios']['median_lakecore_over_sql']}"
        )
        out["workloads"][workload] = result
    lakehouse = catalogs["lakecore"]
    assert isinstance(lakehouse, LakecoreCatalog)
    out["lakehouse_versions"] = lakehouse.lakehouse.refresh().version
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--commits",
        type=int,
        default=None,
        help="measured commits per workload, catalog and storage (default 150)",
    )
    parser.add_argument("--rows", type=int, default=100, help="rows per append (default 100)")
    parser.add_argument(
        "--warmup", type=int, default=3, help="unmeasured commits first (default 3)"
    )
    parser.add_argument("--storages", default="local,s3", help="comma-separated: local, s3")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--quick", action="store_true", help="20 commits per workload, under a minute"
    )
    args = parser.parse_args(argv)
    if args.commits is None:
        args.commits = 20 if args.quick else 150
    args.storage_list = [s.strip() for s in args.storages.split(",") if s.strip()]
    return args


def print_tables(doc: dict[str, Any]) -> None:
    rows = []
    for storage, result in doc["storages"].items():
        cores = result["cpu_calibration"]["effective_cores"]
        for workload, w in result["workloads"].items():
            lat, cps = w["latency_ms"], w["commits_per_second"]
            rows.append(
                [
                    storage,
                    workload,
                    cores,
                    lat["lakecore"]["median"],
                    lat["lakecore"]["p90"],
                    lat["sql"]["median"],
                    lat["sql"]["p90"],
                    cps["lakecore"],
                    cps["sql"],
                    w["ratios"]["median_lakecore_over_sql"],
                ]
            )
    C.print_table(
        "pyiceberg commits: LakecoreCatalog vs SqlCatalog (ms)",
        [
            "storage",
            "workload",
            "cores",
            "lc p50",
            "lc p90",
            "sql p50",
            "sql p90",
            "lc c/s",
            "sql c/s",
            "ratio p50",
        ],
        rows,
    )
    for g in doc["goals"]:
        C.log(
            f"goal {g['goal']}: {g['value']} (target {g['target']}): {'met' if g['met'] else 'NOT met'}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    started = time.perf_counter()
    doc: dict[str, Any] = {
        "benchmark": "bench_iceberg",
        "config": {
            "commits": args.commits,
            "rows_per_append": args.rows,
            "warmup": args.warmup,
            "storages": args.storage_list,
            "quick": args.quick,
        },
        "environment": C.environment(),
        "notes": [
            "latency: one pyiceberg commit (append: data file + manifests + metadata + catalog commit; "
            "set_properties: metadata + catalog commit), timed individually, the two catalogs interleaved",
            "commits_per_second: one writer back to back (1 / mean latency)",
            "baseline: pyiceberg SqlCatalog on a local SQLite file, warehouse on the same storage",
            "S3 is moto's server inside this process: its request handling competes for the same CPU",
        ],
        "storages": {},
        "goals": [],
    }
    for storage in args.storage_list:
        with C.temp_dir("bench_iceberg_", args.tmpdir, keep=args.keep) as directory:
            if storage == "local":
                doc["storages"]["local"] = run_storage(
                    "local", "file://" + directory, directory, {}, args
                )
            elif storage == "s3":
                with moto_s3() as endpoint:
                    props = {
                        "s3.endpoint": endpoint,
                        "s3.access-key-id": "lakecore-bench",
                        "s3.secret-access-key": "lakecore-bench",
                        "s3.region": S3_REGION,
                    }
                    base = f"s3://{S3_BUCKET}/{uuid.uuid4()}"
                    doc["storages"]["s3_moto"] = run_storage(
                        "s3 (moto)", base, directory, props, args
                    )
            else:
                raise SystemExit(f"unknown storage {storage!r}; use local and/or s3")
    for storage, result in doc["storages"].items():
        value = result["workloads"]["append"]["ratios"]["median_lakecore_over_sql"]
        doc["goals"].append(
            C.goal(
                f"append_latency_{storage}",
                f"median lakecore/sql <= {GOAL_RATIO}",
                value,
                value is not None and value <= GOAL_RATIO,
            )
        )
    doc["total_seconds"] = round(time.perf_counter() - started, 1)
    C.print_json(doc)
    print_tables(doc)
    C.log(f"\ntotal {doc['total_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
