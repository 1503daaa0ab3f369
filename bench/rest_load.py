"""The REST server under load (``bench_rest.py --load``): group commit against
``--no-group-commit``, in the same run, with real processes.

Layout: moto's S3 server runs in a process of its own (``latency_proxy.MotoS3Process``) behind
the latency proxy in this process (``latency_proxy.py``, ``--latency-ms`` first-byte latency,
20 ms by default), which counts every S3 request; each
``lakecore serve`` is a process of its own (its CPU is read from ``/proc``); each client is a
process of its own, ``python bench/rest_load.py client ...``, running one thread a writer or
reader over keep-alive HTTP connections and printing its samples as JSON.

Clients:

* **light**: one small commit each (``set-properties`` of one key, no requirement), every
  writer on a table of its own: what the server does per commit, with the client's CPU too
  small to bound a run on 2 cores;
* **append**: pyiceberg's ``RestCatalog`` appends of ``--rows`` rows (its own data file,
  manifest list and manifest on S3, then the commit): what engines cost, reported beside;
* **load**: ``loadTable`` of a table nobody changes.

Measured, for each server mode (group commit, then ``--no-group-commit``) over ``--duration``
seconds each: light commits per second at 1, 4, 16 and 64 writers with their latency; loadTable
idle and while 16 writers commit; S3 requests per commit and per load (the proxy's counters);
server CPU per commit (``/proc/PID/stat``); root writes per commit and batch sizes (the
server's ``/metrics``); then 16 writers split over two server processes on one lakehouse, and
pyiceberg appends at 1 and 16 writers. The goals of issue 45 are checked in the JSON
(``goals``), with the effective cores the machine offered (``cpu_calibration``).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import _common as C

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "bench"
NAMESPACE = "load"
WRITER_COUNTS = (1, 4, 16, 64)
STATIC_TABLE = "static"
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


# =============================================================================================
# Clients (run as processes of their own)


def light_writer(url: str, table: str, end: float, out: list[tuple[float, float, int]]) -> None:
    where = urlparse(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    path = f"/v1/namespaces/{NAMESPACE}/tables/{table}"
    headers = {"Content-Type": "application/json"}
    i = 0
    while time.time() < end:
        i += 1
        body = json.dumps(
            {
                "requirements": [],
                "updates": [{"action": "set-properties", "updates": {"k": str(i)}}],
            }
        )
        started = time.time()
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        response.read()
        out.append((started, time.time() - started, response.status))


def loader(url: str, table: str, end: float, out: list[tuple[float, float, int]]) -> None:
    where = urlparse(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    path = f"/v1/namespaces/{NAMESPACE}/tables/{table}"
    while time.time() < end:
        started = time.time()
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        out.append((started, time.time() - started, response.status))


def appender(
    url: str,
    table: str,
    end: float,
    out: list[tuple[float, float, int]],
    rows: int,
    properties: dict[str, str],
) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("bench", uri=url, **properties)
    data = pa.table({"id": pa.array(range(rows), pa.int64())})
    loaded = catalog.load_table(f"{NAMESPACE}.{table}")
    while time.time() < end:
        started = time.time()
        status = 200
        try:
            loaded.append(data)
        except Exception:  # the run's errors are counted, not raised
            status = 500
            loaded = catalog.load_table(f"{NAMESPACE}.{table}")
        out.append((started, time.time() - started, status))


def client_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("light", "append", "load"), required=True)
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--tables", required=True)
    parser.add_argument("--start", type=float, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--property", action="append", default=[], help="KEY=VALUE for pyiceberg")
    args = parser.parse_args(argv)
    properties = dict(p.split("=", 1) for p in args.property)
    tables = args.tables.split(",")
    end = args.start + args.duration
    samples: list[list[tuple[float, float, int]]] = [[] for _ in tables]
    threads = []
    for i, table in enumerate(tables):
        url = args.url[i % len(args.url)]
        if args.mode == "light":
            target: Any = light_writer
            extra: tuple[Any, ...] = ()
        elif args.mode == "load":
            target, extra = loader, ()
        else:
            target, extra = appender, (args.rows, properties)
        threads.append(
            threading.Thread(target=target, args=(url, table, end, samples[i], *extra), daemon=True)
        )
    while time.time() < args.start:
        time.sleep(0.001)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps([s for per_thread in samples for s in per_thread]))


# =============================================================================================
# Servers


class ServerProcess:
    """``lakecore -l LAKE serve`` as a process: its URL, its CPU time, its metrics."""

    def __init__(self, lake: str, args: list[str], env: dict[str, str]) -> None:
        options = [a for a in args if a.startswith("--storage-option")]
        args = [a for a in args if not a.startswith("--storage-option")]
        command = [
            str(ROOT / ".venv" / "bin" / "lakecore"),
            "-l",
            lake,
            *options,
            "serve",
            "--allow-anonymous",
            "--port",
            "0",
            *args,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if match is None:
            self.process.kill()
            _, error = self.process.communicate()
            raise RuntimeError(f"the server did not start: {line!r} {error[-2000:]}")
        self.url = match.group(1)
        # Its access log is not read: drained, so that a full pipe never stops the server.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for _ in self.process.stderr:
            pass

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def metrics(self) -> dict[str, float]:
        """The committer's counters from /metrics."""
        where = urlparse(self.url)
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        wanted = {
            "lakecore_rest_commit_batches_total": "batches",
            'lakecore_rest_commit_units_total{outcome="committed"}': "committed",
            "lakecore_rest_root_conflicts_total": "root_conflicts",
            "lakecore_rest_commit_restagings_total": "restagings",
        }
        found: dict[str, float] = {}
        for line in text.splitlines():
            for name, key in wanted.items():
                if line.startswith(name + " "):
                    found[key] = float(line.split()[-1])
        return found

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


