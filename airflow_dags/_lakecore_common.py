"""What the lakecore DAGs share: the lakehouse list, the job operator, defaults.

Nothing heavy at module level (no pyspark, no lakecore): the DAG processor imports this file
every time it parses the DAGs. The lakehouse list, the checkout and the reports folder are
read when a task runs, on the worker, never while parsing:

    Variable lakecore_lakehouses   the lakehouse list as JSON (else conf/lakehouses.json of the
                                   checkout); see ``load_lakehouses``
    Variable lakecore_root         the lakecore checkout on the workers (else $LAKECORE_ROOT,
                                   else the checkout this file lives in)
    Variable lakecore_python       the project venv's python (else <root>/.venv/bin/python);
                                   the spark-submit next to it is used when it exists
    Variable lakecore_reports_dir  where the jobs' JSON reports go (else
                                   $AIRFLOW_HOME/lakecore-reports)

Each job runs as ``spark-submit.sh`` runs it without ``--cluster`` (client deploy mode from the
worker's checkout): application ``<root>/jobs/<job>.py``, ``--properties-file
<root>/conf/spark-defaults.conf``, the driver and the executors on the project venv's python,
the repo on PYTHONPATH, and ``--report`` into the reports folder. The master comes from the
Airflow connection ``lakecore_spark`` (``AIRFLOW_CONN_LAKECORE_SPARK``): ``local[*]``, or a
cluster whose nodes have the checkout and its venv at the same path; the driver binds to
127.0.0.1 in local mode only.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # where newer Airflow 3 releases keep them (the Task SDK)
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # earlier Airflow 3 releases
    from airflow.exceptions import AirflowException, AirflowFailException

CONN_ID = "lakecore_spark"
POOL = "lakecore_maintenance"
TAGS = ["lakecore", "lakehouse", "spark"]

VARIABLE_LAKEHOUSES = "lakecore_lakehouses"
# Templates (rendered when the task runs); an unset Variable renders as "".
LAKEHOUSES_TEMPLATE = "{{ var.value.get('lakecore_lakehouses', '') }}"
ROOT_TEMPLATE = "{{ var.value.get('lakecore_root', '') }}"
PYTHON_TEMPLATE = "{{ var.value.get('lakecore_python', '') }}"
REPORTS_TEMPLATE = "{{ var.value.get('lakecore_reports_dir', '') }}"
# The cut-off of gc and compact-versions: the run's data interval end, so a retry of the task
# (or of the whole run) computes the same cut-off as the first try. A run triggered by hand
# (the UI's Trigger, `airflow dags trigger`) has no logical date in Airflow 3, and so no data
# interval: its cut-off is the time it was triggered for (``run_after``), as fixed for the run.
NOW_TEMPLATE = "{{ data_interval_end if data_interval_end is defined and data_interval_end else dag_run.run_after }}"

JOBS = ("flush", "gc", "compact-versions", "table-maintenance", "validate", "export", "repair")
# The maintenance DAG's steps per lakehouse, in order (task ids inside the task group).
MAINTENANCE_STEPS = (
    "validate_before",
    "flush",
    "compact_versions",
    "table_maintenance",
    "gc",
    "validate_after",
)
LAKEHOUSE_KEYS = {"name", "uri", "env", "storage_options", "job_args", "enabled", "description"}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@functools.cache
def exit_codes(root: Path) -> Any:
    """lakecore's one exit-code table (``<root>/lakecore/errors.py``, which imports nothing),
    loaded by path from the checkout the tasks run (the Airflow venv does not install lakecore).
    Read when a task needs it, never while parsing: a DAG folder deployed by copying these files
    has no checkout beside it, and the checkout is only known on the worker."""
    import importlib.util

    path = root / "lakecore" / "errors.py"
    spec = importlib.util.spec_from_file_location("_lakecore_errors", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise AirflowFailException(
            f"cannot load lakecore's exit codes from {path}: is lakecore_root ({root}) "
            "a lakecore checkout?"
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DEFAULT_SPARK_APP_NAME = "arrow-spark"  # SparkSubmitOperator's default name

DEFAULT_ARGS: dict[str, Any] = {
    "owner": "lakecore",
    "retries": 2,
    "retry_delay": dt.timedelta(minutes=5),
    "retry_exponential_backoff": True,
    "max_retry_delay": dt.timedelta(minutes=30),
    "execution_timeout": dt.timedelta(hours=6),
}


# -- where things are on the worker ----------------------------------------------------------------


def resolve_root(value: str | None = None) -> Path:
    """The lakecore checkout: the Variable, else $LAKECORE_ROOT, else the checkout of this file."""
    text = (value or "").strip() or os.environ.get("LAKECORE_ROOT", "").strip()
    if text:
        return Path(text).expanduser()
    here = Path(__file__).resolve().parent.parent
    if (here / "jobs").is_dir():
        return here
    raise AirflowFailException(
        "cannot tell where the lakecore checkout is: set the Variable lakecore_root (or "
        "LAKECORE_ROOT on the workers) to the directory holding jobs/ and conf/"
    )


def resolve_python(root: Path, value: str | None = None) -> Path:
    return Path((value or "").strip() or root / ".venv" / "bin" / "python")


def resolve_reports_dir(value: str | None = None) -> Path:
    text = (value or "").strip()
    if text:
        return Path(text).expanduser()
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "lakecore-reports"


def safe_path_part(text: str) -> str:
    """A run id or a name as one path component."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "_"


