"""``lakecore lookup build|get|stats`` and ``lakecore diff V1 V2``."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from lakecore.cliargs import open_view
from lakecore.lookup.cache import VersionCache, diff_versions


def _cache(args: argparse.Namespace) -> VersionCache:
    return VersionCache(args.cache_dir, max_bytes=args.cache_max_bytes) if args.cache_dir else VersionCache(
        max_bytes=args.cache_max_bytes)


def cmd_lookup(args: argparse.Namespace) -> int:
    from lakecore.lookup import LookupReader

    cache = _cache(args)
    view = open_view(args, args.version)
    path = cache.file_for(view)
    if args.action == "build":
        out = {"version": view.version, "path": str(path), "bytes": path.stat().st_size,
               "built": cache.stats.builds > 0, "entries": cache.stats.entries_built}
        print(json.dumps(out) if args.json else f"version {view.version}: {path} ({out['bytes']} bytes)")
        return 0
    with LookupReader(str(path)) as reader:
        if args.action == "stats":
            stats = reader.stats()
            data = {"version": view.version, "path": str(path), **dataclasses.asdict(stats)}
            print(json.dumps(data, default=str) if args.json else "\n".join(f"{k}: {v}" for k, v in data.items()))
            return 0
        if not args.keys:
            from lakecore.errors import InvalidArgumentError

            raise InvalidArgumentError("lookup get needs one or more KEYs")
        found = reader.get_many([k.encode("utf-8") for k in args.keys])
    values = [None if v is None else v.decode("utf-8") for v in found]
    if args.json:
        print(json.dumps(dict(zip(args.keys, values, strict=True))))
    else:
        for key, value in zip(args.keys, values, strict=True):
            print(f"{key!r}\t{value if value is not None else '(absent)'}")
    return 0 if all(v is not None for v in values) else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from lakecore import keys as K

    cache = _cache(args)
    old = open_view(args, args.old)
    new = open_view(args, args.new)
    diff = diff_versions(old, new, cache)

    def name(key: str) -> str:
        try:
            parsed = K.parse_key(key, new.lakehouse_def)
        except Exception:
            return key
        return parsed.namespace if parsed.table is None else f"{parsed.namespace}.{parsed.table}"

    if args.json:
        print(json.dumps({"old": diff.old, "new": diff.new,
                          "added": [{"key": k, "object": name(k), "pvalue": v} for k, v in diff.added],
                          "removed": [{"key": k, "object": name(k), "pvalue": v} for k, v in diff.removed],
                          "changed": [{"key": k, "object": name(k), "old": a, "new": b} for k, a, b in diff.changed]},
                         indent=2))
    else:
        print(f"version {diff.old} -> {diff.new}: {len(diff.added)} added, {len(diff.removed)} removed, "
              f"{len(diff.changed)} changed")
        for k, _ in diff.added:
            print(f"  + {name(k)}")
        for k, _ in diff.removed:
            print(f"  - {name(k)}")
        for k, _, _ in diff.changed:
            print(f"  ~ {name(k)}")
    return 0


def add_commands(sub: Any) -> None:
    def cache_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--cache-dir", help="lookup cache folder (default LAKECORE_CACHE_DIR or ~/.cache/lakecore/lookup)")
        p.add_argument("--cache-max-bytes", type=int, default=2 << 30)

    p = sub.add_parser("lookup", help="local lookup files of versions: build, get, stats")
    p.add_argument("action", choices=["build", "get", "stats"])
    p.add_argument("keys", nargs="*")
    p.add_argument("--version", type=int)
    cache_options(p)
    p.set_defaults(func=cmd_lookup)

    p = sub.add_parser("diff", help="keys added, removed and changed between two versions")
    p.add_argument("old", type=int)
    p.add_argument("new", type=int)
    cache_options(p)
    p.set_defaults(func=cmd_diff)
