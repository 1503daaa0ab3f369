"""Every job on a real Spark standalone cluster, submitted the two documented ways, on moto S3.

    SPARK_MASTER=spark://127.0.0.1:PORT ./spark-submit.sh JOB ...     (no --master flag)
    SPARK_MASTER=spark://127.0.0.1:PORT ./spark-submit.sh --cluster JOB ...

The cluster (``spark_cluster``: one master, two one-core workers on 127.0.0.1) and the S3
server are the session's. The workers have no AWS credentials; the submissions give the
executors theirs the documented way (``spark.executorEnv.*`` in LAKECORE_SPARK_ARGS), and the
driver has them in its environment, as a user's shell would. The submissions run without
SPARK_LOCAL_IP, PYTHONPATH or PYSPARK_*: the wrapper must set up what it needs itself.

What proves a job ran on the cluster: its event log (written by the driver into a folder per
submission) names the master, shows executors on the workers and tasks that succeeded on them
and none on the driver, and the master's JSON API lists the application as FINISHED.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.versions import list_root_versions
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.demo import leave_crashed_commit
from tests.conftest import S3TestServer
from tests.jobs.test_gc import assert_every_version_valid, build_lake
from tests.spark_cluster import (
    AppRun,
    StandaloneCluster,
    event_log_args,
    non_loopback_address,
    read_event_logs,
)

pytestmark = [pytest.mark.cluster, pytest.mark.s3, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "spark-submit.sh"
FUTURE = str(int(time.time() * 1000) + 365 * 86_400_000)
SUBMIT_TIMEOUT = 900
# Environment a submission must not depend on: the wrapper sets up what it needs.
_DROPPED_ENV = (
    "SPARK_LOCAL_IP",
    "PYTHONPATH",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_HOME",
    "LAKECORE_SPARK_ARGS",
    "SPARK_MASTER",
    "LAKECORE_DEPLOY_MODE",
)
EXECUTOR_CREDENTIALS = [
    "--conf",
    "spark.executorEnv.AWS_ACCESS_KEY_ID=lakecore-test",
    "--conf",
    "spark.executorEnv.AWS_SECRET_ACCESS_KEY=lakecore-test",
]
MODES = {"spark_master": [], "cluster": ["--cluster"], "local": []}


@dataclass
class Submitted:
    job: str
    code: int
    stdout: str
    stderr: str
    report: dict[str, Any]
    apps: list[AppRun]
    seconds: float

    def explain(self) -> str:
        return f"exit {self.code}\n{self.stdout[-2000:]}\n{self.stderr[-4000:]}"


def submit(
    cluster: StandaloneCluster,
    s3: S3TestServer,
    base: Path,
    mode: str,
    job: str,
    lakehouse: str,
    *options: str,
    executor_credentials: bool = True,
) -> Submitted:
    """One ``./spark-submit.sh`` run on the cluster; its report and event log."""
    name = f"{mode}-{job}-{uuid.uuid4().hex[:6]}"
    events = base / "events" / name
    report = base / "reports" / f"{name}.json"
    spark_args = event_log_args(events) + (EXECUTOR_CREDENTIALS if executor_credentials else [])
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["LAKECORE_SPARK_ARGS"] = " ".join(spark_args)
    if mode != "local":
        env["SPARK_MASTER"] = cluster.url
    argv = [
        str(WRAPPER),
        *MODES[mode],
        job,
        "--lakehouse",
        lakehouse,
        "--storage-option",
        f"endpoint_url={s3.endpoint}",
        *options,
        "--report",
        str(report),
    ]
    cluster.wait_for_idle()  # the previous application has let go of both executors
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=base, env=env, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT, check=False
    )
    seconds = time.monotonic() - started
    print(f"CLUSTER-TIME {mode} {job} {seconds:.1f}s exit {done.returncode}")
    data = json.loads(report.read_text()) if report.exists() else {}
    return Submitted(
        job, done.returncode, done.stdout, done.stderr, data, read_event_logs(events), seconds
    )


def assert_ran_on_the_cluster(cluster: StandaloneCluster, run: Submitted, mode: str) -> AppRun:
    """The job's one application ran on this master, with tasks done by executors on the workers."""
    assert len(run.apps) == 1, (
        f"{run.job}: expected one application's event log, got {len(run.apps)}"
    )
    app = run.apps[0]
    assert app.spark_properties.get("spark.master") == cluster.url, app.spark_properties.get(
        "spark.master"
    )
    assert cluster.completed_app(app.app_id)["state"] == "FINISHED"
    assert app.executors, f"{run.job}: no executor joined {app.app_id}"
    assert "driver" not in app.executors and all(
        host == cluster.host for host in app.executors.values()
    )
    assert app.tasks > 0, f"{run.job}: no task succeeded in {app.app_id}"
    assert set(app.tasks_by_executor) <= set(app.executors), (
        app.tasks_by_executor
    )  # none on the driver
    if mode == "cluster":
        # The executors ran the shipped archive's Python, not the checkout's .venv.
        assert app.spark_properties.get("spark.pyspark.python") == "./environment/bin/python"
        assert "lakecore-venv-executors-" in app.spark_properties.get("spark.archives", "")
    # The driver is not bound to loopback on a cluster (executors on other hosts must reach it).
    if non_loopback_address() is not None:
        assert app.spark_properties.get("spark.driver.host") != "127.0.0.1"
    return app


