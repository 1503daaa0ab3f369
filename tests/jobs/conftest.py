"""One session-scoped local[2] SparkSession for every job test, and helpers to run a job."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
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
