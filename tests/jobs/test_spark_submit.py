"""spark-submit.sh and the job files as a user runs them: real subprocesses, real spark-submit.

Each spark-submit starts a JVM, so only two tests do (marked ``spark``); the argument errors are
caught before any JVM starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakecore.lakehouse import Lakehouse
from tests.conftest import fill_disk

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "spark-submit.sh"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
TIMEOUT = 300


def _lake(path: Path) -> str:
    lh = Lakehouse.create(str(path), name="submitted", order=4)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(6):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i}", properties={"i": str(i)})
    return lh.uri


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run(
    args: list[str], env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.spark
def test_wrapper_runs_a_job_and_writes_its_report(tmp_path: Path) -> None:
    _lake(tmp_path / "lake")
    validate = (REPO / "jobs" / "validate.py").exists()
    job, options = ("validate", ["--no-expectations"]) if validate else ("flush", [])
    report = tmp_path / "report.json"
    # Another job's UI on Spark's first port (two jobs at once): this one's UI takes the next port
    # without a warning line of its own.
    with _holding_the_first_ui_port():
        # From another directory, relative paths, no PYTHONPATH: the wrapper sets up everything itself.
        done = _run(
            [str(WRAPPER), job, "--lakehouse", "lake", *options, "--report", "report.json"],
            env=_env(PYTHONPATH=None, PYSPARK_PYTHON=None, PYSPARK_DRIVER_PYTHON=None),
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(report.read_text())
    assert data["job"] == job
    assert data["status"] == "ok"
    assert data["exit_code"] == 0
    assert f"lakecore {job} [ok]" in done.stdout
    # Spark's own output goes to the run's log file, not the terminal; there
    # conf/log4j2.properties keeps Spark's INFO chatter out, and the UI's port retries.
    assert done.stderr == ""
    log = Path(data["spark_log"])
    assert log.parent == Path(os.environ["LAKECORE_LOG_DIR"]) and log.name.startswith(
        f"lakecore-{job}-"
    )
    assert " INFO " not in log.read_text()
    assert "could not bind" not in log.read_text()


@contextlib.contextmanager
def _holding_the_first_ui_port() -> Iterator[None]:
    """Spark's first UI port (4040) in use while the block runs: held here, or by whoever holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        with contextlib.suppress(OSError):  # in use already: by another Spark, which serves as well
            held.bind(("0.0.0.0", 4040))
            held.listen()
        yield


