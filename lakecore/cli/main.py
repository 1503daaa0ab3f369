# PYTHON_ARGCOMPLETE_OK
"""The ``lakecore`` command line.

Every command prints a short human summary, or JSON with ``--json``. Errors are one line on
stderr and an exit code. The codes are defined once, in ``lakecore.errors.ExitCode``, with the
retry rule of each; ``lakecore --help`` prints them, and the README's "Exit codes" section
explains each one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lakecore.cli import lookup as lookup_cli
from lakecore.cli import maintenance as maintenance_cli
from lakecore.cli import serve as serve_cli
from lakecore.cli.argparsing import OneLineArgumentParser, output_file
from lakecore.cli.args import (
    add_json_option,
    add_version_options,
    duration_millis,
    emit,
    emit_error,
    key_value,
    lakehouse_uri,
    open_lakehouse,
    open_view,
    refuse_outputs_in_lakehouse,
    resolve_version,
    say,
    storage_options_of,
    time_millis,
)
from lakecore.errors import (
    CorruptFileError,
    ExitCode,
    InvalidArgumentError,
    InvalidLocationError,
    LakecoreError,
    NotFoundError,
    TreeStructureError,
    exit_code_help,
)
from lakecore.maintenance.damage import damage_next_step, with_next_step
from lakecore.units import plural

if TYPE_CHECKING:
    from lakecore.lakehouse.lakehouse import ExportMode


def _column(text: str) -> dict[str, Any]:
    """``ID:NAME:TYPE[:nullable|required]``, e.g. ``1:id:INT8:required``."""
    parts = text.split(":")
    if len(parts) not in (3, 4) or not parts[0].isdigit():
        raise argparse.ArgumentTypeError(
            f"column {text!r} must be ID:NAME:TYPE[:nullable|required]"
        )
    nullable = True
    if len(parts) == 4:
        if parts[3] not in ("nullable", "required"):
            raise argparse.ArgumentTypeError(
                f"column {text!r}: the 4th part must be nullable or required"
            )
        nullable = parts[3] == "nullable"
    return {"id": int(parts[0]), "name": parts[1], "type": parts[2].upper(), "nullable": nullable}


# -- commands ------------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    from lakecore.lakehouse import Lakehouse

    fields = {
        name: getattr(args, name)
        for name in (
            "order",
            "namespace_name_max_size_bytes",
            "table_name_max_size_bytes",
            "file_name_max_size_bytes",
            "node_file_max_size_bytes",
            "maximum_version_age_millis",
            "minimum_versions_to_keep",
        )
        if getattr(args, name) is not None
    }
    if args.maximum_version_age is not None:
        fields["maximum_version_age_millis"] = args.maximum_version_age
    named = getattr(args, "lakehouse", None)
    if args.uri and named and args.uri != named:
        raise InvalidArgumentError(
            f"init: two places given, {args.uri} and --lakehouse {named}; give one"
        )
    # ``lakecore -l URI init`` as every other command is written, or the positional URI
    try:
        uri = args.uri or lakehouse_uri(args)
    except InvalidArgumentError:
        raise InvalidArgumentError(
            "init: say where to create the lakehouse: lakecore init PATH_OR_URI"
        ) from None
    lh = Lakehouse.create(
        uri,
        name=args.name,
        storage_options=storage_options_of(args),
        properties=dict(args.property or []),
        **fields,
    )
    d = lh.lakehouse_def
    emit(
        args,
        f"created lakehouse {d.name!r} at {lh.uri} (version 0, order {d.order})",
        {"uri": lh.uri, "version": lh.version, "name": d.name, "order": d.order},
    )
    return ExitCode.OK


PAST_TENSE = {
    "create": "created",
    "drop": "dropped",
    "set-properties": "set properties of",
    "unset-properties": "unset properties of",
}


def _property_changes(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    if args.action == "set-properties":
        props = dict(args.properties)
        if len(props) != len(args.properties):
            raise InvalidArgumentError("set-properties names the same key twice")
        return props, []
    return {}, list(dict.fromkeys(args.keys))


def _check_unset(kind: str, name: str, current: Any, keys: list[str]) -> None:
    missing = [k for k in keys if k not in current]
    if missing:
        raise NotFoundError(
            f"{kind} {name} has no propert{'y' if len(missing) == 1 else 'ies'} "
            f"{', '.join(map(repr, missing))} to unset (it has: {', '.join(sorted(current)) or 'none'})"
        )


def cmd_namespace(args: argparse.Namespace) -> int:
    if args.action == "list":
        view = open_view(args)
        # Every namespace by its full name (a.b.c); with --parent only its direct children.
        names = (
            view.list_namespaces() if args.parent is None else view.child_namespaces(args.parent)
        )
        listing: dict[str, Any] = {"version": view.version, "namespaces": names}
        if args.parent is not None:
            listing["parent"] = args.parent
        emit(args, "\n".join(names) if names else "(no namespaces)", listing)
        return ExitCode.OK
    if args.action == "show":
        view = open_view(args)
        definition = view.load_namespace(args.namespace)
        props = dict(definition.properties)
        emit(
            args,
            f"namespace {definition.name}\n"
            + "".join(f"  {k} = {v}\n" for k, v in sorted(props.items())).rstrip(),
            {"version": view.version, "name": definition.name, "properties": props},
        )
        return ExitCode.OK
    lh = open_lakehouse(args)
    before = lh.version
    data: dict[str, Any] = {}
    with lh.transaction() as tx:
        if args.action == "create":
            tx.create_namespace(
                args.namespace, properties=dict(args.property or []), parents=args.parents
            )
        elif args.action == "drop":
            tx.drop_namespace(args.namespace)
        else:
            props, unset = _property_changes(args)
            current = dict(tx.load_namespace(args.namespace).properties)
            _check_unset("namespace", repr(args.namespace), current, unset)
            after = {**{k: v for k, v in current.items() if k not in unset}, **props}
            data["properties"] = after
            if after != current:
                tx.update_namespace(args.namespace, properties=props, remove_properties=unset)
    committed = lh.version != before
    verb = PAST_TENSE[args.action]
    if committed:
        human = f"{verb} namespace {args.namespace!r} in version {lh.version}"
    else:
        human = f"namespace {args.namespace!r} already has these properties; nothing committed (version {lh.version})"
    emit(
        args,
        human,
        {
            "version": lh.version,
            "namespace": args.namespace,
            "action": args.action,
            "committed": committed,
            **data,
        },
    )
    return ExitCode.OK


def cmd_table(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from lakecore.lakehouse.history import display_name  # deferred: --help stays cheap

    if args.action == "list":
        view = open_view(args)
        names = view.list_tables(args.namespace)
        emit(
            args,
            "\n".join(names) if names else "(no tables)",
            {"version": view.version, "tables": names},
        )
        return ExitCode.OK
    if args.action == "show":
        view = open_view(args)
        definition = view.load_table(args.namespace, args.table)
        data = MessageToDict(definition, preserving_proto_field_name=True)
        from lakecore.defs import pb

        columns = ", ".join(
            f"{c.name} {pb.DataType.Name(c.type)}" for c in definition.schema.columns
        )
        emit(
            args,
            f"table {args.namespace}.{definition.name} ({definition.table_format}, {definition.table_type})\n"
            f"  columns: {columns or '-'}\n  properties: {dict(definition.properties)}\n"
            f"  format properties: {dict(definition.format_properties)}",
            # Always present, also when empty (MessageToDict leaves empty maps out).
            {
                "version": view.version,
                **data,
                "format_properties": dict(definition.format_properties),
            },
        )
        return ExitCode.OK
    if args.action == "create" and not args.column:
        raise InvalidArgumentError(
            f"table create {args.namespace} {args.table}: give at least one --column ID:NAME:TYPE (e.g. 1:id:INT8)"
        )
    lh = open_lakehouse(args)
    before = lh.version
    changed: dict[str, Any] = {}
    with lh.transaction() as tx:
        if args.action == "create":
            tx.create_table(
                args.namespace,
                args.table,
                columns=args.column or [],
                table_format=args.format,
                table_type=args.type,
                properties=dict(args.property or []),
            )
        elif args.action == "drop":
            tx.drop_table(args.namespace, args.table)
        else:
            props, unset = _property_changes(args)
            current = dict(tx.load_table(args.namespace, args.table).properties)
            _check_unset("table", display_name(args.namespace, args.table), current, unset)
            after = {**{k: v for k, v in current.items() if k not in unset}, **props}
            changed["properties"] = after
            if after != current:
                tx.update_table(
                    args.namespace, args.table, properties=props, remove_properties=unset
                )
    committed = lh.version != before
    name = display_name(args.namespace, args.table)
    if committed:
        human = f"{PAST_TENSE[args.action]} table {name} in version {lh.version}"
    else:
        human = (
            f"table {name} already has these properties; nothing committed (version {lh.version})"
        )
    emit(
        args,
        human,
        {
            "version": lh.version,
            "namespace": args.namespace,
            "table": args.table,
            "action": args.action,
            "committed": committed,
            **changed,
        },
    )
    return ExitCode.OK


def cmd_versions(args: argparse.Namespace) -> int:
    from lakecore.lakehouse.history import history
    from lakecore.storage import Storage
    from lakecore.units import format_bytes, format_time_millis
    from lakecore.view import list_versions

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
    from lakecore.units import format_age, format_bytes, format_time_millis

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

    from lakecore.lakehouse.history import history
    from lakecore.storage import Storage

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
        from lakecore.cli.outputs import OutputKind, write_text_atomically
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
    from lakecore import keys as K

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
        from lakecore.cli.outputs import OutputKind, write_text_atomically
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


def cmd_rollback(args: argparse.Namespace) -> int:
    lh = open_lakehouse(args)
    before = lh.version
    version, committed = lh.rollback_if_needed(to_version=args.to_version)
    if committed:
        human = f"rolled back to the content of version {args.to_version}: new version {version} (was {before})"
    else:
        human = (
            f"version {version} already has the content of version {args.to_version}; "
            f"nothing committed (version {version})"
        )
    emit(
        args,
        human,
        {
            "version": version,
            "rolled_back_to": args.to_version,
            "previous": before,
            "committed": committed,
        },
    )
    return ExitCode.OK


EXPORT_ACTIONS = ("create", "list", "drop")


def _export_action(args: argparse.Namespace) -> tuple[str, str | None]:
    """``export create NAME``, ``export list``, ``export drop NAME``, and the older
    ``export NAME`` (= create; name an export ``list``, ``drop`` or ``create`` with ``export create``)."""
    first, second = args.action_or_name, args.name
    action, name = (first, second) if first in EXPORT_ACTIONS else ("create", first)
    if first not in EXPORT_ACTIONS and second is not None:
        raise InvalidArgumentError(
            f"export {first} {second}: unknown action {first!r}; use export create NAME, export list or export drop NAME"
        )
    if action == "list" and name is not None:
        raise InvalidArgumentError(
            f"export list takes no NAME (got {name!r}); to drop it use export drop {name}"
        )
    if action != "list" and name is None:
        raise InvalidArgumentError(f"export {action} needs the export's NAME")
    if action != "create":
        given = [
            flag
            for flag, value in (
                ("--mode", args.mode),
                ("--target", args.target),
                ("--version", args.version),
                ("--as-of", args.as_of),
            )
            if value is not None
        ]
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} to export create, not to export {action}"
            )
    return action, name


def cmd_export(args: argparse.Namespace) -> int:
    action, name = _export_action(args)
    lh = open_lakehouse(args)
    if action == "list":
        exports = lh.list_exports()
        lines = [
            f"{e.name}  version {e.version if e.version is not None else e.root}  {e.mode or '-'}  "
            f"{e.target or '-'}"
            for e in exports
        ]
        emit(
            args,
            "\n".join(lines) if lines else "(no exports)",
            {"version": lh.version, "exports": [e.__dict__ for e in exports]},
        )
        return ExitCode.OK
    assert name is not None
    if action == "drop":
        pinned = {e.name: e.version for e in lh.list_exports()}.get(name)
        version = lh.drop_export(name)
        emit(
            args,
            f"dropped export {name!r} in version {version}; version {pinned} is no longer pinned by it "
            "(version expiry and gc may now collect it)",
            {"version": version, "name": name, "action": "drop", "unpinned_version": pinned},
        )
        return ExitCode.OK
    mode: ExportMode = args.mode or "minimal"
    version = lh.export_snapshot(name, mode=mode, target=args.target, version=resolve_version(args))
    emit(
        args,
        f"exported snapshot {name!r} ({mode}); recorded in version {version}",
        {"version": version, "name": name, "mode": mode, "target": args.target},
    )
    return ExitCode.OK


# -- settings ------------------------------------------------------------------------------------


def _version_duration(text: str) -> tuple[int, int]:
    """``V=DURATION``, e.g. ``12=30d``."""
    version, sep, duration = text.partition("=")
    if not sep or not version.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not VERSION=DURATION, e.g. 12=30d")
    return int(version), duration_millis(f"the age override of version {version.strip()}")(duration)


def _version_number(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a version number")
    return int(text)


def _settings_data(lh: Any) -> dict[str, Any]:
    d = lh.lakehouse_def
    return {
        "version": lh.version,
        "name": d.name,
        "maximum_version_age_millis": d.maximum_version_age_millis,
        "minimum_versions_to_keep": d.minimum_versions_to_keep,
        "maximum_version_age_millis_overrides": {
            str(k): v for k, v in sorted(d.maximum_version_age_millis_overrides.items())
        },
        "properties": dict(sorted(d.properties.items())),
        "read_only": lh.read_only_reason,
    }


def _settings_text(data: dict[str, Any]) -> str:
    from lakecore.units import format_duration_millis

    lines = [
        f"lakehouse {data['name']!r} at version {data['version']}",
        f"  maximum version age     {format_duration_millis(data['maximum_version_age_millis'])}",
        f"  minimum versions kept   {data['minimum_versions_to_keep']}",
    ]
    for version, age in data["maximum_version_age_millis_overrides"].items():
        lines.append(f"  age override            version {version}: {format_duration_millis(age)}")
    for key, value in data["properties"].items():
        lines.append(f"  property                {key} = {value}")
    if data["read_only"]:
        lines.append(f"  read-only: {data['read_only']}")
    return "\n".join(lines)


def cmd_settings(args: argparse.Namespace) -> int:
    lh = open_lakehouse(args)
    if args.action == "show":
        data = _settings_data(lh)
        emit(args, _settings_text(data), data)
        return ExitCode.OK
    age = (
        args.maximum_version_age
        if args.maximum_version_age is not None
        else args.maximum_version_age_millis
    )
    if (
        age is None
        and args.minimum_versions_to_keep is None
        and not args.version_age_override
        and not args.unset_version_age_override
        and not args.property
        and not args.unset_property
    ):
        raise InvalidArgumentError(
            "settings set needs at least one change: --maximum-version-age, --minimum-versions-to-keep, "
            "--version-age-override, --unset-version-age-override, --property or --unset-property"
        )
    overrides = dict(args.version_age_override or [])
    if len(overrides) != len(args.version_age_override or []):
        raise InvalidArgumentError("--version-age-override names the same version twice")
    change = lh.update_settings(
        maximum_version_age_millis=age,
        minimum_versions_to_keep=args.minimum_versions_to_keep,
        set_version_age_overrides=overrides,
        unset_version_age_overrides=args.unset_version_age_override or [],
        set_properties=dict(args.property or []),
        unset_properties=args.unset_property or [],
    )
    data = {**_settings_data(lh), "committed": change.committed}
    if change.committed:
        head = f"settings changed in version {change.version}"
    else:
        head = (
            f"settings unchanged: they already hold; nothing committed (version {change.version})"
        )
    emit(args, head + "\n" + _settings_text(data), data)
    return ExitCode.OK


def cmd_fsck(args: argparse.Namespace) -> int:
    from lakecore.cli.progress import Progress
    from lakecore.lakehouse.version_check import check_version, unreadable_version
    from lakecore.locations import root_node_file_name
    from lakecore.storage import Storage
    from lakecore.view import open_version, root_file_versions

    uri = lakehouse_uri(args)
    options = storage_options_of(args)
    storage = Storage(uri, options)
    if args.all:
        # Every root file, readable or not: a damaged version is a finding, not a crash.
        versions = sorted(root_file_versions(storage), reverse=True)
    else:
        chosen = resolve_version(args)
        versions = [chosen if chosen is not None else open_lakehouse(args).version]
    results = []
    with Progress("fsck", len(versions)) as progress:
        for version in versions:
            try:
                view = open_version(uri, version, storage_options=options)
            except NotFoundError as exc:
                if not args.all:
                    raise
                if storage.exists(root_node_file_name(version)):  # its definition is missing
                    results.append(unreadable_version(version, exc.one_line()))
                progress.advance()  # else: expired since the listing
                continue
            except (CorruptFileError, TreeStructureError, InvalidLocationError) as exc:
                results.append(unreadable_version(version, exc.one_line()))
            else:
                results.append(check_version(view, deep=args.deep))
            progress.advance()
    bad = [r for r in results if not r.ok]
    # Without --deep only the tree is read: say so, or "clean" hides a definition file lost
    # from a retained version (a table that then cannot be shown).
    verdict = (
        f"{plural(len(bad), 'version')} with violations"
        if bad
        else "clean"
        if args.deep
        else "the tree is clean (--deep also reads every definition file)"
    )
    lines = [
        f"checked {plural(len(results), 'version')}, "
        f"{plural(sum(r.report.nodes_checked for r in results), 'node')}: {verdict}"
    ]
    for r in bad:
        lines.extend(f"  v{r.version} {v}" for v in r.violations[:20])
    emit(
        args,
        "\n".join(lines),
        {
            "versions": [
                {
                    "version": r.version,
                    "ok": r.ok,
                    "nodes": r.report.nodes_checked,
                    "violations": [v.as_dict() for v in r.violations],
                }
                for r in results
            ],
            "ok": not bad,
        },
    )
    return ExitCode.OK if not bad else ExitCode.VIOLATIONS


def cmd_repair(args: argparse.Namespace) -> int:
    from lakecore.lakehouse import repair
    from lakecore.storage import Storage

    storage = Storage(lakehouse_uri(args), storage_options_of(args))

    def step(line: str) -> None:
        if not args.json:
            say(f"lakecore repair: {line}")

    if args.action == "rebuild-hint":
        outcome = repair.rebuild_hint(storage, apply=args.yes, say=step)
    elif args.action == "drop-damaged":
        outcome = repair.drop_damaged(storage, apply=args.yes, say=step)
    else:
        if args.to_version is None and not args.to_last_valid:
            raise InvalidArgumentError("repair rollback needs --to-version V or --to-last-valid")
        outcome = repair.rollback(
            storage,
            to_version=args.to_version,
            to_last_valid=args.to_last_valid,
            apply=args.yes,
            say=step,
        )
    if outcome.error is not None:
        if args.json:
            emit(args, "", {**outcome.as_dict(), "error": outcome.error})
        say(f"lakecore: {outcome.error}", error=True)
        return outcome.exit_code
    emit(args, "\n".join(outcome.summary) or outcome.status, outcome.as_dict())
    return ExitCode.OK


# -- parser ----------------------------------------------------------------------------------------


def _version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"lakecore {version('lakecore')}"
    except PackageNotFoundError:
        return "lakecore (not installed as a package)"


def _sub(actions: Any, name: str, help_text: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand with ``--json`` and ``-l/--lakehouse`` of its own: ``lakecore versions -l
    lake`` was 'unrecognized arguments: -l lake' (the global options went first only)."""
    p: argparse.ArgumentParser = actions.add_parser(
        name, help=help_text, description=kwargs.pop("description", help_text), **kwargs
    )
    add_json_option(p)
    p.add_argument(
        "-l",
        "--lakehouse",
        default=argparse.SUPPRESS,
        help="lakehouse root URI (or LAKECORE_LAKEHOUSE); before the command or after it",
    )
    return p


