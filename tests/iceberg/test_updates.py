"""``apply_updates`` gives what pyiceberg's ``update_table_metadata`` gives, without its deep copy
(``lakecore.iceberg.updates``): a pyiceberg release that changes its rules fails here."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    RemovePropertiesUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    TableUpdate,
    update_table_metadata,
)
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DateType, LongType, NestedField

from lakecore.iceberg.updates import apply_updates

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "d", DateType()))
BASE = new_table_metadata(
    SCHEMA, PartitionSpec(), UNSORTED_SORT_ORDER, "file:///w/db/t", {"a": "1"}
)
LOCATION = "file:///w/db/t/metadata/00000-x.metadata.json"


def snapshot(snapshot_id: int, parent: int | None, sequence: int) -> Snapshot:
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=sequence,
        timestamp_ms=1_700_000_000_000 + sequence,
        manifest_list=f"file:///w/db/t/metadata/snap-{snapshot_id}.avro",
        summary=Summary(operation=Operation.APPEND),
        schema_id=0,
    )


def appended(snapshot_id: int, parent: int | None, sequence: int) -> tuple[TableUpdate, ...]:
    return (
        AddSnapshotUpdate(snapshot=snapshot(snapshot_id, parent, sequence)),
        SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id),
    )


CASES: dict[str, tuple[TableUpdate, ...]] = {
    "nothing": (),
    "set-properties": (SetPropertiesUpdate(updates={"k": "v"}),),
    "remove-properties": (RemovePropertiesUpdate(removals=["a"]),),
    "append": appended(1, None, 1),
    "two appends": appended(1, None, 1) + appended(2, 1, 2),
    "schema": (
        AddSchemaUpdate(
            schema_=Schema(*SCHEMA.fields, NestedField(3, "x", LongType()), schema_id=1)
        ),
        SetCurrentSchemaUpdate(schema_id=-1),
    ),
    "spec": (
        AddPartitionSpecUpdate(
            spec=PartitionSpec(
                PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="d_day"),
                spec_id=1,
            )
        ),
        SetDefaultSpecUpdate(spec_id=-1),
    ),
    "location": (SetLocationUpdate(location="file:///w/db/t2"),),
}


def comparable(metadata: TableMetadata) -> dict[str, Any]:
    """The metadata as JSON data, without the one field set from the clock."""
    data = metadata.model_dump(mode="json")
    data.pop("last-updated-ms", None)
    data.pop("last_updated_ms", None)
    for entry in data.get("metadata-log", data.get("metadata_log", [])):
        entry.pop("timestamp-ms", None)
        entry.pop("timestamp_ms", None)
    return data


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("location", [None, LOCATION])
def test_apply_updates_is_update_table_metadata(case: str, location: str | None) -> None:
    updates = CASES[case]
    ours = apply_updates(BASE, updates, metadata_location=location)
    theirs = update_table_metadata(BASE, updates, metadata_location=location)
    assert comparable(ours) == comparable(theirs)
    assert (ours.last_updated_ms == BASE.last_updated_ms) == (not updates)


def test_apply_updates_leaves_the_base_as_it_was() -> None:
    before = BASE.model_dump(mode="json")
    apply_updates(BASE, CASES["two appends"] + CASES["schema"], metadata_location=LOCATION)
    assert BASE.model_dump(mode="json") == before


def test_removing_an_absent_property_removes_nothing_as_in_java() -> None:
    """pyiceberg raised KeyError (a 500 at the REST server, found by the fuzzer); Iceberg's
    Java catalog ignores an absent key, and so does apply_updates."""
    with pytest.raises(KeyError):
        update_table_metadata(BASE, (RemovePropertiesUpdate(removals=[""]),))
    assert apply_updates(BASE, (RemovePropertiesUpdate(removals=[""]),)) is BASE
    both = apply_updates(BASE, (RemovePropertiesUpdate(removals=["a", "absent"]),))
    assert both.properties == {} and both.last_updated_ms >= BASE.last_updated_ms
