"""Capped samples: the few paths a report lists of a set it only counts.

A maintenance run counts what it found (orphans, files to delete, errors) and lists the first
``SAMPLE_LIMIT`` of each, in path order, so that a report stays small whatever the lakehouse's
size: the full sets stay with the executors (or, in one process, with the caller).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

SAMPLE_LIMIT: Final = 50


def capped(paths: Iterable[str]) -> list[str]:
    """The first ``SAMPLE_LIMIT`` of ``paths`` in order."""
    return sorted(paths)[:SAMPLE_LIMIT]


__all__ = ["SAMPLE_LIMIT", "capped"]
