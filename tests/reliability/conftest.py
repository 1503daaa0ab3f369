"""Fixtures of the reliability suites: the job tests' SparkSession, and the marker."""

from __future__ import annotations

import pytest

from tests.jobs.conftest import run_job, spark

__all__ = ["run_job", "spark"]


def pytest_configure(config: pytest.Config) -> None:
    # Also requested in pyproject.toml; registered here so that the folder runs warning-free.
    config.addinivalue_line(
        "markers", "reliability: fault injection, kills, soak and hostile-input suites"
    )
