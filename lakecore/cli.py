"""The ``lakecore`` command line.

Every command prints a short human summary, or JSON with ``--json``. Errors are one line on
stderr and an exit code: 0 ok, 1 check found violations, 2 bad arguments or input, 3 commit
conflict, 4 anything else.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lakecore.argparsing import OneLineArgumentParser
from lakecore.errors import ExitCode, InvalidArgumentError, LakecoreError

EXIT_OK = ExitCode.OK
EXIT_VIOLATIONS = ExitCode.VIOLATIONS


def _kv(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    key, value = text.split("=", 1)
    return key, value


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


def _storage_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in args.storage_option or []:
        if key == "endpoint_url":
            options.setdefault("client_kwargs", {})["endpoint_url"] = value
        else:
            options[key] = value
    return options


def _lakehouse_uri(args: argparse.Namespace) -> str:
    uri = args.lakehouse or os.environ.get("LAKECORE_LAKEHOUSE")
    if not uri:
        raise InvalidArgumentError("no lakehouse given: pass --lakehouse URI or set LAKECORE_LAKEHOUSE")
    return str(uri)


def _open(args: argparse.Namespace) -> Any:
    from lakecore.lakehouse import Lakehouse

    return Lakehouse.open(_lakehouse_uri(args), storage_options=_storage_options(args))


def _view(args: argparse.Namespace) -> Any:
    lh = _open(args)
    version = getattr(args, "version", None)
    return lh if version is None else lh.at_version(version)


def _emit(args: argparse.Namespace, human: str, data: Any) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(human)


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
    lh = Lakehouse.create(args.uri, name=args.name, storage_options=_storage_options(args),
                          properties=dict(args.property or []), **fields)
    d = lh.lakehouse_def
    _emit(args, f"created lakehouse {d.name!r} at {lh.uri} (version 0, order {d.order})",
          {"uri": lh.uri, "version": lh.version, "name": d.name, "order": d.order})
    return EXIT_OK


def cmd_namespace(args: argparse.Namespace) -> int:
    if args.action == "list":
        view = _view(args)
        names = view.list_namespaces()
        _emit(args, "\n".join(names) if names else "(no namespaces)", {"version": view.version, "namespaces": names})
        return EXIT_OK
    if args.action == "show":
        view = _view(args)
        definition = view.load_namespace(args.namespace)
        props = dict(definition.properties)
        _emit(args, f"namespace {definition.name}\n" + "".join(f"  {k} = {v}\n" for k, v in sorted(props.items())).rstrip(),
              {"version": view.version, "name": definition.name, "properties": props})
        return EXIT_OK
    lh = _open(args)
    with lh.transaction() as tx:
        if args.action == "create":
            tx.create_namespace(args.namespace, properties=dict(args.property or []))
        else:
            tx.drop_namespace(args.namespace)
    _emit(args, f"{args.action}d namespace {args.namespace!r} in version {lh.version}",
          {"version": lh.version, "namespace": args.namespace, "action": args.action})
    return EXIT_OK


def cmd_table(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    if args.action == "list":
        view = _view(args)
        names = view.list_tables(args.namespace)
        _emit(args, "\n".join(names) if names else "(no tables)", {"version": view.version, "tables": names})
        return EXIT_OK
    if args.action == "show":
        view = _view(args)
        definition = view.load_table(args.namespace, args.table)
        data = MessageToDict(definition, preserving_proto_field_name=True)
        from lakecore.defs import pb

        columns = ", ".join(f"{c.name} {pb.DataType.Name(c.type)}" for c in definition.schema.columns)
        _emit(args, f"table {args.namespace}.{definition.name} ({definition.table_format}, {definition.table_type})\n"
              f"  columns: {columns or '-'}\n  properties: {dict(definition.properties)}\n"
              f"  format properties: {dict(definition.format_properties)}",
              # Always present, also when empty (MessageToDict leaves empty maps out).
              {"version": view.version, **data, "format_properties": dict(definition.format_properties)})
        return EXIT_OK
    if args.table is None:
        raise InvalidArgumentError(f"table {args.action} needs NAMESPACE TABLE")
    lh = _open(args)
    with lh.transaction() as tx:
        if args.action == "create":
            tx.create_table(args.namespace, args.table, columns=args.column or [], table_format=args.format,
                            table_type=args.type, properties=dict(args.property or []))
        else:
            tx.drop_table(args.namespace, args.table)
    _emit(args, f"{args.action}d table {args.namespace}.{args.table} in version {lh.version}",
          {"version": lh.version, "namespace": args.namespace, "table": args.table, "action": args.action})
    return EXIT_OK


def cmd_versions(args: argparse.Namespace) -> int:
    import datetime as dt

    lh = _open(args)
    infos = lh.versions()[: args.limit] if args.limit else lh.versions()
    lines = []
    for info in infos:
        when = dt.datetime.fromtimestamp(info.created_at_millis / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
        extra = f"  rollback from {info.rollback_from_version}" if info.rollback_from_version is not None else ""
        lines.append(f"{info.version:>8}  {when}  root keys {info.n_root_keys:>4}  buffer {info.root_buffer_messages:>6}{extra}")
    _emit(args, "\n".join(lines), [info.__dict__ for info in infos])
    return EXIT_OK


def cmd_get(args: argparse.Namespace) -> int:
    from lakecore import keys as K

    view = _view(args)
    if args.key is not None:
        key = args.key
    elif args.namespace is not None:
        key = (K.table_key(args.namespace, args.table, view.lakehouse_def) if args.table
               else K.namespace_key(args.namespace, view.lakehouse_def))
    else:
        raise InvalidArgumentError("get needs a KEY, or --namespace [--table]")
    value = view.get(key)
    _emit(args, value if value is not None else "(absent)", {"version": view.version, "key": key, "pvalue": value})
    return EXIT_OK if value is not None else ExitCode.NOT_FOUND


def cmd_tree(args: argparse.Namespace) -> int:
    from lakecore.treeinfo import describe_tree, to_dot

    view = _view(args)
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
    _emit(args, f"version {view.version}: depth {summary['depth']}, {summary['nodes']} nodes, "
          f"{summary['keys']} keys, {summary['messages']} buffered messages\n{levels}", summary)
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    lh = _open(args)
    before = lh.version
    version = lh.rollback(to_version=args.to_version)
    _emit(args, f"rolled back to the content of version {args.to_version}: new version {version} (was {before})",
          {"version": version, "rolled_back_to": args.to_version, "previous": before})
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    lh = _open(args)
    version = lh.export_snapshot(args.name, mode=args.mode, target=args.target, version=args.version)
    _emit(args, f"exported snapshot {args.name!r} ({args.mode}); recorded in version {version}",
          {"version": version, "name": args.name, "mode": args.mode, "target": args.target})
    return EXIT_OK


def cmd_fsck(args: argparse.Namespace) -> int:
    from lakecore.fsck import check_version
    from lakecore.progress import Progress

    lh = _open(args)
    if args.all:
        versions = [info.version for info in lh.versions()]
    else:
        versions = [args.version if args.version is not None else lh.version]
    results = []
    with Progress("fsck", len(versions)) as progress:
        for version in versions:
            view = lh if version == lh.version else lh.at_version(version)
            results.append(check_version(view, deep=args.deep))
            progress.advance()
    bad = [r for r in results if not r.ok]
    lines = [f"checked {len(results)} version(s), {sum(r.report.nodes_checked for r in results)} nodes: "
             f"{'clean' if not bad else f'{len(bad)} with violations'}"]
    for r in bad:
        lines.extend(f"  v{r.version} {v}" for v in r.violations[:20])
    _emit(args, "\n".join(lines), {
        "versions": [{"version": r.version, "ok": r.ok, "nodes": r.report.nodes_checked,
                      "violations": [v.as_dict() for v in r.violations]} for r in results],
        "ok": not bad,
    })
    return EXIT_OK if not bad else EXIT_VIOLATIONS


# -- parser ----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="lakecore", description="TrinityLake lakehouse catalog tool")
    parser.add_argument("-l", "--lakehouse", help="lakehouse root URI (or LAKECORE_LAKEHOUSE)")
    parser.add_argument("--storage-option", action="append", type=_kv, metavar="KEY=VALUE",
                        help="fsspec storage option, e.g. endpoint_url=http://127.0.0.1:5000")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="create a lakehouse")
    p.add_argument("uri")
    p.add_argument("--name", default="lakehouse")
    for name in ("order", "namespace_name_max_size_bytes", "table_name_max_size_bytes", "file_name_max_size_bytes",
                 "node_file_max_size_bytes", "maximum_version_age_millis", "minimum_versions_to_keep"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=int)
    p.add_argument("--property", action="append", type=_kv, metavar="KEY=VALUE")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("namespace", help="create, drop, list or show namespaces")
    p.add_argument("action", choices=["create", "drop", "list", "show"])
    p.add_argument("namespace", nargs="?")
    p.add_argument("--property", action="append", type=_kv, metavar="KEY=VALUE")
    p.add_argument("--version", type=int)
    p.set_defaults(func=cmd_namespace)

    p = sub.add_parser("table", help="create, drop, list or show tables")
    p.add_argument("action", choices=["create", "drop", "list", "show"])
    p.add_argument("namespace")
    p.add_argument("table", nargs="?")
    p.add_argument("--column", action="append", type=_column, metavar="ID:NAME:TYPE[:nullable|required]")
    p.add_argument("--format", default="ICEBERG")
    p.add_argument("--type", default="MANAGED")
    p.add_argument("--property", action="append", type=_kv, metavar="KEY=VALUE")
    p.add_argument("--version", type=int)
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

    p = sub.add_parser("export", help="export a snapshot")
    p.add_argument("name")
    p.add_argument("--mode", choices=["minimal", "partial", "full"], default="minimal")
    p.add_argument("--target")
    p.add_argument("--version", type=int)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("fsck", help="check the invariants of a version (or all)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--version", type=int)
    group.add_argument("--all", action="store_true")
    p.add_argument("--deep", action="store_true", help="also check every definition file")
    p.set_defaults(func=cmd_fsck)

    _add_extra_commands(sub)
    return parser


def _add_extra_commands(sub: Any) -> None:
    """Commands that live in their own modules (lookup files, diffs)."""
    try:
        module = importlib.import_module("lakecore.lookup.cli")
    except ImportError:
        return
    module.add_commands(sub)


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
        print("lakecore: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as exc:
        print(f"lakecore: unexpected {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return ExitCode.FAILURE


if __name__ == "__main__":
    sys.exit(main())
