"""The job's SparkSession: classic or Spark Connect, tuned, and stopped cleanly while it starts.

Rules:
- Spark Connect when ``--remote`` (or ``$SPARK_REMOTE``) names an endpoint, else a classic
  session on the master spark-submit was given, the job's ``--master``, or ``local[*]``. The
  first request to an endpoint has short retries, so that a wrong address is one line.
- Under plain Python (no spark-submit) the JVM is started as spark-submit.sh would start it: the
  project's properties and log4j files (``CONF_DIR``), the driver JVM options of
  ``jobs.driver_jvm``, and a session of its own (a Ctrl-C in the terminal is the driver's to
  handle, not the JVM's Python workers').
- The session is made beside the main thread (``made_beside_the_main_thread``), so that a
  signal while it starts stops a JVM still launching instead of printing py4j's tracebacks.
- A cancelled local job's Python workers are killed before and after the cancel
  (``stop_python_workers``): a worker whose task is cancelled wrote a BrokenPipe traceback.
- Settings a job replaces while they hold Spark's default: ``SHUFFLE_PARTITIONS`` and
  ``CACHE_COMPRESSED`` (``jobs.context.JobContext`` tunes them, and gives a caller's session
  back as it came).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from lakecore.contract.one_line_parser import ArgumentError
from lakecore.maintenance.settings import CONF_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")

# Spark's own variable for a Spark Connect endpoint (sc://host:port), honoured like --remote.
REMOTE_VARIABLE = "SPARK_REMOTE"
# Session settings a job replaces while they hold Spark's own default (a value nobody chose),
# and gives back to a caller's session as it came:
# - the shuffle partitions: one per core, not 200 tiny ones (each a Python-free task, but every
#   later query over a cached join result runs one task per partition);
# - the compression of cached DataFrames: off. A job's caches are read by a few queries and then
#   dropped; compressing them cost more CPU than it saved (at 1M tables, validate's check 6.0 ->
#   4.7 s and gc 14 -> 12.5 s on local[1]; the caches take about twice the memory).
SPARK_DEFAULT_SHUFFLE_PARTITIONS = "200"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"
SPARK_DEFAULT_CACHE_COMPRESSED = "true"


def spark_session(
    app_name: str, master: str | None = None, remote: str | None = None
) -> SparkSession:
    """The job's SparkSession: a Spark Connect session when ``remote`` (``--remote``,
    ``$SPARK_REMOTE``) names an endpoint, else a classic one on the master spark-submit was
    given (``--master``, the properties file), ``master`` when the job's own ``--master`` names
    one, else ``local[*]``.

    Workers must run this same Python (the venv), not the system's. The driver binds to
    loopback only in local mode: on a cluster the executors must reach it from other hosts.
    """
    if remote:
        return connect_session(app_name, remote)
    # A classic session (the job's --master won over $SPARK_REMOTE): pyspark's builder would
    # still turn into a Connect client, or refuse a master, while SPARK_REMOTE is set.
    os.environ.pop(REMOTE_VARIABLE, None)
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


# How long an interrupted job waits for the session it was making (see below).
SESSION_START_GRACE_SECONDS = 15.0


def made_beside_the_main_thread(
    make: Callable[[], T], grace_seconds: float = SESSION_START_GRACE_SECONDS
) -> T:
    """``make()`` (a SparkSession) on a helper thread, waited for on this one.

    Why: a classic SparkContext made on the main thread installs its own SIGINT handler (cancel
    every job over py4j, raise KeyboardInterrupt). A Ctrl-C in the second or so it takes to
    start then printed py4j's tracebacks, about 80 lines, and exit 1 ("violations"), and after
    it the job had to put its own handler back. Made on another thread it installs none; the
    job's handler raises ``JobInterrupted`` here, in the wait. Then a JVM that pyspark is still
    launching is stopped (it would outlive the job: pyspark removes the folder it writes its
    port to, and the JVM, unable to report, never exits), and the session being made is given
    a moment to finish (``grace_seconds``: none for a Spark Connect client, which has no JVM to
    end cleanly and may be retrying an endpoint that does not answer for seconds more)."""
    outcome: dict[str, Any] = {}
    # An Event, not Thread.join: Python 3.11's join, interrupted by the signal handler's
    # exception, releases the running thread's own lock and marks it stopped, and every later
    # join returns at once (the JVM was then left making a context for a driver gone).
    done = threading.Event()

    def making() -> None:
        try:
            outcome["session"] = make()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=making, name="lakecore-spark-session", daemon=True).start()
    try:
        while not done.wait(0.1):
            pass
    except BaseException:
        stop_a_jvm_still_launching()
        # Under spark-submit the JVM is this process's parent, not a child: let the SparkContext
        # it is making finish (about a second) so that the JVM ends cleanly when this process
        # exits, instead of logging the failed start of a context whose driver has gone.
        if grace_seconds > 0:
            done.wait(grace_seconds)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome["session"])


def stop_a_jvm_still_launching() -> None:
    """Stop the JVM pyspark is launching for this process, if it is still launching: once
    pyspark's gateway to it is up, the JVM ends by itself when this process does (at the end of
    its input, which this process holds), and is better left to finish the context it is making
    than killed in the middle (a Java stack trace in the terminal)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    if SparkContext._gateway is None:
        stop_child_processes()


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, by parent pid, from ``/proc`` (empty without it)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    return parents


def _descendants(pid: int, parents: dict[int, list[int]]) -> Iterator[int]:
    pending = list(parents.get(pid, []))
    while pending:
        child = pending.pop()
        pending.extend(parents.get(child, []))
        yield child


