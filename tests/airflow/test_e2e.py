"""End to end: ``airflow dags test`` runs the DAGs' real Spark jobs on small local lakehouses.

Two lakehouses in one maintenance run: ``good`` is maintained (all five steps), ``bad`` lost a
node file, so its first validation fails and nothing else runs on it, while ``good`` carries
on. Then the repair DAG rolls ``bad`` back to its last valid version.

Airflow runs from this venv with AIRFLOW_HOME in a temporary folder (sqlite, ``db migrate``
first); the jobs run with the project venv's spark-submit on the session's Spark standalone
cluster (``spark_cluster``: a master and two workers on 127.0.0.1; the connection
AIRFLOW_CONN_LAKECORE_SPARK names the master), the lakehouse list from
AIRFLOW_VAR_LAKECORE_LAKEHOUSES. Every application writes its event log (``SPARK_SUBMIT_OPTS``),
from which, with the master's JSON API, the tests check that the jobs ran on the cluster with
tasks on its executors. The validations skip the great-expectations suite (``job_args``) to
keep the run short.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import DAGS_FOLDER, IMPORT_DAGBAG_SOURCE, REPO_ROOT
from tests.spark_cluster import StandaloneCluster, non_loopback_address, read_event_logs

AIRFLOW = Path(sys.executable).parent / "airflow"
PROJECT_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
STEPS = [
    "validate_before",
    "flush",
    "compact_versions",
    "table_maintenance",
    "gc",
    "validate_after",
]
JOBS = {
    "validate_before": "validate",
    "flush": "flush",
    "compact_versions": "compact-versions",
    "table_maintenance": "table-maintenance",
    "gc": "gc",
    "validate_after": "validate",
}

pytestmark = pytest.mark.timeout(2400)

# Builds the two lakehouses with the project venv; prints their versions as JSON.
BUILD = """
import json, os, sys
from lakecore.lakehouse.demo import build_sample
from lakecore.maintenance.tree_files import reachable_from_root
good, bad = sys.argv[1], sys.argv[2]
g = build_sample(good, namespaces=2, tables_per_namespace=12)
b = build_sample(bad, namespaces=2, tables_per_namespace=60)
# Remove a node file that the latest version reaches and some older version does not: the
# latest version is damaged, that older one is still whole (what rollback --to-last-valid finds).
# (Not "the newest file": build_sample ends with a crashed commit whose nodes no root reaches.)
latest = reachable_from_root(b.store, b.root, include_values=False).nodes
for older in range(b.version - 1, -1, -1):
    view = b.at_version(older)
    only_latest = sorted(latest - reachable_from_root(view.store, view.root, include_values=False).nodes)
    if only_latest:
        break
