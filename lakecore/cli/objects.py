"""``lakecore init``, ``namespace`` and ``table``: creating a lakehouse and changing its objects.

Rules:

* ``init`` takes the place as a positional or as ``-l/--lakehouse`` (as every other command is
  written), not two different ones; the tree's order and the name sizes are set only here.
* A change commits one version, or none: ``set-properties`` that sets what is already there
  commits nothing and says so (``committed: false``). ``unset-properties`` of a key that is
  not set is an error (``NotFoundError``) naming the keys there are; ``set-properties`` naming
  a key twice is one too.
* ``list`` and ``show`` read a version (``--version``/``--as-of``, default the latest) and
  change nothing; ``namespace list`` names every namespace by its full name, ``--parent`` only
  the direct children.
* ``table create`` needs at least one ``--column ID:NAME:TYPE[:nullable|required]``.
* ``table undrop`` brings a dropped table back as the newest retained version (or
  ``--version N``) held it (``lakecore.lakehouse.undrop``); an Iceberg table through its
  catalog, which checks its folders and takes back a purge mark (``LakecoreCatalog.undrop_table``).
  The name taken now is exit 2; no retained version holding it, or its files purged already,
  exit 5.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakecore.cli.printing import emit
from lakecore.cli.settings import add_age_options
from lakecore.cli.shared_options import (
    add_property_option,
    add_version_options,
    key_value,
    lakehouse_uri,
    open_lakehouse,
    open_view,
    storage_options_of,
)
from lakecore.errors import ExitCode, InvalidArgumentError, NotFoundError

if TYPE_CHECKING:
    from lakecore.core.defs import pb


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


def _emit_names(args: argparse.Namespace, version: int, kind: str, names: list[str]) -> None:
    """``table list`` and ``view list``: one name a line; as JSON ``{version, <kind>: [...]}``."""
    emit(args, "\n".join(names) if names else f"(no {kind})", {"version": version, kind: names})


def _emit_definition(
    args: argparse.Namespace, version: int, definition: pb.TableDef | pb.ViewDef, heading: str
) -> None:
    """``table show`` and ``view show``: ``heading``, the columns and both property maps; as
    JSON the definition's fields, its format properties always present, also when empty
    (MessageToDict leaves empty maps out)."""
    from google.protobuf.json_format import MessageToDict

    from lakecore.core.defs import pb

    columns = ", ".join(f"{c.name} {pb.DataType.Name(c.type)}" for c in definition.schema.columns)
    emit(
        args,
        f"{heading}\n"
        f"  columns: {columns or '-'}\n  properties: {dict(definition.properties)}\n"
        f"  format properties: {dict(definition.format_properties)}",
        {
            "version": version,
            **MessageToDict(definition, preserving_proto_field_name=True),
            "format_properties": dict(definition.format_properties),
        },
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
    from lakecore.core.defs import properties_after

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
            after = properties_after(current, props, unset)
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
    from lakecore.core.defs import properties_after
    from lakecore.lakehouse.history import display_name  # deferred: --help stays cheap

    if args.action == "list":
        view = open_view(args)
        _emit_names(args, view.version, "tables", view.list_tables(args.namespace))
        return ExitCode.OK
    if args.action == "show":
        view = open_view(args)
        definition = view.load_table(args.namespace, args.table)
        _emit_definition(
            args,
            view.version,
            definition,
            f"table {args.namespace}.{definition.name} ({definition.table_format}, {definition.table_type})",
        )
        return ExitCode.OK
    if args.action == "undrop":
        return _undrop(args)
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
            after = properties_after(current, props, unset)
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


def _undrop(args: argparse.Namespace) -> int:
    from lakecore.lakehouse.history import display_name
    from lakecore.lakehouse.undrop import find_dropped, undrop_plain

    lh = open_lakehouse(args)
    found = find_dropped(lh, args.namespace, args.table, args.version)
    name = display_name(args.namespace, args.table)
    definition = found.definition
    if definition.table_format == "ICEBERG" and definition.format_properties.get(
        "metadata_location"
    ):
        _undrop_iceberg(lh.storage, args.namespace, args.table, found.version)
        lh.refresh()
    else:
        undrop_plain(lh, found)
    emit(
        args,
        f"undropped table {name} as version {found.version} held it, in version {lh.version}",
        {
            "version": lh.version,
            "namespace": args.namespace,
            "table": args.table,
            "action": "undrop",
            "from_version": found.version,
            "committed": True,
        },
    )
    return ExitCode.OK


def _undrop_iceberg(storage: Any, namespace: str, table: str, version: int) -> None:
    """``LakecoreCatalog.undrop_table``, its pyiceberg errors told as lakecore's (exit codes)."""
    from pyiceberg.exceptions import (
        NoSuchNamespaceError,
        NoSuchTableError,
        TableAlreadyExistsError,
        ValidationError,
    )

    from lakecore.core.namespaces import levels
    from lakecore.errors import AlreadyExistsError, LakecoreError
    from lakecore.iceberg.expiry import maintenance_catalog

    catalog = maintenance_catalog(storage)
    try:
        catalog.undrop_table((*levels(namespace), table), version=version)
    except TableAlreadyExistsError as exc:
        raise AlreadyExistsError(str(exc)) from exc
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        if isinstance(exc.__cause__, LakecoreError):
            raise exc.__cause__ from exc
        raise NotFoundError(str(exc)) from exc
    except ValidationError as exc:
        if isinstance(exc.__cause__, LakecoreError):
            raise exc.__cause__ from exc
        raise InvalidArgumentError(str(exc)) from exc


