"""repair: put a damaged lakehouse back in order, printing the plan before doing anything.

    ./spark-submit.sh repair --lakehouse URI rebuild-hint [--yes]
    ./spark-submit.sh repair --lakehouse URI rollback --to-version V [--yes]
    ./spark-submit.sh repair --lakehouse URI rollback --to-last-valid [--yes]
    ./spark-submit.sh repair --lakehouse URI drop-damaged [--yes]

The work is ``lakecore.lakehouse.repair`` (the same as ``lakecore repair``): it reads roots and checks
versions one at a time on the driver, stopping at the first clean version, which is usually the
newest or close to it, so it needs no executors. It works when the newest root files, one in
the middle, or the hint are truncated, empty, garbage or missing: damaged roots keep their
version numbers and the new version goes above them. ``drop-damaged`` deletes the root files
of older retained versions that cannot be read, below a whole latest version (gc and version
compaction refuse while such a version is retained, and name this action).

Every action prints its plan. Without ``--yes`` that is all it does (status ``planned``, exit 0,
nothing written); with ``--yes`` the driver carries it out.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.command_line import JobOptions, base_parser
from jobs.context import JobContext
from jobs.run import run_job
from lakecore.contract.job_report import JobReport
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import whole_number
from lakecore.core.display import escape_for_display
from lakecore.lakehouse import repair
from lakecore.lakehouse.repair import RepairOutcome

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ACTIONS = ("rebuild-hint", "rollback", "drop-damaged")


def _parser() -> OneLineArgumentParser:
    parser = base_parser("repair", __doc__.splitlines()[0])
    parser.add_argument("action", choices=ACTIONS, help="what to repair")
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--to-version",
        type=whole_number(0),
        default=None,
        help="rollback: the version whose content to restore",
    )
    target.add_argument(
        "--to-last-valid",
        action="store_true",
        help="rollback: to the newest version the tree checker finds clean",
    )
    parser.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    parser.add_check(_target_fits_the_action)
    return parser


def _target_fits_the_action(args: argparse.Namespace) -> str | None:
    """A rollback needs its target; the other actions take none."""
    named = args.to_version is not None or args.to_last_valid
    if args.action != "rollback" and named:
        return "--to-version and --to-last-valid only apply to rollback"
    if args.action == "rollback" and not named:
        return "rollback needs --to-version V or --to-last-valid"
    return None


@dataclass(frozen=True)
class RepairOptions:
    action: str  # one of ACTIONS
    to_version: int | None  # rollback
    to_last_valid: bool  # rollback
    apply: bool  # --yes: carry the plan out


def repair_options(args: argparse.Namespace, _common: JobOptions) -> RepairOptions:
    return RepairOptions(args.action, args.to_version, args.to_last_valid, args.yes)


def _say(line: str) -> None:
    """Print a step now (the summary only comes at the end)."""
    print(escape_for_display(f"lakecore repair: {line}"), flush=True)


def run_repair(options: RepairOptions, job: JobContext) -> RepairedOutcome:
    """``lakecore.lakehouse.repair`` (as ``lakecore repair`` runs it), on the driver alone: no
    Spark session is started."""
    result = job.track(RepairedOutcome(options.action))
    with job.driver_step("repair"):
        if options.action == "rebuild-hint":
            outcome = repair.rebuild_hint(job.storage, apply=options.apply, say=_say)
        elif options.action == "drop-damaged":
            outcome = repair.drop_damaged(job.storage, apply=options.apply, say=_say)
        else:
            outcome = repair.rollback(
                job.storage,
                to_version=options.to_version,
                to_last_valid=options.to_last_valid,
                apply=options.apply,
                say=_say,
            )
    result.outcome = outcome
    return result


@dataclass
class RepairedOutcome:
    """The repair's outcome (``lakecore repair``'s; None until it is done) and its action."""

    action: str
    outcome: RepairOutcome | None = None


def render_repair(result: RepairedOutcome, report: JobReport) -> None:
    """``result`` into ``report``: the only place repair's report keys are written."""
    action, outcome = result.action, result.outcome
    report.details["action"] = action
    if outcome is None:
        return
    if action == "drop-damaged":
        report.details["dropped_versions"] = outcome.dropped_versions
        report.counts["damaged_versions"] = len(outcome.damaged_versions)
        report.counts["dropped_versions"] = len(outcome.dropped_versions)
    report.base_version = outcome.highest_version
    report.new_version = outcome.new_version
    report.status = outcome.status
    report.summary.extend(outcome.summary)
    details = outcome.as_dict()
    report.details.update(
        {
            "plan": details["plan"],
            "rollback_to": details["rollback_to"],
            "invalid_versions": details["damaged_versions"],
            "hint_before": details["hint_before"],
            "hint_after": details["hint_after"],
            "latest_version": details["highest_version"],
        }
    )
    if action == "rollback":
        report.counts["versions_checked"] = outcome.versions_checked
        report.counts["invalid_versions"] = len(outcome.damaged_versions)
    if outcome.new_version is not None:
        report.details["rolled_back_to"] = outcome.rollback_to
    if outcome.error is not None:
        report.error = outcome.error
        report.exit_code = outcome.exit_code


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "repair",
        parser=_parser(),
        options=repair_options,
        run=run_repair,
        render=render_repair,
        argv=argv,
        spark=spark,
    )
