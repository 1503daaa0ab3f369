"""REST soak: a real ``lakecore serve`` under writers, readers and a hostile client, SIGKILLed
in the middle of the commits and restarted (issue 44, "Tests").

Writers (threads in spawned children, or of this process in the short variant;
``rest_clients.writer_process``) append rows with unique ids through pyiceberg's
``RestCatalog`` to a few tables, retrying 409s (pyiceberg retries a lost race 4 times itself,
then the writer again with the same rows), and acknowledge every append that returned. Readers (threads) send ``loadTable``, ``listTables`` and
``listNamespaces``; one hostile client sends random bodies, paths, methods and tokens. Partway
through, the server is SIGKILLed while the writers commit (with this many writers one is almost
always inside a commit; the writers count the commits whose answer the kill cut off) and
started again on the same port; everyone carries on. At the end:

* every commit a writer got a 200 for is there: its snapshot is in the main branch's lineage
  of its table, and its rows are in a scan of the table, once;
* no batch is in a table twice; a commit whose outcome was unknown landed whole or not at all
  (its three rows all there or none);
* ``lakecore fsck --all --deep`` is clean;
* no request of any client was answered 5xx, and the server's log has no traceback.

Figures (requests by status from the server's ``/metrics``, scraped each second and summed
over both lifetimes, so the last second before the kill is missing; loadTable p50/p99 as the
readers saw them, their own GIL included; the server's RSS at start, before the kill, after the
restart, at the end, its peak and every 30 s; commits acknowledged and found; the CPU the soak
used) go into the suite's one-line JSON summary; docs/reliability.md keeps a run of the
5-minute variant.

``test_rest_soak_short`` (``make test``, marker ``reliability``): 3 writers, 3 readers, 2
tables, 12 s (measured: 48 s of test time on the shared 2-core machine at load average 17,
10 CPU-seconds for the test process, the server and fsck together).
``test_rest_soak_five_minutes`` (``-m slow``): 16 writers in 4 processes, 16 readers, 4
tables, 300 s.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from tests.reliability.faulty_storage import emit_summary
from tests.reliability.rest_clients import (
    NAMESPACE,
    READER_SECRET,
    WRITER_SECRET,
    Hostile,
    Reader,
    Sampler,
    ServerProcess,
    writer_process,
)

pytestmark = pytest.mark.reliability


@dataclass(frozen=True)
class Plan:
    seconds: float
    writers: int
    writer_processes: int
    readers: int
    tables: int
    kill_at: float  # a fraction of ``seconds``


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _wait_for_commits(ack_dir: Path, at_least: int, timeout: float) -> int:
    """Wait until the writers acknowledged ``at_least`` commits; how many they have."""
    deadline = time.monotonic() + timeout
    while True:
        count = sum(
            sum(1 for line in p.read_text().splitlines() if '"snapshot"' in line)
            for p in ack_dir.glob("acks-*.jsonl")
        )
        if count >= at_least or time.monotonic() > deadline:
            return count
        time.sleep(0.2)


def _soak(tmp_path: Path, plan: Plan, suite: str) -> None:
    lake = tmp_path / "lake"
    Lakehouse.create(str(lake))
    catalog = LakecoreCatalog("lakecore", uri=str(lake))
    catalog.create_namespace(NAMESPACE)
    tables = [f"t{i}" for i in range(plan.tables)]
    schema = pa.schema([("id", pa.int64()), ("writer", pa.int64())])
    for name in tables:
        catalog.create_table((NAMESPACE, name), schema)
    token_file = tmp_path / "tokens"
    token_file.write_text(f"etl read-write {WRITER_SECRET}\ndash read-only {READER_SECRET}\n")
    token_file.chmod(0o600)
    ack_dir = tmp_path / "acks"
    ack_dir.mkdir()
    stop_path = tmp_path / "stop"
    log = tmp_path / "server.log"

    server = ServerProcess(lake, token_file, log)
    first_start = server.start()
    stop = threading.Event()
    sampler = Sampler(server, stop)
    sampler.sample()
    readers = [Reader(server.url, stop, tables=tables, seed=i) for i in range(plan.readers)]
    hostile = Hostile(server.url, stop, seed=7)
    clients: list[Any] = [*readers, hostile, sampler]
    threads = [threading.Thread(target=c.run, daemon=True) for c in clients]
    # Writers in spawned children, or (writer_processes 0) threads of this process: the short
    # variant saves the seconds a child takes to import pyiceberg on a loaded machine.
    ctx = multiprocessing.get_context("spawn")
    groups = max(1, plan.writer_processes)
    per_group = plan.writers // groups
    children: list[Any] = [
        (ctx.Process if plan.writer_processes else threading.Thread)(
            target=writer_process,
            args=(server.url, tables, str(ack_dir), str(stop_path), g * per_group, per_group),
        )
        for g in range(groups)
    ]
    cpu_before = os.times()
    wall_started = time.monotonic()
    for child in children:
        child.start()
    # The clock starts once the writers commit (spawned children take seconds to import).
    assert _wait_for_commits(ack_dir, plan.writers, 120) >= plan.writers, (
        "the writers never committed"
    )
    for thread in threads:
        thread.start()
    started = time.monotonic()
    kill_after = plan.seconds * plan.kill_at
    time.sleep(max(0.0, kill_after - (time.monotonic() - started)))
    acknowledged_before_kill = _wait_for_commits(ack_dir, 0, 0)
    server_cpu = dict(sampler.cpu)
    sampler.sample()
    server_cpu.update(sampler.cpu)
    server.kill()
    killed_at = time.monotonic()
    restart = server.start()
    down_seconds = time.monotonic() - killed_at
    time.sleep(max(0.0, plan.seconds - (time.monotonic() - started)))
    sampler.sample()
    stop_path.write_text("stop")
    stop.set()
    for child in children:
        child.join(120)
    for thread in threads:
        thread.join(60)
    soak_seconds = time.monotonic() - started
    sampler.sample()
    server_cpu.update(sampler.cpu)
    exit_code = server.stop()
    wall = time.monotonic() - wall_started
    cpu_after = os.times()

    problems: list[str] = []
    for child in children:
        if getattr(child, "exitcode", 0) != 0:
            problems.append(f"a writer process exited with {child.exitcode}")
    if exit_code != 0:
        problems.append(f"the restarted server exited with {exit_code} on SIGTERM")

    # -- every acknowledged commit, and nothing twice ---------------------------------------------
    acks: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    writer_counts: Counter[str] = Counter()
    for path in sorted(ack_dir.glob("acks-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "snapshot" in record:
                acks.append(record)
            elif "unknown" in record:
                unknown.append(record)
            else:
                problems.append(f"a writer failed: {record.get('error')}")
    for path in ack_dir.glob("done-*.json"):
        writer_counts.update(json.loads(path.read_text()))
    fresh = LakecoreCatalog("check", uri=str(lake))
    found = 0
    rows_by_table: dict[str, Counter[int]] = {}
    lineage: dict[str, set[int]] = {}
    for name in tables:
        table = fresh.load_table((NAMESPACE, name))
        by_id = {s.snapshot_id: s for s in table.metadata.snapshots}
        chain: set[int] = set()
        current = table.current_snapshot()
        while current is not None:
            chain.add(current.snapshot_id)
            parent = current.parent_snapshot_id
            current = by_id.get(parent) if parent is not None else None
        lineage[name] = chain
        rows_by_table[name] = Counter(table.scan().to_arrow().column("id").to_pylist())
    for ack in acks:
        rows = rows_by_table[ack["table"]]
        if ack["snapshot"] not in lineage[ack["table"]]:
            problems.append(f"acknowledged snapshot {ack['snapshot']} of {ack['table']} is lost")
        elif any(rows[i] != 1 for i in ack["ids"]):
            problems.append(
                f"acknowledged rows {ack['ids']} of {ack['table']}: {[rows[i] for i in ack['ids']]}"
            )
        else:
            found += 1
    unknown_landed = 0
    for record in unknown:
        present = [rows_by_table[record["table"]][i] for i in record["unknown"]]
        if present == [1, 1, 1]:
            unknown_landed += 1
        elif present != [0, 0, 0]:
            problems.append(f"a commit of unknown outcome half landed: {record} {present}")
    for name, rows in rows_by_table.items():
        twice = [i for i, n in rows.items() if n > 1]
        if twice:
            problems.append(f"rows in {name} twice: {twice[:5]}")

    # -- fsck, 5xx, tracebacks ---------------------------------------------------------------
    fsck = subprocess.run(
        [sys.executable, "-m", "lakecore.cli", "-l", str(lake), "fsck", "--all", "--deep"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if fsck.returncode != 0:
        problems.append(
            f"fsck --all --deep exit {fsck.returncode}: {fsck.stdout[-500:]} {fsck.stderr[-500:]}"
        )
    for client in [*readers, hostile]:
        problems.extend(client.problems)
    server_log = log.read_text(errors="replace")
    if "Traceback" in server_log:
        at = server_log.index("Traceback")
        problems.append(f"a traceback in the server's log: {server_log[at - 300 : at + 1500]}")

    # -- figures -----------------------------------------------------------------------------------
    by_status: Counter[str] = Counter()
    for counts in sampler.by_pid.values():
        for key, n in counts.items():
            by_status[key.rsplit(" ", 1)[1]] += n
    by_operation: Counter[str] = Counter()
    for counts in sampler.by_pid.values():
        by_operation.update(counts)
    loads = [s for _, s in (t for r in readers for t in r.load_times)]
    rss = [kib for _, _, kib in sampler.rss]
    # The RSS every 30 s (and at the kill and the restart): (seconds into the soak, MiB).
    rss_series: list[tuple[float, float]] = []
    last_pid = None
    for when, pid, kib in sampler.rss:
        at = when - sampler.rss[0][0]
        if pid != last_pid or not rss_series or at - rss_series[-1][0] >= 30:
            rss_series.append((round(at), round(kib / 1024, 1)))
        last_pid = pid
    first_pid = server.lifetimes[0]["pid"]
    first_rss = [kib for _, pid, kib in sampler.rss if pid == first_pid]
    second_rss = [kib for _, pid, kib in sampler.rss if pid != first_pid]
    clients_cpu = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    children_cpu = (cpu_after.children_user - cpu_before.children_user) + (
        cpu_after.children_system - cpu_before.children_system
    )
    total_cpu = clients_cpu + children_cpu + sum(server_cpu.values())
    reader_counts: Counter[str] = Counter()
    for r in readers:
        reader_counts.update(r.counts)
    emit_summary(
        suite,
        command=f"pytest {'-m slow ' if plan.seconds > 60 else ''}tests/reliability/test_rest_soak.py",
        machine=f"{platform.machine()} {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
        cores_used=round(total_cpu / wall, 2),
        soak_seconds=round(soak_seconds, 1),
        writers=plan.writers,
        readers=plan.readers,
        tables=plan.tables,
        server_start_seconds=round(first_start, 2),
        restart_seconds=round(restart, 2),
        down_seconds=round(down_seconds, 2),
        acknowledged_before_kill=acknowledged_before_kill,
        commits_acknowledged=len(acks),
        commits_found=found,
        commits_per_second=round(len(acks) / soak_seconds, 1),
        commits_cut_by_kill=writer_counts.get("in_flight_at_kill", 0),
        unknown_outcomes=len(unknown),
        unknown_that_landed=unknown_landed,
        conflicts_retried=writer_counts.get("conflicts", 0),
        load_table_p50_ms=round(_percentile(loads, 0.5) * 1000, 1),
        load_table_p99_ms=round(_percentile(loads, 0.99) * 1000, 1),
        load_table_mean_ms=round(statistics.fmean(loads) * 1000, 1) if loads else None,
        load_tables=len(loads),
        rss_mib_start=round(first_rss[0] / 1024, 1) if first_rss else None,
        rss_mib_before_kill=round(first_rss[-1] / 1024, 1) if first_rss else None,
        rss_mib_after_restart=round(second_rss[0] / 1024, 1) if second_rss else None,
        rss_mib_end=round(rss[-1] / 1024, 1) if rss else None,
        rss_mib_peak=round(max(rss) / 1024, 1) if rss else None,
        rss_mib_over_time=rss_series,
        requests_by_status=dict(sorted(by_status.items())),
        requests_by_operation=dict(sorted(by_operation.items())),
        reader_answers=dict(reader_counts),
        hostile_answers=dict(hostile.counts),
        fsck=fsck.stdout.strip().splitlines()[-1:] if fsck.stdout else None,
        problems=len(problems),
    )
    assert not problems, "\n".join(problems[:20])
    assert len(acks) > plan.writers and found == len(acks)
    assert sum(r.counts["200"] for r in readers) > 0 and hostile.counts
    assert by_status.get("400", 0) > 0, "the hostile client's requests never reached the server"


def test_rest_soak_short(tmp_path: Path) -> None:
    _soak(
        tmp_path,
        Plan(seconds=12, writers=3, writer_processes=0, readers=3, tables=2, kill_at=0.5),
        "rest_soak_short",
    )


@pytest.mark.slow
def test_rest_soak_five_minutes(tmp_path: Path) -> None:
    _soak(
        tmp_path,
        Plan(seconds=300, writers=16, writer_processes=4, readers=16, tables=4, kill_at=0.6),
        "rest_soak_five_minutes",
    )
