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
import errno
import json
import os
import shlex
import shutil
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.startup import take_dispositions_before_startup
from lakecore.cli.argparsing import ArgumentError, OneLineArgumentParser, output_file, whole_number
from lakecore.cli.outputs import (
    Output,
    OutputKind,
    check_outputs,
    refuse_foreign_target,
    write_text_atomically,
)
from lakecore.display import escape_for_display
from lakecore.errors import (
    CommitConflictError,
    ExitCode,
    InvalidArgumentError,
    LakecoreError,
    exit_code_help,
)
from lakecore.maintenance.damage import with_next_step
from lakecore.maintenance.settings import MaintenanceSettings
from lakecore.storage import Storage, parse_storage_options
from lakecore.versions import no_lakehouse, refuse_a_file_as_root
from lakecore.view import refuse_unsupported_format

EXIT_OK = ExitCode.OK
EXIT_VIOLATIONS = ExitCode.VIOLATIONS
EXIT_BAD_ARGS = ExitCode.BAD_INPUT
EXIT_CONFLICT = ExitCode.CONFLICT
EXIT_FAILURE = ExitCode.FAILURE

SAMPLE_LIMIT = 50
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
# Set by spark-submit.sh for its check of the arguments before the JVM starts.
PARSE_ONLY_VARIABLE = "LAKECORE_PARSE_ONLY"
# spark-submit.sh names a file here that the driver creates once the job has begun (its
# handlers are in place): the wrapper's traps then leave a Ctrl-C or SIGTERM to the driver,
# even when the driver has already ended by the time they look for it.
JOB_BEGAN_VARIABLE = "LAKECORE_JOB_BEGAN_FILE"
# ... and a file for the job's one error line, which it prints on stderr once Spark has ended
# (Spark's PythonRunner relays the driver's stderr on stdout).
ERROR_LINE_VARIABLE = "LAKECORE_ERROR_LINE_FILE"
# ... and the file where Spark's own output goes (its log4j lines, its Python workers' stderr).
SPARK_LOG_VARIABLE = "LAKECORE_SPARK_LOG"
REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = Path(os.environ.get("LAKECORE_CONF_DIR", REPO_ROOT / "conf"))


def invocation(job: str) -> str:
    """How the operator started the job, for its usage and error lines: ``spark-submit.sh gc``
    under the wrapper (it sets the variables of its argument check and of its run),
    ``python -m jobs.gc`` when run as a module, else ``spark-submit jobs/gc.py`` (a plain
    spark-submit of the file, or anything else that runs it as a script)."""
    if os.environ.get(PARSE_ONLY_VARIABLE) == "1" or os.environ.get(JOB_BEGAN_VARIABLE):
        return f"spark-submit.sh {job}"
    module = f"jobs.{job.replace('-', '_')}"
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if main_spec is not None and main_spec.name == module:
        return f"python -m {module}"
    return f"spark-submit jobs/{job.replace('-', '_')}.py"


def base_parser(job: str, description: str) -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog=invocation(job),
        description=description,
        epilog=exit_code_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lakehouse", required=True, help="lakehouse root URI")
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option (endpoint_url=... for S3-compatible servers)",
    )
    parser.add_argument("--report", type=output_file, help="write the JSON report here")
    parser.add_argument(
        "--env",
        default=os.environ.get("LAKECORE_ENV", "local"),
        help="maintenance settings: conf/maintenance-<env>.json",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--master",
        default=None,
        help="Spark master; overrides spark-submit's --master (default: the master spark-submit "
        "was given, e.g. $SPARK_MASTER with spark-submit.sh; without one local[*])",
    )
    where.add_argument(
        "--remote",
        default=None,
        metavar="sc://HOST:PORT",
        help=f"run on this Spark Connect endpoint instead of a local JVM (default: ${REMOTE_VARIABLE} "
        "when set); the endpoint's Python must have lakecore's dependencies",
    )
    parser.add_argument(
        "--parallelism",
        type=whole_number(1),
        default=None,
        help="subtree tasks to aim for (default: 4 per executor core)",
    )
    parser.add_check(_outputs_outside_lakehouse)
    return parser


def add_full_list_option(parser: OneLineArgumentParser, item: str, dataset: str) -> None:
    """``--full-list``: every ``item`` (orphan, violation) to a Parquet dataset
    beside the JSON report (``full_list_dataset``), where the report itself lists a capped
    sample; it needs ``--report``, refused as the command line is read."""
    parser.add_argument(
        "--full-list",
        action="store_true",
        help=f"also write every {item} to a Parquet dataset beside --report (REPORT.{dataset}.parquet)",
    )
    parser.set_defaults(full_list_dataset_name=dataset)  # for job_outputs' check
    parser.add_check(
        lambda args: (
            "--full-list writes beside the JSON report: give --report PATH too"
            if args.full_list and not args.report
            else None
        )
    )


