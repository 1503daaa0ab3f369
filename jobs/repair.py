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

if __package__ in (
    None,
    "",
):  # run as a file (spark-submit jobs/repair.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("repair")

import sys
import time
from collections.abc import Sequence
from typing import Any

from jobs.arguments import base_parser
from jobs.context import JobContext
from jobs.run import run_untyped_job
from lakecore.cli.argparsing import ArgumentError, whole_number
from lakecore.display import escape_for_display
from lakecore.lakehouse import repair

ACTIONS = ("rebuild-hint", "rollback", "drop-damaged")


def _parser() -> Any:
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
    return parser


def _say(line: str) -> None:
    """Print a step now (the summary only comes at the end)."""
    print(escape_for_display(f"lakecore repair: {line}"), flush=True)


def _body(ctx: JobContext) -> None:
    args = ctx.args
    report = ctx.report
    report.details["action"] = args.action
    started = time.monotonic()
    if args.action != "rollback" and (args.to_version is not None or args.to_last_valid):
        raise ArgumentError("--to-version and --to-last-valid only apply to rollback")
    if args.action == "rebuild-hint":
        outcome = repair.rebuild_hint(ctx.storage, apply=args.yes, say=_say)
    elif args.action == "drop-damaged":
        outcome = repair.drop_damaged(ctx.storage, apply=args.yes, say=_say)
        report.details["dropped_versions"] = outcome.dropped_versions
        report.counts["damaged_versions"] = len(outcome.damaged_versions)
        report.counts["dropped_versions"] = len(outcome.dropped_versions)
    else:
        if args.to_version is None and not args.to_last_valid:
            raise ArgumentError("rollback needs --to-version V or --to-last-valid")
        outcome = repair.rollback(
            ctx.storage,
            to_version=args.to_version,
            to_last_valid=args.to_last_valid,
            apply=args.yes,
            say=_say,
        )
    report.durations_seconds["repair"] = round(time.monotonic() - started, 3)
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
    if args.action == "rollback":
        report.counts["versions_checked"] = outcome.versions_checked
        report.counts["invalid_versions"] = len(outcome.damaged_versions)
    if outcome.new_version is not None:
        report.details["rolled_back_to"] = outcome.rollback_to
    if outcome.error is not None:
        report.error = outcome.error
        report.exit_code = outcome.exit_code


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_untyped_job("repair", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
