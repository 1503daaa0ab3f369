"""The DAG files parse, and the DAGs and the job operator are what the brief asks for.

No Spark and no Airflow database here: the DagBag parses the files, the operator's spark-submit
is replaced by a stand-in that writes a report and exits like a job would.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import DAGS_FOLDER, IMPORT_DAGBAG_SOURCE, REPO_ROOT

MAINTENANCE = "lakecore_maintenance"
REPAIR = "lakecore_repair"
STEPS = [
    "validate_before",
    "flush",
    "compact_versions",
    "table_maintenance",
    "gc",
    "validate_after",
]
GROUP = "maintain"


@pytest.fixture(scope="module")
def common() -> Any:
    if str(DAGS_FOLDER) not in sys.path:
        sys.path.insert(0, str(DAGS_FOLDER))
    import _lakecore_common

    return _lakecore_common


def _dag(dagbag: Any, dag_id: str) -> Any:
    assert dagbag.import_errors == {}, dagbag.import_errors
    dag = dagbag.dags.get(dag_id)
    assert dag is not None, f"{dag_id} not in {sorted(dagbag.dags)}"
    return dag


# -- the DagBag ------------------------------------------------------------------------------------


def test_dag_files_import_without_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert not getattr(dagbag, "captured_warnings", {})  # no deprecated Airflow API either
    assert {MAINTENANCE, REPAIR} <= set(dagbag.dags)


def test_dag_files_import_nothing_heavy() -> None:
    """Parsing must not import pyspark or lakecore (the DAG processor parses every few seconds)."""
    import subprocess

    code = (
        "import sys, runpy\n"
        f"sys.path.insert(0, {str(DAGS_FOLDER)!r})\n"
        f"runpy.run_path({str(DAGS_FOLDER / 'lakecore_maintenance.py')!r})\n"
        f"runpy.run_path({str(DAGS_FOLDER / 'lakecore_repair.py')!r})\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'lakecore', 'jobs', 'pyarrow'))\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cut_off_renders_for_scheduled_and_hand_triggered_runs(
    dagbag: Any, common: Any
) -> None:
    """A run triggered by hand has no logical date in Airflow 3, so no ``data_interval_end`` in
    its context: ``{{ data_interval_end }}`` failed every such run (a trial found it); it is then
    the run's ``run_after``."""
    import types

    import jinja2

    environment = _dag(dagbag, MAINTENANCE).get_template_env()
    assert environment.undefined is jinja2.StrictUndefined or issubclass(
        environment.undefined, jinja2.StrictUndefined
    )
    template = environment.from_string(common.NOW_TEMPLATE)
    scheduled = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    triggered = dt.datetime(2026, 11, 24, 13, 5, 7, tzinfo=dt.UTC)
    run = types.SimpleNamespace(run_after=triggered)
    assert template.render(data_interval_end=scheduled, dag_run=run) == str(scheduled)
    assert template.render(dag_run=run) == str(triggered)
    with pytest.raises(jinja2.UndefinedError):
        environment.from_string("{{ data_interval_end }}").render(dag_run=run)


