"""Shared test fixtures.

Storage/S3: ``s3_server`` runs moto's S3 server (a real HTTP server on 127.0.0.1, no mock
decorators) for the whole session and hands out fresh, unique lakehouse roots in one bucket.

Spark cluster: ``spark_cluster`` runs a Spark standalone master and two small workers on
127.0.0.1 (``tests/spark_cluster.py``) for the whole session, shared by every test that submits
to a cluster.

Spark Connect: ``spark_connect`` runs one Spark Connect server (master ``local[2]``) on
127.0.0.1 (``tests/spark_connect.py``) for the whole session, shared by every test marked
``connect``. This file is also loaded by the Airflow venv's pytest: standard library only here.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any

import pytest

from tests.spark_cluster import StandaloneCluster, cluster_session
from tests.spark_connect import ConnectServer, connect_server_session

# After every run: the slowest tests, the time per marker, and any new test over 30 s.
pytest_plugins = ["tests.timing_report"]

S3_TEST_BUCKET = "lakecore-test"
S3_TEST_REGION = "us-east-1"


@dataclass(frozen=True)
class S3TestServer:
    """A running moto S3 server and the bucket the tests use."""

    endpoint: str
    bucket: str

    def storage_options(self) -> dict[str, Any]:
        """Options for ``Storage``. The (dummy) credentials travel in the options too: Spark's
        Python workers may have been started before the fixture set the environment."""
        return {
            "client_kwargs": {"endpoint_url": self.endpoint},
            "key": "lakecore-test",
            "secret": "lakecore-test",
        }

    def job_args(self) -> list[str]:
        """The same options as spark-submit.sh arguments."""
        return [
            "--storage-option",
            f"endpoint_url={self.endpoint}",
            "--storage-option",
            "key=lakecore-test",
            "--storage-option",
            "secret=lakecore-test",
        ]

    def new_root(self) -> tuple[str, dict[str, Any]]:
        """A fresh, empty root ``s3://<bucket>/<uuid>/`` and the options to reach it."""
        return f"s3://{self.bucket}/{uuid.uuid4()}/", self.storage_options()

    def client(self) -> Any:
        """A plain boto3 client, for arranging what lakecore itself would never write."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=S3_TEST_REGION)


def _serialised(method: Callable[..., Any], lock: threading.Lock) -> Callable[..., Any]:
    @wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    return locked


@pytest.fixture(scope="session", autouse=True)
def spark_scratch_in_pytest_temp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every JVM the tests start (local sessions, spark-submit, the Connect server, the
    standalone cluster) keeps its scratch (``spark-*``, ``blockmgr-*``, ``artifacts-*``, lz4's
    native library) under pytest's temp, which pytest rotates, not in /tmp: a JVM a test kills
    on purpose leaves its scratch behind, about a dozen folders a run."""
    scratch = str(tmp_path_factory.mktemp("spark-scratch"))
    tmpdir_option = f"-Djava.io.tmpdir={scratch}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_LOCAL_DIRS", scratch)
        # spark-submit.sh's logs of Spark's own output, not the home folder's.
        mp.setenv("LAKECORE_LOG_DIR", str(tmp_path_factory.mktemp("spark-logs")))
        for name in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
            mp.setenv(name, f"{os.environ.get(name, '')} {tmpdir_option}".strip())
        yield


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3TestServer]:
    from moto.s3.responses import S3Response
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as mp:
        # Dummy credentials, only while the server lives; no real profile or endpoint leaks in.
        mp.setenv("AWS_ACCESS_KEY_ID", "lakecore-test")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "lakecore-test")
        mp.setenv("AWS_DEFAULT_REGION", S3_TEST_REGION)
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(name, raising=False)
        # moto checks If-None-Match and then stores the object in two steps, without a lock,
        # while its server handles requests on many threads; AWS S3 makes the check and the
        # write one atomic step. Serialise moto's PutObject so the race tests exercise
        # lakecore's handling of 412, not a race inside the fake server.
        # (Defensive: not observed in 12 rounds of 32 racing writers, but nothing stops it.)
        if hasattr(S3Response, "put_object"):
            locked = _serialised(S3Response.put_object, threading.Lock())
            mp.setattr(S3Response, "put_object", locked)

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            s3 = S3TestServer(endpoint=f"http://{host}:{port}", bucket=S3_TEST_BUCKET)
            s3.client().create_bucket(Bucket=s3.bucket)
            yield s3
        finally:
            server.stop()


class ManualClock:
    """A clock for code that takes one (``LatestVersion``, ``CommitPolicy.clock``): it stands
    still until the test moves ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class MotoClock:
    """How far moto's clock runs behind the real one: the Last-Modified of what it stores and
    the Date of its responses, as a store whose clock differs from this machine's would."""

    behind_seconds: float = 0.0
    date_header: str | None = None  # when set, every response's Date instead of the clock's


