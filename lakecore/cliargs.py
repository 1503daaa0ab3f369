"""What every ``lakecore`` command shares: the lakehouse it names and how it prints.

The command modules (``lakecore.cli`` and ``lakecore.lookup.cli``) sit on this module; it knows
nothing of the commands, so that no command module has to import another.

- The lakehouse is ``-l/--lakehouse URI``, else ``$LAKECORE_LAKEHOUSE``.
- Storage options come from repeated ``--storage-option KEY=VALUE`` through the one parser,
  ``lakecore.storage.parse_storage_options``.
- Output is a short human summary, or indented JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from lakecore.errors import InvalidArgumentError
from lakecore.lakehouse import Lakehouse
from lakecore.storage import parse_storage_options
from lakecore.view import LakehouseView


def key_value(text: str) -> tuple[str, str]:
    """An argparse type: ``KEY=VALUE``."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    key, value = text.split("=", 1)
    return key, value


def storage_options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--storage-option`` values as storage options. Raises InvalidArgumentError."""
    return parse_storage_options(getattr(args, "storage_option", None) or [])


def lakehouse_uri(args: argparse.Namespace) -> str:
    """The lakehouse the command names. Raises InvalidArgumentError when it names none."""
    uri = getattr(args, "lakehouse", None) or os.environ.get("LAKECORE_LAKEHOUSE")
    if not uri:
        raise InvalidArgumentError("no lakehouse given: pass --lakehouse URI or set LAKECORE_LAKEHOUSE")
    return str(uri)


def open_lakehouse(args: argparse.Namespace) -> Lakehouse:
    """The named lakehouse at its latest version. Raises NotFoundError, DamagedLakehouseError,
    InvalidArgumentError, StorageError."""
    return Lakehouse.open(lakehouse_uri(args), storage_options=storage_options_of(args))


def open_view(args: argparse.Namespace, version: int | None = None) -> LakehouseView:
    """The named lakehouse at ``version`` (default ``args.version``, else the latest)."""
    lh = open_lakehouse(args)
    if version is None:
        version = getattr(args, "version", None)
    return lh if version is None else lh.at_version(version)


def emit(args: argparse.Namespace, human: str, data: Any) -> None:
    """Print ``human``, or ``data`` as indented JSON with ``--json``."""
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(human)


__all__ = ["emit", "key_value", "lakehouse_uri", "open_lakehouse", "open_view", "storage_options_of"]
