"""Every job through a real Spark Connect server, the two documented ways, on moto S3:

    ./spark-submit.sh JOB --lakehouse ... --remote sc://127.0.0.1:PORT     ("submit")
    python -m jobs.JOB --lakehouse ... --remote sc://127.0.0.1:PORT        ("python"; some steps
                                                                            with $SPARK_REMOTE)

and each report must say what classic local mode ("classic": each job's ``main`` on a local
SparkSession with conf/spark-defaults.conf's settings, as ``./spark-submit.sh JOB`` runs it, but
one JVM for all the steps: tests/connect/classic_baseline.py) says on an identical lakehouse:
the same exit codes, statuses, versions, counts, bytes, samples (the same orphans found and
deleted) and details, all but timings.

The server (``spark_connect``: ``local[2]``, the repo's conf/spark-defaults.conf) and the S3
server are the session's. One lakehouse is built once and copied object by object to a fresh
root per mode, so the copies are identical down to their file names.

What proves the work ran on the server and not here: every remote run has no Java and no
spark-submit to start (JAVA_HOME and SPARK_SUBMIT name stand-ins that record a start and fail,
and the stand-ins are first on PATH), and the server's UI lists Spark jobs tagged with the
job's stage tag (``lakecore-<job>-<id>``) for every job but repair, which runs no Spark at all.
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

import pyarrow.parquet as pq
import pytest

from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.demo import leave_crashed_commit
from tests.conftest import S3TestServer
from tests.jobs.test_gc import assert_every_version_valid, build_lake
from tests.spark_cluster import PROJECT_PYTHON, REPO, free_port
from tests.spark_connect import ConnectServer, client_env

pytestmark = [pytest.mark.connect, pytest.mark.s3, pytest.mark.timeout(1800)]

WRAPPER = REPO / "spark-submit.sh"
FUTURE = str(int(time.time() * 1000) + 365 * 86_400_000)
RUN_TIMEOUT = 600
# Environment a run must not depend on: the wrapper and the jobs set up what they need.
_DROPPED_ENV = (
    "SPARK_LOCAL_IP",
    "PYTHONPATH",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_HOME",
    "LAKECORE_SPARK_ARGS",
    "SPARK_MASTER",
    "LAKECORE_DEPLOY_MODE",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
)
# Steps of the "python" mode that take the endpoint from $SPARK_REMOTE instead of --remote.
FROM_ENVIRONMENT = {"validate-deep", "gc-dry-run"}
# Report fields that are about time, not about what the job found or did.
_TIMING_FIELDS = ("durations_seconds",)
_CLOCK_DETAILS = ("clocks",)  # gc's readings of this machine's and the store's clocks: when it ran


@dataclass
class Ran:
    step: str
    job: str
    code: int
    stdout: str
    stderr: str
    report: dict[str, Any]
    seconds: float
    tags: list[str]  # the server's new lakecore stage tags for this job

    def explain(self) -> str:
        return f"{self.step}: exit {self.code}\n{self.stdout[-2000:]}\n{self.stderr[-4000:]}"


def copy_lake(s3: S3TestServer, source: str) -> str:
    """A copy of the lakehouse at ``source`` under a fresh root, object by object (same names)."""
    target = f"s3://{s3.bucket}/{uuid.uuid4()}/"
    client = s3.client()
    source_prefix = source.removeprefix(f"s3://{s3.bucket}/")
    target_prefix = target.removeprefix(f"s3://{s3.bucket}/")
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=s3.bucket, Prefix=source_prefix
    ):
        for item in page.get("Contents", []):
            key = item["Key"]
            client.copy_object(
                Bucket=s3.bucket,
                Key=target_prefix + key[len(source_prefix) :],
                CopySource={"Bucket": s3.bucket, "Key": key},
            )
    return target


def no_jvm_here(base: Path) -> tuple[dict[str, str], Path]:
    """Environment changes under which starting Java or spark-submit leaves a mark and fails."""
    bin_dir = base / "no-jvm" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    marks = base / "no-jvm" / "started"
    for name in ("java", "spark-submit"):
        stand_in = bin_dir / name
        stand_in.write_text(f'#!/bin/sh\necho "{name} $*" >> {marks}\nexit 97\n')
        stand_in.chmod(0o755)
    changes = {
        "JAVA_HOME": str(base / "no-jvm"),
        "SPARK_SUBMIT": str(bin_dir / "spark-submit"),
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
    }
    return changes, marks


def tables(uri: str, options: dict[str, Any], version: int | None = None) -> dict[str, list[str]]:
    lh = Lakehouse.open(uri, storage_options=options, version=version)
    return {ns: lh.list_tables(ns) for ns in lh.list_namespaces()}


def lake_files(s3: S3TestServer, uri: str) -> set[str]:
    """The lakehouse's files, relative to its root."""
    prefix = uri.removeprefix(f"s3://{s3.bucket}/")
    found: set[str] = set()
    for page in (
        s3.client().get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix)
    ):
        found.update(item["Key"][len(prefix) :] for item in page.get("Contents", []))
    return found


