"""What a Spark task's listing costs the client: S3 clients reused across tasks vs built per task.

A gc or compact-versions listing task unpickles a fresh ``Storage`` and lists its share of the
4,096 hash directories with ``list_directories`` (8 requests in flight). Before the
per-process client cache, each task (and each listing thread of each task) built its own s3fs
client; now a worker process keeps one per root and options, for all its threads. This
measures both in one run, interleaved, in a child process of its own (so that moto's server,
which runs in this process, is not in the measured CPU):

* ``reused``: every task's Storage has the same root and options (what the jobs do);
* ``fresh`` (the baseline): each task's Storage has its own options (a different timeout), so
  its clients are built afresh, as before the cache.

Then what parsing a listing costs the client, in the same child: every object listed page
after page (1,000 keys a page) by a boto3 client whose responses' timestamps are parsed by
botocore's own parser (dateutil; the baseline) and by ``lakecore.core.storage.parse_s3_timestamp``
(what lakecore's S3 clients use), interleaved, ``--rounds`` each: CPU and wall medians and the
ratio baseline / lakecore.

Storage: moto's S3 server behind ``latency_proxy.LatencyProxy`` (20 ms first-byte latency by
default), ``--files`` objects spread over the hash directories. Reported per mode: medians of
the child's CPU seconds and wall seconds for ``--tasks`` tasks, and the ratios fresh / reused.
JSON on stdout, a short table on stderr.

    .venv/bin/python bench/bench_listing_clients.py [--files 4000] [--tasks 16] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pickle
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import _common as C
from latency_proxy import DEFAULT_LATENCY_MS, LatencyProxy, MotoS3

from lakecore.core.locations import hash_directories
from lakecore.core.storage import Storage
from lakecore.maintenance.listing import list_directories

BUCKET = "lakecore-bench-listing"
THREADS = 8
MODES = ("reused", "fresh", "botocore_timestamps", "lakecore_timestamps")


def _tasks(
    uri: str, endpoint: str, tasks: int, fresh: bool, round_no: int
) -> tuple[int, float, float]:
    """``tasks`` listing tasks, each over its slice of the hash directories; (files, cpu, wall)."""
    directories = hash_directories()
    share = -(-len(directories) // tasks)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    files = 0
    for task in range(tasks):
        options: dict[str, Any] = {"client_kwargs": {"endpoint_url": endpoint}}
        if fresh:  # options of its own: a client cache miss, as every task was before the cache
            options["lakecore_timeout_seconds"] = 300 + round_no * 1000 + task + 0.5
        storage = pickle.loads(pickle.dumps(Storage(uri, options)))  # as a task receives it
        files += sum(
            1
            for _ in list_directories(
                storage, directories[task * share : (task + 1) * share], THREADS
            )
        )
    return files, time.process_time() - cpu0, time.perf_counter() - wall0


def _paged_client(endpoint: str, lakecore_timestamps: bool) -> Any:
    import boto3
    import botocore.session

    from lakecore.core.storage import parse_s3_timestamp

    session = botocore.session.get_session()
    if lakecore_timestamps:
        session.get_component("response_parser_factory").set_parser_defaults(
            timestamp_parser=parse_s3_timestamp
        )
    return boto3.Session(botocore_session=session).client(
        "s3", endpoint_url=endpoint, region_name="us-east-1"
    )


def _paged(client: Any, prefix: str) -> tuple[int, float, float]:
    """Every object under ``prefix``, page after page; (files, cpu, wall)."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    files, token = 0, None
    while True:
        kwargs: dict[str, Any] = {
            "Bucket": BUCKET,
            "Prefix": prefix,
            **({"ContinuationToken": token} if token else {}),
        }
        page = client.list_objects_v2(**kwargs)
        files += len(page.get("Contents", []))
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return files, time.process_time() - cpu0, time.perf_counter() - wall0


