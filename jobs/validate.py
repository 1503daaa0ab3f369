"""validate: check versions of a lakehouse against the format, with executors checking subtrees.

    ./spark-submit.sh validate --lakehouse URI [--version V | --all-retained] [--deep]
                               [--no-expectations] [--full-list --report FILE]

Checks the latest version by default, ``--version V`` one version, ``--all-retained`` every
retained version (the unbroken run of root files that ends at the latest). The same rules as
``lakecore fsck`` (``lakecore.maintenance.check.TreeChecker``), computed in pieces
(``lakecore.maintenance.validate``):

    plan        (driver) cut each version's tree, check its top, resolve the top's keys
    check       (executors) one task per distinct subtree of all the versions: the invariant
                checker, with --deep the catalog checks of the keys resolving in the subtree,
                and the node rows for the expectation suite
    combine     (driver) leaf depths across subtrees, nodes met twice, every table's namespace;
                the subtrees' violations as counts, and the first few in one query
    expectations  the great-expectations suite (``lakecore.maintenance.expectations``) over a
                DataFrame of every node row, unless --no-expectations or the environment's
                ``validate_ge_enabled`` is false

A missing, unreadable or corrupt node file (the root included) is a violation, not a failure;
a store that cannot be read (credentials, network, timeouts: ``StorageError``, on the driver or
an executor) is a failure, exit 4, with no violations.
Exit 0 when everything is clean, 1 (status ``failed``, with a one-line error) when a version has
violations or an expectation fails. The JSON report lists the versions, the counts (violations
by rule too), the first violations (``VIOLATIONS_LIMIT``, ordered by version, newest first, then
location) and the expectation results; an HTML report is written next to it (same name,
``.html``). With --full-list, every violation goes to a Parquet dataset beside the report
(REPORT.violations.parquet: version, scope, rule, location, detail). The subtree tasks keep
their violations as rows; the driver gets their counts, and the first few in one query.
"""

from __future__ import annotations

if __package__ in (
    None,
    "",
):  # run as a file (spark-submit jobs/validate.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("validate")

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from jobs.arguments import add_full_list_option, base_parser, full_list_dataset, report_page
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.frames import Columns, driver_rows, fan_out_columns
from jobs.run import run_untyped_job
from lakecore.cli.argparsing import ArgumentError, output_file, whole_number
from lakecore.cli.outputs import (
    Output,
    OutputKind,
    refuse_foreign_target,
    write_text_atomically,
)
from lakecore.errors import (
    ExitCode,
    LakecoreError,
    NotFoundError,
    StorageError,
    VersionExpiredError,
)
from lakecore.lakehouse import Lakehouse
from lakecore.locations import root_node_file_name
from lakecore.maintenance.check import (
    DAMAGE_RULES,
    UNREADABLE_ROOT,
    CheckReport,
    Violation,
    add_counts,
)
from lakecore.maintenance.damage import next_step
from lakecore.maintenance.validate import (
    CATALOG_SCOPE,
    ROW_COLUMNS,
    SECTION_KEY_TABLE,
    TREE_SCOPE,
    KeySpan,
    SubtreeResult,
    SubtreeWork,
    UniqueCandidates,
    VersionPlan,
    VersionResult,
    combine_version,
    fresh_store,
    merge_work,
    node_rows,
    plan_version,
    run_subtree_works,
    unique_key_candidates,
)
from lakecore.storage import Storage
from lakecore.tree import NodeStore
from lakecore.units import plural
from lakecore.versions import latest_version, list_root_versions
from lakecore.view import external_roots_of

VIOLATIONS_LIMIT = 200
# Node rows per partition of the suite's input at least (see ``_rows_dataframe``).
ROWS_PER_SUITE_PARTITION = 250_000


def _parser() -> Any:
    parser = base_parser("validate", __doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--version",
        type=whole_number(0),
        default=None,
        help="check this version (default: the latest)",
    )
    which.add_argument("--all-retained", action="store_true", help="check every retained version")
    parser.add_argument(
        "--deep",
        action="store_true",
        help="also check the catalog: keys parse, definitions exist, decode and match, "
        "every table's namespace exists",
    )
    parser.add_argument(
        "--no-expectations",
        action="store_true",
        help="skip the great-expectations suite over the node rows",
    )
    add_full_list_option(parser, "violation", VIOLATIONS_DATASET)
    parser.add_argument(
        "--html",
        metavar="PATH",
        type=output_file,
        help="also write the lakehouse health page here (one self-contained HTML file with "
        "this result; needs the [report] extra)",
    )
    parser.add_argument(
        "--reports-dir",
        metavar="DIR",
        help="where the other jobs' JSON reports are, for gc's last orphan count on the "
        "health page (default: the folder of --report)",
    )
    parser.add_check(_pages_apart)
    parser.set_defaults(writes_report_page=True)  # beside --report: job_outputs checks it
    return parser