def comparable(ran: Ran, placeholders: dict[str, str], template_files: set[str]) -> dict[str, Any]:
    """The report without timings, with this run's lakehouse, export target and folder replaced
    by placeholders, so that two modes' reports compare field by field.

    A sample that names files the run wrote itself (new node files get random names) is
    compared by its length only: its first SAMPLE_LIMIT names differ with those names. Samples
    of the copied lakehouse's own files (gc's orphans, compact-versions' deletions) stay as
    they are: the same files must be found and deleted."""
    data = {k: v for k, v in ran.report.items() if k not in _TIMING_FIELDS}
    data["details"] = {
        k: v for k, v in (data.get("details") or {}).items() if k not in _CLOCK_DETAILS
    }
    text = json.dumps(data, sort_keys=True)
    for value, name in sorted(placeholders.items(), key=lambda item: -len(item[0])):
        text = text.replace(value, name)
    result: dict[str, Any] = json.loads(text)
    samples = result.get("samples") or {}
    for name, paths in samples.items():
        relative = [p.removeprefix("<lake>").removeprefix("<target>") for p in paths]
        if any(p not in template_files for p in relative):
            samples[name] = f"{len(paths)} names, some of files this run wrote"
    return result


# The steps, in order: (name, job, options). The repair step's target is resolved when it starts.
STEPS: list[tuple[str, str, list[str]]] = [
    ("validate", "validate", ["--no-expectations"]),
    ("validate-deep", "validate", ["--deep", "--full-list"]),  # with the expectation suite
    ("flush", "flush", ["--mode", "full"]),
    ("gc-dry-run", "gc", ["--now", FUTURE, "--i-understand-grace-risk", "--dry-run"]),
    ("gc", "gc", ["--now", FUTURE, "--i-understand-grace-risk"]),
    ("compact-versions", "compact-versions", ["--now", FUTURE, "--i-understand-expiry-risk"]),
    ("export", "export", ["--name", "nightly", "--mode", "full", "--target", "{target}"]),
    ("repair", "repair", ["rollback", "--to-version", "{latest-1}", "--yes"]),
]