def job_outputs(args: argparse.Namespace) -> list[Output]:
    """Every file and folder the job will write, from its options: the report, the Parquet full
    list beside it, validate's own page beside it (``report_page``) and its health page."""
    outputs: list[Output] = []
    report = getattr(args, "report", None)
    if report:
        outputs.append(Output("--report", report, OutputKind.JSON_REPORT))
        dataset = getattr(args, "full_list_dataset_name", None)
        if getattr(args, "full_list", False) and dataset:
            outputs.append(
                Output(
                    "--full-list", full_list_dataset(report, dataset), OutputKind.PARQUET_DATASET
                )
            )
        if getattr(args, "writes_report_page", False):
            outputs.append(
                Output(
                    "the validation's own page",
                    report_page(report),
                    OutputKind.HTML_PAGE,
                    beside=f"beside --report {report}",
                )
            )
    if getattr(args, "html", None):
        outputs.append(Output("--html", args.html, OutputKind.HTML_PAGE))
    return outputs


def _outputs_outside_lakehouse(args: argparse.Namespace) -> str | None:
    """Refuse, as the command line is read, an output inside the lakehouse or onto a file no
    lakecore command wrote (``lakecore.cli.outputs.check_outputs``)."""
    outputs = job_outputs(args)
    spark_log = os.environ.get(SPARK_LOG_VARIABLE)
    if spark_log and os.environ.get(PARSE_ONLY_VARIABLE) == "1":
        # spark-submit.sh names the log file it is about to open (LAKECORE_LOG_DIR): checked
        # before it exists, like the job's own outputs.
        outputs.append(Output("LAKECORE_LOG_DIR's log", spark_log, OutputKind.LOG_FILE))
    try:
        # An export's target is a lakehouse being made: nothing else may land in it either.
        check_outputs(outputs, args.lakehouse, getattr(args, "target", None))
    except InvalidArgumentError as exc:
        return str(exc)
    return None


def write_full_list(frame: Any, target: str) -> None:
    """``--full-list``: write ``frame`` as a Parquet dataset at ``target``, whole or not at all.

    Spark writes into a fresh folder beside it, which is then put in place by renames: two runs
    given one report (a job started twice) each publish a whole dataset, the last one wins,
    where two overwrites of one folder left one without its part files. What was at
    ``target`` is checked again first (a file no lakecore command wrote is never replaced)."""
    fresh = f"{target}.{uuid.uuid4().hex}.tmp"
    frame.write.parquet(fresh)
    try:
        for _ in range(5):  # a racing run may put its own in place between two renames
            old = None
            if os.path.lexists(target):
                refuse_foreign_target(Output("--full-list", target, OutputKind.PARQUET_DATASET))
                old = f"{target}.{uuid.uuid4().hex}.old"
                with contextlib.suppress(FileNotFoundError):  # the racing run moved it first
                    os.rename(target, old)
            try:
                os.rename(fresh, target)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                continue
            if old is not None and os.path.isdir(old):
                shutil.rmtree(old)  # the dataset it replaced: Spark's files only (checked)
            return
        raise CommitConflictError(
            f"--full-list {target}: other runs kept putting their list there; run again"
        )
    finally:
        if os.path.isdir(fresh):
            shutil.rmtree(fresh)


def report_page(report_path: str) -> str:
    """Where validate writes its own page: beside the report, ``REPORT`` with ``.html``."""
    return str(Path(report_path).with_suffix(".html"))


def full_list_dataset(report_path: str, dataset: str) -> str:
    """Where ``--full-list`` writes: beside the report, ``REPORT.<dataset>.parquet`` (absolute)."""
    return os.path.abspath(report_path) + f".{dataset}.parquet"


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    return parse_storage_options(args.storage_option)


def load_settings(env: str) -> MaintenanceSettings:
    """``conf/maintenance-<env>.json`` (``$LAKECORE_CONF_DIR`` overrides the folder)."""
    path = CONF_DIR / f"maintenance-{env}.json"
    if not path.exists():
        raise ArgumentError(f"no maintenance settings for environment {env!r} (expected {path})")
    return MaintenanceSettings.load(path)


def parse_duration_seconds(text: str) -> float:
    """``90s``, ``15m``, ``6h``, ``3d``, ``250ms`` or plain seconds (``lakecore.units``)."""
    from lakecore.units import parse_duration_millis

    return parse_duration_millis(text, what="duration", plain_unit="s") / 1000


