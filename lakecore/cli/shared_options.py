"""The options every ``lakecore`` command shares, and what they name: the lakehouse, its storage
options, a version, ``--json``, ``--property``.

The command modules (``lakecore.cli.objects``, ``reading``, ...) sit on this module; it knows
nothing of the commands, so that no command module has to import another. How a command prints
is ``lakecore.cli.printing``; the job contract's parser and option types are
``lakecore.contract``.

- The lakehouse is ``-l/--lakehouse URI``, else ``$LAKECORE_LAKEHOUSE``.
- Storage options come from repeated ``--storage-option KEY=VALUE`` through the one parser,
  ``lakecore.core.storage.parse_storage_options``.
- ``--version V`` and ``--as-of TIME`` (time travel) name a version; ``--json`` asks for JSON.
- Output paths (``--html``, the lookup cache's folder) never land in a lakehouse
  (``refuse_outputs_in_lakehouse``).
"""

from __future__ import annotations

import argparse
import os
import re
from typing import TYPE_CHECKING, Any

from lakecore.contract.option_types import time_millis
from lakecore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from lakecore.core.view import LakehouseView
    from lakecore.lakehouse import Lakehouse


def key_value(text: str) -> tuple[str, str]:
    """An argparse type: ``KEY=VALUE``."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    key, value = text.split("=", 1)
    return key, value


def add_property_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--property KEY=VALUE``, repeatable, collected in ``args.property`` as (key, value)."""
    parser.add_argument(
        "--property", action="append", type=key_value, metavar="KEY=VALUE", help=help_text
    )


STORAGE_OPTION_HELP = (
    "storage option, e.g. endpoint_url=http://127.0.0.1:5000, region=eu-west-1, anon=true "
    "(S3 also reads AWS_ENDPOINT_URL and the usual AWS_* variables)"
)


def add_storage_option(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """``--storage-option KEY=VALUE``, repeatable. Before the command it is
    ``args.storage_option``; a command's own copy (``serve``'s, so that its ``--help`` lists it)
    is ``args.command_storage_option`` (argparse would replace, not extend, the first with a
    subcommand's value of the same name); ``storage_options_of`` takes both."""
    parser.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help=STORAGE_OPTION_HELP,
        dest="storage_option" if top_level else "command_storage_option",
    )


def refuse_outputs_in_lakehouse(args: argparse.Namespace) -> None:
    """Before the command does any work: its output paths (``--html``; the lookup cache's
    folder, given or default) may not lie inside the lakehouse nor replace a file no lakecore
    command wrote (``lakecore.contract.outputs.check_outputs``). Raises InvalidArgumentError."""
    from lakecore.contract.outputs import Output, OutputKind, check_outputs

    outputs: list[Output] = []
    if getattr(args, "html", None):
        outputs.append(Output("--html", args.html, OutputKind.HTML_PAGE))
    if hasattr(args, "cache_dir"):  # a command that builds lookup files
        from lakecore.core.lookup.cache import default_cache_folder

        if args.cache_dir:
            args.cache_dir = os.path.expanduser(args.cache_dir)  # checked as it is used
            outputs.append(Output("--cache-dir", args.cache_dir, OutputKind.CACHE_FOLDER))
        else:
            folder = str(default_cache_folder())
            outputs.append(Output("the lookup cache folder", folder, OutputKind.CACHE_FOLDER))
        given = args.cache_dir or os.environ.get("LAKECORE_CACHE_DIR") or ""
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", given):
            # A URI (or 'file:/x') was a folder named after its scheme in the working directory.
            named = "--cache-dir" if args.cache_dir else "LAKECORE_CACHE_DIR"
            raise InvalidArgumentError(
                f"{named} {given} is a URI; the lookup cache is a folder on this machine: "
                "give a local path"
            )
    lakehouse = getattr(args, "lakehouse", None) or os.environ.get("LAKECORE_LAKEHOUSE")
    # An export's target is a lakehouse being made: nothing else may land in it either.
    check_outputs(outputs, lakehouse, target=getattr(args, "target", None))


def storage_options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--storage-option`` values as storage options. Raises InvalidArgumentError."""
    from lakecore.core.storage import parse_storage_options  # deferred: --help stays cheap

    given = [
        *(getattr(args, "storage_option", None) or []),
        *(getattr(args, "command_storage_option", None) or []),
    ]
    return parse_storage_options(given)


def lakehouse_uri(args: argparse.Namespace) -> str:
    """The lakehouse the command names. Raises InvalidArgumentError when it names none."""
    uri = getattr(args, "lakehouse", None) or os.environ.get("LAKECORE_LAKEHOUSE")
    if not uri:
        raise InvalidArgumentError(
            "no lakehouse given: pass --lakehouse URI or set LAKECORE_LAKEHOUSE"
        )
    return str(uri)


def open_lakehouse(args: argparse.Namespace) -> Lakehouse:
    """The named lakehouse at its latest version. Raises NotFoundError, DamagedLakehouseError,
    InvalidArgumentError, StorageError."""
    from lakecore.lakehouse import Lakehouse  # deferred: --help and --version stay cheap

    return Lakehouse.open(lakehouse_uri(args), storage_options=storage_options_of(args))


def add_version_options(parser: argparse.ArgumentParser, what: str = "read") -> None:
    """``--version V`` and ``--as-of TIME`` (mutually exclusive): time travel."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--version",
        type=int,
        metavar="V",
        help=f"{what} this version (time travel) instead of the latest",
    )
    group.add_argument(
        "--as-of",
        dest="as_of",
        type=time_millis,
        metavar="TIME",
        help=f"{what} the newest version created at or before TIME (ISO-8601, e.g. "
        "2026-11-21T10:00:00Z, UTC if no zone; or epoch milliseconds)",
    )


def open_view(args: argparse.Namespace, version: int | None = None) -> LakehouseView:
    """The named lakehouse at ``version`` (default ``args.version``, else the version
    ``args.as_of`` names, else the latest)."""
    lh = open_lakehouse(args)
    if version is None:
        version = getattr(args, "version", None)
    if version is None and getattr(args, "as_of", None) is not None:
        return lh.as_of(args.as_of)
    return lh if version is None else lh.at_version(version)


def resolve_version(args: argparse.Namespace) -> int | None:
    """``--version`` or the version ``--as-of`` names (None for neither)."""
    if getattr(args, "version", None) is not None:
        return int(args.version)
    if getattr(args, "as_of", None) is not None:
        return open_view(args).version
    return None


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """``--json`` on a subcommand too (``lakecore versions --json``), without overriding the
    top-level one."""
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON instead of a summary (errors too)",
    )


__all__ = [
    "add_json_option",
    "add_property_option",
    "add_storage_option",
    "add_version_options",
    "key_value",
    "lakehouse_uri",
    "open_lakehouse",
    "open_view",
    "resolve_version",
    "storage_options_of",
]
