"""validate's report: a validation's result into the JSON report and the summary, and the
pages beside it.

``render_validate`` is the only place validate's report keys are written. The pages show the
report as rendered: the validation's own page beside ``--report`` (``REPORT.html``: the
summary, the expectations, the violations listed) and, with ``--html``, the lakehouse health
page with this validation on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecore.contract.job_report import JobReport
from lakecore.contract.outputs import OutputKind, write_text_atomically
from lakecore.core.units import plural
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.damage import next_step
from lakecore.maintenance.tree_check import DAMAGE_RULES, UNREADABLE_ROOT
from lakecore.maintenance.validate_run import ValidateResult


@dataclass(frozen=True)
class ValidateOptions:
    """What a validation is asked to check and to write besides its report."""

    version: int | None  # --version; None: the latest (or every retained one)
    all_retained: bool
    deep: bool  # the catalog checks too
    expectations: bool  # the great-expectations suite (the settings may turn it off)
    full_list_dataset: str | None  # --full-list: every violation to this Parquet dataset
    report_page: str | None  # the validation's own page, beside --report
    health_page: str | None  # --html: the lakehouse health page
    reports_dir: str | None  # where the other jobs' reports are, for the health page
    # The lakehouse, for the health page (it describes the lakehouse and its history).
    lakehouse: str
    storage_options: dict[str, Any]


@dataclass
class ValidateJobResult(ValidateResult):
    """A validation's result, with the options that say which pages to write beside it."""

    options: ValidateOptions | None = None


