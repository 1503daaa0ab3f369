"""repair: put a damaged lakehouse back in order, printing the plan before doing anything.

    ./spark-submit.sh repair --lakehouse URI rebuild-hint [--yes]
    ./spark-submit.sh repair --lakehouse URI rollback --to-version V [--yes]
    ./spark-submit.sh repair --lakehouse URI rollback --to-last-valid [--yes]

``rebuild-hint`` writes ``_latest_hint.txt`` from the real latest version (the largest root file
listed at the top of the root, probed upward). ``rollback --to-version V`` rolls forward: a new
version with version V's content (FORMAT.md section 5). ``rollback --to-last-valid`` checks the
retained versions newest first with the tree checker (``lakecore.fsck.check_version``, not deep:
every node file must be there and sound) and rolls forward to the newest clean one: the repair
for a lakehouse that lost a node file.

Every action prints its plan. Without ``--yes`` that is all it does (status ``planned``, exit 0,
nothing written); with ``--yes`` the driver carries it out. The checks run on the driver, one
version at a time, and stop at the first clean version, which is usually the newest or close to it.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit jobs/repair.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from jobs.common import EXIT_VIOLATIONS, JobContext, base_parser, run_job
from lakecore.argparsing import ArgumentError
from lakecore.errors import LakecoreError, NotFoundError
from lakecore.fsck import check_version
from lakecore.lakehouse import Lakehouse, LakehouseView
from lakecore.locations import LATEST_HINT_FILE_NAME, root_node_file_name
from lakecore.storage import Storage
from lakecore.tree import NodeCache, NodeStore
from lakecore.versions import list_root_versions, read_hint, write_hint

ACTIONS = ("rebuild-hint", "rollback")
# Violations quoted per invalid version in the report and the plan.
VIOLATIONS_SHOWN = 3


def _parser() -> Any:
    parser = base_parser("repair", __doc__.splitlines()[0])
    parser.add_argument("action", choices=ACTIONS, help="what to repair")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-version", type=int, default=None, help="rollback: the version whose content to restore")
    target.add_argument("--to-last-valid", action="store_true",
                        help="rollback: to the newest version the tree checker finds clean")
    parser.add_argument("--yes", action="store_true", help="carry out the plan (without it, only print it)")
    return parser


@contextlib.contextmanager
def _timed(ctx: JobContext, name: str) -> Iterator[None]:
    """A stage timing without Spark: repairs run on the driver and need no SparkSession."""
    started = time.monotonic()
    try:
        yield
    finally:
        ctx.report.durations_seconds[name] = round(time.monotonic() - started, 3)


def _plan(ctx: JobContext, line: str) -> None:
    """Print a step of the plan now (the summary only comes at the end) and keep it in the report."""
    prefix = "will" if ctx.args.yes else "would"
    text = f"{prefix} {line}"
    print(f"lakecore repair: {text}", flush=True)
    ctx.report.details.setdefault("plan", []).append(text)


def _planned(ctx: JobContext) -> bool:
    """True when this run only plans: marks the report and says how to carry the plan out."""
    if ctx.args.yes:
        return False
    ctx.report.status = "planned"
    ctx.report.summary.append("nothing written; rerun with --yes to carry out the plan")
    return True


def _rebuild_hint(ctx: JobContext) -> None:
    storage = ctx.storage
    report = ctx.report
    with _timed(ctx, "discover"):
        listed = list_root_versions(storage)
        if not listed:
            raise NotFoundError(f"no lakehouse at {storage.root_uri}: no root node file found")
        # The largest listed root, then anything committed since the listing; never the hint.
        latest = _probe_from(storage, listed[-1])
        hint = read_hint(storage)
    report.base_version = latest
    report.details.update({"hint_before": hint, "latest_version": latest})
    if hint == latest:
        report.summary.append(f"the hint already names the latest version {latest}; nothing to do")
        return
    _plan(ctx, f"write {LATEST_HINT_FILE_NAME} = {latest} (it holds "
               f"{'nothing readable' if hint is None else hint})")
    if _planned(ctx):
        return
    with _timed(ctx, "write"):
        if not write_hint(storage, latest):
            raise LakecoreError(f"could not write {storage.uri(LATEST_HINT_FILE_NAME)}; check permissions and retry")
    report.details["hint_after"] = latest
    report.summary.append(f"hint rewritten: {hint} -> {latest}")


def _probe_from(storage: Storage, start: int) -> int:
    """The last version at or after ``start`` (which exists): roots are contiguous above it."""
    latest = start
    while storage.exists(root_node_file_name(latest + 1)):
        latest += 1
    return latest


def _rollback(ctx: JobContext) -> None:
    args = ctx.args
    report = ctx.report
    if args.to_version is None and not args.to_last_valid:
        raise ArgumentError("rollback needs --to-version V or --to-last-valid")
    lh = Lakehouse.open(ctx.storage.root_uri, storage_options=ctx.storage.storage_options)
    lh.require_writable("roll back")  # before planning a rollback it could not commit
    latest = lh.version
    report.base_version = latest
    if args.to_version is not None:
        if args.to_version == latest:
            raise ArgumentError(f"--to-version {latest} is already the latest version; nothing to roll back")
        with _timed(ctx, "read"):
            lh.at_version(args.to_version)  # exists and decodes (else a clear error)
        target = args.to_version
        report.details["rollback_to"] = target
    else:
        with _timed(ctx, "check"):
            found = _last_valid(ctx, lh)
        if found is None:
            report.status = "failed"
            report.exit_code = EXIT_VIOLATIONS
            report.error = (f"no retained version of {lh.uri} is clean (checked {report.counts['versions_checked']}); "
                            "restore the missing files from a backup or an export")
            return
        if found == latest:
            report.details["rollback_to"] = None
            report.summary.append(f"the latest version {latest} is clean; nothing to roll back")
            return
        target = found
        report.details["rollback_to"] = target
    _plan(ctx, f"roll forward from version {latest} to the content of version {target} as version {latest + 1}")
    if _planned(ctx):
        return
    with _timed(ctx, "commit"):
        report.new_version = lh.rollback(to_version=target)
    report.details["rolled_back_to"] = target
    report.summary.append(f"rolled back to the content of version {target}: new version {report.new_version}")


def _last_valid(ctx: JobContext, lh: Lakehouse) -> int | None:
    """The newest retained version the (not deep) checker finds clean, newest first."""
    report = ctx.report
    invalid: dict[str, list[str]] = {}
    report.details["invalid_versions"] = invalid
    checked = 0
    version = lh.version
    found: int | None = None
    # A cache of this run's own: nodes read earlier by this process (the shared cache) may have
    # been deleted since; versions share most nodes, so each is still read only once.
    cache = NodeCache()
    while version >= 0:
        try:
            view = lh.at_version(version)
        except NotFoundError:
            break  # expired: older versions are gone too
        except LakecoreError as exc:
            invalid[str(version)] = [exc.one_line()]
        else:
            checked += 1
            store = NodeStore(view.storage, view.lakehouse_def.order, cache=cache,
                              external_roots=view.store.external_roots)
            try:
                result = check_version(LakehouseView(view.storage, view.root_info, view.lakehouse_def, store), deep=False)
                problems = [str(v) for v in result.violations[:VIOLATIONS_SHOWN]]
            except LakecoreError as exc:
                problems = [exc.one_line()]
            if not problems:
                found = version
                break
            invalid[str(version)] = problems
            print(f"lakecore repair: version {version} is damaged: {problems[0]}", flush=True)
        version -= 1
    report.counts["versions_checked"] = checked
    report.counts["invalid_versions"] = len(invalid)
    return found


def _body(ctx: JobContext) -> None:
    args = ctx.args
    ctx.report.details["action"] = args.action
    if args.action == "rebuild-hint":
        if args.to_version is not None or args.to_last_valid:
            raise ArgumentError("--to-version and --to-last-valid only apply to rollback")
        _rebuild_hint(ctx)
    else:
        _rollback(ctx)


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_job("repair", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