def _pages_apart(args: Any) -> str | None:
    """The validation's own page goes beside --report (REPORT with .html): --html must not be
    that file, or the health page would silently replace it."""
    if (
        args.html
        and args.report
        and Path(args.html).resolve() == Path(report_page(args.report)).resolve()
    ):
        return (
            f"--html {args.html} is where the validation's own page goes (beside --report {args.report}); "
            "give the health page another name"
        )
    return None


def _versions_to_check(storage: Storage, args: Any) -> tuple[int, list[int]]:
    latest = latest_version(storage)
    if args.version is not None:
        if args.version < 0:
            raise ArgumentError(f"--version {args.version} must be >= 0")
        if args.version > latest:
            raise NotFoundError(
                f"version {args.version} does not exist yet; the latest is {latest}"
            )
        return latest, [args.version]
    if not args.all_retained:
        return latest, [latest]
    present = set(list_root_versions(storage))
    present.add(latest)
    versions = [latest]
    while versions[-1] - 1 in present:
        versions.append(versions[-1] - 1)
    return latest, versions


def _unreadable_root(version: int, exc: LakecoreError) -> VersionResult:
    report = CheckReport()
    # fsck's rule name for the same file: one damaged root, one word, whichever tool found it.
    report.violations.append(
        Violation(root_node_file_name(version), UNREADABLE_ROOT, " ".join(str(exc).split()))
    )
    return VersionResult(version, report)


# What the check tasks emit: per subtree one result row (the pickled ``SubtreeResult`` without
# its rows), and, for the expectation suite, one row per node row (``payload`` null). Only the
# columns the suite reads travel: a node's path, depth and row index would be a third of the
# bytes Arrow converts and the cache holds (the path alone 70 bytes a row), read by no
# expectation.
SUITE_ROW_COLUMNS: Final = ("section", "key", "pvalue", "pnode")
_SUITE_ROW_INDEXES: Final = tuple(ROW_COLUMNS.index(name) for name in SUITE_ROW_COLUMNS)
NODE_ROWS = Columns((("version", "bigint"), *((name, "string") for name in SUITE_ROW_COLUMNS)))
# ... and one row per violation and version it holds for (``SubtreeResult.violation_entries``):
# the full list stays with the executors, and the driver gets each subtree's counts by rule. A
# violation row reuses the node-row columns rather than adding four that every node row would
# carry as nulls (70 ms more per 200k node rows on local[1]): its section names the kind of row
# (``VIOLATION_SECTIONS``, by the scope of its rule), its key the rule, pvalue the location and
# pnode the detail. ``_executor_violations`` gives them their own names (``VIOLATIONS``).
VIOLATION_SECTIONS: Final = {TREE_SCOPE: "tree-violation", CATALOG_SCOPE: "catalog-violation"}
VIOLATIONS = Columns(
    (
        ("version", "bigint"),
        ("scope", "string"),
        ("rule", "string"),
        ("location", "string"),
        ("detail", "string"),
    )
)
CHECKED = Columns((("payload", "binary"), *NODE_ROWS.fields))
# --full-list's dataset: REPORT.violations.parquet.
VIOLATIONS_DATASET: Final = "violations"


def _suite_columns(rows: Sequence[Any]) -> list[Any]:
    """The suite's columns (``SUITE_ROW_COLUMNS``) of a row or of ``NodeRows.columns()``."""
    return [rows[index] for index in _SUITE_ROW_INDEXES]