def render_validate(result: ValidateJobResult, report: JobReport) -> None:
    """``result`` into ``report`` (the only place validate's report keys are written), and the
    pages the options ask for: the validation's own beside the report and the health page,
    which show the report as rendered."""
    report.base_version = result.latest
    report.details["deep"] = result.deep
    report.details["expectations_enabled"] = result.expectations_enabled
    if result.subtree_tasks is not None:
        report.counts["subtree_tasks"] = result.subtree_tasks
    if result.violations_dataset is not None:
        report.details["violations_dataset"] = result.violations_dataset
    found = result.violations
    if found is None:
        return
    checked, expectations = result.versions, result.expectations
    report.counts["versions_checked"] = len(checked)
    report.counts["nodes_checked"] = sum(r.report.nodes_checked for r in checked)
    report.counts["keys"] = sum(r.report.keys_seen for r in checked)
    report.counts["messages"] = sum(r.report.messages_seen for r in checked)
    report.counts["violations"] = found.total
    report.bytes["node_bytes_checked"] = sum(r.report.bytes_checked for r in checked)
    rules = dict(sorted(found.by_rule.items()))
    listed = [{"version": version, **v.as_dict()} for version, v in found.listed]
    report.details["violations"] = listed
    report.details["violations_by_rule"] = rules
    report.details["violations_truncated"] = found.total > len(listed)
    report.details["versions"] = [
        {
            "version": r.version,
            "ok": r.ok,
            "nodes": r.report.nodes_checked,
            "keys": r.report.keys_seen,
            "messages": r.report.messages_seen,
            "bytes": r.report.bytes_checked,
            "violations": r.violation_count,
            "subtree_tasks": r.subtree_tasks,
            "catalog_checked": r.catalog_checked,
            "catalog_keys": r.catalog_keys,
        }
        for r in checked
    ]
    if result.cut_fallbacks:
        report.details["cut_fallbacks"] = result.cut_fallbacks
    if result.skipped:
        report.details["skipped"] = result.skipped
    report.details["expectations"] = expectations
    expectations_failed = expectations is not None and not expectations["success"]
    bad_versions = result.bad_versions
    report.summary.append(
        f"checked {plural(len(checked), 'version')}, {plural(report.counts['nodes_checked'], 'node')}, "
        f"{plural(report.counts['keys'], 'key')}: "
        + (
            "clean"
            if not bad_versions
            else f"{plural(found.total, 'violation')} in {plural(len(bad_versions), 'version')}"
        )
    )
    if expectations is not None:
        failed = [e["name"] for e in expectations["expectations"] if not e["success"]]
        report.summary.append(
            f"expectations: {expectations['successful']}/{expectations['evaluated']} succeeded"
            + (f"; failed: {', '.join(failed)}" if failed else "")
        )
    # --deep reads the catalog only where the tree is clean (as fsck does): say so where it did not.
    not_deep = [r.version for r in checked if report.details["deep"] and not r.catalog_checked]
    catalog_skipped = (
        (
            f"catalog checks (--deep) skipped for {plural(len(not_deep), 'version')} whose tree has "
            "violations; run --deep again once the tree is mended"
        )
        if not_deep
        else None
    )
    if catalog_skipped:
        report.summary.append(catalog_skipped)
    for version, v in found.listed[:10]:
        report.summary.append(f"v{version} {v}")
    if bad_versions or expectations_failed:
        report.status = "failed"
        report.exit_code = ExitCode.VIOLATIONS
        problems = []
        if bad_versions:
            problems.append(
                f"{plural(found.total, 'violation')} in {plural(len(bad_versions), 'version')} "
                f"({', '.join(f'{rule} {n}' for rule, n in sorted(rules.items()))})"
            )
        if expectations_failed and expectations is not None:
            failed_names = [e["name"] for e in expectations["expectations"] if not e["success"]]
            problems.append(f"expectations failed: {', '.join(failed_names)}")
        if catalog_skipped:
            problems.append(
                f"catalog checks skipped for {plural(len(not_deep), 'version')} (the tree first)"
            )
        damage_rules = {r.version: DAMAGE_RULES & set(r.violations_by_rule()) for r in checked}
        damaged = [version for version, rules_broken in damage_rules.items() if rules_broken]
        if damaged:
            # The one line a scheduler shows must say what to do about damage, as the other jobs'
            # do; what that is depends on whether the latest version is among the damaged.
            latest = report.base_version if report.base_version is not None else max(damaged)
            problems.append(
                next_step(
                    report.lakehouse,
                    damaged,
                    latest,
                    roots_damaged=all(UNREADABLE_ROOT in damage_rules[v] for v in damaged),
                )
            )
        report.error = "; ".join(problems)
    report.details["html_report"] = None
    options = result.options
    if options is not None and options.report_page is not None:
        from jobs.expectations import render_html
        from lakecore.core.units import format_bytes

        catalog_runs = sum(1 for r in checked if r.catalog_checked)
        summary = {
            "lakehouse": report.lakehouse,
            "status": report.status,
            "latest version": report.base_version,
            "versions checked": ", ".join(str(r.version) for r in checked),
            "deep": report.details["deep"],
            "catalog checks": (
                f"run on {catalog_runs} of {len(checked)} versions"
                if report.details["deep"]
                else "not requested (--deep)"
            )
            + (
                " (skipped where the tree has violations)"
                if report.details["deep"] and catalog_runs < len(checked)
                else ""
            ),
            **{k.replace("_", " "): v for k, v in sorted(report.counts.items())},
            "node bytes checked": f"{report.bytes['node_bytes_checked']} ({format_bytes(report.bytes['node_bytes_checked'])})",
        }
        page = render_html(
            f"lakecore validate: {report.lakehouse}",
            summary,
            expectations,
            listed,
            status=report.status,
            error=report.error,
            versions=report.details["versions"],
            violations_total=found.total,
        )
        report.details["html_report"] = write_text_atomically(
            options.report_page, page, OutputKind.HTML_PAGE
        )
    if options is not None and options.health_page is not None:
        report.details["health_page"] = _health_page(options, report)
        report.summary.append(f"health page: {report.details['health_page']}")


def _health_page(options: ValidateOptions, report: JobReport) -> str:
    """``--html PATH``: the lakehouse health page with this validation's result on it; returns
    where it was written."""
    from lakecore.lakehouse.describe import describe
    from lakecore.lakehouse.history import history
    from lakecore.lakehouse.report.health import render_health_page

    assert options.health_page is not None
    lh = Lakehouse.open(options.lakehouse, storage_options=options.storage_options)
    entries = history(lh.storage)
    data = describe(
        lh, entries, damaged_tree_ok=True
    )  # a damaged lakehouse is when the page is needed
    page = render_health_page(
        data, entries, validation=report.as_dict(), reports_dir=options.reports_dir
    )
    return write_text_atomically(options.health_page, page, OutputKind.HTML_PAGE)
