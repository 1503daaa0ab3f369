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
and ``p90_lakecore_over_sql``. Per storage also ``reference_read``: the read every lakecore
commit makes for the location registry (``lakecore.iceberg.references``: the new snapshot's
manifest list and the manifest it added), timed on the append table's last snapshots as each
commit read them, and its share of lakecore's median append. ``cpu_calibration.effective_cores`` (bench_jobs' calibration, 2.0
on an idle 2-core machine) is measured before each storage. Goal: lakecore's median append
latency within 1.5x of SqlCatalog's on each storage. moto runs inside this process, so its CPU
time is part of the S3 latencies of both catalogs.

Prints one JSON document on stdout and a table on stderr; ``--quick`` runs in under a minute.
"""

from __future__ import annotations

import argparse
import logging
import random
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

from lakecore.core import keys as K
from lakecore.core.defs import encode_def, namespace_def, table_def
from lakecore.core.locations import new_namespace_def_path, new_table_def_path, root_node_file_name
from lakecore.core.tree import bulk_build
from lakecore.core.versions import encode_root, write_hint
from lakecore.iceberg import LakecoreCatalog, normalize_location
from lakecore.iceberg.catalog import METADATA_LOCATION_PROPERTY
from lakecore.iceberg.references import ReferenceFinder
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
    out["reference_read"] = reference_read(lakehouse, min(args.commits, 50))
    append_median = out["workloads"]["append"]["latency_ms"]["lakecore"]["median"]
    out["reference_read"]["share_of_median_append"] = C.ratio(
        out["reference_read"]["latency_ms"]["median"], append_median
    )
    C.log(
        f"   reference read per commit: median {out['reference_read']['latency_ms']['median']:.2f} ms"
        f" ({out['reference_read']['share_of_median_append']} of lakecore's median append)"
    )
    return out


def reference_read(catalog: LakecoreCatalog, snapshots: int) -> dict[str, Any]:
    """The location registry's read in each commit, as the commits of the append workload made
    it: for each of the table's last ``snapshots`` snapshots, what a commit adding it over its
    parent reads (its manifest list and the manifest it added)."""
    table = catalog.load_table("bench_append.events")
    metadata = table.metadata
    samples = []
    for index in range(len(metadata.snapshots) - snapshots, len(metadata.snapshots)):
        base = metadata.model_copy(update={"snapshots": metadata.snapshots[:index]})
        new = metadata.model_copy(update={"snapshots": metadata.snapshots[: index + 1]})
        finder = ReferenceFinder(
            catalog.warehouse, [normalize_location(table.location())], normalize_location
        )
        t0 = time.perf_counter()
        found = finder.added_by_commit(table.io, base, new, table.metadata_location)
        samples.append(time.perf_counter() - t0)
        assert not found, found  # an append's files lie under its table's own folder
    return {"latency_ms": C.summarize(samples, 1000.0)}


# ---------------------------------------------------------------------------------------------
# Nested namespaces (issue 38): the same calls on a three-level layout and on a flat one.


NESTED_GOAL_RATIO = 1.5
NESTED_FANOUT = 10  # 10 x 10 x 10 leaf namespaces


def _nested_layout(leaves: int) -> tuple[list[str], list[str]]:
    """(every namespace, the namespaces that hold tables): three levels, ``leaves`` leaves."""
    per = max(1, round(leaves ** (1 / 3)))
    holders = [
        f"d{a:02d}.s{b:02d}.l{c:02d}" for a in range(per) for b in range(per) for c in range(per)
    ][:leaves]
    parents = sorted({h.rsplit(".", 1)[0] for h in holders} | {h.split(".", 1)[0] for h in holders})
    return sorted(parents + holders), holders


def _build_layout(
    uri: str, warehouse: str, namespaces: list[str], holders: list[str], tables_per: int
) -> tuple[Lakehouse, list[tuple[str, str]]]:
    """A lakehouse whose latest version holds every namespace and ``tables_per`` tables in each
    holder, bulk-built. Definition files are written for the namespaces and for a sample of
    tables (the ones the benchmark loads, all pointing at one real metadata file); the other
    keys are never read.

    First the layout's catalog makes one table: its first change builds the location registry
    (docs/format.md#location-registry) while the lakehouse is empty, and claims the warehouse,
    as on a lakehouse the catalog has managed from the start. Without it the first measured
    change would build the registry from every table's definition and metadata."""
    Lakehouse.create(uri)
    setup = LakecoreCatalog("setup", uri=uri, warehouse=warehouse)
    setup.create_namespace("m")
    metadata_location = setup.create_table("m.t", SCHEMA).metadata_location
    lh = setup.lakehouse.refresh()
    storage, rng = lh.storage, random.Random(11)
    items: list[tuple[str, str]] = []
    for ns in namespaces:
        path = new_namespace_def_path(ns)
        storage.write(path, encode_def(namespace_def(ns, {})))
        items.append((K.namespace_key(ns, lh.lakehouse_def), path))
    sample: list[tuple[str, str]] = []
    definition = encode_def(
        table_def("t", format_properties={METADATA_LOCATION_PROPERTY: metadata_location})
    )
    for ns in holders:
        chosen = rng.randrange(tables_per)
        for j in range(tables_per):
            table = f"t_{j:04d}"
            if j == chosen:
                path = new_table_def_path(ns, table)
                storage.write(path, definition)
                sample.append((ns, table))
            else:
                path = C.table_value(ns, table, rng)
            items.append((K.table_key(ns, table, lh.lakehouse_def), path))
    items.sort()
    root = bulk_build(lh.store, lh.shape, items)
    # The bulk version replaces the tree (m and m.t, default-located, leave no registry entry).
    base, version = lh.root_info, lh.version + 1
    storage.create_exclusive(
        root_node_file_name(version),
        encode_root(
            root,
            lh.lakehouse_def.order,
            lakehouse_def_path=base.lakehouse_def_path,
            previous_root=root_node_file_name(version - 1),
            created_at_millis=C.now_ms(),
        ),
    )
    write_hint(storage, version)
    lh.refresh()
    return lh, sample


def run_nested(args: argparse.Namespace) -> dict[str, Any]:
    """List a namespace's children, load a table and drop an empty namespace through
    LakecoreCatalog, on ``--nested-tables`` tables in 1,000 namespaces three levels deep and on
    the same tables in 1,000 flat namespaces, interleaved call by call."""
    leaves = 1000 if args.nested_tables >= 1000 else max(1, args.nested_tables // 10)
    tables_per = max(1, args.nested_tables // leaves)
    all_nested, nested_holders = _nested_layout(leaves)
    flat = [f"ns_{i:05d}" for i in range(leaves)]
    C.log(f"== nested namespaces: {leaves * tables_per:,} tables in {leaves:,} namespaces")
    out: dict[str, Any] = {
        "tables": leaves * tables_per,
        "namespaces_holding_tables": leaves,
        "nested_namespaces_total": len(all_nested),
        "calls": args.nested_calls,
        "cpu_calibration": C.cpu_calibration(),
    }
    with C.temp_dir("bench_iceberg_nested_", args.tmpdir, keep=args.keep) as directory:
        layouts: dict[str, tuple[LakecoreCatalog, list[tuple[str, str]], str, str]] = {}
        for layout, namespaces, holders in (
            ("nested", all_nested, nested_holders),
            ("flat", flat, flat),
        ):
            started = time.perf_counter()
            # One warehouse per lakehouse (each claims its own).
            warehouse = f"file://{directory}/wh-{layout}"
            lh, sample = _build_layout(
                f"{directory}/{layout}", warehouse, namespaces, holders, tables_per
            )
            out[f"{layout}_build_seconds"] = round(time.perf_counter() - started, 1)
            catalog = LakecoreCatalog(layout, uri=f"{directory}/{layout}", warehouse=warehouse)
            # The namespace whose children are listed: one holding tables, with siblings all
            # around it (a leaf of the nested layout, a namespace of the flat one): same answer.
            listed = holders[len(holders) // 2]
            # An empty namespace is created (unmeasured) and dropped (measured) beside it.
            parent = listed.rsplit(".", 1)[0] if "." in listed else ""
            layouts[layout] = (catalog, sample, listed, parent)
            C.log(f"   {layout}: built in {out[f'{layout}_build_seconds']} s, version {lh.version}")
        rng = random.Random(5)
        samples: dict[str, dict[str, list[float]]] = {
            op: {"nested": [], "flat": []}
            for op in ("list_children", "load_table", "drop_empty_namespace")
        }
        mid_level: list[float] = []
        for i in range(args.nested_calls):
            order = ("nested", "flat") if i % 2 == 0 else ("flat", "nested")
            for layout in order:
                catalog, sample, listed, parent = layouts[layout]
                ns, table = sample[rng.randrange(len(sample))]
                with C.stopwatch() as t:
                    assert catalog.list_namespaces(listed) == []
                samples["list_children"][layout].append(t[0])
                with C.stopwatch() as t:
                    catalog.load_table((*ns.split("."), table))
                samples["load_table"][layout].append(t[0])
                empty = f"{parent}.empty{i:04d}" if parent else f"empty{i:04d}"
                catalog.create_namespace(empty)
                with C.stopwatch() as t:
                    catalog.drop_namespace(empty)
                samples["drop_empty_namespace"][layout].append(t[0])
            nested_catalog = layouts["nested"][0]
            with C.stopwatch() as t:
                children = nested_catalog.list_namespaces(("d00",))
            mid_level.append(t[0])
            assert len(children) == min(NESTED_FANOUT, len(children)) and children
    ops: dict[str, Any] = {}
    for op, by_layout in samples.items():
        nested_s = C.summarize(by_layout["nested"], 1000)
        flat_s = C.summarize(by_layout["flat"], 1000)
        ops[op] = {
            "latency_ms": {"nested": nested_s, "flat": flat_s},
            "median_nested_over_flat": C.ratio(nested_s["median"], flat_s["median"]),
        }
    out["operations"] = ops
    out["list_children_of_a_top_level_namespace_ms"] = C.summarize(mid_level, 1000)
    return out


def nested_goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    goals = []
    for op, values in result["operations"].items():
        value = values["median_nested_over_flat"]
        goals.append(
            C.goal(
                f"nested_{op}",
                f"median nested/flat <= {NESTED_GOAL_RATIO}",
                value,
                value is not None and value <= NESTED_GOAL_RATIO,
            )
        )
    return goals


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
    parser.add_argument(
        "--nested-tables",
        type=int,
        default=None,
        help="tables of the nested-namespace comparison (default 1,000,000; --quick 20,000; 0: skip)",
    )
    parser.add_argument(
        "--nested-calls", type=int, default=30, help="calls per operation and layout (default 30)"
    )
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--quick", action="store_true", help="20 commits per workload, under a minute"
    )
    args = parser.parse_args(argv)
    if args.commits is None:
        args.commits = 20 if args.quick else 150
    if args.nested_tables is None:
        args.nested_tables = 20_000 if args.quick else 1_000_000
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
    if args.nested_tables > 0:
        doc["nested_namespaces"] = run_nested(args)
        doc["goals"].extend(nested_goals(doc["nested_namespaces"]))
    doc["total_seconds"] = round(time.perf_counter() - started, 1)
    C.print_json(doc)
    print_tables(doc)
    C.log(f"\ntotal {doc['total_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