# =============================================================================================
# One measurement


CLIENT_PROPERTIES: dict[str, str] = {}  # what pyiceberg's clients need to reach the store
STORE: Any = None  # moto's processes (``Shards``) on S3 runs


class Shards:
    """The moto processes of a run, as one store: their CPU together."""

    def __init__(self, processes: list[Any]) -> None:
        self.processes = processes

    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds() for p in self.processes)


def run_clients(
    mode: str, urls: list[str], tables: list[str], duration: float, rows: int
) -> list[tuple[float, float, int]]:
    """Clients of ``mode`` on ``tables``, one thread each, in one process per 16 tables."""
    start = time.time() + 1.5  # every client process is up before anyone begins
    processes = []
    for chunk_start in range(0, len(tables), 16):
        chunk = tables[chunk_start : chunk_start + 16]
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "client",
            "--mode",
            mode,
            "--tables",
            ",".join(chunk),
            "--start",
            str(start),
            "--duration",
            str(duration),
            "--rows",
            str(rows),
        ]
        for url in urls:
            command += ["--url", url]
        for key, value in CLIENT_PROPERTIES.items():
            command += ["--property", f"{key}={value}"]
        processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    samples: list[tuple[float, float, int]] = []
    for process in processes:
        out, _ = process.communicate(timeout=duration + 300)
        samples += [tuple(s) for s in json.loads(out)]  # type: ignore[misc]
    return samples


def summary(samples: list[tuple[float, float, int]], duration: float) -> dict[str, Any]:
    ok = [s for s in samples if s[2] in (200, 204)]
    latencies = [s[1] for s in ok]
    statuses: dict[str, int] = {}
    for s in samples:
        statuses[str(s[2])] = statuses.get(str(s[2]), 0) + 1
    return {
        "ok": len(ok),
        "per_second": round(len(ok) / duration, 2),
        "statuses": statuses,
        "latency_ms": C.summarize(latencies, 1000.0) if latencies else None,
    }


