"""The great-expectations suite over the rows of every node file, and its HTML report.

The validate job turns every node it checks into rows (``lakecore.maintenance.node_rows``; the DataFrame
holds the columns the suite reads: version, section, key, pvalue, pnode) and hands the Spark
DataFrame here. The suite states the row-level rules of docs/format.md#node-files as expectations:

    object-key-prefix      key-table and buffer keys start with B===, C=== or D=== (so system
                           keys appear only in system rows)
    object-key-length      ... and have exactly the encoded length of their kind, in UTF-8
                           bytes: 4 + namespace max (B===), 4 + namespace max + table max
                           (C=== tables, D=== views)
    system-keys            system rows hold only known system keys
    system-row-nulls       system rows: key and pvalue non-null, pnode null
    key-table-row-nulls    key-table rows: key null iff pvalue null
    buffer-row-nulls       buffer rows: key non-null, pnode null
    pnode-paths            a non-null pnode is an optimized node-file path, or a full URI (exports)
    pvalue-paths           a key's pvalue is an optimized definition-file path, or a full URI
    unique-keys            a key sits in at most one key table of a version

Rules that need a row's context (its section, the lakehouse's name limits) are evaluated on
derived columns that are null where the rule does not apply; column-map expectations ignore
nulls, so each expectation sees exactly the rows its rule is about, and its unexpected values
are the offending keys or paths themselves (or a ``key,pvalue,pnode`` null pattern with ``-``
for null). Byte lengths use Spark's ``octet_length``, since GE's length expectations count
characters. unique-keys' column names only the rows where the rule can fail
(``lakecore.maintenance.validate.unique_key_candidates``: keys repeated within one subtree task,
and keys where two tasks' key ranges overlap, both found by the check tasks as they make the
rows): GE's uniqueness is a window that shuffles and sorts its column, which on a sound tree
then holds no row. (It was an aggregate over an 8-byte hash of every row first: 1.2 s warm and
4 s cold at a million rows on local[1], for the same answer.)

GE 1.x API: an ephemeral context, a Spark data source with one dataframe asset and a batch
definition for the whole dataframe, an ``ExpectationSuite`` and a ``ValidationDefinition`` run
with ``batch_parameters={"dataframe": df}``. great_expectations is imported inside the
functions: its import pulls in Spark's connect modules and costs about 4 CPU-seconds (scipy,
altair, pandas), a quarter of a demo-sized validate. ``start_importing_great_expectations``
begins it on a background thread while the driver waits on the JVM (the session's start, the
tree check), so the suite rarely waits for it.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from lakecore.core import keys as K
from lakecore.maintenance.node_rows import UniqueCandidates

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PARTIAL_UNEXPECTED: Final = 5
_UUID: Final = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_HASH_DIRS: Final = r"[01]{4}/[01]{4}/[01]{4}/[01]{8}-"
_FULL_URI: Final = r"[A-Za-z][A-Za-z0-9+.-]*://\S+"
NODE_PATH_REGEX: Final = rf"^(?:{_HASH_DIRS}node-{_UUID}\.arrow|{_FULL_URI})$"
# Lazy ``\S+?``: the same language (the pattern is anchored at both ends), but Java's matcher no
# longer runs to the end of every path and backs up over the uuid: 1.9 s per million pvalues
# down to 1.2 s on local[1].
DEF_PATH_REGEX: Final = (
    rf"^(?:{_HASH_DIRS}(?:namespace|table|view)-\S+?-{_UUID}\.binpb|{_FULL_URI})$"
)
OBJECT_KEY_REGEX: Final = r"^(?:B===|C===|D===)"

_NULL_PATTERNS: Final = {
    "system": ["key,pvalue,-"],
    "key_table": ["key,pvalue,pnode", "key,pvalue,-", "-,-,pnode", "-,-,-"],
    "buffer": ["key,pvalue,-", "key,-,-"],
}


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    kind: str  # regex | null | in_set | unique
    column: str
    source: str  # the row column the derived column is taken from
    value: Any = None


def _specs() -> list[Spec]:
    return [
        Spec(
            "object-key-prefix",
            "key-table and buffer keys are object keys (B===, C=== or D===); "
            "system keys only in system rows",
            "regex",
            "object_key",
            "key",
            OBJECT_KEY_REGEX,
        ),
        Spec(
            "object-key-length",
            "object keys have exactly the encoded length of their kind (UTF-8 bytes)",
            "null",
            "object_key_bad_length",
            "key",
        ),
        Spec(
            "system-keys",
            "system rows hold only known system keys",
            "in_set",
            "system_key",
            "key",
            list(K.SYSTEM_KEYS),
        ),
        Spec(
            "system-row-nulls",
            "system rows: key and pvalue non-null, pnode null",
            "in_set",
            "system_nulls",
            "key,pvalue,pnode",
            _NULL_PATTERNS["system"],
        ),
        Spec(
            "key-table-row-nulls",
            "key-table rows: key null iff pvalue null",
            "in_set",
            "key_table_nulls",
            "key,pvalue,pnode",
            _NULL_PATTERNS["key_table"],
        ),
        Spec(
            "buffer-row-nulls",
            "buffer rows: key non-null, pnode null",
            "in_set",
            "buffer_nulls",
            "key,pvalue,pnode",
            _NULL_PATTERNS["buffer"],
        ),
        Spec(
            "pnode-paths",
            "a non-null pnode is an optimized node-file path (or a full URI in exports)",
            "regex",
            "pnode",
            "pnode",
            NODE_PATH_REGEX,
        ),
        Spec(
            "pvalue-paths",
            "an object key's pvalue is an optimized definition-file path (or a full URI)",
            "regex",
            "object_pvalue",
            "pvalue",
            DEF_PATH_REGEX,
        ),
        Spec(
            "unique-keys",
            "a key sits in at most one key table of a version",
            "unique",
            "version_key",
            "version,key",
        ),
    ]


# unique-keys' candidates (``UniqueCandidates``): at most this many ranges and keys are named to
# the suite's column, each a term of its condition; beyond it the column holds every key-table key
# (GE's window over all of them).
UNIQUE_CANDIDATES_MAX: Final = 256


def _is_table_key_row() -> Column:
    from pyspark.sql import functions as F

    return (F.col("section") == "key_table") & F.col("key").isNotNull()


def _unique_candidate(candidates: UniqueCandidates | None) -> Column:
    """Whether a row is one unique-keys must judge: a key-table key among the candidates, or
    every key-table key without them."""
    from pyspark.sql import functions as F

    if candidates is None:
        return _is_table_key_row()
    version, key = F.col("version"), F.col("key")
    terms = [(version == v) & key.between(low, high) for v, low, high in candidates.ranges]
    terms += [(version == v) & (key == repeated) for v, repeated in candidates.keys]
    if not terms:  # a sound tree: no key can repeat, the column is null and GE's window sees no row
        return F.lit(False)
    return _is_table_key_row() & functools.reduce(operator.or_, terms)


def with_derived_columns(
    df: DataFrame,
    namespace_name_max_bytes: int,
    table_name_max_bytes: int,
    unique_candidates: UniqueCandidates | None = None,
) -> DataFrame:
    """The node-row DataFrame plus the derived columns the suite checks. ``unique_candidates``
    narrows unique-keys' column to the rows where the rule can fail; None names every key-table
    key."""
    from pyspark.sql import functions as F

    section, key, pvalue, pnode = F.col("section"), F.col("key"), F.col("pvalue"), F.col("pnode")
    is_object_row = section.isin("key_table", "buffer")
    expected_length = F.when(
        key.startswith(K.NAMESPACE_KEY_PREFIX), F.lit(4 + namespace_name_max_bytes)
    ).when(
        key.startswith(K.TABLE_KEY_PREFIX) | key.startswith(K.VIEW_KEY_PREFIX),
        F.lit(4 + namespace_name_max_bytes + table_name_max_bytes),
    )
    pattern = F.concat_ws(
        ",",
        F.when(key.isNull(), "-").otherwise("key"),
        F.when(pvalue.isNull(), "-").otherwise("pvalue"),
        F.when(pnode.isNull(), "-").otherwise("pnode"),
    )
    unique_candidate = _unique_candidate(unique_candidates)
    return (
        df.withColumn("object_key", F.when(is_object_row, key))
        .withColumn(
            "object_key_bad_length",
            F.when(
                is_object_row
                & expected_length.isNotNull()
                & (F.octet_length(key) != expected_length),
                key,
            ),
        )
        .withColumn("system_key", F.when(section == "system", key))
        .withColumn("system_nulls", F.when(section == "system", pattern))
        .withColumn("key_table_nulls", F.when(section == "key_table", pattern))
        .withColumn("buffer_nulls", F.when(section == "buffer", pattern))
        .withColumn("object_pvalue", F.when(is_object_row, pvalue))
        .withColumn(
            "version_key",
            F.when(
                unique_candidate,
                F.concat(F.lit("v"), F.col("version").cast("string"), F.lit(" "), key),
            ),
        )
    )


def _expectation(gx: Any, spec: Spec) -> Any:
    E = gx.expectations
    common: dict[str, Any] = {
        "column": spec.column,
        "meta": {"name": spec.name},
        "description": spec.description,
    }
    if spec.kind == "regex":
        return E.ExpectColumnValuesToMatchRegex(regex=spec.value, **common)
    if spec.kind == "null":
        return E.ExpectColumnValuesToBeNull(**common)
    if spec.kind == "in_set":
        return E.ExpectColumnValuesToBeInSet(value_set=spec.value, **common)
    if spec.kind == "unique":
        return E.ExpectColumnValuesToBeUnique(**common)
    raise ValueError(f"unknown expectation kind {spec.kind!r}")


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


_background_import: threading.Thread | None = None
_background_import_lock = threading.Lock()


def start_importing_great_expectations() -> None:
    """Begin ``import great_expectations`` on a daemon thread (once per process); the import
    is CPU work the driver can do while it only waits for Spark. ``import_great_expectations``
    waits for it. A failure there is ignored: the import is tried again where it is needed,
    and fails there with its own error (Python does not keep a module that failed to import)."""
    global _background_import
    with _background_import_lock:
        if _background_import is not None:
            return

        def importing() -> None:
            with contextlib.suppress(BaseException):  # SystemExit included: see below
                import_great_expectations()

        _background_import = threading.Thread(
            target=importing, name="import-great-expectations", daemon=True
        )
        _background_import.start()


def import_great_expectations() -> Any:
    """``import great_expectations``, refusing to let it end the process.

    GE imports ``pyspark.sql.connect``, whose dependency check calls ``sys.exit(0)`` when the
    ``__main__`` module has no file (``python -c``, a script on stdin) and Spark Connect's
    dependencies are missing: a validation would silently "succeed". Turn that into an error."""
    background = _background_import
    if background is not None and background is not threading.current_thread():
        background.join()
    try:
        import great_expectations as gx
    except SystemExit as exc:
        raise RuntimeError(
            f"importing great_expectations tried to exit the process (code {exc.code}): pyspark's "
            "Spark Connect dependency check fails when __main__ has no file; run the job from a "
            "file (spark-submit, python -m) or install pyspark's connect extras"
        ) from None
    return gx


def run_expectations(
    rows: DataFrame,
    *,
    row_count: int,
    namespace_name_max_bytes: int,
    table_name_max_bytes: int,
    unique_candidates: UniqueCandidates | None,
    partial_unexpected: int = PARTIAL_UNEXPECTED,
) -> dict[str, Any]:
    """Validate the node-row DataFrame; a plain dict: ``success`` and, per expectation, its
    name, description, column, success, element and unexpected counts, a few unexpected
    values and any error GE caught while evaluating it.

    Two passes, the second only when needed. The first runs the whole suite with GE's
    ``BOOLEAN_ONLY`` result format: GE bundles every expectation's unexpected count into a few
    aggregate Spark jobs over the cached rows (8 jobs for the 9 expectations, where ``SUMMARY``
    ran 26: it adds a query per expectation for its unexpected values). An expectation that
    passes has no unexpected value (none sets ``mostly``), and its element count is the row
    count. Only the expectations that failed or raised run again with ``SUMMARY``, for their
    counts and sample values. ``row_count`` is the number of rows in ``rows`` (the caller knows
    it without a Spark job)."""
    gx = import_great_expectations()
    # The derived columns are cheap projections of rows the caller has cached: GE's few queries
    # each compute them again rather than pay a job (and a second cache) to store them.
    df = with_derived_columns(
        rows, namespace_name_max_bytes, table_name_max_bytes, unique_candidates
    )
    return _validate(gx, df, row_count, partial_unexpected)


class _Suite:
    """One ephemeral GE context over the row DataFrame; ``run`` validates a list of specs."""

    def __init__(self, gx: Any) -> None:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self._gx = gx
        self._context = gx.get_context(mode="ephemeral")
        with contextlib.suppress(Exception):  # cosmetic only: no progress bars on stderr
            self._context.variables.progress_bars = ProgressBarsConfig(
                globally=False, metric_calculations=False
            )
        source = self._context.data_sources.add_spark(name="lakecore_nodes", persist=False)
        asset = source.add_dataframe_asset(name="node_rows")
        self._batch_definition = asset.add_batch_definition_whole_dataframe("all_node_rows")
        self._runs = 0

    def run(
        self, df: DataFrame, specs: Sequence[Spec], result_format: dict[str, Any]
    ) -> dict[str, Any]:
        """GE's validation result of each spec, by spec name (absent: not evaluated)."""
        self._runs += 1
        name = f"lakecore_node_rows_{self._runs}"
        suite = self._context.suites.add(self._gx.ExpectationSuite(name=name))
        for spec in specs:
            suite.add_expectation(_expectation(self._gx, spec))
        validation = self._context.validation_definitions.add(
            self._gx.ValidationDefinition(name=name, data=self._batch_definition, suite=suite)
        )
        outcome = validation.run(batch_parameters={"dataframe": df}, result_format=result_format)
        by_name: dict[str, Any] = {}
        for validated in outcome.results:
            config: Any = validated.expectation_config
            by_name[str((config.meta or {}).get("name") if config is not None else None)] = (
                validated
            )
        return by_name