def _child(uri: str, endpoint: str, tasks: int, rounds: int, out: Any) -> None:
    results: dict[str, list[tuple[int, float, float]]] = {mode: [] for mode in MODES}
    _tasks(uri, endpoint, tasks, False, -1)  # warm-up: imports, the first clients
    clients = {
        "botocore_timestamps": _paged_client(endpoint, False),
        "lakecore_timestamps": _paged_client(endpoint, True),
    }
    prefix = uri.removeprefix(f"s3://{BUCKET}/")
    for client in clients.values():
        _paged(client, prefix)
    for round_no in range(rounds):
        order = ("reused", "fresh") if round_no % 2 == 0 else ("fresh", "reused")
        for mode in order:
            results[mode].append(_tasks(uri, endpoint, tasks, mode == "fresh", round_no))
        for mode in sorted(clients, reverse=round_no % 2 == 1):
            results[mode].append(_paged(clients[mode], prefix))
    out.put(results)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4000)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=DEFAULT_LATENCY_MS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    calibration = C.cpu_calibration()
    directories = hash_directories()
    with (
        MotoS3() as moto,
        LatencyProxy(moto.endpoint, latency_ms=args.latency_ms, bandwidth_mbps=0) as proxy,
    ):
        moto.create_bucket(BUCKET)
        moto.put_objects(
            BUCKET,
            (
                (f"lake/{directories[i % len(directories)]}/{i:08d}-node-x.arrow", b"n" * 64)
                for i in range(args.files)
            ),
        )
        C.log(
            f"{args.files} objects in moto behind a {args.latency_ms:g} ms proxy; "
            f"{args.tasks} tasks x {args.rounds} rounds per mode"
        )
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        child = ctx.Process(
            target=_child,
            args=(f"s3://{BUCKET}/lake/", proxy.endpoint, args.tasks, args.rounds, queue),
        )
        child.start()
        results = queue.get(timeout=3600)
        child.join()
        requests = proxy.requests_by_kind()
    summary: dict[str, Any] = {}
    for mode, runs in results.items():
        if any(files != args.files for files, _, _ in runs):
            raise SystemExit(
                f"{mode}: listed {[f for f, _, _ in runs]} files, expected {args.files}"
            )
        summary[mode] = {
            "cpu_seconds": [round(c, 3) for _, c, _ in runs],
            "wall_seconds": [round(w, 3) for _, _, w in runs],
            "cpu_median": round(statistics.median(c for _, c, _ in runs), 3),
            "wall_median": round(statistics.median(w for _, _, w in runs), 3),
        }
    doc = {
        "benchmark": "listing_clients",
        "environment": C.environment(),
        "cpu_calibration": calibration,
        "params": {
            "files": args.files,
            "tasks": args.tasks,
            "rounds": args.rounds,
            "threads": THREADS,
            "latency_ms": args.latency_ms,
            "directories": len(directories),
        },
        "modes": summary,
        "ratios": {
            "fresh_over_reused_cpu": C.ratio(
                summary["fresh"]["cpu_median"], summary["reused"]["cpu_median"]
            ),
            "fresh_over_reused_wall": C.ratio(
                summary["fresh"]["wall_median"], summary["reused"]["wall_median"]
            ),
            "botocore_over_lakecore_timestamps_cpu": C.ratio(
                summary["botocore_timestamps"]["cpu_median"],
                summary["lakecore_timestamps"]["cpu_median"],
            ),
            "botocore_over_lakecore_timestamps_wall": C.ratio(
                summary["botocore_timestamps"]["wall_median"],
                summary["lakecore_timestamps"]["wall_median"],
            ),
        },
        "proxy_requests_by_kind": requests,
    }
    C.print_table(
        "listing in tasks (reused, fresh) and page after page (timestamps; medians)",
        ["mode", "client CPU s", "wall s"],
        [[mode, s["cpu_median"], s["wall_median"]] for mode, s in summary.items()],
    )
    C.log(
        f"fresh / reused: CPU {doc['ratios']['fresh_over_reused_cpu']}x, wall {doc['ratios']['fresh_over_reused_wall']}x; "
        f"effective cores {calibration['effective_cores']}"
    )
    C.log(
        f"botocore's timestamps / lakecore's: CPU {doc['ratios']['botocore_over_lakecore_timestamps_cpu']}x, "
        f"wall {doc['ratios']['botocore_over_lakecore_timestamps_wall']}x"
    )
    json.dump(doc, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
