"""Benchmark of the Spark maintenance jobs (validate, flush, gc) on a big local lakehouse.

Setup (timed, not part of the job numbers): a lakehouse on local disk made with
``Lakehouse.create`` (default definition: order 128, 1 MiB node files), then ``--tables``
tables (default 1,000,000; ``--quick`` 20,000) in namespaces of 1000:

1. every namespace and table **definition file** (``.binpb``) is written, a namespace per task in
   ``--write-threads`` threads, each file with ``Storage.write(durable=False)`` and one
   ``Storage.sync()`` at the end (what ``NodeStore.write_many`` does for node files);
2. the tree of every namespace and table key is **bulk-built** (``lakecore.tree.bulk_build``)
   and committed as **version 1** (``encode_root`` + ``storage.create_exclusive`` + the hint);
3. ``--commits`` single-table commits through the catalog API (``lh.transaction()``: half
   ``create_table`` of a new table, half ``update_table`` of a random table's properties), so
   the root buffer is not empty and there are that many more versions;
4. planted **orphans**: ``--old-orphans`` lakecore-named files no version reaches (node files,
   table and namespace definitions, a temp file) with a modification time 10 days ago, and
   ``--young-orphans`` fresh ones that gc must leave alone.

Jobs, each run in-process through its ``main(argv, spark=...)`` with ``--report``:
``validate`` (latest version, great-expectations suite on), ``validate_noexp``
(``--no-expectations``), ``validate_deep`` (``--deep --no-expectations``: reads every
definition file), ``gc_dry`` (``--dry-run --older-than 1d``), ``gc`` (``--older-than 1d``: deletes
exactly the old planted orphans) and ``flush`` (``--mode full``), in that order.

Configurations: one child process per Spark master (``--masters``, default ``local[1]`` and
``local[2]``), each with **one** SparkSession (one JVM) reused for all its jobs, with
``conf/spark-defaults.conf`` applied (as ``spark-submit.sh`` does) except ``spark.master`` and with
the UI off. Both children stay up for the whole run and the parent runs **rounds**: in each
round every configuration runs the whole job list (the order of configurations alternates
between rounds), then the parent **restores** the lakehouse to its state after setup (deletes
every file the jobs wrote, i.e. flush's nodes and root, puts back the orphans gc deleted,
rewrites the hint), so every round of every configuration starts from the same lakehouse.

Each child imports great_expectations once before its first round (``sessions`` reports how
long that took: a fresh ``spark-submit`` of validate pays it on top of the numbers here, as it
pays the JVM start, ``session_start_seconds``). Before each configuration's round the parent
measures how many cores two busy processes get right now (``cpu_calibration``: 2.0 on an idle
2-core machine), since local[2] can only beat local[1] by that much.

Per job: wall time around ``main`` and the report's ``durations_seconds`` (per stage); CPU
seconds of the driver's Python and of the JVM plus the Python workers (from ``/proc``); memory:
the driver Python's peak RSS **for that job** (``VmHWM`` after resetting it with
``/proc/self/clear_refs``; ``ru_maxrss`` is reported too, but it never goes down and it
survives fork+exec, so a child started by a 1 GiB parent begins at 1 GiB), the JVM's peak RSS
(same reset; a JVM keeps the heap it grew, so its number ratchets up from job to job), and the
Python workers' peak RSS (summed, sampled every 0.25 s, plus the sum of their ``VmHWM``).

**gc baseline**, in the parent, after every configuration's round (same lakehouse state as gc
saw): ``find <root> -type f``, sort, and a linear diff of the sorted listing against the sorted
reachable set (``listing_diff``), where the reachable set (``reach``) is computed in one
process with ``lakecore.maintenance.reachable``: ``reachable_from_root`` of the latest version
(the whole tree) and, for every other retained root, its own values plus
``reachable_from_subtree`` of each child not already reached (versions share almost every
subtree: a node file is immutable, so a known node's subtree is known), plus the root files,
the lakehouse definitions and the hint. Both parts are timed separately and together.

Prints one JSON document on stdout and tables on stderr. Nothing asserts on timings; the JSON's
``checks`` say whether the jobs did what they must (exit codes, gc deleted exactly the old
orphans, flush emptied the root buffer, the restores found nothing unexpected).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
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

from lakecore import keys as K
from lakecore.defs import encode_def, namespace_def, table_def
from lakecore.lakehouse import Lakehouse
from lakecore.locations import (
    LATEST_HINT_FILE_NAME,
    TEMP_FILE_PREFIX,
    is_root_node_file_name,
    new_node_file_path,
    optimize_path,
    root_node_file_name,
)
from lakecore.maintenance.reachable import Reachable, reachable_from_root, reachable_from_subtree
from lakecore.storage import Storage
from lakecore.tree import NodeCache, NodeStore, bulk_build
from lakecore.versions import encode_root, list_root_versions, read_root, write_hint

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


def _write_namespace_defs(storage: Storage, ns: str, ns_location: str, tables: list[tuple[str, str]]) -> int:
    """One namespace's definition files (not durable yet: the caller syncs once)."""
    storage.write(ns_location, encode_def(namespace_def(ns, {"owner": "bench"})), durable=False)
    for table, location in tables:
        storage.write(location, encode_def(table_def(table, columns=COLUMNS, properties={"owner": "bench"})),
                      durable=False)
    return len(tables) + 1


