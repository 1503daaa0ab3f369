"""The maintenance jobs' ``--now`` against this machine's clock.

A ``--now`` is how a scheduler makes a retry decide the same (Airflow's ``data_interval_end``)
and how a test ages a lakehouse. In the past it only makes a job do less than it could. In the
future it makes the job act on files and versions younger than its settings allow: gc's grace
period shrinks by as much, and compaction expires versions before their age. So a ``--now``
more than ``CLOCK_SKEW_TOLERANCE_MILLIS`` ahead of the clock is refused unless the operator
says they mean it (a mistyped year is the usual cause)."""

from __future__ import annotations

from typing import Final

from lakecore.humanize import format_seconds, format_time_millis

# How far --now may run ahead of this machine's clock: clocks of a scheduler and a cluster differ.
CLOCK_SKEW_TOLERANCE_MILLIS: Final = 5 * 60 * 1000


def ahead_of_clock(now_millis: int, wall_clock_millis: int) -> str | None:
    """"--now T is D ahead of this machine's clock" when it is beyond the tolerance, else None."""
    if now_millis <= wall_clock_millis + CLOCK_SKEW_TOLERANCE_MILLIS:
        return None
    return (f"--now {format_time_millis(now_millis)} is "
            f"{format_seconds((now_millis - wall_clock_millis) / 1000)} ahead of this machine's clock")


__all__ = ["CLOCK_SKEW_TOLERANCE_MILLIS", "ahead_of_clock"]
