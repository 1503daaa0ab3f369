"""``run_job``: parse, run, render, report, exit.

Every job is its arguments, an options dataclass, one ``run_X(options, job)`` that returns the
same result type as its engine-neutral ``X_in_process``, and a renderer, the only place its
report keys are written. Every job's ``main`` is ``run_job``: it reads the command line (a bad
one is one line, exit 2) into the options, opens the lakehouse's storage and settings (no I/O
but a local stat), runs, renders the result, prints the summary, writes the JSON report
(``--report``), and returns the exit code from ``lakecore.errors.ExitCode``. Errors are one line
on stderr (``jobs.wrapper.say_the_error``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from jobs.command_line import JobOptions
from jobs.context import JobContext
from jobs.signals import Interruption, JobInterrupted, stop_on_signals
from jobs.wrapper import parse_only, say_the_error, say_the_job_began
from jobs.wrapper import spark_log as wrapper_spark_log
from lakecore.contract.job_report import JobReport, print_summary, write_report_or_fail
from lakecore.core.versions import no_lakehouse, refuse_a_file_as_root
from lakecore.core.view import refuse_unsupported_format
from lakecore.errors import ExitCode, LakecoreError
from lakecore.maintenance.damage import with_next_step

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Options = TypeVar("Options")
Result = TypeVar("Result")


def run_job(
    job: str,
    *,
    parser: argparse.ArgumentParser,
    options: Callable[[argparse.Namespace, JobOptions], Options],
    run: Callable[[Options, JobContext], Result],
    render: Callable[[Result, JobReport], None],
    argv: Sequence[str] | None = None,
    spark: SparkSession | None = None,
) -> int:
    """Parse the command line into the job's options (``options``, with the ``JobOptions``
    every job takes), ``run`` them, ``render`` the result into the report, print and write the
    report. Returns the exit code (the entrypoint calls sys.exit). A run that stops part-way
    has the result it was filling rendered (``JobContext.track``), then its failure said.

    SIGINT and SIGTERM stop the job where it is: a commit is one exclusive create, so it has
    either landed whole (``new_version`` says so) or not at all; deletions already made were
    of files that no retained version reaches. The report says ``interrupted`` and the exit
    code is ``ExitCode.INTERRUPTED``."""
    started = time.monotonic()
    # spark-submit.sh's file for Spark's own output (its log4j and Python workers' stderr).
    spark_log = wrapper_spark_log() if spark is None else None
    raw = list(sys.argv[1:] if argv is None else argv)
    lakehouse = raw[raw.index("--lakehouse") + 1] if "--lakehouse" in raw[:-1] else "?"
    report = JobReport(job, lakehouse, spark_log=spark_log)
    args: argparse.Namespace | None = None
    ctx: JobContext | None = None
    rendered = False
    interrupted = Interruption()
    # A signal stops the job's Spark work at once (``Interruption``): on a thread, since the
    # main thread may be waiting in py4j for the very action to cancel.
    interrupted.stop_work = lambda: ctx.stop_classic_work() if ctx is not None else None
    with stop_on_signals(interrupted):
        say_the_job_began()
        try:
            args = parser.parse_args(raw)
            common = JobOptions.from_args(args)  # storage options and settings: no I/O yet
            typed = options(args, common)
            context = JobContext(job, common, report, spark)
            # A local stat: a mistyped path is refused with the command line (one line, no JVM).
            refuse_a_file_as_root(context.storage)
            if context.storage.local_root_is_missing():  # every job needs a lakehouse there
                raise no_lakehouse(context.storage)
            ctx = context
            if parse_only():
                # spark-submit.sh's check before the JVM starts: this one runs in the terminal,
                # where stderr is stderr (PythonRunner merges the driver's stderr into stdout).
                return ExitCode.OK
            report.lakehouse = ctx.storage.root_uri
            refuse_unsupported_format(ctx.storage)
            try:
                render(run(typed, ctx), report)
                rendered = True
            finally:
                interrupted.body_ended = True  # a signal from here on is too late to stop anything
        except JobInterrupted:
            rendered = rendered or _render_what_was_done(ctx, render, report)
            _mark_interrupted(report, interrupted, ctx)
            if ctx is not None and ctx.remote:
                ctx.cancel()  # the endpoint got no signal: stop what this job started there
        except LakecoreError as exc:
            rendered = rendered or _render_what_was_done(ctx, render, report)
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

            rendered = rendered or _render_what_was_done(ctx, render, report)
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
                report.exit_code = ExitCode.FAILURE
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
            print_summary(report)
        if args is not None and getattr(args, "report", None):
            write_report_or_fail(report, args.report)
        if report.error:
            say_the_error(f"lakecore {job}: {report.error}")
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


def _render_what_was_done(
    ctx: JobContext | None, render: Callable[[Result, JobReport], None], report: JobReport
) -> bool:
    """Render the result a run that stopped part-way was filling, if it began one; True when
    rendered. A renderer that fails on it leaves the report as it was: the run's own failure is
    the line to say."""
    if ctx is None or ctx.tracked is None:
        return False
    try:
        render(cast(Result, ctx.tracked), report)
    except Exception:
        if os.environ.get("LAKECORE_DEBUG"):
            traceback.print_exc()
    return True


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
