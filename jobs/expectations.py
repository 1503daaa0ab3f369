"""The great-expectations suite over the rows of every node file, and its HTML report.

The validate job turns every node it checks into rows (``validate.node_rows``: version, node
path, depth, section, row index, key, pvalue, pnode) and hands the Spark DataFrame here. The
suite states FORMAT.md's row-level rules as expectations:

    object-key-prefix      key-table and buffer keys start with B=== or C=== (so system keys
                           appear only in system rows)
    object-key-length      ... and have exactly the encoded length of their kind, in UTF-8
                           bytes: 4 + namespace max (B===), 4 + namespace max + table max (C===)
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
characters.

GE 1.x API: an ephemeral context, a Spark data source with one dataframe asset and a batch
definition for the whole dataframe, an ``ExpectationSuite`` and a ``ValidationDefinition`` run
with ``batch_parameters={"dataframe": df}``. great_expectations is imported inside the
functions (its import is slow and pulls in Spark's connect modules).
"""

from __future__ import annotations

import contextlib
import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from lakecore import keys as K

PARTIAL_UNEXPECTED: Final = 5
_UUID: Final = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_HASH_DIRS: Final = r"[01]{4}/[01]{4}/[01]{4}/[01]{8}-"
_FULL_URI: Final = r"[A-Za-z][A-Za-z0-9+.-]*://\S+"
NODE_PATH_REGEX: Final = rf"^(?:{_HASH_DIRS}node-{_UUID}\.arrow|{_FULL_URI})$"
DEF_PATH_REGEX: Final = rf"^(?:{_HASH_DIRS}(?:namespace|table)-\S+-{_UUID}\.binpb|{_FULL_URI})$"
OBJECT_KEY_REGEX: Final = r"^(?:B===|C===)"

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
        Spec("object-key-prefix", "key-table and buffer keys are object keys (B=== or C===); "
             "system keys only in system rows", "regex", "object_key", "key", OBJECT_KEY_REGEX),
        Spec("object-key-length", "object keys have exactly the encoded length of their kind (UTF-8 bytes)",
             "null", "object_key_bad_length", "key"),
        Spec("system-keys", "system rows hold only known system keys", "in_set", "system_key", "key",
             list(K.SYSTEM_KEYS)),
        Spec("system-row-nulls", "system rows: key and pvalue non-null, pnode null", "in_set",
             "system_nulls", "key,pvalue,pnode", _NULL_PATTERNS["system"]),
        Spec("key-table-row-nulls", "key-table rows: key null iff pvalue null", "in_set",
             "key_table_nulls", "key,pvalue,pnode", _NULL_PATTERNS["key_table"]),
        Spec("buffer-row-nulls", "buffer rows: key non-null, pnode null", "in_set",
             "buffer_nulls", "key,pvalue,pnode", _NULL_PATTERNS["buffer"]),
        Spec("pnode-paths", "a non-null pnode is an optimized node-file path (or a full URI in exports)",
             "regex", "pnode", "pnode", NODE_PATH_REGEX),
        Spec("pvalue-paths", "an object key's pvalue is an optimized definition-file path (or a full URI)",
             "regex", "object_pvalue", "pvalue", DEF_PATH_REGEX),
        Spec("unique-keys", "a key sits in at most one key table of a version", "unique",
             "version_key", "version,key"),
    ]


def with_derived_columns(df: Any, namespace_name_max_bytes: int, table_name_max_bytes: int) -> Any:
    """The node-row DataFrame plus the derived columns the suite checks."""
    from pyspark.sql import functions as F

    section, key, pvalue, pnode = F.col("section"), F.col("key"), F.col("pvalue"), F.col("pnode")
    is_object_row = section.isin("key_table", "buffer")
    expected_length = (
        F.when(key.startswith(K.NAMESPACE_KEY_PREFIX), F.lit(4 + namespace_name_max_bytes))
        .when(key.startswith(K.TABLE_KEY_PREFIX), F.lit(4 + namespace_name_max_bytes + table_name_max_bytes))
    )
    pattern = F.concat_ws(
        ",",
        F.when(key.isNull(), "-").otherwise("key"),
        F.when(pvalue.isNull(), "-").otherwise("pvalue"),
        F.when(pnode.isNull(), "-").otherwise("pnode"),
    )
    return (
        df.withColumn("object_key", F.when(is_object_row, key))
        .withColumn("object_key_bad_length",
                    F.when(is_object_row & expected_length.isNotNull()
                           & (F.octet_length(key) != expected_length), key))
        .withColumn("system_key", F.when(section == "system", key))
        .withColumn("system_nulls", F.when(section == "system", pattern))
        .withColumn("key_table_nulls", F.when(section == "key_table", pattern))
        .withColumn("buffer_nulls", F.when(section == "buffer", pattern))
        .withColumn("object_pvalue", F.when(is_object_row, pvalue))
        .withColumn("version_key", F.when((section == "key_table") & key.isNotNull(),
                                          F.concat(F.lit("v"), F.col("version").cast("string"), F.lit(" "), key)))
    )


def _expectation(gx: Any, spec: Spec) -> Any:
    E = gx.expectations
    common: dict[str, Any] = {"column": spec.column, "meta": {"name": spec.name}, "description": spec.description}
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


