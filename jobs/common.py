"""What every maintenance job shares: arguments, the SparkSession, stages, reports, exit codes.

A job entrypoint is thin: it parses its options into a plan, opens the lakehouse, fans
``lakecore.maintenance`` units of work out over executors inside named stages (a Spark job
group and description, so the Spark UI says what is running), lets the driver alone commit,
and returns a ``JobReport``. ``run_job`` turns that into a short summary on stdout, a JSON
report (``--report PATH``), and an exit code from ``lakecore.errors.ExitCode``.

Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakecore.argparsing import ArgumentError, OneLineArgumentParser
from lakecore.errors import ExitCode, LakecoreError
from lakecore.lakehouse import refuse_unsupported_format
from lakecore.storage import Storage

EXIT_OK = ExitCode.OK
EXIT_VIOLATIONS = ExitCode.VIOLATIONS
EXIT_BAD_ARGS = ExitCode.BAD_INPUT
EXIT_CONFLICT = ExitCode.CONFLICT
EXIT_FAILURE = ExitCode.FAILURE

SAMPLE_LIMIT = 50
REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = Path(os.environ.get("LAKECORE_CONF_DIR", REPO_ROOT / "conf"))


def base_parser(job: str, description: str) -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog=f"spark-submit.sh {job}", description=description)
    parser.add_argument("--lakehouse", required=True, help="lakehouse root URI")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option (endpoint_url=... for S3-compatible servers)")
    parser.add_argument("--report", help="write the JSON report here")
    parser.add_argument("--env", default=os.environ.get("LAKECORE_ENV", "local"),
                        help="maintenance settings: conf/maintenance-<env>.json")
    parser.add_argument("--master", default=None,
                        help="Spark master; overrides spark-submit's --master (default: the master spark-submit "
                             "was given, e.g. $SPARK_MASTER with spark-submit.sh; without one local[*])")
    parser.add_argument("--parallelism", type=int, default=None,
                        help="subtree tasks to aim for (default: 4 per executor core)")
    return parser


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in args.storage_option:
        if "=" not in item:
            raise ArgumentError(f"--storage-option {item!r} is not KEY=VALUE")
        key, value = item.split("=", 1)
        if key == "endpoint_url":
            options.setdefault("client_kwargs", {})["endpoint_url"] = value
        else:
            options[key] = value
    return options


def load_settings(env: str) -> dict[str, Any]:
    path = CONF_DIR / f"maintenance-{env}.json"
    if not path.exists():
        raise ArgumentError(f"no maintenance settings for environment {env!r} (expected {path})")
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"{path} is not valid JSON: {exc}") from None
    return data


def parse_duration_seconds(text: str) -> float:
    """``90s``, ``15m``, ``6h``, ``3d`` or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise ArgumentError(f"duration {text!r} is not a number with an optional s/m/h/d unit") from None


def parse_time_millis(text: str) -> int:
    """``--now`` as epoch millis or an ISO-8601 timestamp (Airflow's ``data_interval_end``)."""
    import datetime as dt

    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ArgumentError(f"--now {text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


# -- reports ---------------------------------------------------------------------------------------


@dataclass
class JobReport:
    job: str
    lakehouse: str
    status: str = "ok"
    base_version: int | None = None
    new_version: int | None = None
    dry_run: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    durations_seconds: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    exit_code: int = EXIT_OK
    error: str | None = None

    def sample(self, name: str, paths: Iterator[str] | Sequence[str] | set[str]) -> None:
        items = sorted(paths)[:SAMPLE_LIMIT] if not isinstance(paths, Iterator) else list(paths)[:SAMPLE_LIMIT]
        self.samples[name] = list(items)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job, "lakehouse": self.lakehouse, "status": self.status,
            "base_version": self.base_version, "new_version": self.new_version, "dry_run": self.dry_run,
            "counts": self.counts, "bytes": self.bytes, "durations_seconds": self.durations_seconds,
            "samples": self.samples, "details": self.details, "exit_code": self.exit_code, "error": self.error,
            "sample_limit": SAMPLE_LIMIT,
        }


# -- Spark -----------------------------------------------------------------------------------------


