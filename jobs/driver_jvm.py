"""The options of a driver JVM this machine starts: Spark's classes pre-parsed, the quick JIT only.

A lakecore job's driver JVM lives seconds to minutes and, in local mode, is the executor too. Two
start-up costs dominated a demo-sized job (bench/results/2026-11-23-demo-jvm-options.json):

- Class loading. The JVM loads about 12,000 classes from Spark's 250 jars before the first query
  answers; reading, verifying and parsing them cost about 3 s per run. A JDK dynamic class-data
  -sharing archive (``-XX:ArchiveClassesAtExit`` writes it, ``-XX:SharedArchiveFile`` maps it)
  keeps them parsed and verified on disk.
- The optimising compiler. HotSpot's C2 recompiles hot methods on background threads; in jobs
  this short it burnt 9 to 14 CPU-seconds per run and paid them back nowhere: on 2 cores gc
  --dry-run of 200k tables took 24 s wall and 30 CPU-s with it, 20 s and 17 CPU-s with C1 alone
  (``-XX:TieredStopAtLevel=1``). ``LAKECORE_JVM_JIT=full`` brings C2 back (long local runs).

Rules for the archive:

- One per JVM and classpath: ``build/jvm/spark-driver-<key>-<bytes>.jsa``, where the key hashes the java
  binary the Spark launcher runs (``$JAVA_HOME/bin/java``, else ``java`` on PATH: its real path,
  size and mtime), ``SPARK_HOME``, the name, size and mtime of each of its jars and the variables
  that add to Spark's classpath. A new JDK or Spark gets a new name, so a stale archive is never
  offered. Nor is one whose length is not ``<bytes>``: HotSpot checks an archive's header and
  starts without one it cannot use (silently: stderr is the job's), but a truncated archive
  kills it with SIGBUS. A JVM crash log goes to the temporary directory, never the working one.
- Written by ``make setup``'s ``jvm-archive`` step (``python -m jobs.driver_jvm --build``): a real
  workload (``jobs.jvm_archive_workload``: validate with the suite, gc --dry-run, flush on a
  small sample lakehouse in a temporary folder) in a JVM started with ``-XX:ArchiveClassesAtExit``. The JVM writes a
  temporary name at its exit; it is renamed into place only when whole, so a job started
  meanwhile maps a whole archive or none. A build that fails leaves no archive, says so in one
  line and exits 0 (``make setup`` goes on: the jobs then run as before). A wrong command line
  is one line and exit 2.
- ``LAKECORE_JVM_ARCHIVE=0`` turns it off.

Both apply to the drivers started here: ``spark-submit.sh`` (local mode and client deploy mode)
and a job's own session when pyspark starts the JVM (``python -m jobs.JOB``, the demo pipeline,
bench/bench_jobs.py). Not to executors on a cluster (their JVMs are the cluster's), nor through
Spark Connect (no local JVM).

Usage: ``python -m jobs.driver_jvm --build | --rebuild | --path | --java-options``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.errors import LakecoreError

REPO_ROOT = Path(__file__).resolve().parent.parent
ARCHIVE_DIR = REPO_ROOT / "build" / "jvm"
ARCHIVE_VARIABLE = "LAKECORE_JVM_ARCHIVE"
JIT_VARIABLE = "LAKECORE_JVM_JIT"
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# Spark's launcher adds these to the driver's classpath (bin/spark-class, launcher.AbstractCommandBuilder).
CLASSPATH_VARIABLES = (
    "SPARK_CONF_DIR",
    "SPARK_DIST_CLASSPATH",
    "HADOOP_CONF_DIR",
    "YARN_CONF_DIR",
    "SPARK_CLASSPATH",
    "SPARK_PREPEND_CLASSES",
)
# The archive is mapped quietly: a JVM that cannot use it says so on stderr, which is the job's.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# How long the workload may take (JVM start, three jobs, the archive's dump at exit).
BUILD_TIMEOUT_SECONDS = 600


def spark_home() -> Path | None:
    """``$SPARK_HOME``, else the installed pyspark's folder (where its jars are), without importing it."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def java_binary() -> Path | None:
    """The java the Spark launcher runs (bin/spark-class: ``$JAVA_HOME/bin/java``, else PATH's)."""
    if os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        return candidate.resolve() if candidate.exists() else None
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def archive_key() -> str | None:
    """The hash naming the archive of this JVM and classpath, or None without Java or Spark."""
    java, home = java_binary(), spark_home()
    if java is None or home is None or not (home / "jars").is_dir():
        return None
    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        digest.update("\0".join(str(part) for part in parts).encode() + b"\n")

    stat = java.stat()
    add("java", java, stat.st_size, stat.st_mtime_ns)
    add("spark_home", home.resolve())
    for jar in sorted((home / "jars").iterdir()):
        jar_stat = jar.stat()
        add("jar", jar.name, jar_stat.st_size, jar_stat.st_mtime_ns)
    for variable in CLASSPATH_VARIABLES:
        add("env", variable, os.environ.get(variable, ""))
    return digest.hexdigest()[:16]


