"""The ``lakecore`` command line.

Every command prints a short human summary, or JSON with ``--json``. Errors are one line on
stderr and an exit code: 0 ok, 1 check found violations, 2 bad arguments or input, 3 commit
conflict, 4 anything else.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lakecore.argparsing import OneLineArgumentParser
from lakecore.cliargs import (
    emit,
    key_value,
    lakehouse_uri,
    open_lakehouse,
    open_view,
    storage_options_of,
)
from lakecore.errors import (
    CorruptFileError,
    ExitCode,
    InvalidArgumentError,
    LakecoreError,
    TreeStructureError,
    exit_code_help,
)
from lakecore.lakehouse import ExportMode
from lakecore.lookup import cli as lookup_cli

EXIT_OK = ExitCode.OK
EXIT_VIOLATIONS = ExitCode.VIOLATIONS


def _column(text: str) -> dict[str, Any]:
    """``ID:NAME:TYPE[:nullable|required]``, e.g. ``1:id:INT8:required``."""
    parts = text.split(":")
    if len(parts) not in (3, 4) or not parts[0].isdigit():
        raise argparse.ArgumentTypeError(f"column {text!r} must be ID:NAME:TYPE[:nullable|required]")
    nullable = True
    if len(parts) == 4:
        if parts[3] not in ("nullable", "required"):
            raise argparse.ArgumentTypeError(f"column {text!r}: the 4th part must be nullable or required")
        nullable = parts[3] == "nullable"
    return {"id": int(parts[0]), "name": parts[1], "type": parts[2].upper(), "nullable": nullable}


# -- commands ------------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    from lakecore.lakehouse import Lakehouse

    fields = {
        name: getattr(args, name)
        for name in ("order", "namespace_name_max_size_bytes", "table_name_max_size_bytes",
                     "file_name_max_size_bytes", "node_file_max_size_bytes", "maximum_version_age_millis",
                     "minimum_versions_to_keep")
        if getattr(args, name) is not None
    }
    if args.maximum_version_age is not None:
        fields["maximum_version_age_millis"] = args.maximum_version_age
    lh = Lakehouse.create(args.uri, name=args.name, storage_options=storage_options_of(args),
                          properties=dict(args.property or []), **fields)
    d = lh.lakehouse_def
    emit(args, f"created lakehouse {d.name!r} at {lh.uri} (version 0, order {d.order})",
          {"uri": lh.uri, "version": lh.version, "name": d.name, "order": d.order})
    return EXIT_OK


def cmd_namespace(args: argparse.Namespace) -> int:
    if args.action == "list":
        view = open_view(args)
        names = view.list_namespaces()
        emit(args, "\n".join(names) if names else "(no namespaces)", {"version": view.version, "namespaces": names})
        return EXIT_OK
    if args.action == "show":
        view = open_view(args)
        definition = view.load_namespace(args.namespace)
        props = dict(definition.properties)
        emit(args, f"namespace {definition.name}\n" + "".join(f"  {k} = {v}\n" for k, v in sorted(props.items())).rstrip(),
              {"version": view.version, "name": definition.name, "properties": props})
        return EXIT_OK
    lh = open_lakehouse(args)
    with lh.transaction() as tx:
        if args.action == "create":
            tx.create_namespace(args.namespace, properties=dict(args.property or []))
        else:
            tx.drop_namespace(args.namespace)
    emit(args, f"{args.action}d namespace {args.namespace!r} in version {lh.version}",
          {"version": lh.version, "namespace": args.namespace, "action": args.action})
    return EXIT_OK


def cmd_table(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    if args.action == "list":
        view = open_view(args)
        names = view.list_tables(args.namespace)
        emit(args, "\n".join(names) if names else "(no tables)", {"version": view.version, "tables": names})
        return EXIT_OK
    if args.action == "show":
        view = open_view(args)
        definition = view.load_table(args.namespace, args.table)
        data = MessageToDict(definition, preserving_proto_field_name=True)
        from lakecore.defs import pb

        columns = ", ".join(f"{c.name} {pb.DataType.Name(c.type)}" for c in definition.schema.columns)
        emit(args, f"table {args.namespace}.{definition.name} ({definition.table_format}, {definition.table_type})\n"
              f"  columns: {columns or '-'}\n  properties: {dict(definition.properties)}\n"
              f"  format properties: {dict(definition.format_properties)}",
              # Always present, also when empty (MessageToDict leaves empty maps out).
              {"version": view.version, **data, "format_properties": dict(definition.format_properties)})
        return EXIT_OK
    if args.action == "create" and not args.column:
        raise InvalidArgumentError(
            f"table create {args.namespace} {args.table}: give at least one --column ID:NAME:TYPE (e.g. 1:id:INT8)"
        )
    lh = open_lakehouse(args)
    with lh.transaction() as tx:
        if args.action == "create":
            tx.create_table(args.namespace, args.table, columns=args.column or [], table_format=args.format,
                            table_type=args.type, properties=dict(args.property or []))
        else:
            tx.drop_table(args.namespace, args.table)
    emit(args, f"{args.action}d table {args.namespace}.{args.table} in version {lh.version}",
          {"version": lh.version, "namespace": args.namespace, "table": args.table, "action": args.action})
    return EXIT_OK


def cmd_versions(args: argparse.Namespace) -> int:
    import datetime as dt

    from lakecore.storage import Storage
    from lakecore.view import list_versions

    # Not through open_lakehouse: the log must show a damaged latest version, not fail on it.
    infos = list_versions(Storage(lakehouse_uri(args), storage_options_of(args)))
    if args.limit:
        infos = infos[: args.limit]
    lines = []
    for info in infos:
        if not info.readable:
            lines.append(f"{info.version:>8}  UNREADABLE  {info.error}")
            continue
        assert info.created_at_millis is not None
        when = dt.datetime.fromtimestamp(info.created_at_millis / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
        notes: list[str] = ["latest"] if info.state == "latest" else []
        if info.pinned_by:
            notes.append(f"pinned by export {', '.join(info.pinned_by)}")
        if info.rollback_from_version is not None:
            notes.append(f"rollback from {info.rollback_from_version}")
        lines.append(f"{info.version:>8}  {when}  root keys {info.n_root_keys:>4}  buffer {info.root_buffer_messages:>6}"
                     + (f"  ({'; '.join(notes)})" if notes else ""))
    if infos and not infos[0].readable:
        lines.append(f"the newest root file is unreadable: run `lakecore -l {lakehouse_uri(args)} repair "
                     "rollback --to-last-valid` to roll forward to the newest readable version")
    emit(args, "\n".join(lines), [info.as_dict() for info in infos])
    return EXIT_OK


def cmd_get(args: argparse.Namespace) -> int:
    from lakecore import keys as K

    view = open_view(args)
    if args.key is not None:
        key = args.key
    elif args.namespace is not None:
        key = (K.table_key(args.namespace, args.table, view.lakehouse_def) if args.table
               else K.namespace_key(args.namespace, view.lakehouse_def))
    else:
        raise InvalidArgumentError("get needs a KEY, or --namespace [--table]")
    value = view.get(key)
    emit(args, value if value is not None else "(absent)", {"version": view.version, "key": key, "pvalue": value})
    return EXIT_OK if value is not None else ExitCode.NOT_FOUND


def cmd_tree(args: argparse.Namespace) -> int:
    from lakecore.treeinfo import describe_tree, to_dot

    view = open_view(args)
    summary = describe_tree(view)
    if args.dot:
        print(to_dot(view, summary))
        return EXIT_OK
    levels = "\n".join(
        f"  level {lvl['depth']}: {lvl['nodes']} nodes, fan-out {lvl['fanout_min']}-{lvl['fanout_max']} "
        f"(avg {lvl['fanout_avg']:.1f}), keys {lvl['keys']}, buffer fill avg {lvl['buffer_fill_avg']:.1%} "
        f"max {lvl['buffer_fill_max']:.1%}"
        for lvl in summary["levels"]
    )
    emit(args, f"version {view.version}: depth {summary['depth']}, {summary['nodes']} nodes, "
          f"{summary['keys']} keys, {summary['messages']} buffered messages\n{levels}", summary)
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    lh = open_lakehouse(args)
    before = lh.version
    version = lh.rollback(to_version=args.to_version)
    emit(args, f"rolled back to the content of version {args.to_version}: new version {version} (was {before})",
          {"version": version, "rolled_back_to": args.to_version, "previous": before})
    return EXIT_OK


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
        raise InvalidArgumentError(f"export list takes no NAME (got {name!r}); to drop it use export drop {name}")
    if action != "list" and name is None:
        raise InvalidArgumentError(f"export {action} needs the export's NAME")
    if action != "create":
        given = [flag for flag, value in (("--mode", args.mode), ("--target", args.target),
                                          ("--version", args.version)) if value is not None]
        if given:
            raise InvalidArgumentError(f"{', '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} to export create, not to export {action}")
    return action, name


def cmd_export(args: argparse.Namespace) -> int:
    action, name = _export_action(args)
    lh = open_lakehouse(args)
    if action == "list":
        exports = lh.list_exports()
        lines = [f"{e.name}  version {e.version if e.version is not None else e.root}  {e.mode or '-'}  "
                 f"{e.target or '-'}" for e in exports]
        emit(args, "\n".join(lines) if lines else "(no exports)",
              {"version": lh.version, "exports": [e.__dict__ for e in exports]})
        return EXIT_OK
    assert name is not None
    if action == "drop":
        pinned = {e.name: e.version for e in lh.list_exports()}.get(name)
        version = lh.drop_export(name)
        emit(args, f"dropped export {name!r} in version {version}; version {pinned} is no longer pinned by it "
              "(version expiry and gc may now collect it)",
              {"version": version, "name": name, "action": "drop", "unpinned_version": pinned})
        return EXIT_OK
    mode: ExportMode = args.mode or "minimal"
    version = lh.export_snapshot(name, mode=mode, target=args.target, version=args.version)
    emit(args, f"exported snapshot {name!r} ({mode}); recorded in version {version}",
          {"version": version, "name": name, "mode": mode, "target": args.target})
    return EXIT_OK


# -- settings ------------------------------------------------------------------------------------


def _duration_millis(what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        from lakecore.durations import parse_duration_millis

        try:
            return parse_duration_millis(text, what=what)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _version_duration(text: str) -> tuple[int, int]:
    """``V=DURATION``, e.g. ``12=30d``."""
    version, sep, duration = text.partition("=")
    if not sep or not version.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not VERSION=DURATION, e.g. 12=30d")
    return int(version), _duration_millis(f"the age override of version {version.strip()}")(duration)


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
        "maximum_version_age_millis_overrides": {str(k): v for k, v in sorted(d.maximum_version_age_millis_overrides.items())},
        "properties": dict(sorted(d.properties.items())),
        "read_only": lh.read_only_reason,
    }


def _settings_text(data: dict[str, Any]) -> str:
    from lakecore.durations import format_duration_millis

    lines = [f"lakehouse {data['name']!r} at version {data['version']}",
             f"  maximum version age     {format_duration_millis(data['maximum_version_age_millis'])}",
             f"  minimum versions kept   {data['minimum_versions_to_keep']}"]
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
        return EXIT_OK
    age = args.maximum_version_age if args.maximum_version_age is not None else args.maximum_version_age_millis
    if (age is None and args.minimum_versions_to_keep is None and not args.version_age_override
            and not args.unset_version_age_override and not args.property and not args.unset_property):
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
        head = f"settings unchanged: they already hold; nothing committed (version {change.version})"
    emit(args, head + "\n" + _settings_text(data), data)
    return EXIT_OK


def cmd_fsck(args: argparse.Namespace) -> int:
    from lakecore.fsck import check_version, unreadable_version
    from lakecore.progress import Progress
    from lakecore.storage import Storage
    from lakecore.view import list_versions, open_version

    uri = lakehouse_uri(args)
    options = storage_options_of(args)
    if args.all:
        # Every root file, readable or not: a damaged version is a finding, not a crash.
        versions = [(info.version, info.error) for info in list_versions(Storage(uri, options))]
    else:
        versions = [(args.version if args.version is not None else open_lakehouse(args).version, None)]
    results = []
    with Progress("fsck", len(versions)) as progress:
        for version, error in versions:
            if error is not None:
                results.append(unreadable_version(version, error))
            else:
                try:
                    view = open_version(uri, version, storage_options=options)
                except (CorruptFileError, TreeStructureError) as exc:
                    results.append(unreadable_version(version, exc.one_line()))
                else:
                    results.append(check_version(view, deep=args.deep))
            progress.advance()
    bad = [r for r in results if not r.ok]
    lines = [f"checked {len(results)} version(s), {sum(r.report.nodes_checked for r in results)} nodes: "
             f"{'clean' if not bad else f'{len(bad)} with violations'}"]
    for r in bad:
        lines.extend(f"  v{r.version} {v}" for v in r.violations[:20])
    emit(args, "\n".join(lines), {
        "versions": [{"version": r.version, "ok": r.ok, "nodes": r.report.nodes_checked,
                      "violations": [v.as_dict() for v in r.violations]} for r in results],
        "ok": not bad,
    })
    return EXIT_OK if not bad else EXIT_VIOLATIONS


def cmd_repair(args: argparse.Namespace) -> int:
    from lakecore import repair
    from lakecore.storage import Storage

    storage = Storage(lakehouse_uri(args), storage_options_of(args))

    def say(line: str) -> None:
        if not args.json:
            print(f"lakecore repair: {line}", flush=True)

    if args.action == "rebuild-hint":
        outcome = repair.rebuild_hint(storage, apply=args.yes, say=say)
    else:
        if args.to_version is None and not args.to_last_valid:
            raise InvalidArgumentError("repair rollback needs --to-version V or --to-last-valid")
        outcome = repair.rollback(storage, to_version=args.to_version, to_last_valid=args.to_last_valid,
                                  apply=args.yes, say=say)
    if outcome.error is not None:
        if args.json:
            emit(args, "", {**outcome.as_dict(), "error": outcome.error})
        print(f"lakecore: {outcome.error}", file=sys.stderr)
        return outcome.exit_code
    emit(args, "\n".join(outcome.summary) or outcome.status, outcome.as_dict())
    return EXIT_OK


# -- parser ----------------------------------------------------------------------------------------


def _add_version_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", type=int, metavar="V", help="read this version (time travel) instead of the latest")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="lakecore", description="TrinityLake lakehouse catalog tool",
                                   epilog=exit_code_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-l", "--lakehouse", help="lakehouse root URI (or LAKECORE_LAKEHOUSE)")
    parser.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                        help="storage option, e.g. endpoint_url=http://127.0.0.1:5000, region=eu-west-1, "
                        "anon=true (S3 also reads AWS_ENDPOINT_URL and the usual AWS_* variables)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="create a lakehouse")
    p.add_argument("uri")
    p.add_argument("--name", default="lakehouse")
    for name in ("order", "namespace_name_max_size_bytes", "table_name_max_size_bytes", "file_name_max_size_bytes",
                 "node_file_max_size_bytes", "minimum_versions_to_keep"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=int)
    _add_age_options(p)
    p.add_argument("--property", action="append", type=key_value, metavar="KEY=VALUE")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("namespace", help="create, drop, list or show namespaces")
    actions = p.add_subparsers(dest="action", required=True, metavar="{create,drop,list,show}")
    a = actions.add_parser("create", help="create a namespace")
    a.add_argument("namespace", help="the namespace name")
    a.add_argument("--property", action="append", type=key_value, metavar="KEY=VALUE", help="a property (repeatable)")
    a = actions.add_parser("drop", help="drop an empty namespace")
    a.add_argument("namespace", help="the namespace name")
    a = actions.add_parser("list", help="the namespaces, sorted")
    _add_version_option(a)
    a = actions.add_parser("show", help="a namespace and its properties")
    a.add_argument("namespace", help="the namespace name")
    _add_version_option(a)
    p.set_defaults(func=cmd_namespace)

    p = sub.add_parser("table", help="create, drop, list or show tables")
    actions = p.add_subparsers(dest="action", required=True, metavar="{create,drop,list,show}")
    a = actions.add_parser("create", help="create a table")
    a.add_argument("namespace", help="the namespace it goes in")
    a.add_argument("table", help="the table name")
    a.add_argument("--column", action="append", type=_column, metavar="ID:NAME:TYPE[:nullable|required]",
                   help="a column, e.g. 1:id:INT8:required (repeatable; at least one)")
    a.add_argument("--format", default="ICEBERG", help="table format (default ICEBERG)")
    a.add_argument("--type", default="MANAGED", help="table type (default MANAGED)")
    a.add_argument("--property", action="append", type=key_value, metavar="KEY=VALUE", help="a property (repeatable)")
    a = actions.add_parser("drop", help="drop a table")
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    a = actions.add_parser("list", help="the tables of a namespace, sorted")
    a.add_argument("namespace", help="the namespace")
    _add_version_option(a)
    a = actions.add_parser("show", help="a table's definition")
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    _add_version_option(a)
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("versions", help="the version log, newest first")
    p.add_argument("--limit", type=int)
    p.set_defaults(func=cmd_versions)

    p = sub.add_parser("get", help="the pvalue of a key")
    p.add_argument("key", nargs="?")
    p.add_argument("--namespace")
    p.add_argument("--table")
    p.add_argument("--version", type=int)
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("tree", help="the node structure of a version")
    p.add_argument("--version", type=int)
    p.add_argument("--dot", action="store_true", help="print Graphviz dot")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("rollback", help="roll forward to the content of an earlier version")
    p.add_argument("--to-version", type=int, required=True)
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser(
        "export", help="export a snapshot; list or drop exports",
        usage="lakecore export [create] NAME [--mode M] [--target URI] [--version V] | export list | export drop NAME",
        description="export create NAME (or just export NAME) records an export of a version, which pins it, "
        "and with --target makes a read-only copy there; export list shows the exports; export drop NAME "
        "removes one, so that version expiry and gc may collect what it pinned. An export named create, "
        "list or drop needs the create form.",
    )
    p.add_argument("action_or_name", metavar="create|list|drop|NAME")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("--mode", choices=["minimal", "partial", "full"], default=None, help="create: default minimal")
    p.add_argument("--target")
    p.add_argument("--version", type=int)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("fsck", help="check the invariants of a version (or all)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--version", type=int)
    group.add_argument("--all", action="store_true")
    p.add_argument("--deep", action="store_true", help="also check every definition file")
    p.set_defaults(func=cmd_fsck)

    p = sub.add_parser("repair", help="repair a damaged lakehouse (prints the plan; --yes carries it out)")
    actions = p.add_subparsers(dest="action", required=True, metavar="{rebuild-hint,rollback}")
    a = actions.add_parser("rebuild-hint", help="point the latest-version hint at the highest root file")
    a.add_argument("--yes", action="store_true", help="carry out the plan (without it, only print it)")
    a = actions.add_parser("rollback", help="roll forward to an earlier version's content")
    target = a.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-version", type=int, metavar="V", help="the version whose content to restore")
    target.add_argument("--to-last-valid", action="store_true",
                        help="the newest version the tree checker finds clean")
    a.add_argument("--yes", action="store_true", help="carry out the plan (without it, only print it)")
    a.set_defaults(to_version=None, to_last_valid=False)
    p.set_defaults(func=cmd_repair, to_version=None, to_last_valid=False)

    _add_settings_command(sub)
    _add_extra_commands(sub)
    return parser


def _add_age_options(p: argparse.ArgumentParser) -> None:
    """``--maximum-version-age DURATION`` and its plain-milliseconds twin (init and settings set)."""
    ages = p.add_mutually_exclusive_group()
    ages.add_argument("--maximum-version-age", dest="maximum_version_age", metavar="DURATION",
                      type=_duration_millis("--maximum-version-age"),
                      help="how long versions are retained, e.g. 7d, 12h, 90m, 30s, 250ms")
    ages.add_argument("--maximum-version-age-millis", dest="maximum_version_age_millis", type=int, metavar="MILLIS",
                      help="the same in milliseconds")


def _add_settings_command(sub: Any) -> None:
    p = sub.add_parser("settings", help="show or change the retention settings and properties")
    actions = p.add_subparsers(dest="action", required=True)
    actions.add_parser("show", help="the settings in force at the latest version")
    s = actions.add_parser("set", help="change settings (validated as at init); a no-op commits nothing")
    _add_age_options(s)
    s.add_argument("--minimum-versions-to-keep", type=int, metavar="N")
    s.add_argument("--version-age-override", action="append", type=_version_duration, metavar="V=DURATION",
                   help="retain version V for DURATION instead (repeatable)")
    s.add_argument("--unset-version-age-override", action="append", type=_version_number, metavar="V",
                   help="remove version V's override (repeatable)")
    s.add_argument("--property", action="append", type=key_value, metavar="KEY=VALUE", help="set a property (repeatable)")
    s.add_argument("--unset-property", action="append", metavar="KEY", help="remove a property (repeatable)")
    p.set_defaults(func=cmd_settings)


def _add_extra_commands(sub: Any) -> None:
    """Commands that live in their own modules (lookup files, diffs)."""
    lookup_cli.add_commands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except LakecoreError as exc:
        print(f"lakecore: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("lakecore: interrupted; nothing was half-committed (a commit lands whole or not at all)",
              file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`lakecore ... | head`): not an error of ours. Point stdout at
        # devnull so that the interpreter's final flush does not complain a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except Exception as exc:
        print(f"lakecore: unexpected {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return ExitCode.FAILURE


if __name__ == "__main__":
    sys.exit(main())
