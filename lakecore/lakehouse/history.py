"""The history of a lakehouse (Delta's DESCRIBE HISTORY), derived from the tree alone.

The format records no operation per commit, and this module adds nothing to it: what a version
did is read off the difference from its parent (``previous_root``, the version below it):

- the catalog content (every namespace, table and view key and the definition file it points
  to): namespaces, tables and views created, dropped or updated. An Iceberg commit through
  ``lakecore.iceberg`` writes a new table (or view) definition (a new ``metadata_location``), so
  it shows as an update like any other; a rename is a drop and a create in one version;
- the root's ``rollback_from_root`` system row: a rollback (or a repair's roll-forward), and
  the older version whose content it restored when that version is still readable;
- the lakehouse definition: exports recorded or dropped, and any other definition change
  (retention, properties), field by field;
- none of these but a different tree: a flush (buffers moved down, nodes split or merged).

A version whose parent is expired (or unreadable) shows ``parent unavailable``. Each entry also
carries the root file's size and the version's state: ``latest``, ``retained``, ``pinned`` (by
an export), ``expired`` (past retention by the latest definition's settings, but its root file
is still there and readable until compact-versions runs) or ``unreadable``.

``catalog_diff`` and ``field_changes`` are also what ``lakecore diff`` prints.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakecore.core import keys as K
from lakecore.core.defs import LakehouseDef
from lakecore.core.export_records import ROLLBACK_PIN_PREFIX
from lakecore.core.storage import Storage
from lakecore.core.units import plural
from lakecore.core.versions import expired_versions, export_pins
from lakecore.core.view import LakehouseView, VersionInfo, list_versions, open_version
from lakecore.errors import LakecoreError

# -- names -----------------------------------------------------------------------------------------


def _quote(part: str) -> str:
    if part and all(c.isalnum() or c in "_-$" for c in part):
        return part
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def display_name(namespace: str, table: str | None = None) -> str:
    """``ns.table``, with a part quoted when it holds a dot, a space or a quote, so that table
    ``c`` of namespace ``a.b`` (``"a.b".c``) and table ``b.c`` of ``a`` (``a."b.c"``) differ."""
    return _quote(namespace) if table is None else f"{_quote(namespace)}.{_quote(table)}"


# -- field-by-field differences --------------------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key in sorted(value):
            _flatten(value[key], f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list):
        if all(isinstance(v, Mapping) and "id" in v for v in value) and value:
            for item in value:  # columns and fields by their ID, not by position
                label = f"{item['id']}" + (f":{item['name']}" if "name" in item else "")
                _flatten({k: v for k, v in item.items() if k != "id"}, f"{prefix}[{label}]", out)
        else:
            out[prefix] = value
    else:
        out[prefix] = value


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What differs between two definitions given as plain dicts: one entry per leaf field,
    ``{"field", "old", "new"}`` (None for a field that is absent on one side), by field."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _flatten(old, "", before)
    _flatten(new, "", after)
    return [
        {"field": name, "old": before.get(name), "new": after.get(name)}
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def message_dict(message: Any) -> dict[str, Any]:
    """A protobuf definition as a plain dict (maps kept even when empty)."""
    from google.protobuf.json_format import MessageToDict

    data: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=True)
    for name in ("properties", "format_properties"):
        if hasattr(message, name):
            data[name] = dict(getattr(message, name))
    return data


# -- catalog differences ---------------------------------------------------------------------------


@dataclass
class ObjectChange:
    """One namespace, table or view created, dropped or updated between two versions. A
    view's name is in ``table`` too (``kind`` tells them apart)."""

    action: str  # created | dropped | updated
    namespace: str
    table: str | None
    key: str
    old_location: str | None
    new_location: str | None
    fields: list[dict[str, Any]] | None = None  # for updates, when asked for
    object_kind: str | None = None  # namespace | table | view; None: by ``table``

    @property
    def kind(self) -> str:
        if self.object_kind is not None:
            return self.object_kind
        return "namespace" if self.table is None else "table"

    @property
    def name(self) -> str:
        return display_name(self.namespace, self.table)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "table": None if self.kind == "view" else self.table,
            "key": self.key,
            "old": self.old_location,
            "new": self.new_location,
        }
        if self.kind == "view":
            out["view"] = self.table
        if self.fields is not None:
            out["fields"] = self.fields
        return out


def catalog_items(view: LakehouseView) -> dict[str, str]:
    """Every namespace, table and view key of a version and the definition file it points to."""
    out = dict(view.items(K.NAMESPACE_KEY_PREFIX))
    out.update(view.items(K.TABLE_KEY_PREFIX))
    out.update(view.items(K.VIEW_KEY_PREFIX))
    return out


