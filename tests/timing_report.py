"""The test-time report printed after every run (a pytest plugin; tests/conftest.py loads it).

It keeps the suite fast by showing where its time goes, every run, CI's included:

- the 20 slowest tests (setup, call and teardown together: a session fixture's start is paid
  by the first test that asks for it);
- the total per marker (spark, s3, cluster, connect, engines, airflow, reliability; ``none``
  for tests without one), a test counted under each of its markers, and the xdist workers
  that ran them (a marker whose session servers should start once shows one worker);
- every test over ``BUDGET_SECONDS`` that ``tests/expensive_tests.txt`` does not list, with what
  to do about it: a new expensive test is said so, by name, not found months later;
- the same as JSON in ``build/test-times.json`` (``LAKECORE_TEST_TIMES`` names another file),
  which docs/testing.md's tables are made from.

Under pytest-xdist the controller receives every worker's reports, so the report covers the
whole run. Standard library only: the Airflow venv's pytest loads it too.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

BUDGET_SECONDS = 30.0
SLOWEST_SHOWN = 20
KINDS = ("spark", "s3", "cluster", "connect", "engines", "airflow", "reliability", "slow")
REPO = Path(__file__).resolve().parent.parent
EXPENSIVE_LIST = Path(__file__).resolve().parent / "expensive_tests.txt"


def _allowed_patterns() -> list[str]:
    """The node ids (``fnmatch`` patterns) allowed over the budget: one per line, then ``#`` and
    why it costs what it does."""
    if not EXPENSIVE_LIST.exists():
        return []
    patterns = []
    for line in EXPENSIVE_LIST.read_text().splitlines():
        pattern = line.split("#", 1)[0].strip()
        if pattern:
            patterns.append(pattern)
    return patterns


def without_group(nodeid: str) -> str:
    """The node id without the ``@group`` that ``--dist loadgroup`` appends (xdist's rule: an
    ``@`` after the last ``]``)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


class TimingReport:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.kinds: dict[str, tuple[str, ...]] = {}
        self.outcomes: dict[str, str] = {}
        self.workers: dict[str, str] = {}
        self.started = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = without_group(report.nodeid)
        self.seconds[nodeid] += report.duration
        keywords = getattr(report, "keywords", {}) or {}
        self.kinds[nodeid] = tuple(kind for kind in KINDS if kind in keywords)
        worker = getattr(report, "node", None)  # xdist's WorkerController, on the controller
        if worker is not None:
            self.workers[nodeid] = str(getattr(worker, "gateway", worker).id)
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[nodeid] = report.outcome

    def summary(self) -> dict[str, Any]:
        per_kind: dict[str, dict[str, float]] = defaultdict(lambda: {"tests": 0, "seconds": 0.0})
        workers_of: dict[str, set[str]] = defaultdict(set)
        for nodeid, seconds in self.seconds.items():
            for kind in self.kinds.get(nodeid) or ("none",):
                per_kind[kind]["tests"] += 1
                per_kind[kind]["seconds"] += seconds
                if nodeid in self.workers:
                    workers_of[kind].add(self.workers[nodeid])
        allowed = _allowed_patterns()
        over = [
            (nodeid, seconds)
            for nodeid, seconds in self.seconds.items()
            if seconds > BUDGET_SECONDS
            and not any(fnmatch.fnmatchcase(nodeid, pattern) for pattern in allowed)
        ]
        slowest = sorted(self.seconds.items(), key=lambda item: -item[1])[:SLOWEST_SHOWN]
        return {
            "wall_seconds": round(time.monotonic() - self.started, 1),
            "tests": len(self.seconds),
            "test_seconds": round(sum(self.seconds.values()), 1),
            "per_marker": {
                kind: {
                    "tests": int(v["tests"]),
                    "seconds": round(v["seconds"], 1),
                    "workers": sorted(workers_of[kind]),
                }
                for kind, v in sorted(per_kind.items())
            },
            "slowest": [{"test": n, "seconds": round(s, 1)} for n, s in slowest],
            "over_budget_unlisted": [{"test": n, "seconds": round(s, 1)} for n, s in over],
            "budget_seconds": BUDGET_SECONDS,
            "times": {n: round(s, 3) for n, s in sorted(self.seconds.items())},
        }

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.seconds:
            return
        data = self.summary()
        write = terminalreporter.write_line
        terminalreporter.section("test time report")
        write(
            f"{data['tests']} tests, {data['test_seconds']:.0f} s of test time "
            f"in {data['wall_seconds']:.0f} s of wall time"
        )
        write(f"the {len(data['slowest'])} slowest (setup + call + teardown):")
        for entry in data["slowest"]:
            write(f"  {entry['seconds']:7.1f} s  {entry['test']}")
        write("per marker (a test counts under each of its markers):")
        for kind, totals in data["per_marker"].items():
            where = f"  on {', '.join(totals['workers'])}" if totals["workers"] else ""
            write(f"  {kind:12s} {totals['tests']:5d} tests {totals['seconds']:8.1f} s{where}")
        for entry in data["over_budget_unlisted"]:
            write(
                f"OVER BUDGET: {entry['test']} took {entry['seconds']:.1f} s (budget "
                f"{BUDGET_SECONDS:.0f} s): make it cheaper, mark it slow, or list it in "
                "tests/expensive_tests.txt with the reason"
            )
        target = Path(os.environ.get("LAKECORE_TEST_TIMES") or REPO / "build" / "test-times.json")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(data, indent=1, sort_keys=True))
            write(f"(as JSON: {target})")
        except OSError as exc:
            write(f"(could not write {target}: {exc.strerror or exc})")


def pytest_configure(config: pytest.Config) -> None:
    # One report per run: on the controller, not in each xdist worker.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(TimingReport(), "lakecore-timing-report")
