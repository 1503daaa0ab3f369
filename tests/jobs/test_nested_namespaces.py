"""The maintenance jobs on a lakehouse with nested namespaces (issue 38): validate --deep finds
nothing wrong, flush keeps every namespace and its children, and a full export's copy lists the
same children. One small lakehouse, the shared Spark session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.export_job import main as export_main
from jobs.flush_job import main as flush_main
from jobs.validate_job import main as validate_main
from lakecore.lakehouse import Lakehouse

pytestmark = pytest.mark.spark

NESTED = ("sales.eu.de", "sales.eu.fr", "sales.us", "ops", "ops.audit.daily")


def _children(lh: Lakehouse) -> dict[str, list[str]]:
    return {ns: lh.child_namespaces(ns) for ns in ("sales", "sales.eu", "ops", "ops.audit")}


def test_the_jobs_keep_nested_namespaces(
    tmp_path: Path, run_job: Callable[..., tuple[int, dict[str, Any]]]
) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"), order=4)
    for ns in NESTED:
        with lh.transaction() as tx:
            tx.create_namespace(ns, parents=True)
    for i in range(12):
        with lh.transaction() as tx:
            tx.create_table(NESTED[i % len(NESTED)], f"t{i:02d}")
    expected = _children(lh)
    assert expected["sales.eu"] == ["sales.eu.de", "sales.eu.fr"]

    code, report = run_job(validate_main, "--lakehouse", lh.uri, "--deep")
    assert code == 0, report
    code, report = run_job(flush_main, "--lakehouse", lh.uri, "--mode", "full")
    assert code == 0, report
    flushed = Lakehouse.open(lh.uri)
    assert _children(flushed) == expected
    assert flushed.list_tables("sales.eu.de") == ["t00", "t05", "t10"]

    target = tmp_path / "copy"
    code, report = run_job(
        export_main,
        "--lakehouse",
        lh.uri,
        "--name",
        "nested",
        "--mode",
        "full",
        "--target",
        str(target),
    )
    assert code == 0, report
    copy = Lakehouse.open(str(target))
    assert _children(copy) == expected
    assert copy.child_namespaces() == ["ops", "sales"]