def _definition(view: LakehouseView, location: str, kind: str) -> dict[str, Any] | None:
    from lakecore.core.defs import decode_namespace_def, decode_table_def, decode_view_def

    decoders = {
        "namespace": decode_namespace_def,
        "table": decode_table_def,
        "view": decode_view_def,
    }
    try:
        data = view.read_location(location)
        message = decoders[kind](data, location)
    except LakecoreError:
        return None
    return message_dict(message)


def catalog_diff(
    old_items: Mapping[str, str],
    new_items: Mapping[str, str],
    lakehouse_def: LakehouseDef,
    *,
    old_view: LakehouseView | None = None,
    new_view: LakehouseView | None = None,
) -> list[ObjectChange]:
    """The objects created, dropped and updated from ``old_items`` to ``new_items`` (key ->
    definition location), namespaces first, by name. With both views, updates carry their
    changed fields (definitions that cannot be read give ``fields`` = None)."""
    out: list[ObjectChange] = []
    for key in sorted(set(old_items) | set(new_items)):
        before, after = old_items.get(key), new_items.get(key)
        if before == after:
            continue
        try:
            parsed = K.parse_key(key, lakehouse_def)
        except LakecoreError:
            parsed = K.ParsedKey(-1, key.rstrip(), None)
        action = "created" if before is None else "dropped" if after is None else "updated"
        object_kind = parsed.kind if parsed.schema >= 0 else None
        change = ObjectChange(
            action,
            parsed.namespace,
            parsed.view if parsed.view is not None else parsed.table,
            key,
            before,
            after,
            object_kind=object_kind,
        )
        if action == "updated" and old_view is not None and new_view is not None:
            a = _definition(old_view, before or "", parsed.kind)
            b = _definition(new_view, after or "", parsed.kind)
            if a is not None and b is not None:
                change.fields = field_changes(a, b)
        out.append(change)
    kind_order = {"namespace": 0, "table": 1, "view": 2}
    out.sort(key=lambda c: (kind_order.get(c.kind, 1), c.namespace, c.table or ""))
    return out


def summarize_changes(changes: Iterable[ObjectChange], names_shown: int = 3) -> list[str]:
    """``created 2 tables (sales.orders, sales.items)``, one phrase per kind and action."""
    groups: dict[tuple[str, str], list[str]] = {}
    for change in changes:
        groups.setdefault((change.action, change.kind), []).append(change.name)
    phrases = []
    for action in ("created", "dropped", "updated"):
        for kind in ("namespace", "table", "view"):
            names = groups.get((action, kind))
            if not names:
                continue
            shown = ", ".join(names[:names_shown]) + (
                f", ... {len(names) - names_shown} more" if len(names) > names_shown else ""
            )
            noun = kind if len(names) == 1 else kind + "s"
            phrases.append(
                f"{action} {len(names) if len(names) > 1 else 'a'} {noun} ({shown})"
                if len(names) > 1
                else f"{action} {noun} {shown}"
            )
    return phrases


# -- history ---------------------------------------------------------------------------------------


@dataclass
class HistoryEntry:
    version: int
    created_at_millis: int | None
    state: str
    operation: str  # create | commit | flush | rollback | rollback-pin | rollback-unpin | export | drop-export | definition | none | unknown | unreadable
    summary: str
    root_bytes: int | None = None
    pinned_by: list[str] = field(default_factory=list)
    rollback_from_version: int | None = None
    restored_version: int | None = None
    changes: list[ObjectChange] = field(default_factory=list)
    definition_changes: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "created_at_millis": self.created_at_millis,
            "state": self.state,
            "operation": self.operation,
            "summary": self.summary,
            "root_bytes": self.root_bytes,
            "pinned_by": self.pinned_by,
            "rollback_from_version": self.rollback_from_version,
            "restored_version": self.restored_version,
            "changes": [c.as_dict() for c in self.changes],
            "definition_changes": self.definition_changes,
            "counts": self.counts,
            "error": self.error,
        }


def _same_tree(a: LakehouseView, b: LakehouseView) -> bool:
    return a.root.same_tree_as(b.root)