def spark_session(app_name: str, master: str | None = None) -> Any:
    """The job's SparkSession on the master spark-submit was given (``--master``, the properties
    file), ``master`` when the job's own ``--master`` names one, else ``local[*]``.

    Workers must run this same Python (the venv), not the system's. The driver binds to
    loopback only in local mode: on a cluster the executors must reach it from other hosts.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started us and its JVM
    if not under_submit and is_local_master(master or "local[*]"):
        # Only matters when pyspark launches the JVM itself (plain ``python jobs/x.py``).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    submitted: dict[str, str] = {}
    try:
        submitted = _submit_conf()
        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        elif "spark.master" not in submitted:
            builder = builder.master("local[*]")
        spark = builder.getOrCreate()
    except Exception as exc:  # no JVM, a master that never answers: one line, not a stack trace
        from jobs.executor_errors import spark_unavailable

        raise spark_unavailable(master or submitted.get("spark.master", "local[*]"), exc) from exc
    spark.sparkContext.setLogLevel(os.environ.get("LAKECORE_SPARK_LOG_LEVEL", "WARN"))
    return spark


def is_local_master(master: str) -> bool:
    """``local``, ``local[4]``, ``local[*,2]``, ``local-cluster[...]``: everything on this host."""
    return master.strip().startswith("local")


def _submit_conf() -> dict[str, str]:
    """The Spark settings spark-submit passed to this driver (``spark.master`` among them).

    spark-submit hands them to the JVM it starts, as system properties; ``SparkConf()`` reads
    them from there, so the gateway to that JVM must be up first: before it is, ``SparkConf()``
    is empty and every job used to fall back to ``local[*]``, whatever ``--master`` said.
    Without spark-submit this starts the JVM (the session then reuses it).
    """
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


class JobContext:
    """The open lakehouse's storage, Spark (created on first use) and stage timing."""

    def __init__(self, job: str, args: argparse.Namespace, report: JobReport, spark: Any = None) -> None:
        self.job = job
        self.args = args
        self.report = report
        self.storage = Storage(args.lakehouse, storage_options(args))
        self.settings = load_settings(args.env)
        self._spark = spark
        self._group = f"lakecore-{job}-{uuid.uuid4().hex[:8]}"

    @property
    def spark(self) -> Any:
        if self._spark is None:
            self._spark = spark_session(f"lakecore {self.job}", self.args.master)
        return self._spark

    @property
    def sc(self) -> Any:
        return self.spark.sparkContext

    @property
    def parallelism(self) -> int:
        if self.args.parallelism:
            return int(self.args.parallelism)
        per_core = int(self.settings.get("subtree_tasks_per_core", 4))
        return max(1, int(self.sc.defaultParallelism) * per_core)

    @contextlib.contextmanager
    def stage(self, name: str, description: str) -> Iterator[None]:
        """A named stage: a Spark job group and description for the UI, and a timing."""
        self.sc.setJobGroup(self._group, f"lakecore {self.job}: {description}", interruptOnCancel=True)
        self.sc.setJobDescription(f"lakecore {self.job}: {description}")
        started = time.monotonic()
        try:
            yield
        finally:
            self.report.durations_seconds[name] = round(
                self.report.durations_seconds.get(name, 0.0) + time.monotonic() - started, 3
            )


def run_job(
    job: str,
    parser: argparse.ArgumentParser,
    body: Callable[[JobContext], None],
    argv: Sequence[str] | None = None,
    *,
    spark: Any = None,
) -> int:
    """Parse, run ``body``, report. Returns the exit code (the entrypoint calls sys.exit)."""
    started = time.monotonic()
    raw = list(sys.argv[1:] if argv is None else argv)
    lakehouse = raw[raw.index("--lakehouse") + 1] if "--lakehouse" in raw[:-1] else "?"
    report = JobReport(job, lakehouse)
    args: argparse.Namespace | None = None
    try:
        args = parser.parse_args(raw)
        ctx = JobContext(job, args, report, spark)
        report.lakehouse = ctx.storage.root_uri
        refuse_unsupported_format(ctx.storage)
        body(ctx)
    except LakecoreError as exc:
        report.status = "failed"
        report.exit_code = exc.exit_code
        report.error = exc.one_line()
    except Exception as exc:
        report.status = "failed"
        report.exit_code = EXIT_FAILURE
        report.error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if os.environ.get("LAKECORE_DEBUG"):
            traceback.print_exc()
    report.durations_seconds["total"] = round(time.monotonic() - started, 3)
    _print_summary(report)
    if args is not None and getattr(args, "report", None):
        write_report(report, args.report)
    if report.error:
        print(f"lakecore {job}: {report.error}", file=sys.stderr)
    return report.exit_code


def write_report(report: JobReport, path: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True, default=str))
    os.replace(tmp, target)


def _print_summary(report: JobReport) -> None:
    head = f"lakecore {report.job} [{report.status}{' (dry run)' if report.dry_run else ''}] {report.lakehouse}"
    versions = ""
    if report.base_version is not None:
        versions = f" version {report.base_version}"
        if report.new_version is not None and report.new_version != report.base_version:
            versions += f" -> {report.new_version}"
    print(head + versions)
    for line in report.summary:
        print(f"  {line}")
    if report.counts:
        print("  " + ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())))
    total = report.durations_seconds.get("total")
    if total is not None:
        print(f"  took {total:.1f}s")
    sys.stdout.flush()
