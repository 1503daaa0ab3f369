"""How a ``lakecore`` command prints: a short human summary, or indented JSON with ``--json``.

Rules:
- Every command prints through ``emit`` or ``say``: names and paths in the text are escaped
  (``lakecore.core.display``), so a control character in a name cannot rewrite the terminal.
- With ``--json`` the output is one JSON document on stdout, an error too (``emit_error``:
  ``{"error": ..., "exit_code": ..., ...}``); without it an error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lakecore.core.display import escape_for_display


def emit(args: argparse.Namespace, human: str, data: Any) -> None:
    """Print ``human``, or ``data`` as indented JSON with ``--json``."""
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(escape_for_display(human))


def say(text: str, *, error: bool = False) -> None:
    """One line (or block) for a person, on stdout or stderr, names escaped
    (``lakecore.core.display``): every command prints through here or ``emit``."""
    print(escape_for_display(text), file=sys.stderr if error else sys.stdout, flush=True)


def emit_error(message: str, exit_code: int, **extra: Any) -> None:
    """An error as JSON on stdout (``--json``): ``{"error": ..., "exit_code": ..., ...}``."""
    print(
        json.dumps(
            {"error": message, "exit_code": int(exit_code), **extra},
            indent=2,
            sort_keys=True,
            default=str,
        )
    )


__all__ = ["emit", "emit_error", "say"]
