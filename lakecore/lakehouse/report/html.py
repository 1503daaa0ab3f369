"""The pieces every lakecore HTML page shares: one stylesheet, escaping, a status banner, tables.

Pages are single self-contained files: inline CSS, inline SVG or data: images, no script or
font from the network (a page opened from an archived report must look the same offline).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from lakecore.core.display import escape_for_display

#: In the head of every page: the mark by which the command line knows its own pages, and
#: replaces one (``lakecore.contract.outputs``) where it would refuse another file.
GENERATOR_META: Final = "<meta name='generator' content='lakecore'>"
#: The first rule of ``STYLE``: the mark of the pages written before ``GENERATOR_META``.
LEGACY_PAGE_MARK: Final = ":root { --ok: #17803d; --warn: #b26a00; --fail: #c0261f;"

STYLE = """
:root { --ok: #17803d; --warn: #b26a00; --fail: #c0261f; --muted: #667085; --line: #d0d5dd; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1d2939;
       background: #f9fafb; }
main { max-width: 1180px; margin: 0 auto; padding: 1.2em 1.5em 3em; }
h1 { font-size: 1.45em; margin: 0.2em 0 0.4em; word-break: break-all; }
h2 { font-size: 1.15em; margin: 1.6em 0 0.5em; border-bottom: 1px solid var(--line); padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; width: 100%; background: #fff; font-size: 0.92em; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; font-weight: 600; }
td.nowrap { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.92em;
       white-space: pre-wrap; word-break: break-all; }
.banner { border-radius: 8px; padding: 0.9em 1.2em; margin: 0.6em 0 1em; color: #fff; font-size: 1.05em; }
.banner b { font-size: 1.35em; letter-spacing: 0.04em; margin-right: 0.6em; }
.banner.ok { background: var(--ok); } .banner.failed, .banner.fail { background: var(--fail); }
.banner.warn, .banner.noop, .banner.interrupted, .banner.conflict { background: var(--warn); }
.pill { display: inline-block; border-radius: 999px; padding: 1px 9px; font-size: 0.85em; font-weight: 600;
        color: #fff; }
.pill.ok { background: var(--ok); } .pill.fail { background: var(--fail); } .pill.warn { background: var(--warn); }
.pill.muted { background: var(--muted); }
tr.fail td { background: #fef3f2; } tr.warn td { background: #fffaeb; }
.muted { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 0.7em; margin: 0.6em 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 0.6em 0.9em; }
.card .v { font-size: 1.35em; font-weight: 650; } .card .k { color: var(--muted); font-size: 0.85em; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 1em; }
figure { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 0.5em; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.85em; padding: 0.2em 0.4em; }
details { margin-left: 1.1em; } details > summary { cursor: pointer; padding: 1px 0; }
summary code { font-size: 0.9em; }
"""


def esc(value: Any) -> str:
    """``value`` as HTML text, with what a browser would act on rather than show (a
    right-to-left override in a name) escaped as the terminal shows it (``lakecore.core.display``)."""
    return html.escape(escape_for_display("" if value is None else str(value)))


def page(title: str, body: Iterable[str]) -> str:
    """A whole page: head with the stylesheet, ``body`` inside ``<main>``."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html lang='en'><head><meta charset='utf-8'>",
            GENERATOR_META,
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body><main>",
            *body,
            "</main></body></html>",
        ]
    )


def banner(status: str, text: str) -> str:
    """The coloured status line at the top of a page (``ok``, ``failed``, ``noop``, ...)."""
    kind = (
        status
        if status in ("ok", "failed", "noop", "interrupted", "conflict", "warn")
        else "failed"
    )
    return f"<div class='banner {kind}' role='status'><b>{esc(status.upper())}</b>{esc(text)}</div>"


def pill(ok: bool | None, yes: str = "passed", no: str = "FAILED", unknown: str = "not run") -> str:
    if ok is None:
        return f"<span class='pill muted'>{esc(unknown)}</span>"
    return f"<span class='pill {'ok' if ok else 'fail'}'>{esc(yes if ok else no)}</span>"


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    raw: bool = False,
    numeric: Sequence[int] = (),
    row_classes: Sequence[str] | None = None,
) -> str:
    """An HTML table; cells are escaped unless ``raw``; ``numeric`` column indexes align right."""
    head = "".join(
        f"<th class='{'num' if i in numeric else ''}'>{esc(h)}</th>" for i, h in enumerate(headers)
    )
    out = [f"<table><tr>{head}</tr>"]
    for n, row in enumerate(rows):
        cls = f" class='{row_classes[n]}'" if row_classes is not None and row_classes[n] else ""
        cells = "".join(
            f"<td class='{'num' if i in numeric else ''}'>{cell if raw else esc(cell)}</td>"
            for i, cell in enumerate(row)
        )
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def tree_levels_table(levels: Iterable[Mapping[str, Any]]) -> str:
    """The tree's levels (``lakecore tree --json``'s ``levels``), one row each: the same table on
    the tree page and on the health page."""
    return table(
        ["level", "nodes", "fan-out (min-max, avg)", "keys", "buffered", "buffer fill avg", "max"],
        [
            (
                level["depth"],
                level["nodes"],
                f"{level['fanout_min']}-{level['fanout_max']}, {level['fanout_avg']:.1f}",
                level["keys"],
                level["messages"],
                f"{level['buffer_fill_avg']:.0%}",
                f"{level['buffer_fill_max']:.0%}",
            )
            for level in levels
        ],
        numeric=(1, 3, 4, 5, 6),
    )


def key_values(items: Mapping[str, Any]) -> str:
    return table(["", ""], [(k, v) for k, v in items.items()]).replace(
        "<tr><th class=''></th><th class=''></th></tr>", ""
    )


def cards(items: Mapping[str, Any]) -> str:
    return (
        "<div class='cards'>"
        + "".join(
            f"<div class='card'><div class='v'>{esc(v)}</div><div class='k'>{esc(k)}</div></div>"
            for k, v in items.items()
        )
        + "</div>"
    )


__all__ = [
    "GENERATOR_META",
    "LEGACY_PAGE_MARK",
    "STYLE",
    "banner",
    "cards",
    "esc",
    "key_values",
    "page",
    "pill",
    "table",
    "tree_levels_table",
]