def _validate(gx: Any, df: DataFrame, row_count: int, partial_unexpected: int) -> dict[str, Any]:
    specs = _specs()
    suite = _Suite(gx)
    first = suite.run(df, specs, {"result_format": "BOOLEAN_ONLY"})
    again = [
        spec
        for spec in specs
        if first.get(spec.name) is None
        or not first[spec.name].success
        or (first[spec.name].exception_info or {}).get("raised_exception")
    ]
    detailed = (
        suite.run(
            df, again, {"result_format": "SUMMARY", "partial_unexpected_count": partial_unexpected}
        )
        if again
        else {}
    )
    results: list[dict[str, Any]] = []
    for spec in specs:
        entry: dict[str, Any] = {
            "name": spec.name,
            "description": spec.description,
            "column": spec.column,
            "source_columns": spec.source,
            "success": False,
            "element_count": None,
            "unexpected_count": None,
            "unexpected_values": [],
            "error": None,
        }
        item: Any = detailed.get(spec.name) if spec in again else first.get(spec.name)
        if item is None:
            entry["error"] = "no result: the expectation was not evaluated"
        else:
            result = item.result or {}
            info = item.exception_info or {}
            entry["expectation_type"] = item.expectation_config.type
            entry["success"] = bool(item.success)
            if spec in again:
                entry["element_count"] = result.get("element_count")
                entry["unexpected_count"] = result.get("unexpected_count")
                entry["unexpected_values"] = [
                    _plain(v) for v in (result.get("partial_unexpected_list") or [])
                ]
            else:  # passed in the first pass: every row judged, none unexpected
                entry["element_count"] = row_count
                entry["unexpected_count"] = 0
            if info.get("raised_exception"):
                entry["success"] = False
                entry["error"] = " ".join(str(info.get("exception_message")).split())
        results.append(entry)
    return {
        "success": all(r["success"] for r in results),
        "evaluated": len(results),
        "successful": sum(1 for r in results if r["success"]),
        "detailed_again": [spec.name for spec in again],
        "great_expectations_version": gx.__version__,
        "expectations": results,
    }