@pytest.mark.spark
def test_a_jobs_error_line_is_on_stderr(tmp_path: Path) -> None:
    """Spark's PythonRunner relays the driver's stderr on stdout: the wrapper prints the job's
    one error line on stderr itself, once, and the summary stays on stdout."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    (
        tmp_path / "no-lake"
    ).mkdir()  # a folder, but no lakehouse: the driver finds out (a missing one is refused sooner)
    done = _run(
        [str(WRAPPER), "validate", "--lakehouse", str(tmp_path / "no-lake"), "--no-expectations"],
        env=_env(TMPDIR=str(scratch)),
    )
    assert done.returncode == 5, done.stderr[-3000:]
    line = f"lakecore validate: NoLakehouseError: no lakehouse at file://{tmp_path / 'no-lake'}/"
    assert [text for text in done.stderr.splitlines() if text.startswith("lakecore validate:")] == [
        text for text in done.stderr.splitlines() if text.startswith(line)
    ], done.stderr
    assert sum(text.startswith(line) for text in done.stderr.splitlines()) == 1, done.stderr
    assert (
        "lakecore validate:" not in done.stdout and "lakecore validate [failed]" in done.stdout
    ), done.stdout
    assert not list(scratch.glob("lakecore-job-*")), "the wrapper's files outlived it"


@pytest.mark.spark
def test_plain_spark_submit_of_a_job_file(tmp_path: Path) -> None:
    uri = _lake(tmp_path / "lake")
    report = tmp_path / "report.json"
    env = _env(
        PYTHONPATH=None,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    done = _run(
        [str(SPARK_SUBMIT), "jobs/flush.py", "--lakehouse", uri, "--report", str(report)], env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(report.read_text())["status"] == "ok"


def _wrapper_jobs() -> list[str]:
    """The jobs spark-submit.sh runs (its ``JOBS=`` line)."""
    line = next(x for x in WRAPPER.read_text().splitlines() if x.startswith("JOBS="))
    return line.split("=", 1)[1].strip('"').split()


def test_a_job_file_run_by_its_path_finds_the_repo_and_starts_its_job(tmp_path: Path) -> None:
    """spark-submit runs jobs/JOB.py by its path, which puts jobs/ on sys.path, not the repo:
    the job file puts the repo first and starts its job, even where nothing installed ``jobs``
    (``-S``: no .pth file, so no editable install; site-packages by PYTHONPATH), from another
    folder. Every job file is that one file but for the job's name, and importing one does
    nothing: the job is ``jobs.JOB_job``."""
    import importlib
    import importlib.util

    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    done = _run(
        [sys.executable, "-S", str(REPO / "jobs" / "gc.py"), "--help"],
        env=_env(PYTHONPATH=site_packages),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: spark-submit jobs/gc.py "), done.stdout
    gc_file = (REPO / "jobs" / "gc.py").read_text()
    for job in _wrapper_jobs():
        module = job.replace("-", "_")
        text = (REPO / "jobs" / f"{module}.py").read_text()
        assert text == gc_file.replace("gc", module).replace(f'"{module}"', f'"{job}"'), job
        imported = importlib.import_module(f"jobs.{module}")
        assert [name for name in vars(imported) if not name.startswith("__")] == [], job
        assert importlib.util.find_spec(f"jobs.{module}_job") is not None, job


def test_an_unknown_job_is_one_line_naming_the_jobs() -> None:
    done = _run([str(WRAPPER), "vacuum", "--lakehouse", "/nowhere"])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "spark-submit.sh: unknown job 'vacuum'; the jobs: flush, gc, compact-versions, table-maintenance, validate, export, repair "
        "(./spark-submit.sh --help)"
    ]
    assert done.stdout == ""
    done = _run([str(WRAPPER), "valdate", "--lakehouse", "/nowhere"])
    assert done.returncode == 2
    assert done.stderr.startswith(
        "spark-submit.sh: unknown job 'valdate' (did you mean validate?); the jobs: "
    )
    assert len(done.stderr.splitlines()) == 1


def test_a_standalone_master_that_does_not_answer_is_one_line_at_once(
    tmp_path: Path, refusing_port: int
) -> None:
    """spark-submit tried to register for a minute and printed about 130 lines of Java traces."""
    port = refusing_port
    uri = _lake(tmp_path / "lake")
    for master_args, env in (
        ([], _env(SPARK_MASTER=f"spark://127.0.0.1:{port}")),
        (["--master", f"spark://127.0.0.1:{port},127.0.0.1:{port}"], _env()),
    ):
        done = _run([str(WRAPPER), "gc", "--lakehouse", uri, "--dry-run", *master_args], env=env)
        assert done.returncode == 4, done.stderr
        assert done.stderr.splitlines() == [
            f"spark-submit.sh: the Spark master spark://127.0.0.1:{port}"
            f"{f',127.0.0.1:{port}' if master_args else ''} does not answer (nothing accepts connections there): "
            "check that it is running, and SPARK_MASTER or --master"
        ]  # and nothing from a JVM


def test_cluster_mode_needs_spark_master() -> None:
    done = _run(
        [str(WRAPPER), "--cluster", "flush", "--lakehouse", "s3://bucket/lake"],
        env=_env(SPARK_MASTER=None),
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "spark-submit.sh: --cluster needs SPARK_MASTER (e.g. yarn, k8s://https://host:443, spark://host:7077)"
    ]


def test_bad_arguments_exit_2_with_one_line_on_stderr(tmp_path: Path) -> None:
    # The job file itself, run as a file like spark-submit runs it; options are parsed before
    # the job starts Spark, so no JVM is needed to see the error.
    done = _run(
        [
            sys.executable,
            "jobs/export.py",
            "--lakehouse",
            str(tmp_path),
            "--name",
            "n",
            "--mode",
            "nope",
            "--target",
            str(tmp_path / "copy"),
        ],
        env=_env(PYTHONPATH=None),
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "--mode" in lines[0] and "nope" in lines[0]


def test_wrapper_is_valid_bash() -> None:
    assert os.access(WRAPPER, os.X_OK)
    assert _run(["bash", "-n", str(WRAPPER)]).returncode == 0


@pytest.mark.parametrize(
    ("master", "deploy_mode", "message"),
    [
        (
            "local[2]",
            None,
            "--cluster needs a cluster master, not 'local[2]': run without --cluster for local mode",
        ),
        (
            "spark://h:7077",
            "cluster",
            "a standalone master (spark://) cannot run Python applications in cluster deploy mode",
        ),
        ("mesos://h:5050", None, "SPARK_MASTER 'mesos://h:5050' is not a Spark master URL"),
        ("spark:/h:7077", None, "SPARK_MASTER 'spark:/h:7077' is not a Spark master URL"),
        ("yarn", "sideways", "LAKECORE_DEPLOY_MODE must be client or cluster, not 'sideways'"),
        ("yarn", None, "SPARK_MASTER=yarn needs HADOOP_CONF_DIR or YARN_CONF_DIR"),
        (
            "k8s://https://api:443",
            None,
            "Kubernetes cluster deploy mode uploads the job file and the archive",
        ),
    ],
)
def test_cluster_mode_refuses_what_the_master_cannot_run(
    master: str, deploy_mode: str | None, message: str
) -> None:
    # Refused before anything is packed or started: exit 2, one line.
    done = _run(
        [str(WRAPPER), "--cluster", "validate", "--lakehouse", "s3://bucket/lake"],
        env=_env(
            SPARK_MASTER=master,
            LAKECORE_DEPLOY_MODE=deploy_mode,
            HADOOP_CONF_DIR=None,
            YARN_CONF_DIR=None,
            LAKECORE_SPARK_ARGS=None,
        ),
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"spark-submit.sh: {message}"), done.stderr


def test_driver_binds_to_loopback_in_local_mode_only(tmp_path: Path) -> None:
    """With SPARK_MASTER naming a cluster the wrapper passes it as --master and leaves the
    driver's address to Spark (executors on other hosts connect back to it); in local mode it
    binds the driver to 127.0.0.1. (--cluster without SPARK_HOME or PYSPARK_* is covered by
    tests/cluster, which submits that way.)"""
    # A stand-in spark-submit records what it was given instead of starting a JVM.
    record = tmp_path / "record"
    stub = tmp_path / "spark-submit"
    stub.write_text(
        f'#!/bin/sh\necho "SPARK_LOCAL_IP=${{SPARK_LOCAL_IP:-}}" > {record}\necho "$@" >> {record}\n'
    )
    stub.chmod(0o755)
    env = _env(SPARK_LOCAL_IP=None, SPARK_MASTER="spark://10.0.0.5:7077", SPARK_SUBMIT=str(stub))
    done = _run([str(WRAPPER), "validate", "--lakehouse", "s3://bucket/lake"], env=env)
    assert done.returncode == 0, done.stderr
    address, argv = record.read_text().splitlines()
    assert address == "SPARK_LOCAL_IP="
    assert "--master spark://10.0.0.5:7077" in argv
    assert f"spark.executorEnv.PYTHONPATH={REPO}" in argv  # the executors import the checkout
    assert (
        "bindAddress" not in argv
        and "bindAddress" not in (REPO / "conf" / "spark-defaults.conf").read_text()
    )
    done = _run(
        [str(WRAPPER), "validate", "--lakehouse", "s3://bucket/lake"],
        env={**env, "SPARK_MASTER": ""},
    )
    assert done.returncode == 0, done.stderr
    address, argv = record.read_text().splitlines()
    assert address == "SPARK_LOCAL_IP=127.0.0.1"
    assert "--master" not in argv.split()  # local[*] from conf/spark-defaults.conf


# -- --remote sc://HOST:PORT and $SPARK_REMOTE: Spark Connect, no spark-submit -------------------------


def _recording_submit(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in spark-submit that records that it ran (and whether SPARK_REMOTE reached it)."""
    record = tmp_path / "submitted"
    stub = tmp_path / "spark-submit"
    stub.write_text(
        f'#!/bin/sh\necho "SPARK_REMOTE=${{SPARK_REMOTE:-}}" > {record}\necho "$@" >> {record}\n'
    )
    stub.chmod(0o755)
    return stub, record


