"""Child-process bodies of the kill and soak suites (a small module, so that a spawned child
imports little more than lakecore).

Every committed transaction is acknowledged by one JSON line appended (and fsynced) to an ack
file *after* ``commit()`` returned, so a line proves the commit was acknowledged to its caller;
a commit killed between its root and its line is landed but unacknowledged, which is allowed.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any, TextIO

from lakecore.errors import CommitConflictError, LakecoreError
from lakecore.lakehouse import Lakehouse

NAMESPACE = "ns"
COUNTER = "counter"


def create_catalog(
    uri: str, storage_options: dict[str, Any] | None = None, **definition: Any
) -> Lakehouse:
    """A lakehouse with namespace ``ns`` and the table ``counter`` (property n = 0)."""
    lh = Lakehouse.create(uri, name="reliability", storage_options=storage_options, **definition)
    with lh.transaction() as tx:
        tx.create_namespace(NAMESPACE)
        tx.create_table(NAMESPACE, COUNTER, properties={"n": "0"})
    return lh


def _ack(out: TextIO, record: dict[str, Any]) -> None:
    out.write(json.dumps(record, sort_keys=True) + "\n")
    out.flush()
    os.fsync(out.fileno())


def one_transaction(lh: Lakehouse, worker: str, i: int) -> tuple[int, str, str, int]:
    """Even i: create table ``<worker>_<i>``; odd i: increment the counter. Returns
    (version, op, argument, retries inside commit). Raises CommitConflictError on a refused
    lost update (the caller redoes the whole transaction)."""
    with lh.transaction() as tx:
        if i % 2 == 0:
            op, arg = "create", f"{worker}_{i}"
            tx.create_table(NAMESPACE, arg, properties={"by": worker})
        else:
            current = int(tx.load_table(NAMESPACE, COUNTER).properties["n"])
            op, arg = "increment", str(current + 1)
            tx.update_table(NAMESPACE, COUNTER, properties={"n": arg})
    assert tx.committed_version is not None
    retries = tx.outcome.conflicts if tx.outcome is not None else 0
    return tx.committed_version, op, arg, retries


def committer(
    uri: str,
    storage_options: dict[str, Any] | None,
    worker: str,
    ack_path: str,
    ready_path: str,
    n_tx: int | None = None,
) -> None:
    """Commit transactions in a loop (forever, or ``n_tx``), acknowledging each one. The ready
    file appears after the first acknowledged commit: by then every lazy import is done, so a
    kill at a random moment after it falls into the steady state of commits."""
    lh = Lakehouse.open(uri, storage_options=storage_options)
    i = 0
    started = time.monotonic()
    conflicts = 0
    retries = 0
    with open(ack_path, "a", encoding="utf-8") as out:
        while n_tx is None or i < n_tx:
            lh.refresh()
            try:
                version, op, arg, r = one_transaction(lh, worker, i)
            except CommitConflictError:
                conflicts += 1  # a lost update was refused: redo the whole transaction
                continue
            retries += r
            _ack(out, {"v": version, "op": op, "arg": arg, "worker": worker})
            if i == 0:
                Path(ready_path).write_text("ready")
            i += 1
        _ack(
            out,
            {
                "done": worker,
                "conflicts": conflicts,
                "retries": retries,
                "seconds": round(time.monotonic() - started, 3),
            },
        )


def read_acks(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(commit acks, worker summaries) of an ack file; a torn last line is ignored."""
    commits: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    p = Path(path)
    if not p.exists():
        return commits, done
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # killed mid-line: that commit was not acknowledged
        (done if "done" in record else commits).append(record)
    return commits, done


# After the stop, a loop whose flushes all lost their race keeps flushing this long for one
# commit: at 60 writer commits a second a flush can be refused every time, and a soak whose
# flush never landed has not checked a flush commit against the chain.
FLUSH_DRAIN_SECONDS = 60.0