def tables(uri: str, options: dict[str, Any], version: int | None = None) -> dict[str, list[str]]:
    lh = Lakehouse.open(uri, storage_options=options, version=version)
    return {ns: lh.list_tables(ns) for ns in lh.list_namespaces()}


EVERY_JOB = ("validate", "flush", "compact-versions", "gc", "export", "repair")
# make test's share: the jobs that fan out over S3 from the executors (validate, gc, export)
# and repair. Flush and compact-versions run on a standalone cluster in every make test too,
# in tests/airflow's end-to-end DAG run (on local lakehouses), and every job on this cluster on
# S3 is the slow variant (two submissions more, about 70 s of a loaded run's test time).
FAN_OUT_JOBS = ("validate", "gc", "export", "repair")


@pytest.mark.parametrize(
    ("mode", "jobs"),
    [
        pytest.param("spark_master", FAN_OUT_JOBS, id="spark_master"),
        pytest.param(
            "spark_master", EVERY_JOB, id="spark_master-every-job", marks=pytest.mark.slow
        ),
        # The packed virtualenv (--cluster): validate shows that the archive ships and that the
        # executors run lakecore from it (assert_ran_on_the_cluster); every job runs the same
        # code on the same cluster in spark_master mode above. Every job this way too is the
        # slow variant: five more submissions, about 150 s on a two-core machine.
        # Packing the virtualenv (some 1 GB with pyspark) is most of its cost: 239 s of a loaded
        # run's test time for one validate, on the worker that also runs spark_master above.
        pytest.param("cluster", ("validate",), id="cluster", marks=pytest.mark.slow),
        pytest.param("cluster", EVERY_JOB, id="cluster-every-job", marks=pytest.mark.slow),
        # The same jobs in local mode (local[*]), for the timing comparison in the README.
        pytest.param("local", EVERY_JOB, id="local", marks=pytest.mark.slow),
    ],
)
def test_every_job_on_the_cluster(
    mode: str,
    jobs: tuple[str, ...],
    spark_cluster: StandaloneCluster,
    s3_server: S3TestServer,
    tmp_path: Path,
) -> None:
    uri, options = s3_server.new_root()
    lh = build_lake(uri, options, commits=12)
    leave_crashed_commit(lh)  # a dead writer's files: what gc must find
    built = lh.version
    content = tables(uri, options)
    times: dict[str, float] = {}

    def run(job: str, *job_options: str, executors: bool = True) -> Submitted:
        result = submit(spark_cluster, s3_server, tmp_path, mode, job, uri, *job_options)
        times[job] = round(result.seconds, 1)
        assert result.code == 0, result.explain()
        assert result.report["status"] == "ok" and result.report["exit_code"] == 0, result.report
        if executors and mode != "local":
            assert_ran_on_the_cluster(spark_cluster, result, mode)
        return result

    validate = run("validate", "--no-expectations")
    assert validate.report["counts"]["violations"] == 0
    assert validate.report["base_version"] == built
    assert validate.report["counts"]["nodes_checked"] > 1

    if "flush" in jobs:
        flush = run("flush", "--mode", "full")
        assert flush.report["new_version"] == built + 1
        assert flush.report["counts"]["root_messages_after"] == 0
        assert tables(uri, options) == content

    if "compact-versions" in jobs:
        compact = run("compact-versions", "--now", FUTURE, "--i-understand-expiry-risk")
        assert compact.report["counts"]["expired_versions"] > 0
        assert compact.report["counts"]["files_deleted"] > 0
        assert (
            len(list_root_versions(lh.storage))
            == compact.report["counts"]["versions_before"]
            - compact.report["counts"]["expired_versions"]
        )

    if "gc" in jobs:
        gc = run("gc", "--now", FUTURE, "--i-understand-grace-risk")
        assert (
            gc.report["counts"]["orphans_deleted"] >= 2
        )  # at least the crashed commit's node and definition
        assert gc.report["counts"]["orphans_deleted"] == gc.report["counts"]["orphans_to_delete"]
        assert_every_version_valid(uri, options)  # nothing a retained version reaches was deleted
        assert tables(uri, options) == content

    if "export" in jobs:
        target = f"s3://{s3_server.bucket}/{uuid.uuid4()}/"
        export = run("export", "--name", "nightly", "--mode", "full", "--target", target)
        assert export.report["counts"]["files_copied"] > 0
        assert tables(target, options) == content

    if "repair" in jobs:
        # repair checks and commits on the driver alone: it starts no Spark application at all.
        latest = Lakehouse.open(uri, storage_options=options).version
        repair = run(
            "repair", "rollback", "--to-version", str(latest - 1), "--yes", executors=False
        )
        assert repair.apps == []
        assert repair.report["new_version"] == latest + 1
        assert tables(uri, options) == tables(uri, options, version=latest - 1)
    assert list(times) == list(jobs)
    print(f"CLUSTER-TIMES {mode} {json.dumps(times)}")


