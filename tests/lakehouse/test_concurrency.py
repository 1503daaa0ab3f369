"""Concurrent committers in separate processes, on local disk and on moto's S3 server, and the
difference between snapshot isolation and serializable (write skew)."""

from __future__ import annotations

import multiprocessing
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from lakecore.core.storage import Storage
from lakecore.core.versions import latest_version, list_root_versions
from lakecore.errors import CommitConflictError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version


def _worker(uri: str, options: dict[str, Any], worker: int, n_tx: int) -> dict[str, Any]:
    lh = Lakehouse.open(uri, storage_options=options)
    log: list[tuple[int, str, str]] = []
    conflicts = 0
    retries = 0
    for i in range(n_tx):
        while True:
            lh.refresh()
            try:
                with lh.transaction() as tx:
                    if i % 2 == 0:
                        op, arg = "create", f"w{worker}_{i}"
                        tx.create_table("ns", arg, properties={"by": str(worker)})
                    else:
                        current = int(tx.load_table("ns", "counter").properties["n"])
                        op, arg = "increment", str(current + 1)
                        tx.update_table("ns", "counter", properties={"n": arg})
                assert tx.outcome is not None
                retries += tx.outcome.conflicts
                log.append((tx.committed_version or -1, op, arg))
                break
            except CommitConflictError:
                conflicts += 1  # a lost update was refused: redo the whole transaction
    return {"log": log, "conflicts": conflicts, "retries": retries}


def _run_concurrently(
    uri: str, options: dict[str, Any], workers: int, n_tx: int
) -> list[dict[str, Any]]:
    lh = Lakehouse.create(
        uri,
        name="concurrency",
        storage_options=options,
        order=16,
        node_file_max_size_bytes=64 * 1024,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=128,
    )
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table("ns", "counter", properties={"n": "0"})
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(_worker, uri, options, w, n_tx) for w in range(workers)]
        return [f.result(timeout=600) for f in futures]


def _check_outcome(
    uri: str, options: dict[str, Any], results: list[dict[str, Any]], workers: int, n_tx: int
) -> None:
    storage = Storage(uri, options)
    latest = latest_version(storage)
    assert list_root_versions(storage) == list(range(latest + 1)), "the version chain has a gap"
    log = sorted(entry for r in results for entry in r["log"])
    versions = [v for v, _, _ in log]
    assert len(set(versions)) == len(versions) == workers * n_tx, "two commits claimed one version"
    assert versions[-1] == latest
    # Replay the successful commits in version order: increments must read 1, 2, 3, ...
    increments = [int(arg) for _, op, arg in log if op == "increment"]
    assert increments == list(range(1, len(increments) + 1)), (
        "an increment was lost or applied twice"
    )
    created = {arg for _, op, arg in log if op == "create"}
    lh = Lakehouse.open(uri, storage_options=options)
    assert set(lh.list_tables("ns")) == created | {"counter"}
    assert lh.load_table("ns", "counter").properties["n"] == str(len(increments))
    result = check_version(lh, deep=True)
    assert result.ok, [str(v) for v in result.violations]


def test_concurrent_committers_local(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "lake")
    results = _run_concurrently(uri, {}, workers=4, n_tx=16)
    _check_outcome(uri, {}, results, 4, 16)
    assert sum(r["retries"] + r["conflicts"] for r in results) > 0, (
        "four writers never raced: not a concurrency test"
    )


@pytest.mark.s3
def test_concurrent_committers_s3(s3_server) -> None:  # type: ignore[no-untyped-def]
    uri, options = s3_server.new_root()
    results = _run_concurrently(uri, options, workers=3, n_tx=8)
    _check_outcome(uri, options, results, 3, 8)


def _on_call_lakehouse() -> Lakehouse:
    lh = Lakehouse.create(f"memory://skew/{uuid.uuid4()}", name="skew")
    with lh.transaction() as tx:
        tx.create_namespace("ops")
        tx.create_table("ops", "alice", properties={"on_call": "yes"})
        tx.create_table("ops", "bob", properties={"on_call": "yes"})
    return lh


