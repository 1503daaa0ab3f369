"""A real Spark standalone cluster on 127.0.0.1 for the tests: one master, two workers.

Started from the project venv's pyspark (``$SPARK_HOME/bin/spark-class ...deploy.master.Master``
and ``...deploy.worker.Worker``), stopped by PID. Standard library only: the Airflow venv's
tests use it too (it has no pyspark; SPARK_HOME is the project venv's).

The workers are small (one core, 1 GiB each) so the cluster fits the 2-core CI machine, and
they run without any AWS credentials in their environment: an executor gets credentials only
the ways a user gives them (``spark.executorEnv.*``, storage options), which is what the tests
check. What ran where is read from the master's JSON API and from the applications' event logs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"
WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "1g"
START_TIMEOUT = 120.0
# Credentials and settings a worker (hence an executor) must not inherit from the test process.
_WITHHELD_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "PYTHONPATH",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_MASTER",
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def project_spark_home() -> Path:
    """The project venv's pyspark folder: a complete Spark (jars, bin/, python/lib/pyspark.zip)."""
    done = subprocess.run(
        [str(PROJECT_PYTHON), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return Path(done.stdout.strip())


def get_json(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode())


@dataclass
class StandaloneCluster:
    """A running master and its workers; ``url`` is what ``--master`` takes."""

    spark_home: Path
    base: Path
    master_port: int
    webui_port: int
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def state(self) -> dict[str, Any]:
        """The master's JSON API (``/json/``): workers, cores, active and completed apps."""
        data: dict[str, Any] = get_json(f"{self.webui}/json/")
        return data

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD_ENV}
        env.update(
            {
                "SPARK_HOME": str(self.spark_home),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m",
                "SPARK_LOG_DIR": str(self.base / "logs"),
                # A killed worker is declared dead after 15 s instead of 60 (the kill test).
                "SPARK_MASTER_OPTS": "-Dspark.worker.timeout=15",
                # No instance metadata service here: without this botocore waits for it on every
                # lookup of the (withheld) credentials. No shared credentials file either.
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(self.base / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(self.base / "no-aws-credentials"),
            }
        )
        return env

    def _spawn(self, name: str, *args: str) -> None:
        log = (self.base / f"{name}.log").open("wb")
        # spark-class ends in `exec java ...`: the PID is the JVM's, so stopping it is one kill.
        self.processes[name] = subprocess.Popen(
            [str(self.spark_home / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self.base,
            start_new_session=True,
        )

    def start_master(self) -> None:
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.webui_port),
        )

    def start_worker(self, index: int) -> None:
        work = self.base / f"worker-{index}"
        work.mkdir(exist_ok=True)
        self._spawn(
            f"worker-{index}",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--cores",
            str(WORKER_CORES),
            "--memory",
            WORKER_MEMORY,
            "--work-dir",
            str(work),
            "--webui-port",
            str(free_port()),
            self.url,
        )

    def worker_pid(self, index: int) -> int:
        return self.processes[f"worker-{index}"].pid

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker JVM, as a machine failure would (its executors lose their worker)."""
        process = self.processes.pop(f"worker-{index}")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def replace_worker(self, index: int) -> None:
        """After ``kill_worker``: wait until the master has given the dead worker up, then start
        a new one in its place, so the next test finds two workers again."""
        self.wait_until(WORKERS - 1, timeout=90)
        self.start_worker(index)
        self.wait_until(WORKERS)

    def wait_until(self, alive_workers: int, timeout: float = START_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {process.returncode}: {self.log_tail(name)}"
                    )
            try:
                last = self.state()
                if (
                    int(last.get("aliveworkers", 0)) == alive_workers
                    and last.get("status") == "ALIVE"
                ):
                    return dict(last)
            except (OSError, ValueError) as exc:
                # ValueError: a master still starting answered /json/ with its HTML page (a
                # fresh-clone run met it once, right after the master bound its web UI).
                last = exc
            time.sleep(0.5)
        raise RuntimeError(
            f"the cluster did not reach {alive_workers} alive workers in {timeout}s: {last}"
        )

    def wait_for_idle(self, timeout: float = 60.0) -> None:
        """No application holds the cluster's cores (the next submission gets both executors)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            if not state.get("activeapps") and int(state.get("coresused", 0)) == 0:
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"applications still hold the cluster after {timeout}s: {self.state().get('activeapps')}"
        )

    def completed_app(self, app_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The master's record of a finished application (it lists it a moment after the end)."""
        deadline = time.monotonic() + timeout
        while True:
            for app in self.state().get("completedapps", []):
                if app.get("id") == app_id:
                    return dict(app)
            if time.monotonic() > deadline:
                raise AssertionError(f"the master lists no completed application {app_id}")
            time.sleep(0.5)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.base / f"{name}.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for name, process in list(self.processes.items()):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
            self.processes.pop(name)


def start_cluster(base: Path) -> StandaloneCluster:
    base.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(project_spark_home(), base, free_port(), free_port())
    try:
        cluster.start_master()
        cluster.wait_until(0)
        for index in range(WORKERS):
            cluster.start_worker(index)
        cluster.wait_until(WORKERS)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def cluster_session(base: Path) -> Iterator[StandaloneCluster]:
    """The body of the session fixture: start, hand out, stop by PID."""
    cluster = start_cluster(base)
    try:
        yield cluster
    finally:
        cluster.stop()


# -- what an application did: its event log -------------------------------------------------------


@dataclass
class AppRun:
    """One application's event log, boiled down to what the tests check."""

    app_id: str
    spark_properties: dict[str, str]
    executors: dict[str, str]  # executor id -> host
    tasks_by_executor: dict[str, int]
    failed_tasks: int

    @property
    def tasks(self) -> int:
        return sum(self.tasks_by_executor.values())


def event_log_args(directory: Path) -> list[str]:
    """spark-submit arguments that write the application's event log into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        "spark.eventLog.compress=false",
        "--conf",
        f"spark.eventLog.dir=file://{directory}",
    ]


def _event_lines(entry: Path) -> Iterator[str]:
    """The JSON lines of one application's log: a file, or (Spark 4's default, rolling) a folder
    ``eventlog_v2_<app>`` of ``events_<n>_<app>`` files."""
    if entry.is_file():
        yield from entry.read_text().splitlines()
        return
    parts = sorted(entry.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    for part in parts:
        yield from part.read_text().splitlines()


def read_event_logs(directory: Path) -> list[AppRun]:
    runs = []
    for entry in sorted(p for p in directory.iterdir() if not p.name.startswith(".")):
        app_id = ""
        properties: dict[str, str] = {}
        executors: dict[str, str] = {}
        tasks: dict[str, int] = {}
        failed = 0
        for line in _event_lines(entry):
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerApplicationStart":
                app_id = event.get("App ID", "")
            elif kind == "SparkListenerEnvironmentUpdate":
                properties = dict(event.get("Spark Properties", {}))
            elif kind == "SparkListenerExecutorAdded":
                executors[event["Executor ID"]] = event.get("Executor Info", {}).get("Host", "")
            elif kind == "SparkListenerTaskEnd":
                info = event.get("Task Info", {})
                if event.get("Task End Reason", {}).get("Reason") == "Success":
                    executor = str(info.get("Executor ID"))
                    tasks[executor] = tasks.get(executor, 0) + 1
                else:
                    failed += 1
        runs.append(AppRun(app_id, properties, executors, tasks, failed))
    return runs


def non_loopback_address() -> str | None:
    """This host's address on its default route, if it has one (nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))
            address = str(sock.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address
