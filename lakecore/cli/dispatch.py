# PYTHON_ARGCOMPLETE_OK
"""The ``lakecore`` command line: the parser, assembled from the command modules, and dispatch.

Every command prints a short human summary, or JSON with ``--json``. Errors are one line on
stderr and an exit code. The codes are defined once, in ``lakecore.errors.ExitCode``, with the
retry rule of each; ``lakecore --help`` prints them, and the README's "Exit codes" section
explains each one.

Each command group is a module with its rules and an ``add_commands(sub, subcommand)``:
``objects`` (init, namespace, table), ``reading`` (versions, history, describe, get, tree),
``snapshots`` (rollback, export), ``recovery`` (fsck, repair), ``settings``, ``lookup``
(lookup, diff), ``maintenance`` (gc, compact-versions) and ``serve``; ``completion`` is here.
``main`` turns every ``LakecoreError`` into its one line and exit code (with the next step
for damage), an interrupt into ``ExitCode.INTERRUPTED``, a closed pipe into success, and
anything else into ``ExitCode.FAILURE``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lakecore.cli import lookup as lookup_cli
from lakecore.cli import maintenance as maintenance_cli
from lakecore.cli import objects as objects_cli
from lakecore.cli import reading as reading_cli
from lakecore.cli import recovery as recovery_cli
from lakecore.cli import serve as serve_cli
from lakecore.cli import settings as settings_cli
from lakecore.cli import snapshots as snapshots_cli
from lakecore.cli.printing import emit_error, say
from lakecore.cli.shared_options import (
    add_json_option,
    add_storage_option,
    refuse_outputs_in_lakehouse,
)
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.errors import ExitCode, InvalidArgumentError, LakecoreError, exit_code_help
from lakecore.maintenance.damage import with_next_step


def _version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"lakecore {version('lakecore')}"
    except PackageNotFoundError:
        return "lakecore (not installed as a package)"


def _sub(actions: Any, name: str, help_text: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand with ``--json`` and ``-l/--lakehouse`` of its own: ``lakecore versions -l
    lake`` was 'unrecognized arguments: -l lake' (the global options went first only)."""
    p: argparse.ArgumentParser = actions.add_parser(
        name, help=help_text, description=kwargs.pop("description", help_text), **kwargs
    )
    add_json_option(p)
    p.add_argument(
        "-l",
        "--lakehouse",
        default=argparse.SUPPRESS,
        help="lakehouse root URI (or LAKECORE_LAKEHOUSE); before the command or after it",
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="lakecore",
        description="TrinityLake lakehouse catalog tool",
        epilog=exit_code_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-V",
        "--version",
        action="version",
        version=_version_text(),
        help="print lakecore's version and exit",
    )
    parser.add_argument("-l", "--lakehouse", help="lakehouse root URI (or LAKECORE_LAKEHOUSE)")
    add_storage_option(parser, top_level=True)
    parser.add_argument(
        "--json",
        action="store_true",
        help='print JSON instead of a summary; errors too, as {"error": ..., "exit_code": ...}',
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # In the order ``lakecore --help`` lists them.
    objects_cli.add_commands(sub, _sub)
    reading_cli.add_commands(sub, _sub)
    snapshots_cli.add_commands(sub, _sub)
    recovery_cli.add_commands(sub, _sub)
    settings_cli.add_commands(sub, _sub)
    lookup_cli.add_commands(sub, _sub)
    maintenance_cli.add_commands(sub, _sub)
    serve_cli.add_commands(sub, _sub)

    p = _sub(
        sub,
        "completion",
        "print a shell completion script (bash or zsh; needs the [completion] extra)",
        description='eval "$(lakecore completion bash)" in ~/.bashrc (or zsh: autoload -U bashcompinit; '
        'bashcompinit; eval "$(lakecore completion zsh)")',
    )
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete in")
    p.set_defaults(func=cmd_completion)
    return parser


def cmd_completion(args: argparse.Namespace) -> int:
    try:
        import argcomplete
    except ImportError:
        raise InvalidArgumentError(
            "shell completion needs argcomplete: pip install '.[completion]' in the lakecore checkout (make setup installs it)"
        ) from None
    print(argcomplete.shellcode(["lakecore"], shell=args.shell))  # type: ignore[attr-defined]
    return ExitCode.OK


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(raw)

    def fail(message: str, code: int) -> int:
        if as_json:
            emit_error(message, code)
        say(f"lakecore: {message}", error=True)
        return code

    args: argparse.Namespace | None = None
    try:
        parser = build_parser()
        try:
            import argcomplete
        except ImportError:
            pass
        else:
            argcomplete.autocomplete(parser)
        args = parser.parse_args(raw)
        refuse_outputs_in_lakehouse(args)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except LakecoreError as exc:
        root_uri = (
            (getattr(args, "lakehouse", None) or os.environ.get("LAKECORE_LAKEHOUSE"))
            if args is not None
            else None
        )
        return fail(with_next_step(exc, root_uri), exc.exit_code)
    except KeyboardInterrupt:
        return fail(
            "interrupted; nothing was half-committed (a commit lands whole or not at all)",
            ExitCode.INTERRUPTED,
        )
    except BrokenPipeError:
        # The reader went away (`lakecore ... | head`): not an error of ours. Point stdout at
        # devnull so that the interpreter's final flush does not complain a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except Exception as exc:
        return fail(
            f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())}", ExitCode.FAILURE
        )