def build_lakehouse(root_dir: str, args: argparse.Namespace) -> Lake:
    t_setup = time.perf_counter()
    rng = random.Random(args.seed)
    lh = Lakehouse.create(root_dir, "bench-jobs")
    storage = lh.storage
    info: dict[str, Any] = {"tables": args.tables, "order": lh.lakehouse_def.order,
                            "node_file_max_size_bytes": lh.lakehouse_def.node_file_max_size_bytes}
    sample_key = K.table_key(C.namespace_name(0), C.table_name(0), lh.lakehouse_def)
    if sample_key != C.table_key(C.namespace_name(0), C.table_name(0)):
        raise SystemExit("bench keys do not match lakecore.keys for the default definition")

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
    C.log(f"setup: {len(items):,} keys in {len(ns_locations):,} namespaces; writing definition files "
          f"({args.write_threads} threads)")
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=args.write_threads) as pool:
        futures = [pool.submit(_write_namespace_defs, storage, ns, loc, by_ns[ns]) for ns, loc in ns_locations.items()]
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
    data = encode_root(root, lh.lakehouse_def.order, lakehouse_def_path=base.lakehouse_def_path,
                       previous_root=root_node_file_name(base.version), created_at_millis=C.now_ms())
    storage.create_exclusive(root_node_file_name(base.version + 1), data)  # AlreadyExistsError if taken
    write_hint(storage, base.version + 1)
    lh.refresh()
    info["commit_v1_seconds"] = round(time.perf_counter() - t0, 3)
    info["v1_root_bytes"] = len(data)
    C.log(f"setup: bulk build {info['bulk_build_node_files']:,} node files in {info['bulk_build_seconds']}s; "
          f"version {lh.version} committed")
    del items

    # -- single-table commits through the catalog API -------------------------------------
    t0 = time.perf_counter()
    latencies: list[float] = []
    namespaces = sorted(ns_locations)
    for i in range(args.commits):
        start = time.perf_counter()
        with lh.transaction() as tx:
            if i % 2 == 0:
                tx.create_table(rng.choice(namespaces), f"new_{i:05d}", columns=COLUMNS, properties={"owner": "bench"})
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
    C.log(f"setup: {args.commits} catalog commits in {info['catalog_commits_seconds']}s; latest version {lh.version}, "
          f"root buffer {len(lh.root.buffer)} messages")
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
    C.log(f"setup: done in {info['setup_seconds']}s: {len(files):,} files, {info['bytes_total'] / C.MiB:,.0f} MiB")
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
    return live, {"versions": len(versions), "latest_full_walk_seconds": round(full_walk_s, 3),
                  "older_subtrees_walked": subtrees, "nodes_read": store.stats.as_dict()}


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
    out = subprocess.run(["find", lake.root_dir, "-type", "f"], check=True, capture_output=True).stdout
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
# How many cores this machine gives us right now


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
    fields = text[text.rindex(")") + 2 :].split()  # fields[0] is field 3 (state); utime..cstime: 14..17
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
        return [pid for pid, (_, comm, *_) in process_tree(self.me).items() if comm.startswith("python")]

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
                "driver_python_ru_maxrss_so_far": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * mib, 1),
                "jvm_peak": round(status_kib(self.jvm, "VmHWM") * mib, 1) if self.jvm else None,
                "python_workers_peak_sampled_sum": round(self.workers_peak_kib * mib, 1),
                "python_workers_peak_hwm_sum": round(sum(status_kib(p, "VmHWM") for p in workers) * mib, 1),
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
    proto: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
    log = open(os.path.join(args.workdir, f"child-{_slug(args.child)}.log"), "ab", buffering=0)  # noqa: SIM115
    os.dup2(log.fileno(), 1)  # the jobs' summaries and the JVM's output go to the log
    os.dup2(log.fileno(), 2)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(args.child).appName(f"bench_jobs {args.child}")
    conf = _spark_defaults()
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.sparkContext.parallelize([1, 2], 2).count()  # the executors' Python workers exist
    import jobs.flush
    import jobs.gc
    import jobs.validate

    mains = {"validate": jobs.validate.main, "gc": jobs.gc.main, "flush": jobs.flush.main}
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
    proto.write(json.dumps({"ready": True, "session_start_seconds": round(started, 2),
                            "ru_maxrss_mib_at_ready": round(inherited, 1),
                            "vm_hwm_mib_at_ready": round(status_kib("self", "VmHWM") / 1024, 1),
                            "great_expectations_import_seconds": round(ge_import, 2), "spark_conf": conf,
                            "default_parallelism": spark.sparkContext.defaultParallelism,
                            "pyspark": spark.version}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "exit":
            break
        results: dict[str, Any] = {}
        for name in command["jobs"]:
            module, extra = JOBS[name]
            report_path = os.path.join(args.workdir, f"report-{_slug(args.child)}-r{command['round']}-{name}.json")
            argv = ["--lakehouse", args.lakehouse, "--env", "local", "--report", report_path, *extra]
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
    def __init__(self, master: str, lake: Lake, workdir: str) -> None:
        self.master = master
        self.log_path = os.path.join(workdir, f"child-{_slug(master)}.log")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", master, "--lakehouse", lake.uri,
             "--workdir", workdir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(REPO),
        )
        self.ready: dict[str, Any] = {}

    def wait_ready(self) -> None:
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            tail = Path(self.log_path).read_text(errors="replace")[-3000:] if os.path.exists(self.log_path) else ""
            raise SystemExit(f"the {self.master} child died; its log ends:\n{tail}")
        result: dict[str, Any] = json.loads(line)
        return result

    def run(self, round_no: int, job_names: Sequence[str]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": "round", "round": round_no, "jobs": list(job_names)}) + "\n")
        self.proc.stdin.flush()
        return self._read()["results"]  # type: ignore[no-any-return]

    def close(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
        self.proc.stdin.close()
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        # wait4's ru_maxrss: the child's whole-life peak, including what it inherited (see above)
        return {"exit_code": self.proc.returncode, "child_ru_maxrss_mib_wait4": round(usage.ru_maxrss / 1024, 1)}


# =============================================================================================
# Summaries


def _median(values: Sequence[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return round(statistics.median(clean), 3) if clean else None


def summarize_config(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-job medians over the rounds of one configuration."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        per = [r[name] for r in runs]
        stages = sorted({s for p in per for s in p["durations_seconds"]})
        out[name] = {
            "wall_seconds": C.summarize([p["wall_seconds"] for p in per]),
            "durations_seconds_median": {s: _median([p["durations_seconds"].get(s) for p in per]) for s in stages},
            "cpu_seconds_median": {k: _median([p["cpu_seconds"][k] for p in per]) for k in per[0]["cpu_seconds"]},
            "memory_mib_median": {k: _median([p["memory_mib"][k] for p in per]) for k in per[0]["memory_mib"]},
            "exit_codes": [p["exit_code"] for p in per],
            "counts_first_round": per[0]["counts"],
            "bytes_first_round": per[0]["bytes"],
        }
    return out


def checks(lake: Lake, configs: dict[str, list[dict[str, Any]]], restores: list[dict[str, Any]],
           baselines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    old = sum(1 for o in lake.orphans if o.old)
    young = len(lake.orphans) - old
    out = []
    for master, runs in configs.items():
        for r, run in enumerate(runs):
            for name, res in run.items():
                if res["exit_code"] != 0:
                    out.append(C.goal(f"{master} r{r} {name} exit code", "0", res["exit_code"], False,
                                      error=res.get("error")))
            if "gc" in run:
                counts = run["gc"]["counts"]
                ok = counts.get("orphans_deleted") == old and counts.get("skipped_too_young") == young
                out.append(C.goal(f"{master} r{r} gc deleted exactly the old orphans", f"{old} deleted, {young} young kept",
                                  f"{counts.get('orphans_deleted')} deleted, {counts.get('skipped_too_young')} young", ok))
            if "gc_dry" in run:
                counts = run["gc_dry"]["counts"]
                out.append(C.goal(f"{master} r{r} gc --dry-run finds the old orphans", str(old),
                                  counts.get("would_delete"), counts.get("would_delete") == old))
            if "flush" in run:
                counts = run["flush"]["counts"]
                out.append(C.goal(f"{master} r{r} flush empties the root buffer", "0 root messages after",
                                  counts.get("root_messages_after"), counts.get("root_messages_after") == 0))
    bad = [r for r in restores if r["unexpected_missing"]]
    out.append(C.goal("restores found no unexpectedly deleted file", "0", sum(r["unexpected_missing"] for r in restores),
                      not bad))
    out.append(C.goal("baseline orphans == planted orphans", "all", sum(b["orphans_match_planted"] for b in baselines),
                      all(b["orphans_match_planted"] for b in baselines)))
    return out


# =============================================================================================
# Main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=lambda s: int(s.replace("_", "")), default=None,
                        help="tables in the lakehouse (default 1000000; --quick 20000)")
    parser.add_argument("--commits", type=int, default=None, help="single-table catalog commits (default 300; quick 100)")
    parser.add_argument("--old-orphans", type=int, default=8)
    parser.add_argument("--young-orphans", type=int, default=2)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--jobs", default=None,
                        help=f"subset of {','.join(JOBS)} (default all; --quick: all but validate_deep)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per configuration (default 2; quick 1)")
    parser.add_argument("--write-threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--quick", action="store_true",
                        help="20k tables, 100 commits, 1 round, no validate_deep (about 3 min)")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--lakehouse", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tables is None:
        args.tables = 20_000 if args.quick else 1_000_000
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    t_start = time.perf_counter()
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    job_names = [j for j in DEFAULT_JOBS if j in args.jobs.split(",")]
    with C.temp_dir("bench-jobs-", args.tmpdir, args.keep) as work:
        lake = build_lakehouse(os.path.join(work, "lake"), args)
        C.log("baseline: find + sorted diff against the reachable set")
        baselines = [gc_baseline(lake)]
        C.log(f"starting the SparkSessions of {', '.join(masters)} (concurrently)")
        children = {master: Child(master, lake, work) for master in masters}
        for child in children.values():
            child.wait_ready()
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in masters}
        restores: list[dict[str, Any]] = []
        calibrations: list[dict[str, Any]] = []
        try:
            for r in range(args.rounds):
                order = masters if r % 2 == 0 else masters[::-1]
                for master in order:
                    calibrations.append(C.cpu_calibration())
                    t0 = time.perf_counter()
                    results = children[master].run(r, job_names)
                    runs[master].append(results)
                    C.log(f"round {r} {master} (effective cores {calibrations[-1]['effective_cores']}): " + ", ".join(
                        f"{n} {v['wall_seconds']:.1f}s{'' if v['exit_code'] == 0 else ' EXIT ' + str(v['exit_code'])}"
                        for n, v in results.items()) + f" ({time.perf_counter() - t0:.0f}s)")
                    restores.append(restore(lake))
                    baselines.append(gc_baseline(lake))
                    b = baselines[-1]
                    C.log(f"  baseline: reach {b['reach_seconds']:.1f}s + find/diff {b['listing_diff_seconds']:.1f}s")
        finally:
            closed = {m: c.close() for m, c in children.items()}
        doc = report(args, lake, masters, job_names, runs, restores, baselines, children, closed)
        doc["cpu_calibration"] = {
            "effective_cores": C.summarize([c["effective_cores"] for c in calibrations], digits=2),
            "runs": calibrations,
        }
        doc["run_seconds"] = round(time.perf_counter() - t_start, 1)
    C.print_json(doc)
    print_tables(doc, masters, job_names)
    return 0


def report(args: argparse.Namespace, lake: Lake, masters: list[str], job_names: list[str],
           runs: dict[str, list[dict[str, Any]]], restores: list[dict[str, Any]], baselines: list[dict[str, Any]],
           children: dict[str, Child], closed: dict[str, Any]) -> dict[str, Any]:
    summary = {m: summarize_config(runs[m]) for m in masters}
    measured = baselines[1:] or baselines  # the first one ran before any JVM existed
    base: dict[str, Any] = {
        "reach_seconds": C.summarize([b["reach_seconds"] for b in measured]),
        "listing_diff_seconds": C.summarize([b["listing_diff_seconds"] for b in measured]),
        "find_and_sort_seconds": C.summarize([b["find_and_sort_seconds"] for b in measured]),
        "total_seconds": C.summarize([b["total_seconds"] for b in measured]),
        "runs": baselines,
    }
    ratios: dict[str, Any] = {}
    if len(masters) >= 2:
        a, b = masters[0], masters[1]
        ratios[f"wall_{_slug(a)}_over_{_slug(b)}"] = {
            j: C.ratio(summary[a][j]["wall_seconds"]["median"], summary[b][j]["wall_seconds"]["median"]) for j in job_names
        }
    for m in masters:
        for j in ("gc_dry", "gc"):
            if j in job_names:
                ratios.setdefault(f"{j}_over_baseline_total", {})[m] = C.ratio(
                    summary[m][j]["wall_seconds"]["median"], base["total_seconds"]["median"])
                ratios.setdefault(f"{j}_list_reach_stage_over_baseline_total", {})[m] = C.ratio(
                    summary[m][j]["durations_seconds_median"].get("list-reach-anti-join") or 0.0,
                    base["total_seconds"]["median"])
    return {
        "benchmark": "bench_jobs",
        "quick": args.quick,
        "params": {"tables": args.tables, "commits": args.commits, "rounds": args.rounds, "masters": masters,
                   "jobs": {j: [JOBS[j][0], *JOBS[j][1]] for j in job_names}, "old_orphans": args.old_orphans,
                   "young_orphans": args.young_orphans, "write_threads": args.write_threads, "seed": args.seed},
        "environment": {**C.environment(), "load_average_at_end": os.getloadavg()},
        "setup": lake.info,
        "sessions": {m: {**children[m].ready, **closed[m]} for m in masters},
        "jobs": summary,
        "gc_baseline": base,
        "ratios": ratios,
        "checks": checks(lake, runs, restores, baselines),
        "restores": restores,
        "rounds": runs,
        "method": {
            "wall_seconds": "perf_counter around jobs.<job>.main(argv, spark=session) in the configuration's child "
                            "process; one SparkSession (JVM) per configuration, reused by all its jobs and rounds",
            "driver_python_peak": "VmHWM of the driver's Python process after resetting it with /proc/self/clear_refs "
                                  "right before the job: the peak RSS during that job",
            "driver_python_ru_maxrss_so_far": "resource.getrusage(RUSAGE_SELF).ru_maxrss after the job: monotonic, "
                                              "and it survives fork+exec, so it starts at the parent's peak "
                                              "(sessions.*.ru_maxrss_mib_at_ready vs vm_hwm_mib_at_ready): "
                                              "not a per-job number",
            "jvm_peak": "VmHWM of the JVM (reset the same way before the job)",
            "python_workers_peak_sampled_sum": f"sum of the Python workers' VmRSS, sampled every {SAMPLE_INTERVAL_S}s",
            "cpu_seconds": "driver_python: getrusage(RUSAGE_SELF) delta (driver threads incl.); jvm: the JVM's "
                           "utime+stime delta; python_workers: the rest of the process tree (utime+stime+cutime+cstime)",
            "gc_baseline": "single process: reach = reachable_from_root(latest) + reachable_from_subtree of older "
                           "versions' new children + roots, defs, hint; listing_diff = find -type f, sort, linear diff",
            "page_cache": "the lakehouse was just written and RAM is large, so files are mostly in the page cache; "
                          "but a VM with DAMON proactive reclaim (kdamond pageout) evicts cold pages, so a job "
                          "may read some files from disk",
            "rounds": "round 0 of a configuration also warms the JVM (JIT), the Python workers and their "
                      "imports; the medians are over all rounds, per-round values are under 'rounds'",
        },
    }


def print_tables(doc: dict[str, Any], masters: list[str], job_names: list[str]) -> None:
    s = doc["setup"]
    C.print_table("setup", ["tables", "files", "MiB", "defs s", "defs/s", "bulk s", "commits s", "total s"], [[
        s["tables"], s["files_total"], s["bytes_total"] / C.MiB, s["definition_write_seconds"],
        s["definition_files_per_second"], s["bulk_build_seconds"], s["catalog_commits_seconds"], s["setup_seconds"],
    ]])
    rows = []
    for j in job_names:
        for m in masters:
            r = doc["jobs"][m][j]
            rows.append([j, m, r["wall_seconds"]["median"], r["wall_seconds"]["min"], r["wall_seconds"]["max"],
                         r["cpu_seconds_median"]["driver_python"], r["cpu_seconds_median"]["jvm"],
                         r["cpu_seconds_median"]["python_workers"], r["memory_mib_median"]["driver_python_peak"],
                         r["memory_mib_median"]["jvm_peak"], r["memory_mib_median"]["python_workers_peak_sampled_sum"]])
    C.print_table("jobs (medians over rounds; seconds, MiB)",
                  ["job", "master", "wall", "min", "max", "cpu drv", "cpu jvm", "cpu wrk", "drv MiB", "jvm MiB",
                   "wrk MiB"], rows)
    b = doc["gc_baseline"]
    C.print_table("gc baseline (single process)", ["reach s", "find+diff s", "total s", "files", "reachable"], [[
        b["reach_seconds"]["median"], b["listing_diff_seconds"]["median"], b["total_seconds"]["median"],
        b["runs"][-1]["files_listed"], b["runs"][-1]["reachable"],
    ]])
    cal = doc.get("cpu_calibration", {}).get("effective_cores", {})
    if cal:
        C.print_table("cpu calibration: effective cores for 2 busy processes (2.0 = idle 2-core machine)",
                      ["median", "min", "max"], [[cal["median"], cal["min"], cal["max"]]])
    C.print_table("ratios", ["ratio", "values"], [[k, json.dumps(v)] for k, v in doc["ratios"].items()])
    C.print_table("checks", ["check", "value", "met"], [[c["goal"], c["value"], c["met"]] for c in doc["checks"]])


if __name__ == "__main__":
    sys.exit(main())