class Runner:
    """Runs the steps of one mode on its own copy of the lakehouse."""

    def __init__(
        self, mode: str, lake: str, s3: S3TestServer, server: ConnectServer, base: Path
    ) -> None:
        self.mode, self.lake, self.s3, self.server, self.base = mode, lake, s3, server, base
        self.base.mkdir(parents=True, exist_ok=True)
        self.target = f"s3://{s3.bucket}/{uuid.uuid4()}/"
        self.no_jvm, self.marks = no_jvm_here(base)
        self.built = Lakehouse.open(lake, storage_options=s3.storage_options()).version
        self.content = tables(lake, s3.storage_options())

    def placeholders(self) -> dict[str, str]:
        return {
            self.lake: "<lake>",
            self.lake.rstrip("/"): "<lake>",
            self.target: "<target>",
            self.target.rstrip("/"): "<target>",
            str(self.base): "<base>",
        }

    def job_args(self, step: str, job: str, options: list[str]) -> list[str]:
        options = [self.target if o == "{target}" else o for o in options]
        return [
            "--lakehouse",
            self.lake,
            *self.s3.job_args(),
            *options,
            "--report",
            str(self.base / f"{step}.json"),
        ]

    def report(self, step: str) -> dict[str, Any]:
        path = self.base / f"{step}.json"
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        return data

    def every_job(self) -> dict[str, Ran]:
        ran = (
            self._classic()
            if self.mode == "classic"
            else {name: self._remote(name, job, options) for name, job, options in STEPS}
        )
        for result in ran.values():
            assert result.code == 0, result.explain()
            assert result.report["status"] == "ok" and result.report["exit_code"] == 0, (
                result.report
            )
        self.check(ran)
        return ran

    def _classic(self) -> dict[str, Ran]:
        """Every step in classic local mode, one JVM for all (tests/connect/classic_baseline.py)."""
        plan = self.base / "steps.json"
        plan.write_text(
            json.dumps(
                {
                    "storage_options": self.s3.storage_options(),
                    "steps": [
                        {"step": name, "job": job, "argv": self.job_args(name, job, options)}
                        for name, job, options in STEPS
                    ],
                }
            )
        )
        results = self.base / "results.json"
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        env["PYTHONPATH"] = str(REPO)
        before = set(self.server.user_tags("lakecore-"))
        started = time.monotonic()
        done = subprocess.run(
            [
                str(PROJECT_PYTHON),
                str(Path(__file__).parent / "classic_baseline.py"),
                str(plan),
                str(results),
            ],
            cwd=self.base,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT * 2,
            check=False,
        )
        print(
            f"CONNECT-TIME classic all steps {time.monotonic() - started:.1f}s exit {done.returncode}"
        )
        assert done.returncode == 0 and results.exists(), (
            f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
        assert set(self.server.user_tags("lakecore-")) == before, (
            "a classic run reached the Connect server"
        )
        return {
            r["step"]: Ran(
                r["step"],
                job,
                r["code"],
                done.stdout,
                done.stderr,
                self.report(r["step"]),
                r["seconds"],
                [],
            )
            for r, (_, job, _) in zip(json.loads(results.read_text()), STEPS, strict=True)
        }

    def _remote(self, step: str, job: str, options: list[str]) -> Ran:
        """One step as a Spark Connect client: through the wrapper ("submit") or as a module."""
        if "{latest-1}" in options:
            latest = Lakehouse.open(self.lake, storage_options=self.s3.storage_options()).version
            options = [str(latest - 1) if o == "{latest-1}" else o for o in options]
        args = self.job_args(step, job, options)
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        env.update(self.no_jvm)
        if self.mode == "submit":
            argv = [str(WRAPPER), job, *args, "--remote", self.server.url]
        else:
            argv = [str(PROJECT_PYTHON), "-m", f"jobs.{job.replace('-', '_')}", *args]
            env["PYTHONPATH"] = str(REPO)  # python -m jobs.<job>: the checkout's jobs
            if step in FROM_ENVIRONMENT:
                env["SPARK_REMOTE"] = self.server.url
            else:
                argv += ["--remote", self.server.url]
        before = set(self.server.user_tags(f"lakecore-{job}-"))
        started = time.monotonic()
        done = subprocess.run(
            argv,
            cwd=self.base,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        seconds = time.monotonic() - started
        tags = sorted(set(self.server.user_tags(f"lakecore-{job}-")) - before)
        print(f"CONNECT-TIME {self.mode} {step} {seconds:.1f}s exit {done.returncode} tags {tags}")
        ran = Ran(
            step, job, done.returncode, done.stdout, done.stderr, self.report(step), seconds, tags
        )
        assert not self.marks.exists(), (
            f"{step}: a JVM or spark-submit was started here: {self.marks.read_text()}"
        )
        if job == "repair":  # checks and commits on the driver alone: no Spark work at all
            assert not tags, f"{step}: repair ran Spark jobs on the server: {tags}"
        else:
            assert len(tags) == 1, (
                f"{step}: expected the job's stages on the server, found tags {tags}\n"
                f"{ran.explain()}"
            )
        return ran

    def check(self, ran: dict[str, Ran]) -> None:
        """What holds in every mode (the cluster test's checks), on the reports and the lakehouse."""
        options = self.s3.storage_options()
        validate, deep = ran["validate"].report, ran["validate-deep"].report
        assert validate["counts"]["violations"] == 0 and validate["base_version"] == self.built
        assert validate["counts"]["nodes_checked"] > 1
        assert deep["details"]["deep"] is True and deep["details"]["expectations_enabled"] is True
        assert deep["counts"]["violations"] == 0
        # --full-list: the (empty) dataset of every violation, written where the report is.
        dataset = deep["details"]["violations_dataset"]
        assert dataset == str(self.base / "validate-deep.json") + ".violations.parquet"
        assert pq.read_table(dataset).num_rows == 0

        assert ran["flush"].report["new_version"] == self.built + 1

        dry, gc = ran["gc-dry-run"].report, ran["gc"].report
        assert (
            dry["counts"]["orphans_to_delete"] >= 2
        )  # at least the crashed commit's node and definition
        assert (
            gc["counts"]["orphans_deleted"]
            == gc["counts"]["orphans_to_delete"]
            == dry["counts"]["orphans_to_delete"]
        )
        assert gc["samples"]["deleted"] == dry["samples"]["would_delete"]

        assert ran["compact-versions"].report["counts"]["expired_versions"] > 0
        assert ran["export"].report["counts"]["files_copied"] > 0
        assert tables(self.target, options) == self.content

        repair = ran["repair"].report
        assert repair["new_version"] == repair["details"]["latest_version"] + 1
        assert repair["details"]["rolled_back_to"] == repair["details"]["latest_version"] - 1
        # The rollback restored the content before the export, which is the built content (flush,
        # gc and compact-versions change no table), and every retained version is whole.
        assert (
            tables(self.lake, options, version=repair["details"]["rolled_back_to"]) == self.content
        )
        assert tables(self.lake, options) == self.content
        assert_every_version_valid(self.lake, options)


@pytest.fixture(scope="module")
def template(s3_server: S3TestServer) -> str:
    """The lakehouse every mode gets a copy of: 13 versions and a crashed writer's files."""
    uri, options = s3_server.new_root()
    lh = build_lake(uri, options, commits=12)
    leave_crashed_commit(lh)  # a dead writer's files: what gc must find
    return uri


@pytest.fixture(scope="module")
def template_files(template: str, s3_server: S3TestServer) -> set[str]:
    return lake_files(s3_server, template)


@pytest.fixture(scope="module")
def classic(
    template: str,
    s3_server: S3TestServer,
    spark_connect: ConnectServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Runner, dict[str, Ran]]:
    """Every job in classic local mode: what the Connect runs must report too."""
    runner = Runner(
        "classic",
        copy_lake(s3_server, template),
        s3_server,
        spark_connect,
        tmp_path_factory.mktemp("classic"),
    )
    return runner, runner.every_job()


# spark-submit.sh given a Connect URL runs the job in Python, as "python" does
# (tests/jobs/test_spark_submit.py checks that wrapper step); every job through the wrapper again is
# the slow variant (506 s of a loaded run's test time against python's 296).
@pytest.mark.parametrize("mode", [pytest.param("submit", marks=pytest.mark.slow), "python"])
def test_every_job_through_connect_reports_what_classic_mode_does(
    mode: str,
    classic: tuple[Runner, dict[str, Ran]],
    template: str,
    template_files: set[str],
    s3_server: S3TestServer,
    spark_connect: ConnectServer,
    tmp_path: Path,
) -> None:
    runner = Runner(mode, copy_lake(s3_server, template), s3_server, spark_connect, tmp_path / mode)
    ran = runner.every_job()
    base_runner, baseline = classic
    assert list(ran) == list(baseline)
    for step, result in ran.items():
        expected = comparable(baseline[step], base_runner.placeholders(), template_files)
        got = comparable(result, runner.placeholders(), template_files)
        differing = {
            k: (expected.get(k), got.get(k))
            for k in expected.keys() | got.keys()
            if expected.get(k) != got.get(k)
        }
        assert not differing, (
            f"{mode} {step}: differs from classic mode (classic, {mode}): {differing}"
        )
    print(
        f"CONNECT-TIMES {mode} "
        + json.dumps({s: round(r.seconds, 1) for s, r in ran.items()})
        + " classic "
        + json.dumps({s: round(r.seconds, 1) for s, r in baseline.items()})
    )


# -- the endpoint itself ---------------------------------------------------------------------------


_IMPORTS_ON_THE_SERVER = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()

def where(batches):
    import pyarrow as pa
    import jobs.run
    import lakecore
    for batch in batches:
        yield pa.RecordBatch.from_pydict({"lakecore": [lakecore.__file__] * batch.num_rows,
                                          "jobs": [jobs.run.__file__] * batch.num_rows,
                                          "python": [sys.executable] * batch.num_rows})

rows = spark.range(0, 8, numPartitions=2).mapInArrow(where, "lakecore string, jobs string, python string")
print(json.dumps([row.asDict() for row in rows.distinct().collect()]))
"""


def test_the_servers_python_workers_import_this_checkout(spark_connect: ConnectServer) -> None:
    done = subprocess.run(
        [str(PROJECT_PYTHON), "-c", _IMPORTS_ON_THE_SERVER, spark_connect.url],
        capture_output=True,
        text=True,
        timeout=300,
        env=client_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["lakecore"] == str(REPO / "lakecore" / "__init__.py")
    assert row["jobs"] == str(REPO / "jobs" / "run.py")
    assert Path(row["python"]).parent == PROJECT_PYTHON.parent
    assert spark_connect.application()["name"] == "Spark Connect server"


@pytest.mark.parametrize("how", ["submit", "python"])
def test_an_endpoint_that_does_not_answer_is_one_line_and_exit_4(
    how: str, template: str, s3_server: S3TestServer, tmp_path: Path
) -> None:
    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    args = ["--lakehouse", template, *s3_server.job_args(), "--no-expectations", "--remote", url]
    argv = (
        [str(WRAPPER), "validate", *args]
        if how == "submit"
        else [str(PROJECT_PYTHON), "-m", "jobs.validate", *args]
    )
    changes, marks = no_jvm_here(tmp_path)
    started = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        env=client_env(**changes),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"lakecore validate: SparkUnavailableError: could not reach the Spark Connect server at {url}: "
    ), lines[0]
    assert "Connection refused" in lines[0] and lines[0].endswith("(--remote, $SPARK_REMOTE)")
    assert seconds < 60, f"a refused connection took {seconds:.0f}s to report"
    assert not marks.exists()


@pytest.mark.parametrize(
    ("how", "message"),
    [
        (
            "submit",
            "spark-submit.sh: --remote 'localhost:1' is not a Spark Connect address (sc://HOST:PORT)",
        ),
        (
            "python",
            "lakecore validate: ArgumentError: --remote 'localhost:1' is not a Spark Connect address "
            "(sc://HOST:PORT)",
        ),
    ],
)
def test_an_address_that_is_not_sc_is_exit_2(
    how: str, message: str, template: str, s3_server: S3TestServer, tmp_path: Path
) -> None:
    args = ["--lakehouse", template, *s3_server.job_args(), "--remote", "localhost:1"]
    argv = (
        [str(WRAPPER), "validate", *args]
        if how == "submit"
        else [str(PROJECT_PYTHON), "-m", "jobs.validate", *args]
    )
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        env=client_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [message]