def cmd_view(args: argparse.Namespace) -> int:
    """``lakecore view list|show|drop``: Iceberg views as the lakehouse holds them (create and
    replace them through an Iceberg catalog: the definition points at Iceberg metadata)."""
    from lakecore.lakehouse.history import display_name  # deferred: --help stays cheap

    if args.action == "list":
        view = open_view(args)
        _emit_names(args, view.version, "views", view.list_views(args.namespace))
        return ExitCode.OK
    if args.action == "show":
        view = open_view(args)
        definition = view.load_view(args.namespace, args.view)
        _emit_definition(
            args,
            view.version,
            definition,
            f"view {args.namespace}.{definition.name} ({definition.view_format})",
        )
        return ExitCode.OK
    lh = open_lakehouse(args)
    with lh.transaction() as tx:
        tx.drop_view(args.namespace, args.view)
    name = display_name(args.namespace, args.view)
    emit(
        args,
        f"dropped view {name} in version {lh.version} (its Iceberg files stay)",
        {
            "version": lh.version,
            "namespace": args.namespace,
            "view": args.view,
            "action": "drop",
            "committed": True,
        },
    )
    return ExitCode.OK


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``init``, ``namespace``, ``table`` and ``view`` commands; ``subcommand(sub, name, help, ...)`` makes a subparser with the command
    line's shared options (``--json``, ``-l/--lakehouse``)."""
    p = subcommand(sub, "init", "create a lakehouse")
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
    add_age_options(p)
    add_property_option(p, "a lakehouse property (repeatable)")
    p.set_defaults(func=cmd_init)

    p = subcommand(
        sub, "namespace", "create, drop, list or show namespaces; set or unset their properties"
    )
    actions = p.add_subparsers(
        dest="action",
        required=True,
        metavar="{create,drop,list,show,set-properties,unset-properties}",
    )
    a = subcommand(actions, "create", "create a namespace (a.b is b inside a)")
    a.add_argument("namespace", help="the namespace name; levels joined with '.', e.g. sales.eu")
    a.add_argument(
        "--parents",
        action="store_true",
        help="create the missing parents too (with no properties), as mkdir -p; without it a "
        "missing parent is only implied (listed, but holding no tables or properties)",
    )
    add_property_option(a, "a property (repeatable)")
    a = subcommand(actions, "drop", "drop an empty namespace (no tables, no namespaces inside)")
    a.add_argument("namespace", help="the namespace name")
    a = subcommand(
        actions, "list", "every namespace by its full name, sorted; or a namespace's children"
    )
    a.add_argument(
        "--parent",
        metavar="NAMESPACE",
        help="list only the direct children of NAMESPACE (e.g. sales for sales.eu, sales.us)",
    )
    add_version_options(a)
    a = subcommand(actions, "show", "a namespace and its properties")
    a.add_argument("namespace", help="the namespace name")
    add_version_options(a)
    _properties_actions(subcommand, actions, "namespace", [("namespace", "the namespace name")])
    p.set_defaults(func=cmd_namespace)

    p = subcommand(
        sub, "table", "create, drop, undrop, list or show tables; set or unset their properties"
    )
    actions = p.add_subparsers(
        dest="action",
        required=True,
        metavar="{create,drop,undrop,list,show,set-properties,unset-properties}",
    )
    a = subcommand(actions, "create", "create a table")
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
    add_property_option(a, "a property (repeatable)")
    a = subcommand(actions, "drop", "drop a table")
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    a = subcommand(
        actions,
        "undrop",
        "bring a dropped table back as the newest retained version held it (a purged one too, "
        "until table maintenance has deleted its files)",
    )
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    a.add_argument(
        "--version",
        type=int,
        metavar="N",
        help="bring it back as this retained version held it (default: the newest that did)",
    )
    a = subcommand(actions, "list", "the tables of a namespace, sorted")
    a.add_argument("namespace", help="the namespace")
    add_version_options(a)
    a = subcommand(actions, "show", "a table's definition")
    a.add_argument("namespace", help="the table's namespace")
    a.add_argument("table", help="the table name")
    add_version_options(a)
    _properties_actions(
        subcommand,
        actions,
        "table",
        [("namespace", "the table's namespace"), ("table", "the table name")],
    )
    p.set_defaults(func=cmd_table)

    p = subcommand(
        sub,
        "view",
        "list, show or drop Iceberg views (create and replace them through an Iceberg catalog)",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="{list,show,drop}")
    a = subcommand(actions, "list", "the views of a namespace, sorted")
    a.add_argument("namespace", help="the namespace")
    add_version_options(a)
    a = subcommand(actions, "show", "a view's definition")
    a.add_argument("namespace", help="the view's namespace")
    a.add_argument("view", help="the view name")
    add_version_options(a)
    a = subcommand(actions, "drop", "drop a view (its Iceberg files stay)")
    a.add_argument("namespace", help="the view's namespace")
    a.add_argument("view", help="the view name")
    p.set_defaults(func=cmd_view)


def _properties_actions(
    subcommand: Callable[..., argparse.ArgumentParser],
    actions: Any,
    kind: str,
    positionals: list[tuple[str, str]],
) -> None:
    a = subcommand(
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
    a = subcommand(actions, "unset-properties", f"remove {kind} properties (each must be set)")
    for name, help_text in positionals:
        a.add_argument(name, help=help_text)
    a.add_argument("keys", nargs="+", metavar="KEY", help="the property keys to remove")


__all__ = ["add_commands", "cmd_init", "cmd_namespace", "cmd_table"]
