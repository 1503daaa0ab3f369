"""Durations as people write them: ``7d``, ``12h``, ``90m``, ``30s``, ``250ms``.

The one parser for every duration option: the lakehouse's retention settings (``lakecore init``
and ``lakecore settings set``) and the maintenance jobs' grace periods (``--older-than``). A
number without a unit is allowed only where the caller names the unit it means
(``plain_unit``): the jobs read plain numbers as seconds, as they always have; the retention
options have a ``...-millis`` twin for plain milliseconds, so ``--maximum-version-age`` insists
on a unit.
"""

from __future__ import annotations

import math
import re

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


__all__ = ["MAX_DURATION_MILLIS", "format_duration_millis", "parse_duration_millis"]