def test_copied_dag_files_parse_without_the_checkout_beside_them(tmp_path: Path) -> None:
    """airflow_dags/README's deployment copies the DAG files into a DAG folder; parsing read
    lakecore/errors.py beside them and failed there. The checkout is read when a task runs."""
    import shutil
    import subprocess

    folder = tmp_path / "dags" / "lakecore"
    folder.mkdir(parents=True)
    for source in DAGS_FOLDER.glob("*.py"):
        shutil.copy(source, folder / source.name)
    # A process of its own: this one has the checkout's _lakecore_common imported already.
    code = (
        "import json, sys\n"
        + IMPORT_DAGBAG_SOURCE
        + f"bag = DagBag(dag_folder={str(tmp_path / 'dags')!r})\n"
        "print(json.dumps({'errors': {k: str(v)[-300:] for k, v in bag.import_errors.items()}, 'dags': sorted(bag.dags)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LAKECORE_ROOT")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
        env={
            **env,
            "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    assert {MAINTENANCE, REPAIR} <= set(parsed["dags"])


def test_maintenance_task_graph(dagbag: Any) -> None:
    dag = _dag(dagbag, MAINTENANCE)
    ids = {f"{GROUP}.{step}" for step in STEPS} | {"lakehouses"}
    assert set(dag.task_ids) == ids
    order = [f"{GROUP}.{step}" for step in STEPS]
    for before, after in itertools.pairwise(order):
        task = dag.get_task(after)
        assert before in task.upstream_task_ids, f"{before} must run before {after}"
        # and nothing skips a step: the only other upstream is the list the group maps over
        assert task.upstream_task_ids <= {before, "lakehouses"}
    assert dag.get_task(order[0]).upstream_task_ids == {"lakehouses"}
    assert dag.get_task(order[-1]).downstream_task_ids == set()
    # the group is mapped over the lakehouse list (dynamic task mapping, not parse time)
    group = dag.task_group_dict[GROUP]
    assert type(group).__name__ == "MappedTaskGroup"


def test_maintenance_jobs_and_arguments(dagbag: Any, common: Any) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = _dag(dagbag, MAINTENANCE)
    jobs = {step: dag.get_task(f"{GROUP}.{step}").job for step in STEPS}
    assert jobs == {
        "validate_before": "validate",
        "flush": "flush",
        "compact_versions": "compact-versions",
        "table_maintenance": "table-maintenance",
        "gc": "gc",
        "validate_after": "validate",
    }
    flush = dag.get_task(f"{GROUP}.flush")
    assert list(flush.job_args) == ["--mode", "threshold", "--fill", "0.5"]
    for step in ("compact_versions", "table_maintenance", "gc"):
        args = list(dag.get_task(f"{GROUP}.{step}").job_args)
        assert args[args.index("--now") + 1] == common.NOW_TEMPLATE, args
    for step in STEPS:
        task = dag.get_task(f"{GROUP}.{step}")
        assert isinstance(task, SparkSubmitOperator)
        assert task._conn_id == "lakecore_spark"
        assert "--dry-run" not in list(task.job_args)


def test_maintenance_dag_settings(dagbag: Any) -> None:
    dag = _dag(dagbag, MAINTENANCE)
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert {"lakecore", "maintenance"} <= set(dag.tags)
    assert dag.schedule == "@daily"
    assert dag.doc_md and "lakecore maintenance" in dag.doc_md
    assert dag.default_args["retries"] >= 1
    assert dag.default_args["retry_delay"] >= dt.timedelta(minutes=1)
    for task in dag.tasks:
        assert task.doc_md and task.doc_md.strip(), f"{task.task_id} has no doc_md"
    for step in STEPS:
        task = dag.get_task(f"{GROUP}.{step}")
        assert task.pool == "lakecore_maintenance"
        assert task.retries >= 1
        assert task.retry_delay == dag.default_args["retry_delay"]


def test_repair_dag(dagbag: Any) -> None:
    dag = _dag(dagbag, REPAIR)
    assert dag.schedule is None  # manual only
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert {"lakecore", "repair"} <= set(dag.tags)
    params = dag.params
    assert {"lakehouse", "action", "version", "confirm"} <= set(params.keys())
    schema = {name: params.get_param(name).schema for name in params}
    assert schema["lakehouse"]["type"] == "string"
    assert schema["action"]["enum"] == [
        "rebuild-hint",
        "rollback-to-version",
        "rollback-to-last-valid",
        "drop-damaged",
        "gc-dry-run",
    ]
    assert set(schema["version"]["type"]) == {"null", "integer"}
    assert schema["confirm"]["type"] == "boolean"
    assert params["confirm"] is False
    assert params["action"] == "rebuild-hint"
    assert set(dag.task_ids) == {"plan", "repair"}
    assert dag.get_task("repair").upstream_task_ids == {"plan"}
    assert dag.get_task("repair").pool == "lakecore_maintenance"
    for task in dag.tasks:
        assert task.doc_md and task.doc_md.strip(), f"{task.task_id} has no doc_md"


def test_repair_params_validate(dagbag: Any) -> None:
    params = _dag(dagbag, REPAIR).params
    assert params.get_param("action").resolve("rollback-to-last-valid") == "rollback-to-last-valid"
    with pytest.raises(ValueError, match="is not one of"):
        params.get_param("action").resolve("drop-everything")
    with pytest.raises(ValueError, match="is not of type"):
        params.get_param("confirm").resolve("yes")
    with pytest.raises(ValueError, match="less than the minimum"):
        params.get_param("version").resolve(-1)
    assert params.get_param("version").resolve(3) == 3


def test_repair_commands() -> None:
    from airflow_dags.lakecore_repair import repair_command

    now = "2025-01-02T00:00:00+00:00"
    assert repair_command("rebuild-hint", None, False, now) == ("repair", ["rebuild-hint"])
    assert repair_command("rebuild-hint", None, True, now) == ("repair", ["rebuild-hint", "--yes"])
    assert repair_command("rollback-to-version", 7, False, now) == (
        "repair",
        ["rollback", "--to-version", "7"],
    )
    assert repair_command("rollback-to-version", 7, True, now) == (
        "repair",
        ["rollback", "--to-version", "7", "--yes"],
    )
    assert repair_command("rollback-to-last-valid", None, True, now) == (
        "repair",
        ["rollback", "--to-last-valid", "--yes"],
    )
    # drop-damaged: what gc and compact-versions name when a damaged version blocks them (a
    # new-user trial found the DAG could not run it).
    assert repair_command("drop-damaged", None, False, now) == ("repair", ["drop-damaged"])
    assert repair_command("drop-damaged", None, True, now) == ("repair", ["drop-damaged", "--yes"])
    # gc-dry-run never deletes, confirmed or not
    assert repair_command("gc-dry-run", None, True, now) == ("gc", ["--dry-run", "--now", now])
    with pytest.raises(ValueError, match="needs the param version"):
        repair_command("rollback-to-version", None, True, now)
    with pytest.raises(ValueError, match="unknown action"):
        repair_command("drop", None, True, now)


# -- the lakehouse list ----------------------------------------------------------------------------


def test_shipped_lakehouse_list_loads(common: Any) -> None:
    lakehouses = common.load_lakehouses("", REPO_ROOT)
    assert [lh["name"] for lh in lakehouses] == ["demo"]
    assert lakehouses[0]["uri"] == f"{REPO_ROOT}/demo-lakehouse"  # the {repo} placeholder
    assert lakehouses[0]["env"] == "local"


def test_variable_wins_over_the_file(common: Any, tmp_path: Path) -> None:
    text = json.dumps(
        {
            "lakehouses": [
                "s3://bucket/lake",
                {
                    "name": "two",
                    "uri": "{repo}/x",
                    "env": "prod",
                    "storage_options": {"endpoint_url": "http://h:9000"},
                    "job_args": {"gc": ["--older-than", "5d"], "validate_after": ["--deep"]},
                },
                {"name": "off", "uri": "/nowhere", "enabled": False},
            ]
        }
    )
    lakehouses = common.load_lakehouses(text, tmp_path)
    assert [lh["name"] for lh in lakehouses] == ["lake", "two"]
    assert lakehouses[0] == {
        "name": "lake",
        "uri": "s3://bucket/lake",
        "env": "local",
        "storage_options": {},
        "job_args": {},
        "description": "",
    }
    assert lakehouses[1]["uri"] == f"{tmp_path}/x"
    assert lakehouses[1]["job_args"]["gc"] == ["--older-than", "5d"]
    # a bare list works too
    assert common.load_lakehouses(json.dumps(["/a/b"]), tmp_path)[0]["name"] == "b"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not valid JSON"),
        ('{"lakehouses": 3}', "expected a list"),
        ('[{"uri": "/a", "typo": 1}]', "unknown keys"),
        ('[{"name": "x"}]', "'uri' is required"),
        ('[{"uri": "/a/x"}, {"uri": "/b/x"}]', "used twice"),
        ('[{"uri": "/a", "name": "no spaces"}]', "must match"),
        ('[{"uri": "/a", "job_args": {"flsh": []}}]', "neither a job nor a step"),
        ('[{"uri": "/a", "job_args": {"gc": "--dry-run"}}]', "must be a list"),
    ],
)
def test_bad_lakehouse_lists_fail_without_retry(
    common: Any, tmp_path: Path, text: str, match: str
) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    with pytest.raises(AirflowFailException, match=match):
        common.load_lakehouses(text, tmp_path)