def import_great_expectations() -> Any:
    """``import great_expectations``, refusing to let it end the process.

    GE imports ``pyspark.sql.connect``, whose dependency check calls ``sys.exit(0)`` when the
    ``__main__`` module has no file (``python -c``, a script on stdin) and Spark Connect's
    dependencies are missing: a validation would silently "succeed". Turn that into an error."""
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
    rows: Any,
    *,
    namespace_name_max_bytes: int,
    table_name_max_bytes: int,
    partial_unexpected: int = PARTIAL_UNEXPECTED,
) -> dict[str, Any]:
    """Validate the node-row DataFrame; a plain dict: ``success`` and, per expectation, its
    name, description, column, success, element and unexpected counts, a few unexpected
    values and any error GE caught while evaluating it."""
    gx = import_great_expectations()
    from pyspark import StorageLevel

    # Every expectation is a few Spark jobs over the same rows: compute them once.
    df = with_derived_columns(rows, namespace_name_max_bytes, table_name_max_bytes).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    try:
        return _validate(gx, df, partial_unexpected)
    finally:
        df.unpersist()


def _validate(gx: Any, df: Any, partial_unexpected: int) -> dict[str, Any]:
    from great_expectations.data_context.types.base import ProgressBarsConfig

    specs = _specs()
    context = gx.get_context(mode="ephemeral")
    with contextlib.suppress(Exception):  # cosmetic only: no progress bars on stderr
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    source = context.data_sources.add_spark(name="lakecore_nodes", persist=False)
    asset = source.add_dataframe_asset(name="node_rows")
    batch_definition = asset.add_batch_definition_whole_dataframe("all_node_rows")
    suite = context.suites.add(gx.ExpectationSuite(name="lakecore_node_rows"))
    for spec in specs:
        suite.add_expectation(_expectation(gx, spec))
    validation = context.validation_definitions.add(
        gx.ValidationDefinition(name="lakecore_node_rows", data=batch_definition, suite=suite)
    )
    outcome = validation.run(
        batch_parameters={"dataframe": df},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": partial_unexpected},
    )
    by_name: dict[str, Any] = {}
    for validated in outcome.results:
        config: Any = validated.expectation_config
        by_name[str((config.meta or {}).get("name") if config is not None else None)] = validated
    results: list[dict[str, Any]] = []
    for spec in specs:
        item: Any = by_name.get(spec.name)
        entry: dict[str, Any] = {
            "name": spec.name, "description": spec.description, "column": spec.column,
            "source_columns": spec.source, "success": False, "element_count": None,
            "unexpected_count": None, "unexpected_values": [], "error": None,
        }
        if item is None:
            entry["error"] = "no result: the expectation was not evaluated"
        else:
            result = item.result or {}
            info = item.exception_info or {}
            entry["expectation_type"] = item.expectation_config.type
            entry["success"] = bool(item.success)
            entry["element_count"] = result.get("element_count")
            entry["unexpected_count"] = result.get("unexpected_count")
            entry["unexpected_values"] = [_plain(v) for v in (result.get("partial_unexpected_list") or [])]
            if info.get("raised_exception"):
                entry["success"] = False
                entry["error"] = " ".join(str(info.get("exception_message")).split())
        results.append(entry)
    return {
        "success": all(r["success"] for r in results),
        "evaluated": len(results),
        "successful": sum(1 for r in results if r["success"]),
        "great_expectations_version": gx.__version__,
        "expectations": results,
    }


# -- HTML ------------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.ok { color: #176317; font-weight: bold; } td.fail { color: #a11; font-weight: bold; }
code { white-space: pre-wrap; word-break: break-all; }
"""


def _cell(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def render_html(
    title: str,
    summary: Mapping[str, Any],
    expectations: Mapping[str, Any] | None,
    violations: Sequence[Mapping[str, Any]] = (),
) -> str:
    """A self-contained HTML page: the summary, the expectation results and the violations."""
    parts = [
        "<!DOCTYPE html>",
        f"<html><head><meta charset='utf-8'><title>{_cell(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_cell(title)}</h1>",
        "<table>",
    ]
    parts.extend(f"<tr><th>{_cell(k)}</th><td>{_cell(v)}</td></tr>" for k, v in summary.items())
    parts.append("</table>")
    parts.append("<h2>Expectations</h2>")
    if not expectations:
        parts.append("<p>not run</p>")
    else:
        parts.append(
            f"<p>{expectations.get('successful')} of {expectations.get('evaluated')} succeeded "
            f"(great_expectations {_cell(expectations.get('great_expectations_version'))})</p>"
        )
        parts.append("<table><tr><th>expectation</th><th>result</th><th>column</th><th>rows</th>"
                     "<th>unexpected</th><th>unexpected values (first few)</th></tr>")
        for item in expectations.get("expectations", []):
            ok = bool(item.get("success"))
            values = "<br>".join(f"<code>{_cell(repr(v))}</code>" for v in item.get("unexpected_values", []))
            if item.get("error"):
                values += f"<br><em>error: {_cell(item['error'])}</em>"
            parts.append(
                f"<tr><td><b>{_cell(item.get('name'))}</b><br>{_cell(item.get('description'))}</td>"
                f"<td class='{'ok' if ok else 'fail'}'>{'passed' if ok else 'FAILED'}</td>"
                f"<td><code>{_cell(item.get('column'))}</code> (from {_cell(item.get('source_columns'))})</td>"
                f"<td>{_cell(item.get('element_count'))}</td><td>{_cell(item.get('unexpected_count'))}</td>"
                f"<td>{values}</td></tr>"
            )
        parts.append("</table>")
    parts.append(f"<h2>Violations ({len(violations)} listed)</h2>")
    if violations:
        parts.append("<table><tr><th>version</th><th>rule</th><th>location</th><th>detail</th></tr>")
        parts.extend(
            f"<tr><td>{_cell(v.get('version'))}</td><td>{_cell(v.get('rule'))}</td>"
            f"<td><code>{_cell(v.get('location'))}</code></td><td>{_cell(v.get('detail'))}</td></tr>"
            for v in violations
        )
        parts.append("</table>")
    else:
        parts.append("<p>none</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(path: str | Path, page: str) -> str:
    """Write the page atomically; returns the path written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return str(target)
