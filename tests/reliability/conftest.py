"""Fixtures of the reliability suites: the job tests' SparkSession. (Their marker,
``reliability``, is registered with the others in pyproject.toml.)"""

from __future__ import annotations

from tests.jobs.conftest import run_job, spark

__all__ = ["run_job", "spark"]
