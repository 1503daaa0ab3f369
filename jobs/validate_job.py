"""validate: check versions of a lakehouse against the format, with executors checking subtrees.

    ./spark-submit.sh validate --lakehouse URI [--version V | --all-retained] [--deep]
                               [--no-expectations] [--full-list --report FILE]

Checks the latest version by default, ``--version V`` one version, ``--all-retained`` every
retained version (the unbroken run of root files that ends at the latest). The same rules as
``lakecore fsck`` (``lakecore.maintenance.tree_check.TreeChecker``), computed in pieces
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

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from jobs.command_line import (
    JobOptions,
    add_full_list_option,
    base_parser,
    full_list_dataset,
    report_page,
    write_full_list,
)
from jobs.context import JobContext
from jobs.executor_errors import executor_errors
from jobs.frames import Columns, driver_rows, fan_out_columns
from jobs.persisted import Persisted
from jobs.run import run_job
from jobs.validate_report import ValidateJobResult, ValidateOptions, render_validate
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import output_file, whole_number
from lakecore.core.export_records import external_roots_of
from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.tree import NodeStore
from lakecore.core.units import plural
from lakecore.core.versions import latest_version, list_root_versions
from lakecore.errors import (
    LakecoreError,
    NotFoundError,
    StorageError,
    VersionExpiredError,
)
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.node_rows import (
    ROW_COLUMNS,
    SECTION_KEY_TABLE,
    KeySpan,
    UniqueCandidates,
    node_rows,
    unique_key_candidates,
)
from lakecore.maintenance.tree_check import (
    UNREADABLE_ROOT,
    CheckReport,
    Violation,
)
from lakecore.maintenance.validate import (
    CATALOG_SCOPE,
    TREE_SCOPE,
    SubtreeResult,
    SubtreeWork,
    VersionPlan,
    VersionResult,
    combine_version,
    fresh_store,
    merge_work,
    plan_version,
    run_subtree_works,
)
from lakecore.maintenance.validate_run import (
    VIOLATIONS_LIMIT,
    Violations,
    violations_of,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Node rows per partition of the suite's input at least (see ``_rows_dataframe``).
ROWS_PER_SUITE_PARTITION = 250_000


def _parser() -> OneLineArgumentParser:
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
    parser.set_defaults(writes_report_page=True)  # beside --report: job_outputs checks it
    return parser


def validate_options(args: argparse.Namespace, common: JobOptions) -> ValidateOptions:
    report = common.report
    return ValidateOptions(
        version=args.version,
        all_retained=args.all_retained,
        deep=args.deep,
        expectations=common.settings.validate_ge_enabled and not args.no_expectations,
        full_list_dataset=full_list_dataset(report, VIOLATIONS_DATASET)
        if args.full_list and report
        else None,
        report_page=report_page(report) if report else None,
        health_page=args.html,
        reports_dir=args.reports_dir or (str(Path(report).parent) if report else None),
        lakehouse=common.lakehouse,
        storage_options=common.storage_options,
    )


def _versions_to_check(storage: Storage, options: ValidateOptions) -> tuple[int, list[int]]:
    latest = latest_version(storage)
    if options.version is not None:
        if options.version > latest:
            raise NotFoundError(
                f"version {options.version} does not exist yet; the latest is {latest}"
            )
        return latest, [options.version]
    if not options.all_retained:
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


def _run_subtrees(
    job: JobContext, works: list[SubtreeWork], persist: Persisted
) -> tuple[list[SubtreeResult], DataFrame | None]:
    """Run the subtree checks in one pass; returns the results (without rows) and the persisted
    DataFrame that also holds every node row (None without subtrees)."""
    if not works:
        return [], None
    import pickle

    from pyspark.sql import functions as F

    storage = job.storage

    def check(items: list[SubtreeWork]) -> Iterator[tuple[Any, ...]]:
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

    checked = persist(fan_out_columns(job.spark, works, check, CHECKED, job.parallelism))
    results = [
        pickle.loads(row[0])
        for row in checked.where(F.col("payload").isNotNull()).select("payload").collect()
    ]
    return results, checked


def _executor_violations(checked: DataFrame, catalog_checked: Sequence[int]) -> DataFrame:
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


def _violations(checked_versions: list[VersionResult], checked: DataFrame | None) -> Violations:
    """The listing from the driver's own violations (the top of each tree, the combine) and,
    only when the subtrees found any, a capped sample of theirs: one query that keeps the
    first few per partition (Spark's take-ordered), never the whole list."""
    from pyspark.sql import functions as F

    sample: list[tuple[int, Violation]] = []
    if checked is not None and any(result.unlisted for result in checked_versions):
        catalog_checked = [r.version for r in checked_versions if r.catalog_checked]
        sample = [
            (int(row["version"]), Violation(row["location"], row["rule"], row["detail"]))
            for row in _executor_violations(checked, catalog_checked)
            .orderBy(F.col("version").desc(), "location", "rule", "detail")
            .limit(VIOLATIONS_LIMIT)
            .collect()
        ]
    return violations_of(checked_versions, sample, limit=VIOLATIONS_LIMIT)


def _write_full_list(
    job: JobContext, checked_versions: list[VersionResult], checked: DataFrame | None, target: str
) -> str:
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
    frame = driver_rows(job.spark, own, VIOLATIONS)
    if checked is not None:
        frame = frame.unionByName(
            _executor_violations(
                checked, [r.version for r in checked_versions if r.catalog_checked]
            )
        )
    write_full_list(frame, target)
    return target


def _rows_dataframe(
    job: JobContext,
    plans: list[VersionPlan],
    checked: DataFrame | None,
    results: list[SubtreeResult],
) -> tuple[DataFrame, int, UniqueCandidates | None]:
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
    rows = driver_rows(job.spark, top_rows, NODE_ROWS)
    if checked is not None:
        node_rows_only = F.col("payload").isNull() & ~F.col("section").isin(
            list(VIOLATION_SECTIONS.values())
        )
        rows = rows.unionByName(checked.where(node_rows_only).select(*NODE_ROWS.names))
    row_count = len(top_rows) + sum(r.row_count * len(r.versions) for r in results)
    # The suite runs about 8 queries over these rows, each a task per partition: a small
    # lakehouse's rows in the check's 10 partitions cost more in tasks than in rows (a demo's
    # suite 4.4 s, 3.4 s in 2 partitions). Never fewer partitions than cores.
    partitions = max(job.default_parallelism, -(-row_count // ROWS_PER_SUITE_PARTITION))
    return rows.coalesce(partitions), row_count, unique_key_candidates(spans, UNIQUE_CANDIDATES_MAX)


def run_validate(options: ValidateOptions, job: JobContext) -> ValidateJobResult:
    """The versions checked in the stages of the module doc; returns a ``ValidateResult`` (as
    ``validate_in_process`` does for one version) that keeps its options for the pages."""
    storage = job.storage
    expectations_on = options.expectations
    latest, versions = _versions_to_check(storage, options)
    if expectations_on:
        from jobs.expectations import start_importing_great_expectations

        start_importing_great_expectations()  # meanwhile the session starts and the trees are checked
    result = job.track(ValidateJobResult(latest, options.deep, expectations_on, options=options))

    finished: dict[int, VersionResult] = {}
    plans: list[VersionPlan] = []
    skipped: list[str] = []
    stores: dict[tuple[str, ...], NodeStore] = {}
    target = job.parallelism
    with job.stage(
        "plan", f"plan {plural(len(versions), 'version')} and check the top of each tree (driver)"
    ):
        for version in versions:
            try:
                lh = Lakehouse.open(
                    storage.root_uri, storage_options=storage.storage_options, version=version
                )
            except VersionExpiredError as exc:
                if options.all_retained:  # expired while the job ran: no longer retained
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
                    deep=options.deep,
                )
            )
    works = merge_work(plans, deep=options.deep, rows=expectations_on)
    result.subtree_tasks = len(works)
    # An executor that cannot read the store (no credentials, no route) fails the job with that
    # StorageError (exit 4, retried), never with violations: it judged no file.
    with Persisted() as persist:
        with (
            job.stage(
                "check",
                f"check {plural(len(works), 'subtree')} of {plural(len(plans), 'version')}"
                f"{' with catalog checks' if options.deep else ''}",
            ),
            executor_errors(),
        ):
            results, checked = _run_subtrees(job, works, persist)
        # The queries below read the check's cached rows; a lost cache block is computed again.
        with (
            job.stage("combine", "combine the subtree results per version (driver)"),
            executor_errors(),
        ):
            by_version: dict[int, list[SubtreeResult]] = {}
            for subtree in results:
                for version in subtree.versions:
                    by_version.setdefault(version, []).append(subtree)
            for plan in plans:
                finished[plan.version] = combine_version(
                    plan, by_version.get(plan.version, []), deep=options.deep
                )
            checked_versions = [finished[v] for v in versions if v in finished]
            violations = _violations(checked_versions, checked)
        if options.full_list_dataset is not None:
            with (
                job.stage("full-list", "write every violation beside the report"),
                executor_errors(),
            ):
                result.violations_dataset = _write_full_list(
                    job, checked_versions, checked, options.full_list_dataset
                )
        expectations: dict[str, Any] | None = None
        if expectations_on and plans:
            from jobs.expectations import run_expectations

            lakehouse_def = plans[0].lakehouse_def
            with (
                job.stage("expectations", "great-expectations suite over every node row"),
                executor_errors(),
            ):
                rows, row_count, unique_candidates = _rows_dataframe(job, plans, checked, results)
                expectations = run_expectations(
                    rows,
                    row_count=row_count,
                    namespace_name_max_bytes=lakehouse_def.namespace_name_max_size_bytes,
                    table_name_max_bytes=lakehouse_def.table_name_max_size_bytes,
                    unique_candidates=unique_candidates,
                )
    # The verdicts, all at once: a report has them only when the whole validation ran.
    result.versions = checked_versions
    result.cut_fallbacks = {p.version: p.cut_fallback for p in plans if p.cut_fallback}
    result.skipped = skipped
    result.expectations = expectations
    result.violations = violations
    return result


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "validate",
        parser=_parser(),
        options=validate_options,
        run=run_validate,
        render=render_validate,
        argv=argv,
        spark=spark,
    )