def _definition_summary(
    before: LakehouseDef, after: LakehouseDef
) -> tuple[str, str, list[dict[str, Any]]]:
    """(operation, summary, field changes) of a definition change."""
    fields = field_changes(before.as_dict(), after.as_dict())
    added = sorted(set(after.exported_snapshots) - set(before.exported_snapshots))
    dropped = sorted(set(before.exported_snapshots) - set(after.exported_snapshots))
    pins_after, pins_before = export_pins(after), export_pins(before)
    phrases = []
    operation = "definition"
    for name in added:
        if name.startswith(ROLLBACK_PIN_PREFIX):
            # The first of a rollback's two versions (Lakehouse.rollback).
            operation = "rollback-pin"
            phrases.append(f"rollback to version {pins_after.get(name)} begins: pinned ({name})")
            continue
        operation = "export"
        mode = after.properties.get(f"lakecore.exports.{name}.mode")
        target = after.properties.get(f"lakecore.exports.{name}.target")
        pinned = pins_after.get(name)
        phrases.append(
            f"export {name!r}"
            + (f" ({mode})" if mode else "")
            + (f" of version {pinned}" if pinned is not None else "")
            + (f" to {target}" if target else "")
        )
    for name in dropped:
        if name.startswith(ROLLBACK_PIN_PREFIX):
            # Released by the rollback's own commit (said as the rollback), or by a rollback
            # that failed after pinning.
            phrases.append(f"rollback pin {name} released")
            operation = "rollback-unpin" if operation == "definition" else operation
            continue
        operation = "drop-export" if not added else operation
        pinned = pins_before.get(name)
        phrases.append(
            f"dropped export {name!r}"
            + (f" (unpinned version {pinned})" if pinned is not None else "")
        )
    other = [
        f
        for f in fields
        if not f["field"].startswith(("exported_snapshots.", "properties.lakecore.exports."))
    ]
    if other:
        if not added and not dropped:
            operation = "definition"
        shown = [
            f"{f['field']} {_short(f['old'], f['field'])} -> {_short(f['new'], f['field'])}"
            for f in other[:4]
        ]
        phrases.append(
            "definition: "
            + "; ".join(shown)
            + (f"; ... {len(other) - 4} more" if len(other) > 4 else "")
        )
    return operation, "; ".join(phrases) or "definition rewritten (no field changed)", fields


def _short(value: Any, name: str = "") -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, int) and "_millis" in name:
        from lakecore.core.units import format_duration_millis

        return format_duration_millis(value)
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def history(
    storage: Storage,
    *,
    limit: int | None = None,
    since_millis: int | None = None,
    now_millis: int | None = None,
) -> list[HistoryEntry]:
    """The history, newest first: every version with a root file (``limit`` newest, those
    created at or after ``since_millis``), each with what it did relative to its parent."""
    now = int(time.time() * 1000) if now_millis is None else now_millis
    infos = list_versions(storage)
    readable = [i for i in infos if i.readable and i.created_at_millis is not None]
    expired: set[int] = set()
    latest_view: LakehouseView | None = None
    if readable:
        latest_info = readable[0]
        try:
            latest_view = open_version(
                storage.root_uri, latest_info.version, storage_options=storage.storage_options
            )
            created = {
                i.version: i.created_at_millis for i in readable if i.created_at_millis is not None
            }
            expired = set(
                expired_versions(created, latest_info.version, latest_view.lakehouse_def, now)
            )
        except LakecoreError:
            latest_view = None
    selected: list[VersionInfo] = []
    for info in infos:
        if (
            since_millis is not None
            and info.created_at_millis is not None
            and info.created_at_millis < since_millis
        ):
            break
        selected.append(info)
        if limit is not None and len(selected) >= limit:
            break
    by_version = {i.version: i for i in infos}
    views: dict[int, LakehouseView | None] = {}
    contents: dict[int, dict[str, str]] = {}

    def view_of(version: int) -> LakehouseView | None:
        if version not in views:
            info = by_version.get(version)
            if info is None or not info.readable:
                views[version] = None
            else:
                try:
                    views[version] = open_version(
                        storage.root_uri, version, storage_options=storage.storage_options
                    )
                except LakecoreError:
                    views[version] = None
        return views[version]

    def content_of(version: int) -> dict[str, str]:
        if version not in contents:
            view = view_of(version)
            assert view is not None
            contents[version] = catalog_items(view)
        return contents[version]

    out: list[HistoryEntry] = []
    for info in selected:
        state = (
            "expired" if info.version in expired and info.state == "retained" else str(info.state)
        )
        if not info.readable:
            out.append(
                HistoryEntry(
                    info.version,
                    None,
                    "unreadable",
                    "unreadable",
                    f"unreadable root: {info.error}",
                    error=info.error,
                )
            )
            continue
        view = view_of(info.version)
        if view is None:
            out.append(
                HistoryEntry(
                    info.version,
                    info.created_at_millis,
                    "unreadable",
                    "unreadable",
                    "the root or its definition cannot be read",
                    error="unreadable",
                )
            )
            continue
        entry = HistoryEntry(
            info.version,
            info.created_at_millis,
            state,
            "none",
            "",
            root_bytes=view.root_info.size,
            pinned_by=list(info.pinned_by),
            rollback_from_version=info.rollback_from_version,
        )
        try:
            _describe(entry, info, view, view_of, content_of, info.version - 1 in by_version)
        except LakecoreError as exc:
            entry.operation, entry.summary, entry.error = (
                "unknown",
                f"cannot be compared: {exc.one_line()}",
                exc.one_line(),
            )
        out.append(entry)
    return out


