"""Benchmark of the Spark maintenance jobs (validate, flush, gc) on a big lakehouse, on local
disk and on S3 with a latency.

Setup (timed, not part of the job numbers): a lakehouse on local disk made with
``Lakehouse.create`` (default definition: order 128, 1 MiB node files), then ``--tables``
tables (default 1,000,000 when only local storage is measured, 100,000 when ``s3-latency`` is;
``--quick`` 20,000) in namespaces of 1000:

1. every namespace and table **definition file** (``.binpb``) is written, a namespace per task in
   ``--write-threads`` threads, each file with ``Storage.write(durable=False)`` and one
   ``Storage.sync()`` at the end (what ``NodeStore.write_many`` does for node files);
2. the tree of every namespace and table key is **bulk-built** (``lakecore.core.tree.bulk_build``)
   and committed as **version 1** (``encode_root`` + ``storage.create_exclusive`` + the hint);
3. ``--commits`` single-table commits through the catalog API (``lh.transaction()``: half
   ``create_table`` of a new table, half ``update_table`` of a random table's properties), so
   the root buffer is not empty and there are that many more versions;
4. planted **orphans**: ``--old-orphans`` lakecore-named files no version reaches (node files,
   table and namespace definitions, a temp file) with a modification time 10 days ago, and
   ``--young-orphans`` fresh ones that gc must leave alone.

**Storages** (``--storage``, comma-separated; default ``local``):

* ``local``: that lakehouse itself, ``file://``.
* ``s3-latency``: the same lakehouse, file for file, in moto's S3 server, which the jobs reach
  through ``bench/latency_proxy.py``: every request's first byte ``--latency-ms`` (20) after
  the request arrived, bodies at ``--bandwidth-mbps`` (100 MB/s) per connection. Building a
  lakehouse through a 20 ms proxy would take hours at 1M tables, so it is built on local disk
  as above and then every file is written straight into moto's backend, in this process, with
  no HTTP (about 20k objects/s), and the old orphans' ``LastModified`` is set 10 days back. moto
  and the proxy both run in the parent process, moto with ``latency_proxy.indexed_listing``
  (a ListObjectsV2 page costs its own size, not the bucket's) and ``cached_backend_lookup``.
  The jobs get ``--storage-option endpoint_url=<proxy> key=... secret=... region=us-east-1``
  (dummy credentials, also in the children's environment). moto holds about 4 KB of memory per
  object, so 1M tables need about 4 GB in the parent, and ``validate_deep`` is a GET per table.

Jobs, each run in-process through its ``main(argv, spark=...)`` with ``--report``:
``validate`` (latest version, great-expectations suite on), ``validate_noexp``
(``--no-expectations``), ``validate_deep`` (``--deep --no-expectations``: reads every
definition file), ``gc_dry`` (``--dry-run --older-than 1d``), ``gc`` (``--older-than 1d``: deletes
exactly the old planted orphans) and ``flush`` (``--mode full``), in that order.

Configurations: one child process per Spark master (``--masters``, default ``local[1]`` and
``local[2]``; ``--cluster`` adds ``cluster``, a standalone master with two workers of one core
and 1 GiB on 127.0.0.1, started from this venv's pyspark with ``tests/spark_cluster.py``, its
executors importing this checkout through ``spark.executorEnv.PYTHONPATH``), each with **one**
SparkSession (one JVM) reused for all its jobs and storages, with ``conf/spark-defaults.conf``
applied (as ``spark-submit.sh`` does) except ``spark.master`` and with the UI off. The children
stay up for the whole run and the parent runs **rounds**: in each round, for each storage,
every configuration runs the whole job list (the order of storages and of configurations
alternates between rounds), then the parent **restores** that storage's lakehouse to its state
after setup (deletes every file the jobs wrote, i.e. flush's nodes and root, puts back the
orphans gc deleted, rewrites the hint; on S3 in moto's backend directly), so every round of
every configuration starts from the same lakehouse. On ``s3-latency`` each job is its own
command to the child, so that the proxy's counters, reset before it, are that job's requests
(``s3_requests``: by kind, ``list`` = ListObjectsV2), and the parent's CPU during it is what
moto and the proxy spent (``s3_server_cpu_seconds``).

Each child imports great_expectations once before its first round (``sessions`` reports how
long that took: a fresh ``spark-submit`` of validate pays it on top of the numbers here, as it
pays the JVM start, ``session_start_seconds``). Before each configuration's round the parent
measures how many cores two busy processes get right now (``cpu_calibration``: 2.0 on an idle
2-core machine), since local[2] can only beat local[1] by that much.

Per job: wall time around ``main`` and the report's ``durations_seconds`` (per stage); CPU
seconds of the driver's Python and of the JVM plus the Python workers (from ``/proc``; a
cluster's executors are not counted); memory: the driver Python's peak RSS **for that job**
(``VmHWM`` after resetting it with ``/proc/self/clear_refs``; ``ru_maxrss`` is reported too, but
it never goes down and it survives fork+exec, so a child started by a 1 GiB parent begins at
1 GiB), the JVM's peak RSS (same reset; a JVM keeps the heap it grew, so its number ratchets up
from job to job), and the Python workers' peak RSS (summed, sampled every 0.25 s, plus the sum
of their ``VmHWM``).

**gc baseline** on ``local``, in the parent, after every configuration's round (same lakehouse
state as gc saw): ``find <root> -type f``, sort, and a linear diff of the sorted listing against
the sorted reachable set (``listing_diff``), where the reachable set (``reach``) is computed in
one process with ``lakecore.maintenance.tree_files``: ``reachable_from_root`` of the latest
version (the whole tree) and, for every other retained root, its own values plus
``reachable_from_subtree`` of each child not already reached (versions share almost every
subtree: a node file is immutable, so a known node's subtree is known), plus the root files,
the lakehouse definitions and the hint. Both parts are timed separately and together.

**Listing limit** on ``s3-latency``, after every configuration's round and restore, in that
configuration's child process (not the one serving S3): every object of the lakehouse listed
once through the proxy, three ways: ``hash_dirs``, the top level and the 4,096 hash directories
with boto3 and cores x ``gc_list_threads_per_task`` requests in flight (the concurrency of gc's
listing stage on that configuration: 8 on local[1], 16 on local[2] and on the cluster);
``flat_paged``, one paged ListObjectsV2 of the whole root (1000 keys a page, one page after the
other); ``prefixes_paged``, the 16, 256 or 4,096 directories that give each request in flight
one of its own (``listing.listing_levels``), each paged, same threads; ``prefixes_lakecore``,
those directories and threads through lakecore's own ``list_directories`` (s3fs), as gc lists.
Each with its seconds, requests, and ``latency_bound_seconds`` (requests / threads x latency:
what it would take if the CPU were free). The listing limit the gc goal compares with is the
fastest of ``hash_dirs``, ``flat_paged`` and ``prefixes_paged``.

**Goals** (``goals``, all on ``s3-latency``, none asserted; each names its ratio under
``ratios``): local[2] at least 1.7x faster than local[1] for validate, gc and flush
(``ratios.s3-latency.wall_local1_over_local2``); the cluster no slower than local[2]
(``wall_cluster_over_local2``, with ``--cluster``); gc at most 2x the listing limit
(``gc_over_listing_limit``, per configuration).

Prints one JSON document on stdout and tables on stderr. Nothing asserts on timings; the JSON's
``checks`` say whether the jobs did what they must (exit codes, gc deleted exactly the old
orphans, flush emptied the root buffer, the restores found nothing unexpected, the proxy
forwarded every request, every listing found every object).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import _common as C
from latency_proxy import DEFAULT_BANDWIDTH_MBPS, DEFAULT_LATENCY_MS, MOTO_ENV, LatencyProxy, MotoS3

from lakecore.core import keys as K
from lakecore.core.defs import encode_def, namespace_def, table_def
from lakecore.core.locations import (
    LATEST_HINT_FILE_NAME,
    TEMP_FILE_PREFIX,
    hash_directories,
    hash_directory_prefixes,
    is_root_node_file_name,
    new_node_file_path,
    optimize_path,
    root_node_file_name,
)
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeCache, NodeStore, bulk_build
from lakecore.core.versions import encode_root, list_root_versions, read_root, write_hint
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.listing import list_directories, listing_levels
from lakecore.maintenance.settings import MaintenanceSettings
from lakecore.maintenance.tree_files import Reachable, reachable_from_root, reachable_from_subtree
from tests.spark_cluster import WORKER_CORES as CLUSTER_WORKER_CORES
from tests.spark_cluster import WORKERS as CLUSTER_WORKERS

REPO = Path(__file__).resolve().parent.parent
COLUMNS = [
    {"id": 1, "name": "id", "type": "INT8", "nullable": False},
    {"id": 2, "name": "event_time", "type": "TIMESTAMPTZ"},
    {"id": 3, "name": "user_id", "type": "INT8"},
    {"id": 4, "name": "payload", "type": "VARCHAR"},
    {"id": 5, "name": "amount", "type": "DECIMAL"},
]
OLD_ORPHAN_AGE_SECONDS = 10 * 86400
GC_OLDER_THAN = "1d"
JOBS: dict[str, tuple[str, list[str]]] = {
    "validate": ("validate", []),
    "validate_noexp": ("validate", ["--no-expectations"]),
    "validate_deep": ("validate", ["--deep", "--no-expectations"]),
    "gc_dry": ("gc", ["--dry-run", "--older-than", GC_OLDER_THAN]),
    "gc": ("gc", ["--older-than", GC_OLDER_THAN]),
    "flush": ("flush", ["--mode", "full"]),
}
DEFAULT_JOBS = list(JOBS)
QUICK_JOBS = [j for j in JOBS if j != "validate_deep"]
SAMPLE_INTERVAL_S = 0.25
CLK_TCK = os.sysconf("SC_CLK_TCK")
STORAGES = ("local", "s3-latency")
S3_BUCKET = "lakecore-bench"
S3_PREFIX = "lake/"
#: The listing-limit measurements, in the order they run (see ``listing_limit``).
LISTING_KINDS = ("hash_dirs", "flat_paged", "prefixes_paged", "prefixes_lakecore")
#: The ways to list everything that bound gc: the listing limit is the fastest of them.
LIMIT_KINDS = ("hash_dirs", "flat_paged", "prefixes_paged")
CLUSTER_LABEL = "cluster"
#: Goals on S3 with latency: local[2] at least this much faster than local[1] for these jobs ...
SCALING_GOAL = 1.7
SCALING_GOAL_JOBS = ("validate", "gc", "flush")
#: ... the cluster no slower than local[2], and gc within this factor of the listing limit.
GC_OVER_LISTING_GOAL = 2.0


# =============================================================================================
# Setup


@dataclass
class Planted:
    path: str
    data: bytes
    mtime: float  # seconds since the epoch
    old: bool


@dataclass
class Lake:
    root_dir: str
    uri: str
    latest: int
    files: set[str]  # every file (relative path) after setup: the state every round starts from
    orphans: list[Planted]
    info: dict[str, Any] = field(default_factory=dict)


def _walk_files(root_dir: str) -> Iterator[str]:
    """Every regular file under ``root_dir``, as a path relative to it."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root_dir, rel) if rel else root_dir) as entries:
            for entry in entries:
                path = f"{rel}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path + "/")
                elif entry.is_file(follow_symlinks=False):
                    yield path


