"""The allowed-failure list stays short: at most 11 entries per backend (issue 38), each with
its reason."""

from __future__ import annotations

from tests.iceberg.behaviours.backends import BACKENDS
from tests.iceberg.behaviours.conftest import allowed_failures

MAX_ENTRIES = 11


def test_the_allowed_failures_are_few_and_explained() -> None:
    allowed = allowed_failures()
    assert set(allowed) <= set(BACKENDS), (
        f"entries for unknown backends: {set(allowed) - set(BACKENDS)}"
    )
    for backend, entries in allowed.items():
        assert len(entries) <= MAX_ENTRIES, f"{backend}: {len(entries)} allowed failures"
        assert all(reason.strip() for reason in entries.values())
