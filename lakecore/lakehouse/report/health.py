"""The lakehouse health page: one self-contained HTML file.

Written by ``lakecore describe --html PATH`` and by the validate job's ``--html PATH``. It
shows what ``describe`` knows (``lakecore.lakehouse.describe``), the history (``lakecore.lakehouse.history``), the
validation result when there is one, and gc's last orphan count when a reports folder holds a gc
report:

- a version timeline: every root file by time and number, coloured by operation, with the
  expired-but-readable and pinned ones marked and the retention boundary drawn; the last
  compact-versions report's expiries when there is one;
- the tree: depth, nodes and buffer fill (average and maximum) per level;
- files by kind: counts and bytes.

Plots are drawn with matplotlib (the ``[report]`` extra) as inline SVG with the text kept as
text; nothing is fetched when the page is viewed.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lakecore.core.units import format_bytes, format_duration_millis, format_time_millis, plural
from lakecore.errors import InvalidArgumentError
from lakecore.lakehouse.history import HistoryEntry
from lakecore.lakehouse.report.html import banner, cards, esc, page, pill, table, tree_levels_table

OPERATION_COLOURS = {
    "create": "#6941c6",
    "commit": "#1570ef",
    "flush": "#12b76a",
    "rollback": "#f04438",
    "rollback-pin": "#fda29b",
    "rollback-unpin": "#fda29b",
    "export": "#f79009",
    "drop-export": "#fdb022",
    "definition": "#9e77ed",
    "none": "#98a2b3",
    "unknown": "#98a2b3",
    "unreadable": "#000000",
}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise InvalidArgumentError(
            "the health page needs matplotlib for its plots: pip install '.[report]' in the lakecore checkout "
            "(make setup installs it)"
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.hashsalt": "lakecore",
        }
    )
    return plt


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    # The RDF metadata block names namespaces by http:// URI: harmless, but the page is meant to
    # hold no outside address at all.
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)


def _timeline(
    plt: Any,
    entries: Sequence[HistoryEntry],
    data: Mapping[str, Any],
    compaction: Mapping[str, Any] | None,
) -> str:
    import datetime as dt

    fig, ax = plt.subplots(figsize=(7.2, 3.2))
    readable = [e for e in entries if e.created_at_millis is not None]
    for operation in OPERATION_COLOURS:
        chosen = [e for e in readable if e.operation == operation and e.state != "expired"]
        if chosen:
            ax.scatter(
                [
                    # ``readable`` holds only entries with a time: the 0 is never used.
                    dt.datetime.fromtimestamp((e.created_at_millis or 0) / 1000, tz=dt.UTC)
                    for e in chosen
                ],
                [e.version for e in chosen],
                s=22,
                color=OPERATION_COLOURS[operation],
                label=operation,
                zorder=3,
            )
    expired = [e for e in readable if e.state == "expired"]
    if expired:
        ax.scatter(
            [dt.datetime.fromtimestamp(e.created_at_millis / 1000, tz=dt.UTC) for e in expired],  # type: ignore[operator]
            [e.version for e in expired],
            s=26,
            facecolors="none",
            edgecolors="#667085",
            label="expired (readable)",
            zorder=3,
        )
    pinned = [e for e in readable if e.pinned_by]
    if pinned:
        ax.scatter(
            [dt.datetime.fromtimestamp(e.created_at_millis / 1000, tz=dt.UTC) for e in pinned],  # type: ignore[operator]
            [e.version for e in pinned],
            s=110,
            marker="s",
            facecolors="none",
            edgecolors="#f79009",
            label="pinned by export",
            zorder=2,
        )
    if readable:
        ax.plot(
            [dt.datetime.fromtimestamp(e.created_at_millis / 1000, tz=dt.UTC) for e in readable],  # type: ignore[operator]
            [e.version for e in readable],
            color="#d0d5dd",
            linewidth=1,
            zorder=1,
        )
    boundary = data["now_millis"] - data["definition"]["maximum_version_age_millis"]
    if readable and boundary >= min(e.created_at_millis for e in readable):  # type: ignore[type-var]
        ax.axvline(
            dt.datetime.fromtimestamp(boundary / 1000, tz=dt.UTC),
            color="#c0261f",
            linestyle="--",
            linewidth=1,
            label=f"retention ({format_duration_millis(data['definition']['maximum_version_age_millis'])})",
        )
    if compaction:
        when = compaction.get("now_millis")
        expired_count = compaction.get("expired", 0)
        if when:
            ax.axvline(
                dt.datetime.fromtimestamp(when / 1000, tz=dt.UTC),
                color="#667085",
                linestyle=":",
                linewidth=1,
                label=f"last compact-versions: {expired_count} expired",
            )
    import matplotlib.dates as mdates
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlabel("commit time (UTC)")
    ax.set_ylabel("version")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    text = _svg(fig)
    plt.close(fig)
    return text


def _levels_chart(plt: Any, tree: Mapping[str, Any]) -> str:
    levels = tree["levels"]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(7.2, 2.8), gridspec_kw={"width_ratios": [1, 1.3]}
    )
    depths = [f"L{lvl['depth']}" for lvl in levels]
    left.barh(depths, [lvl["nodes"] for lvl in levels], color="#1570ef")
    for n, lvl in enumerate(levels):
        left.text(lvl["nodes"], n, f" {lvl['nodes']}", va="center", fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("nodes per level")
    left.set_title(f"depth {tree['depth']}, fan-out per level", fontsize=9)
    positions = list(range(len(levels)))
    right.barh(
        [p - 0.18 for p in positions],
        [lvl["buffer_fill_avg"] * 100 for lvl in levels],
        height=0.34,
        color="#12b76a",
        label="average",
    )
    right.barh(
        [p + 0.18 for p in positions],
        [lvl["buffer_fill_max"] * 100 for lvl in levels],
        height=0.34,
        color="#f79009",
        label="maximum",
    )
    right.set_yticks(positions, depths)
    right.invert_yaxis()
    right.set_xlim(0, 100)
    right.axvline(100, color="#c0261f", linewidth=0.8)
    right.set_xlabel("write-buffer fill (%)")
    right.set_title("buffer fill per level", fontsize=9)
    right.legend(fontsize=7, frameon=False, loc="lower right")
    fig.tight_layout()
    text = _svg(fig)
    plt.close(fig)
    return text


def _files_chart(plt: Any, files: Mapping[str, Any]) -> str:
    kinds = [(k, v) for k, v in files["by_kind"].items() if v["count"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 2.6), sharey=True)
    names = [k for k, _ in kinds]
    left.barh(names, [v["count"] for _, v in kinds], color="#6941c6")
    right.barh(names, [v["bytes"] / 1024 for _, v in kinds], color="#9e77ed")
    for n, (_, v) in enumerate(kinds):
        left.text(v["count"], n, f" {v['count']}", va="center", fontsize=8)
        right.text(v["bytes"] / 1024, n, f" {format_bytes(v['bytes'])}", va="center", fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("files")
    right.set_xlabel("KiB")
    left.set_title("files by kind", fontsize=9)
    right.set_title("bytes by kind", fontsize=9)
    for ax in (left, right):
        ax.margins(x=0.25)
    fig.tight_layout()
    text = _svg(fig)
    plt.close(fig)
    return text


def latest_reports(reports_dir: str | Path | None) -> dict[str, dict[str, Any]]:
    """The newest JSON report per job in ``reports_dir`` (by modification time)."""
    out: dict[str, tuple[float, dict[str, Any]]] = {}
    if reports_dir is None or not Path(reports_dir).is_dir():
        return {}
    for path in Path(reports_dir).glob("*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("job"), str):
            continue
        mtime = path.stat().st_mtime
        if data["job"] not in out or out[data["job"]][0] < mtime:
            data["_path"] = str(path)
            out[data["job"]] = (mtime, data)
    return {job: data for job, (_, data) in out.items()}


def _gc_section(gc: Mapping[str, Any] | None) -> tuple[str | None, list[str]]:
    if gc is None:
        return None, [
            "<p class='muted'>no gc report found (pass --reports-dir, or run gc with --report)</p>"
        ]
    counts = gc.get("counts", {})
    orphans = counts.get("orphans_found", counts.get("orphans"))
    deleted = counts.get("orphans_deleted")
    freed = gc.get("bytes", {}).get("freed_bytes")
    rows = [
        ("status", gc.get("status")),
        ("base version", gc.get("base_version")),
        ("orphans found", orphans),
        (
            "to delete (older than the grace period)",
            # "would_delete" in the reports of dry runs before the keys were made stable.
            counts.get("orphans_to_delete", counts.get("would_delete")),
        ),
        ("orphans deleted", deleted),
        ("freed", format_bytes(freed) if isinstance(freed, int) else None),
        ("dry run", gc.get("dry_run")),
        ("report", gc.get("_path")),
    ]
    return (str(orphans) if orphans is not None else "?"), [
        table(["gc (last report)", ""], [(k, v) for k, v in rows if v is not None])
    ]


def _table_maintenance_section(last: Mapping[str, Any] | None) -> list[str]:
    """The last table-maintenance report: what it expired and deleted, what waits."""
    if last is None:
        return [
            "<p class='muted'>no table-maintenance report found (pass --reports-dir, or run "
            "table-maintenance with --report)</p>"
        ]
    counts = last.get("counts", {})
    freed = last.get("bytes", {}).get("freed_bytes")
    rows = [
        ("status", last.get("status")),
        ("Iceberg tables", counts.get("iceberg_tables")),
        ("snapshots expired", counts.get("snapshots_expired")),
        ("files to delete", counts.get("files_to_delete")),
        ("files deleted", counts.get("files_deleted")),
        ("freed", format_bytes(freed) if isinstance(freed, int) else None),
        ("expired files still named by retained versions", counts.get("expired_files_still_named")),
        ("orphans younger than the grace period", counts.get("skipped_too_young")),
        ("purges waiting for retention", _waiting(counts)),
        ("unreadable files", counts.get("unreadable_files")),
        ("dry run", last.get("dry_run")),
        ("error", last.get("error")),
        ("report", last.get("_path")),
    ]
    return [
        table(["table-maintenance (last report)", ""], [(k, v) for k, v in rows if v is not None])
    ]


def _waiting(counts: Mapping[str, Any]) -> int | None:
    marks, due = counts.get("purge_marks"), counts.get("purge_marks_due")
    return marks - due if isinstance(marks, int) and isinstance(due, int) else None


def _validation_section(validation: Mapping[str, Any] | None) -> tuple[bool | None, list[str]]:
    if validation is None:
        return None, [
            "<p class='muted'>no validation result (run validate with --report, and pass "
            "--reports-dir; or write this page from validate --html)</p>"
        ]
    counts = validation.get("counts", {})
    details = validation.get("details", {})
    ok = validation.get("status") == "ok"
    expectations = details.get("expectations") or None
    rows: list[tuple[str, Any]] = [
        ("status", validation.get("status")),
        ("versions checked", counts.get("versions_checked")),
        ("nodes checked", counts.get("nodes_checked")),
        ("violations", counts.get("violations")),
        ("catalog checks (--deep)", _catalog_checked(details)),
        (
            "expectations",
            f"{expectations['successful']} of {expectations['evaluated']} succeeded"
            if expectations
            else "not run",
        ),
        ("error", validation.get("error")),
    ]
    parts = [table(["validation", ""], [(k, v) for k, v in rows if v is not None])]
    listed = details.get("violations") or []
    if listed:
        parts.append(
            table(
                ["version", "rule", "location", "detail"],
                [
                    (v.get("version"), v.get("rule"), v.get("location"), v.get("detail"))
                    for v in listed[:20]
                ],
                row_classes=["fail"] * min(20, len(listed)),
            )
        )
    return ok, parts


def _catalog_checked(details: Mapping[str, Any]) -> str:
    versions = details.get("versions") or []
    if not details.get("deep"):
        return "not requested"
    done = sum(1 for v in versions if v.get("catalog_checked"))
    if done == len(versions):
        return f"run on all {plural(done, 'version')}"
    return (
        f"run on {done} of {plural(len(versions), 'version')} (skipped where the tree itself "
        "has violations)"
    )


def render_health_page(
    data: Mapping[str, Any],
    entries: Sequence[HistoryEntry],
    *,
    validation: Mapping[str, Any] | None = None,
    reports_dir: str | Path | None = None,
) -> str:
    """The page as a string (``data`` is ``lakecore.lakehouse.describe.describe``'s)."""
    plt = _pyplot()
    reports = latest_reports(reports_dir)
    if validation is None:
        validation = reports.get("validate")
    gc_orphans, gc_parts = _gc_section(reports.get("gc"))
    compaction = None
    compact = reports.get("compact-versions")
    if compact is not None:
        compaction = {
            "now_millis": compact.get("details", {}).get("now_millis"),
            "expired": compact.get("counts", {}).get("expired_versions", 0),
        }
    valid_ok, validation_parts = _validation_section(validation)
    d, v, tree, files = data["definition"], data["versions"], data["tree"], data.get("files")
    problems = []
    damaged = tree.get("damaged")
    if v["unreadable"]:
        problems.append(f"unreadable versions {', '.join(map(str, v['unreadable']))}")
    if damaged:
        problems.append(f"the tree of version {tree['version']} is damaged")
    if valid_ok is False:
        problems.append("validation failed")
    if files and files.get("errors"):
        problems.append("listing errors")
    status = "failed" if problems else "ok"
    status_text = (
        "; ".join(problems)
        if problems
        else "no unreadable version"
        + ("; validation passed" if valid_ok else "; not validated here")
    )
    body = [
        f"<h1>lakehouse {esc(d['name'])} <span class='muted'>{esc(data['uri'])}</span></h1>",
        banner(status, status_text),
        cards(
            {
                "latest version": v["latest"],
                "retained versions": v["retained"],
                "oldest retained": v["oldest_retained"]
                if v["oldest_retained"] is not None
                else "-",
                "tree depth": "damaged" if damaged else tree["depth"],
                "nodes / keys": "-" if damaged else f"{tree['nodes']} / {tree['keys']}",
                "files": files["total_count"] if files else "-",
                "bytes": format_bytes(files["total_bytes"]) if files else "-",
                "gc orphans (last)": gc_orphans if gc_orphans is not None else "-",
                "validation": "passed"
                if valid_ok
                else "FAILED"
                if valid_ok is False
                else "not run",
            }
        ),
        f"<p class='muted'>written {esc(format_time_millis(data['now_millis']))}; latest version created "
        f"{esc(format_time_millis(v['latest_created_at_millis']))}; retention "
        f"{esc(format_duration_millis(d['maximum_version_age_millis']))}, newest "
        f"{esc(d['minimum_versions_to_keep'])} always kept</p>",
        "<h2>Validation</h2>",
        *validation_parts,
        "<h2>Versions over time</h2>",
        "<div class='charts'>",
        f"<figure>{_timeline(plt, entries, data, compaction)}<figcaption>each root file by commit time; "
        "colour = what the version did; hollow = expired but still readable; orange square = pinned by an "
        "export</figcaption></figure>",
        ""
        if damaged
        else f"<figure>{_levels_chart(plt, tree)}<figcaption>tree at version {esc(tree['version'])}: nodes and "
        "write-buffer fill per level (100% = the node file is full)</figcaption></figure>",
        "</div>",
    ]
    if files:
        body.append(
            f"<h2>Files</h2><div class='charts'><figure>{_files_chart(plt, files)}<figcaption>"
            f"{esc(plural(files['total_count'], 'file'))}, {esc(format_bytes(files['total_bytes']))} "
            "under the root</figcaption></figure>"
        )
        body.append(
            "<div>"
            + table(
                ["kind", "files", "bytes", "size"],
                [
                    (k, s["count"], s["bytes"], format_bytes(s["bytes"]))
                    for k, s in files["by_kind"].items()
                    if s["count"]
                ],
                numeric=(1, 2, 3),
            )
            + "</div></div>"
        )
    body.append("<h2>Tree levels</h2>")
    if damaged:
        body.append(
            f"<p><b>damaged:</b> the tree of version {esc(tree['version'])} could not be walked: "
            f"{esc(damaged)}</p>"
        )
    else:
        body.append(tree_levels_table(tree["levels"]))
    body.append("<h2>gc</h2>")
    body.extend(gc_parts)
    body.append("<h2>Iceberg tables</h2>")
    body.extend(_table_maintenance_section(reports.get("table-maintenance")))
    if data.get("exports"):
        body.append("<h2>Exports</h2>")
        body.append(
            table(
                ["name", "version", "mode", "target"],
                [
                    (
                        e["name"],
                        e["version"] if e["version"] is not None else e["root"],
                        e["mode"] or "-",
                        e["target"] or "-",
                    )
                    for e in data["exports"]
                ],
            )
        )
    body.append(
        f"<h2>History <span class='muted'>(newest {min(len(entries), 50)} of {len(entries)})</span></h2>"
    )
    rows, classes = [], []
    for e in entries[:50]:
        state = e.state + (f" ({', '.join(e.pinned_by)})" if e.pinned_by else "")
        rows.append(
            (
                e.version,
                format_time_millis(e.created_at_millis),
                e.operation,
                state,
                format_bytes(e.root_bytes) if e.root_bytes is not None else "-",
                e.summary,
            )
        )
        classes.append(
            "fail" if e.state == "unreadable" else "warn" if e.state == "expired" else ""
        )
    body.append(
        table(
            ["version", "time", "operation", "state", "root", "what it did"],
            rows,
            numeric=(0, 4),
            row_classes=classes,
        )
    )
    body.append(
        f"<p class='muted'>validation {pill(valid_ok)} · generated by lakecore; self-contained, "
        "no network needed</p>"
    )
    return page(f"lakecore health: {d['name']}", body)


__all__ = ["latest_reports", "render_health_page"]
