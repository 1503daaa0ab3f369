"""Purge marks: a dropped Iceberg table whose files are to be deleted once no retained lakehouse
version holds it (docs/format.md#purge-marks).

A purge (``LakecoreCatalog.purge_table``, ``DELETE .../tables/t?purgeRequested=true``) drops the
table and records, in the same commit, one lakehouse definition property:

    lakecore.iceberg.purge <namespace> <table> <table-uuid>  =  {"metadata_location": ...,
        "roots": [...], "dropped_at_millis": ..., "state": "waiting" | "purging"}

Why there: the definition is part of every commit, so the mark lands atomically with the drop
(a drop that loses its race writes no mark) and is carried forward by every later version,
whatever expires; every reader of a version already reads its definition, so the marks are
found without a scan; and a reader that knows nothing of marks ignores a property it does not
know (old lakehouses have none; older readers read new ones).

* ``roots`` (``PurgeMark.folders``) are the folders the purge may delete in: the table's location
  and own write paths as the catalog checked them (``lakecore.iceberg.purge``), never a folder of
  another table. The key keeps the word ``roots``, what a table's folders were once called: it is
  file bytes, and the table-maintenance report's ``purge_marks`` show it too.
* ``state`` is ``waiting`` until the maintenance job finds that no retained lakehouse version
  holds a table with this UUID any more (the drop's version and every older one have left
  retention, or a retained one was pinned by an export meanwhile: then it waits). It then
  commits ``purging`` *before* it deletes a file, deletes, and removes the mark in a last
  commit. An undrop removes the mark in its own commit: both change the definition, so one of
  the two loses its race and sees the other's answer (a table being purged cannot be undropped;
  a table undropped is not purged). A job stopped between the two commits leaves ``purging``:
  the next run finishes the deletes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from lakecore.core.export_records import ICEBERG_PROPERTY_PREFIX
from lakecore.errors import CorruptFileError

PURGE_PROPERTY_PREFIX: Final = ICEBERG_PROPERTY_PREFIX + "purge "
WAITING: Final = "waiting"
PURGING: Final = "purging"


@dataclass(frozen=True)
class PurgeMark:
    namespace: str
    table: str
    table_uuid: str
    metadata_location: str
    folders: tuple[str, ...]
    dropped_at_millis: int
    state: str = WAITING

    @property
    def key(self) -> str:
        return purge_key(self.namespace, self.table, self.table_uuid)

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"

    def value(self) -> str:
        return json.dumps(
            {
                "metadata_location": self.metadata_location,
                "roots": list(self.folders),  # the key on disk keeps its word
                "dropped_at_millis": self.dropped_at_millis,
                "state": self.state,
            },
            sort_keys=True,
        )

    def with_state(self, state: str) -> PurgeMark:
        return PurgeMark(
            self.namespace,
            self.table,
            self.table_uuid,
            self.metadata_location,
            self.folders,
            self.dropped_at_millis,
            state,
        )

    def as_details(self) -> dict[str, Any]:
        return {
            "table": self.name,
            "table_uuid": self.table_uuid,
            "metadata_location": self.metadata_location,
            "roots": list(self.folders),  # the report's key, as on disk
            "dropped_at_millis": self.dropped_at_millis,
            "state": self.state,
        }


def purge_key(namespace: str, table: str, table_uuid: str) -> str:
    return f"{PURGE_PROPERTY_PREFIX}{namespace} {table} {table_uuid}"


def is_purge_key(key: str) -> bool:
    return key.startswith(PURGE_PROPERTY_PREFIX)


def parse_mark(key: str, value: str) -> PurgeMark:
    """The mark a definition property holds; ``CorruptFileError`` (exit 6) when it is not one."""
    try:
        namespace, table, table_uuid = key[len(PURGE_PROPERTY_PREFIX) :].split(" ")
        data = json.loads(value)
        state = str(data.get("state", WAITING))
        if state not in (WAITING, PURGING):
            raise ValueError(f"unknown state {state!r}")
        return PurgeMark(
            namespace,
            table,
            table_uuid,
            str(data["metadata_location"]),
            tuple(str(r) for r in data["roots"]),
            int(data["dropped_at_millis"]),
            state,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(
            f"lakehouse definition property {key!r}",
            f"not a purge mark ({type(exc).__name__}: {exc}); nothing was purged",
        ) from exc


def marks_of(properties: Mapping[str, str]) -> list[PurgeMark]:
    """Every purge mark of a lakehouse definition's properties, by table name."""
    marks = [parse_mark(k, v) for k, v in properties.items() if is_purge_key(k)]
    return sorted(marks, key=lambda m: (m.namespace, m.table, m.table_uuid))


def marks_for(properties: Mapping[str, str], namespace: str, table: str) -> list[PurgeMark]:
    return [m for m in marks_of(properties) if (m.namespace, m.table) == (namespace, table)]


__all__ = [
    "PURGE_PROPERTY_PREFIX",
    "PURGING",
    "WAITING",
    "PurgeMark",
    "is_purge_key",
    "marks_for",
    "marks_of",
    "parse_mark",
    "purge_key",
]
