"""Run lakecore jobs one after another in classic local mode, on one SparkSession, for
tests/connect: what the Spark Connect runs must report too.

    python tests/connect/classic_baseline.py STEPS.json RESULTS.json

STEPS.json: ``{"storage_options": {...}, "steps": [{"step": name, "job": job, "argv": [...]}]}``;
an argument ``{latest-1}`` becomes the lakehouse's latest version minus one when its step starts
(repair's rollback target). Each job's ``main(argv, spark=session)`` runs as ``spark-submit.sh``
would run it in local mode, with the settings of conf/spark-defaults.conf, but in one JVM for
all of them (a JVM per job made this baseline take longer than the Connect runs it is for).
RESULTS.json: ``[{"step", "code", "seconds"}]``; the reports are where the steps' ``--report``
said.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def classic_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("lakecore classic baseline")
    for line in (REPO / "conf" / "spark-defaults.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, value = line.split(None, 1)
            builder = builder.config(key, value.strip())
    session = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    from lakecore.lakehouse import Lakehouse

    spark = classic_session()
    results = []
    for step in plan["steps"]:
        argv = list(step["argv"])
        if "{latest-1}" in argv:
            lake = argv[argv.index("--lakehouse") + 1]
            latest = Lakehouse.open(lake, storage_options=plan["storage_options"]).version
            argv[argv.index("{latest-1}")] = str(latest - 1)
        job = importlib.import_module(f"jobs.{step['job'].replace('-', '_')}_job")
        started = time.monotonic()
        code = job.main(argv, spark=spark)
        results.append(
            {"step": step["step"], "code": code, "seconds": round(time.monotonic() - started, 3)}
        )
        print(f"classic baseline: {step['step']} exit {code}", file=sys.stderr, flush=True)
    spark.stop()
    Path(sys.argv[2]).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