@pytest.fixture
def moto_clock(monkeypatch: pytest.MonkeyPatch) -> MotoClock:
    """moto's clock, set behind the real one by the test (``s3_server`` runs in this process)."""
    import datetime
    import email.utils
    import http.server
    import time

    import moto.s3.models

    clock = MotoClock()
    real_utcnow = moto.s3.models.utcnow

    def utcnow() -> datetime.datetime:
        return real_utcnow() - datetime.timedelta(seconds=clock.behind_seconds)

    def date_time_string(self: Any, timestamp: float | None = None) -> str:
        # werkzeug's server dates each response with this (moto adds no Date of its own there);
        # a time given is not the clock's, and is left alone.
        if timestamp is not None:
            return email.utils.formatdate(timestamp, usegmt=True)
        if clock.date_header is not None:
            return clock.date_header
        return email.utils.formatdate(time.time() - clock.behind_seconds, usegmt=True)

    monkeypatch.setattr(moto.s3.models, "utcnow", utcnow)
    monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "date_time_string", date_time_string)
    return clock


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    yield from cluster_session(tmp_path_factory.mktemp("spark-cluster"))


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    yield from connect_server_session(tmp_path_factory.mktemp("spark-connect"))


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses every connection for the whole test: bound, never
    listened on. A port closed again at once was not enough: CI once found something answering
    there (a connect from a port the kernel handed out may meet itself, or another process may
    bind it), and the test saw a request fail where it expected the probe to."""
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        yield reserved.getsockname()[1]


@dataclass
class SilentEndpoint:
    """A TCP endpoint on 127.0.0.1 that accepts every connection and never answers."""

    port: int
    connected: threading.Event  # set at the first connection


@pytest.fixture
def silent_endpoint() -> Iterator[SilentEndpoint]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    endpoint = SilentEndpoint(listener.getsockname()[1], threading.Event())
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue
            endpoint.connected.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield endpoint
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs: a disk that really fills (``fill_disk``). Needs root with mount rights,
    which this project's CI machines have; elsewhere the test is skipped and says why."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_disk(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with one file; returns that file (delete it to free)."""
    filler = disk / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


# -- the shared local SparkSession, and the markers that say what a test starts -----------------


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for the whole session (per xdist worker), shared by every test
    that runs a job in-process (``jobs.X.main(argv, spark=spark)``) or a DataFrame unit."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from jobs.driver_jvm import java_options

    session = (
        SparkSession.builder.master("local[2]")
        # The driver JVM as the jobs' own sessions start it (the quick JIT, the class archive).
        .config("spark.driver.extraJavaOptions", java_options())
        .appName("lakecore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def run_job(spark: Any, tmp_path: Path) -> Callable[..., tuple[int, dict[str, Any]]]:
    """Run a job's ``main(argv, spark=...)`` in-process; returns (exit code, JSON report)."""

    def run(main: Callable[..., int], *argv: str) -> tuple[int, dict[str, Any]]:
        report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
        code = main([*argv, "--report", str(report)], spark=spark)
        data = json.loads(report.read_text()) if report.exists() else {}
        return code, data

    return run


# A test that uses one of these fixtures starts what the marker names (pyproject.toml lists the
# markers and what each costs): `pytest -m 'not cluster'` then leaves out whatever starts the
# cluster, however the test reaches it. Tests that start a JVM through a subprocess
# (spark-submit.sh, python -m jobs.X) carry the marker themselves.
MARKER_OF_FIXTURE: dict[str, str] = {
    "spark": "spark",
    "run_job": "spark",
    "s3_server": "s3",
    "spark_cluster": "cluster",
    "spark_connect": "connect",
    "spark_sql_engine": "engines",
    "trino_server": "engines",
}


# Under pytest-xdist (make test runs two workers) each worker starts the session fixtures it
# needs: a SparkSession or moto costs a few seconds, the cluster, the Connect server and the
# engines (Spark SQL with Iceberg, Trino) much more, so every test of one of those runs on one
# worker (``--dist loadgroup``). A test that uses both engines is in the one "engines" group.
XDIST_GROUP_OF_FIXTURE: dict[str, str] = {
    "spark_cluster": "cluster",
    "spark_connect": "connect",
    "spark_sql_engine": "engines",
    "trino_server": "engines",
}


# tryfirst: xdist's own hook (its worker's, registered after this file is loaded, so called
# before it otherwise) turns each item's xdist_group mark into its group; the marks must be
# there by then. Without it every group was spread over both workers, each starting its own
# cluster and Connect server.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, marker in MARKER_OF_FIXTURE.items():
            if fixture in fixtures:
                item.add_marker(marker)
        if config.pluginmanager.hasplugin("xdist"):  # not in the Airflow venv
            for fixture, group in XDIST_GROUP_OF_FIXTURE.items():
                if fixture in fixtures:
                    item.add_marker(pytest.mark.xdist_group(group))
        if "tests/airflow/" in item.nodeid:
            item.add_marker("airflow")


# Set on an xdist worker when its grouped tests lost their groups (see below).
_GROUPS_LOST = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Notice when xdist would not keep a group on one worker: it groups by a suffix that its
    hook appends to each grouped node id (``...::test@cluster``), and pytest 9.2 ignores that
    append (node ids became structured; pytest-xdist issue 1386): the groups were then spread
    silently, each worker starting every group's servers. Such a test then fails at setup,
    before its fixtures start anything, saying why."""
    if not hasattr(session.config, "workerinput") or not session.config.getvalue("loadgroup"):
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
    ]
    if lost:
        session.config.stash[_GROUPS_LOST] = (
            f"pytest-xdist's --dist loadgroup does not group with pytest {pytest.__version__}: "
            f"{len(lost)} grouped tests would start their group's servers on every worker; "
            "install the pytest pyproject.toml pins (make setup)"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    lost = item.config.stash.get(_GROUPS_LOST, None)
    if lost is not None and item.get_closest_marker("xdist_group"):
        pytest.fail(lost, pytrace=False)