def checked_option(parse: Callable[[str], Any]) -> Callable[[str], str]:
    """An argparse ``type`` that checks a value with ``parse`` as the command line is read, so
    that spark-submit.sh's check refuses it before the JVM starts (one line, exit 2), and keeps
    the text for the job."""

    def check(text: str) -> str:
        try:
            parse(text)
        except LakecoreError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    check.__name__ = parse.__name__  # argparse names the type in some of its messages
    return check


def parse_time_millis(text: str) -> int:
    """``--now`` as epoch millis or an ISO-8601 timestamp (Airflow's ``data_interval_end``):
    ``lakecore.units.parse_time_millis``, refused as a bad argument."""
    from lakecore.units import parse_time_millis as parse_time

    try:
        return parse_time(text, what="--now")
    except InvalidArgumentError as exc:
        raise ArgumentError(str(exc)) from None


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
    # Where Spark's own output went (spark-submit.sh's log file), or None: on the terminal.
    spark_log: str | None = None

    def sample(self, name: str, paths: Iterator[str] | Sequence[str] | set[str]) -> None:
        items = (
            sorted(paths)[:SAMPLE_LIMIT]
            if not isinstance(paths, Iterator)
            else list(paths)[:SAMPLE_LIMIT]
        )
        self.samples[name] = list(items)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "lakehouse": self.lakehouse,
            "status": self.status,
            "base_version": self.base_version,
            "new_version": self.new_version,
            "dry_run": self.dry_run,
            "counts": self.counts,
            "bytes": self.bytes,
            "durations_seconds": self.durations_seconds,
            "samples": self.samples,
            "details": self.details,
            "exit_code": self.exit_code,
            "error": self.error,
            "sample_limit": SAMPLE_LIMIT,
            "spark_log": self.spark_log,
            # The lines the terminal showed, for whoever reads only the file (a scheduler's log).
            "summary": self.summary,
        }


# -- Spark -----------------------------------------------------------------------------------------


def spark_session(app_name: str, master: str | None = None, remote: str | None = None) -> Any:
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
    make: Callable[[], Any], grace_seconds: float = SESSION_START_GRACE_SECONDS
) -> Any:
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
    return outcome["session"]


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


def connect_session(app_name: str, remote: str) -> Any:
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


def _probe_endpoint(spark: Any) -> None:
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


def is_connect(spark: Any) -> bool:
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


