"""``lakecore rollback`` and ``export``: a version's content restored, or pinned and copied.

Rules:

* ``rollback --to-version V`` rolls forward: it commits a new version with V's content, never
  deletes a version; when the latest version already has that content it commits nothing.
* ``export create NAME`` (or the older ``export NAME``) records an export of a version, which
  pins it against version expiry and gc, and with ``--target`` makes a read-only copy there
  (``--mode``: the root only, every node, or every node and definition). ``export list``
  shows the exports; ``export drop NAME`` removes one and says which version it no longer
  pins. An export named ``create``, ``list`` or ``drop`` needs the create form, and the
  create-only options are refused with the other actions.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakecore.cli.printing import emit
from lakecore.cli.shared_options import add_version_options, open_lakehouse, resolve_version
from lakecore.errors import ExitCode, InvalidArgumentError

if TYPE_CHECKING:
    from lakecore.lakehouse.lakehouse import ExportMode


def cmd_rollback(args: argparse.Namespace) -> int:
    lh = open_lakehouse(args)
    before = lh.version
    version, committed = lh.rollback_if_needed(to_version=args.to_version)
    if committed:
        human = f"rolled back to the content of version {args.to_version}: new version {version} (was {before})"
    else:
        human = (
            f"version {version} already has the content of version {args.to_version}; "
            f"nothing committed (version {version})"
        )
    emit(
        args,
        human,
        {
            "version": version,
            "rolled_back_to": args.to_version,
            "previous": before,
            "committed": committed,
        },
    )
    return ExitCode.OK


EXPORT_ACTIONS = ("create", "list", "drop")


def _export_action(args: argparse.Namespace) -> tuple[str, str | None]:
    """``export create NAME``, ``export list``, ``export drop NAME``, and the older
    ``export NAME`` (= create; name an export ``list``, ``drop`` or ``create`` with ``export create``)."""
    first, second = args.action_or_name, args.name
    action, name = (first, second) if first in EXPORT_ACTIONS else ("create", first)
    if first not in EXPORT_ACTIONS and second is not None:
        raise InvalidArgumentError(
            f"export {first} {second}: unknown action {first!r}; use export create NAME, export list or export drop NAME"
        )
    if action == "list" and name is not None:
        raise InvalidArgumentError(
            f"export list takes no NAME (got {name!r}); to drop it use export drop {name}"
        )
    if action != "list" and name is None:
        raise InvalidArgumentError(f"export {action} needs the export's NAME")
    if action != "create":
        given = [
            flag
            for flag, value in (
                ("--mode", args.mode),
                ("--target", args.target),
                ("--version", args.version),
                ("--as-of", args.as_of),
            )
            if value is not None
        ]
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} to export create, not to export {action}"
            )
    return action, name


def cmd_export(args: argparse.Namespace) -> int:
    action, name = _export_action(args)
    lh = open_lakehouse(args)
    if action == "list":
        exports = lh.list_exports()
        lines = [
            f"{e.name}  version {e.version if e.version is not None else e.root}  {e.mode or '-'}  "
            f"{e.target or '-'}"
            for e in exports
        ]
        emit(
            args,
            "\n".join(lines) if lines else "(no exports)",
            {"version": lh.version, "exports": [e.__dict__ for e in exports]},
        )
        return ExitCode.OK
    assert name is not None
    if action == "drop":
        pinned = {e.name: e.version for e in lh.list_exports()}.get(name)
        version = lh.drop_export(name)
        emit(
            args,
            f"dropped export {name!r} in version {version}; version {pinned} is no longer pinned by it "
            "(version expiry and gc may now collect it)",
            {"version": version, "name": name, "action": "drop", "unpinned_version": pinned},
        )
        return ExitCode.OK
    mode: ExportMode = args.mode or "minimal"
    version = lh.export_snapshot(name, mode=mode, target=args.target, version=resolve_version(args))
    emit(
        args,
        f"exported snapshot {name!r} ({mode}); recorded in version {version}",
        {"version": version, "name": name, "mode": mode, "target": args.target},
    )
    return ExitCode.OK


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``rollback`` and ``export`` commands; ``subcommand(sub, name, help, ...)`` makes a subparser with the command
    line's shared options (``--json``, ``-l/--lakehouse``)."""
    p = subcommand(sub, "rollback", "roll forward to the content of an earlier version")
    p.add_argument(
        "--to-version",
        type=int,
        required=True,
        metavar="V",
        help="the version whose content to restore",
    )
    p.set_defaults(func=cmd_rollback)

    p = subcommand(
        sub,
        "export",
        "export a snapshot; list or drop exports",
        usage="lakecore export [create] NAME [--mode M] [--target URI] [--version V | --as-of TIME] "
        "| export list | export drop NAME",
        description="export create NAME (or just export NAME) records an export of a version, which pins it, "
        "and with --target makes a read-only copy there; export list shows the exports; export drop NAME "
        "removes one, so that version expiry and gc may collect what it pinned. An export named create, "
        "list or drop needs the create form.",
    )
    p.add_argument(
        "action_or_name",
        metavar="create|list|drop|NAME",
        help="the action, or the export's name (= create)",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the export's name")
    p.add_argument(
        "--mode",
        choices=["minimal", "partial", "full"],
        default=None,
        help="create: what the copy holds: the root only (minimal, default), every node (partial), "
        "or every node and definition (full)",
    )
    p.add_argument("--target", metavar="URI", help="create: make a read-only copy there")
    add_version_options(p, "export")
    p.set_defaults(func=cmd_export)


__all__ = ["add_commands", "cmd_export", "cmd_rollback"]