# -- HTML ------------------------------------------------------------------------------------------


def _expectation_row(item: Mapping[str, Any]) -> tuple[str, ...]:
    from lakecore.lakehouse.report.html import esc, pill

    values = "<br>".join(f"<code>{esc(repr(v))}</code>" for v in item.get("unexpected_values", []))
    if item.get("error"):
        values += f"<br><em>error: {esc(item['error'])}</em>"
    return (
        f"<b>{esc(item.get('name'))}</b><br><span class='muted'>{esc(item.get('description'))}</span>",
        pill(bool(item.get("success"))),
        f"<code>{esc(item.get('column'))}</code> <span class='muted'>(from {esc(item.get('source_columns'))})</span>",
        esc(item.get("element_count")),
        esc(item.get("unexpected_count")),
        values,
    )


def render_html(
    title: str,
    summary: Mapping[str, Any],
    expectations: Mapping[str, Any] | None,
    violations: Sequence[Mapping[str, Any]] = (),
    *,
    status: str | None = None,
    error: str | None = None,
    versions: Sequence[Mapping[str, Any]] = (),
    violations_total: int | None = None,
) -> str:
    """A self-contained HTML page, in the order a reader needs it: the status in colour, the
    violations, the expectations that failed, then the versions checked, the summary and the
    expectations that passed. It states the same facts as the JSON report (per version:
    whether the catalog checks ran, which ``--deep`` alone does not say)."""
    from lakecore.core.units import plural
    from lakecore.lakehouse.report.html import banner, esc, page, table

    status = status or str(summary.get("status", "ok"))
    items = list((expectations or {}).get("expectations", []))
    failed = [e for e in items if not e.get("success")]
    passed = [e for e in items if e.get("success")]
    total = len(violations) if violations_total is None else violations_total
    if status == "ok":
        headline = f"{plural(len(versions), 'version') if versions else 'the lakehouse'} clean" + (
            f"; all {len(items)} expectations passed" if items else ""
        )
    else:
        headline = error or "; ".join(
            p
            for p in (
                f"{plural(total, 'violation')}" if total else "",
                f"{len(failed)} of {len(items)} expectations failed" if failed else "",
            )
            if p
        )
    body = [f"<h1>{esc(title)}</h1>", banner(status, headline)]
    body.append(
        f"<h2>Violations ({total}{f', first {len(violations)} listed' if total > len(violations) else ''})</h2>"
    )
    if violations:
        body.append(
            table(
                ["version", "rule", "location", "detail"],
                [
                    (
                        esc(v.get("version")),
                        f"<b>{esc(v.get('rule'))}</b>",
                        f"<code>{esc(v.get('location'))}</code>",
                        esc(v.get("detail")),
                    )
                    for v in violations
                ],
                raw=True,
                row_classes=["fail"] * len(violations),
            )
        )
    else:
        body.append("<p>none</p>")
    headers = [
        "expectation",
        "result",
        "column",
        "rows",
        "unexpected",
        "unexpected values (first few)",
    ]
    if expectations is None:
        body.append("<h2>Expectations</h2><p class='muted'>not run</p>")
    else:
        version = esc(expectations.get("great_expectations_version"))
        if failed:
            body.append(f"<h2>Expectations that failed ({len(failed)} of {len(items)})</h2>")
            body.append(
                table(
                    headers,
                    [_expectation_row(e) for e in failed],
                    raw=True,
                    row_classes=["fail"] * len(failed),
                )
            )
    if versions:
        body.append("<h2>Versions checked</h2>")
        body.append(
            table(
                [
                    "version",
                    "result",
                    "nodes",
                    "keys",
                    "buffered",
                    "violations",
                    "catalog checked",
                    "catalog keys",
                    "subtree tasks",
                ],
                [
                    (
                        v.get("version"),
                        "clean" if v.get("ok") else "violations",
                        v.get("nodes"),
                        v.get("keys"),
                        v.get("messages"),
                        v.get("violations"),
                        "yes"
                        if v.get("catalog_checked")
                        else ("no (the tree has violations)" if summary.get("deep") else "no"),
                        v.get("catalog_keys"),
                        v.get("subtree_tasks"),
                    )
                    for v in versions
                ],
                numeric=(0, 2, 3, 4, 5, 7, 8),
                row_classes=["" if v.get("ok") else "fail" for v in versions],
            )
        )
    body.append("<h2>Summary</h2>")
    body.append(
        table(["", ""], [(k, v) for k, v in summary.items()]).replace(
            "<tr><th class=''></th><th class=''></th></tr>", ""
        )
    )
    if expectations is not None:
        body.append(f"<h2>Expectations that passed ({len(passed)} of {len(items)})</h2>")
        body.append(f"<p class='muted'>great_expectations {version}</p>")
        if passed:
            body.append(table(headers, [_expectation_row(e) for e in passed], raw=True))
    return page(title, body)
