"""Crash safety of group commit (issue 45): SIGKILL ``lakecore serve`` with batches in flight.

Client processes (``tests/reliability/rest_client.py``) append through one ``lakecore serve``
without pause, most to a table of their own and a pair to a shared one, so that batches hold
several changes. The server is SIGKILLed again and again and restarted on the same port; the
clients wait for it and go on. Each kill is aimed at one of these moments, in turn:

* ``metadata``: up to 30 ms after a new Iceberg metadata file appears (a batch wrote its files
  and is writing its nodes and root);
* ``root``: as soon as the next root file appears (the batch landed; its answers are on their
  way or not yet);
* ``random``: a random moment while appends flow.

While the server is dead nothing writes to the lakehouse, and the check
(``check_served_lake``) holds:

* every append a client got a 200 for is present (its snapshot, an ancestor of the table's
  current one, with its rows);
* every append answered an error is absent, unless the error was ``CommitStateUnknown`` or no
  answer at all (the connection broke): then it is present, with all its rows, or absent, with
  none: never half;
* no table lost a snapshot from one version to the next, and no pointer of any version names a
  missing metadata file;
* the version chain has no gap and every new version passes ``fsck --deep``.

Where each kill landed is told apart by what it left: appends answered nothing that landed
(the kill fell after the root, before the answer), metadata files no version names (after the
batch's files, before its root), appends answered nothing that did not land and left no file
(before the batch wrote anything). At the end the clients stop, the whole chain and every
table are checked once more (and in the long forms ``lakecore fsck --deep --all`` runs, as an
operator would).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import root_node_file_name
from tests.reliability.faulty_storage import emit_summary
from tests.reliability.rest_harness import (
    MAY_HAVE_LANDED,
    REPO,
    Clients,
    Plan,
    ServedLake,
    ServeProcess,
    appends_summary,
    check_served_lake,
    cpu_seconds,
    create_tables,
    load_latency_proxy,
    local_served_lake,
    metadata_files,
    metadata_files_under,
    running_clients,
    s3_served_lake,
    wait_until,
)

pytestmark = pytest.mark.reliability

TRIGGERS = ("metadata", "root", "random")
# After a restart, the kill waits for this many acknowledged appends: appends flow again.
ACKS_BEFORE_KILL = 2
# After a kill, how long the clients get to write down what their broken requests saw.
SETTLE_SECONDS = 0.5
POLL_SECONDS = 0.001
# A kill aimed at a new metadata file falls this long after it at most (at random): the root of
# its batch is at least one root write (40 ms with slow roots, 20 ms on S3) away.
METADATA_SPREAD_SECONDS = 0.03
# On local disk the server's root writes take 40 ms before and after, as a root PUT on S3 may
# (``slow_root_serve``): kills aimed at the moments around the root land there, and changes
# queue behind a root write, so batches hold several (with the default batch settings).
SLOW_ROOTS = "tests.reliability.slow_root_serve"


class Trigger:
    """Waits for the moment a kill is aimed at (see the module docstring)."""

    def __init__(self, lake: ServedLake, locations: list[str], rng: random.Random) -> None:
        self.lake = lake
        self.storage = lake.storage()
        self.locations = locations
        self.rng = rng

    def metadata_count(self) -> int:
        return sum(len(metadata_files_under(self.lake, loc)) for loc in self.locations)

    def wait(self, how: str, timeout: float = 30.0) -> bool:
        """Returns once the moment came (True), or when ``timeout`` passed (False)."""
        if how == "random":
            time.sleep(self.rng.uniform(0.0, 0.4))
            return True
        if how == "root":
            following = root_node_file_name(self.lake.latest() + 1)
            return wait_until(lambda: self.storage.exists(following), timeout, POLL_SECONDS)
        known = self.metadata_count()
        hit = wait_until(lambda: self.metadata_count() > known, timeout, POLL_SECONDS)
        # Somewhere between the batch's files and its root, not always at the first file.
        time.sleep(self.rng.uniform(0.0, METADATA_SPREAD_SECONDS))
        return hit


def run_fsck(lake: ServedLake) -> subprocess.CompletedProcess[str]:
    """``lakecore fsck --deep --all``, as an operator runs it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lakecore.cli",
            "-l",
            lake.uri,
            *lake.check_storage_args,
            "fsck",
            "--deep",
            "--all",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def run_crash(
    tmp_path: Path,
    lake: ServedLake,
    *,
    kills: int,
    plan: Plan,
    seed: int,
    suite: str,
    serve_args: list[str] | None = None,
    serve_module: str = "lakecore.cli",
    cli_fsck: bool = False,
) -> None:
    started, cpu_started = time.monotonic(), cpu_seconds()
    rng = random.Random(seed)
    server = ServeProcess(lake, tmp_path / "serve.log", serve_args or [], serve_module)
    clients = Clients(tmp_path / "clients", plan, 1, lake, commits=None)
    problems: list[str] = []
    landings: dict[str, int] = {t: 0 for t in TRIGGERS}
    kinds = {"after_root": 0, "between_files_and_root": 0, "before_files": 0, "nothing": 0}
    referenced: set[str] = set()
    batches = batched = biggest = 0.0
    check_seconds = 0.0
    landed_unanswered = absent_unanswered = 0
    try:
        with running_clients(clients):
            server.start()
            create_tables(server.url, lake, plan)
            catalog = lake.catalog()
            locations = [catalog.load_table(f"load.{t}").location() for t in plan.tables()]
            trigger = Trigger(lake, locations, rng)
            checked = lake.latest()
            clients.wait_ready()
            clients.release([server.url])
            seen_records = 0
            orphans_before = 0
            for kill in range(kills):
                how = TRIGGERS[kill % len(TRIGGERS)]
                acks = clients.acknowledged()
                assert wait_until(
                    lambda a=acks: clients.acknowledged() >= a + ACKS_BEFORE_KILL, 120, 0.02
                ), f"kill {kill}: no appends acknowledged after the restart\n{server.log_tail()}"
                metrics = server.metrics()
                if trigger.wait(how):
                    landings[how] += 1
                server.kill()
                batches += metrics.get("lakecore_rest_commit_batch_size_count", 0)
                batched += metrics.get("lakecore_rest_commit_batch_size_sum", 0)
                biggest = max(
                    biggest, metrics.get('lakecore_rest_commit_batch_size{quantile="0.99"}', 0)
                )
                # Quiet now: the clients write down what their broken requests saw, then wait.
                time.sleep(SETTLE_SECONDS)
                check_started = time.monotonic()
                records = clients.records()
                latest = lake.latest()
                check = check_served_lake(
                    lake, plan, records, versions=list(range(checked, latest + 1))
                )
                check_seconds += time.monotonic() - check_started
                problems.extend(f"kill {kill} ({how}): {p}" for p in check.problems)
                referenced |= check.referenced
                orphans = len(metadata_files(lake, plan) - referenced)
                new = records[seen_records:]
                unanswered = [r for r in new if r["outcome"] in MAY_HAVE_LANDED]
                landed_now = check.landed_without_answer - landed_unanswered
                absent_now = check.absent_without_answer - absent_unanswered
                landed_unanswered = check.landed_without_answer
                absent_unanswered = check.absent_without_answer
                if landed_now > 0:
                    kinds["after_root"] += 1
                if orphans > orphans_before:
                    kinds["between_files_and_root"] += 1
                if absent_now > 0 and orphans == orphans_before:
                    kinds["before_files"] += 1
                if not unanswered:
                    kinds["nothing"] += 1
                orphans_before = orphans
                seen_records = len(records)
                checked = latest
                server.start()
            # The server came back after the last kill too: appends are acknowledged again.
            acks = clients.acknowledged()
            recovered = wait_until(
                lambda: clients.acknowledged() >= acks + ACKS_BEFORE_KILL, 120, 0.02
            )
            clients.stop()
    finally:
        server.stop()
    records = clients.records()
    final = check_served_lake(lake, plan, records)
    problems.extend(f"at the end: {p}" for p in final.problems)
    fsck = None
    if cli_fsck:
        fsck = run_fsck(lake)
    emit_summary(
        suite,
        **appends_summary(lake, clients, records),
        kills=kills,
        trigger_hits=landings,
        kill_landed=kinds,
        acknowledged=final.acknowledged,
        landed_without_answer=final.landed_without_answer,
        absent_without_answer=final.absent_without_answer,
        orphan_metadata_files=len(metadata_files(lake, plan) - final.referenced),
        versions=final.latest + 1,
        batches=int(batches),
        units_per_batch=round(batched / batches, 2) if batches else None,
        batch_size_p99_max=int(biggest),
        check_seconds=round(check_seconds, 1),
        cpu_seconds=round(cpu_seconds() - cpu_started, 1),
        seconds=round(time.monotonic() - started, 1),
        problems=len(problems),
    )
    assert not problems, "\n".join(problems[:30])
    if fsck is not None:
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert final.acknowledged > 0
    assert recovered, f"no append acknowledged after the last restart\n{server.log_tail()}"
    # Several writers: batches held several changes at times.
    assert biggest >= 2, "no batch held more than one change"