class JobContext:
    """The open lakehouse's storage, Spark (created on first use) and stage timing.

    Everything here works on a classic session and on a Spark Connect one alike: stages are
    tagged with ``addTag`` (Connect's job groups) and the Spark UI's description is set where a
    SparkContext exists; the parallelism comes from the SparkContext or, through Connect, from
    how the endpoint splits a range (its default parallelism)."""

    def __init__(
        self, job: str, args: argparse.Namespace, report: JobReport, spark: Any = None
    ) -> None:
        self.job = job
        self.args = args
        self.report = report
        # The stage that began and has not ended, and what an interruption there leaves behind
        # (``stage``'s ``if_interrupted``); the interrupted job's line says it.
        self.unfinished_stage: tuple[str, str | None] | None = None
        self.storage = Storage(args.lakehouse, storage_options(args))
        self.settings = load_settings(args.env)
        self.remote: str | None = (
            getattr(args, "remote", None) or os.environ.get(REMOTE_VARIABLE) or None
        )
        if getattr(args, "master", None):
            self.remote = None  # an explicit --master wins over the environment's endpoint
        self._spark = spark
        # True once this job starts making its own SparkSession: one interrupted while it starts
        # (the JVM launching, a Connect client retrying an endpoint) is this job's to abandon.
        self.owns_spark = False
        self._group = f"lakecore-{job}-{uuid.uuid4().hex[:8]}"
        self._default_parallelism: int | None = None
        self._session_tuned = False
        self._borrowed_settings: dict[str, str] = {}  # to restore on a caller's session

    @property
    def spark(self) -> Any:
        if self._spark is None:
            self.owns_spark = True
            self._spark = made_beside_the_main_thread(
                lambda: spark_session(f"lakecore {self.job}", self.args.master, self.remote),
                grace_seconds=0 if self.remote else SESSION_START_GRACE_SECONDS,
            )
        if not self._session_tuned:
            self._session_tuned = True
            if self._tune(
                SHUFFLE_PARTITIONS, SPARK_DEFAULT_SHUFFLE_PARTITIONS, str(self.default_parallelism)
            ):
                self.report.details["shuffle_partitions"] = self.default_parallelism
            if self._tune(CACHE_COMPRESSED, SPARK_DEFAULT_CACHE_COMPRESSED, "false"):
                self.report.details["cache_compressed"] = False
        return self._spark

    def _tune(self, key: str, spark_default: str, value: str) -> bool:
        """Set ``key`` to ``value`` if it holds Spark's default; True when set."""
        assert self._spark is not None
        if self._spark.conf.get(key) != spark_default:
            return False
        if not self.owns_spark:
            self._borrowed_settings[key] = spark_default
        self._spark.conf.set(key, value)
        return True

    def release(self) -> None:
        """Give a caller's session back as it came (the settings this job replaced)."""
        if self._spark is not None:
            for key, value in self._borrowed_settings.items():
                self._spark.conf.set(key, value)
        self._borrowed_settings.clear()

    @property
    def connect(self) -> bool:
        return is_connect(self.spark)

    @property
    def default_parallelism(self) -> int:
        """The session's default parallelism (its executors' cores)."""
        if self._default_parallelism is None:
            if not self.connect:
                self._default_parallelism = max(1, int(self.spark.sparkContext.defaultParallelism))
            else:
                from pyspark.sql import functions as F

                # A range without a partition count is split by the default parallelism.
                ids = self.spark.range(0, 1 << 16).select(F.spark_partition_id().alias("partition"))
                self._default_parallelism = max(1, int(ids.distinct().count()))
        return self._default_parallelism

    @property
    def parallelism(self) -> int:
        if self.args.parallelism:
            return int(self.args.parallelism)
        return max(1, self.default_parallelism * self.settings.subtree_tasks_per_core)

    @contextlib.contextmanager
    def stage(
        self, name: str, description: str, *, if_interrupted: str | None = None
    ) -> Iterator[None]:
        """A named stage: a Spark job tag and description for the UI, a timing, and on a
        terminal a one-line progress display (``StageProgress``). ``if_interrupted`` says what
        a signal during the stage leaves behind, for a stage that changes storage bit by bit
        (deletes, copies): the job's line then says it instead of "run the job again"."""
        text = f"lakecore {self.job}: {description}"
        sc = None if self.connect else self.spark.sparkContext
        if sc is not None:
            sc.setJobGroup(self._group, text, interruptOnCancel=True)
            sc.setJobDescription(text)
        self.spark.addTag(self._group)
        started = time.monotonic()
        progress = StageProgress(self.job, name, description, sc, self._group)
        enclosing, self.unfinished_stage = self.unfinished_stage, (name, if_interrupted)
        try:
            with progress:
                yield
            self.unfinished_stage = enclosing  # a stage inside another (export's copy) ends first
        finally:
            with contextlib.suppress(Exception):
                self.spark.removeTag(self._group)
            self.report.durations_seconds[name] = round(
                self.report.durations_seconds.get(name, 0.0) + time.monotonic() - started, 3
            )

    def cancel(self) -> None:
        """Stop this job's Spark work (an interruption): its tag through Connect, its job group
        on a classic session."""
        if self._spark is None:
            return
        with contextlib.suppress(Exception):
            if self.connect:
                self._spark.interruptTag(self._group)
            else:
                self.stop_classic_work()

    def stop_classic_work(self) -> None:
        """Cancel this job's group on a classic session (nothing through Connect). On a session
        of its own with a local master the Python workers are stopped before and after the
        cancel (``stop_python_workers``): they are this host's."""
        if self._spark is None or is_connect(self._spark):
            return
        sc = self._spark.sparkContext
        jvm_pid = None
        if self.owns_spark:
            # The tasks the cancel kills (or whose workers are stopped), and the cache blocks
            # they leave unfinished, are the job's own doing: no log line for each between the
            # command line and the job's one line. A caller's session keeps its logging.
            jvm = sc._jvm
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                "org.apache.spark", jvm.org.apache.logging.log4j.Level.OFF
            )
            if is_local_master(sc.master):
                jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        if jvm_pid is not None:
            stop_python_workers(jvm_pid)
        sc.cancelJobGroup(self._group)
        if jvm_pid is not None:  # any task that started a worker meanwhile
            stop_python_workers(jvm_pid)

    # How long an interrupted job waits for the tasks its cancel kills.
    CANCELLED_TASKS_WAIT_SECONDS = 5.0

    def wait_for_cancelled_tasks(
        self, timeout_seconds: float = CANCELLED_TASKS_WAIT_SECONDS
    ) -> None:
        """Wait (a moment, at most ``timeout_seconds``) until the tasks of this job's cancelled
        Spark jobs have ended on a classic session, so that the JVM, which ends with this
        process, is not torn down while it is still killing them."""
        if self._spark is None or is_connect(self._spark):
            return
        deadline = time.monotonic() + timeout_seconds
        with contextlib.suppress(Exception):
            tracker = self._spark.sparkContext.statusTracker()
            while time.monotonic() < deadline:
                running = 0
                for job_id in tracker.getJobIdsForGroup(self._group):
                    job = tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job is not None else ():
                        stage = tracker.getStageInfo(stage_id)
                        running += stage.numActiveTasks if stage is not None else 0
                if not running:
                    return
                time.sleep(0.05)