def _namespace_location(ns: str, rng: random.Random) -> str:
    return optimize_path(f"namespace-{ns}-{C.random_uuid(rng)}.binpb")


def _write_namespace_defs(
    storage: Storage, ns: str, ns_location: str, tables: list[tuple[str, str]]
) -> int:
    """One namespace's definition files (not durable yet: the caller syncs once)."""
    storage.write(ns_location, encode_def(namespace_def(ns, {"owner": "bench"})), durable=False)
    for table, location in tables:
        storage.write(
            location,
            encode_def(table_def(table, columns=COLUMNS, properties={"owner": "bench"})),
            durable=False,
        )
    return len(tables) + 1


def build_lakehouse(root_dir: str, args: argparse.Namespace) -> Lake:
    t_setup = time.perf_counter()
    rng = random.Random(args.seed)
    lh = Lakehouse.create(root_dir, "bench-jobs")
    storage = lh.storage
    info: dict[str, Any] = {
        "tables": args.tables,
        "order": lh.lakehouse_def.order,
        "node_file_max_size_bytes": lh.lakehouse_def.node_file_max_size_bytes,
    }
    sample_key = K.table_key(C.namespace_name(0), C.table_name(0), lh.lakehouse_def)
    if sample_key != C.table_key(C.namespace_name(0), C.table_name(0)):
        raise SystemExit("bench keys do not match lakecore.core.keys for the default definition")

    # -- keys, values and definition files ------------------------------------------------
    t0 = time.perf_counter()
    table_keys, table_values = C.catalog(args.tables, args.seed)
    by_ns: dict[str, list[tuple[str, str]]] = {}
    for key, value in zip(table_keys, table_values, strict=True):
        ns, table = C.split_table_key(key)
        by_ns.setdefault(ns, []).append((table, value))
    ns_locations = {ns: _namespace_location(ns, rng) for ns in sorted(by_ns)}
    items = [(C.namespace_key(ns), loc) for ns, loc in ns_locations.items()]
    items += zip(table_keys, table_values, strict=True)
    items.sort()
    info["namespaces"] = len(ns_locations)
    info["keys"] = len(items)
    info["generate_keys_seconds"] = round(time.perf_counter() - t0, 2)
    C.log(
        f"setup: {len(items):,} keys in {len(ns_locations):,} namespaces; writing definition files "
        f"({args.write_threads} threads)"
    )
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=args.write_threads) as pool:
        futures = [
            pool.submit(_write_namespace_defs, storage, ns, loc, by_ns[ns])
            for ns, loc in ns_locations.items()
        ]
        written = sum(f.result() for f in futures)
    t_sync = time.perf_counter()
    storage.sync()
    defs_s = time.perf_counter() - t0
    info["definition_files_written"] = written
    info["definition_files_all_written"] = written == len(items)
    info["definition_write_seconds"] = round(defs_s, 2)
    info["definition_sync_seconds"] = round(time.perf_counter() - t_sync, 2)
    info["definition_files_per_second"] = round(written / defs_s)
    C.log(f"setup: {written:,} definition files in {defs_s:.1f}s ({written / defs_s:,.0f}/s)")
    del by_ns, table_values

    # -- version 1: the bulk-built tree ---------------------------------------------------
    t0 = time.perf_counter()
    root = bulk_build(lh.store, lh.shape, items)
    info["bulk_build_seconds"] = round(time.perf_counter() - t0, 2)
    info["bulk_build_node_files"] = lh.store.stats.files_written
    info["bulk_build_node_bytes"] = lh.store.stats.bytes_written
    t0 = time.perf_counter()
    base = lh.root_info
    data = encode_root(
        root,
        lh.lakehouse_def.order,
        lakehouse_def_path=base.lakehouse_def_path,
        previous_root=root_node_file_name(base.version),
        created_at_millis=C.now_ms(),
    )
    storage.create_exclusive(
        root_node_file_name(base.version + 1), data
    )  # AlreadyExistsError if taken
    write_hint(storage, base.version + 1)
    lh.refresh()
    info["commit_v1_seconds"] = round(time.perf_counter() - t0, 3)
    info["v1_root_bytes"] = len(data)
    C.log(
        f"setup: bulk build {info['bulk_build_node_files']:,} node files in {info['bulk_build_seconds']}s; "
        f"version {lh.version} committed"
    )
    del items

    # -- single-table commits through the catalog API -------------------------------------
    t0 = time.perf_counter()
    latencies: list[float] = []
    namespaces = sorted(ns_locations)
    for i in range(args.commits):
        start = time.perf_counter()
        with lh.transaction() as tx:
            if i % 2 == 0:
                tx.create_table(
                    rng.choice(namespaces),
                    f"new_{i:05d}",
                    columns=COLUMNS,
                    properties={"owner": "bench"},
                )
            else:
                key = table_keys[rng.randrange(len(table_keys))]
                ns, table = C.split_table_key(key)
                tx.update_table(ns, table, properties={"touched": str(i)})
        latencies.append(time.perf_counter() - start)
    info["catalog_commits"] = args.commits
    info["catalog_commits_seconds"] = round(time.perf_counter() - t0, 2)
    info["catalog_commit_ms"] = C.summarize(latencies, 1e3)
    info["latest_version"] = lh.version
    info["root_buffer_messages"] = len(lh.root.buffer)
    info["root_children"] = len(lh.root.children)
    C.log(
        f"setup: {args.commits} catalog commits in {info['catalog_commits_seconds']}s; latest version {lh.version}, "
        f"root buffer {len(lh.root.buffer)} messages"
    )
    del table_keys

    # -- planted orphans ------------------------------------------------------------------
    orphans: list[Planted] = []
    now = time.time()
    for i in range(args.old_orphans + args.young_orphans):
        old = i < args.old_orphans
        kind = i % 4
        if kind == 0:
            path, payload = new_node_file_path(), os.urandom(4096)
        elif kind == 1:
            name = f"orphan_{i}"
            path = optimize_path(f"table-{name}-{namespaces[0]}-{uuid.uuid4()}.binpb")
            payload = encode_def(table_def(name, columns=COLUMNS))
        elif kind == 2:
            path = optimize_path(f"namespace-orphan_ns_{i}-{uuid.uuid4()}.binpb")
            payload = encode_def(namespace_def(f"orphan_ns_{i}"))
        else:
            directory = new_node_file_path().rsplit("/", 1)[0]
            path, payload = f"{directory}/{TEMP_FILE_PREFIX}{uuid.uuid4()}", os.urandom(100)
        orphans.append(Planted(path, payload, now - OLD_ORPHAN_AGE_SECONDS if old else now, old))
    for orphan in orphans:
        _plant(root_dir, orphan)
    info["old_orphans"] = args.old_orphans
    info["young_orphans"] = args.young_orphans

    t0 = time.perf_counter()
    files = set(_walk_files(root_dir))
    info["snapshot_walk_seconds"] = round(time.perf_counter() - t0, 2)
    info["files_total"] = len(files)
    info["bytes_total"] = sum(os.path.getsize(os.path.join(root_dir, p)) for p in files)
    info["setup_seconds"] = round(time.perf_counter() - t_setup, 2)
    C.log(
        f"setup: done in {info['setup_seconds']}s: {len(files):,} files, {info['bytes_total'] / C.MiB:,.0f} MiB"
    )
    return Lake(root_dir, storage.root_uri, lh.version, files, orphans, info)


