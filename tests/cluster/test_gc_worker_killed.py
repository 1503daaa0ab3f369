"""A worker of the standalone cluster SIGKILLed in the middle of gc.

gc runs on the session's cluster (``SPARK_MASTER=... ./spark-submit.sh gc``) over a lakehouse
on local disk (the workers share this host's disk) with 12 retained versions and planted
orphans. While a chosen stage of it has tasks running, one worker JVM is killed with SIGKILL
(its executor dies with it). The promise: gc either finishes (Spark recomputes what the lost
executor held) or fails closed, and in both cases every file a retained version reaches is
still there; a rerun on the healed cluster deletes every orphan.

Stages: ``list`` is the listing, reach and anti-join (a lost reach partition must be recomputed,
never read as "nothing reached"); ``delete`` is the batched deletes (batch size 1 here, so the
stage lasts long enough to be hit).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import new_node_file_path, new_table_def_path
from lakecore.core.storage import Storage
from lakecore.lakehouse import Lakehouse
from tests.cluster.test_jobs_on_cluster import _DROPPED_ENV, FUTURE, WRAPPER
from tests.jobs.test_gc import assert_every_version_valid, build_lake, files, plant
from tests.spark_cluster import (
    StandaloneCluster,
    event_log_args,
    free_port,
    get_json,
    read_event_logs,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]

ORPHANS = 120
# The jobs' descriptions (JobContext.stage) that mark the stages.
STAGES = {"list": "lakecore gc: list", "delete": "lakecore gc: delete"}


def _settings_dir(base: Path) -> Path:
    """conf/maintenance-local.json with one file per delete batch (one task per orphan) and the
    listing always fanned out over the hash directories."""
    conf = base / "conf"
    conf.mkdir()
    settings = json.loads((WRAPPER.parent / "conf" / "maintenance-local.json").read_text())
    settings["gc_delete_batch_size"] = 1
    # The hash directories listed by executors (as in a large lakehouse), not one flat listing
    # on the driver: the listing stage must have tasks to lose.
    settings["gc_flat_listing_max_files"] = 0
    (conf / "maintenance-local.json").write_text(json.dumps(settings))
    return conf


def _kill_when_running(
    cluster: StandaloneCluster,
    ui_port: int,
    marker: str,
    victim: int,
    done: threading.Event,
    outcome: dict[str, Any],
) -> None:
    """Poll the driver's REST API; kill the worker once a job matching ``marker`` is a quarter
    done with tasks still running."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    while not done.is_set():
        try:
            apps = get_json(base, timeout=2)
            for app in apps:
                for job in get_json(f"{base}/{app['id']}/jobs?status=running", timeout=2):
                    # In the middle: a quarter of the tasks done, others running.
                    if (
                        marker in job.get("description", "")
                        and job.get("numActiveTasks", 0) > 0
                        and job.get("numCompletedTasks", 0) >= job.get("numTasks", 0) // 4
                    ):
                        outcome["job"] = job.get("description")
                        outcome["tasks_done_before_kill"] = job.get("numCompletedTasks")
                        outcome["tasks_total"] = job.get("numTasks")
                        outcome["killed_at"] = time.monotonic()
                        cluster.kill_worker(victim)
                        return
        except (OSError, ValueError) as exc:  # the driver's UI is not up yet, or already gone
            outcome["last_poll_error"] = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)