def _run_subtrees(ctx: JobContext, works: list[SubtreeWork]) -> tuple[list[SubtreeResult], Any]:
    """Run the subtree checks in one pass; returns the results (without rows) and the persisted
    DataFrame that also holds every node row (None without subtrees)."""
    if not works:
        return [], None
    import pickle

    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    storage = ctx.storage

    def check(items: list[SubtreeWork]) -> Any:
        for result in run_subtree_works(storage, items):
            payload = pickle.dumps(
                result.without_rows().counted_only(), protocol=pickle.HIGHEST_PROTOCOL
            )
            yield ([payload], *(None for _ in NODE_ROWS.fields))
            entries = list(result.violation_entries())
            if entries:  # section, key, pvalue, pnode: see VIOLATION_SECTIONS
                yield (
                    None,
                    [version for version, _, _ in entries],
                    [VIOLATION_SECTIONS[scope] for _, scope, _ in entries],
                    [v.rule for _, _, v in entries],
                    [v.location for _, _, v in entries],
                    [v.detail for _, _, v in entries],
                )
            rows = _suite_columns(result.rows.columns())
            for version in result.versions:
                yield (None, [version] * len(result.rows), *rows)

    checked = fan_out_columns(ctx.spark, works, check, CHECKED, ctx.parallelism).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    results = [
        pickle.loads(row[0])
        for row in checked.where(F.col("payload").isNotNull()).select("payload").collect()
    ]
    return results, checked


def _executor_violations(checked: Any, catalog_checked: Sequence[int]) -> Any:
    """The violations the subtree tasks found, as rows (``VIOLATIONS``): the tree's, and the
    catalog's of the versions whose catalog was checked (a version's catalog violations count
    only when its whole tree is clean, which only the driver knows)."""
    from pyspark.sql import functions as F

    section = F.col("section")
    counted = section == VIOLATION_SECTIONS[TREE_SCOPE]
    if catalog_checked:
        counted = counted | (
            (section == VIOLATION_SECTIONS[CATALOG_SCOPE])
            & F.col("version").isin(list(catalog_checked))
        )
    scope = F.when(section == VIOLATION_SECTIONS[TREE_SCOPE], TREE_SCOPE).otherwise(CATALOG_SCOPE)
    return checked.where(F.col("payload").isNull() & counted).select(
        "version",
        scope.alias("scope"),
        F.col("key").alias("rule"),
        F.col("pvalue").alias("location"),
        F.col("pnode").alias("detail"),
    )


@dataclass
class Violations:
    """Every checked version's violations, as the report gives them: the total, the counts by
    rule, and the first ``VIOLATIONS_LIMIT`` in order (version, newest first; then location,
    rule and detail)."""

    total: int
    by_rule: dict[str, int]
    listed: list[tuple[int, Violation]]


def _violations(ctx: JobContext, checked_versions: list[VersionResult], checked: Any) -> Violations:
    """The listing from the driver's own violations (the top of each tree, the combine) and,
    only when the subtrees found any, a capped sample of theirs: one query that keeps the
    first few per partition (Spark's take-ordered), never the whole list."""
    from pyspark.sql import functions as F

    by_rule: dict[str, int] = {}
    for result in checked_versions:
        add_counts(by_rule, result.violations_by_rule())
    position = {result.version: i for i, result in enumerate(checked_versions)}
    found: list[tuple[int, Violation]] = [
        (r.version, v) for r in checked_versions for v in r.violations
    ]
    if checked is not None and any(result.unlisted for result in checked_versions):
        catalog_checked = [r.version for r in checked_versions if r.catalog_checked]
        sample = (
            _executor_violations(checked, catalog_checked)
            .orderBy(F.col("version").desc(), "location", "rule", "detail")
            .limit(VIOLATIONS_LIMIT)
            .collect()
        )
        found.extend(
            (int(row["version"]), Violation(row["location"], row["rule"], row["detail"]))
            for row in sample
        )
    found.sort(key=lambda item: (position[item[0]], item[1].location, item[1].rule, item[1].detail))
    return Violations(sum(by_rule.values()), by_rule, found[:VIOLATIONS_LIMIT])


def _write_full_list(ctx: JobContext, checked_versions: list[VersionResult], checked: Any) -> str:
    """--full-list: every violation, the driver's and the subtrees', to REPORT.violations.parquet
    (version, scope, rule, location, detail); written even when there are none, so that a
    dataset beside a report always belongs to it."""
    own = [
        (r.version, scope, v.rule, v.location, v.detail)
        for r in checked_versions
        for scope, listed in (
            (TREE_SCOPE, r.report.violations),
            (CATALOG_SCOPE, r.catalog_violations),
        )
        for v in listed
    ]
    frame = driver_rows(ctx.spark, own, VIOLATIONS)
    if checked is not None:
        frame = frame.unionByName(
            _executor_violations(
                checked, [r.version for r in checked_versions if r.catalog_checked]
            )
        )
    target = full_list_dataset(ctx.args.report, VIOLATIONS_DATASET)
    # Checked as the command line was read; again now, as overwrite deletes what is there.
    refuse_foreign_target(Output("--full-list", target, OutputKind.PARQUET_DATASET))
    frame.write.mode("overwrite").parquet(target)
    return target


