"""Benchmark of catalog commit latency: ``Lakehouse.transaction()`` on local disk and on S3.

Two workloads, each ``--commits`` commits (default 300) of one change through the catalog API:

* ``create_table``: ``with lh.transaction() as tx: tx.create_table("bench", name, columns=...)``
* ``update_table_properties``: ``tx.update_table("bench", name, properties={...})`` on a random
  table created before (reads the current definition, writes a new one).

Each runs on two storages: local disk (``file://``, every file fsynced) and S3 served by moto
(``moto.server.ThreadedMotoServer`` on 127.0.0.1, started here, dummy credentials in this
process's environment, a bucket made with boto3, Storage options
``{"client_kwargs": {"endpoint_url": ...}}``). moto runs in this process, so its CPU time
counts in the S3 latencies.

The lakehouse is first filled with ``--prepopulate`` tables (default 100k, committed as one
bulk-built version) and then warmed up (``--warmup``, as in bench_tree: one batched commit that
brings the write buffers to their steady state, so that the root holds a full buffer and the
measured commits pay their share of flushes).

**Baseline**, interleaved commit by commit on the same storage: the plain copy-on-write B-tree
of ``bench_tree.cow_put`` (no write buffers) over the same prepopulated tree, doing the same
single-key writes with the same I/O a catalog commit does around the tree: write the table
definition file, rewrite the path, create the root exclusively, write the hint. (The baseline
does not read the current definition for updates; the catalog API does.)

**Big transaction** (``--big-transaction N``, default 100k tables, 0 to skip): one transaction
creating N tables against the same version built the bulk way, each in a fresh child process
for its peak memory; see ``big_transaction.py``.

Prints one JSON document on stdout and a table on stderr; ``--quick`` runs in under a minute.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import _common as C
import big_transaction
from bench_tree import (
    CommitRecord,
    Lake,
    TreeRun,
    root_buffer_capacity,
    summarize_records,
    warmup_messages,
)

from lakecore.core import keys as K
from lakecore.core.commit import RootPlan
from lakecore.core.defs import encode_def, table_def
from lakecore.core.locations import LATEST_HINT_FILE_NAME, new_table_def_path, root_node_file_name
from lakecore.core.node import Node
from lakecore.core.tree import NodeCache, NodeStore, TreeShape, TreeWriter, bulk_build, get
from lakecore.core.versions import RootInfo, decode_root, encode_root
from lakecore.lakehouse import Lakehouse

NAMESPACE = "bench"
COLUMNS = [
    {"id": 1, "name": "id", "type": "INT8", "nullable": False},
    {"id": 2, "name": "event_time", "type": "TIMESTAMPTZ"},
    {"id": 3, "name": "user_id", "type": "INT8"},
    {"id": 4, "name": "payload", "type": "VARCHAR"},
    {"id": 5, "name": "amount", "type": "DECIMAL"},
]
S3_BUCKET = "lakecore-bench"
S3_REGION = "us-east-1"


# ---------------------------------------------------------------------------------------------
# moto


@contextmanager
def moto_s3() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 with the bench bucket; yields its endpoint URL."""
    import boto3
    from moto.server import ThreadedMotoServer

    saved = {
        name: os.environ.get(name)
        for name in (
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
            "AWS_EC2_METADATA_DISABLED",
            "AWS_PROFILE",
            "AWS_SESSION_TOKEN",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
        )
    }
    # Dummy credentials for the fake server, only in this process and only while it runs.
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "lakecore-bench",
            "AWS_SECRET_ACCESS_KEY": "lakecore-bench",
            "AWS_DEFAULT_REGION": S3_REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(name, None)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name=S3_REGION).create_bucket(
            Bucket=S3_BUCKET
        )
        yield endpoint
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# ---------------------------------------------------------------------------------------------
# Setting up a lakehouse


def populate(lh: Lakehouse, n: int, seed: int) -> tuple[list[str], Node, dict[str, Any]]:
    """Commit ``n`` tables (in namespaces of 1000, plus their namespace keys) as one bulk-built
    version. Their definition locations are never read, so no definition files are written."""
    t0 = time.perf_counter()
    keys, values = C.catalog(n, seed) if n else ([], [])
    rng = random.Random(seed)
    namespaces = sorted({C.split_table_key(k)[0] for k in keys})
    extra = [(C.namespace_key(ns), C.table_value(ns, "ns", rng)) for ns in namespaces]
    existing = list(lh.items())
    merged = sorted(existing + extra + list(zip(keys, values, strict=True)))
    built: list[Node] = []

    def plan(base: RootInfo) -> RootPlan:
        built.append(bulk_build(lh.store, lh.shape, merged))
        return RootPlan(built[-1], base.lakehouse_def_path)

    if n:
        lh.commit_plan(plan, lambda latest: None)
    root = built[-1] if built else lh.root
    return (
        keys,
        root,
        {"tables": n, "keys": len(merged), "seconds": round(time.perf_counter() - t0, 2)},
    )


