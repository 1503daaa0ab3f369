"""The types of option values (argparse ``type``s) the jobs and the command line share.

Each checks and converts one value as the command line is read, so that a bad value is one
line and exit 2 (``OneLineArgumentParser``) before any work is done, and, for a job, before
spark-submit.sh starts the JVM (its parse-only run reads the same parser). A type raises
``argparse.ArgumentTypeError`` with the reason; argparse names the option in front of it.

- ``output_file``: a file to write (a report, a page). A folder, a path under a file, a folder
  that cannot be written or a URI is refused before a job does its work (a commit included)
  and only then fails to say what it did. Where the file may land is ``outputs``' rule.
- ``whole_number(minimum)``: a version is at least 0, a count of tasks at least 1.
- ``time_millis``: an ISO-8601 time (UTC unless it names a zone) or epoch milliseconds.
- ``duration_millis(what)``: ``7d``, ``12h``, ``90m``, ``30s``, ``250ms``; a plain number only
  with ``plain_unit``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable

from lakecore.errors import InvalidArgumentError


def output_file(text: str) -> str:
    """An argparse ``type``: ``text`` names a file this process can create or replace. Its
    folder may be missing (the writer makes it) if the nearest existing ancestor is a folder
    this process may write in."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", text):
        # Reports and pages are written on this machine (lakecore/contract/outputs.py): a URI
        # would make a folder named after its scheme in the working directory.
        raise argparse.ArgumentTypeError(
            f"{text} is a URI; this writes a file on this machine: give a local path"
        )
    path = os.path.abspath(os.path.expanduser(text))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} exists and cannot be written")
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise argparse.ArgumentTypeError(
            f"{text} cannot be created: {ancestor} is a file, not a folder"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f"{text} cannot be created: no permission to write in {ancestor}"
        )
    return os.path.expanduser(text)  # what the check reads is what the writer writes


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``minimum`` (a version is at least 0, a
    count of tasks at least 1), so that ``--version -1`` or ``--parallelism 0`` is refused as the
    command line is read rather than after Spark has started, or not at all."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"{value} is below {minimum}; give a whole number of at least {minimum}"
            )
        return value

    parse.__name__ = "whole number"  # argparse names the type in its own messages
    return parse


def time_millis(text: str) -> int:
    """An argparse type (``--now``, ``--as-of``, ``--since``): an ISO-8601 time (UTC unless it
    names a zone) or epoch milliseconds. argparse names the option in front of the message."""
    from lakecore.core.units import parse_time_millis

    try:
        return parse_time_millis(text, what="the time")
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration_millis(what: str, *, plain_unit: str | None = None) -> Callable[[str], int]:
    """An argparse type: a duration (``7d``, ``12h``, ``90m``, ``30s``, ``250ms``; a plain number
    only with ``plain_unit``) as milliseconds. ``what`` names the value in the message, after
    argparse's own name of the option."""

    def parse(text: str) -> int:
        from lakecore.core.units import parse_duration_millis

        try:
            return parse_duration_millis(text, what=what, plain_unit=plain_unit)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "duration"  # argparse names the type in some of its messages
    return parse


__all__ = ["duration_millis", "output_file", "time_millis", "whole_number"]