@pytest.mark.parametrize(
    ("options", "environment"),
    [
        (["--remote", "sc://127.0.0.1:1"], {}),
        (["--remote=sc://127.0.0.1:1"], {}),
        ([], {"SPARK_REMOTE": "sc://127.0.0.1:1"}),
    ],
)
def test_a_remote_runs_the_job_in_python_without_spark_submit(
    tmp_path: Path, options: list[str], environment: dict[str, str]
) -> None:
    """With a remote the wrapper runs `.venv/bin/python -m jobs.<job>` itself: spark-submit is
    never started, and the job's own errors reach stderr as one line. The lakehouse does not
    exist, so the job stops (exit 5) before it would talk to the endpoint; SPARK_MASTER (even a
    bad one) does not matter."""
    stub, record = _recording_submit(tmp_path)
    env = _env(
        SPARK_SUBMIT=str(stub),
        SPARK_MASTER="mesos://h:5050",
        **{"SPARK_REMOTE": None, **environment},
    )
    done = _run(
        [str(WRAPPER), "validate", "--lakehouse", str(tmp_path / "none"), *options], env=env
    )
    assert not record.exists(), record.read_text()
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "lakecore validate: NoLakehouseError: no lakehouse at"
    ), done.stderr
    # --help goes to the job's parser too, with its --remote option
    done = _run([str(WRAPPER), "gc", "--help", *options], env=env)
    assert done.returncode == 0 and "--remote sc://HOST:PORT" in done.stdout, done.stderr
    assert not record.exists()