def stop_child_processes() -> None:
    """SIGTERM to every process this one started, and theirs (a JVM pyspark is launching:
    spark-submit's script, its launcher, the JVM). Nothing without ``/proc``."""
    import signal

    for pid in _descendants(os.getpid(), _children_by_parent()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def _is_python_worker(pid: int) -> bool:
    try:
        return b"pyspark.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def stop_python_workers(jvm_pid: int) -> int:
    """SIGKILL the Python workers a local JVM runs tasks in (the processes pyspark's daemon
    forked; not the daemon). Returns how many. Why: a worker whose task is cancelled goes on to
    write to the socket the JVM closed, and pyspark's daemon prints a BrokenPipe traceback
    beside the job's one line; killed first, it writes nothing. Its task then fails, and the
    job, interrupted anyway, reports the interruption."""
    import signal

    parents = _children_by_parent()
    daemons = [pid for pid in _descendants(jvm_pid, parents) if _is_python_worker(pid)]
    # The workers are the daemons' forks: their parent is a daemon too.
    workers = {child for daemon in daemons for child in parents.get(daemon, []) if child in daemons}
    killed = 0
    for pid in workers:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def connect_session(app_name: str, remote: str) -> SparkSession:
    """A Spark Connect session on ``remote`` (no local JVM). The first request proves the
    endpoint answers, so that a wrong address is one line here, not a gRPC trace later."""
    if not remote.startswith("sc://"):
        raise ArgumentError(f"--remote {remote!r} is not a Spark Connect address (sc://HOST:PORT)")
    try:
        import pyspark.sql.connect.session  # noqa: F401  (the client's packages: grpcio, protobuf, ...)
    except ImportError as exc:  # the [spark] extra brings the Connect client's packages
        raise ArgumentError(
            f"--remote needs the Spark Connect client ({exc}); install lakecore[spark]"
        ) from None
    from pyspark.sql import SparkSession

    spark = None
    try:
        # pyspark's own builder (not the Connect class directly): it also switches
        # pyspark.sql.functions over to their Connect forms for this process. No options yet:
        # they would be the first request, sent before the probe's retry policy is in place.
        spark = SparkSession.builder.remote(remote).getOrCreate()
        _probe_endpoint(spark)
        spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    except Exception as exc:
        if spark is not None:
            # A closed client sends nothing at exit: its exit hook's clean-up request would
            # otherwise retry the unreachable endpoint for another 10 minutes.
            with contextlib.suppress(Exception):
                spark.client.close()
        from jobs.executor_errors import connect_unavailable

        raise connect_unavailable(remote, exc) from exc
    return spark


# The probe's retries: about 8 s in all (0.5, 1, 2, 4 s), then a wrong --remote is one line. The
# client's default (kept for the job's own requests, which should ride out a restarting server)
# retries an unreachable endpoint for about 10 minutes.
CONNECT_PROBE_RETRIES: dict[str, Any] = {
    "max_retries": 4,
    "initial_backoff": 500,
    "backoff_multiplier": 2.0,
    "max_backoff": 4000,
}


def _probe_endpoint(spark: SparkSession) -> None:
    """The first request of a fresh Connect session, with short retries: the server's Spark
    version, one unary call (a query would also leave release calls behind on failure, which
    retry on their own threads with the default policy)."""
    import warnings

    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = spark.client
    policies = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(**CONNECT_PROBE_RETRIES)])
    try:
        with warnings.catch_warnings():
            # pyspark warns "[RETRIES_EXCEEDED]" on stderr before raising: the error says it all.
            warnings.simplefilter("ignore")
            spark.version  # noqa: B018  (the request is the point)
    finally:
        client.set_retry_policies(policies)


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (it has no SparkContext and no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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

    launch = None
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # pyspark starts the JVM here. Unless the caller passes its own, it gets what
        # spark-submit.sh gives the JVM it starts: the project's properties file (no progress
        # bars on stderr, the driver's memory, Arrow) and log4j settings (Spark's warnings
        # only, not its banner), and the driver JVM options of jobs.driver_jvm (the quick JIT,
        # this machine's class archive).
        from jobs.driver_jvm import java_options

        submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS")
        if submit_args is None and (CONF_DIR / "spark-defaults.conf").is_file():
            os.environ["PYSPARK_SUBMIT_ARGS"] = shlex.join(
                ["--properties-file", str(CONF_DIR / "spark-defaults.conf"), "pyspark-shell"]
            )
        if "java-options" not in (submit_args or ""):
            log4j = CONF_DIR / "log4j2.properties"
            options = " ".join(
                part
                for part in (
                    f"-Dlog4j2.configurationFile=file:{log4j}" if log4j.is_file() else "",
                    java_options(),
                )
                if part
            )
            if options:
                launch = SparkConf().set("spark.driver.extraJavaOptions", options)
    gateway = None
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        from pyspark.java_gateway import launch_gateway

        # The JVM in a session of its own: a Ctrl-C in the terminal goes to the foreground
        # process group, and pyspark's Python workers (the JVM's children) turn it into a
        # KeyboardInterrupt mid-task. The driver cancels the job's tasks itself (``Interruption``);
        # the workers' own interruptions raced that cancel and printed BrokenPipe tracebacks.
        # The JVM still ends with this process: at the end of its input, which this one holds.
        gateway = launch_gateway(launch, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=launch)
    return dict(SparkConf().getAll())
