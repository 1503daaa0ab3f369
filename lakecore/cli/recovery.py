"""``lakecore fsck`` and ``repair``: checking a lakehouse's invariants and repairing damage.

Rules:

* ``fsck`` checks one version (``--version``/``--as-of``, default the latest) or, with
  ``--all``, every version with a root file; a version that cannot be read is a finding, not a
  crash. Without ``--deep`` only the tree is read, and a clean result says so; ``--deep`` also
  reads every definition file. Violations exit ``ExitCode.VIOLATIONS``.
* ``repair rebuild-hint``, ``rollback`` and ``drop-damaged`` print their plan and change
  nothing without ``--yes`` (``lakecore.lakehouse.repair``: plan first, never reuse a version
  number). A refused repair is one line on stderr and its exit code.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from lakecore.cli.printing import emit, say
from lakecore.cli.shared_options import (
    lakehouse_uri,
    open_lakehouse,
    resolve_version,
    storage_options_of,
)
from lakecore.contract.option_types import time_millis
from lakecore.core.units import plural
from lakecore.errors import (
    CorruptFileError,
    ExitCode,
    InvalidArgumentError,
    InvalidLocationError,
    NotFoundError,
    TreeStructureError,
)


def cmd_fsck(args: argparse.Namespace) -> int:
    from lakecore.cli.progress import Progress
    from lakecore.core.locations import root_node_file_name
    from lakecore.core.storage import Storage
    from lakecore.core.view import open_version, root_file_versions
    from lakecore.lakehouse.version_check import check_version, unreadable_version

    uri = lakehouse_uri(args)
    options = storage_options_of(args)
    storage = Storage(uri, options)
    if args.all:
        # Every root file, readable or not: a damaged version is a finding, not a crash.
        versions = sorted(root_file_versions(storage), reverse=True)
    else:
        chosen = resolve_version(args)
        versions = [chosen if chosen is not None else open_lakehouse(args).version]
    results = []
    with Progress("fsck", len(versions)) as progress:
        for version in versions:
            try:
                view = open_version(uri, version, storage_options=options)
            except NotFoundError as exc:
                if not args.all:
                    raise
                if storage.exists(root_node_file_name(version)):  # its definition is missing
                    results.append(unreadable_version(version, exc.one_line()))
                progress.advance()  # else: expired since the listing
                continue
            except (CorruptFileError, TreeStructureError, InvalidLocationError) as exc:
                results.append(unreadable_version(version, exc.one_line()))
            else:
                results.append(check_version(view, deep=args.deep))
            progress.advance()
    bad = [r for r in results if not r.ok]
    # Without --deep only the tree is read: say so, or "clean" hides a definition file lost
    # from a retained version (a table that then cannot be shown).
    verdict = (
        f"{plural(len(bad), 'version')} with violations"
        if bad
        else "clean"
        if args.deep
        else "the tree is clean (--deep also reads every definition file)"
    )
    lines = [
        f"checked {plural(len(results), 'version')}, "
        f"{plural(sum(r.report.nodes_checked for r in results), 'node')}: {verdict}"
    ]
    for r in bad:
        lines.extend(f"  v{r.version} {v}" for v in r.violations[:20])
    emit(
        args,
        "\n".join(lines),
        {
            "versions": [
                {
                    "version": r.version,
                    "ok": r.ok,
                    "nodes": r.report.nodes_checked,
                    "violations": [v.as_dict() for v in r.violations],
                }
                for r in results
            ],
            "ok": not bad,
        },
    )
    return ExitCode.OK if not bad else ExitCode.VIOLATIONS


def cmd_repair(args: argparse.Namespace) -> int:
    from lakecore.core.storage import Storage
    from lakecore.lakehouse import repair

    storage = Storage(lakehouse_uri(args), storage_options_of(args))

    def step(line: str) -> None:
        if not args.json:
            say(f"lakecore repair: {line}")

    if args.action == "rebuild-hint":
        outcome = repair.rebuild_hint(storage, apply=args.yes, say=step)
    elif args.action == "drop-damaged":
        outcome = repair.drop_damaged(storage, apply=args.yes, say=step)
    else:
        if args.to_version is None and not args.to_last_valid:
            raise InvalidArgumentError("repair rollback needs --to-version V or --to-last-valid")
        outcome = repair.rollback(
            storage,
            to_version=args.to_version,
            to_last_valid=args.to_last_valid,
            apply=args.yes,
            say=step,
        )
    if outcome.error is not None:
        if args.json:
            emit(args, "", {**outcome.as_dict(), "error": outcome.error})
        say(f"lakecore: {outcome.error}", error=True)
        return outcome.exit_code
    emit(args, "\n".join(outcome.summary) or outcome.status, outcome.as_dict())
    return ExitCode.OK


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``fsck`` and ``repair`` commands; ``subcommand(sub, name, help, ...)`` makes a subparser with the command
    line's shared options (``--json``, ``-l/--lakehouse``)."""
    p = subcommand(sub, "fsck", "check the invariants of a version (or all)")
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--version", type=int, metavar="V", help="check this version (default: the latest)"
    )
    group.add_argument(
        "--as-of",
        dest="as_of",
        type=time_millis,
        metavar="TIME",
        help="check the newest version created at or before TIME",
    )
    group.add_argument("--all", action="store_true", help="check every version with a root file")
    p.add_argument("--deep", action="store_true", help="also check every definition file")
    p.set_defaults(func=cmd_fsck)

    p = subcommand(
        sub, "repair", "repair a damaged lakehouse (prints the plan; --yes carries it out)"
    )
    actions = p.add_subparsers(
        dest="action", required=True, metavar="{rebuild-hint,rollback,drop-damaged}"
    )
    a = subcommand(
        actions, "rebuild-hint", "point the latest-version hint at the highest root file"
    )
    a.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    a = subcommand(actions, "rollback", "roll forward to an earlier version's content")
    target = a.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to-version", type=int, metavar="V", help="the version whose content to restore"
    )
    target.add_argument(
        "--to-last-valid",
        action="store_true",
        help="the newest version the tree checker finds clean",
    )
    a.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    a.set_defaults(to_version=None, to_last_valid=False)
    a = subcommand(
        actions,
        "drop-damaged",
        "delete the root files of older versions that cannot be read (the latest must be whole); "
        "gc then removes what only they reached",
    )
    a.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    p.set_defaults(func=cmd_repair, to_version=None, to_last_valid=False)


__all__ = ["add_commands", "cmd_fsck", "cmd_repair"]