def warm_up(lh: Lakehouse, keys: list[str], mode: str, seed: int) -> dict[str, Any]:
    """One batched commit of updates and inserts that brings the write buffers to their steady
    state (bench_tree's ``--warmup``)."""
    if not keys or mode == "none":
        return {"mode": mode, "messages": 0}
    key_bytes = round(sum(map(len, keys)) / len(keys))
    ops = C.OpStream(keys, 0.2, seed=seed)
    value_bytes = len(ops.next()[1])
    count = warmup_messages(lh.shape, lh.store, lh.root, mode, key_bytes, value_bytes)
    messages = [(k, v) for k, v, _ in ops.take(count)]
    t0 = time.perf_counter()

    def plan(base: RootInfo) -> RootPlan:
        writer = TreeWriter(lh.store, lh.shape, base.node)
        for key, value in messages:
            writer.put(key, value)
        return RootPlan(writer.finish(), base.lakehouse_def_path)

    lh.commit_plan(plan, lambda latest: None)
    return {
        "mode": mode,
        "messages": count,
        "root_buffer_capacity_messages": root_buffer_capacity(lh.shape, key_bytes, value_bytes),
        "root_buffer_messages_after": len(lh.root.buffer),
        "root_bytes_after": lh.root_info.size,
        "seconds": round(time.perf_counter() - t0, 2),
    }


# ---------------------------------------------------------------------------------------------
# The two committers: the catalog API and the baseline


class CatalogCommitter:
    """Commits through ``Lakehouse.transaction()``; counts the node files it writes."""

    def __init__(self, lh: Lakehouse) -> None:
        self.lh = lh
        self.records: list[CommitRecord] = []

    def commit(self, change: Callable[[Any], None]) -> CommitRecord:
        stats = self.lh.store.stats
        files0, bytes0, read0 = stats.files_written, stats.bytes_written, stats.files_read
        t0 = time.perf_counter()
        with self.lh.transaction() as tx:
            change(tx)
        seconds = time.perf_counter() - t0
        outcome = tx.outcome
        assert outcome is not None and outcome.conflicts == 0
        root_bytes = self.lh.root_info.size
        record = CommitRecord(
            files=stats.files_written - files0 + 1,
            bytes=stats.bytes_written - bytes0 + root_bytes,
            seconds=seconds,
            tree_s=0.0,
            encode_s=0.0,
            root_write_s=0.0,
            root_bytes=root_bytes,
            files_read=stats.files_read - read0,
            flushed=stats.files_written > files0,
        )
        self.records.append(record)
        return record


class BaselineCommitter:
    """The plain copy-on-write tree with a catalog commit's I/O around it: the definition
    file, the path and the root, then the hint."""

    def __init__(self, lh: Lakehouse, root: Node, cache_bytes: int) -> None:
        self.storage = lh.storage
        self.run = TreeRun(
            f"cow-{uuid.uuid4().hex[:8]}",
            "cow",
            Lake(lh.storage, lh.root_info.lakehouse_def_path, root),
            TreeShape.of(lh.lakehouse_def),
            cache_bytes,
        )
        self.records: list[CommitRecord] = []

    def commit(self, key: str, location: str, definition: bytes) -> CommitRecord:
        t0 = time.perf_counter()
        self.storage.write(location, definition)
        record = self.run.commit(key, location)
        self.storage.write(
            self.run.prefix + LATEST_HINT_FILE_NAME, str(self.run.version).encode("ascii")
        )
        record.seconds = time.perf_counter() - t0
        self.records.append(record)
        return record


# ---------------------------------------------------------------------------------------------
# One storage