# -- the lakehouse list ----------------------------------------------------------------------------


def load_lakehouses(variable_text: str | None, root: str | Path) -> list[dict[str, Any]]:
    """The enabled lakehouses, normalized.

    From the Variable ``lakecore_lakehouses`` when it is set (JSON), else from
    ``<root>/conf/lakehouses.json``. Either is a list of entries or ``{"lakehouses": [...]}``;
    an entry is a URI string or an object:

        name             unique, [A-Za-z0-9_.-] (default: the URI's last path part)
        uri              the lakehouse root; "{repo}" stands for the checkout (required)
        env              maintenance settings conf/maintenance-<env>.json (default "local")
        storage_options  {"endpoint_url": ...}: --storage-option KEY=VALUE (no secrets: use
                         the AWS_* environment of the workers)
        job_args         extra options per job or per step, appended after the DAG's own:
                         {"flush": ["--fill", "0.7"], "gc": ["--older-than", "5d"],
                          "validate_after": ["--deep"]}
        enabled          false skips the lakehouse (default true)
        description      free text
    """
    root = Path(root)
    text = (variable_text or "").strip()
    if text:
        source = f"the Variable {VARIABLE_LAKEHOUSES}"
    else:
        path = root / "conf" / "lakehouses.json"
        source = str(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise AirflowFailException(
                f"no lakehouse list: the Variable {VARIABLE_LAKEHOUSES} is not set and {path} "
                f"cannot be read ({exc})"
            ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AirflowFailException(f"{source} is not valid JSON: {exc}") from None
    entries = data.get("lakehouses") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise AirflowFailException(
            f'{source}: expected a list of lakehouses or {{"lakehouses": [...]}}'
        )
    result: list[dict[str, Any]] = []
    names: set[str] = set()
    for index, entry in enumerate(entries):
        lakehouse = normalize_lakehouse(entry, root, where=f"{source}, lakehouse #{index + 1}")
        if lakehouse is None:
            continue
        if lakehouse["name"] in names:
            raise AirflowFailException(f"{source}: the name {lakehouse['name']!r} is used twice")
        names.add(lakehouse["name"])
        result.append(lakehouse)
    return result


def normalize_lakehouse(
    entry: Any, root: str | Path, *, where: str = "lakehouse"
) -> dict[str, Any] | None:
    """One entry of the list as a plain dict with every key set; None when it is disabled."""
    if isinstance(entry, str):
        entry = {"uri": entry}
    if not isinstance(entry, dict):
        raise AirflowFailException(f"{where}: expected a URI or an object, got {entry!r}")
    unknown = sorted(set(entry) - LAKEHOUSE_KEYS)
    if unknown:
        raise AirflowFailException(
            f"{where}: unknown keys {unknown} (known: {sorted(LAKEHOUSE_KEYS)})"
        )
    if not entry.get("enabled", True):
        return None
    uri = entry.get("uri")
    if not isinstance(uri, str) or not uri.strip():
        raise AirflowFailException(f"{where}: 'uri' is required")
    uri = uri.strip().replace("{repo}", str(root))
    name = entry.get("name") or uri.rstrip("/").rsplit("/", 1)[-1]
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise AirflowFailException(f"{where}: name {name!r} must match {NAME_RE.pattern}")
    env = entry.get("env", "local")
    if not isinstance(env, str) or not NAME_RE.match(env):
        raise AirflowFailException(f"{where}: env {env!r} must name conf/maintenance-<env>.json")
    options = entry.get("storage_options") or {}
    if not isinstance(options, dict):
        raise AirflowFailException(f"{where}: storage_options must be an object of strings")
    job_args = entry.get("job_args") or {}
    if not isinstance(job_args, dict):
        raise AirflowFailException(f"{where}: job_args must be an object of lists")
    known = set(JOBS) | set(MAINTENANCE_STEPS)
    for key, value in job_args.items():
        if key not in known:
            raise AirflowFailException(
                f"{where}: job_args key {key!r} is neither a job nor a step ({sorted(known)})"
            )
        if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
            raise AirflowFailException(f"{where}: job_args[{key!r}] must be a list of strings")
    return {
        "name": name,
        "uri": uri,
        "env": env,
        "storage_options": {str(k): str(v) for k, v in options.items()},
        "job_args": {k: [str(v) for v in values] for k, values in job_args.items()},
        "description": str(entry.get("description", "")),
    }


def find_lakehouse(
    value: str, lakehouses: Sequence[dict[str, Any]], root: str | Path, env: str | None = None
) -> dict[str, Any]:
    """The repair DAG's ``lakehouse`` param: a name from the list, else a URI (path or scheme)."""
    value = value.strip()
    for lakehouse in lakehouses:
        if value == lakehouse["name"]:
            if env:
                return {**lakehouse, "env": env}
            return lakehouse
    if "://" in value or value.startswith("/"):
        entry = normalize_lakehouse(
            {"uri": value, "env": env or "local"}, root, where=f"lakehouse {value!r}"
        )
        assert entry is not None
        return entry
    known = ", ".join(lh["name"] for lh in lakehouses) or "none"
    raise AirflowFailException(
        f"lakehouse {value!r} is neither a configured name ({known}) nor a URI"
    )


# -- the operator ----------------------------------------------------------------------------------


class LakecoreJobOperator(SparkSubmitOperator):
    """Run one lakecore maintenance job with spark-submit; its JSON report is the task's result.

    ``job`` is the job name (``jobs/<job>.py``), ``lakehouse`` a normalized entry of the list
    (``load_lakehouses``), ``job_args`` the job's options (templated: ``--now`` is
    ``{{ data_interval_end }}``). The lakehouse's own ``job_args`` for the job and for this step
    (the task id without its group) come after them, so they win for options given twice.

    The report (``--report``) is returned, so it is the task's XCom ``return_value``. When the
    job fails, the report (if the job wrote one) is pushed as XCom ``report`` and the error says
    the job's exit code and error; exit 1 (violations) and 2 (bad arguments) fail the task
    without a retry, anything else may retry.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "job",
        "lakehouse",
        "job_args",
        "lakecore_root",
        "lakecore_python",
        "reports_dir",
    )
    ui_color = "#d6ecf3"

    def __init__(
        self,
        *,
        job: str,
        lakehouse: Any,
        job_args: Any = (),
        lakecore_root: str = ROOT_TEMPLATE,
        lakecore_python: str = PYTHON_TEMPLATE,
        reports_dir: str = REPORTS_TEMPLATE,
        conn_id: str = CONN_ID,
        when_planned: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("pool", POOL)
        kwargs.setdefault("map_index_template", "{{ task.lakehouse['name'] }}")
        super().__init__(conn_id=conn_id, **kwargs)
        self.job = job
        self.lakehouse = lakehouse
        self.job_args = job_args
        self.lakecore_root = lakecore_root
        self.lakecore_python = lakecore_python
        self.reports_dir = reports_dir
        # Logged after a job that only printed its plan (status "planned"): the job's own words
        # say "rerun with --yes", which in a DAG is a param, not an option.
        self.when_planned = when_planned

    @property
    def step(self) -> str:
        return self.task_id.rsplit(".", 1)[-1]

    def job_argv(self, report: Path) -> list[str]:
        lakehouse = self.lakehouse
        argv = ["--lakehouse", lakehouse["uri"], "--env", lakehouse.get("env", "local")]
        for key, value in sorted((lakehouse.get("storage_options") or {}).items()):
            argv += ["--storage-option", f"{key}={value}"]
        argv += [str(a) for a in (self.job_args or ())]
        extra = lakehouse.get("job_args") or {}
        argv += extra.get(self.job, [])
        if self.step != self.job:
            argv += extra.get(self.step, [])
        return [*argv, "--report", str(report)]

    def report_path(self, context: Any) -> Path:
        run_id = context.get("run_id") or context["dag_run"].run_id
        return (
            resolve_reports_dir(self.reports_dir)
            / safe_path_part(self.dag_id)
            / safe_path_part(run_id)
            / safe_path_part(self.lakehouse["name"])
            / f"{self.step}.json"
        )

    def prepare(self, context: Any) -> Path:
        """Fill in what spark-submit.sh would, from the rendered fields; returns the report path."""
        if self.job not in JOBS:
            raise AirflowFailException(
                f"unknown lakecore job {self.job!r} (one of {', '.join(JOBS)})"
            )
        if not isinstance(self.lakehouse, dict) or "uri" not in self.lakehouse:
            raise AirflowFailException(
                f"lakehouse must be an entry of the lakehouse list, got {self.lakehouse!r}"
            )
        root = resolve_root(self.lakecore_root)
        python = resolve_python(root, self.lakecore_python)
        application = root / "jobs" / f"{self.job.replace('-', '_')}.py"
        if not application.is_file():
            raise AirflowFailException(
                f"{application} does not exist: is lakecore_root ({root}) a lakecore checkout?"
            )
        if not python.exists():
            raise AirflowFailException(
                f"{python} does not exist: run 'make setup' in {root} or set the Variable lakecore_python"
            )
        report = self.report_path(context)
        self.application = str(application)
        self.application_args = self.job_argv(report)
        self.properties_file = self.properties_file or str(root / "conf" / "spark-defaults.conf")
        log4j = root / "conf" / "log4j2.properties"
        master, deploy_mode = self.spark_master()
        # The driver JVM as spark-submit.sh starts it here (log4j settings, then the quick JIT and
        # the class archive of jobs/driver_jvm.py), when the driver runs on this worker.
        driver_options = [f"-Dlog4j2.configurationFile=file:{log4j}"] if log4j.exists() else []
        if deploy_mode == "client":
            driver_options += driver_jvm_options(python, root)
        self.conf = {
            "spark.pyspark.python": str(python),
            "spark.pyspark.driver.python": str(python),
            **(
                {"spark.driver.extraJavaOptions": " ".join(driver_options)}
                if driver_options
                else {}
            ),
            **(self.conf or {}),
        }
        if master.startswith("spark://") and deploy_mode == "cluster":
            raise AirflowFailException(
                f"the connection {self._conn_id} asks for cluster deploy mode on the standalone master {master}, "
                "which cannot run Python applications: remove its deploy-mode extra (client is the default)"
            )
        local = is_local_master(master)
        if not local:
            # Client deploy mode on a cluster: the executors run the same venv python, from the
            # same checkout path on their nodes (see airflow_dags/README.md).
            self.conf.setdefault("spark.executorEnv.PYTHONPATH", str(root))
        pythonpath = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
        self.env_vars = {
            "PYSPARK_PYTHON": str(python),
            "PYSPARK_DRIVER_PYTHON": str(python),
            "PYTHONPATH": pythonpath,
            # Loopback only in local mode: on a cluster the executors must reach the driver.
            **({"SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")} if local else {}),
            **(self.env_vars or {}),
        }
        # The venv's own spark-submit (pyspark's), as spark-submit.sh picks it. A connection's
        # spark-binary extra may only name spark-submit on PATH, so the path is set here.
        venv_submit = python.parent / "spark-submit"
        if getattr(self, "_spark_binary", None) is None and venv_submit.exists():
            self._spark_binary = str(venv_submit)
        if not self.name or self.name == DEFAULT_SPARK_APP_NAME:
            self.name = f"lakecore {self.job} {self.lakehouse['name']}"
        report.parent.mkdir(parents=True, exist_ok=True)
        # A report left by an earlier try must not pass for this try's.
        report.unlink(missing_ok=True)
        report.with_suffix(".html").unlink(missing_ok=True)
        return report

    def spark_master(self) -> tuple[str, str]:
        """The master and deploy mode of the Spark connection, as the provider's hook reads it."""
        connection = self._get_hook()._connection
        return str(connection.get("master") or ""), str(connection.get("deploy_mode") or "client")

    def execute(self, context: Any) -> dict[str, Any]:
        report_file = self.prepare(context)
        self.log.info(
            "lakecore %s on %s (%s); report %s",
            self.job,
            self.lakehouse["name"],
            self.lakehouse["uri"],
            report_file,
        )
        try:
            super().execute(context)
        except AirflowException as exc:
            report = read_report(report_file)
            code = report.get("exit_code") if report else None
            if code is None:
                code = self._returncode()
            if report:
                context["ti"].xcom_push(key="report", value=report)
            codes = exit_codes(resolve_root(self.lakecore_root))
            message = failure_message(self.job, self.lakehouse, code, report, report_file, codes)
            # Violations, bad arguments, not found and damage come out the same on a retry: the
            # task fails at once instead of retrying.
            if code in codes.NO_RETRY_EXIT_CODES:
                raise AirflowFailException(message) from exc
            raise AirflowException(message) from exc
        report = read_report(report_file)
        if report is None:
            raise AirflowException(
                f"lakecore {self.job} exited 0 but wrote no report at {report_file}"
            )
        for line in report_lines(report):
            self.log.info("%s", line)
        if self.when_planned and report.get("status") == "planned":
            self.log.info("%s", self.when_planned)
        return report

    def _returncode(self) -> int | None:
        process = getattr(self._hook, "_submit_sp", None)
        return getattr(process, "returncode", None)


def driver_jvm_options(python: Path, root: Path) -> list[str]:
    """The options of a driver JVM started on this machine (``python -m jobs.driver_jvm
    --java-options`` in the lakecore venv; this venv never imports lakecore). Empty when that
    cannot run: the job then starts as before, only slower."""
    import subprocess

    try:
        done = subprocess.run(
            [str(python), "-m", "jobs.driver_jvm", "--java-options"],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return done.stdout.split() if done.returncode == 0 else []


def is_local_master(master: str) -> bool:
    """``local``, ``local[2]``, ...: the driver and the executors on the Airflow worker."""
    return master.strip().startswith("local")


def read_report(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def report_lines(report: dict[str, Any]) -> list[str]:
    head = f"lakecore {report.get('job')} [{report.get('status')}]"
    if report.get("dry_run"):
        head += " (dry run)"
    if report.get("base_version") is not None:
        head += f" version {report.get('base_version')}"
        if report.get("new_version") not in (None, report.get("base_version")):
            head += f" -> {report.get('new_version')}"
    lines = [head]
    counts = report.get("counts") or {}
    if counts:
        lines.append(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return lines


def failure_message(
    job: str,
    lakehouse: dict[str, Any],
    code: int | None,
    report: dict[str, Any] | None,
    report_file: Path,
    codes: Any,
) -> str:
    """The task's one failure line; ``codes`` is ``exit_codes(root)``."""
    meaning = codes.ExitCode.describe(code)
    message = f"lakecore {job} on {lakehouse['name']} ({lakehouse['uri']}) failed: exit {code} ({meaning})"
    if report:
        if report.get("error"):
            message += f": {report['error']}"
        violations = (report.get("details") or {}).get("violations")
        if isinstance(violations, list) and violations:
            shown = "; ".join(str(v) for v in violations[:5])
            message += f"; violations: {shown}" + (" ..." if len(violations) > 5 else "")
        message += f" (report: {report_file})"
    else:
        message += f" and wrote no report ({report_file}); see the spark-submit output above"
    if code in codes.NO_RETRY_EXIT_CODES:
        message += "; not retried"
        if job == "validate":
            message += (
                ": this lakehouse's maintenance stops here (nothing after a failed validation runs)"
            )
    return message
