"""A job's command line: the options every job shares, and the checks made as it is read.

The parser, the option types and the output-file checks are the job contract's
(``lakecore.contract``), which ``lakecore gc`` and the other in-process commands read too; this
module adds what only a Spark job takes (where Spark runs, how wide) and its own outputs.

Rules:
- Every job takes ``--lakehouse``, ``--storage-option``, ``--report``, ``--env`` (its
  maintenance settings), where Spark runs (``--master`` or ``--remote``) and ``--parallelism``
  (``base_parser``).
- A bad value or a bad combination is refused as the command line is read (an argparse ``type``,
  ``checked_option``, or a parser check), so that spark-submit.sh's check refuses it in one
  line before the JVM starts (``jobs.wrapper``), not after a second of Spark startup.
- Outputs (the report, the Parquet full list and the page beside it, ``--html``, Spark's log
  file) never land inside a lakehouse (the one named, an export's target, any other) nor on a
  file no lakecore command wrote (``lakecore.contract.outputs``); the full list is written whole
  (``write_full_list``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jobs.session import REMOTE_VARIABLE
from jobs.wrapper import parse_only, spark_log, under_the_wrapper
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import output_file, whole_number
from lakecore.contract.outputs import Output, OutputKind, check_outputs, refuse_foreign_target
from lakecore.core.storage import parse_storage_options
from lakecore.errors import CommitConflictError, InvalidArgumentError, LakecoreError, exit_code_help

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
from lakecore.maintenance.settings import MaintenanceSettings, load_settings

T = TypeVar("T")


@dataclass(frozen=True)
class JobOptions:
    """The options every job takes, typed, and the settings of its ``--env``: built once from
    the command line (``from_args``), before the job opens anything."""

    lakehouse: str
    storage_options: dict[str, Any]
    report: str | None
    env: str
    settings: MaintenanceSettings
    master: str | None
    # The Spark Connect endpoint: --remote, else $SPARK_REMOTE, unless --master names a master.
    remote: str | None
    parallelism: int | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JobOptions:
        """Raises InvalidArgumentError (bad storage options, no settings for ``--env``)."""
        storage_options = parse_storage_options(args.storage_option)
        settings = load_settings(args.env)
        remote = None if args.master else (args.remote or os.environ.get(REMOTE_VARIABLE) or None)
        return cls(
            lakehouse=args.lakehouse,
            storage_options=storage_options,
            report=args.report,
            env=args.env,
            settings=settings,
            master=args.master,
            remote=remote,
            parallelism=args.parallelism,
        )


def invocation(job: str) -> str:
    """How the operator started the job, for its usage and error lines: ``spark-submit.sh gc``
    under the wrapper (it sets the variables of its argument check and of its run),
    ``python -m jobs.gc`` when run as a module, else ``spark-submit jobs/gc.py`` (a plain
    spark-submit of the file, or anything else that runs it as a script)."""
    if under_the_wrapper():
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
    lakecore command wrote (``lakecore.contract.outputs.check_outputs``)."""
    outputs = job_outputs(args)
    log = spark_log()
    if log and parse_only():
        # spark-submit.sh names the log file it is about to open (LAKECORE_LOG_DIR): checked
        # before it exists, like the job's own outputs.
        outputs.append(Output("LAKECORE_LOG_DIR's log", log, OutputKind.LOG_FILE))
    try:
        # An export's target is a lakehouse being made: nothing else may land in it either.
        check_outputs(outputs, args.lakehouse, target=getattr(args, "target", None))
    except InvalidArgumentError as exc:
        return str(exc)
    return None


def write_full_list(frame: DataFrame, target: str) -> None:
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


def checked_option(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type`` from ``parse`` (which raises a ``LakecoreError`` on a bad value):
    the value is checked and typed as the command line is read, so that spark-submit.sh's check
    refuses it before the JVM starts (one line, exit 2)."""

    def check(text: str) -> T:
        try:
            return parse(text)
        except LakecoreError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    check.__name__ = parse.__name__  # argparse names the type in some of its messages
    return check