def _restored_version(info: VersionInfo, view: LakehouseView, view_of: Any) -> int | None:
    """The newest older version (within 200) whose tree a rollback restored. Versions that are
    gone or unreadable are passed over: a repair's roll forward sits above the damaged versions
    it rolled past, which ``repair drop-damaged`` may since have removed."""
    for older in range(info.version - 2, max(-1, info.version - 202), -1):
        candidate = view_of(older)
        if candidate is not None and _same_tree(candidate, view):
            return older
    return None


def _why_no_parent(parent: int, parent_known: bool) -> str:
    if parent_known:
        return f"version {parent}, its parent, cannot be read"
    return (
        f"version {parent}, its parent, is gone (expired by compact-versions, or dropped by repair)"
    )


def _describe(
    entry: HistoryEntry,
    info: VersionInfo,
    view: LakehouseView,
    view_of: Any,
    content_of: Any,
    parent_known: bool,
) -> None:
    if info.version == 0:
        entry.operation = "create"
        items = content_of(0)
        entry.summary = (
            f"created lakehouse {view.lakehouse_def.name!r} (order {view.lakehouse_def.order})"
        )
        if items:
            entry.changes = catalog_diff({}, items, view.lakehouse_def)
            entry.summary += "; " + "; ".join(summarize_changes(entry.changes))
        return
    parent = view_of(info.version - 1)
    if parent is None:
        entry.operation = "unknown"
        entry.summary = f"changes unknown: {_why_no_parent(info.version - 1, parent_known)}"
        try:  # what it holds, so the oldest version kept after compaction still says something
            items = content_of(info.version)
            namespaces = sum(1 for key in items if key.startswith(K.NAMESPACE_KEY_PREFIX))
            entry.summary += f"; it holds {plural(namespaces, 'namespace')} and {plural(len(items) - namespaces, 'table')}"
        except LakecoreError as exc:
            entry.error = exc.one_line()
        if info.rollback_from_version is not None:
            entry.operation = "rollback"
            entry.restored_version = _restored_version(info, view, view_of)
            entry.summary = (
                f"rollback from version {info.rollback_from_version}"
                + (
                    f" to the content of version {entry.restored_version}"
                    if entry.restored_version is not None
                    else ""
                )
                + " (parent unavailable)"
            )
        return
    phrases: list[str] = []
    operations: list[str] = []
    if info.rollback_from_version is not None:
        operations.append("rollback")
        restored = _restored_version(info, view, view_of)
        entry.restored_version = restored
        phrases.append(
            f"rollback from version {info.rollback_from_version}"
            + (f" to the content of version {restored}" if restored is not None else "")
        )
    if (
        view.root_info.lakehouse_def_path != parent.root_info.lakehouse_def_path
        and view.lakehouse_def != parent.lakehouse_def
    ):
        operation, summary, fields = _definition_summary(parent.lakehouse_def, view.lakehouse_def)
        entry.definition_changes = fields
        if not (operations == ["rollback"] and operation == "rollback-unpin"):
            # A rollback's release of its own pin is part of the rollback, not a change of its own.
            operations.append(operation)
            phrases.append(summary)
    if not _same_tree(parent, view):
        # This version's own tree first (a damaged version names itself), then the parent's: a
        # damaged parent (what a repair rolls back from) leaves this version's own kind (a
        # rollback, a definition change) known. Either way say which tree, and why.
        for version in (info.version, parent.version):
            try:
                content_of(version)
            except LakecoreError as exc:
                entry.error = exc.one_line()
                operations.append("unknown")
                phrases.append(
                    f"changes unknown: the tree of version {version} cannot be read ({exc.one_line()})"
                )
                entry.operation = operations[0]
                entry.summary = "; ".join(phrases)
                return
        before, after = content_of(parent.version), content_of(info.version)
        changes = (
            catalog_diff(before, after, view.lakehouse_def, old_view=parent, new_view=view)
            if before != after
            else []
        )
        entry.changes = changes
        if changes:
            operations.append("commit")
            phrases.extend(summarize_changes(changes))
            for change in changes:
                name = f"{change.kind}s_{change.action}"
                entry.counts[name] = entry.counts.get(name, 0) + 1
        elif info.rollback_from_version is None:
            operations.append("flush")
            phrases.append(
                f"flush: same catalog, tree rewritten (root buffer {len(parent.root.buffer)} -> "
                f"{len(view.root.buffer)} messages, root keys {len(parent.root.keys)} -> {len(view.root.keys)})"
            )
    entry.operation = operations[0] if operations else "none"
    entry.summary = "; ".join(phrases) if phrases else "no change"


__all__ = [
    "HistoryEntry",
    "ObjectChange",
    "catalog_diff",
    "catalog_items",
    "display_name",
    "field_changes",
    "history",
    "message_dict",
    "summarize_changes",
]