assert only_latest, "every version reaches the same node files"
os.remove(os.path.join(bad, only_latest[0]))
print(json.dumps({"good": g.version, "bad": b.version, "removed": only_latest[0]}))
"""

VERSION = """
import sys
from lakecore import Lakehouse
print(Lakehouse.open(sys.argv[1]).version)
"""


def _project(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [str(PROJECT_PYTHON), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=600,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def _version(lake: Path) -> int:
    return int(_project("-c", VERSION, str(lake)).stdout.strip())


def _fsck(lake: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return _project("-m", "lakecore.cli", "-l", str(lake), "fsck", *options, check=False)


class Airflow:
    """The airflow CLI of this venv with its own AIRFLOW_HOME, and a look into its database."""

    def __init__(
        self, base: Path, lakehouses: list[dict[str, Any]], cluster: StandaloneCluster
    ) -> None:
        self.home = base / "airflow-home"
        self.reports = base / "reports"
        self.logs = base
        self.events = base / "spark-events"
        self.events.mkdir(exist_ok=True)
        # The worker's own address settings must not decide where the driver binds: the
        # operator does (loopback in local mode only).
        inherited = {
            k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "SPARK_MASTER")
        }
        self.env = {
            **inherited,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_LAKECORE_SPARK": json.dumps(
                {
                    "conn_type": "spark",
                    "host": f"spark://{cluster.host}",
                    "port": cluster.master_port,
                }
            ),
            # Event logs of every application the DAG runs submit, as JVM system properties of
            # spark-submit (SparkConf reads spark.* system properties).
            "SPARK_SUBMIT_OPTS": f"-Dspark.eventLog.enabled=true -Dspark.eventLog.compress=false "
            f"-Dspark.eventLog.dir=file://{self.events}",
            "AIRFLOW_VAR_LAKECORE_LAKEHOUSES": json.dumps({"lakehouses": lakehouses}),
            "AIRFLOW_VAR_LAKECORE_ROOT": str(REPO_ROOT),
            "AIRFLOW_VAR_LAKECORE_REPORTS_DIR": str(self.reports),
        }

    def run(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        log = self.logs / f"{name}.log"
        with log.open("w") as out:
            result = subprocess.run(
                [str(AIRFLOW), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=self.env,
                cwd=self.logs,
                timeout=1800,
            )
        result.stdout = log.read_text()
        return result

    def trigger_by_hand(
        self, name: str, dag_id: str, conf: dict[str, Any]
    ) -> subprocess.CompletedProcess[str]:
        """One run of ``dag_id`` as the UI's Trigger makes it in Airflow 3: no logical date, so
        no data interval (``airflow dags test`` always sets a logical date)."""
        code = (
            "import json, sys\n"
            + IMPORT_DAGBAG_SOURCE
            + f"dag = DagBag(dag_folder={str(DAGS_FOLDER)!r}).dags[{dag_id!r}]\n"
            "run = dag.test(logical_date=None, run_conf=json.loads(sys.argv[1]))\n"
            "print('logical date:', run.logical_date, 'run state:', run.state)\n"
        )
        log = self.logs / f"{name}.log"
        with log.open("w") as out:
            result = subprocess.run(
                [sys.executable, "-c", code, json.dumps(conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=self.env,
                cwd=self.logs,
                timeout=1800,
            )
        result.stdout = log.read_text()
        return result

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.home / "airflow.db") as db:
            return list(db.execute(sql, params))

    def states(self, dag_id: str) -> dict[tuple[str, int], str]:
        rows = self.query(
            "select task_id, map_index, state from task_instance where dag_id = ?", dag_id
        )
        return {(task, index): state for task, index, state in rows}

    def xcom(
        self, dag_id: str, task_id: str, map_index: int = -1, key: str = "return_value"
    ) -> Any:
        # The newest run's, when a DAG ran more than once.
        rows = self.query(
            "select value from xcom where dag_id = ? and task_id = ? and map_index = ? and key = ? "
            "order by timestamp desc",
            dag_id,
            task_id,
            map_index,
            key,
        )
        if not rows:
            return None
        value = rows[0][0]
        return json.loads(value) if isinstance(value, str | bytes) else value

    def rendered(self, dag_id: str, task_id: str, map_index: int) -> dict[str, Any]:
        rows = self.query(
            "select rendered_fields from rendered_task_instance_fields "
            "where dag_id = ? and task_id = ? and map_index = ?",
            dag_id,
            task_id,
            map_index,
        )
        assert rows, f"no rendered fields for {task_id}[{map_index}]"
        return json.loads(rows[0][0])


def _tail(text: str, lines: int = 80) -> str:
    kept = [line for line in text.splitlines() if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not PROJECT_PYTHON.exists():
        pytest.fail(f"{PROJECT_PYTHON} is missing: run 'make setup' first")
    if not AIRFLOW.exists():
        pytest.fail(
            f"{AIRFLOW} is missing: run 'make {Path(sys.executable).parents[1].name}/.installed'"
        )
    base = tmp_path_factory.mktemp("lakecore-airflow-e2e")
    good, bad = base / "good", base / "bad"
    built = json.loads(_project("-c", BUILD, str(good), str(bad)).stdout.strip().splitlines()[-1])
    assert _fsck(good).returncode == 0
    assert _fsck(bad).returncode == 1, "the damaged lakehouse must fail validation"
    return {"base": base, "good": good, "bad": bad, "built": built}


@pytest.fixture(scope="module")
def maintenance(lakes: dict[str, Any], spark_cluster: StandaloneCluster) -> dict[str, Any]:
    """One maintenance run over both lakehouses, on the standalone cluster."""
    quick = {"validate": ["--no-expectations"]}
    airflow = Airflow(
        lakes["base"],
        [
            {
                "name": "good",
                "uri": str(lakes["good"]),
                "job_args": {**quick, "flush": ["--fill", "0.0"]},
            },
            {"name": "bad", "uri": str(lakes["bad"]), "job_args": quick},
        ],
        spark_cluster,
    )
    migrate = airflow.run("db-migrate", "db", "migrate")
    assert migrate.returncode == 0, _tail(migrate.stdout)
    logical = dt.datetime.now(dt.UTC).replace(microsecond=0)
    result = airflow.run("maintenance", "dags", "test", "lakecore_maintenance", logical.isoformat())
    runs = airflow.query("select run_id, state from dag_run where dag_id = 'lakecore_maintenance'")
    assert len(runs) == 1, _tail(result.stdout)
    return {
        "airflow": airflow,
        "result": result,
        "logical": logical,
        "run_id": runs[0][0],
        "state": runs[0][1],
        "cluster": spark_cluster,
        **lakes,
    }


def test_the_jobs_ran_on_the_standalone_cluster(maintenance: dict[str, Any]) -> None:
    """Every Spark application of the run (the good lakehouse's five steps, the bad one's first
    validation) ran on the connection's master, with executors on the workers and no task on
    the driver. gc always shares out work (its join of the listing and the reach), and so do
    the validations of the deeper trees (the bad lakehouse, the good one after its flush); the
    good lakehouse's first validation and its flush have a tree too small to split."""
    airflow: Airflow = maintenance["airflow"]
    cluster: StandaloneCluster = maintenance["cluster"]
    apps = read_event_logs(airflow.events)
    names = [app.spark_properties.get("spark.app.name", "") for app in apps]
    assert sorted(names) == sorted(
        # table-maintenance on a lakehouse with no Iceberg table ends before it starts Spark.
        ["lakecore validate"] * 3 + ["lakecore flush", "lakecore compact-versions", "lakecore gc"]
    ), names
    for app in apps:
        assert app.spark_properties.get("spark.master") == cluster.url
        assert cluster.completed_app(app.app_id)["state"] == "FINISHED"
        # An application with no task to share out (a tree too small to split) may finish before
        # its executors register; one that ran tasks must have had them, all on the workers.
        if app.tasks:
            assert app.executors, app
        assert set(app.executors.values()) <= {cluster.host}, app.executors
        assert set(app.tasks_by_executor) <= set(app.executors)  # no task on the driver
        assert app.failed_tasks == 0
        if non_loopback_address() is not None:
            assert app.spark_properties.get("spark.driver.host") != "127.0.0.1"
    tasks = {name: 0 for name in names}
    for name, app in zip(names, apps, strict=True):
        tasks[name] += app.tasks
    assert tasks["lakecore gc"] > 0 and tasks["lakecore validate"] > 0, tasks