def archive_path() -> Path | None:
    """This JVM and classpath's archive when it is whole, else None.

    Its name carries its size (``spark-driver-<key>-<bytes>.jsa``): a JVM that maps a truncated
    archive dies of SIGBUS (HotSpot checks the header, not the length), so an archive whose
    length is not the one it was written with is never offered."""
    key = archive_key()
    if key is None or not ARCHIVE_DIR.is_dir():
        return None
    for candidate in sorted(ARCHIVE_DIR.glob(f"spark-driver-{key}-*.jsa")):
        recorded = candidate.stem.rsplit("-", 1)[-1]
        with contextlib.suppress(OSError):
            if (
                recorded.isdigit()
                and candidate.is_file()
                and candidate.stat().st_size == int(recorded)
            ):
                return candidate
    return None


def archive_enabled() -> bool:
    return os.environ.get(ARCHIVE_VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


def full_jit() -> bool:
    return os.environ.get(JIT_VARIABLE, "").strip().lower() == "full"


def java_options() -> str:
    """The options of a driver JVM started here: the quick JIT (unless ``LAKECORE_JVM_JIT=full``)
    and this machine's class archive (when there is one for this JVM and classpath and
    ``LAKECORE_JVM_ARCHIVE`` is not 0)."""
    options = [] if full_jit() else [QUICK_JIT]
    path = archive_path() if archive_enabled() else None
    if path is not None:
        options += [f"-XX:SharedArchiveFile={path}", QUIET]
    # A JVM that crashes writes hs_err_pid<pid>.log into the working directory, the operator's:
    # into the temporary directory instead.
    options.append(f"-XX:ErrorFile={Path(tempfile.gettempdir()) / 'lakecore-jvm-crash-%p.log'}")
    return " ".join(options)


def build(*, force: bool = False) -> int:
    """Write the archive for this JVM and classpath unless it exists; 0 when it is in place."""
    key = archive_key()
    if key is None:
        print(
            "jvm archive: no java or no Spark jars found; the jobs start without an archive",
            file=sys.stderr,
        )
        return 0
    existing = archive_path()
    if existing is not None and not force:
        print(f"jvm archive: {existing.relative_to(REPO_ROOT)} is up to date", flush=True)
        return 0
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    partial = ARCHIVE_DIR / f".spark-driver-{key}.{os.getpid()}.partial"
    print(
        f"jvm archive: writing build/jvm/spark-driver-{key}-*.jsa (a sample workload in a fresh JVM, "
        "about a minute) ...",
        flush=True,
    )
    started = time.monotonic()
    env = {**os.environ, ARCHIVE_VARIABLE: "0"}  # the workload must not map an older archive
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "jobs.jvm_archive_workload", str(partial)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
        )
        failure = (
            None
            if completed.returncode == 0
            else (completed.stderr.strip().splitlines() or ["no output"])[-1]
        )
    except subprocess.TimeoutExpired:
        failure = f"the workload took over {BUILD_TIMEOUT_SECONDS} s"
    except OSError as exc:  # no interpreter to run it
        failure = f"cannot run the workload: {exc.strerror or exc}"
    if failure is None and (not partial.is_file() or partial.stat().st_size == 0):
        failure = "the JVM wrote no archive at its exit"
    if failure is not None:
        partial.unlink(missing_ok=True)
        print(
            f"jvm archive: not written ({failure}); the jobs start without one, about 3 s slower",
            file=sys.stderr,
        )
        return 0
    path = ARCHIVE_DIR / f"spark-driver-{key}-{partial.stat().st_size}.jsa"
    os.replace(partial, path)
    for old in ARCHIVE_DIR.glob(
        "spark-driver-*.jsa"
    ):  # older or damaged ones, other JDKs or Sparks
        if old != path:
            old.unlink(missing_ok=True)
    size_mib = path.stat().st_size / (1 << 20)
    print(
        f"jvm archive: {size_mib:.0f} MiB written in {time.monotonic() - started:.0f} s", flush=True
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineArgumentParser(
        prog="python -m jobs.driver_jvm", description=__doc__.splitlines()[0]
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--build", action="store_true", help="write this machine's archive unless it exists"
    )
    what.add_argument("--rebuild", action="store_true", help="write it even if it exists")
    what.add_argument(
        "--path", action="store_true", help="print where this machine's archive is (nothing: none)"
    )
    what.add_argument(
        "--java-options",
        action="store_true",
        help="print the options of a driver JVM started here (the JIT tier, the archive)",
    )
    try:
        args = parser.parse_args(argv)
    except LakecoreError as exc:  # one line, exit 2: argparse's usage block is not an answer
        print(f"{parser.prog}: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    if args.build or args.rebuild:
        return build(force=args.rebuild)
    if args.path:
        print(archive_path() or "")  # nothing when there is no whole archive
        return 0
    if args.java_options:
        print(java_options())
    return 0


if __name__ == "__main__":
    sys.exit(main())