def _go_off_call(lh: Lakehouse, me: str, other: str, isolation: str) -> Any:
    tx = lh.transaction(isolation=isolation)  # type: ignore[arg-type]
    # The invariant "someone stays on call" is checked by reading the other row.
    assert tx.load_table("ops", other).properties["on_call"] == "yes"
    tx.load_table("ops", me)
    tx.update_table("ops", me, properties={"on_call": "no"})
    return tx


def test_snapshot_isolation_allows_write_skew() -> None:
    lh = _on_call_lakehouse()
    second = Lakehouse.open(lh.uri)
    tx1 = _go_off_call(lh, "alice", "bob", "snapshot")
    tx2 = _go_off_call(second, "bob", "alice", "snapshot")
    tx1.commit()
    tx2.commit()  # disjoint write sets: snapshot isolation lets both through
    final = Lakehouse.open(lh.uri)
    assert [final.load_table("ops", n).properties["on_call"] for n in ("alice", "bob")] == [
        "no",
        "no",
    ]


def test_serializable_refuses_write_skew() -> None:
    lh = _on_call_lakehouse()
    second = Lakehouse.open(lh.uri)
    tx1 = _go_off_call(lh, "alice", "bob", "serializable")
    tx2 = _go_off_call(second, "bob", "alice", "serializable")
    tx1.commit()
    with pytest.raises(CommitConflictError, match="read"):
        tx2.commit()
    final = Lakehouse.open(lh.uri)
    assert [final.load_table("ops", n).properties["on_call"] for n in ("alice", "bob")] == [
        "no",
        "yes",
    ]


def test_serializable_refuses_a_phantom_in_a_listed_range() -> None:
    lh = _on_call_lakehouse()
    second = Lakehouse.open(lh.uri)
    tx1 = lh.transaction(isolation="serializable")
    assert tx1.list_tables("ops") == ["alice", "bob"]
    tx1.update_table("ops", "alice", properties={"team_size": "2"})
    with second.transaction() as tx2:
        tx2.create_table("ops", "carol")
    with pytest.raises(CommitConflictError, match="range"):
        tx1.commit()


def test_lost_update_is_refused_under_snapshot_isolation() -> None:
    lh = _on_call_lakehouse()
    second = Lakehouse.open(lh.uri)
    tx1 = lh.transaction()
    tx2 = second.transaction()
    tx1.update_table("ops", "alice", properties={"v": "1"})
    tx2.update_table("ops", "alice", properties={"v": "2"})
    tx1.commit()
    with pytest.raises(CommitConflictError, match="changed by another commit"):
        tx2.commit()
    assert Lakehouse.open(lh.uri).load_table("ops", "alice").properties["v"] == "1"


def test_create_table_in_a_concurrently_dropped_namespace_is_refused() -> None:
    lh = Lakehouse.create(f"memory://guard/{uuid.uuid4()}")
    with lh.transaction() as tx:
        tx.create_namespace("tmp")
    second = Lakehouse.open(lh.uri)
    tx1 = lh.transaction()
    tx1.create_table("tmp", "t")
    with second.transaction() as tx2:
        tx2.drop_namespace("tmp")
    with pytest.raises(CommitConflictError):
        tx1.commit()
    assert Lakehouse.open(lh.uri).list_namespaces() == []


def test_disjoint_concurrent_commits_rebase_and_both_land() -> None:
    lh = _on_call_lakehouse()
    second = Lakehouse.open(lh.uri)
    tx1 = lh.transaction()
    tx2 = second.transaction()
    tx1.create_table("ops", "carol")
    tx2.create_table("ops", "dave")
    v1 = tx1.commit()
    v2 = tx2.commit()
    assert v2 == v1 + 1 and tx2.outcome is not None and tx2.outcome.conflicts == 1
    assert Lakehouse.open(lh.uri).list_tables("ops") == ["alice", "bob", "carol", "dave"]