def _gc(
    cluster: StandaloneCluster,
    base: Path,
    lake: Path,
    conf: Path,
    name: str,
    ui_port: int | None = None,
) -> tuple[subprocess.Popen[str], Path, Path]:
    events = base / f"events-{name}"
    report = base / f"{name}.json"
    spark_args = event_log_args(events)
    if ui_port is not None:
        spark_args += ["--conf", f"spark.ui.port={ui_port}"]
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(
        {
            "SPARK_MASTER": cluster.url,
            "LAKECORE_SPARK_ARGS": " ".join(spark_args),
            "LAKECORE_CONF_DIR": str(conf),
        }
    )
    process = subprocess.Popen(
        [
            str(WRAPPER),
            "gc",
            "--lakehouse",
            str(lake),
            "--now",
            FUTURE,
            "--i-understand-grace-risk",
            "--report",
            str(report),
        ],
        cwd=base,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, report, events


@pytest.mark.parametrize(
    "stage",
    [
        # Each kill waits for a new worker and reruns gc: 153 s of a fresh clone's make test,
        # more than CI's budget leaves; both under -m slow.
        pytest.param("list", marks=pytest.mark.slow),
        pytest.param("delete", marks=pytest.mark.slow),
    ],
)
def test_worker_killed_in_the_middle_of_gc(
    stage: str, spark_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    lh = build_lake(str(lake), commits=12)
    storage = Storage(str(lake))
    orphans = {plant(storage, new_node_file_path(), b"x" * 64) for _ in range(ORPHANS // 2)}
    orphans |= {
        plant(storage, new_table_def_path("ns", f"gone{i}")) for i in range(ORPHANS - len(orphans))
    }
    reachable_before = files(lake) - orphans
    conf = _settings_dir(tmp_path)
    spark_cluster.wait_for_idle()

    ui_port = free_port()
    done = threading.Event()
    outcome: dict[str, Any] = {}
    victim = 1
    started = time.monotonic()
    process, report_path, events = _gc(
        spark_cluster, tmp_path, lake, conf, f"killed-{stage}", ui_port
    )
    killer = threading.Thread(
        target=_kill_when_running,
        args=(spark_cluster, ui_port, STAGES[stage], victim, done, outcome),
        daemon=True,
    )
    killer.start()
    try:
        output, _ = process.communicate(timeout=900)
    finally:
        done.set()
        killer.join(timeout=30)
    seconds = time.monotonic() - started
    try:
        assert "killed_at" in outcome, (
            f"the {stage} stage was never seen running ({outcome}); output:\n{output[-3000:]}"
        )
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        (app,) = read_event_logs(events)
        # Nothing any retained version reaches is gone, whatever the job's outcome.
        assert reachable_before <= files(lake), sorted(reachable_before - files(lake))[:5]
        assert_every_version_valid(str(lake))
        deleted_by_killed_run = len(orphans - files(lake))
        print(
            "GC-KILL "
            + json.dumps(
                {
                    "stage": stage,
                    "exit": process.returncode,
                    "seconds": round(seconds, 1),
                    "killed_during": outcome["job"],
                    "tasks_done_before_kill": outcome["tasks_done_before_kill"],
                    "tasks_total": outcome["tasks_total"],
                    "failed_tasks": app.failed_tasks,
                    "executors": len(app.executors),
                    "orphans": len(orphans),
                    "deleted": deleted_by_killed_run,
                    "reported_deleted": report.get("counts", {}).get("orphans_deleted"),
                }
            )
        )
        if process.returncode == 0:
            # Spark re-ran the lost tasks on the surviving executor: a complete, correct gc.
            assert not orphans & files(lake)
            if stage == "delete":
                # The re-run of a lost delete task finds what the killed attempt already
                # deleted gone and does not count it (docs/reliability.md#limits): an
                # undercount only.
                assert report["counts"]["orphans_deleted"] <= len(orphans), report["counts"]
            else:
                assert report["counts"]["orphans_deleted"] == len(orphans), report["counts"]
            assert app.failed_tasks > 0 or len(app.executors) > 1
        else:
            # Failed closed: a failure code, one line naming the error, nothing reachable lost.
            assert process.returncode == 4, output[-3000:]
            assert report["status"] == "failed" and report["error"], report
    finally:
        if "killed_at" in outcome:
            spark_cluster.replace_worker(victim)
    # The healed cluster finishes the work: every orphan goes, every retained version stays whole.
    rerun, _, _ = _gc(spark_cluster, tmp_path, lake, conf, f"rerun-{stage}")
    output, _ = rerun.communicate(timeout=900)
    assert rerun.returncode == 0, output[-3000:]
    assert not orphans & files(lake)
    assert reachable_before <= files(lake)
    assert Lakehouse.open(str(lake)).version == lh.version
    assert_every_version_valid(str(lake))
