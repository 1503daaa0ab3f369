"""Times, durations and sizes: parsed as people write them, formatted as people read them.

Parsing (the one parser of every option):

- **Durations** (``parse_duration_millis``): ``7d``, ``12h``, ``90m``, ``30s``, ``250ms``: the
  lakehouse's retention settings (``lakecore init``, ``lakecore settings set``) and the jobs'
  grace periods (``--older-than``). A number without a unit is allowed only where the caller
  names the unit it means (``plain_unit``): the jobs read plain numbers as seconds, as they
  always have; the retention options have a ``...-millis`` twin for plain milliseconds, so
  ``--maximum-version-age`` insists on a unit. At most ``MAX_DURATION_MILLIS`` (a uint64 in
  the lakehouse definition).
- **Times** (``parse_time_millis``): epoch milliseconds or ISO-8601 (UTC when no zone is
  given), at most ``LATEST_TIME_MILLIS``: ``--as-of``, ``--since``, the jobs' ``--now``.

Formatting is for summaries only (the command line's and the jobs'); JSON output and reports
keep the exact numbers. A duration that is a whole number of one unit keeps the exact spelling
of the parser (``259200s`` -> ``3d``), so a summary and an option read the same.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Final

from lakecore.errors import InvalidArgumentError

UNIT_MILLIS: dict[str, int] = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# uint64 in the lakehouse definition; anything longer is a typo, not a retention period.
MAX_DURATION_MILLIS = (1 << 64) - 1

_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h|d)?$")


def parse_duration_millis(
    text: str, *, what: str = "duration", plain_unit: str | None = None
) -> int:
    """``text`` as whole milliseconds (rounded down); InvalidArgumentError if it is not a
    non-negative number with a unit of ms, s, m, h or d (or, with ``plain_unit``, none)."""
    if plain_unit is not None and plain_unit not in UNIT_MILLIS:
        raise ValueError(f"plain_unit {plain_unit!r} is not one of {', '.join(UNIT_MILLIS)}")
    units = "ms, s, m, h or d"
    cleaned = str(text).strip().lower()
    match = _DURATION.match(cleaned)
    if match is None or (match.group(2) is None and plain_unit is None):
        example = "7d, 12h, 90m, 30s or 250ms"
        if cleaned.startswith("-"):
            raise InvalidArgumentError(
                f"{what} {text!r} is negative; give a duration such as {example}"
            )
        need = (
            f"a number with a unit ({units})"
            if plain_unit is None
            else f"a number with an optional unit ({units})"
        )
        raise InvalidArgumentError(f"{what} {text!r} is not {need}, e.g. {example}")
    number, unit = match.group(1), match.group(2) or plain_unit
    assert unit is not None
    value = float(number) * UNIT_MILLIS[unit]
    if not math.isfinite(value) or value > MAX_DURATION_MILLIS:
        raise InvalidArgumentError(
            f"{what} {text!r} is too long (at most {MAX_DURATION_MILLIS} ms)"
        )
    return int(value)


def format_duration_millis(millis: int) -> str:
    """The shortest exact spelling: ``604800000`` -> ``7d``, ``5400000`` -> ``90m``, ``1500`` -> ``1500ms``."""
    if millis == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        if millis % UNIT_MILLIS[unit] == 0:
            return f"{millis // UNIT_MILLIS[unit]}{unit}"
    return f"{millis}ms"


# -- formatting -------------------------------------------------------------------------------

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: int | float) -> str:
    """``2053414`` -> ``1.96 MiB``; ``512`` -> ``512 B``."""
    value = float(n)
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == _BYTE_UNITS[-1]:
            if unit == "B":
                return f"{int(value)} B"
            return f"{value:.1f} {unit}" if abs(value) >= 100 else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    """A duration: exact when it is whole in one unit (``3d``, ``90m``), else rounded
    (``1.4s``, ``2m 05s``, ``3h 10m``, ``2d 4h``)."""
    millis = round(seconds * 1000)
    if millis >= 1000 and millis % 1000 == 0:
        exact = format_duration_millis(millis)
        number, unit = int(exact.rstrip("dhms")), exact.lstrip("0123456789")
        if unit == "d" or number < {"h": 24, "m": 60, "s": 60}.get(unit, 0):
            return exact
    if seconds < 1:
        return f"{millis}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


def format_millis(millis: int) -> str:
    """A duration given in milliseconds (see ``format_seconds``)."""
    return format_seconds(millis / 1000)


def format_time_millis(millis: int | None) -> str:
    """Epoch milliseconds as ``2026-11-21 00:00:00 UTC`` (``-`` for None)."""
    if millis is None:
        return "-"
    when = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    return (
        when.strftime("%Y-%m-%d %H:%M:%S UTC")
        if millis % 1000 == 0
        else (when.strftime("%Y-%m-%d %H:%M:%S.") + f"{millis % 1000:03d} UTC")
    )


def format_age(now_millis: int, then_millis: int) -> str:
    """How long ago: ``3d 2h ago`` (``in the future`` for clocks that disagree)."""
    delta = now_millis - then_millis
    if delta < 0:
        return "in the future"
    return f"{format_seconds(round(delta / 1000))} ago" if delta >= 1000 else "just now"


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 violation``, ``2 violations``, ``0 files``, ``30,313 files``."""
    return f"{count:,} {noun if count == 1 else (plural_form or noun + 's')}"


# The last millisecond ISO-8601 can name (9999-12-31T23:59:59.999Z): a larger epoch number is a
# typo, and past 2**63 - 1 it would not even fit the reports' and Spark's 64-bit integers.
LATEST_TIME_MILLIS: Final = 253_402_300_799_999


def parse_time_millis(text: str, *, what: str = "time") -> int:
    """Epoch milliseconds, or an ISO-8601 time (``2026-11-21``, ``2026-11-21T10:00:00Z``;
    UTC when no zone is given), at most ``LATEST_TIME_MILLIS``. Raises InvalidArgumentError."""
    cleaned = text.strip()
    if cleaned.isdigit():
        millis = int(cleaned)
        if millis > LATEST_TIME_MILLIS:
            raise InvalidArgumentError(
                f"{what} {cleaned} is after the year 9999 as epoch milliseconds (today is a 13-digit number, "
                f"e.g. {int(dt.datetime.now(dt.UTC).timestamp()) * 1000}); or give an ISO-8601 time"
            )
        return millis
    try:
        parsed = dt.datetime.fromisoformat(cleaned.replace("Z", "+00:00").replace(" UTC", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(
            f"{what} {text!r} is neither epoch milliseconds nor an ISO-8601 time such as 2026-11-21T10:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


__all__ = [
    "LATEST_TIME_MILLIS",
    "MAX_DURATION_MILLIS",
    "UNIT_MILLIS",
    "format_age",
    "format_bytes",
    "format_duration_millis",
    "format_millis",
    "format_seconds",
    "format_time_millis",
    "parse_duration_millis",
    "parse_time_millis",
    "plural",
]