def test_sigkill_serve_with_batches_in_flight(tmp_path: Path) -> None:
    """The short form: 4 clients on local disk (slow roots), 5 kills (two aimed at a new
    metadata file, two at a new root, one at random); the in-process check is ``fsck
    --deep``'s."""
    run_crash(
        tmp_path,
        local_served_lake(tmp_path),
        kills=5,
        plan=Plan(own=2, pairs=1),
        seed=45,
        suite="rest_crash.local",
        serve_module=SLOW_ROOTS,
    )


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sigkill_serve_many_times(tmp_path: Path) -> None:
    """The long form on local disk: 10 clients, 60 kills."""
    run_crash(
        tmp_path,
        local_served_lake(tmp_path),
        kills=60,
        plan=Plan(own=6, pairs=2),
        seed=4545,
        suite="rest_crash.local.slow",
        serve_module=SLOW_ROOTS,
        cli_fsck=True,
    )


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sigkill_serve_behind_latency_many_times(tmp_path: Path, s3_server: Any) -> None:
    """The long form on moto behind the 20 ms proxy: 10 clients, 30 kills."""
    proxy_module = load_latency_proxy()
    with proxy_module.LatencyProxy(s3_server.endpoint, latency_ms=20.0) as proxy:
        run_crash(
            tmp_path,
            s3_served_lake(s3_server, proxy.endpoint),
            kills=30,
            plan=Plan(own=6, pairs=2),
            seed=454545,
            suite="rest_crash.s3.slow",
            cli_fsck=True,
        )