def test_good_lakehouse_is_maintained(maintenance: dict[str, Any]) -> None:
    airflow: Airflow = maintenance["airflow"]
    log = _tail(maintenance["result"].stdout)
    states = airflow.states("lakecore_maintenance")
    assert states[("lakehouses", -1)] == "success", log
    for step in STEPS:
        assert states[(f"maintain.{step}", 0)] == "success", f"{step}: {states}\n{log}"
    # every job's report is its task's XCom and a file
    for step in STEPS:
        report = airflow.xcom("lakecore_maintenance", f"maintain.{step}", 0)
        assert report is not None, f"no report XCom for {step}"
        assert (
            report["job"] == JOBS[step]
            and report["status"] in ("ok", "noop")
            and report["exit_code"] == 0
        ), report
        assert report["lakehouse"].rstrip("/").endswith("/good")
        files = list(airflow.reports.glob(f"lakecore_maintenance/*/good/{step}.json"))
        assert len(files) == 1 and files[0].stat().st_size > 0
        assert json.loads(files[0].read_text()) == report
    flush = airflow.xcom("lakecore_maintenance", "maintain.flush", 0)
    assert flush["new_version"] == maintenance["built"]["good"] + 1, flush
    assert flush["details"]["mode"] == "threshold"
    assert (
        flush["details"]["fill"] == 0.0
    )  # the lakehouse's job_args come after the DAG's --fill 0.5
    assert _version(maintenance["good"]) >= flush["new_version"]
    # the maintained lakehouse still validates, deep
    fsck = _fsck(maintenance["good"], "--deep")
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_cut_off_is_the_data_interval_end(maintenance: dict[str, Any]) -> None:
    airflow: Airflow = maintenance["airflow"]
    logical: dt.datetime = maintenance["logical"]
    for step in ("compact_versions", "table_maintenance", "gc"):
        args = airflow.rendered("lakecore_maintenance", f"maintain.{step}", 0)["job_args"]
        now = args[args.index("--now") + 1]
        assert dt.datetime.fromisoformat(now) == logical, args