def _plant(root_dir: str, orphan: Planted) -> None:
    target = os.path.join(root_dir, orphan.path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
        f.write(orphan.data)
    os.utime(target, (orphan.mtime, orphan.mtime))


def restore(lake: Lake) -> dict[str, Any]:
    """Bring the lakehouse back to its state after setup: delete what the jobs wrote, put back
    the planted orphans gc deleted, rewrite the hint. Anything else missing is reported."""
    t0 = time.perf_counter()
    now = set(_walk_files(lake.root_dir))
    extra = sorted(now - lake.files)
    missing = lake.files - now
    for path in extra:
        os.unlink(os.path.join(lake.root_dir, path))
    planted = {o.path: o for o in lake.orphans}
    replanted = 0
    for path in sorted(missing):
        if path in planted:
            _plant(lake.root_dir, planted[path])
            replanted += 1
    unexpected = sorted(p for p in missing if p not in planted)
    write_hint(Storage(lake.uri), lake.latest)
    return {
        "deleted_new_files": len(extra),
        "new_root_files": sum(1 for p in extra if is_root_node_file_name(p)),
        "replanted_orphans": replanted,
        "replanted_young": sum(1 for p in missing if p in planted and not planted[p].old),
        "unexpected_missing": len(unexpected),
        "unexpected_missing_sample": unexpected[:10],
        "seconds": round(time.perf_counter() - t0, 2),
    }


# =============================================================================================
# The gc baseline: find + sorted diff against a single-process reachable set


def reachable_set(uri: str) -> tuple[set[str], dict[str, Any]]:
    """Every file a retained version reaches, in one process (cold NodeCache)."""
    storage = Storage(uri)
    versions = list_root_versions(storage)
    latest = read_root(storage, versions[-1])
    order_probe = Lakehouse.open(uri)
    store = NodeStore(storage, order_probe.lakehouse_def.order, cache=NodeCache())
    t0 = time.perf_counter()
    reach: Reachable = reachable_from_root(store, latest.node)
    full_walk_s = time.perf_counter() - t0
    live: set[str] = set(reach.files)
    live.add(LATEST_HINT_FILE_NAME)
    subtrees = 0
    for version in versions:
        info = latest if version == latest.version else read_root(storage, version)
        live.add(root_node_file_name(version))
        live.add(info.lakehouse_def_path)
        if version == latest.version:
            continue
        node = info.node
        live.update(node.values)
        live.update(v for v in node.buffer.values() if v is not None)
        for child in node.children:
            if child not in live:
                subtrees += 1
                live |= reachable_from_subtree(store, child, 2).files
    return live, {
        "versions": len(versions),
        "latest_full_walk_seconds": round(full_walk_s, 3),
        "older_subtrees_walked": subtrees,
        "nodes_read": store.stats.as_dict(),
    }


def sorted_diff(listed: list[str], live: list[str]) -> list[str]:
    """Paths of the sorted ``listed`` missing from the sorted ``live`` (a linear merge)."""
    out: list[str] = []
    j, n = 0, len(live)
    for path in listed:
        while j < n and live[j] < path:
            j += 1
        if j < n and live[j] == path:
            j += 1
        else:
            out.append(path)
    return out


def gc_baseline(lake: Lake) -> dict[str, Any]:
    t0 = time.perf_counter()
    live, reach_info = reachable_set(lake.uri)
    live_sorted = sorted(live)
    reach_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = subprocess.run(
        ["find", lake.root_dir, "-type", "f"], check=True, capture_output=True
    ).stdout
    prefix = len(lake.root_dir.rstrip("/")) + 1
    listed = sorted(line[prefix:] for line in out.decode().splitlines())
    find_s = time.perf_counter() - t0
    orphans = sorted_diff(listed, live_sorted)
    listing_s = time.perf_counter() - t0
    planted = {o.path for o in lake.orphans}
    return {
        "reach_seconds": round(reach_s, 3),
        "find_and_sort_seconds": round(find_s, 3),
        "listing_diff_seconds": round(listing_s, 3),
        "total_seconds": round(reach_s + listing_s, 3),
        "files_listed": len(listed),
        "reachable": len(live),
        "orphans": len(orphans),
        "orphans_match_planted": set(orphans) == planted,
        **reach_info,
    }


# =============================================================================================
# The same lakehouse on S3: moto's server behind the latency proxy (both in this process)


@dataclass
class S3Lake:
    """The lakehouse copied into moto, and the proxy the jobs reach it through."""

    moto: MotoS3
    proxy: LatencyProxy
    uri: str
    info: dict[str, Any] = field(default_factory=dict)

    def storage_options(self) -> dict[str, Any]:
        """Through the proxy. Credentials and region travel in the options (a cluster's
        executors do not inherit this process's environment)."""
        return {
            "endpoint_url": self.proxy.endpoint,
            "key": MOTO_ENV["AWS_ACCESS_KEY_ID"],
            "secret": MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
            "region": MOTO_ENV["AWS_DEFAULT_REGION"],
        }

    def job_args(self) -> list[str]:
        out = ["--lakehouse", self.uri]
        for key, value in self.storage_options().items():
            out += ["--storage-option", f"{key}={value}"]
        return out


def start_s3(lake: Lake, args: argparse.Namespace, stack: contextlib.ExitStack) -> S3Lake:
    """moto (indexed listing) with every file of the freshly built local lakehouse written
    straight into its backend, the old orphans backdated, and the proxy in front of it."""
    moto = stack.enter_context(MotoS3())
    moto.create_bucket(S3_BUCKET)
    t0 = time.perf_counter()

    def items() -> Iterator[tuple[str, bytes]]:
        for rel in sorted(lake.files):
            with open(os.path.join(lake.root_dir, rel), "rb") as f:
                yield S3_PREFIX + rel, f.read()

    loaded = moto.put_objects(S3_BUCKET, items())
    for orphan in lake.orphans:
        if orphan.old:
            moto.set_last_modified(S3_BUCKET, S3_PREFIX + orphan.path, orphan.mtime)
    load_s = time.perf_counter() - t0
    proxy = stack.enter_context(
        LatencyProxy(moto.endpoint, latency_ms=args.latency_ms, bandwidth_mbps=args.bandwidth_mbps)
    )
    info = {
        "uri": f"s3://{S3_BUCKET}/{S3_PREFIX}",
        "objects_loaded": loaded,
        "load_seconds": round(load_s, 2),
        "objects_per_second": round(loaded / load_s) if load_s else None,
        "parent_rss_mib_after_load": round(status_kib("self", "VmRSS") / 1024, 1),
        "latency_ms": args.latency_ms,
        "bandwidth_mbps_per_connection": args.bandwidth_mbps,
    }
    C.log(
        f"s3: {loaded:,} objects loaded into moto in {load_s:.1f}s; proxy {proxy.endpoint} -> {moto.endpoint} "
        f"({args.latency_ms:g} ms per request, {args.bandwidth_mbps:g} MB/s per connection)"
    )
    return S3Lake(moto, proxy, info["uri"], info)


def restore_s3(lake: Lake, s3: S3Lake) -> dict[str, Any]:
    """``restore`` for the copy in moto, straight in moto's backend (no request goes through the
    proxy): delete what the jobs wrote, put back (and backdate) the orphans gc deleted, rewrite
    the hint."""
    t0 = time.perf_counter()
    now = {k[len(S3_PREFIX) :] for k in s3.moto.keys(S3_BUCKET, S3_PREFIX)}
    extra = sorted(now - lake.files)
    missing = lake.files - now
    s3.moto.delete_objects(S3_BUCKET, [S3_PREFIX + p for p in extra])
    planted = {o.path: o for o in lake.orphans}
    replant = [planted[p] for p in sorted(missing) if p in planted]
    s3.moto.put_objects(S3_BUCKET, [(S3_PREFIX + o.path, o.data) for o in replant])
    for orphan in replant:
        if orphan.old:
            s3.moto.set_last_modified(S3_BUCKET, S3_PREFIX + orphan.path, orphan.mtime)
    unexpected = sorted(p for p in missing if p not in planted)
    s3.moto.put_objects(
        S3_BUCKET, [(S3_PREFIX + LATEST_HINT_FILE_NAME, str(lake.latest).encode("ascii"))]
    )
    return {
        "deleted_new_files": len(extra),
        "new_root_files": sum(1 for p in extra if is_root_node_file_name(p)),
        "replanted_orphans": len(replant),
        "replanted_young": sum(1 for o in replant if not o.old),
        "unexpected_missing": len(unexpected),
        "unexpected_missing_sample": unexpected[:10],
        "seconds": round(time.perf_counter() - t0, 2),
    }


def listing_limit(
    kind: str, threads: int, endpoint: str, uri: str, options: dict[str, Any]
) -> dict[str, Any]:
    """Runs in a child (a process of its own, not the one serving S3): list every object of
    the lakehouse once. ``hash_dirs``: the 4,096 hash directories with ``threads`` boto3 requests
    in flight (plus the top level); ``flat_paged``: one paged ListObjectsV2 of the whole root,
    page after page; ``prefixes_paged``: the 16, 256 or 4,096 directories that give each of the
    ``threads`` requests in flight one of its own (``listing.listing_levels``), each paged, with
    boto3; ``prefixes_lakecore``: the same directories with lakecore's own ``list_directories``
    (one s3fs client per process) and the same threads, as gc lists them. The boto3 client
    parses timestamps as lakecore's does (``parse_s3_timestamp``): with botocore's own parser,
    dateutil's, a page of 1,000 keys costs the client about 7 times the CPU, and the limit would
    measure that parser rather than the listing."""
    import boto3
    import botocore.session
    from botocore.config import Config

    from lakecore.core.storage import parse_s3_timestamp

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=parse_s3_timestamp
    )
    client = boto3.Session(botocore_session=session).client(
        "s3",
        endpoint_url=endpoint,
        region_name=MOTO_ENV["AWS_DEFAULT_REGION"],
        config=Config(max_pool_connections=max(10, threads)),
    )

    def count(list_prefix: str, delimiter: str | None = None) -> int:
        n, token = 0, None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": list_prefix}
            if delimiter:
                kwargs["Delimiter"] = delimiter
            if token:
                kwargs["ContinuationToken"] = token
            page = client.list_objects_v2(**kwargs)
            n += len(page.get("Contents", []))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return n

    prefixes = hash_directory_prefixes(listing_levels(threads))
    t0 = time.perf_counter()
    if kind in ("hash_dirs", "prefixes_paged"):
        directories = hash_directories() if kind == "hash_dirs" else prefixes
        with cf.ThreadPoolExecutor(max_workers=threads) as pool:
            objects = count(prefix, "/") + sum(
                pool.map(lambda d: count(f"{prefix}{d}/"), directories)
            )
    elif kind == "flat_paged":
        objects = count(prefix)
    elif kind == "prefixes_lakecore":
        storage = Storage(uri, options)
        objects = len(storage.list_top_level()) + sum(
            1 for _ in list_directories(storage, prefixes, threads)
        )
    else:
        raise ValueError(f"unknown listing {kind}")
    return {
        "seconds": round(time.perf_counter() - t0, 3),
        "objects": objects,
        "threads": 1 if kind == "flat_paged" else threads,
    }