def test_an_abbreviated_option_is_refused_naming_the_option_it_begins(tmp_path: Path) -> None:
    """argparse took --remo for --remote, and --i for --i-understand-grace-risk: a stray keystroke
    overrode a safety refusal (found by a new-user trial). Options are written in full."""
    stub, record = _recording_submit(tmp_path)
    env = _env(SPARK_SUBMIT=str(stub), SPARK_REMOTE=None)
    uri = str(tmp_path / "none")
    for options, unknown, begun in (
        (["--remo", "sc://127.0.0.1:1"], "--remo", "--remote"),
        (["--i", "--now", "2026-11-28"], "--i", "--i-understand-grace-risk"),
        (["--dry"], "--dry", "--dry-run"),
    ):
        done = _run([str(WRAPPER), "gc", "--lakehouse", uri, *options], env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"lakecore gc: ArgumentError: unrecognized option {unknown} (did you mean {begun}? options are "
            "written in full) (see 'spark-submit.sh gc --help')"
        ], done.stderr
        assert not record.exists()
    # The refusal an abbreviation would have overridden stands.
    done = _run([str(WRAPPER), "gc", "--lakehouse", uri, "--older-than", "5m", "--i"], env=env)
    assert done.returncode == 2 and "--older-than 5m is shorter than 1h" in done.stderr, done.stderr
    assert not record.exists()


@pytest.mark.parametrize(
    ("options", "environment", "message"),
    [
        (
            ["--remote", "localhost:1"],
            {},
            "--remote 'localhost:1' is not a Spark Connect address (sc://HOST:PORT)",
        ),
        (
            ["--remote=http://h:1"],
            {},
            "--remote 'http://h:1' is not a Spark Connect address (sc://HOST:PORT)",
        ),
        (
            [],
            {"SPARK_REMOTE": "h:15002"},
            "SPARK_REMOTE 'h:15002' is not a Spark Connect address (sc://HOST:PORT)",
        ),
    ],
)
def test_a_remote_that_is_not_sc_is_refused(
    tmp_path: Path, options: list[str], environment: dict[str, str], message: str
) -> None:
    stub, record = _recording_submit(tmp_path)
    env = _env(SPARK_SUBMIT=str(stub), **{"SPARK_REMOTE": None, **environment})
    done = _run([str(WRAPPER), "flush", "--lakehouse", "s3://bucket/lake", *options], env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"spark-submit.sh: {message}"]
    assert done.stdout == "" and not record.exists()


