"""The HTML pages as a person sees them: the validate report, the health page (from the validate
job and from ``lakecore describe --html``) and the tree page, rendered in headless Chromium.

One lakehouse with a real history (creates, updates, an export, a rollback, a flush's deeper
tree) and one real violation (a deleted leaf node). The validate job writes its report and the
health page; the browser loads each page from disk, and the test checks that nothing is
requested besides the file itself and nothing is logged as an error. Screenshots are saved
under ``build/screenshots/`` for a person to look at. Without a browser (no chromium where apt
is missing) only the browser part is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs import validate_job
from lakecore.cli import main as cli
from lakecore.contract.job_report import JobReport, write_report
from lakecore.lakehouse import Lakehouse
from tests.browser import find_browser, render

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "screenshots"


def _lake(path: Path) -> Lakehouse:
    lh = Lakehouse.create(str(path), name="pages", order=4, node_file_max_size_bytes=4096)
    with lh.transaction() as tx:
        for ns in ("raw", "sales", "ops"):
            tx.create_namespace(ns, properties={"owner": f"team-{ns}"})
    for i in range(12):
        with lh.transaction() as tx:
            for ns in ("raw", "sales", "ops"):
                tx.create_table(
                    ns,
                    f"t{i:02d}",
                    columns=[{"id": 1, "name": "x", "type": "INT8", "nullable": True}],
                )
    with lh.transaction() as tx:
        tx.update_table(
            "raw",
            "t00",
            properties={"tier": "gold"},
            format_properties={"metadata_location": "m2.json"},
            checked_by_catalog=True,  # as the Iceberg catalog sets it
        )
    lh.export_snapshot("nightly")
    before = lh.version
    with lh.transaction() as tx:
        tx.drop_table("ops", "t11")
    lh.rollback(to_version=before)
    return lh


def _delete_a_leaf(lh: Lakehouse) -> str:
    node = lh.root
    while True:
        child = lh.store.load(node.children[-1])
        if not child.children:
            path = node.children[-1]
            (Path(lh.uri.removeprefix("file://")) / path).unlink()
            return path
        node = child


def _no_network(result: Any, page: Path) -> None:
    outside = [u for u in result.requests if u != page.as_uri() and not u.startswith("data:")]
    assert outside == [], f"{page.name} requested {outside}"
    assert result.console_errors == [], f"{page.name} logged {result.console_errors}"


def test_validate_report_health_and_tree_pages_in_a_browser(tmp_path: Path, spark: Any) -> None:
    lh = _lake(tmp_path / "lake")
    reports = tmp_path / "reports"
    # gc's last report as gc writes it (running gc here would add half a minute of listing).
    gc_report = JobReport(
        "gc",
        lh.uri,
        status="noop",
        base_version=lh.version,
        dry_run=True,
        counts={"orphans_found": 3, "orphans_to_delete": 2, "orphans_deleted": 0},
        bytes={"orphan_bytes_to_delete": 8192},
    )
    write_report(gc_report, str(reports / "gc.json"))
    tables_report = JobReport(
        "table-maintenance",
        lh.uri,
        counts={"iceberg_tables": 4, "snapshots_expired": 9, "files_deleted": 17},
        bytes={"freed_bytes": 65536},
    )
    write_report(tables_report, str(reports / "table-maintenance.json"))
    missing = _delete_a_leaf(lh)
    health = reports / "health.html"
    code = validate_job.main(
        [
            "--lakehouse",
            lh.uri,
            "--deep",
            "--report",
            str(reports / "validate.json"),
            "--html",
            str(health),
        ],
        spark=spark,
    )
    assert code == 1
    data = json.loads((reports / "validate.json").read_text())
    assert data["counts"]["violations"] >= 1 and data["details"]["health_page"] == str(health)
    report_page = Path(data["details"]["html_report"])
    text = report_page.read_text()
    # Status first, then the violations, then the failed expectations, then the rest.
    assert (
        text.index("banner failed")
        < text.index("Violations (")
        < text.index("Expectations that passed")
    )
    assert missing.rsplit("/", 1)[-1] in text
    assert "no (the tree has violations)" in text  # catalog_checked false, said as the JSON says it
    page = health.read_text()
    assert (
        "<svg" in page
        and "https://" not in page
        and "http://" not in page.replace("http://www.w3.org/", "")
    )
    assert "validation failed" in page and "gc (last report)" in page
    assert "table-maintenance (last report)" in page and "64.00 KiB" in page

    # The CLI's health page (no validation result of its own: it finds validate's report) and the tree page.
    described = tmp_path / "describe.html"
    tree = tmp_path / "tree.html"
    assert (
        cli(["-l", lh.uri, "describe", "--html", str(described), "--reports-dir", str(reports)])
        == 0
    )
    assert cli(["-l", lh.uri, "tree", "--version", str(lh.version - 3), "--html", str(tree)]) == 0

    browser = find_browser()
    if browser is None:
        pytest.skip("no chromium here (make test installs it where apt is available)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for page_path, name in (
        (report_page, "validate-report"),
        (health, "health-from-validate"),
        (described, "health-from-describe"),
        (tree, "tree"),
    ):
        result = render(browser, page_path.as_uri(), SCREENSHOTS / f"{name}.png")
        _no_network(result, page_path)
        assert result.title.startswith("lakecore"), result.title
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000