def maintenance_loop(
    uri: str,
    storage_options: dict[str, Any] | None,
    stop_path: str,
    report_path: str,
    kinds: list[str],
    gc_grace_millis: int = 0,
    ready_path: str | None = None,
) -> None:
    """Run maintenance alongside writers until ``stop_path`` exists: an in-process full flush
    committed like the flush job does (``jobs.flush_job``), and optionally in-process gc
    (``kinds``: "flush", "gc", "compact"). ``ready_path`` appears once the imports are done, so
    the writers can wait for it rather than finish before the first flush. Past the stop, a
    loop with no flush commit yet flushes on, alone, for up to ``FLUSH_DRAIN_SECONDS``. Writes a
    JSON report of what it did."""
    from lakecore.core.storage import Storage
    from lakecore.core.tree import FlushMode, FlushPolicy, TreeShape
    from lakecore.lakehouse.flush import flush_still_valid
    from lakecore.lakehouse.flush import flushed_root_plan as flush_plan
    from lakecore.maintenance.flush import flush_in_process

    counts: dict[str, int] = {}
    errors: list[str] = []
    committed: list[int] = []  # the versions the maintenance commits claim
    gc_deleted: list[str] = []  # what gc deleted, for a test to name what went missing
    rng = random.Random(os.getpid())

    def bump(name: str, by: int = 1) -> None:
        counts[name] = counts.get(name, 0) + by

    if ready_path is not None:
        Path(ready_path).write_text("ready")
    drain_until: float | None = None
    while True:
        if drain_until is None and os.path.exists(stop_path):
            drain_until = time.monotonic() + FLUSH_DRAIN_SECONDS
        if drain_until is not None and (
            "flush" not in kinds
            or counts.get("flush_commits", 0) > 0
            or time.monotonic() > drain_until
        ):
            break
        for kind in kinds:
            try:
                if kind == "flush":
                    if drain_until is None:
                        bump("flush_attempts_alongside")
                    lh = Lakehouse.open(uri, storage_options=storage_options)
                    base = lh.root_info
                    shape = TreeShape.of(lh.lakehouse_def)
                    flushed, _run, _results = flush_in_process(
                        lh.store, shape, base.node, FlushPolicy(FlushMode.FULL), 4
                    )
                    outcome = lh.commit_plan(flush_plan(lh, base, flushed), flush_still_valid(base))
                    committed.append(outcome.version)
                    bump("flush_commits")
                    bump("flush_commit_retries", outcome.conflicts)
                elif kind == "gc":
                    from lakecore.maintenance.gc import gc_in_process

                    result = gc_in_process(
                        Storage(uri, storage_options),
                        now_millis=int(time.time() * 1000),
                        grace_millis=gc_grace_millis,
                    )
                    bump("gc_runs")
                    bump("gc_deleted", result.deleted.deleted)
                    gc_deleted.extend(result.deleted.deleted_paths)
                elif kind == "compact":
                    bump("versions_expired", compact_once(uri, storage_options))
                    bump("compact_runs")
            except CommitConflictError:
                bump(f"{kind}_conflicts")
            except LakecoreError as exc:
                bump(f"{kind}_errors")
                errors.append(exc.one_line())
            time.sleep(rng.uniform(0.0, 0.05))
    Path(report_path).write_text(
        json.dumps(
            {
                "counts": counts,
                "errors": errors[:20],
                "versions": committed,
                "gc_deleted": gc_deleted[:1000],
            }
        )
    )


def compact_once(uri: str, storage_options: dict[str, Any] | None) -> int:
    """One version-compaction run: the compact-versions job's steps in one process
    (``lakecore.maintenance.expire.expire_in_process``). Returns how many versions expired."""
    from lakecore.core.storage import Storage
    from lakecore.maintenance.expire import expire_in_process

    result = expire_in_process(Storage(uri, storage_options), now_millis=int(time.time() * 1000))
    return len(result.plan.expired)