@pytest.mark.parametrize(
    ("options", "environment", "source"),
    [
        (["--remote", "sc://h:15002"], {}, "--remote"),
        ([], {"SPARK_REMOTE": "sc://h:15002"}, "SPARK_REMOTE"),
    ],
)
def test_cluster_and_a_remote_are_one_or_the_other(
    tmp_path: Path, options: list[str], environment: dict[str, str], source: str
) -> None:
    stub, record = _recording_submit(tmp_path)
    env = _env(
        SPARK_SUBMIT=str(stub),
        SPARK_MASTER="spark://h:7077",
        **{"SPARK_REMOTE": None, **environment},
    )
    done = _run(
        [str(WRAPPER), "--cluster", "gc", "--lakehouse", "s3://bucket/lake", *options], env=env
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"spark-submit.sh: --cluster submits to $SPARK_MASTER, {source} 'sc://h:15002' runs through Spark "
        "Connect: use one or the other"
    ]
    assert not record.exists()


def test_the_jobs_master_wins_over_spark_remote(tmp_path: Path) -> None:
    """--master among the job's options: classic Spark through spark-submit, as the job itself
    decides, and $SPARK_REMOTE does not reach pyspark (it would make its session a Connect one)."""
    stub, record = _recording_submit(tmp_path)
    env = _env(SPARK_SUBMIT=str(stub), SPARK_REMOTE="sc://h:15002", SPARK_MASTER=None)
    done = _run(
        [str(WRAPPER), "validate", "--lakehouse", "s3://bucket/lake", "--master", "local[1]"],
        env=env,
    )
    assert done.returncode == 0, done.stderr
    remote, argv = record.read_text().splitlines()
    assert remote == "SPARK_REMOTE="
    assert argv.endswith("jobs/validate.py --lakehouse s3://bucket/lake --master local[1]")


@pytest.mark.spark
def test_a_jobs_own_master_wins_over_spark_remote(tmp_path: Path) -> None:
    """The job itself (no wrapper) with --master and SPARK_REMOTE set: a classic session on that
    master (pyspark alone would refuse the two together, or make a Connect client)."""
    uri = _lake(tmp_path / "lake")
    report = tmp_path / "report.json"
    done = _run(
        [
            sys.executable,
            "-m",
            "jobs.validate",
            "--lakehouse",
            uri,
            "--master",
            "local[1]",
            "--no-expectations",
            "--report",
            str(report),
        ],
        env=_env(PYTHONPATH=str(REPO), SPARK_REMOTE="sc://127.0.0.1:1", SPARK_LOCAL_IP="127.0.0.1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(report.read_text())["status"] == "ok"


@pytest.mark.spark
def test_an_executors_failure_is_one_line_and_sparks_traces_go_to_the_log(
    tmp_path: Path, small_disk: Path
) -> None:
    """The trial: export --mode full into a full disk printed 84 lines of Java and Python
    traces, and its one line was the raw PythonException. Now: the executor's StorageError as
    one line on stderr, exit 4, and Spark's traces in the run's log file."""
    lake = _lake(tmp_path / "lake")
    fill_disk(small_disk)
    logs = tmp_path / "logs"
    done = _run(
        [
            str(WRAPPER),
            "export",
            "--lakehouse",
            lake,
            "--mode",
            "full",
            "--name",
            "copy",
            "--target",
            str(small_disk / "copy"),
            "--report",
            str(tmp_path / "r.json"),
        ],
        env=_env(LAKECORE_LOG_DIR=str(logs)),
    )
    assert done.returncode == 4, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "lakecore export: StorageRefusedError: on an executor: could not write"
    )
    assert lines[0].endswith("No space left on device")
    (log,) = logs.glob("lakecore-export-*.log")
    assert "Traceback (most recent call last)" in log.read_text()
    assert json.loads((tmp_path / "r.json").read_text())["spark_log"] == str(log)
