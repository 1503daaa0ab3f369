"""The workload whose classes go into the driver JVM's class archive (``jobs.driver_jvm``).

    python -m jobs.jvm_archive_workload PARTIAL

Starts a JVM that writes every class it loaded to ``PARTIAL`` when it exits
(``-XX:ArchiveClassesAtExit``), runs validate (with the great-expectations suite), gc --dry-run
and flush on a small sample lakehouse in a temporary folder, stops the JVM and waits for its
exit, when the archive is written. ``jobs.driver_jvm --build`` runs this in a subprocess and
renames the file into place only when it exited 0 and wrote a file. Its own module so that the
jobs, which ask ``jobs.driver_jvm`` for their JVM options, are not imported by it.

Exit codes: 0 done; 1 a sample job failed; 2 a wrong command line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from jobs.driver_jvm import BUILD_TIMEOUT_SECONDS, REPO_ROOT, java_options
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.errors import LakecoreError


def run(archive: str) -> int:
    """Run the sample jobs in a JVM that writes its classes to ``archive``; wait for its exit."""
    from pyspark import SparkConf, SparkContext

    from jobs import flush_job, gc_job, validate_job
    from lakecore.lakehouse.demo import build_sample

    log4j = REPO_ROOT / "conf" / "log4j2.properties"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    conf = SparkConf().set(
        "spark.driver.extraJavaOptions",
        f"-Dlog4j2.configurationFile=file:{log4j} {java_options()} -XX:ArchiveClassesAtExit={archive}",
    )
    SparkContext._ensure_initialized(conf=conf)
    gateway = SparkContext._gateway
    with tempfile.TemporaryDirectory(prefix="lakecore-jvm-archive-") as folder:
        lakehouse = str(Path(folder) / "lake")
        build_sample(lakehouse, namespaces=2, tables_per_namespace=6)
        # The jobs' reports are not this tool's output.
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            codes = [
                validate_job.main(["--lakehouse", lakehouse]),
                gc_job.main(["--lakehouse", lakehouse, "--dry-run"]),
                flush_job.main(["--lakehouse", lakehouse]),
            ]
    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    # The gateway JVM exits when its stdin closes, and writes the archive on the way out.
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=BUILD_TIMEOUT_SECONDS)
    if any(code != 0 for code in codes):
        print(f"the sample jobs exited {codes}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineArgumentParser(
        prog="python -m jobs.jvm_archive_workload", description=__doc__.splitlines()[0]
    )
    parser.add_argument("partial", help="where the JVM writes the archive at its exit")
    try:
        args = parser.parse_args(argv)
    except LakecoreError as exc:
        print(f"{parser.prog}: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    return run(args.partial)


if __name__ == "__main__":
    sys.exit(main())