def test_bad_lakehouse_stops_at_the_first_validation(maintenance: dict[str, Any]) -> None:
    airflow: Airflow = maintenance["airflow"]
    states = airflow.states("lakecore_maintenance")
    assert states[("maintain.validate_before", 1)] == "failed", states
    for step in STEPS[1:]:
        assert states.get((f"maintain.{step}", 1)) in ("upstream_failed", None), (
            f"{step} ran on a damaged lakehouse"
        )
    assert maintenance["state"] == "failed"
    assert maintenance["result"].returncode != 0
    # failed loudly: the violation and "not retried" are in the task's error
    log = maintenance["result"].stdout
    assert "a check found violations" in log and "unreadable-node" in log and "not retried" in log
    report = airflow.xcom("lakecore_maintenance", "maintain.validate_before", 1, key="report")
    assert report["job"] == "validate" and report["exit_code"] == 1 and report["status"] != "ok", (
        report
    )
    assert report["counts"]["violations"] >= 1
    # nothing was written to it
    assert _version(maintenance["bad"]) == maintenance["built"]["bad"]
    assert not list(airflow.reports.glob("lakecore_maintenance/*/bad/flush.json"))


def test_repair_rolls_back_to_the_last_valid_version(maintenance: dict[str, Any]) -> None:
    airflow: Airflow = maintenance["airflow"]
    before = _version(maintenance["bad"])
    # First a plan without confirm: nothing is written, and the log says how to carry it out
    # in Airflow's words (a param, not --yes).
    # It is triggered by hand, as an operator does (no logical date, so no data interval: the
    # cut-off template once failed every such run).
    plan_only = {"lakehouse": "bad", "action": "rollback-to-last-valid"}
    result = airflow.trigger_by_hand("repair-plan", "lakecore_repair", plan_only)
    assert "logical date: None run state: success" in result.stdout, _tail(result.stdout)
    assert airflow.states("lakecore_repair") == {
        ("plan", -1): "success",
        ("repair", -1): "success",
    }, _tail(result.stdout)
    assert dt.datetime.fromisoformat(
        airflow.rendered("lakecore_repair", "plan", -1)["op_kwargs"]["now"]
    ).tzinfo
    report = airflow.xcom("lakecore_repair", "repair")
    assert report["status"] == "planned" and report["details"]["action"] == "rollback", report
    assert 'trigger lakecore_repair again with the same conf and "confirm": true' in result.stdout
    assert _version(maintenance["bad"]) == before
    conf = {"lakehouse": "bad", "action": "rollback-to-last-valid", "confirm": True}
    result = airflow.run(
        "repair",
        "dags",
        "test",
        "lakecore_repair",
        dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "--conf",
        json.dumps(conf),
    )
    states = airflow.states("lakecore_repair")
    assert states == {("plan", -1): "success", ("repair", -1): "success"}, _tail(result.stdout)
    report = airflow.xcom("lakecore_repair", "repair")
    assert report["job"] == "repair" and report["status"] == "ok", report
    target = report["details"]["rolled_back_to"]
    assert 0 <= target < before
    assert report["new_version"] == before + 1
    assert _version(maintenance["bad"]) == before + 1
    fsck = _fsck(maintenance["bad"])
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
