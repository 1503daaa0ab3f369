"""``lakecore describe``: one lakehouse at a glance.

The definition with retention in human units, the exports, the retained versions (oldest and
latest, pinned, expired-but-readable, unreadable), the tree's depth, fan-out and buffer fill
per level (``treeinfo.describe_tree``), and the files under the root by kind with their bytes
(one listing of the top level and the 4,096 hash directories).
"""

from __future__ import annotations

import time
from typing import Any

from lakecore.core.locations import hash_directories
from lakecore.core.storage import Storage
from lakecore.core.units import format_bytes, format_duration_millis, format_time_millis, plural
from lakecore.core.versions import is_damage_in_version
from lakecore.core.view import LakehouseView
from lakecore.errors import InvalidLocationError, LakecoreError
from lakecore.lakehouse.history import HistoryEntry
from lakecore.lakehouse.treeinfo import describe_tree
from lakecore.maintenance.listing import ERROR_KEY, FOREIGN, list_directories, list_top

FILE_KINDS = (
    "root_node",
    "node",
    "lakehouse_def",
    "namespace_def",
    "table_def",
    "view_def",
    "latest_hint",
    "temp",
    FOREIGN,
)


def file_stats(storage: Storage, threads: int = 16) -> dict[str, Any]:
    """Files and bytes under the root by kind (``FILE_KINDS``), and listing errors."""
    kinds: dict[str, dict[str, int]] = {kind: {"count": 0, "bytes": 0} for kind in FILE_KINDS}
    errors: list[str] = []
    listed = list(list_top(storage)) + list(
        list_directories(storage, hash_directories(), threads=threads)
    )
    for item in listed:
        if item.kind == ERROR_KEY:
            errors.append(item.path)
            continue
        slot = kinds.setdefault(item.kind, {"count": 0, "bytes": 0})
        slot["count"] += 1
        slot["bytes"] += max(0, item.size)
    return {
        "by_kind": kinds,
        "total_count": sum(v["count"] for v in kinds.values()),
        "total_bytes": sum(v["bytes"] for v in kinds.values()),
        "errors": errors[:20],
    }


def describe(
    view: LakehouseView,
    entries: list[HistoryEntry],
    *,
    files: bool = True,
    now_millis: int | None = None,
    damaged_tree_ok: bool = False,
) -> dict[str, Any]:
    """Everything ``lakecore describe`` prints, as plain data (exact numbers).

    ``damaged_tree_ok``: a tree that cannot be walked (a missing or corrupt node file) becomes
    ``tree = {"version": V, "damaged": "<the error>"}`` instead of the error, for the health
    page, which must still be written when the lakehouse is damaged. A store that cannot be
    read (``StorageError``) still fails: that says nothing about the lakehouse."""
    d = view.lakehouse_def
    now = int(time.time() * 1000) if now_millis is None else now_millis
    readable = [e for e in entries if e.state != "unreadable"]
    retained = [e for e in readable if e.state != "expired"]
    oldest = retained[-1] if retained else None
    data: dict[str, Any] = {
        "uri": view.uri,
        "version": view.version,
        "created_at_millis": view.created_at_millis,
        "now_millis": now,
        "read_only": view.read_only_reason,
        "definition": {
            **{
                k: v
                for k, v in d.as_dict().items()
                if k not in ("major_version", "exported_snapshots")
            },
            "properties": {
                k: v
                for k, v in sorted(d.properties.items())
                if not k.startswith("lakecore.exports.")
            },
        },
        "exports": [e.__dict__ for e in view.list_exports()],
        "versions": {
            "root_files": len(entries),
            "latest": view.version,
            "latest_created_at_millis": view.created_at_millis,
            "oldest_retained": oldest.version if oldest else None,
            "oldest_retained_created_at_millis": oldest.created_at_millis if oldest else None,
            "retained": len(retained),
            "pinned": sorted(e.version for e in entries if e.state == "pinned"),
            "expired_but_readable": sorted(e.version for e in entries if e.state == "expired"),
            "unreadable": sorted(e.version for e in entries if e.state == "unreadable"),
        },
        "tree": _tree_or_damage(view) if damaged_tree_ok else describe_tree(view),
        "files": file_stats(view.storage) if files else None,
    }
    return data