def run_backend(
    name: str, uri: str, options: dict[str, Any] | None, args: argparse.Namespace
) -> dict[str, Any]:
    C.log(f"\n== {name}: {uri} ==")
    t0 = time.perf_counter()
    lh = Lakehouse.create(uri, "bench", storage_options=options)
    with lh.transaction() as tx:
        tx.create_namespace(NAMESPACE)
    keys, populated_root, populated = populate(lh, args.prepopulate, args.seed)
    C.log(f"  populated {populated['tables']} tables in {populated['seconds']} s")
    warm = warm_up(lh, keys, args.warmup, args.seed + 1)
    C.log(f"  warm-up: {warm['messages']} messages in {warm.get('seconds', 0)} s")
    catalog = CatalogCommitter(lh)
    baseline = BaselineCommitter(lh, populated_root, args.cache_bytes)
    rng = random.Random(args.seed + 2)
    created: list[str] = []
    out: dict[str, Any] = {
        "uri_scheme": uri.split("://", 1)[0],
        "populate": populated,
        "warmup": warm,
        "workloads": {},
    }

    def one(i: int, catalog_change: Callable[[Any], None], table: str, definition: bytes) -> None:
        key = K.table_key(NAMESPACE, table, lh.lakehouse_def)
        # Alternate which one goes first so that drift in machine load hits both alike.
        if i % 2:
            baseline.commit(key, new_table_def_path(NAMESPACE, table), definition)
        catalog.commit(catalog_change)
        if not i % 2:
            baseline.commit(key, new_table_def_path(NAMESPACE, table), definition)

    for workload in ("create_table", "update_table_properties"):
        catalog.records.clear()
        baseline.records.clear()
        w0 = time.perf_counter()
        for i in range(args.commits):
            if workload == "create_table":
                table = f"t_{i:05d}"
                created.append(table)
                definition = encode_def(
                    table_def(table, columns=COLUMNS, properties={"owner": "bench"})
                )

                def change(tx: Any, table: str = table) -> None:
                    tx.create_table(
                        NAMESPACE, table, columns=COLUMNS, properties={"owner": "bench"}
                    )
            else:
                table = created[rng.randrange(len(created))]
                props = {"owner": "bench", "bench.counter": str(i)}
                definition = encode_def(table_def(table, columns=COLUMNS, properties=props))

                def change(tx: Any, table: str = table, i: int = i) -> None:
                    tx.update_table(NAMESPACE, table, properties={"bench.counter": str(i)})

            one(i, change, table, definition)
        cat = summarize_records(catalog.records)
        base = summarize_records(baseline.records, "split_commits")
        for summary in (cat, base):
            summary.pop("phase_ms_median", None)
        out["workloads"][workload] = {
            "catalog": cat,
            "baseline_cow": base,
            "ratios": {
                "latency_median_catalog_over_baseline": C.ratio(
                    cat["latency_ms"]["median"], base["latency_ms"]["median"]
                ),
                "latency_p90_catalog_over_baseline": C.ratio(
                    cat["latency_ms"]["p90"], base["latency_ms"]["p90"]
                ),
                "latency_mean_catalog_over_baseline": C.ratio(
                    cat["latency_ms"]["mean"], base["latency_ms"]["mean"]
                ),
                "node_files_baseline_over_catalog": C.ratio(
                    base["files_per_commit"], cat["files_per_commit"]
                ),
                "node_bytes_catalog_over_baseline": C.ratio(
                    cat["bytes_per_commit"], base["bytes_per_commit"]
                ),
            },
            "seconds": round(time.perf_counter() - w0, 1),
        }
        C.log(
            f"  {workload}: catalog p50 {cat['latency_ms']['median']} ms, baseline p50 {base['latency_ms']['median']} ms"
        )

    # Check both ends: every created table is there, with the last properties.
    lh.refresh()
    missing = [t for t in created if not lh.table_exists(NAMESPACE, t)]
    if missing:
        raise SystemExit(f"{name}: tables missing after the run: {missing[:5]}")
    cow_store = NodeStore(lh.storage, lh.lakehouse_def.order, cache=NodeCache())
    for key, value in baseline.run.changes.items():
        if get(cow_store, baseline.run.root, key) != value:
            raise SystemExit(f"{name}: the baseline tree lost {key!r}")
    out["diagnosis"] = root_costs(lh)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def root_costs(lh: Lakehouse) -> dict[str, Any]:
    """What handling the latest root costs, apart from I/O: encode (every commit) and decode
    (``lakecore.core.commit`` decodes the root bytes it has just written, on every commit)."""
    info = lh.root_info
    order = lh.lakehouse_def.order
    enc, dec = [], []
    data = b""
    for _ in range(20):
        t0 = time.perf_counter()
        data = encode_root(
            info.node,
            order,
            lakehouse_def_path=info.lakehouse_def_path,
            previous_root=info.previous_root,
            created_at_millis=info.created_at_millis,
        )
        t1 = time.perf_counter()
        decode_root(data, info.version, "bench", order)
        t2 = time.perf_counter()
        enc.append(t1 - t0)
        dec.append(t2 - t1)
    return {
        "root_bytes": len(data),
        "root_buffer_messages": len(info.node.buffer),
        "encode_root_ms_median": round(sorted(enc)[len(enc) // 2] * 1e3, 3),
        "decode_root_ms_median": round(sorted(dec)[len(dec) // 2] * 1e3, 3),
        "root_file_name": root_node_file_name(info.version),
    }


def print_tables(doc: dict[str, Any]) -> None:
    rows = []
    for backend, result in doc["backends"].items():
        for workload, w in result["workloads"].items():
            for who, key in (("catalog", "catalog"), ("baseline", "baseline_cow")):
                r = w[key]
                rows.append(
                    [
                        backend,
                        workload,
                        who,
                        r["commits"],
                        r["latency_ms"]["median"],
                        r["latency_ms"]["p90"],
                        r["latency_ms"]["mean"],
                        r["files_per_commit"],
                        r["bytes_per_commit"] / 1e3,
                    ]
                )
            rows.append(
                [
                    backend,
                    workload,
                    "ratio",
                    "",
                    w["ratios"]["latency_median_catalog_over_baseline"],
                    w["ratios"]["latency_p90_catalog_over_baseline"],
                    w["ratios"]["latency_mean_catalog_over_baseline"],
                    w["ratios"]["node_files_baseline_over_catalog"],
                    w["ratios"]["node_bytes_catalog_over_baseline"],
                ]
            )
    C.print_table(
        "commit latency (ratio row: latency catalog/baseline, files baseline/catalog, bytes catalog/baseline)",
        [
            "storage",
            "workload",
            "who",
            "commits",
            "ms p50",
            "ms p90",
            "ms mean",
            "node files/c",
            "node KB/c",
        ],
        rows,
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--commits", type=int, default=None, help="commits per workload and storage (default 300)"
    )
    parser.add_argument(
        "--prepopulate",
        type=int,
        default=None,
        help="tables committed before measuring (default 100000)",
    )
    parser.add_argument("--warmup", choices=("deep", "root", "none"), default="deep")
    parser.add_argument("--storages", default="local,s3", help="comma-separated: local, s3")
    parser.add_argument("--cache-bytes", type=C.parse_size, default=C.parse_size("256M"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--tmpdir", default=None, help="where the local lakehouse goes (default: system temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the local scratch directory")
    parser.add_argument(
        "--big-transaction",
        type=int,
        default=None,
        help="tables created in one transaction, against the bulk baseline (default 100000; 0: skip)",
    )
    parser.add_argument("--big-rounds", type=int, default=None, help="default 2 (--quick: 1)")
    parser.add_argument("--quick", action="store_true", help="small counts, under a minute")
    args = parser.parse_args(argv)
    if args.quick:
        args.commits = args.commits or 40
        args.prepopulate = 2000 if args.prepopulate is None else args.prepopulate
        args.big_transaction = 1000 if args.big_transaction is None else args.big_transaction
        args.big_rounds = args.big_rounds or 1
    args.commits = args.commits or 300
    args.prepopulate = 100_000 if args.prepopulate is None else args.prepopulate
    args.big_transaction = 100_000 if args.big_transaction is None else args.big_transaction
    args.big_rounds = args.big_rounds or 2
    args.storage_list = [s.strip() for s in args.storages.split(",") if s.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    doc: dict[str, Any] = {
        "benchmark": "bench_commit",
        "config": {
            "commits_per_workload": args.commits,
            "prepopulate_tables": args.prepopulate,
            "warmup": args.warmup,
            "storages": args.storage_list,
            "seed": args.seed,
            "quick": args.quick,
            "big_transaction_tables": args.big_transaction,
            "big_transaction_rounds": args.big_rounds,
        },
        "environment": C.environment(),
        "notes": [
            "latency: the whole `with lh.transaction()` block (reads, definition file, tree, root, hint) vs the "
            "baseline's definition file + copy-on-write path + root + hint; median/p90 of individually timed commits",
            "node files/bytes: tree node files including the root, means per commit (definition file and hint excluded)",
            "S3 is moto's server inside this process: its request handling competes for the same CPU",
            "no stated goal for this benchmark: it reports the comparison",
        ],
        "backends": {},
        "goals": [],
    }
    for storage in args.storage_list:
        if storage == "local":
            with C.temp_dir("bench_commit_", args.tmpdir, keep=args.keep) as directory:
                doc["backends"]["local"] = run_backend("local", "file://" + directory, None, args)
        elif storage == "s3":
            with moto_s3() as endpoint:
                options = {"client_kwargs": {"endpoint_url": endpoint}}
                doc["backends"]["s3_moto"] = run_backend(
                    "s3 (moto)", f"s3://{S3_BUCKET}/{uuid.uuid4()}/", options, args
                )
        else:
            raise SystemExit(f"unknown storage {storage!r}; use local and/or s3")
    if args.big_transaction:
        doc["big_transaction"] = big_transaction.measure(
            args.big_transaction, args.big_rounds, args.tmpdir
        )
    doc["total_seconds"] = round(time.perf_counter() - started, 1)
    C.print_json(doc)
    print_tables(doc)
    if args.big_transaction:
        big_transaction.print_table(doc["big_transaction"])
    C.log(f"\ntotal {doc['total_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