@contextlib.contextmanager
def measured(servers: list[ServerProcess], proxy: Any | None) -> Iterator[dict[str, Any]]:
    """What the servers and the store did during the block: CPU seconds, S3 requests by kind,
    the committers' counters."""
    result: dict[str, Any] = {}
    if proxy is not None:
        proxy.reset()
    cpu = [s.cpu_seconds() for s in servers]
    before = [s.metrics() for s in servers]
    store_before = STORE.cpu_seconds() if STORE is not None else 0.0
    here_before = time.process_time()
    children_before = _children_cpu_seconds()
    yield result
    result["server_cpu_seconds"] = round(sum(s.cpu_seconds() for s in servers) - sum(cpu), 3)
    # Where the rest of the machine's CPU went: moto's process, this one (the latency proxy and
    # the bookkeeping), the client processes that ended inside the block.
    result["other_cpu_seconds"] = {
        "moto": round(STORE.cpu_seconds() - store_before, 3) if STORE is not None else None,
        "proxy_and_bench": round(time.process_time() - here_before, 3),
        "clients": round(_children_cpu_seconds() - children_before, 3),
    }
    after = [s.metrics() for s in servers]
    result["committer"] = {
        key: sum(a.get(key, 0) - b.get(key, 0) for a, b in zip(after, before, strict=True))
        for key in ("batches", "committed", "root_conflicts", "restagings")
    }
    if proxy is not None:
        result["s3_requests"] = proxy.requests_by_kind()


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def light_run(
    servers: list[ServerProcess],
    proxy: Any | None,
    writers: int,
    duration: float,
) -> dict[str, Any]:
    tables = [f"w{i:03d}" for i in range(writers)]
    with measured(servers, proxy) as m:
        samples = run_clients("light", [s.url for s in servers], tables, duration, 0)
    out = {"writers": writers, **summary(samples, duration), **m}
    commits = out["ok"]
    if commits:
        out["server_cpu_ms_per_commit"] = round(1000 * m["server_cpu_seconds"] / commits, 3)
        batches = m["committer"]["batches"]
        out["root_writes_per_commit"] = round(batches / commits, 3) if batches else None
        out["mean_batch"] = round(commits / batches, 2) if batches else None
        if "s3_requests" in m:
            out["s3_requests_per_commit"] = round(sum(m["s3_requests"].values()) / commits, 3)
    return out


def warm_up(servers: list[ServerProcess]) -> None:
    """A few commits and loads on each server before anything is measured: the first requests
    pay for imports and connections (pyarrow's FileIO alone costs about a CPU-second)."""
    for server in servers:
        run_clients("light", [server.url], [f"w{i:03d}" for i in range(4)], 2.0, 0)
        run_clients("load", [server.url], [STATIC_TABLE], 1.0, 0)


def load_run(
    servers: list[ServerProcess], proxy: Any | None, duration: float, readers: int = 1
) -> dict[str, Any]:
    with measured(servers, proxy) as m:
        samples = run_clients("load", [servers[0].url], [STATIC_TABLE] * readers, duration, 0)
    out = {"readers": readers, **summary(samples, duration), **m}
    if out["ok"] and "s3_requests" in m:
        out["s3_requests_per_load"] = round(sum(m["s3_requests"].values()) / out["ok"], 3)
    return out


def load_while_writing(
    server: ServerProcess, proxy: Any | None, writers: int, duration: float
) -> dict[str, Any]:
    result: dict[str, Any] = {}

    def write() -> None:
        result["writers"] = light_run([server], None, writers, duration)

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(0.5)  # the writers' processes start first
    samples = run_clients("load", [server.url], [STATIC_TABLE], duration - 1.0, 0)
    thread.join()
    result["loads"] = summary(samples, duration - 1.0)
    return result


# =============================================================================================
# The run


