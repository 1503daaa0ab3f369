"""Under load, nothing lost (issue 45): client processes append through ``lakecore serve``.

Each client is a process of its own (``tests/reliability/rest_client.py``) appending with
pyiceberg's ``RestCatalog``; most append to a table of their own, pairs share one (pyiceberg
retries the 409 of a lost race, ``commit.retry.*``). The clients talk to one ``lakecore serve``
process, or to two on one lakehouse (a pair's two clients then on different servers, so their
races cross processes); the lakehouse is on local disk, or on moto's S3 behind the latency
proxy (20 ms a request: batches hold what queues during a root write).

Afterwards (``check_served_lake``): every append was acknowledged, every acknowledged append is
its table's snapshot and its rows are there once, no table lost a snapshot from one version to
the next, the version chain has no gap, every retained version passes ``fsck --deep``, and
every table's pointer in every version names a metadata file that exists. And a keep-alive
connection opened when the servers started answers again after 6 s idle: a server that closed
it meanwhile would reset the commit a client sends on it after writing its data files.

The short forms run in ``make test``; ``-m slow`` runs many more clients and appends, on both
storages, with one and two servers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.pointer import pointer_properties
from lakecore.lakehouse import Lakehouse
from tests.reliability.faulty_storage import emit_summary
from tests.reliability.rest_client import CLIENT_PROPERTY, SEQ_PROPERTY, ids_of
from tests.reliability.rest_harness import (
    NAMESPACE,
    Clients,
    IdleConnection,
    Plan,
    ServedLake,
    appends_summary,
    check_served_lake,
    cpu_seconds,
    create_tables,
    load_latency_proxy,
    local_served_lake,
    metadata_files,
    running_clients,
    s3_served_lake,
    serving,
)

pytestmark = pytest.mark.reliability

LATENCY_MS = 20.0
# A client writes its data files between loading a table and committing to it, seconds on its
# pooled connection: the server must not close that connection meanwhile.
IDLE_SECONDS = 6.0
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("client", pa.string())])


@pytest.fixture
def proxied_s3(s3_server: Any) -> Iterator[tuple[Any, str]]:
    """The session's moto behind a latency proxy of this test's: (the S3 server, the proxy's
    endpoint)."""
    proxy_module = load_latency_proxy()
    with proxy_module.LatencyProxy(s3_server.endpoint, latency_ms=LATENCY_MS) as proxy:
        yield s3_server, proxy.endpoint


def _lake(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ServedLake:
    if kind == "local":
        return local_served_lake(tmp_path)
    s3, endpoint = request.getfixturevalue("proxied_s3")
    return s3_served_lake(s3, endpoint)


def run_load(
    tmp_path: Path,
    lake: ServedLake,
    *,
    servers: int,
    plan: Plan,
    commits: int,
    suite: str,
    timeout: float,
) -> None:
    started, cpu_started = time.monotonic(), cpu_seconds()
    clients = Clients(tmp_path / "clients", plan, servers, lake, commits=commits)
    # The clients import while the servers start.
    with running_clients(clients), serving(lake, tmp_path, servers) as processes:
        urls = [p.url for p in processes]
        # A client's pooled connection, idle while it writes its data files: a server that
        # closed it meanwhile would reset the commit the client sends on it.
        idle = IdleConnection(urls[0], IDLE_SECONDS)
        create_tables(urls[0], lake, plan)
        clients.wait_ready()
        ready = time.monotonic()
        clients.release(urls)
        clients.wait(timeout)
        appending = time.monotonic() - ready
        reused = idle.outcome()
        metrics = [p.metrics() for p in processes]
        for p in processes:
            assert p.alive(), f"a server died: {p.log_tail()}"
    records = clients.records()
    checked = time.monotonic()
    check = check_served_lake(lake, plan, records)
    orphans = len(metadata_files(lake, plan) - check.referenced)
    batches = sum(m.get("lakecore_rest_commit_batches_total", 0) for m in metrics)
    committed = sum(
        m.get('lakecore_rest_commit_units_total{outcome="committed"}', 0) for m in metrics
    )
    emit_summary(
        suite,
        **appends_summary(lake, clients, records),
        servers=servers,
        versions=check.latest + 1,
        versions_checked=check.versions_checked,
        snapshots=check.snapshots,
        rows=check.rows,
        batches=int(batches),
        units_per_batch=round(committed / batches, 2) if batches else None,
        root_conflicts=int(sum(m.get("lakecore_rest_root_conflicts_total", 0) for m in metrics)),
        restagings=int(sum(m.get("lakecore_rest_commit_restagings_total", 0) for m in metrics)),
        appends_per_second=round(len(records) / appending, 1),
        start_seconds=round(ready - started, 1),
        append_seconds=round(appending, 1),
        orphan_metadata_files=orphans,
        check_seconds=round(time.monotonic() - checked, 1),
        cpu_seconds=round(cpu_seconds() - cpu_started, 1),
        seconds=round(time.monotonic() - started, 1),
        problems=len(check.problems),
    )
    assert not check.problems, "\n".join(check.problems[:30])
    assert reused == "200", f"a connection idle for {IDLE_SECONDS}s: {reused}"
    assert len(records) == len(clients.specs) * commits
    not_ok = [r for r in records if r["outcome"] != "ok"]
    assert not not_ok, f"appends not acknowledged without a fault: {not_ok[:5]}"
    assert check.acknowledged == len(records)
    if servers == 1:  # no batch lost a race: every metadata file written is named
        assert orphans == 0
    # The appends and the tables' creates, nothing else: one version per batch at most.
    assert check.latest <= batches + len(plan.tables()) + 2


def test_load_two_servers_local_disk(tmp_path: Path) -> None:
    """The short form: 5 clients (3 on tables of their own, a pair sharing one) on two server
    processes over one lakehouse on local disk."""
    run_load(
        tmp_path,
        local_served_lake(tmp_path),
        servers=2,
        plan=Plan(own=3, pairs=1),
        commits=8,
        suite="rest_load.local.2",
        timeout=120,
    )


def test_load_one_server_behind_latency(tmp_path: Path, proxied_s3: tuple[Any, str]) -> None:
    """The short form on moto behind the 20 ms proxy: 4 clients on one server."""
    run_load(
        tmp_path,
        s3_served_lake(*proxied_s3),
        servers=1,
        plan=Plan(own=2, pairs=1),
        commits=4,
        suite="rest_load.s3.1",
        timeout=180,
    )


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_load_many(tmp_path: Path, request: pytest.FixtureRequest, kind: str, servers: int) -> None:
    """The long form: 16 clients (10 on tables of their own, 3 pairs), 40 appends each."""
    run_load(
        tmp_path,
        _lake(kind, tmp_path, request),
        servers=servers,
        plan=Plan(own=10, pairs=3),
        commits=40,
        suite=f"rest_load.{kind}.{servers}.slow",
        timeout=1500,
    )


def test_the_check_finds_lost_appends_false_answers_and_missing_files(tmp_path: Path) -> None:
    """``check_served_lake`` itself (in-process, no server): an acknowledged append that is
    missing, a refused one that landed, an append that landed twice, a version that lost a
    snapshot and a pointer to a missing metadata file are each found."""
    lake = local_served_lake(tmp_path)
    plan = Plan(own=1, pairs=0)
    catalog = LakecoreCatalog("setup", uri=lake.uri)
    catalog.create_namespace(NAMESPACE)
    table = catalog.create_table(f"{NAMESPACE}.own0", ARROW_SCHEMA)

    def append(seq: int) -> int:
        ids = ids_of(0, seq, 3)
        table.append(
            pa.table({"id": ids, "client": ["c0"] * 3}, schema=ARROW_SCHEMA),
            snapshot_properties={CLIENT_PROPERTY: "c0", SEQ_PROPERTY: str(seq)},
        )
        snapshot = table.current_snapshot()
        assert snapshot is not None
        return snapshot.snapshot_id

    first, second = append(0), append(1)

    def ok(seq: int, snapshot: int) -> dict[str, Any]:
        return {"client": "c0", "seq": seq, "outcome": "ok", "snapshot": snapshot,
                "summary_seq": str(seq)}  # fmt: skip

    clean = check_served_lake(lake, plan, [ok(0, first), ok(1, second)])
    assert clean.problems == [] and clean.acknowledged == 2 and clean.rows == 6
    false_answers = check_served_lake(
        lake,
        plan,
        [ok(0, first), {"client": "c0", "seq": 1, "outcome": "refused"}, ok(2, 12345)],
    )
    assert any("answered refused" in p for p in false_answers.problems), false_answers.problems
    assert any("c0#2" in p and "is missing" in p for p in false_answers.problems)
    # A version that points the table back at its first append's metadata (the second
    # append's snapshot lost), then at a file that does not exist.
    older = table.metadata.metadata_log[-1].metadata_file
    lakehouse = Lakehouse.open(lake.uri)
    for location in (older, older.replace(".metadata.json", "-gone.metadata.json")):
        with lakehouse.transaction() as tx:
            tx.update_table(
                NAMESPACE,
                "own0",
                format_properties=pointer_properties(location),
                checked_by_catalog=True,
            )
    broken = check_served_lake(lake, plan, [ok(0, first)], scan=False)
    assert any(f"lost snapshots [{second}]" in p for p in broken.problems), broken.problems
    assert any("cannot be read" in p for p in broken.problems), broken.problems