def _properties_actions(actions: Any, kind: str, positionals: list[tuple[str, str]]) -> None:
    a = _sub(
        actions,
        "set-properties",
        f"set {kind} properties (merged into the current ones); "
        "a change that changes nothing commits nothing",
    )
    for name, help_text in positionals:
        a.add_argument(name, help=help_text)
    a.add_argument(
        "properties", nargs="+", type=key_value, metavar="KEY=VALUE", help="the properties to set"
    )
    a = _sub(actions, "unset-properties", f"remove {kind} properties (each must be set)")
    for name, help_text in positionals:
        a.add_argument(name, help=help_text)
    a.add_argument("keys", nargs="+", metavar="KEY", help="the property keys to remove")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="lakecore",
        description="TrinityLake lakehouse catalog tool",
        epilog=exit_code_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-V",
        "--version",
        action="version",
        version=_version_text(),
        help="print lakecore's version and exit",
    )
    parser.add_argument("-l", "--lakehouse", help="lakehouse root URI (or LAKECORE_LAKEHOUSE)")
    parser.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="storage option, e.g. endpoint_url=http://127.0.0.1:5000, region=eu-west-1, "
        "anon=true (S3 also reads AWS_ENDPOINT_URL and the usual AWS_* variables)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print JSON instead of a summary; errors too, as {"error": ..., "exit_code": ...}',
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _sub(sub, "init", "create a lakehouse")
    p.add_argument(
        "uri",
        nargs="?",
        help="where to create it: a path or a URI such as s3://bucket/lake (default: -l/--lakehouse, "
        "else LAKECORE_LAKEHOUSE)",
    )
    p.add_argument("--name", default="lakehouse", help="the lakehouse's name (default: lakehouse)")
    p.add_argument("--order", type=int, help="the tree's order: the most children a node may have")
    p.add_argument(
        "--namespace-name-max-size-bytes",
        dest="namespace_name_max_size_bytes",
        type=int,
        metavar="N",
        help="the longest namespace name, in UTF-8 bytes (fixed for the lakehouse's life)",
    )
    p.add_argument(
        "--table-name-max-size-bytes",
        dest="table_name_max_size_bytes",
        type=int,
        metavar="N",
        help="the longest table name, in UTF-8 bytes (fixed for the lakehouse's life)",
    )
    p.add_argument(
        "--file-name-max-size-bytes",
        dest="file_name_max_size_bytes",
        type=int,
        metavar="N",
        help="the longest file name lakecore may write",
    )
    p.add_argument(
        "--node-file-max-size-bytes",
        dest="node_file_max_size_bytes",
        type=int,
        metavar="N",
        help="the largest node file; a fuller write buffer is flushed down",
    )
    p.add_argument(
        "--minimum-versions-to-keep",
        dest="minimum_versions_to_keep",
        type=int,
        metavar="N",
        help="the newest N versions never expire, whatever their age",
    )
    _add_age_options(p)
    p.add_argument(
        "--property",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="a lakehouse property (repeatable)",
    )
    p.set_defaults(func=cmd_init)

    p = _sub(
        sub, "namespace", "create, drop, list or show namespaces; set or unset their properties"
    )
    actions = p.add_subparsers(
        dest="action",
        required=True,
        metavar="{create,drop,list,show,set-properties,unset-properties}",
    )
    a = _sub(actions, "create", "create a namespace (a.b is b inside a)")
    a.add_argument("namespace", help="the namespace name; levels joined with '.', e.g. sales.eu")
    a.add_argument(
        "--parents",
        action="store_true",
        help="create the missing parents too (with no properties), as mkdir -p; without it a "
        "missing parent is only implied (listed, but holding no tables or properties)",
    )
    a.add_argument(
        "--property",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="a property (repeatable)",
    )
    a = _sub(actions, "drop", "drop an empty namespace (no tables, no namespaces inside)")
    a.add_argument("namespace", help="the namespace name")
    a = _sub(actions, "list", "every namespace by its full name, sorted; or a namespace's children")
    a.add_argument(
        "--parent",
        metavar="NAMESPACE",
        help="list only the direct children of NAMESPACE (e.g. sales for sales.eu, sales.us)",
    )
    add_version_options(a)
    a = _sub(actions, "show", "a namespace and its properties")
    a.add_argument("namespace", help="the namespace name")
    add_version_options(a)
    _properties_actions(actions, "namespace", [("namespace", "the namespace name")])
    p.set_defaults(func=cmd_namespace)

    p = _sub(sub, "table", "create, drop, list or show tables; set or unset their properties")
    actions = p.add_subparsers(
        dest="action",
        required=True,
        metavar="{create,drop,list,show,set-properties,unset-properties}",
    )
    a = _sub(actions, "create", "create a table")
    a.add_argument("namespace", help="the namespace it goes in")
    a.add_argument("table", help="the table name")
    a.add_argument(
        "--column",
        action="append",
        type=_column,
        metavar="ID:NAME:TYPE[:nullable|required]",
        help="a column, e.g. 1:id:INT8:required (repeatable; at least one)",
    )
    a.add_argument("--format", default="ICEBERG", help="table format (default ICEBERG)")
    a.add_argument("--type", default="MANAGED", help="table type (default MANAGED)")
    a.add_argument(
        "--property",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="a property (repeatable)",
    )
    a = _sub(actions, "drop", "drop a table")
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    a = _sub(actions, "list", "the tables of a namespace, sorted")
    a.add_argument("namespace", help="the namespace")
    add_version_options(a)
    a = _sub(actions, "show", "a table's definition")
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    add_version_options(a)
    _properties_actions(
        actions, "table", [("namespace", "the table's namespace"), ("table", "the table name")]
    )
    p.set_defaults(func=cmd_table)

    p = _sub(sub, "versions", "the version log, newest first: time, operation, root size, state")
    p.add_argument("--limit", type=int, metavar="N", help="only the newest N versions")
    p.set_defaults(func=cmd_versions)

    p = _sub(
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

    p = _sub(
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

    p = _sub(sub, "get", "the pvalue of a key (or of a namespace's or table's key)")
    p.add_argument(
        "key", nargs="?", help="a raw object key (padded as stored); or use --namespace/--table"
    )
    p.add_argument("--namespace", help="the namespace whose key to look up")
    p.add_argument("--table", help="with --namespace: the table whose key to look up")
    add_version_options(p)
    p.set_defaults(func=cmd_get)

    p = _sub(sub, "tree", "the node structure of a version")
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

    p = _sub(sub, "rollback", "roll forward to the content of an earlier version")
    p.add_argument(
        "--to-version",
        type=int,
        required=True,
        metavar="V",
        help="the version whose content to restore",
    )
    p.set_defaults(func=cmd_rollback)

    p = _sub(
        sub,
        "export",
        "export a snapshot; list or drop exports",
        usage="lakecore export [create] NAME [--mode M] [--target URI] [--version V | --as-of TIME] "
        "| export list | export drop NAME",
        description="export create NAME (or just export NAME) records an export of a version, which pins it, "
        "and with --target makes a read-only copy there; export list shows the exports; export drop NAME "
        "removes one, so that version expiry and gc may collect what it pinned. An export named create, "
        "list or drop needs the create form.",
    )
    p.add_argument(
        "action_or_name",
        metavar="create|list|drop|NAME",
        help="the action, or the export's name (= create)",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the export's name")
    p.add_argument(
        "--mode",
        choices=["minimal", "partial", "full"],
        default=None,
        help="create: what the copy holds: the root only (minimal, default), every node (partial), "
        "or every node and definition (full)",
    )
    p.add_argument("--target", metavar="URI", help="create: make a read-only copy there")
    add_version_options(p, "export")
    p.set_defaults(func=cmd_export)

    p = _sub(sub, "fsck", "check the invariants of a version (or all)")
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--version", type=int, metavar="V", help="check this version (default: the latest)"
    )
    group.add_argument(
        "--as-of",
        dest="as_of",
        type=time_millis,
        metavar="TIME",
        help="check the newest version created at or before TIME",
    )
    group.add_argument("--all", action="store_true", help="check every version with a root file")
    p.add_argument("--deep", action="store_true", help="also check every definition file")
    p.set_defaults(func=cmd_fsck)

    p = _sub(sub, "repair", "repair a damaged lakehouse (prints the plan; --yes carries it out)")
    actions = p.add_subparsers(
        dest="action", required=True, metavar="{rebuild-hint,rollback,drop-damaged}"
    )
    a = _sub(actions, "rebuild-hint", "point the latest-version hint at the highest root file")
    a.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    a = _sub(actions, "rollback", "roll forward to an earlier version's content")
    target = a.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to-version", type=int, metavar="V", help="the version whose content to restore"
    )
    target.add_argument(
        "--to-last-valid",
        action="store_true",
        help="the newest version the tree checker finds clean",
    )
    a.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    a.set_defaults(to_version=None, to_last_valid=False)
    a = _sub(
        actions,
        "drop-damaged",
        "delete the root files of older versions that cannot be read (the latest must be whole); "
        "gc then removes what only they reached",
    )
    a.add_argument(
        "--yes", action="store_true", help="carry out the plan (without it, only print it)"
    )
    p.set_defaults(func=cmd_repair, to_version=None, to_last_valid=False)

    _add_settings_command(sub)
    _add_extra_commands(sub)

    p = _sub(
        sub,
        "completion",
        "print a shell completion script (bash or zsh; needs the [completion] extra)",
        description='eval "$(lakecore completion bash)" in ~/.bashrc (or zsh: autoload -U bashcompinit; '
        'bashcompinit; eval "$(lakecore completion zsh)")',
    )
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete in")
    p.set_defaults(func=cmd_completion)
    return parser


def cmd_completion(args: argparse.Namespace) -> int:
    try:
        import argcomplete
    except ImportError:
        raise InvalidArgumentError(
            "shell completion needs argcomplete: pip install 'lakecore[completion]' (make setup installs it)"
        ) from None
    print(argcomplete.shellcode(["lakecore"], shell=args.shell))  # type: ignore[attr-defined]
    return ExitCode.OK


def _add_age_options(p: argparse.ArgumentParser) -> None:
    """``--maximum-version-age DURATION`` and its plain-milliseconds twin (init and settings set)."""
    ages = p.add_mutually_exclusive_group()
    ages.add_argument(
        "--maximum-version-age",
        dest="maximum_version_age",
        metavar="DURATION",
        type=duration_millis("--maximum-version-age"),
        help="how long versions are retained, e.g. 7d, 12h, 90m, 30s, 250ms",
    )
    ages.add_argument(
        "--maximum-version-age-millis",
        dest="maximum_version_age_millis",
        type=int,
        metavar="MILLIS",
        help="the same in milliseconds",
    )


def _add_settings_command(sub: Any) -> None:
    p = _sub(sub, "settings", "show or change the retention settings and properties")
    actions = p.add_subparsers(dest="action", required=True)
    _sub(actions, "show", "the settings in force at the latest version")
    s = _sub(actions, "set", "change settings (validated as at init); a no-op commits nothing")
    _add_age_options(s)
    s.add_argument(
        "--minimum-versions-to-keep",
        type=int,
        metavar="N",
        help="the newest N versions never expire, whatever their age",
    )
    s.add_argument(
        "--version-age-override",
        action="append",
        type=_version_duration,
        metavar="V=DURATION",
        help="retain version V for DURATION instead (repeatable)",
    )
    s.add_argument(
        "--unset-version-age-override",
        action="append",
        type=_version_number,
        metavar="V",
        help="remove version V's override (repeatable)",
    )
    s.add_argument(
        "--property",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="set a property (repeatable)",
    )
    s.add_argument(
        "--unset-property", action="append", metavar="KEY", help="remove a property (repeatable)"
    )
    p.set_defaults(func=cmd_settings)


def _add_extra_commands(sub: Any) -> None:
    """Commands that live in their own modules (lookup files, diffs; gc and compact-versions;
    the REST server)."""
    lookup_cli.add_commands(sub, _sub)
    maintenance_cli.add_commands(sub, _sub)
    serve_cli.add_commands(sub, _sub)


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        import argcomplete
    except ImportError:
        pass
    else:
        argcomplete.autocomplete(parser)
    as_json = _wants_json(raw)

    def fail(message: str, code: int) -> int:
        if as_json:
            emit_error(message, code)
        say(f"lakecore: {message}", error=True)
        return code

    args: argparse.Namespace | None = None
    try:
        args = parser.parse_args(raw)
        refuse_outputs_in_lakehouse(args)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except LakecoreError as exc:
        root = (
            (getattr(args, "lakehouse", None) or os.environ.get("LAKECORE_LAKEHOUSE"))
            if args is not None
            else None
        )
        return fail(with_next_step(exc, root), exc.exit_code)
    except KeyboardInterrupt:
        return fail(
            "interrupted; nothing was half-committed (a commit lands whole or not at all)",
            ExitCode.INTERRUPTED,
        )
    except BrokenPipeError:
        # The reader went away (`lakecore ... | head`): not an error of ours. Point stdout at
        # devnull so that the interpreter's final flush does not complain a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except Exception as exc:
        return fail(
            f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())}", ExitCode.FAILURE
        )
