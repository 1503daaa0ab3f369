"""Benchmark of the Iceberg REST catalog server (``lakecore.rest``): the server over a
``LakecoreCatalog`` against the same server over pyiceberg's ``SqlCatalog`` (SQLite), in the
same run, at 1k and 1M tables on local disk.

Per scale (``--tables``, default ``1000,1000000``), both catalogs hold the same tables: ``N``
tables in namespaces of ``--namespace-tables`` (10,000; one namespace at 1k), plus ``big``, a
namespace of exactly 10,000 tables for the listing, plus the tables the commits go to. Measured,
interleaved request by request (which server goes first alternates), over HTTP from this
process with one keep-alive connection per server (both servers run in this process, each in a
uvicorn thread):

* ``load_table``: ``GET .../tables/{t}`` of ``--loads`` random tables: latency percentiles.
  Goal: lakecore's p50 at most 1.5x SqlCatalog's.
* ``list_tables_paged``: every page of ``big`` (``pageToken``, ``--page-size`` 1000): the time
  of the whole listing, ``--listings`` times. Goal: median at most 1.5x.
* ``append_commit``: pyiceberg's RestCatalog appends ``--rows`` rows ``--commits`` times to one
  table per server (one writer): the whole ``table.append`` (data file, manifests, metadata file,
  the commit request). Goal: p50 at most 1.5x.
* ``server_overhead``: loadTable through HTTP over a direct ``LakecoreCatalog.load_table`` of
  the same tables in this process: the p50s, their difference and ratio. Printed, no goal.

**How the catalogs are built** (the build is not measured against anything; its time is
printed): every table of the bulk is an Iceberg table whose current metadata is a real metadata
file of the catalog's own warehouse, shared by the bulk's tables (one ``template`` table made
through the catalog; the load then reads the same file for both catalogs, and the catalog's own
lookup is what scales). Lakecore: each table's definition file is written (``--build-threads``,
not durable until one sync) and the tree of every key is bulk-built (``lakecore.core.tree.bulk_build``)
and committed as one version, as bench_jobs builds its lakehouse; a definition is what
``Transaction.create_table`` would write. SqlCatalog: the namespaces through the catalog, the
table rows with one ``executemany`` in one SQLite transaction (its schema is pyiceberg's).

Prints one JSON document on stdout (per scale: build seconds, each measurement's latency
summary in ms, ratios and goals; ``cpu_calibration.effective_cores`` before each scale) and a
table on stderr. ``--quick``: 1k tables, fewer samples, under a minute.

``--load`` is the server under many writers and readers instead: group commit against
``--no-group-commit``, light commits and pyiceberg appends, S3 requests and server CPU per
commit (``bench/rest_load.py`` says what and how; ``--storage s3|local``, ``--latency-ms``,
``--duration``, ``--writers``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import random
import sqlite3
import statistics
import threading
import time
from typing import Any

import _common as C
import pyarrow as pa
import requests
import rest_load
import uvicorn
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from lakecore.core import keys as K
from lakecore.core.commit import RootPlan
from lakecore.core.defs import encode_def, namespace_def, table_def
from lakecore.core.locations import new_namespace_def_path, new_table_def_path
from lakecore.core.tree import bulk_build
from lakecore.core.versions import RootInfo
from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.catalog import METADATA_LOCATION_PROPERTY
from lakecore.iceberg.columns import columns_of
from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
)
GOAL_RATIO = 1.5
BIG_NAMESPACE = "big"
BIG_TABLES = 10_000
CATALOGS = ("lakecore", "sql")


def namespace_of(i: int) -> str:
    return f"ns{i:05d}"


def table_of(j: int) -> str:
    return f"t{j:06d}"


def bulk_names(n: int, per_namespace: int) -> list[tuple[str, str]]:
    names = [(namespace_of(i // per_namespace), table_of(i % per_namespace)) for i in range(n)]
    names += [(BIG_NAMESPACE, table_of(j)) for j in range(BIG_TABLES)]
    return names


def batch(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": pa.array([f"row-{i}" for i in range(start, start + n)], pa.string()),
            "amount": pa.array([i * 0.5 for i in range(start, start + n)], pa.float64()),
        }
    )


# ---------------------------------------------------------------------------------------------
# Building the catalogs


def build_lakecore(
    base: str, names: list[tuple[str, str]], threads: int
) -> tuple[LakecoreCatalog, dict[str, Any]]:
    t0 = time.perf_counter()
    Lakehouse.create(f"{base}/lake")
    catalog = LakecoreCatalog("lakecore", uri=f"{base}/lake")
    catalog.create_namespace("template")
    template = catalog.create_table(("template", "t"), SCHEMA)
    lh = catalog.lakehouse.refresh()
    storage, definition = lh.storage, lh.lakehouse_def
    columns = columns_of(template.metadata.schema())
    properties = {METADATA_LOCATION_PROPERTY: template.metadata_location}
    namespaces = sorted({ns for ns, _ in names})

    def write_namespace(ns: str, tables: list[str]) -> list[tuple[str, str]]:
        items = []
        location = new_namespace_def_path(ns)
        storage.write(location, encode_def(namespace_def(ns)), durable=False)
        items.append((K.namespace_key(ns, definition), location))
        for table in tables:
            location = new_table_def_path(ns, table)
            data = encode_def(table_def(table, columns=columns, format_properties=properties))
            storage.write(location, data, durable=False)
            items.append((K.table_key(ns, table, definition), location))
        return items

    by_namespace: dict[str, list[str]] = {ns: [] for ns in namespaces}
    for ns, table in names:
        by_namespace[ns].append(table)
    t_files = time.perf_counter()
    items: list[tuple[str, str]] = []
    with cf.ThreadPoolExecutor(max_workers=threads) as pool:
        for written in pool.map(lambda ns: write_namespace(ns, by_namespace[ns]), namespaces):
            items.extend(written)
    storage.sync()
    files_seconds = time.perf_counter() - t_files
    merged = sorted(list(lh.items()) + items)
    t_tree = time.perf_counter()

    def plan(base_root: RootInfo) -> RootPlan:
        return RootPlan(bulk_build(lh.store, lh.shape, merged), base_root.lakehouse_def_path)

    lh.commit_plan(plan, lambda latest: None)
    tree_seconds = time.perf_counter() - t_tree
    return catalog, {
        "seconds": round(time.perf_counter() - t0, 2),
        "definition_files": len(items),
        "definition_files_seconds": round(files_seconds, 2),
        "bulk_build_and_commit_seconds": round(tree_seconds, 2),
        "keys": len(merged),
        "version": lh.version,
    }


def build_sql(base: str, names: list[tuple[str, str]]) -> tuple[SqlCatalog, dict[str, Any]]:
    t0 = time.perf_counter()
    db = f"{base}/sql-catalog.db"
    catalog = SqlCatalog("sql", uri=f"sqlite:///{db}", warehouse=f"file://{base}/sql-warehouse")
    catalog.create_namespace("template")
    template = catalog.create_table(("template", "t"), SCHEMA)
    for ns in sorted({ns for ns, _ in names}):
        catalog.create_namespace(ns)
    with sqlite3.connect(db) as connection:
        connection.executemany(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
            "metadata_location, previous_metadata_location, iceberg_type) "
            "VALUES ('sql', ?, ?, ?, NULL, 'TABLE')",
            ((ns, table, template.metadata_location) for ns, table in names),
        )
    return catalog, {"seconds": round(time.perf_counter() - t0, 2)}


# ---------------------------------------------------------------------------------------------
# Servers


class Served:
    def __init__(self, catalog: Catalog) -> None:
        config = uvicorn.Config(
            app(catalog), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.session = requests.Session()

    def stop(self) -> None:
        self.session.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)


def interleaved(ops: dict[str, Any], count: int, warmup: int = 2) -> dict[str, list[float]]:
    """Run ``ops[name](i)`` ``count`` times each, alternating which goes first; seconds."""
    for name in ops:
        for i in range(warmup):
            ops[name](-1 - i)
    samples: dict[str, list[float]] = {name: [] for name in ops}
    order = list(ops)
    for i in range(count):
        for name in order if i % 2 == 0 else reversed(order):
            t0 = time.perf_counter()
            ops[name](i)
            samples[name].append(time.perf_counter() - t0)
    return samples


def compare(samples: dict[str, list[float]], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {name: C.summarize(s, 1000.0) for name, s in samples.items()}
    lake, sql = statistics.median(samples["lakecore"]), statistics.median(samples["sql"])
    value = C.ratio(lake, sql)
    out["ratio_median_lakecore_over_sql"] = value
    out["goal"] = C.goal(
        f"{what} median lakecore <= {GOAL_RATIO}x sql",
        f"<= {GOAL_RATIO}",
        value,
        value is not None and value <= GOAL_RATIO,
    )
    return out


def run_scale(n: int, args: argparse.Namespace) -> dict[str, Any]:
    C.log(f"== {n:,} tables")
    calibration = C.cpu_calibration()
    C.log(f"   effective cores {calibration['effective_cores']}")
    out: dict[str, Any] = {"tables": n, "cpu_calibration": calibration}
    names = bulk_names(n, args.namespace_tables)
    with C.temp_dir("bench-rest-", args.scratch, args.keep) as base:
        lakecore, out["build_lakecore"] = build_lakecore(base, names, args.build_threads)
        C.log(f"   lakecore built in {out['build_lakecore']['seconds']}s")
        sql, out["build_sql"] = build_sql(base, names)
        C.log(f"   sql built in {out['build_sql']['seconds']}s")
        servers = {"lakecore": Served(lakecore), "sql": Served(sql)}
        try:
            rng = random.Random(args.seed)
            sample = [rng.choice(names) for _ in range(args.loads + 2)]

            def loader(server: Served) -> Any:
                def load(i: int) -> None:
                    ns, table = sample[i]
                    response = server.session.get(f"{server.url}/v1/namespaces/{ns}/tables/{table}")
                    response.raise_for_status()

                return load

            loads = interleaved({k: loader(s) for k, s in servers.items()}, args.loads)
            out["load_table"] = compare(loads, "loadTable")
            direct: list[float] = []
            for i in range(args.loads):
                t0 = time.perf_counter()
                lakecore.load_table(sample[i])
                direct.append(time.perf_counter() - t0)
            http_p50, direct_p50 = statistics.median(loads["lakecore"]), statistics.median(direct)
            out["server_overhead"] = {
                "direct_load_table_ms": C.summarize(direct, 1000.0),
                "http_load_table_median_ms": round(http_p50 * 1000, 3),
                "overhead_median_ms": round((http_p50 - direct_p50) * 1000, 3),
                "ratio_http_over_direct": C.ratio(http_p50, direct_p50),
            }
            C.log(f"   loadTable: {out['load_table']['ratio_median_lakecore_over_sql']}x")

            def lister(server: Served) -> Any:
                def list_all(_i: int) -> None:
                    token, seen = "", 0
                    while token is not None:
                        response = server.session.get(
                            f"{server.url}/v1/namespaces/{BIG_NAMESPACE}/tables",
                            params={"pageToken": token, "pageSize": str(args.page_size)},
                        )
                        response.raise_for_status()
                        body = response.json()
                        seen += len(body["identifiers"])
                        token = body["next-page-token"]
                    assert seen == BIG_TABLES, seen

                return list_all

            listings = interleaved(
                {k: lister(s) for k, s in servers.items()}, args.listings, warmup=1
            )
            out["list_tables_paged"] = compare(listings, "listTables (10k, paged)")
            out["list_tables_paged"]["pages"] = -(-BIG_TABLES // args.page_size)
            C.log(f"   listTables: {out['list_tables_paged']['ratio_median_lakecore_over_sql']}x")

            tables: dict[str, Table] = {}
            for name, server in servers.items():
                client = RestCatalog(name, uri=server.url)
                client.create_namespace("commits")
                tables[name] = client.create_table("commits.events", SCHEMA)

            def appender(name: str) -> Any:
                def append(i: int) -> None:
                    tables[name].append(batch(i * args.rows, args.rows))

                return append

            commits = interleaved({k: appender(k) for k in servers}, args.commits)
            out["append_commit"] = compare(commits, "append commit")
            for name, table in tables.items():
                snapshots = len(table.refresh().metadata.snapshots)
                out["append_commit"][f"{name}_snapshots"] = snapshots
            C.log(f"   append: {out['append_commit']['ratio_median_lakecore_over_sql']}x")
        finally:
            for server in servers.values():
                server.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=C.parse_int_list, default=[1000, 1_000_000])
    parser.add_argument("--namespace-tables", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=400)
    parser.add_argument("--listings", type=int, default=15)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--build-threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--scratch", default=None, help="folder for the catalogs (default: temp)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1k tables, few samples")
    parser.add_argument(
        "--load", action="store_true", help="the server under load (bench/rest_load.py)"
    )
    rest_load.add_arguments(parser)
    args = parser.parse_args()
    if args.load:
        doc = rest_load.run_load(args)
        C.print_json(doc)
        rest_load.print_tables(doc)
        return
    if args.quick:
        args.tables, args.loads, args.listings, args.commits = [1000], 100, 5, 15
    doc: dict[str, Any] = {
        "benchmark": "bench_rest",
        "environment": C.environment(),
        "parameters": {k: v for k, v in vars(args).items() if k not in ("keep",)},
        "scales": {},
    }
    for n in args.tables:
        doc["scales"][str(n)] = run_scale(n, args)
    goals = [
        scale[key]["goal"]
        for scale in doc["scales"].values()
        for key in ("load_table", "list_tables_paged", "append_commit")
    ]
    doc["goals_met"] = all(g["met"] for g in goals)
    C.print_json(doc)
    rows = []
    for n, scale in doc["scales"].items():
        for key in ("load_table", "list_tables_paged", "append_commit"):
            rows.append(
                [
                    n,
                    key,
                    scale[key]["lakecore"]["median"],
                    scale[key]["sql"]["median"],
                    scale[key]["ratio_median_lakecore_over_sql"],
                    scale[key]["goal"]["met"],
                ]
            )
        rows.append(
            [
                n,
                "overhead (http - direct)",
                scale["server_overhead"]["http_load_table_median_ms"],
                scale["server_overhead"]["direct_load_table_ms"]["median"],
                scale["server_overhead"]["ratio_http_over_direct"],
                "-",
            ]
        )
    C.print_table(
        "bench_rest (ms, medians)", ["tables", "what", "lakecore", "sql", "ratio", "goal met"], rows
    )


if __name__ == "__main__":
    main()
