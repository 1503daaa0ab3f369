"""A real Spark Connect server on 127.0.0.1 for the tests: ``sc://127.0.0.1:PORT``.

Started from the project venv's pyspark with ``$SPARK_HOME/sbin/start-connect-server.sh``
(master ``local[2]``, the repo's ``conf/spark-defaults.conf``, like a local ``spark-submit.sh``
run), stopped with ``sbin/stop-connect-server.sh`` and then by PID. Standard library only: this
file is imported by tests/conftest.py, which the Airflow venv's pytest loads too; the probe that
proves the server answers runs in a subprocess on the project venv's Python (a Connect session
in the test process would switch its later classic sessions to Connect mode).

The server's Python workers run the project venv's Python with the repo on PYTHONPATH, so they
import this checkout's ``lakecore`` and ``jobs``. Like the cluster's workers, the server gets no
AWS credentials or endpoints from the test process: the jobs pass theirs as storage options.
What ran on it is read from its UI's REST API (``/api/v1``): every Spark job it ran, with the
tags the client gave it (a lakecore job tags its stages ``lakecore-<job>-<id>``). Its event
log goes to ``<base>/events`` and its own log to ``<base>/logs`` (the tail is in every error).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.spark_cluster import PROJECT_PYTHON, REPO, free_port, get_json, project_spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
IDENT = "lakecore-tests"
MASTER = "local[2]"
START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0
_USER_TAG = "_Tag_"
# What the server must not inherit from the test process. SPARK_MASTER would even make
# spark-daemon.sh rsync SPARK_HOME from it; SPARK_REMOTE and SPARK_CONNECT_MODE_ENABLED would
# turn the server's own PySpark into a client.
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
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "SPARK_LOCAL_IP",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
)

# Run by the project venv's Python: one client session, one tiny query, then let go.
_PROBE = """
import sys
from pyspark.sql.connect.session import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
assert spark.range(1).collect()[0][0] == 0
spark.stop()
"""


class ConnectServerError(RuntimeError):
    """The server did not start, or did not answer in time (the message has its log's tail)."""


@dataclass
class ConnectServer:
    """A running Spark Connect server; ``url`` is what ``--remote`` and ``$SPARK_REMOTE`` take."""

    spark_home: Path
    base: Path
    port: int
    ui_port: int
    pid: int | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def ui(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def pid_dir(self) -> Path:
        return self.base / "pids"

    @property
    def log_dir(self) -> Path:
        return self.base / "logs"

    @property
    def event_dir(self) -> Path:
        return self.base / "events"

    @property
    def pid_file(self) -> Path:
        return self.pid_dir / f"spark-{IDENT}-{SERVER_CLASS}-1.pid"

    # -- starting and stopping -----------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD_ENV}
        env.update(
            {
                "SPARK_HOME": str(self.spark_home),
                "SPARK_CONF_DIR": str(
                    self.base / "conf"
                ),  # empty: no spark-env.sh from anywhere else
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_PID_DIR": str(self.pid_dir),
                "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_IDENT_STRING": IDENT,
                "SPARK_NICENESS": "0",
                # The server's Python workers: the venv's Python, importing this checkout.
                "PYSPARK_PYTHON": str(PROJECT_PYTHON),
                "PYTHONPATH": str(REPO),
                # No instance metadata service and no shared credentials here (see spark_cluster.py).
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(self.base / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(self.base / "no-aws-credentials"),
            }
        )
        return env

    def server_args(self) -> list[str]:
        python = str(PROJECT_PYTHON)
        return [
            "--master",
            MASTER,
            "--properties-file",
            str(REPO / "conf" / "spark-defaults.conf"),
            "--conf",
            "spark.driver.memory=1g",
            "--conf",
            f"spark.connect.grpc.binding.address={self.host}",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.driver.bindAddress=127.0.0.1",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            f"spark.ui.port={self.ui_port}",
            "--conf",
            "spark.port.maxRetries=0",  # the UI on exactly ui_port, or a clear failure
            "--conf",
            f"spark.pyspark.python={python}",
            "--conf",
            f"spark.pyspark.driver.python={python}",
            "--conf",
            f"spark.executorEnv.PYTHONPATH={REPO}",
            "--conf",
            "spark.eventLog.enabled=true",
            "--conf",
            "spark.eventLog.compress=false",
            "--conf",
            f"spark.eventLog.dir=file://{self.event_dir}",
        ]

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def start(self) -> None:
        for folder in (self.pid_dir, self.log_dir, self.event_dir, self.base / "conf"):
            folder.mkdir(parents=True, exist_ok=True)
        script = self.spark_home / "sbin" / "start-connect-server.sh"
        # spark-daemon.sh starts the server with nohup in the background, writes its PID file
        # and returns after a few seconds (sooner if the JVM died: it then prints the log's tail).
        # A session of its own: a Ctrl-C at the test's terminal is not the server's.
        done = subprocess.run(
            [str(script), *self.server_args()],
            env=self.env(),
            cwd=self.base,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            start_new_session=True,
        )
        if self.pid_file.exists():
            self.pid = int(self.pid_file.read_text().strip())
        if done.returncode != 0 or "failed to launch" in done.stdout or self.pid is None:
            raise ConnectServerError(
                f"start-connect-server.sh exited {done.returncode}: {done.stdout.strip()} {done.stderr.strip()}\n"
                f"{self.log_tail()}"
            )

    def alive(self) -> bool:
        return self.pid is not None and _running(self.pid)

    def port_open(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            return sock.connect_ex((self.host, self.port)) == 0

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until a client's session runs a query: the port first (cheap), then one real probe."""
        deadline = time.monotonic() + timeout
        problem = "the gRPC port never opened"
        while time.monotonic() < deadline:
            if not self.alive():
                raise ConnectServerError(
                    f"the Spark Connect server (PID {self.pid}) exited while starting:\n"
                    f"{self.log_tail()}"
                )
            if self.port_open():
                left = max(10.0, deadline - time.monotonic())
                try:
                    probe = subprocess.run(
                        [str(PROJECT_PYTHON), "-c", _PROBE, self.url],
                        capture_output=True,
                        text=True,
                        timeout=left,
                        check=False,
                        env=client_env(),
                    )
                except subprocess.TimeoutExpired:
                    problem = f"a client's probe did not finish in {left:.0f}s"
                    break
                if probe.returncode == 0:
                    return
                problem = f"a client's probe failed: {probe.stderr.strip()[-1500:]}"
            time.sleep(0.5)
        raise ConnectServerError(
            f"the Spark Connect server on {self.url} did not answer in {timeout:.0f}s "
            f"({problem}); its log ends:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """stop-connect-server.sh (same PID folder), then SIGTERM/SIGKILL by PID if still alive;
        the server's Python workers go with it (any left behind are killed by PID too)."""
        if self.pid is None:
            return
        children = _descendants(self.pid)
        script = self.spark_home / "sbin" / "stop-connect-server.sh"
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                [str(script)],
                env=self.env(),
                cwd=self.base,
                capture_output=True,
                timeout=60,
                check=False,
            )
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if _wait_gone(self.pid, STOP_TIMEOUT):
                break
            _kill(self.pid, sig)
        _wait_gone(self.pid, STOP_TIMEOUT)
        for child in children:
            if _running(child):
                _kill(child, signal.SIGKILL)
                _wait_gone(child, 10.0)
        left = [pid for pid in (self.pid, *children) if _running(pid)]
        self.pid = None
        if left:
            raise ConnectServerError(
                f"the Spark Connect server's processes {left} are still running after SIGKILL"
            )

    # -- what it did ---------------------------------------------------------------------------

    def log_tail(self, lines: int = 40) -> str:
        logs = (
            sorted(self.log_dir.glob("*.out"), key=lambda p: p.stat().st_mtime)
            if self.log_dir.exists()
            else []
        )
        if not logs:
            return "(no server log)"
        text = logs[-1].read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(text)

    def application(self) -> dict[str, Any]:
        """The server's one Spark application (``id``, ``name``)."""
        apps: list[dict[str, Any]] = get_json(f"{self.ui}/api/v1/applications")
        if len(apps) != 1:
            raise AssertionError(f"the Connect server's UI lists {len(apps)} applications: {apps}")
        return apps[0]

    def jobs(self) -> list[dict[str, Any]]:
        """Every Spark job the server has run (its UI keeps the last 1000): ``jobId``, ``status``,
        ``jobTags`` (the client's ``addTag`` tags among them), ``numTasks``."""
        app = self.application()["id"]
        jobs: list[dict[str, Any]] = get_json(
            f"{self.ui}/api/v1/applications/{urllib.parse.quote(app)}/jobs"
        )
        return jobs

    def user_tags(self, prefix: str) -> dict[str, int]:
        """The tags starting with ``prefix`` (``lakecore-gc-``) that clients gave the server's
        Spark jobs (``addTag``), each with its number of jobs. The server records a client's tag
        as ``SparkConnect_SessionTag_User_<user>_Session_<id>_Tag_<tag>``."""
        found: dict[str, int] = {}
        for job in self.jobs():
            for tag in job.get("jobTags", []):
                user_tag = tag.split(_USER_TAG, 1)[1] if _USER_TAG in tag else tag
                if user_tag.startswith(prefix):
                    found[user_tag] = found.get(user_tag, 0) + 1
        return found

    def describe(self) -> str:
        return json.dumps({"url": self.url, "ui": self.ui, "pid": self.pid, "base": str(self.base)})


def client_env(**changes: str | None) -> dict[str, str]:
    """An environment for a Connect client process: no classic-Spark or AWS settings of the test
    process (the jobs get theirs as arguments), and the repo on PYTHONPATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "SPARK_REMOTE",
            "SPARK_CONNECT_MODE_ENABLED",
            "PYSPARK_GATEWAY_PORT",
            "PYSPARK_GATEWAY_SECRET",
        )
    }
    env["PYTHONPATH"] = str(REPO)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _running(pid: int) -> bool:
    """True while ``pid`` is a live process, not a zombie (a daemonized server's parent is init,
    which may reap it late)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _descendants(pid: int) -> list[int]:
    """The PIDs of ``pid``'s children, grandchildren, ... (from /proc; empty where there is none)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def start_server(base: Path) -> ConnectServer:
    base.mkdir(parents=True, exist_ok=True)
    server = ConnectServer(project_spark_home(), base, free_port(), free_port())
    try:
        server.start()
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


def connect_server_session(base: Path) -> Iterator[ConnectServer]:
    """The body of the session fixture: start, hand out, stop by PID."""
    server = start_server(base)
    try:
        yield server
    finally:
        server.stop()