@pytest.mark.slow  # a submission of its own to the cluster: 177 s of a loaded run's test time
def test_validate_without_executor_credentials_is_a_storage_failure(
    spark_cluster: StandaloneCluster, s3_server: S3TestServer, tmp_path: Path
) -> None:
    """The driver has credentials, the executors none: exit 4 (retried) naming the missing
    credentials, and no violations: nothing was judged that could not be read."""
    uri, options = s3_server.new_root()
    build_lake(uri, options, commits=6)
    result = submit(
        spark_cluster,
        s3_server,
        tmp_path,
        "spark_master",
        "validate",
        uri,
        "--no-expectations",
        executor_credentials=False,
    )
    assert result.code == 4, result.explain()
    report = result.report
    assert report["status"] == "failed" and report["exit_code"] == 4, report
    assert "violations" not in report["counts"] and not report["details"].get("violations"), report
    assert report["error"].startswith("StorageError: on an executor:"), report["error"]
    assert (
        "NoCredentialsError" in report["error"]
        and "spark.executorEnv.AWS_ACCESS_KEY_ID" in report["error"]
    )
    # The job's own one-line error (spark-submit merges the Python driver's stderr into its
    # stdout; the JVM's log lines share the streams, so not necessarily the last line).
    assert f"lakecore validate: {report['error']}\n" in result.stdout + result.stderr, (
        result.stdout[-3000:]
    )
    assert "violations" not in result.stdout
    # It did reach the executors: their tasks failed, the application ran on the cluster.
    assert len(result.apps) == 1 and result.apps[0].failed_tasks > 0
    # The same lakehouse is fine once the executors have credentials.
    again = submit(
        spark_cluster, s3_server, tmp_path, "spark_master", "validate", uri, "--no-expectations"
    )
    assert again.code == 0, again.explain()
    assert again.report["counts"]["violations"] == 0
