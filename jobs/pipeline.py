"""The maintenance pipeline ``make demo`` runs on its sample lakehouse, in one SparkSession.

    flush (threshold 0.5) -> validate -> flush (full) -> validate -> compact-versions
    -> gc --dry-run -> gc -> validate --deep

Each step is a job's ``main(argv, spark=...)`` exactly as ``spark-submit.sh`` would run it,
with its JSON report under ``./demo-reports/`` (the current folder's, never beside the
lakehouse: the demo touches nothing outside the lakehouse but its own reports folder). The demo's versions and orphan
files are minutes old, so compact-versions runs with ``--now`` past the lakehouse's maximum
version age (``--i-understand-expiry-risk``) and gc with ``--older-than 0s --i-understand-grace-risk``: fine for a demo nobody
else writes to, never for a shared lakehouse. The pipeline stops at the first failed step (no
gc after a failed validation); a job module that does not exist yet is skipped with a note.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent
DAY_MILLIS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Step:
    label: str
    module: str
    report_name: str
    # The job's options besides --lakehouse and --report, computed just before the step runs.
    options: Callable[[], tuple[str, ...]]


def reports_dir(path: str) -> Path:
    """``./demo-reports`` of the current folder (``make demo`` runs in the repo), whatever the
    lakehouse: a folder beside the lakehouse might be someone else's."""
    del path  # the same folder for every lakehouse
    return Path.cwd() / "demo-reports"


def _fixed(*options: str) -> Callable[[], tuple[str, ...]]:
    return lambda: options


def pipeline_steps(path: str) -> list[Step]:
    young = (
        "--older-than",
        "0s",
        "--i-understand-grace-risk",
    )  # the demo's orphans are minutes old
    return [
        Step(
            "flush (threshold 0.5)",
            "jobs.flush_job",
            "1-flush-threshold",
            _fixed("--mode", "threshold", "--fill", "0.5"),
        ),
        Step("validate", "jobs.validate_job", "2-validate", _fixed()),
        Step("flush (full)", "jobs.flush_job", "3-flush-full", _fixed("--mode", "full")),
        Step("validate", "jobs.validate_job", "4-validate", _fixed()),
        Step(
            "compact-versions",
            "jobs.compact_versions_job",
            "5-compact-versions",
            lambda: ("--now", _expiring_now(path), "--i-understand-expiry-risk"),
        ),
        Step("gc --dry-run", "jobs.gc_job", "6-gc-dry-run", _fixed("--dry-run", *young)),
        Step("gc", "jobs.gc_job", "7-gc", _fixed(*young)),
        Step("validate --deep", "jobs.validate_job", "8-validate-deep", _fixed("--deep")),
    ]


def _expiring_now(path: str) -> str:
    """Epoch millis a day past the lakehouse's maximum version age: every old version expires."""
    from lakecore.lakehouse import Lakehouse

    max_age = Lakehouse.open(path).lakehouse_def.maximum_version_age_millis
    return str(int(time.time() * 1000) + max_age + DAY_MILLIS)


def demo_spark_session() -> SparkSession:
    """local[2], no UI, Spark's own logging kept to warnings (conf/log4j2.properties)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Executors import lakecore and jobs from the repo when the project is not installed.
    pythonpath = os.environ.get("PYTHONPATH", "")
    if str(REPO_ROOT) not in pythonpath.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), pythonpath) if p)
    from pyspark.sql import SparkSession

    from jobs.driver_jvm import java_options

    log4j = REPO_ROOT / "conf" / "log4j2.properties"
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lakecore demo pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.shuffle.partitions", "4")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile=file:{log4j} {java_options()}".strip(),
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def remove_demo_reports() -> list[str]:
    """Delete the reports and pages the pipeline writes (by their names, and only what a
    lakecore command wrote: ``cli.outputs``), then the reports folder if that left it empty.
    Returns the paths deleted. Anything else there stays (``make clean``)."""
    from lakecore.contract.outputs import Output, OutputKind, refuse_foreign_target
    from lakecore.errors import InvalidArgumentError

    folder = reports_dir("")
    removed: list[str] = []
    for step in pipeline_steps(""):
        for suffix, kind in ((".json", OutputKind.JSON_REPORT), (".html", OutputKind.HTML_PAGE)):
            path = folder / f"{step.report_name}{suffix}"
            if not path.is_file() or path.is_symlink():
                continue
            try:
                refuse_foreign_target(Output("a demo report", str(path), kind))
            except InvalidArgumentError:
                continue  # not a report of ours: leave it
            path.unlink()
            removed.append(str(path))
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty
    return removed


def run_pipeline(path: str, *, spark: SparkSession | None = None) -> int:
    """Run the demo's maintenance steps on the lakehouse at ``path``; 0 when every step that
    ran succeeded, else the first failed step's exit code."""
    reports = reports_dir(path)
    reports.mkdir(parents=True, exist_ok=True)
    print(f"\nmaintenance pipeline on {path} (reports in {reports})", flush=True)
    own_session = spark is None
    session = demo_spark_session() if spark is None else spark
    started = time.monotonic()
    done: list[str] = []
    skipped: list[str] = []
    failed: tuple[str, int] | None = None
    try:
        for number, step in enumerate(pipeline_steps(path), start=1):
            print(f"\n[{number}] {step.label}", flush=True)
            if importlib.util.find_spec(step.module) is None:
                note = (
                    f"{step.label}: skipped, {step.module.replace('.', '/')}.py does not exist yet"
                )
                print(f"  {note}", flush=True)
                skipped.append(note)
                continue
            main = importlib.import_module(step.module).main
            report = reports / f"{step.report_name}.json"
            argv = ["--lakehouse", path, *step.options(), "--report", str(report)]
            code = int(main(argv, spark=session))
            if code != 0:
                failed = (step.label, code)
                see = f"see {report}" if report.exists() else "its line above says why"
                print(
                    f"  step {number} ({step.label}) failed with exit code {code}; stopping here "
                    f"({see})",
                    flush=True,
                )
                break
            done.append(step.label)
    finally:
        if own_session:
            session.stop()
    took = time.monotonic() - started
    status = "FAILED" if failed else "ok"
    extra_note = f", {len(skipped)} skipped" if skipped else ""
    failed_note = f", failed at {failed[0]!r} (exit {failed[1]})" if failed else ""
    print(
        f"\npipeline {status}: {len(done)} steps ok{extra_note}{failed_note} in {took:.1f}s; "
        f"reports in {reports}",
        flush=True,
    )
    return failed[1] if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m jobs.pipeline LAKEHOUSE_PATH", file=sys.stderr)
        return 2
    return run_pipeline(args[0])


if __name__ == "__main__":
    sys.exit(main())