def _tree_or_damage(view: LakehouseView) -> dict[str, Any]:
    """The tree's description, or its damage (``versions.is_damage_in_version``, or a stored
    child path that leaves the root). Any other failure is raised: a storage error says nothing
    about the lakehouse, and a node missing under a root that is gone is the version expiring
    meanwhile."""
    try:
        return describe_tree(view)
    except LakecoreError as exc:
        if not (
            is_damage_in_version(view.storage, view.version, exc)
            or isinstance(exc, InvalidLocationError)
        ):
            raise
        return {"version": view.version, "damaged": " ".join(str(exc).split())}


def describe_text(data: dict[str, Any]) -> str:
    """The human summary of ``describe``'s data."""
    d = data["definition"]
    v = data["versions"]
    lines = [
        f"lakehouse {d['name']!r} at {data['uri']}",
        f"  latest version      {v['latest']} ({format_time_millis(v['latest_created_at_millis'])})",
    ]
    if v["oldest_retained"] is not None:
        lines.append(
            f"  oldest retained     {v['oldest_retained']} "
            f"({format_time_millis(v['oldest_retained_created_at_millis'])}); "
            f"{plural(v['retained'], 'version')} retained of {plural(v['root_files'], 'root file')}"
        )
    if v["pinned"]:
        lines.append(f"  pinned by exports   {', '.join(map(str, v['pinned']))}")
    if v["expired_but_readable"]:
        shown = v["expired_but_readable"]
        lines.append(
            f"  expired, readable   {plural(len(shown), 'version')} ({shown[0]}..{shown[-1]}): "
            "compact-versions will delete them"
        )
    if v["unreadable"]:
        lines.append(
            f"  UNREADABLE          {', '.join(map(str, v['unreadable']))}: run `lakecore repair`"
        )
    lines.append(
        f"  retention           versions older than {format_duration_millis(d['maximum_version_age_millis'])}"
        f" expire; the newest {d['minimum_versions_to_keep']} always stay"
    )
    for version, age in d["maximum_version_age_millis_overrides"].items():
        lines.append(f"  age override        version {version}: {format_duration_millis(age)}")
    lines.append(
        f"  tree shape          order {d['order']}, node files at most "
        f"{format_bytes(d['node_file_max_size_bytes'])}, names at most "
        f"{d['namespace_name_max_size_bytes']} / {d['table_name_max_size_bytes']} bytes"
    )
    for key, value in d["properties"].items():
        lines.append(f"  property            {key} = {value}")
    if data["read_only"]:
        lines.append(f"  read-only           {data['read_only']}")
    if data["exports"]:
        lines.append("exports:")
        for e in data["exports"]:
            lines.append(
                f"  {e['name']}  version {e['version'] if e['version'] is not None else e['root']}  "
                f"{e['mode'] or '-'}  {e['target'] or '-'}"
            )
    t = data["tree"]
    if t.get("damaged"):
        lines.append(f"tree at version {t['version']}: DAMAGED: {t['damaged']}")
    else:
        lines.append(
            f"tree at version {t['version']}: depth {t['depth']}, {plural(t['nodes'], 'node')}, "
            f"{plural(t['keys'], 'key')}, {plural(t['messages'], 'buffered message')}"
        )
    for lvl in t.get("levels", []):
        lines.append(
            f"  level {lvl['depth']}: {plural(lvl['nodes'], 'node')}, fan-out "
            f"{lvl['fanout_min']}-{lvl['fanout_max']} (avg {lvl['fanout_avg']:.1f}), "
            f"{plural(lvl['keys'], 'key')}, buffer fill avg {lvl['buffer_fill_avg']:.0%} "
            f"max {lvl['buffer_fill_max']:.0%}"
        )
    files = data.get("files")
    if files:
        lines.append(
            f"files: {plural(files['total_count'], 'file')}, {format_bytes(files['total_bytes'])}"
        )
        for kind, slot in files["by_kind"].items():
            if slot["count"]:
                lines.append(f"  {kind:<14} {slot['count']:>7}  {format_bytes(slot['bytes']):>10}")
        for error in files["errors"]:
            lines.append(f"  listing error: {error}")
    return "\n".join(lines)


__all__ = ["FILE_KINDS", "describe", "describe_text", "file_stats"]
