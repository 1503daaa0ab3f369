"""What one S3 request costs the client: lakecore's direct request path
(``lakecore.core.storage.s3_requests``) against s3fs and botocore (``lakecore_s3_requests=false``,
the baseline) and, for reference, a plain boto3 client, in the same run, interleaved.

The store: moto's S3 server in a process of its own behind ``bench/latency_proxy.py``, started
as ``python bench/latency_proxy.py --moto --port P --latency-ms L --bandwidth-mbps 0`` once for
each of ``--latencies`` (default 0 and 20 ms of first-byte latency), so that the server's CPU
is never counted as the client's.

Measured per latency, per mode (``direct``, ``s3fs``, ``boto3``) and per operation, through
``Storage`` for the two lakecore modes (what lakecore pays, its path checks and error
translation included):

* ``put``: ``write`` of ``--size`` bytes (1 KiB) over an existing object (PutObject);
* ``create``: ``create_exclusive`` of a new key (PutObject with ``If-None-Match: *``);
* ``get``: ``read`` of the object (GetObject);
* ``head``: ``info`` of the object (HeadObject).

Each ``--rounds`` times, the modes in a rotating order: ``--requests`` requests one after the
other (``sequential``), then as many again from ``--threads`` threads (``threads``). Reported,
medians over the rounds: the client's CPU per request (this process's CPU time, every thread
included: s3fs runs its requests on fsspec's IO thread), requests per second, and the proxy's
process CPU per request (moto's, for context). Ratios: baseline (s3fs) over direct, for CPU and
requests per second. Goal: the direct path's CPU per sequential PUT, GET and HEAD at 0 ms is at
most 0.4 ms. JSON on stdout (with the effective cores), a table on stderr.

    .venv/bin/python bench/bench_s3_requests.py [--latencies 0,20] [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _common as C
from latency_proxy import MOTO_ENV

from lakecore.core.storage import Storage

HERE = Path(__file__).resolve().parent
BUCKET = "lakecore-bench-requests"
MODES = ("direct", "s3fs", "boto3")
OPERATIONS = ("put", "create", "get", "head")
GOAL_CPU_MS = 0.4


class MotoProcess:
    """``latency_proxy.py --moto`` in a process of its own."""

    def __init__(self, latency_ms: float) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "latency_proxy.py"),
                "--moto",
                "--port",
                str(port),
                "--latency-ms",
                str(latency_ms),
                "--bandwidth-mbps",
                "0",
                "--bucket",
                BUCKET,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **MOTO_ENV},
        )
        assert self.process.stderr is not None
        seen = []
        for line in self.process.stderr:
            seen.append(line)
            if line.startswith("latency proxy on"):
                break
        else:
            raise SystemExit(f"the proxy did not start: {''.join(seen)[-2000:]}")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for _ in self.process.stderr:
            pass

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _operations(mode: str, endpoint: str, size: int, tag: str) -> dict[str, Callable[[int], Any]]:
    """Each operation as a function of the request's number."""
    payload = os.urandom(size)
    if mode == "boto3":
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        key = f"boto3/{tag}/object"
        client.put_object(Bucket=BUCKET, Key=key, Body=payload)
        return {
            "put": lambda i: client.put_object(Bucket=BUCKET, Key=key, Body=payload),
            "create": lambda i: client.put_object(
                Bucket=BUCKET, Key=f"boto3/{tag}/new-{i}", Body=payload, IfNoneMatch="*"
            ),
            "get": lambda i: client.get_object(Bucket=BUCKET, Key=key)["Body"].read(),
            "head": lambda i: client.head_object(Bucket=BUCKET, Key=key),
        }
    storage = Storage(
        f"s3://{BUCKET}/{mode}/{tag}/",
        {"endpoint_url": endpoint, "lakecore_s3_requests": mode == "direct"},
    )
    storage.write("object", payload)
    return {
        "put": lambda i: storage.write("object", payload),
        "create": lambda i: storage.create_exclusive(f"new-{i}", payload),
        "get": lambda i: storage.read("object"),
        "head": lambda i: storage.info("object"),
    }


def _measure(
    call: Callable[[int], Any], numbers: range, threads: int, server: MotoProcess
) -> dict[str, float]:
    """CPU per request (ms), requests per second, server CPU per request (ms)."""
    cpu0, wall0, server0 = time.process_time(), time.perf_counter(), server.cpu_seconds()
    if threads == 1:
        for i in numbers:
            call(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(call, numbers))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    n = len(numbers)
    return {
        "cpu_ms": cpu / n * 1000,
        "requests_per_second": n / wall,
        "server_cpu_ms": (server.cpu_seconds() - server0) / n * 1000,
    }