def _rows_dataframe(
    ctx: JobContext, plans: list[VersionPlan], checked: Any, results: list[SubtreeResult]
) -> tuple[Any, int, UniqueCandidates | None]:
    """Every node row of the checked versions, how many there are, and where unique-keys can
    fail: the tops' rows from the driver, the subtrees' from the check's persisted DataFrame
    (counted, and their keys spanned, by the subtree tasks)."""
    from pyspark.sql import functions as F

    from jobs.expectations import UNIQUE_CANDIDATES_MAX

    top_rows: list[tuple[Any, ...]] = []
    spans = [(version, result.key_span) for result in results for version in result.versions]
    for plan in plans:
        seen: set[str] = set()
        for location, node, depth in plan.top_nodes:
            if location in seen:
                continue
            seen.add(location)
            for row in node_rows(node, location, depth, plan.shape.order):
                columns = _suite_columns(row)
                top_rows.append((plan.version, *columns))
                section, key = columns[0], columns[1]
                if section == SECTION_KEY_TABLE and key is not None:
                    # Each top key a span of its own: the tops' keys spread over every task's
                    # range, so one span of them all would overlap every task.
                    spans.append((plan.version, KeySpan(key, key)))
    rows = driver_rows(ctx.spark, top_rows, NODE_ROWS)
    if checked is not None:
        node_rows_only = F.col("payload").isNull() & ~F.col("section").isin(
            list(VIOLATION_SECTIONS.values())
        )
        rows = rows.unionByName(checked.where(node_rows_only).select(*NODE_ROWS.names))
    row_count = len(top_rows) + sum(r.row_count * len(r.versions) for r in results)
    # The suite runs about 8 queries over these rows, each a task per partition: a small
    # lakehouse's rows in the check's 10 partitions cost more in tasks than in rows (a demo's
    # suite 4.4 s, 3.4 s in 2 partitions). Never fewer partitions than cores.
    partitions = max(ctx.default_parallelism, -(-row_count // ROWS_PER_SUITE_PARTITION))
    return rows.coalesce(partitions), row_count, unique_key_candidates(spans, UNIQUE_CANDIDATES_MAX)


def _body(ctx: JobContext) -> None:
    args = ctx.args
    report = ctx.report
    expectations_on = ctx.settings.validate_ge_enabled and not args.no_expectations
    storage = ctx.storage
    latest, versions = _versions_to_check(storage, args)
    if expectations_on:
        from jobs.expectations import start_importing_great_expectations

        start_importing_great_expectations()  # meanwhile the session starts and the trees are checked
    report.base_version = latest
    report.details["deep"] = bool(args.deep)
    report.details["expectations_enabled"] = expectations_on

    finished: dict[int, VersionResult] = {}
    plans: list[VersionPlan] = []
    skipped: list[str] = []
    stores: dict[tuple[str, ...], NodeStore] = {}
    target = ctx.parallelism
    with ctx.stage(
        "plan", f"plan {plural(len(versions), 'version')} and check the top of each tree (driver)"
    ):
        for version in versions:
            try:
                lh = Lakehouse.open(
                    storage.root_uri, storage_options=storage.storage_options, version=version
                )
            except VersionExpiredError as exc:
                if args.all_retained:  # expired while the job ran: no longer retained
                    skipped.append(f"version {version}: {' '.join(str(exc).split())}")
                    continue
                raise
            except StorageError:
                raise  # the store failed, not the lakehouse: no verdict
            except LakecoreError as exc:
                # A corrupt root, a root naming a missing or broken lakehouse definition, ...
                finished[version] = _unreadable_root(version, exc)
                continue
            external = external_roots_of(lh.lakehouse_def)
            if external not in stores:  # one cache for the job: versions share their top nodes
                stores[external] = fresh_store(storage, lh.lakehouse_def.order, external)
            store = stores[external]
            plans.append(
                plan_version(
                    storage,
                    version,
                    lh.root,
                    lh.root_info.path,
                    lh.root_info.size,
                    lh.lakehouse_def,
                    store,
                    target,
                    deep=args.deep,
                )
            )
    works = merge_work(plans, deep=args.deep, rows=expectations_on)
    report.counts["subtree_tasks"] = len(works)
    checked = None
    # An executor that cannot read the store (no credentials, no route) fails the job with that
    # StorageError (exit 4, retried), never with violations: it judged no file.
    try:
        with (
            ctx.stage(
                "check",
                f"check {plural(len(works), 'subtree')} of {plural(len(plans), 'version')}"
                f"{' with catalog checks' if args.deep else ''}",
            ),
            executor_errors(),
        ):
            results, checked = _run_subtrees(ctx, works)
        # The queries below read the check's cached rows; a lost cache block is computed again.
        with (
            ctx.stage("combine", "combine the subtree results per version (driver)"),
            executor_errors(),
        ):
            by_version: dict[int, list[SubtreeResult]] = {}
            for result in results:
                for version in result.versions:
                    by_version.setdefault(version, []).append(result)
            for plan in plans:
                finished[plan.version] = combine_version(
                    plan, by_version.get(plan.version, []), deep=args.deep
                )
            checked_versions = [finished[v] for v in versions if v in finished]
            violations = _violations(ctx, checked_versions, checked)
        if args.full_list:
            with (
                ctx.stage("full-list", "write every violation beside the report"),
                executor_errors(),
            ):
                report.details["violations_dataset"] = _write_full_list(
                    ctx, checked_versions, checked
                )
        expectations: dict[str, Any] | None = None
        if expectations_on and plans:
            from jobs.expectations import run_expectations

            lakehouse_def = plans[0].lakehouse_def
            with (
                ctx.stage("expectations", "great-expectations suite over every node row"),
                executor_errors(),
            ):
                rows, row_count, unique_candidates = _rows_dataframe(ctx, plans, checked, results)
                expectations = run_expectations(
                    rows,
                    row_count=row_count,
                    namespace_name_max_bytes=lakehouse_def.namespace_name_max_size_bytes,
                    table_name_max_bytes=lakehouse_def.table_name_max_size_bytes,
                    unique_candidates=unique_candidates,
                )
    finally:
        if checked is not None:
            checked.unpersist()
    _report(ctx, checked_versions, violations, plans, expectations, skipped)


def _report(
    ctx: JobContext,
    checked: list[VersionResult],
    found: Violations,
    plans: list[VersionPlan],
    expectations: dict[str, Any] | None,
    skipped: list[str],
) -> None:
    report = ctx.report
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
    fallbacks = {p.version: p.cut_fallback for p in plans if p.cut_fallback}
    if fallbacks:
        report.details["cut_fallbacks"] = fallbacks
    if skipped:
        report.details["skipped"] = skipped
    report.details["expectations"] = expectations
    expectations_failed = expectations is not None and not expectations["success"]
    bad_versions = [r.version for r in checked if not r.ok]
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
                    ctx.storage.root_uri,
                    damaged,
                    latest,
                    roots_damaged=all(UNREADABLE_ROOT in damage_rules[v] for v in damaged),
                )
            )
        report.error = "; ".join(problems)
    report.details["html_report"] = None
    if ctx.args.report:
        from jobs.expectations import render_html
        from lakecore.units import format_bytes

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
            report_page(ctx.args.report), page, OutputKind.HTML_PAGE
        )
    if getattr(ctx.args, "html", None):
        _health_page(ctx)


def _health_page(ctx: JobContext) -> None:
    """``--html PATH``: the lakehouse health page with this validation's result on it."""
    from lakecore.lakehouse.describe import describe
    from lakecore.lakehouse.history import history
    from lakecore.lakehouse.report.health import render_health_page

    report = ctx.report
    lh = Lakehouse.open(ctx.storage.root_uri, storage_options=ctx.storage.storage_options)
    entries = history(ctx.storage)
    data = describe(
        lh, entries, damaged_tree_ok=True
    )  # a damaged lakehouse is when the page is needed
    reports_dir = ctx.args.reports_dir or (
        str(Path(ctx.args.report).parent) if ctx.args.report else None
    )
    page = render_health_page(data, entries, validation=report.as_dict(), reports_dir=reports_dir)
    report.details["health_page"] = write_text_atomically(ctx.args.html, page, OutputKind.HTML_PAGE)
    report.summary.append(f"health page: {report.details['health_page']}")


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_untyped_job("validate", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