def progress_enabled(stream: Any = None) -> bool:
    """Progress lines only on a terminal (``LAKECORE_PROGRESS=1`` forces them, ``=0`` stops them)."""
    setting = os.environ.get("LAKECORE_PROGRESS")
    if setting is not None:
        return setting not in ("0", "false", "no", "")
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class StageProgress:
    """One line on stderr per stage, redrawn in place: the stage, its elapsed time and, while
    Spark runs it, its tasks done of all (from the status tracker of the stage's job group).
    When stderr is not a terminal it prints nothing (logs and Airflow stay clean)."""

    INTERVAL_SECONDS = 0.5

    def __init__(
        self,
        job: str,
        name: str,
        description: str,
        sc: Any = None,
        group: str | None = None,
        stream: Any = None,
    ) -> None:
        self.job, self.name, self.description = job, name, description
        self.sc, self.group = sc, group
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(self.stream)
        self._started = time.monotonic()
        self._stop: Any = None
        self._thread: Any = None
        self._width = 0
        self._earlier_jobs: set[int] = set()

    def tasks(self) -> tuple[int, int] | None:
        """(tasks done, tasks in all) of the Spark jobs this stage started so far, or None.
        The job group is the whole job's: the jobs of earlier stages are left out, and so is a
        finished job's stage that ran no task (Spark skipped it: its output was already there),
        which the trial saw as '25/99 tasks done'."""
        if self.sc is None or self.group is None:
            return None
        try:
            tracker = self.sc.statusTracker()
            done = total = 0
            for job_id in set(tracker.getJobIdsForGroup(self.group)) - self._earlier_jobs:
                info = tracker.getJobInfo(job_id)
                if info is None:
                    continue
                finished = str(info.status) in ("SUCCEEDED", "FAILED")
                for stage_id in info.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is None or (finished and stage.numCompletedTasks == 0):
                        continue
                    done += stage.numCompletedTasks
                    total += stage.numTasks
            return (done, total) if total else None
        except Exception:
            return None

    def _jobs_so_far(self) -> set[int]:
        if self.sc is None or self.group is None:
            return set()
        try:
            return set(self.sc.statusTracker().getJobIdsForGroup(self.group))
        except Exception:
            return set()

    def line(self, ended: str | None = None) -> str:
        """The stage's line; ``ended`` (``done in``, ``interrupted after``, ``failed after``)
        once it is over, with the exact time, which the live line rounds to a tenth of a second
        (a driver stage of 45 ms read "done in 0ms")."""
        from lakecore.units import format_seconds

        elapsed = time.monotonic() - self._started
        text = f"lakecore {self.job} [{self.name}] {self.description}"
        if len(text) > 90:
            text = text[:89] + "…"
        counts = self.tasks()
        if counts is not None:
            text += f"  {counts[0]}/{counts[1]} tasks"
        if ended is None:
            return f"{text}  {format_seconds(round(elapsed, 1))}"
        return f"{text}  {ended} {format_seconds(round(elapsed, 3))}"

    def _draw(self, ended: str | None = None) -> None:
        final = ended is not None
        text = self.line(ended)
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad + ("\n" if final else ""))
        self.stream.flush()

    def __enter__(self) -> StageProgress:
        if not self.enabled:
            return self
        import threading

        self._earlier_jobs = self._jobs_so_far()
        self._stop = threading.Event()

        def run() -> None:
            while not self._stop.wait(self.INTERVAL_SECONDS):
                self._draw()

        self._draw()
        self._thread = threading.Thread(
            target=run, name=f"lakecore-progress-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if not self.enabled or self._stop is None:
            return
        self._stop.set()
        self._thread.join(timeout=2)
        # A stage a signal or an error ended is not "done": the job's own line says what it left.
        if exc_type is None:
            self._draw("done in")
        elif issubclass(exc_type, JobInterrupted):
            self._draw("interrupted after")
        else:
            self._draw("failed after")


class JobInterrupted(BaseException):
    """SIGINT or SIGTERM reached the driver. A BaseException, so that no ``except Exception``
    in a job or a library swallows it; ``run_job`` turns it into status ``interrupted``."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def _inside_the_import_system(frame: Any) -> bool:
    """True when ``frame`` or a caller of it runs importlib's own (frozen) code."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class Interruption:
    """What ``_stop_on_signals`` knows of a SIGINT or SIGTERM: which came first (``signal_name``,
    None until one does), and whether the job body has ended (a signal after that is too late to
    stop anything, and is ignored).

    Spark work is stopped, not waited for. A signal that lands while the main thread waits in a
    py4j call (a Spark action: seconds, or hours on a big cluster) used to raise there; py4j's
    connection was then left mid-answer, and the next call on it (pyspark's own, as the
    exception left the action) waited for the action to end. Now the handler lets the call
    finish and raises as it returns (``raise_when_it_returns``), and a thread of its own (py4j
    gives it its own connection) calls ``stop_work``: the cancelled action ends the call at
    once, with an error the interruption replaces."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        # Stops the job's Spark work; called once, on a thread of its own.
        self.stop_work: Callable[[], None] | None = None
        self.raised = False
        self.body_ended = False
        self._stopping: threading.Thread | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def note(self, signum: int) -> None:
        """The first signal: remember it, and stop the job's Spark work."""
        import signal

        self.signal_name = signal.Signals(signum).name
        if self.stop_work is not None:
            self._stopping = threading.Thread(
                target=self._stop, name="lakecore-interrupt", daemon=True
            )
            self._stopping.start()

    def _stop(self) -> None:
        if self.stop_work is not None:
            with contextlib.suppress(Exception):
                self.stop_work()

    def finish(self, timeout_seconds: float) -> None:
        """Wait for the stopping thread, if any."""
        if self._stopping is not None:
            self._stopping.join(timeout_seconds)

    def raise_when_it_returns(self, frame: Any) -> None:
        """Raise ``JobInterrupted`` as ``frame`` (the main thread's outermost py4j frame, its
        answer read) returns or unwinds, unless the body has ended by then: the frame's own
        trace function, with this thread's tracing on for it alone."""
        before = sys.gettrace()

        def on_event(traced: Any, event: str, arg: Any) -> Any:
            if event != "return" or traced is not frame:
                return on_event
            sys.settrace(before)
            if not self.body_ended and not self.raised:
                self.raised = True
                raise JobInterrupted(self.signal_name or "SIGINT")
            return None

        frame.f_trace_lines = False
        frame.f_trace = on_event
        # Tracing on for this thread: a new frame's call event asks the previous tracer, if
        # any, and traces nothing new otherwise.
        sys.settrace(before if before is not None else _trace_nothing_new)


def _trace_nothing_new(frame: Any, event: str, arg: Any) -> None:
    return None


def _outermost_py4j_frame(frame: Any) -> Any:
    """The outermost frame of py4j's code (a call into the JVM) among ``frame`` and its
    callers; None when there is none."""
    marker = f"{os.sep}py4j{os.sep}"
    outermost = None
    while frame is not None:
        if marker in frame.f_code.co_filename:
            outermost = frame
        frame = frame.f_back
    return outermost


@contextlib.contextmanager
def _stop_on_signals(state: Interruption) -> Iterator[None]:
    """Turn the first SIGINT or SIGTERM into ``JobInterrupted`` in the main thread (in a py4j
    call, as the call returns: ``Interruption``); later ones are ignored, so that the report
    still gets written. Outside the main thread (a test calling ``main``), signals stay as they
    are."""
    import signal

    if (
        threading.current_thread() is not threading.main_thread()
        or os.environ.get(PARSE_ONLY_VARIABLE) == "1"
    ):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if state.raised or state.body_ended:
            return
        if _inside_the_import_system(frame):
            # Raised there, the exception can land in a callback of the import system's module
            # locks, which prints "Exception ignored" and drops it: the job went on, and once
            # hung on a module lock. Deliver the signal again in a moment, outside the import.
            threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
            return
        first = state.signal_name is None
        if first:
            state.note(signum)
        in_py4j = _outermost_py4j_frame(frame)
        if in_py4j is not None:
            if first:
                state.raise_when_it_returns(in_py4j)
            return
        state.raised = True
        raise JobInterrupted(state.signal_name or signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous.update(take_dispositions_before_startup())  # not the "while starting" ones
    try:
        yield
    finally:
        state.body_ended = True
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_job(
    job: str,
    parser: argparse.ArgumentParser,
    body: Callable[[JobContext], None],
    argv: Sequence[str] | None = None,
    *,
    spark: Any = None,
) -> int:
    """Parse, run ``body``, report. Returns the exit code (the entrypoint calls sys.exit).

    SIGINT and SIGTERM stop the job where it is: a commit is one exclusive create, so it has
    either landed whole (``new_version`` says so) or not at all; deletions already made were
    of files that no retained version reaches. The report says ``interrupted`` and the exit
    code is ``ExitCode.INTERRUPTED``."""
    started = time.monotonic()
    # spark-submit.sh's file for Spark's own output (its log4j and Python workers' stderr).
    spark_log = os.environ.get(SPARK_LOG_VARIABLE) if spark is None else None
    raw = list(sys.argv[1:] if argv is None else argv)
    lakehouse = raw[raw.index("--lakehouse") + 1] if "--lakehouse" in raw[:-1] else "?"
    report = JobReport(job, lakehouse, spark_log=spark_log)
    args: argparse.Namespace | None = None
    ctx: JobContext | None = None
    interrupted = Interruption()
    # A signal stops the job's Spark work at once (``Interruption``): on a thread, since the
    # main thread may be waiting in py4j for the very action to cancel.
    interrupted.stop_work = lambda: ctx.stop_classic_work() if ctx is not None else None
    with _stop_on_signals(interrupted):
        _say_the_job_began()
        try:
            args = parser.parse_args(raw)
            context = JobContext(
                job, args, report, spark
            )  # storage options and settings: no I/O yet
            # A local stat: a mistyped path is refused with the command line (one line, no JVM).
            refuse_a_file_as_root(context.storage)
            if context.storage.local_root_is_missing():  # every job needs a lakehouse there
                raise no_lakehouse(context.storage)
            ctx = context
            if os.environ.get(PARSE_ONLY_VARIABLE) == "1":
                # spark-submit.sh's check before the JVM starts: this one runs in the terminal,
                # where stderr is stderr (PythonRunner merges the driver's stderr into stdout).
                return EXIT_OK
            report.lakehouse = ctx.storage.root_uri
            refuse_unsupported_format(ctx.storage)
            try:
                body(ctx)
            finally:
                interrupted.body_ended = True  # a signal from here on is too late to stop anything
        except JobInterrupted:
            _mark_interrupted(report, interrupted, ctx)
            if ctx is not None and ctx.remote:
                ctx.cancel()  # the endpoint got no signal: stop what this job started there
        except LakecoreError as exc:
            if interrupted:  # the error is the interruption's echo (a cancelled Spark job)
                _mark_interrupted(report, interrupted, ctx)
            else:
                report.status = "failed"
                report.exit_code = exc.exit_code
                report.error = with_next_step(
                    exc, ctx.storage.root_uri if ctx is not None else None
                )
        except Exception as exc:
            from jobs.executor_errors import error_from_executor

            if interrupted:
                _mark_interrupted(report, interrupted, ctx)
            elif (from_executor := error_from_executor(exc)) is not None:
                report.status = "failed"
                report.exit_code = from_executor.exit_code
                report.error = with_next_step(
                    from_executor, ctx.storage.root_uri if ctx is not None else None
                )
            else:
                report.status = "failed"
                report.exit_code = EXIT_FAILURE
                # Spark Connect appends the server's JVM stack trace to the message: one line only.
                text = str(exc).split("JVM stacktrace:")[0]
                report.error = f"{type(exc).__name__}: {' '.join(text.split())[:600]}"
                if spark_log:
                    report.error += f"; Spark's log: {spark_log}"
                if os.environ.get("LAKECORE_DEBUG"):
                    traceback.print_exc()
        if interrupted and report.status != "interrupted":
            # The body ended on its own after its Spark work was cancelled: what it found (an
            # expectation whose queries failed) is the cancel's doing, not the lakehouse's.
            _mark_interrupted(report, interrupted, ctx)
        if ctx is not None and not interrupted:
            ctx.release()
        if interrupted:
            interrupted.finish(
                timeout_seconds=ctx.CANCELLED_TASKS_WAIT_SECONDS if ctx is not None else 1.0
            )
            if ctx is not None:
                ctx.wait_for_cancelled_tasks()
        report.durations_seconds["total"] = round(time.monotonic() - started, 3)
        if ctx is not None or not report.error:  # a refused command line gets its one line only
            _print_summary(report)
        if args is not None and getattr(args, "report", None):
            _write_the_report(report, args.report)
        if report.error:
            _say_the_error(f"lakecore {job}: {report.error}")
    if interrupted and spark is None and ctx is not None and ctx.owns_spark:
        # The session is abandoned, not stopped: stopping it or letting pyspark's exit hooks run
        # would only print py4j tracebacks over the one line above. A local JVM ends with this
        # process (spark-submit's waits for it; one pyspark launched sees its input end).
        # Through Connect, the client's exit hook calls the endpoint again, and retried an
        # unreachable one for minutes after the job's one line.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(report.exit_code)
    return report.exit_code


def _say_the_job_began() -> None:
    """Create the file ``JOB_BEGAN_VARIABLE`` names, if any (spark-submit.sh's, in its temp dir)."""
    marker = os.environ.get(JOB_BEGAN_VARIABLE)
    if marker and os.environ.get(PARSE_ONLY_VARIABLE) != "1":
        with contextlib.suppress(OSError):
            Path(marker).touch()


def _say_the_error(line: str) -> None:
    """The job's one error line, on stderr; under spark-submit.sh into the file it names
    (``ERROR_LINE_VARIABLE``), which it prints on its stderr."""
    relay = os.environ.get(ERROR_LINE_VARIABLE)
    if relay and os.environ.get(PARSE_ONLY_VARIABLE) != "1":
        try:
            Path(relay).write_text(escape_for_display(line) + "\n")
            return
        except OSError:
            pass  # then where Spark puts it
    print(escape_for_display(line), file=sys.stderr)


def _mark_interrupted(report: JobReport, interrupted: Interruption, ctx: JobContext | None) -> None:
    name = interrupted.signal_name or "SIGINT"
    report.status = "interrupted"
    report.exit_code = ExitCode.INTERRUPTED
    landed = (
        f"version {report.new_version} had landed whole"
        if report.new_version is not None
        else "nothing was committed"
    )
    stage, left_behind = (
        ctx.unfinished_stage if ctx is not None and ctx.unfinished_stage else (None, None)
    )
    if stage is not None:
        report.details["interrupted_stage"] = stage
    during = f" during {stage}" if stage else ""
    if left_behind:
        report.error = (
            f"interrupted by {name}{during}: {left_behind}; {landed}, nothing is half-committed"
        )
    else:
        report.error = (
            f"interrupted by {name}{during}; {landed}, nothing is half-committed; run the job again"
        )


def _write_the_report(report: JobReport, path: str) -> None:
    """``write_report``; a failure there (the path was checked as the command line was read,
    but disks fill and folders go) is the job's failure, exit 4, and its line says what the job
    had done, so that a commit is never hidden behind a missing report. A file no lakecore
    command wrote that appeared at the path while the job ran is left alone (exit 2)."""
    try:
        write_report(report, path)
    except (OSError, InvalidArgumentError) as exc:
        done = (
            f"version {report.new_version} was committed"
            if report.new_version is not None and report.new_version != report.base_version
            else "nothing was committed"
        )
        cause = exc.strerror or exc if isinstance(exc, OSError) else exc
        failure = (
            f"the report could not be written to {path} ({cause}); {done}, see the summary above"
        )
        report.error = f"{report.error}; {failure}" if report.error else failure
        if report.exit_code == EXIT_OK:
            report.exit_code = (
                exc.exit_code if isinstance(exc, InvalidArgumentError) else EXIT_FAILURE
            )


def write_report(report: JobReport, path: str) -> None:
    write_text_atomically(
        path,
        json.dumps(report.as_dict(), indent=2, sort_keys=True, default=str),
        OutputKind.JSON_REPORT,
    )


def _say(text: str) -> None:
    """A line of the summary on stdout, names in it escaped (``lakecore.display``)."""
    print(escape_for_display(text))


def _print_summary(report: JobReport) -> None:
    """The human summary: sizes, durations and times in units a person reads (the JSON report
    keeps the exact numbers)."""
    from lakecore.units import format_bytes, format_seconds

    head = f"lakecore {report.job} [{report.status}{' (dry run)' if report.dry_run else ''}] {report.lakehouse}"
    versions = ""
    if report.base_version is not None:
        versions = f" version {report.base_version}"
        if report.new_version is not None and report.new_version != report.base_version:
            versions += f" -> {report.new_version}"
    _say(head + versions)
    for line in report.summary:
        _say(f"  {line}")
    if report.status == "noop" and report.details.get("noop_reason") and not report.summary:
        _say(f"  nothing to do: {report.details['noop_reason']}; nothing committed")
    if report.counts:
        _say(
            "  "
            + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sorted(report.counts.items()))
        )
    if report.bytes:
        _say(
            "  "
            + ", ".join(
                f"{k.replace('_', ' ')} {format_bytes(v)}" for k, v in sorted(report.bytes.items())
            )
        )
    total = report.durations_seconds.get("total")
    if total is not None:
        stages = [
            f"{k} {format_seconds(v)}" for k, v in report.durations_seconds.items() if k != "total"
        ]
        _say(f"  took {format_seconds(total)}" + (f" ({', '.join(stages)})" if stages else ""))
    sys.stdout.flush()