def _latency_run(latency_ms: float, args: argparse.Namespace) -> dict[str, Any]:
    server = MotoProcess(latency_ms)
    try:
        tag = f"{latency_ms:g}ms-{int(time.time())}"
        operations = {mode: _operations(mode, server.endpoint, args.size, tag) for mode in MODES}
        for mode in MODES:  # warm-up: clients built, connections open
            for op in OPERATIONS:
                for i in range(5):
                    operations[mode][op](-1 - i - 10 * OPERATIONS.index(op))
        samples: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = {
            shape: {op: {mode: [] for mode in MODES} for op in OPERATIONS}
            for shape in ("sequential", "threads")
        }
        requests = args.requests if latency_ms == 0 else args.latency_requests
        next_number = 0
        for round_no in range(args.rounds):
            order = MODES[round_no % len(MODES) :] + MODES[: round_no % len(MODES)]
            for op in OPERATIONS:
                for mode in order:
                    for shape, threads in (("sequential", 1), ("threads", args.threads)):
                        numbers = range(next_number, next_number + requests)
                        next_number += requests
                        samples[shape][op][mode].append(
                            _measure(operations[mode][op], numbers, threads, server)
                        )
            C.log(f"  {latency_ms:g} ms: round {round_no + 1}/{args.rounds} done")
    finally:
        server.stop()
    result: dict[str, Any] = {"requests_per_sample": requests}
    for shape, by_op in samples.items():
        result[shape] = {}
        for op, by_mode in by_op.items():
            entry: dict[str, Any] = {}
            for mode, runs in by_mode.items():
                entry[mode] = {
                    "cpu_ms_per_request": C.summarize([r["cpu_ms"] for r in runs]),
                    "requests_per_second": C.summarize(
                        [r["requests_per_second"] for r in runs], digits=1
                    ),
                    "server_cpu_ms_per_request": round(
                        statistics.median(r["server_cpu_ms"] for r in runs), 3
                    ),
                }
            direct, s3fs = entry["direct"], entry["s3fs"]
            entry["s3fs_over_direct_cpu"] = C.ratio(
                s3fs["cpu_ms_per_request"]["median"], direct["cpu_ms_per_request"]["median"]
            )
            entry["direct_over_s3fs_requests_per_second"] = C.ratio(
                direct["requests_per_second"]["median"], s3fs["requests_per_second"]["median"]
            )
            result[shape][op] = entry
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", default="0,20", help="first-byte latencies in ms")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200, help="per sample at 0 ms")
    parser.add_argument("--latency-requests", type=int, default=50, help="per sample above 0 ms")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024, help="object size in bytes")
    parser.add_argument("--quick", action="store_true", help="2 rounds, fewer requests")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.requests, args.latency_requests = 2, 50, 16
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.update(MOTO_ENV)  # dummy credentials for every client
    calibration = C.cpu_calibration()
    C.log(f"effective cores {calibration['effective_cores']}")
    latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
    runs = {f"{latency:g}ms": _latency_run(latency, args) for latency in latencies}
    goals = []
    if "0ms" in runs:
        for op in ("put", "get", "head"):
            value = runs["0ms"]["sequential"][op]["direct"]["cpu_ms_per_request"]["median"]
            goals.append(
                C.goal(
                    f"direct client CPU per {op.upper()} (sequential, 0 ms)",
                    f"<= {GOAL_CPU_MS} ms",
                    value,
                    value <= GOAL_CPU_MS,
                )
            )
    doc = {
        "benchmark": "bench_s3_requests",
        "environment": C.environment(),
        "cpu_calibration": calibration,
        "params": {
            "latencies_ms": latencies,
            "rounds": args.rounds,
            "requests_per_sample": args.requests,
            "latency_requests_per_sample": args.latency_requests,
            "threads": args.threads,
            "object_bytes": args.size,
        },
        "latencies": runs,
        "goals": goals,
    }
    rows = []
    for latency, run in runs.items():
        for shape in ("sequential", "threads"):
            for op in OPERATIONS:
                entry = run[shape][op]
                rows.append(
                    [
                        latency,
                        shape,
                        op,
                        *(entry[m]["cpu_ms_per_request"]["median"] for m in MODES),
                        entry["s3fs_over_direct_cpu"],
                        *(entry[m]["requests_per_second"]["median"] for m in MODES),
                    ]
                )
    C.print_table(
        "client CPU ms per request and requests/s (medians over rounds)",
        [
            "latency",
            "shape",
            "op",
            "cpu direct",
            "cpu s3fs",
            "cpu boto3",
            "s3fs/direct",
            "rps direct",
            "rps s3fs",
            "rps boto3",
        ],
        rows,
    )
    for g in goals:
        C.log(f"goal {g['goal']}: {g['value']} ({g['target']}) {'met' if g['met'] else 'NOT MET'}")
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
