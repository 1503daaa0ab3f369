"""``lakecore lookup build|get|stats`` and ``lakecore diff V1 V2``."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakecore.cli.printing import emit, say
from lakecore.cli.shared_options import add_version_options, open_view, resolve_version
from lakecore.errors import ExitCode, InvalidArgumentError

if TYPE_CHECKING:
    from lakecore.core.lookup.cache import VersionCache


def _cache(args: argparse.Namespace) -> VersionCache:
    from lakecore.core.lookup.cache import (
        VersionCache,  # deferred: the command line's --help stays cheap
    )

    if args.cache_max_bytes <= 0:
        raise InvalidArgumentError(
            f"--cache-max-bytes must be a positive number of bytes, got {args.cache_max_bytes}"
        )
    return (
        VersionCache(args.cache_dir, max_bytes=args.cache_max_bytes)
        if args.cache_dir
        else VersionCache(max_bytes=args.cache_max_bytes)
    )


def _lookup_keys(args: argparse.Namespace, view: Any) -> list[str]:
    """The raw KEYs, or the key of ``--namespace NS [--table T]`` (not both)."""
    from lakecore.core import keys as K

    if args.namespace is None:
        if args.table is not None:
            raise InvalidArgumentError("lookup get: --table needs --namespace")
        if not args.keys:
            raise InvalidArgumentError(
                "lookup get needs one or more KEYs, or --namespace NS [--table T]"
            )
        return list(args.keys)
    if args.keys:
        raise InvalidArgumentError("lookup get takes raw KEYs or --namespace/--table, not both")
    if args.table is not None:
        return [K.table_key(args.namespace, args.table, view.lakehouse_def)]
    return [K.namespace_key(args.namespace, view.lakehouse_def)]


def cmd_lookup(args: argparse.Namespace) -> int:
    from lakecore.core.lookup import LookupReader

    cache = _cache(args)
    view = open_view(args, resolve_version(args))
    if args.action != "get" and (args.namespace is not None or args.table is not None or args.keys):
        raise InvalidArgumentError(
            f"lookup {args.action} takes no KEY and no --namespace/--table (only lookup get does)"
        )
    if args.action == "get":
        keys = _lookup_keys(args, view)
    path = cache.file_for(view)
    if args.action == "build":
        out = {
            "version": view.version,
            "path": str(path),
            "bytes": path.stat().st_size,
            "built": cache.stats.builds > 0,
            "entries": cache.stats.entries_built,
        }
        emit(args, f"version {view.version}: {path} ({out['bytes']} bytes)", out)
        return ExitCode.OK
    with LookupReader(str(path)) as reader:
        if args.action == "stats":
            stats = reader.stats()
            data = {"version": view.version, "path": str(path), **dataclasses.asdict(stats)}
            emit(args, "\n".join(f"{k}: {v}" for k, v in data.items()), data)
            return ExitCode.OK
        found = reader.get_many([k.encode("utf-8") for k in keys])
    values = [None if v is None else v.decode("utf-8") for v in found]
    if args.keys:
        _hint_unpadded(keys, values, view)
    emit(
        args,
        "\n".join(
            f"{key!r}\t{value if value is not None else '(absent)'}"
            for key, value in zip(keys, values, strict=True)
        ),
        dict(zip(keys, values, strict=True)),
    )
    return ExitCode.OK if all(v is not None for v in values) else ExitCode.NOT_FOUND


def _hint_unpadded(keys: list[str], values: list[str | None], view: Any) -> None:
    """A raw KEY is the key as stored, padded; ``lookup get ns1`` is absent for that reason
    alone. Say so on stderr (the answer stays "absent", exit 5)."""

    from lakecore.core import keys as K
    from lakecore.errors import LakecoreError

    for key, value in zip(keys, values, strict=True):
        if value is not None or K.is_system_key(key):
            continue
        try:
            K.parse_key(key, view.lakehouse_def)
        except LakecoreError:
            say(
                f"lakecore: {key!r} is not an object key as stored (B===, C=== or D=== and names padded to their "
                "full width); use --namespace NS [--table T] to look a name up",
                error=True,
            )


def _field_lines(fields: list[dict[str, Any]] | None) -> list[str]:
    if fields is None:
        return ["      (a definition file could not be read: fields unknown)"]
    if not fields:
        return ["      (new definition file, same content)"]
    return [f"      {f['field']}: {_value(f['old'])} -> {_value(f['new'])}" for f in fields]


def _value(value: Any) -> str:
    return "(unset)" if value is None else repr(value) if isinstance(value, str) else str(value)


def cmd_diff(args: argparse.Namespace) -> int:
    from lakecore.core.lookup.cache import diff_versions
    from lakecore.lakehouse.history import catalog_diff

    cache = _cache(args)
    old = open_view(args, args.old)
    new = open_view(args, args.new)
    diff = diff_versions(old, new, cache)
    old_items = {k: v for k, v in diff.removed} | {k: a for k, a, _ in diff.changed}
    new_items = {k: v for k, v in diff.added} | {k: b for k, _, b in diff.changed}
    changes = {
        c.key: c
        for c in catalog_diff(old_items, new_items, new.lakehouse_def, old_view=old, new_view=new)
    }

    def described(key: str) -> dict[str, Any]:
        change = changes.get(key)
        if change is None:
            return {"object": key.rstrip(), "kind": None, "namespace": None, "table": None}
        out = {
            "object": change.name,
            "kind": change.kind,
            "namespace": change.namespace,
            "table": None if change.kind == "view" else change.table,
        }
        if change.kind == "view":
            out["view"] = change.table
        return out

    data: dict[str, Any] = {
        "old": diff.old,
        "new": diff.new,
        "added": [{"key": k, **described(k), "pvalue": v} for k, v in diff.added],
        "removed": [{"key": k, **described(k), "pvalue": v} for k, v in diff.removed],
        "changed": [
            {
                "key": k,
                **described(k),
                "old": a,
                "new": b,
                "fields": changes[k].fields if k in changes else None,
            }
            for k, a, b in diff.changed
        ],
    }
    lines = [
        f"version {diff.old} -> {diff.new}: {len(diff.added)} added, {len(diff.removed)} removed, "
        f"{len(diff.changed)} changed"
    ]
    for item in data["added"]:
        lines.append(f"  + {item['kind'] or 'key'} {item['object']}")
    for item in data["removed"]:
        lines.append(f"  - {item['kind'] or 'key'} {item['object']}")
    for item in data["changed"]:
        lines.append(f"  ~ {item['kind'] or 'key'} {item['object']}")
        lines.extend(_field_lines(item["fields"]))
    emit(args, "\n".join(lines), data)
    return ExitCode.OK


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The lookup and diff commands; ``subcommand(sub, name, help)`` makes a subparser with
    the command line's shared options (``--json``)."""

    def cache_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--cache-dir",
            help="lookup cache folder (default LAKECORE_CACHE_DIR or ~/.cache/lakecore/core/lookup)",
        )
        p.add_argument(
            "--cache-max-bytes",
            type=int,
            default=2 << 30,
            metavar="N",
            help="evict the oldest lookup files beyond N bytes (default 2 GiB)",
        )

    p = subcommand(sub, "lookup", "local lookup files of versions: build, get, stats")
    p.add_argument(
        "action",
        choices=["build", "get", "stats"],
        help="build a version's lookup file, get keys through it, or show its statistics",
    )
    p.add_argument("keys", nargs="*", metavar="KEY", help="get: raw object keys (padded as stored)")
    p.add_argument("--namespace", help="get: look up this namespace's key (instead of raw KEYs)")
    p.add_argument("--table", help="get: with --namespace, look up this table's key")
    add_version_options(p)
    cache_options(p)
    p.set_defaults(func=cmd_lookup)

    p = subcommand(
        sub,
        "diff",
        "namespaces and tables added, removed and changed between two versions, "
        "with the changed fields",
    )
    p.add_argument("old", type=int, help="the older version")
    p.add_argument("new", type=int, help="the newer version")
    cache_options(p)
    p.set_defaults(func=cmd_diff)