def config_cores(label: str) -> int:
    """Cores the configuration's executors have: tasks that run at once."""
    if label == CLUSTER_LABEL:
        return CLUSTER_WORKERS * CLUSTER_WORKER_CORES
    inside = label.removeprefix("local[").removesuffix("]")
    if inside == "*":
        return os.cpu_count() or 1
    return int(inside) if inside.isdigit() else 1


# =============================================================================================
# --cluster: a Spark standalone master and two one-core workers on 127.0.0.1


def start_cluster(base: Path) -> Any:
    """tests/spark_cluster.py's cluster (master + 2 workers, 1 core and 1 GiB each, from this
    venv's pyspark); the caller stops it."""
    import pyspark

    from tests.spark_cluster import StandaloneCluster, free_port

    base.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(Path(pyspark.__file__).parent, base, free_port(), free_port())
    try:
        cluster.start_master()
        cluster.wait_until(0)
        for index in range(CLUSTER_WORKERS):
            cluster.start_worker(index)
        cluster.wait_until(CLUSTER_WORKERS)
    except BaseException:
        cluster.stop()
        raise
    return cluster


# =============================================================================================
# /proc helpers: process tree, peak RSS, CPU


def _proc_stat(pid: int) -> tuple[int, str, float, float] | None:
    """(ppid, comm, own utime+stime, utime+stime+cutime+cstime) in seconds, of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[
        text.rindex(")") + 2 :
    ].split()  # fields[0] is field 3 (state); utime..cstime: 14..17
    own = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return int(fields[1]), comm, own, own + (int(fields[13]) + int(fields[14])) / CLK_TCK


def process_tree(root: int) -> dict[int, tuple[int, str, float, float]]:
    """Every live descendant of ``root`` (not ``root`` itself) -> ``_proc_stat``."""
    table: dict[int, tuple[int, str, float, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat is not None:
                table[int(entry)] = stat
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, tuple[int, str, float, float]] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out[pid] = table[pid]
        stack.extend(children.get(pid, []))
    return out


def status_kib(pid: int | str, name: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak_rss(pid: int | str) -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


class JobProbe:
    """Peak memory and CPU of the driver, its JVM and the Python workers around one job."""

    def __init__(self) -> None:
        self.me = os.getpid()
        tree = process_tree(self.me)
        self.jvm = next((pid for pid, (_, comm, *_) in tree.items() if comm == "java"), None)
        for pid in [self.me, *tree]:
            reset_peak_rss(pid)
        self.cpu0_driver = _self_cpu()
        self.cpu0_tree, self.cpu0_jvm = self._cpu(tree)
        self.rusage0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.workers_peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _cpu(self, tree: dict[int, tuple[int, str, float, float]]) -> tuple[float, float]:
        """(CPU of the whole tree below the driver, CPU of the JVM's own threads)."""
        total = sum(stat[3] for stat in tree.values())
        jvm = tree[self.jvm][2] if self.jvm is not None and self.jvm in tree else 0.0
        return total, jvm

    def _workers(self) -> list[int]:
        return [
            pid for pid, (_, comm, *_) in process_tree(self.me).items() if comm.startswith("python")
        ]

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            rss = sum(status_kib(pid, "VmRSS") for pid in self._workers())
            self.workers_peak_kib = max(self.workers_peak_kib, rss)
            self.samples += 1

    def finish(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        tree = process_tree(self.me)
        workers = [pid for pid, (_, comm, *_) in tree.items() if comm.startswith("python")]
        total, jvm = self._cpu(tree)
        driver = _self_cpu() - self.cpu0_driver
        jvm_d = jvm - self.cpu0_jvm
        mib = 1 / 1024
        return {
            "memory_mib": {
                "driver_python_peak": round(status_kib("self", "VmHWM") * mib, 1),
                "driver_python_ru_maxrss_so_far": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * mib, 1
                ),
                "jvm_peak": round(status_kib(self.jvm, "VmHWM") * mib, 1) if self.jvm else None,
                "python_workers_peak_sampled_sum": round(self.workers_peak_kib * mib, 1),
                "python_workers_peak_hwm_sum": round(
                    sum(status_kib(p, "VmHWM") for p in workers) * mib, 1
                ),
                "python_workers_alive": len(workers),
            },
            "cpu_seconds": {
                "driver_python": round(driver, 2),
                "jvm": round(jvm_d, 2),
                "python_workers": round(total - self.cpu0_tree - jvm_d, 2),
            },
        }


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# =============================================================================================
# The child: one SparkSession for one master, running rounds of jobs on command


def _spark_defaults() -> dict[str, str]:
    conf: dict[str, str] = {}
    path = REPO / "conf" / "spark-defaults.conf"
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                conf[key] = value.strip()
    conf.pop("spark.master", None)
    conf["spark.ui.enabled"] = "false"
    return conf


def child_main(args: argparse.Namespace) -> int:
    label = args.label or args.child
    proto: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
    log = open(os.path.join(args.workdir, f"child-{_slug(label)}.log"), "ab", buffering=0)  # noqa: SIM115
    os.dup2(log.fileno(), 1)  # the jobs' summaries and the JVM's output go to the log
    os.dup2(log.fileno(), 2)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The executors import this checkout's lakecore and jobs, wherever their working directory
    # is (a cluster's executors run in the worker's directory, where an installed copy would win).
    os.environ["PYTHONPATH"] = str(REPO) + (
        os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""
    )
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(args.child).appName(f"bench_jobs {label}")
    conf = _spark_defaults()
    conf["spark.executorEnv.PYTHONPATH"] = str(REPO)
    # The driver JVM's options as jobs/driver_jvm.py gives them (the class archive; the JIT as
    # main() chose). LAKECORE_JVM_JIT / LAKECORE_JVM_ARCHIVE=0 measure other choices.
    from jobs.driver_jvm import java_options

    conf["spark.driver.extraJavaOptions"] = java_options()
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.sparkContext.parallelize([1, 2], 2).count()  # the executors' Python workers exist
    import jobs.flush_job
    import jobs.gc_job
    import jobs.validate_job

    mains = {
        "validate": jobs.validate_job.main,
        "gc": jobs.gc_job.main,
        "flush": jobs.flush_job.main,
    }
    started = time.perf_counter() - t0
    # Imported once here, not inside the first validate of round 0, so that every round
    # measures the same thing; a fresh spark-submit pays it on top (reported).
    t_ge = time.perf_counter()
    from jobs.expectations import import_great_expectations

    import_great_expectations()
    ge_import = time.perf_counter() - t_ge
    # ru_maxrss survives fork+exec: this process starts with the parent's peak (about 1 GiB at
    # 1M tables), which is why the per-job numbers use VmHWM after a reset instead.
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    proto.write(
        json.dumps(
            {
                "ready": True,
                "master": args.child,
                "session_start_seconds": round(started, 2),
                "ru_maxrss_mib_at_ready": round(inherited, 1),
                "vm_hwm_mib_at_ready": round(status_kib("self", "VmHWM") / 1024, 1),
                "great_expectations_import_seconds": round(ge_import, 2),
                "spark_conf": conf,
                "default_parallelism": spark.sparkContext.defaultParallelism,
                "pyspark": spark.version,
            }
        )
        + "\n"
    )
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "exit":
            break
        if command["cmd"] == "listing":
            result = listing_limit(
                command["kind"],
                command["threads"],
                command["endpoint"],
                command["uri"],
                command["options"],
            )
            proto.write(json.dumps({"listing": result}) + "\n")
            continue
        results: dict[str, Any] = {}
        storage = command.get("storage", "local")
        lake_args = command.get("lake_args") or ["--lakehouse", args.lakehouse]
        for name in command["jobs"]:
            module, extra = JOBS[name]
            report_path = os.path.join(
                args.workdir, f"report-{storage}-{_slug(label)}-r{command['round']}-{name}.json"
            )
            argv = [*lake_args, "--env", "local", "--report", report_path, *extra]
            probe = JobProbe()
            t = time.perf_counter()
            code = mains[module](argv, spark=spark)
            wall = time.perf_counter() - t
            measured = probe.finish()
            try:
                with open(report_path) as f:
                    report = json.load(f)
            except (OSError, json.JSONDecodeError):
                report = {}
            results[name] = {
                "wall_seconds": round(wall, 3),
                "exit_code": code,
                "status": report.get("status"),
                "error": report.get("error"),
                "durations_seconds": report.get("durations_seconds", {}),
                "counts": report.get("counts", {}),
                "bytes": report.get("bytes", {}),
                **measured,
            }
        proto.write(json.dumps({"round": command["round"], "results": results}) + "\n")
    spark.stop()
    return 0


def _slug(master: str) -> str:
    return master.replace("[", "").replace("]", "").replace("*", "all")


class Child:
    """One child process: one SparkSession on ``master``, known as ``label`` in the report."""

    def __init__(self, label: str, master: str, lake: Lake, workdir: str) -> None:
        self.label = label
        self.master = master
        self.log_path = os.path.join(workdir, f"child-{_slug(label)}.log")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                master,
                "--label",
                label,
                "--lakehouse",
                lake.uri,
                "--workdir",
                workdir,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(REPO),
        )
        self.ready: dict[str, Any] = {}

    def wait_ready(self) -> None:
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            tail = (
                Path(self.log_path).read_text(errors="replace")[-3000:]
                if os.path.exists(self.log_path)
                else ""
            )
            raise SystemExit(f"the {self.label} child died; its log ends:\n{tail}")
        result: dict[str, Any] = json.loads(line)
        return result

    def _send(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def run(
        self,
        round_no: int,
        job_names: Sequence[str],
        storage: str = "local",
        lake_args: Sequence[str] = (),
    ) -> dict[str, Any]:
        answer = self._send(
            {
                "cmd": "round",
                "round": round_no,
                "jobs": list(job_names),
                "storage": storage,
                "lake_args": list(lake_args),
            }
        )
        return answer["results"]  # type: ignore[no-any-return]

    def listing(self, kind: str, threads: int, s3: S3Lake) -> dict[str, Any]:
        answer = self._send(
            {
                "cmd": "listing",
                "kind": kind,
                "threads": threads,
                "endpoint": s3.proxy.endpoint,
                "uri": s3.uri,
                "options": s3.storage_options(),
            }
        )
        return answer["listing"]  # type: ignore[no-any-return]

    def close(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
        self.proc.stdin.close()
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        # wait4's ru_maxrss: the child's whole-life peak, including what it inherited (see above)
        return {
            "exit_code": self.proc.returncode,
            "child_ru_maxrss_mib_wait4": round(usage.ru_maxrss / 1024, 1),
        }


# =============================================================================================
# Summaries


def _median(values: Sequence[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return round(statistics.median(clean), 3) if clean else None


def summarize_config(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-job medians over the rounds of one configuration on one storage."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        per = [r[name] for r in runs]
        stages = sorted({s for p in per for s in p["durations_seconds"]})
        out[name] = {
            "wall_seconds": C.summarize([p["wall_seconds"] for p in per]),
            "durations_seconds_median": {
                s: _median([p["durations_seconds"].get(s) for p in per]) for s in stages
            },
            "cpu_seconds_median": {
                k: _median([p["cpu_seconds"][k] for p in per]) for k in per[0]["cpu_seconds"]
            },
            "memory_mib_median": {
                k: _median([p["memory_mib"][k] for p in per]) for k in per[0]["memory_mib"]
            },
            "exit_codes": [p["exit_code"] for p in per],
            "counts_first_round": per[0]["counts"],
            "bytes_first_round": per[0]["bytes"],
        }
        if "s3_requests" in per[0]:
            kinds = sorted({k for p in per for k in p["s3_requests"]["by_kind"]})
            out[name]["s3_requests_median"] = {
                "total": _median([p["s3_requests"]["requests"] for p in per]),
                **{k: _median([p["s3_requests"]["by_kind"].get(k, 0) for p in per]) for k in kinds},
            }
            out[name]["s3_server_cpu_seconds_median"] = _median(
                [p["s3_server_cpu_seconds"] for p in per]
            )
            out[name]["s3_over_latency_median"] = _median(
                [p["s3_requests"]["over_latency"] for p in per]
            )
            out[name]["s3_max_in_flight_median"] = _median(
                [p["s3_requests"]["max_in_flight"] for p in per]
            )
    return out


def summarize_listing(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one configuration's listing-limit measurements."""
    out: dict[str, Any] = {}
    for kind in LISTING_KINDS:
        per = [r[kind] for r in runs]
        out[kind] = {
            "seconds": C.summarize([p["seconds"] for p in per]),
            "objects": per[0]["objects"],
            "threads": per[0]["threads"],
            "requests_median": _median([p["requests"]["requests"] for p in per]),
            "requests_by_kind_first_round": per[0]["requests"]["by_kind"],
            "latency_bound_seconds": per[0]["latency_bound_seconds"],
            "s3_server_cpu_seconds_median": _median([p["s3_server_cpu_seconds"] for p in per]),
        }
    return out


def checks(
    lake: Lake,
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    restores: dict[str, list[dict[str, Any]]],
    baselines: list[dict[str, Any]],
    listings: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    old = sum(1 for o in lake.orphans if o.old)
    young = len(lake.orphans) - old
    out = []
    for storage, configs in runs.items():
        for label, config_runs in configs.items():
            where = f"{storage} {label}"
            for r, run in enumerate(config_runs):
                for name, res in run.items():
                    if res["exit_code"] != 0:
                        out.append(
                            C.goal(
                                f"{where} r{r} {name} exit code",
                                "0",
                                res["exit_code"],
                                False,
                                error=res.get("error"),
                            )
                        )
                if "gc" in run:
                    counts = run["gc"]["counts"]
                    ok = (
                        counts.get("orphans_deleted") == old
                        and counts.get("skipped_too_young") == young
                    )
                    out.append(
                        C.goal(
                            f"{where} r{r} gc deleted exactly the old orphans",
                            f"{old} deleted, {young} young kept",
                            f"{counts.get('orphans_deleted')} deleted, {counts.get('skipped_too_young')} young",
                            ok,
                        )
                    )
                if "gc_dry" in run:
                    counts = run["gc_dry"]["counts"]
                    out.append(
                        C.goal(
                            f"{where} r{r} gc --dry-run finds the old orphans",
                            str(old),
                            counts.get("orphans_to_delete"),
                            counts.get("orphans_to_delete") == old,
                        )
                    )
                if "flush" in run:
                    counts = run["flush"]["counts"]
                    out.append(
                        C.goal(
                            f"{where} r{r} flush empties the root buffer",
                            "0 root messages after",
                            counts.get("root_messages_after"),
                            counts.get("root_messages_after") == 0,
                        )
                    )
                for name, res in run.items():
                    if "s3_requests" in res and res["s3_requests"]["proxy_errors"]:
                        out.append(
                            C.goal(
                                f"{where} r{r} {name}: the proxy forwarded every request",
                                "0 errors",
                                res["s3_requests"]["proxy_errors"],
                                False,
                            )
                        )
    for storage, storage_restores in restores.items():
        bad = sum(r["unexpected_missing"] for r in storage_restores)
        out.append(
            C.goal(f"{storage} restores found no unexpectedly deleted file", "0", bad, not bad)
        )
    if baselines:
        out.append(
            C.goal(
                "baseline orphans == planted orphans",
                "all",
                sum(b["orphans_match_planted"] for b in baselines),
                all(b["orphans_match_planted"] for b in baselines),
            )
        )
    expected = len(lake.files)
    for label, listing_runs in listings.items():
        counted = {r[k]["objects"] for r in listing_runs for k in LISTING_KINDS}
        out.append(
            C.goal(
                f"s3-latency {label}: every listing found every object",
                str(expected),
                sorted(counted),
                counted == {expected},
            )
        )
    return out


# =============================================================================================
# Main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables",
        type=lambda s: int(s.replace("_", "")),
        default=None,
        help="tables in the lakehouse (default 1000000 on local storage only, 100000 when "
        "s3-latency is in --storage; --quick 20000)",
    )
    parser.add_argument(
        "--commits",
        type=int,
        default=None,
        help="single-table catalog commits (default 300; quick 100)",
    )
    parser.add_argument("--old-orphans", type=int, default=8)
    parser.add_argument("--young-orphans", type=int, default=2)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="also a Spark standalone cluster on 127.0.0.1 (master + 2 workers of 1 core, 1 GiB), "
        "configuration 'cluster'",
    )
    parser.add_argument(
        "--storage",
        default="local",
        help="comma-separated: local (file://, default), s3-latency (the same lakehouse in moto's "
        "S3 server behind bench/latency_proxy.py)",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=DEFAULT_LATENCY_MS,
        help=f"s3-latency: first-byte latency per request (default {DEFAULT_LATENCY_MS:g})",
    )
    parser.add_argument(
        "--bandwidth-mbps",
        type=float,
        default=DEFAULT_BANDWIDTH_MBPS,
        help="s3-latency: megabytes (10^6 bytes) per second per connection, 0 = unlimited "
        f"(default {DEFAULT_BANDWIDTH_MBPS:g})",
    )
    parser.add_argument(
        "--jobs",
        default=None,
        help=f"subset of {','.join(JOBS)} (default all; --quick: all but validate_deep)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="rounds per configuration (default 2; quick 1)"
    )
    parser.add_argument("--write-threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20k tables, 100 commits, 1 round, no validate_deep (local: about 3 min; "
        "s3-latency: about 17 min, gc alone ~3 min per configuration)",
    )
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--label", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--lakehouse", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.storages = [s.strip() for s in args.storage.split(",") if s.strip()]
    unknown_storages = set(args.storages) - set(STORAGES)
    if unknown_storages or not args.storages:
        parser.error(
            f"--storage takes {' or '.join(STORAGES)} (comma-separated), not {args.storage!r}"
        )
    if args.tables is None:
        args.tables = (
            20_000 if args.quick else 100_000 if "s3-latency" in args.storages else 1_000_000
        )
    if args.commits is None:
        args.commits = 100 if args.quick else 300
    if args.rounds is None:
        args.rounds = 1 if args.quick else 2
    if args.jobs is None:
        args.jobs = ",".join(QUICK_JOBS if args.quick else DEFAULT_JOBS)
    unknown = set(args.jobs.split(",")) - set(JOBS)
    if unknown:
        parser.error(f"unknown jobs {sorted(unknown)}")
    return args


def _parent_cpu() -> float:
    """CPU seconds of this process: moto's server and the proxy run here (the jobs do not)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_jobs(
    child: Child, round_no: int, job_names: Sequence[str], storage: str, s3: S3Lake | None
) -> dict[str, Any]:
    """The job list on one configuration and storage, one job per command so that the proxy's
    counters (reset before each job) and this process's CPU belong to that job alone."""
    if s3 is None:
        return child.run(round_no, job_names)
    results: dict[str, Any] = {}
    for name in job_names:
        s3.proxy.reset()
        cpu0 = _parent_cpu()
        result = child.run(round_no, [name], storage, s3.job_args())[name]
        result["s3_server_cpu_seconds"] = round(_parent_cpu() - cpu0, 2)
        result["s3_requests"] = s3.proxy.reset()
        results[name] = result
    return results


def measure_listing(child: Child, threads: int, s3: S3Lake) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in LISTING_KINDS:
        s3.proxy.reset()
        cpu0 = _parent_cpu()
        result = child.listing(kind, threads, s3)
        result["s3_server_cpu_seconds"] = round(_parent_cpu() - cpu0, 2)
        result["requests"] = s3.proxy.reset()
        # Rounds of `threads` requests, one latency each: what a free CPU would have taken.
        result["latency_bound_seconds"] = round(
            -(-result["requests"]["requests"] // result["threads"]) * s3.proxy.latency_seconds, 3
        )
        out[kind] = result
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    t_start = time.perf_counter()
    # One JVM per configuration serves every round: a long-lived JVM, where HotSpot's optimising
    # compiler pays back (1M tables: gc 29-35 s with C1 alone, against ~29 s with it), so the
    # children run it unless LAKECORE_JVM_JIT says otherwise. A one-shot spark-submit.sh runs C1
    # alone (jobs/driver_jvm.py); the JSON records the options used.
    from jobs.driver_jvm import JIT_VARIABLE

    os.environ.setdefault(JIT_VARIABLE, "full")
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    labels = [*masters, CLUSTER_LABEL] if args.cluster else list(masters)
    storages: list[str] = args.storages
    job_names = [j for j in DEFAULT_JOBS if j in args.jobs.split(",")]
    list_threads = MaintenanceSettings.load(
        REPO / "conf" / "maintenance-local.json"
    ).gc_list_threads_per_task
    with C.temp_dir("bench-jobs-", args.tmpdir, args.keep) as work, contextlib.ExitStack() as stack:
        lake = build_lakehouse(os.path.join(work, "lake"), args)
        s3 = start_s3(lake, args, stack) if "s3-latency" in storages else None
        baselines: list[dict[str, Any]] = []
        if "local" in storages:
            C.log("baseline: find + sorted diff against the reachable set")
            baselines.append(gc_baseline(lake))
        urls = {m: m for m in masters}
        cluster_info: dict[str, Any] = {}
        if args.cluster:
            C.log("starting a standalone cluster: master + 2 workers")
            t0 = time.perf_counter()
            cluster = start_cluster(Path(work) / "cluster")
            stack.callback(cluster.stop)
            urls[CLUSTER_LABEL] = cluster.url
            cluster_info = {
                "url": cluster.url,
                "workers": CLUSTER_WORKERS,
                "cores_per_worker": CLUSTER_WORKER_CORES,
                "start_seconds": round(time.perf_counter() - t0, 1),
            }
        C.log(f"starting the SparkSessions of {', '.join(labels)} (concurrently)")
        children = {label: Child(label, urls[label], lake, work) for label in labels}
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            s: {m: [] for m in labels} for s in storages
        }
        restores: dict[str, list[dict[str, Any]]] = {s: [] for s in storages}
        listings: dict[str, list[dict[str, Any]]] = (
            {m: [] for m in labels} if s3 is not None else {}
        )
        calibrations: list[dict[str, Any]] = []
        closed: dict[str, Any] = {}
        try:
            for child in children.values():
                child.wait_ready()
            for r in range(args.rounds):
                for storage in storages if r % 2 == 0 else storages[::-1]:
                    for label in labels if r % 2 == 0 else labels[::-1]:
                        calibrations.append(
                            {**C.cpu_calibration(), "storage": storage, "configuration": label}
                        )
                        t0 = time.perf_counter()
                        results = run_jobs(
                            children[label],
                            r,
                            job_names,
                            storage,
                            s3 if storage != "local" else None,
                        )
                        runs[storage][label].append(results)
                        C.log(
                            f"round {r} {storage} {label} (effective cores {calibrations[-1]['effective_cores']}): "
                            + ", ".join(
                                f"{n} {v['wall_seconds']:.1f}s"
                                f"{'' if v['exit_code'] == 0 else ' EXIT ' + str(v['exit_code'])}"
                                for n, v in results.items()
                            )
                            + f" ({time.perf_counter() - t0:.0f}s)"
                        )
                        if storage == "local":
                            restores[storage].append(restore(lake))
                            baselines.append(gc_baseline(lake))
                            b = baselines[-1]
                            C.log(
                                f"  baseline: reach {b['reach_seconds']:.1f}s + find/diff {b['listing_diff_seconds']:.1f}s"
                            )
                        else:
                            assert s3 is not None
                            restores[storage].append(restore_s3(lake, s3))
                            listing = measure_listing(
                                children[label], config_cores(label) * list_threads, s3
                            )
                            listings[label].append(listing)
                            C.log(
                                "  listing limit: "
                                + ", ".join(
                                    f"{k} {v['seconds']:.1f}s ({v['requests']['requests']} requests)"
                                    for k, v in listing.items()
                                )
                            )
        finally:
            for label, child in children.items():
                with contextlib.suppress(Exception):
                    closed[label] = child.close()
        doc = report(
            args,
            lake,
            s3,
            labels,
            urls,
            job_names,
            runs,
            restores,
            baselines,
            listings,
            children,
            closed,
        )
        doc["cluster"] = cluster_info
        from jobs.driver_jvm import java_options

        doc["driver_java_options"] = java_options()
        doc["cpu_calibration"] = {
            "effective_cores": C.summarize([c["effective_cores"] for c in calibrations], digits=2),
            "runs": calibrations,
        }
        doc["run_seconds"] = round(time.perf_counter() - t_start, 1)
    C.print_json(doc)
    print_tables(doc, labels, job_names)
    return 0


def _wall(summary: dict[str, Any], label: str, job: str) -> float:
    value: float = summary[label][job]["wall_seconds"]["median"]
    return value


def storage_ratios(
    summary: dict[str, Any],
    labels: list[str],
    job_names: list[str],
    masters: list[str],
    gc_reference: dict[str, float],
) -> dict[str, Any]:
    """Scaling between configurations and gc against its reference (per configuration)."""
    ratios: dict[str, Any] = {}
    if len(masters) >= 2:
        a, b = masters[0], masters[1]
        ratios[f"wall_{_slug(a)}_over_{_slug(b)}"] = {
            j: C.ratio(_wall(summary, a, j), _wall(summary, b, j)) for j in job_names
        }
    if CLUSTER_LABEL in labels and masters:
        b = masters[-1]
        ratios[f"wall_cluster_over_{_slug(b)}"] = {
            j: C.ratio(_wall(summary, CLUSTER_LABEL, j), _wall(summary, b, j)) for j in job_names
        }
    return ratios | {"gc_reference_seconds": gc_reference}


def report(
    args: argparse.Namespace,
    lake: Lake,
    s3: S3Lake | None,
    labels: list[str],
    urls: dict[str, str],
    job_names: list[str],
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    restores: dict[str, list[dict[str, Any]]],
    baselines: list[dict[str, Any]],
    listings: dict[str, list[dict[str, Any]]],
    children: dict[str, Child],
    closed: dict[str, Any],
) -> dict[str, Any]:
    masters = [m for m in labels if m != CLUSTER_LABEL]
    summary = {s: {m: summarize_config(runs[s][m]) for m in labels} for s in runs}
    ratios: dict[str, Any] = {}
    base: dict[str, Any] = {}
    if baselines:
        measured = baselines[1:] or baselines  # the first one ran before any JVM existed
        base = {
            "reach_seconds": C.summarize([b["reach_seconds"] for b in measured]),
            "listing_diff_seconds": C.summarize([b["listing_diff_seconds"] for b in measured]),
            "find_and_sort_seconds": C.summarize([b["find_and_sort_seconds"] for b in measured]),
            "total_seconds": C.summarize([b["total_seconds"] for b in measured]),
            "runs": baselines,
        }
    listing_summary = {m: summarize_listing(listings[m]) for m in listings}
    for storage in runs:
        if storage == "local":
            reference = {m: base["total_seconds"]["median"] for m in labels} if base else {}
        else:  # the faster of the two ways to list everything: what gc could at best do
            reference = {
                m: min(listing_summary[m][k]["seconds"]["median"] for k in LIMIT_KINDS)
                for m in labels
            }
        r = storage_ratios(summary[storage], labels, job_names, masters, reference)
        what = "gc_baseline_total" if storage == "local" else "listing_limit"
        for m in labels:
            for j in ("gc_dry", "gc"):
                if j in job_names and reference.get(m):
                    r.setdefault(f"{j}_over_{what}", {})[m] = C.ratio(
                        _wall(summary[storage], m, j), reference[m]
                    )
                    r.setdefault(f"{j}_list_reach_stage_over_{what}", {})[m] = C.ratio(
                        summary[storage][m][j]["durations_seconds_median"].get(
                            "list-reach-anti-join"
                        )
                        or 0.0,
                        reference[m],
                    )
            if storage != "local" and "gc" in job_names:
                for kind in LIMIT_KINDS:
                    seconds = listing_summary[m][kind]["seconds"]["median"]
                    r.setdefault(f"gc_over_{kind}_listing", {})[m] = C.ratio(
                        _wall(summary[storage], m, "gc"), seconds
                    )
        ratios[storage] = r
    return {
        "benchmark": "bench_jobs",
        "quick": args.quick,
        "params": {
            "tables": args.tables,
            "commits": args.commits,
            "rounds": args.rounds,
            "configurations": urls,
            "storages": list(runs),
            "jobs": {j: [JOBS[j][0], *JOBS[j][1]] for j in job_names},
            "old_orphans": args.old_orphans,
            "young_orphans": args.young_orphans,
            "write_threads": args.write_threads,
            "seed": args.seed,
            "latency_ms": args.latency_ms,
            "bandwidth_mbps_per_connection": args.bandwidth_mbps,
            "gc_list_threads_per_task": MaintenanceSettings.load(
                REPO / "conf" / "maintenance-local.json"
            ).gc_list_threads_per_task,
            "cores": {m: config_cores(m) for m in labels},
        },
        "environment": {**C.environment(), "load_average_at_end": os.getloadavg()},
        "setup": {**lake.info, **({"s3": s3.info} if s3 is not None else {})},
        "sessions": {m: {**children[m].ready, **closed.get(m, {})} for m in labels},
        "jobs": summary,
        "gc_baseline": base,
        "listing_limit": listing_summary,
        "ratios": ratios,
        "goals": goals(summary, ratios, labels, masters, job_names),
        "checks": checks(lake, runs, restores, baselines, listings),
        "restores": restores,
        "rounds": runs,
        "listing_limit_rounds": listings,
        "method": {
            "wall_seconds": "perf_counter around jobs.<job>.main(argv, spark=session) in the configuration's child "
            "process; one SparkSession (JVM) per configuration, reused by all its jobs, storages and "
            "rounds",
            "driver_python_peak": "VmHWM of the driver's Python process after resetting it with /proc/self/clear_refs "
            "right before the job: the peak RSS during that job",
            "driver_python_ru_maxrss_so_far": "resource.getrusage(RUSAGE_SELF).ru_maxrss after the job: monotonic, "
            "and it survives fork+exec, so it starts at the parent's peak "
            "(sessions.*.ru_maxrss_mib_at_ready vs vm_hwm_mib_at_ready): "
            "not a per-job number",
            "jvm_peak": "VmHWM of the JVM (reset the same way before the job)",
            "python_workers_peak_sampled_sum": f"sum of the Python workers' VmRSS, sampled every {SAMPLE_INTERVAL_S}s",
            "cpu_seconds": "driver_python: getrusage(RUSAGE_SELF) delta (driver threads incl.); jvm: the JVM's "
            "utime+stime delta; python_workers: the rest of the process tree (utime+stime+cutime+cstime). "
            "On a cluster the executors are not in the tree: their CPU is not counted",
            "gc_baseline": "local storage, single process: reach = reachable_from_root(latest) + reachable_from_subtree "
            "of older versions' new children + roots, defs, hint; listing_diff = find -type f, sort, "
            "linear diff",
            "s3_latency": "the lakehouse built on local disk is copied into moto's S3 server (in the benchmark's "
            "parent process, objects written into its backend directly, old orphans' LastModified "
            "backdated); the jobs reach it through bench/latency_proxy.py (also in the parent): the "
            "first byte of every response no earlier than latency_ms after the request arrived (moto's "
            "own time is inside it: s3_over_latency counts requests where moto took longer), bodies "
            "at bandwidth_mbps per connection. moto answers ListObjectsV2 from a sorted index "
            "(latency_proxy.indexed_listing). Restores go to moto's backend directly, not through the "
            "proxy",
            "s3_requests": "the proxy's counters, reset before each job: requests by kind (list = GET with "
            "list-type=2, get, head, put, delete, delete_objects = POST ?delete, ...)",
            "s3_server_cpu_seconds": "CPU seconds of the parent process (moto's server + the proxy) during the job",
            "listing_limit": "in the configuration's child process (not the one serving S3), after the round's "
            "restore: every object listed once through the proxy. hash_dirs = the top level + the "
            "4,096 hash directories with cores x gc_list_threads_per_task boto3 requests in flight "
            "(the concurrency gc's listing stage has on that configuration); flat_paged = one paged "
            "ListObjectsV2 of the whole root (1000 keys per page, one page after the other); "
            "prefixes_paged = the 16, 256 or 4,096 directories that give each request in flight one "
            "of its own (lakecore.maintenance.listing.listing_levels), each paged, same threads; "
            "prefixes_lakecore = those directories with lakecore.maintenance.listing."
            "list_directories (s3fs) and the same threads, as gc lists. The listing limit in "
            "ratios.*.gc_over_listing_limit and in the gc goal is the fastest of hash_dirs, "
            "flat_paged and prefixes_paged (gc itself lists a lakehouse of at most "
            "gc_flat_listing_max_files files flat, a larger one by directory)",
            "page_cache": "local storage: the lakehouse was just written and RAM is large, so files are mostly in the "
            "page cache; but a VM with DAMON proactive reclaim (kdamond pageout) evicts cold pages, so a "
            "job may read some files from disk",
            "rounds": "round 0 of a configuration also warms the JVM (JIT), the Python workers and their "
            "imports; the medians are over all rounds, per-round values are under 'rounds'",
        },
    }


def goals(
    summary: dict[str, Any],
    ratios: dict[str, Any],
    labels: list[str],
    masters: list[str],
    job_names: list[str],
) -> list[dict[str, Any]]:
    """The stated goals, all on S3 with latency (``s3-latency``); none is asserted."""
    if "s3-latency" not in summary:
        return []
    r = ratios["s3-latency"]
    out = []
    if len(masters) >= 2:
        a, b = masters[0], masters[1]
        key = f"wall_{_slug(a)}_over_{_slug(b)}"
        for j in SCALING_GOAL_JOBS:
            if j in job_names:
                value = r[key][j]
                out.append(
                    C.goal(
                        f"s3-latency {j}: {b} at least {SCALING_GOAL}x faster than {a}",
                        f"{a} wall / {b} wall >= {SCALING_GOAL}",
                        value,
                        value is not None and value >= SCALING_GOAL,
                        ratio=f"ratios.s3-latency.{key}.{j}",
                    )
                )
    if masters and CLUSTER_LABEL in labels:
        b = masters[-1]
        key = f"wall_cluster_over_{_slug(b)}"
        for j in job_names:
            value = r[key][j]
            out.append(
                C.goal(
                    f"s3-latency {j}: the cluster no slower than {b}",
                    f"cluster wall / {b} wall <= 1",
                    value,
                    value is not None and value <= 1.0,
                    ratio=f"ratios.s3-latency.{key}.{j}",
                )
            )
    if "gc" in job_names:
        for m in labels:
            value = r.get("gc_over_listing_limit", {}).get(m)
            out.append(
                C.goal(
                    f"s3-latency gc on {m}: at most {GC_OVER_LISTING_GOAL:g}x the listing limit",
                    f"gc wall / min(listing_limit.{m}.hash_dirs, .flat_paged, .prefixes_paged) <= {GC_OVER_LISTING_GOAL:g}",
                    value,
                    value is not None and value <= GC_OVER_LISTING_GOAL,
                    ratio=f"ratios.s3-latency.gc_over_listing_limit.{m}",
                )
            )
    return out


def print_tables(doc: dict[str, Any], labels: list[str], job_names: list[str]) -> None:
    s = doc["setup"]
    C.print_table(
        "setup",
        [
            "tables",
            "files",
            "MiB",
            "defs s",
            "defs/s",
            "bulk s",
            "commits s",
            "total s",
            "s3 load s",
        ],
        [
            [
                s["tables"],
                s["files_total"],
                s["bytes_total"] / C.MiB,
                s["definition_write_seconds"],
                s["definition_files_per_second"],
                s["bulk_build_seconds"],
                s["catalog_commits_seconds"],
                s["setup_seconds"],
                s.get("s3", {}).get("load_seconds"),
            ]
        ],
    )
    rows = []
    for storage, by_label in doc["jobs"].items():
        for j in job_names:
            for m in labels:
                r = by_label[m][j]
                rows.append(
                    [
                        storage,
                        j,
                        m,
                        r["wall_seconds"]["median"],
                        r["wall_seconds"]["min"],
                        r["wall_seconds"]["max"],
                        r["cpu_seconds_median"]["driver_python"],
                        r["cpu_seconds_median"]["jvm"],
                        r["cpu_seconds_median"]["python_workers"],
                        r.get("s3_server_cpu_seconds_median"),
                        r["memory_mib_median"]["driver_python_peak"],
                        r["memory_mib_median"]["jvm_peak"],
                        r["memory_mib_median"]["python_workers_peak_sampled_sum"],
                    ]
                )
    C.print_table(
        "jobs (medians over rounds; seconds, MiB; cpu s3 = moto + proxy)",
        [
            "storage",
            "job",
            "config",
            "wall",
            "min",
            "max",
            "cpu drv",
            "cpu jvm",
            "cpu wrk",
            "cpu s3",
            "drv MiB",
            "jvm MiB",
            "wrk MiB",
        ],
        rows,
    )
    if "s3-latency" in doc["jobs"]:
        kinds = ["list", "get", "head", "put", "delete", "delete_objects"]
        rows = []
        for j in job_names:
            for m in labels:
                r = doc["jobs"]["s3-latency"][m][j]
                req = r["s3_requests_median"]
                other = (req["total"] or 0) - sum(req.get(k) or 0 for k in kinds)
                rows.append(
                    [
                        j,
                        m,
                        req["total"],
                        *[req.get(k, 0) for k in kinds],
                        other,
                        r["s3_over_latency_median"],
                        r["s3_max_in_flight_median"],
                    ]
                )
        p = doc["params"]
        C.print_table(
            f"s3-latency requests per job (medians; {p['latency_ms']:g} ms per request, "
            f"{p['bandwidth_mbps_per_connection']:g} MB/s per connection)",
            ["job", "config", "total", *kinds, "other", ">latency", "in flight"],
            rows,
        )
        rows = []
        for m in labels:
            for kind, v in doc["listing_limit"][m].items():
                rows.append(
                    [
                        m,
                        kind,
                        v["threads"],
                        v["seconds"]["median"],
                        v["latency_bound_seconds"],
                        v["requests_median"],
                        v["objects"],
                        v["s3_server_cpu_seconds_median"],
                    ]
                )
        C.print_table(
            "s3-latency listing limit (every object once; medians; bound = requests / threads x latency)",
            ["config", "listing", "threads", "seconds", "bound s", "requests", "objects", "cpu s3"],
            rows,
        )
    b = doc["gc_baseline"]
    if b:
        C.print_table(
            "gc baseline, local (single process)",
            ["reach s", "find+diff s", "total s", "files", "reachable"],
            [
                [
                    b["reach_seconds"]["median"],
                    b["listing_diff_seconds"]["median"],
                    b["total_seconds"]["median"],
                    b["runs"][-1]["files_listed"],
                    b["runs"][-1]["reachable"],
                ]
            ],
        )
    cal = doc.get("cpu_calibration", {}).get("effective_cores", {})
    if cal:
        C.print_table(
            "cpu calibration: effective cores for 2 busy processes (2.0 = idle 2-core machine)",
            ["median", "min", "max"],
            [[cal["median"], cal["min"], cal["max"]]],
        )
    C.print_table(
        "ratios",
        ["storage", "ratio", "values"],
        [[storage, k, json.dumps(v)] for storage, r in doc["ratios"].items() for k, v in r.items()],
    )
    if doc["goals"]:
        C.print_table(
            "goals (s3-latency; not asserted)",
            ["goal", "target", "value", "met"],
            [[g["goal"], g["target"], g["value"], g["met"]] for g in doc["goals"]],
        )
    C.print_table(
        "checks",
        ["check", "value", "met"],
        [[c["goal"], c["value"], c["met"]] for c in doc["checks"]],
    )


if __name__ == "__main__":
    sys.exit(main())