def prepare(lake: str, storage_options: dict[str, Any], properties: dict[str, str]) -> None:
    """The lakehouse, its namespace and tables: 64 writer tables and one that nobody changes."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from lakecore.iceberg import LakecoreCatalog
    from lakecore.lakehouse import Lakehouse

    Lakehouse.create(lake, storage_options=storage_options or None)
    catalog = LakecoreCatalog(
        "bench", uri=lake, storage_options=storage_options or None, **properties
    )
    catalog.create_namespace(NAMESPACE)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    tables = [f"w{i:03d}" for i in range(max(WRITER_COUNTS))]
    for name in [*tables, STATIC_TABLE]:
        catalog.create_table(
            f"{NAMESPACE}.{name}", schema, properties={"commit.retry.num-retries": "100"}
        )


def run_mode(
    lake: str,
    serve_args: list[str],
    env: dict[str, str],
    proxy: Any | None,
    args: argparse.Namespace,
    group: bool,
) -> dict[str, Any]:
    label = "group commit" if group else "--no-group-commit"
    server = ServerProcess(lake, [*serve_args, *([] if group else ["--no-group-commit"])], env)
    out: dict[str, Any] = {"rss_start_bytes": server.rss_bytes()}
    try:
        warm_up([server])
        out["load_idle"] = load_run([server], proxy, args.duration)
        C.log(f"   {label}: loadTable idle p50 {out['load_idle']['latency_ms']['median']} ms")
        out["light"] = {}
        for writers in args.writers:
            run = light_run([server], proxy, writers, args.duration)
            out["light"][str(writers)] = run
            C.log(
                f"   {label}: {writers:3d} writers {run['per_second']:8.1f} commits/s, "
                f"p50 {run['latency_ms']['median'] if run['latency_ms'] else '-'} ms, "
                f"batch {run.get('mean_batch')}, S3/commit {run.get('s3_requests_per_commit')}, "
                f"CPU/commit {run.get('server_cpu_ms_per_commit')} ms"
            )
        busy = load_while_writing(server, proxy, 16, args.duration)
        out["load_while_16_write"] = busy
        C.log(f"   {label}: loadTable under 16 writers p99 {busy['loads']['latency_ms']['p99']} ms")
        out["rss_end_bytes"] = server.rss_bytes()
    finally:
        server.stop()
    return out


def run_load(args: argparse.Namespace) -> dict[str, Any]:
    global STORE
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from latency_proxy import LatencyProxy, MotoS3Process

    doc: dict[str, Any] = {
        "benchmark": "bench_rest --load",
        "environment": C.environment(),
        "parameters": {k: v for k, v in vars(args).items() if k not in ("keep",)},
        "cpu_calibration": C.cpu_calibration(),
    }
    C.log(f"effective cores {doc['cpu_calibration']['effective_cores']}")
    env = {
        **os.environ,
        **AWS,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for variable in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(variable, None)
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    with contextlib.ExitStack() as stack:
        proxy = None
        if args.storage == "s3":
            # moto in processes of their own: beside the proxy's threads its requests would
            # queue for one interpreter lock, a wait S3 never shows. With --moto-shards, one
            # process per folder of the bucket the run writes (the lakehouse's top-level files,
            # its other files, the warehouse), as S3 spreads prefixes over partitions.
            lake = f"s3://{BUCKET}/lake-{int(time.time())}"
            folder = lake.removeprefix("s3://")
            shards = [stack.enter_context(MotoS3Process(BUCKET)) for _ in range(args.moto_shards)]
            STORE = Shards(shards)
            routes = list(
                zip(
                    [f"/{folder}/_", f"/{folder}-warehouse/"][: len(shards) - 1],
                    [m.endpoint for m in shards[1:]],
                    strict=True,
                )
            )
            proxy = stack.enter_context(
                LatencyProxy(shards[0].endpoint, args.latency_ms, 0, routes=routes)
            )
            storage_options = {"endpoint_url": proxy.endpoint}
            properties = {
                "s3.endpoint": proxy.endpoint,
                "s3.region": "us-east-1",
                "s3.access-key-id": "testing",
                "s3.secret-access-key": "testing",
                "warehouse": f"{lake}-warehouse",
            }
        else:
            base = stack.enter_context(C.temp_dir("bench-rest-load-", args.scratch, args.keep))
            lake = f"{base}/lake"
            storage_options, properties = {}, {}
        prepare(lake, storage_options, properties)
        CLIENT_PROPERTIES.update({k: v for k, v in properties.items() if k.startswith("s3.")})
        serve_args = [f"--storage-option=endpoint_url={v}" for v in storage_options.values()]
        serve_args += [f"--property={k}={v}" for k, v in properties.items() if k != "warehouse"]
        doc["storage"] = args.storage
        doc["latency_ms"] = args.latency_ms if proxy is not None else 0
        for group in (True, False):
            C.log(f"== {'group commit' if group else '--no-group-commit'} ({args.storage})")
            doc["group" if group else "no_group"] = run_mode(
                lake, serve_args, env, proxy, args, group
            )
        C.log("== two servers, group commit")
        two = [ServerProcess(lake, serve_args, env) for _ in range(2)]
        try:
            warm_up(two)
            doc["two_servers_16_writers"] = light_run(two, proxy, 16, args.duration)
        finally:
            for server in two:
                server.stop()
        C.log("== pyiceberg appends, group commit")
        server = ServerProcess(lake, serve_args, env)
        try:
            warm_up([server])
            doc["append"] = {
                str(w): {
                    "writers": w,
                    **summary(
                        run_clients(
                            "append",
                            [server.url],
                            [f"w{i:03d}" for i in range(w)],
                            args.duration,
                            args.rows,
                        ),
                        args.duration,
                    ),
                }
                for w in (1, 16)
            }
        finally:
            server.stop()
    doc["goals"] = goals(doc)
    doc["goals_met"] = all(g["met"] for g in doc["goals"])
    return doc


def goals(doc: dict[str, Any]) -> list[dict[str, Any]]:
    group, plain = doc["group"], doc["no_group"]
    light, light_plain = group["light"], plain["light"]
    out = []
    if "16" in light and "16" in light_plain:
        value = C.ratio(light["16"]["per_second"], light_plain["16"]["per_second"])
        out.append(
            C.goal(
                "16 writers: group commit over --no-group-commit", ">= 8", value, (value or 0) >= 8
            )
        )
    counts = [w for w in ("16", "64") if w in light]
    if len(counts) == 2:
        rise = light["64"]["per_second"] >= light["16"]["per_second"]
        out.append(
            C.goal(
                "64 writers commit at least what 16 do",
                "rises",
                [light["16"]["per_second"], light["64"]["per_second"]],
                rise,
            )
        )
    if "1" in light and "16" in light and light["1"]["latency_ms"] and light["16"]["latency_ms"]:
        value = C.ratio(light["16"]["latency_ms"]["p99"], light["1"]["latency_ms"]["median"])
        out.append(
            C.goal("p99 at 16 writers over a lone writer's p50", "<= 3", value, (value or 99) <= 3)
        )
    if "1" in light and "1" in light_plain:
        value = C.ratio(light_plain["1"]["per_second"], light["1"]["per_second"])
        out.append(
            C.goal(
                "one writer: --no-group-commit over group commit, commits/s",
                "<= 1.10",
                value,
                (value or 9) <= 1.10,
            )
        )
    idle, busy = (
        group["load_idle"]["latency_ms"],
        group["load_while_16_write"]["loads"]["latency_ms"],
    )
    if idle and busy:
        value = C.ratio(busy["p99"], idle["p99"])
        out.append(
            C.goal("loadTable p99 under 16 writers over idle", "<= 2", value, (value or 9) <= 2)
        )
    per_load = group["load_idle"].get("s3_requests_per_load")
    if per_load is not None:
        out.append(
            C.goal("S3 requests per load of an unchanged table", "<= 1", per_load, per_load <= 1.0)
        )
        out.append(
            C.goal(
                "loadTable p50 of an unchanged table (ms)",
                "<= 30",
                idle["median"],
                idle["median"] <= 30,
            )
        )
    per_commit = light.get("16", {}).get("s3_requests_per_commit")
    if per_commit is not None:
        out.append(
            C.goal(
                "S3 requests per light commit at 16 writers", "<= 4", per_commit, per_commit <= 4
            )
        )
    cpu = light.get("16", {}).get("server_cpu_ms_per_commit")
    if cpu is not None:
        out.append(C.goal("server CPU ms per light commit at 16 writers", "<= 2", cpu, cpu <= 2))
    return out


def print_tables(doc: dict[str, Any]) -> None:
    rows = []
    for key, label in (("group", "group commit"), ("no_group", "--no-group-commit")):
        for writers, run in doc[key]["light"].items():
            latency = run["latency_ms"] or {}
            rows.append(
                [
                    label,
                    writers,
                    run["per_second"],
                    latency.get("median"),
                    latency.get("p99"),
                    run.get("mean_batch"),
                    run.get("s3_requests_per_commit"),
                    run.get("server_cpu_ms_per_commit"),
                ]
            )
    C.print_table(
        f"bench_rest --load, light commits ({doc['storage']}, {doc['latency_ms']} ms)",
        ["mode", "writers", "commits/s", "p50 ms", "p99 ms", "batch", "S3/commit", "CPU ms/commit"],
        rows,
    )
    C.print_table(
        "goals",
        ["goal", "target", "value", "met"],
        [[g["goal"], g["target"], g["value"], g["met"]] for g in doc["goals"]],
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", choices=("s3", "local"), default="s3")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds a measurement runs")
    parser.add_argument("--writers", type=C.parse_int_list, default=list(WRITER_COUNTS))
    parser.add_argument(
        "--moto-shards",
        type=int,
        choices=(1, 2, 3),
        default=1,
        help="moto processes behind the proxy (default 1; 3: one each for the lakehouse's "
        "top-level files, its other files and the warehouse, for machines with cores to spare)",
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        client_main(sys.argv[2:])
    else:
        raise SystemExit("run it as: python bench/bench_rest.py --load")