def test_missing_list_file(common: Any, tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    with pytest.raises(AirflowFailException, match="lakecore_lakehouses is not set"):
        common.load_lakehouses("", tmp_path)


def test_find_lakehouse(common: Any, tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    listed = common.load_lakehouses('[{"name": "a", "uri": "/lakes/a", "env": "prod"}]', tmp_path)
    assert common.find_lakehouse("a", listed, tmp_path)["env"] == "prod"
    assert common.find_lakehouse("a", listed, tmp_path, "local")["env"] == "local"
    assert common.find_lakehouse("s3://b/lake", listed, tmp_path)["uri"] == "s3://b/lake"
    assert common.find_lakehouse("/lakes/other", listed, tmp_path)["name"] == "other"
    with pytest.raises(AirflowFailException, match="neither a configured name"):
        common.find_lakehouse("b", listed, tmp_path)


# -- the operator ----------------------------------------------------------------------------------


class _TI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def _operator(
    common: Any,
    tmp_path: Path,
    job: str = "validate",
    task_id: str = "validate_before",
    lakehouse: dict[str, Any] | None = None,
    job_args: list[str] | None = None,
) -> Any:
    """A rendered operator, as the worker has it right before execute."""
    op = common.LakecoreJobOperator(
        task_id=task_id, job=job, lakehouse=None, job_args=job_args or []
    )
    op.lakehouse = lakehouse or {
        "name": "lake",
        "uri": "/lakes/lake",
        "env": "local",
        "storage_options": {"endpoint_url": "http://h:9000"},
        "job_args": {"validate": ["--no-expectations"], "validate_before": ["--deep"]},
    }
    op.lakecore_root = str(REPO_ROOT)
    op.lakecore_python = ""
    op.reports_dir = str(tmp_path / "reports")
    return op


def _context() -> dict[str, Any]:
    return {"run_id": "scheduled__2025-01-02T00:00:00+00:00", "ti": _TI()}


def _fake_submit(
    monkeypatch: pytest.MonkeyPatch, exit_code: int, report: dict[str, Any] | None
) -> list[Any]:
    """spark-submit stand-in: writes the job's report (like run_job) and fails like the hook."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.common.compat.sdk import AirflowException

    calls: list[Any] = []

    def execute(self: Any, context: Any) -> None:
        calls.append(self)
        path = Path(self.application_args[self.application_args.index("--report") + 1])
        if report is not None:
            path.write_text(json.dumps({**report, "exit_code": exit_code}))
        if exit_code:
            raise AirflowException(f"Cannot execute: spark-submit ... Error code is: {exit_code}.")

    monkeypatch.setattr(SparkSubmitOperator, "execute", execute)
    return calls


def test_operator_builds_the_spark_submit_sh_command(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_submit(
        monkeypatch, 0, {"job": "validate", "status": "ok", "counts": {"violations": 0}}
    )
    op = _operator(common, tmp_path)
    context = _context()
    result = op.execute(context)
    assert (
        result["status"] == "ok" and result["exit_code"] == 0
    )  # the report is the XCom return value
    (submitted,) = calls
    assert submitted.application == str(REPO_ROOT / "jobs" / "validate.py")
    report = (
        tmp_path
        / "reports"
        / common.safe_path_part(op.dag_id)
        / "scheduled__2025-01-02T00_00_00_00_00"
        / "lake"
        / "validate_before.json"
    )
    assert json.loads(report.read_text()) == result
    args = submitted.application_args
    assert args[:4] == ["--lakehouse", "/lakes/lake", "--env", "local"]
    assert args[4:6] == ["--storage-option", "endpoint_url=http://h:9000"]
    # the lakehouse's job_args: first the job's, then the step's, and --report last
    assert args[6:8] == ["--no-expectations", "--deep"]
    assert args[-2] == "--report" and args[-1].endswith("/lake/validate_before.json")
    assert submitted.properties_file == str(REPO_ROOT / "conf" / "spark-defaults.conf")
    python = str(REPO_ROOT / ".venv" / "bin" / "python")
    assert submitted.env_vars["PYSPARK_PYTHON"] == python
    assert submitted.env_vars["PYTHONPATH"].split(":")[0] == str(REPO_ROOT)
    assert submitted.conf["spark.pyspark.python"] == python
    # The driver runs on this worker: its JVM starts as spark-submit.sh starts it (log4j first,
    # then jobs/driver_jvm.py's options, asked of the lakecore venv).
    driver_options = submitted.conf["spark.driver.extraJavaOptions"].split()
    assert (
        driver_options[0] == f"-Dlog4j2.configurationFile=file:{REPO_ROOT}/conf/log4j2.properties"
    )
    assert "-XX:TieredStopAtLevel=1" in driver_options
    assert submitted.pool == "lakecore_maintenance"
    assert context["ti"].pushed == {}


def test_operator_violations_fail_without_retry(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    _fake_submit(
        monkeypatch,
        1,
        {
            "job": "validate",
            "status": "failed",
            "error": "1 violation",
            "details": {"violations": ["v3 0000/x.arrow: [unreadable-node] missing"]},
        },
    )
    op = _operator(common, tmp_path)
    context = _context()
    with pytest.raises(
        AirflowFailException,
        match=r"exit 1 \(a check found violations\).*unreadable-node.*stops here",
    ):
        op.execute(context)
    assert context["ti"].pushed["report"]["status"] == "failed"  # the report still reaches XCom


@pytest.mark.parametrize(("code", "retried"), [(2, False), (3, True), (4, True)])
def test_operator_other_failures(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, retried: bool
) -> None:
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    _fake_submit(monkeypatch, code, {"job": "gc", "status": "failed", "error": "boom"})
    op = _operator(
        common, tmp_path, job="gc", task_id="gc", job_args=["--now", "2025-01-02T00:00:00+00:00"]
    )
    with pytest.raises(AirflowException, match=f"exit {code}.*boom") as info:
        op.execute(_context())
    assert isinstance(info.value, AirflowFailException) is not retried


def test_operator_without_report(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.common.compat.sdk import AirflowException

    _fake_submit(monkeypatch, 4, None)
    op = _operator(common, tmp_path, job="flush", task_id="flush")
    with pytest.raises(AirflowException, match="wrote no report"):
        op.execute(_context())
    _fake_submit(monkeypatch, 0, None)
    with pytest.raises(AirflowException, match="exited 0 but wrote no report"):
        _operator(common, tmp_path, job="flush", task_id="flush").execute(_context())


def test_operator_stale_report_is_not_reused(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report left by an earlier try must not be taken for this try's."""
    from airflow.providers.common.compat.sdk import AirflowException

    _fake_submit(monkeypatch, 0, {"job": "flush", "status": "ok"})
    _operator(common, tmp_path, job="flush", task_id="flush").execute(_context())
    _fake_submit(monkeypatch, 4, None)
    with pytest.raises(AirflowException, match="wrote no report"):
        _operator(common, tmp_path, job="flush", task_id="flush").execute(_context())


def test_operator_rejects_unknown_job(common: Any, tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    with pytest.raises(AirflowFailException, match="unknown lakecore job"):
        _operator(common, tmp_path, job="vacuum").execute(_context())


@pytest.mark.parametrize("master", ["local[2]", "spark://10.0.0.5:7077"])
def test_operator_binds_the_driver_to_loopback_in_local_mode_only(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    host, _, port = master.removeprefix("spark://").partition(":")
    conn: dict[str, Any] = {
        "conn_type": "spark",
        "host": master if master.startswith("local") else f"spark://{host}",
    }
    if port:
        conn["port"] = int(port)
    monkeypatch.setenv("AIRFLOW_CONN_LAKECORE_SPARK", json.dumps(conn))
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    calls = _fake_submit(
        monkeypatch, 0, {"job": "validate", "status": "ok", "counts": {"violations": 0}}
    )
    op = _operator(common, tmp_path)
    op.execute(_context())
    (submitted,) = calls
    assert op.spark_master() == (master, "client")
    if master.startswith("local"):
        assert submitted.env_vars["SPARK_LOCAL_IP"] == "127.0.0.1"
        assert "spark.executorEnv.PYTHONPATH" not in submitted.conf
    else:  # executors on other hosts must reach the driver, and import the checkout
        assert "SPARK_LOCAL_IP" not in submitted.env_vars
        assert submitted.conf["spark.executorEnv.PYTHONPATH"] == str(REPO_ROOT)


def test_operator_refuses_cluster_deploy_mode_on_a_standalone_master(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKECORE_SPARK",
        json.dumps(
            {
                "conn_type": "spark",
                "host": "spark://10.0.0.5",
                "port": 7077,
                "extra": {"deploy-mode": "cluster"},
            }
        ),
    )
    calls = _fake_submit(monkeypatch, 0, None)
    with pytest.raises(AirflowFailException, match="cannot run Python applications"):
        _operator(common, tmp_path).execute(_context())
    assert calls == []
