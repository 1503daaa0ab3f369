"""``lakecore versions``, ``history``, ``describe``, ``get`` and ``tree``: reading a lakehouse.

Rules:

* They change nothing. ``describe``, ``get`` and ``tree`` read one version
  (``--version``/``--as-of``, default the latest); ``versions`` and ``history`` read the log of
  every version.
* A damaged version is shown, not raised on: ``versions`` lists an unreadable root as
  ``UNREADABLE`` (and names the repair when it is the newest), ``describe`` describes a damaged
  tree as damaged and exits ``ExitCode.DAMAGED`` with the next step.
* ``get`` of an absent key prints ``(absent)`` and exits ``ExitCode.NOT_FOUND``.
* ``describe --html`` and ``tree --html`` write one self-contained page (the ``[report]``
  extra), atomically, never into the lakehouse (``lakecore.contract.outputs``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from lakecore.cli.printing import emit, say
from lakecore.cli.shared_options import (
    add_version_options,
    lakehouse_uri,
    open_view,
    storage_options_of,
)
from lakecore.contract.option_types import output_file, time_millis
from lakecore.core.units import plural
from lakecore.errors import ExitCode, InvalidArgumentError
from lakecore.maintenance.damage import damage_next_step


def cmd_versions(args: argparse.Namespace) -> int:
    from lakecore.core.storage import Storage
    from lakecore.core.units import format_bytes, format_time_millis
    from lakecore.core.view import list_versions
    from lakecore.lakehouse.history import history

    # Not through open_lakehouse: the log must show a damaged latest version, not fail on it.
    storage = Storage(lakehouse_uri(args), storage_options_of(args))
    infos = list_versions(storage)
    if args.limit:
        infos = infos[: args.limit]
    operations = {e.version: e for e in history(storage, limit=len(infos) or None)}
    lines = []
    for info in infos:
        if not info.readable:
            lines.append(f"{info.version:>8}  UNREADABLE  {info.error}")
            continue
        assert info.created_at_millis is not None
        when = format_time_millis(info.created_at_millis)
        notes: list[str] = ["latest"] if info.state == "latest" else []
        if info.pinned_by:
            notes.append(f"pinned by export {', '.join(info.pinned_by)}")
        entry = operations.get(info.version)
        if entry is not None and entry.state == "expired":
            notes.append("expired, still readable")
        size = (
            format_bytes(entry.root_bytes)
            if entry is not None and entry.root_bytes is not None
            else "-"
        )
        lines.append(
            f"{info.version:>8}  {when}  {entry.operation if entry else '-':<11}  root {size:>9}  "
            f"{entry.summary if entry else ''}" + (f"  ({'; '.join(notes)})" if notes else "")
        )
    if infos and not infos[0].readable:
        lines.append(
            f"the newest root file is unreadable: run `lakecore -l {lakehouse_uri(args)} repair "
            "rollback --to-last-valid` to roll forward to the newest readable version"
        )
    data = []
    for info in infos:
        item = info.as_dict()
        entry = operations.get(info.version)
        if entry is not None:
            item.update(
                {
                    "operation": entry.operation,
                    "summary": entry.summary,
                    "root_bytes": entry.root_bytes,
                    "expired": entry.state == "expired",
                }
            )
        data.append(item)
    emit(args, "\n".join(lines), data)
    return ExitCode.OK


def _history_text(entries: list[Any], now_millis: int) -> str:
    from lakecore.core.units import format_age, format_bytes, format_time_millis

    if not entries:
        return "(no versions in that range)"
    lines = [
        f"{'version':>8}  {'time (UTC)':<23}  {'operation':<11}  {'state':<10}  {'root':>9}  what it did"
    ]
    for e in entries:
        when = (
            format_time_millis(e.created_at_millis)[:-4] if e.created_at_millis is not None else "-"
        )
        state = e.state + (f" ({', '.join(e.pinned_by)})" if e.pinned_by else "")
        size = format_bytes(e.root_bytes) if e.root_bytes is not None else "-"
        lines.append(
            f"{e.version:>8}  {when:<23}  {e.operation:<11}  {state:<10}  {size:>9}  {e.summary}"
        )
    newest = entries[0].created_at_millis
    if newest is not None:
        lines.append(f"newest shown: {format_age(now_millis, newest)}")
    return "\n".join(lines)


def cmd_history(args: argparse.Namespace) -> int:
    import time

    from lakecore.core.storage import Storage
    from lakecore.lakehouse.history import history

    now = int(time.time() * 1000)
    entries = history(
        Storage(lakehouse_uri(args), storage_options_of(args)),
        limit=args.limit,
        since_millis=args.since,
        now_millis=now,
    )
    emit(
        args,
        _history_text(entries, now),
        {"now_millis": now, "versions": [e.as_dict() for e in entries]},
    )
    return ExitCode.OK


def cmd_describe(args: argparse.Namespace) -> int:
    import time

    from lakecore.lakehouse.describe import describe, describe_text
    from lakecore.lakehouse.history import history

    view = open_view(args)
    now = int(time.time() * 1000)
    entries = history(view.storage, now_millis=now)
    # A damaged tree is described as damaged, not raised: the rest of the description, and the
    # health page, are what an operator wants to see of a damaged lakehouse.
    data = describe(view, entries, now_millis=now, damaged_tree_ok=True)
    if args.html:
        from lakecore.contract.outputs import OutputKind, write_text_atomically
        from lakecore.lakehouse.report.health import render_health_page

        page = render_health_page(data, entries, reports_dir=args.reports_dir)
        data["html_report"] = write_text_atomically(args.html, page, OutputKind.HTML_PAGE)
    text = describe_text(data)
    if args.html:
        text += f"\nhealth page: {data['html_report']}"
    emit(args, text, data)
    damaged = data["tree"].get("damaged")
    if damaged:
        say(
            f"lakecore: the tree of version {data['tree']['version']} is damaged: {damaged}. "
            f"{damage_next_step(lakehouse_uri(args))}",
            error=True,
        )
        return ExitCode.DAMAGED
    return ExitCode.OK


def cmd_get(args: argparse.Namespace) -> int:
    from lakecore.core import keys as K

    view = open_view(args)
    if args.key is not None:
        key = args.key
    elif args.namespace is not None:
        key = (
            K.table_key(args.namespace, args.table, view.lakehouse_def)
            if args.table
            else K.namespace_key(args.namespace, view.lakehouse_def)
        )
    else:
        raise InvalidArgumentError("get needs a KEY, or --namespace [--table]")
    value = view.get(key)
    emit(
        args,
        value if value is not None else "(absent)",
        {"version": view.version, "key": key, "pvalue": value},
    )
    return ExitCode.OK if value is not None else ExitCode.NOT_FOUND


def cmd_tree(args: argparse.Namespace) -> int:
    from lakecore.lakehouse.treeinfo import describe_tree, to_dot

    view = open_view(args)
    summary = describe_tree(view)
    if args.dot:
        say(to_dot(view, summary, max_levels=args.max_levels))
        return ExitCode.OK
    if args.html:
        from lakecore.contract.outputs import OutputKind, write_text_atomically
        from lakecore.lakehouse.report.treepage import render_tree_page

        page = render_tree_page(view, summary)
        summary["html_report"] = write_text_atomically(args.html, page, OutputKind.HTML_PAGE)
    levels = "\n".join(
        f"  level {lvl['depth']}: {plural(lvl['nodes'], 'node')}, fan-out {lvl['fanout_min']}-{lvl['fanout_max']} "
        f"(avg {lvl['fanout_avg']:.1f}), keys {lvl['keys']}, buffer fill avg {lvl['buffer_fill_avg']:.1%} "
        f"max {lvl['buffer_fill_max']:.1%}"
        for lvl in summary["levels"]
    )
    text = (
        f"version {view.version}: depth {summary['depth']}, {plural(summary['nodes'], 'node')}, "
        f"{plural(summary['keys'], 'key')}, {plural(summary['messages'], 'buffered message')}\n{levels}"
    )
    if args.html:
        text += f"\ntree page: {summary['html_report']}"
    emit(args, text, summary)
    return ExitCode.OK


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``versions``, ``history``, ``describe``, ``get`` and ``tree`` commands; ``subcommand(sub, name, help, ...)`` makes a subparser with the command
    line's shared options (``--json``, ``-l/--lakehouse``)."""
    p = subcommand(
        sub, "versions", "the version log, newest first: time, operation, root size, state"
    )
    p.add_argument("--limit", type=int, metavar="N", help="only the newest N versions")
    p.set_defaults(func=cmd_versions)

    p = subcommand(
        sub,
        "history",
        "what each version did (DESCRIBE HISTORY), newest first, derived from the tree",
        description="Each version with its time, what it did relative to its parent (namespaces and "
        "tables created, dropped or updated; flush; rollback; export; definition change), its root "
        "file's size and its state: latest, retained, pinned (by an export), expired (past retention, "
        "still readable until compact-versions runs) or unreadable.",
    )
    p.add_argument("--limit", type=int, metavar="N", help="only the newest N versions")
    p.add_argument(
        "--since",
        type=time_millis,
        metavar="TIME",
        help="only versions created at or after TIME (ISO-8601, UTC if no zone; or epoch millis)",
    )
    p.set_defaults(func=cmd_history)

    p = subcommand(
        sub,
        "describe",
        "the lakehouse at a glance: definition, retention, exports, versions, tree, files",
    )
    add_version_options(p, "describe")
    p.add_argument(
        "--html",
        metavar="PATH",
        type=output_file,
        help="also write the health page (one self-contained HTML file) "
        "here; needs the [report] extra",
    )
    p.add_argument(
        "--reports-dir",
        metavar="DIR",
        help="where the jobs' JSON reports are (gc's orphan count, validate's result go on the page)",
    )
    p.set_defaults(func=cmd_describe)

    p = subcommand(sub, "get", "the pvalue of a key (or of a namespace's or table's key)")
    p.add_argument(
        "key", nargs="?", help="a raw object key (padded as stored); or use --namespace/--table"
    )
    p.add_argument("--namespace", help="the namespace whose key to look up")
    p.add_argument("--table", help="with --namespace: the table whose key to look up")
    add_version_options(p)
    p.set_defaults(func=cmd_get)

    p = subcommand(sub, "tree", "the node structure of a version")
    add_version_options(p)
    output = p.add_mutually_exclusive_group()
    output.add_argument(
        "--dot",
        action="store_true",
        help="print Graphviz dot: nodes ranked by level, key ranges in the labels",
    )
    output.add_argument(
        "--html",
        metavar="PATH",
        type=output_file,
        help="write an interactive, collapsible tree page here",
    )
    p.add_argument(
        "--max-levels",
        type=int,
        default=3,
        metavar="N",
        help="--dot: draw the top N levels, the rest as counts (default 3)",
    )
    p.set_defaults(func=cmd_tree)


__all__ = ["add_commands", "cmd_describe", "cmd_get", "cmd_history", "cmd_tree", "cmd_versions"]
