"""The read-only view of one version (lakecore/core/view.py): the one path that reads a root with
its definition, the version log, exports recorded in a definition, and lookups by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecore import clear_caches
from lakecore.core.export_records import (
    EXPORT_MODE_PROPERTY,
    check_export_name_free,
    check_user_properties,
    export_infos,
    read_only_reason,
    with_export_recorded,
)
from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.view import (
    has_lakehouse,
    list_versions,
    open_version,
    read_lakehouse_def,
    refuse_unsupported_format,
)
from lakecore.errors import (
    AlreadyExistsError,
    CorruptFileError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from lakecore.lakehouse import Lakehouse


@pytest.fixture
def lake(tmp_path: Path) -> Lakehouse:
    """Version 0 empty; 1: namespace sales; 2: tables; 3: a nested namespace; 4 and 5: a
    rollback to version 2 (its pin, then the rolling forward)."""
    lh = Lakehouse.create(str(tmp_path / "lake"), name="view", order=4)
    with lh.transaction() as tx:
        tx.create_namespace("sales", properties={"owner": "a"})
    with lh.transaction() as tx:
        for name in ("orders", "refunds", "returns"):
            tx.create_table("sales", name, properties={"t": name})
    with lh.transaction() as tx:
        tx.create_namespace("sales.eu")
    lh.rollback(to_version=2)
    return lh


def test_a_view_reads_its_version_and_nothing_newer(lake: Lakehouse) -> None:
    old = open_version(lake.uri, 1)
    assert (old.version, old.list_namespaces(), old.list_tables("sales")) == (1, ["sales"], [])
    two = old.open_version(2)
    assert two.list_tables("sales") == ["orders", "refunds", "returns"]
    assert two.table_exists("sales", "orders") and not two.table_exists("sales", "nope")
    assert two.load_table("sales", "refunds").properties == {"t": "refunds"}
    assert dict(two.load_namespace("sales").properties) == {"owner": "a"}
    three = two.open_version(3)
    assert three.child_namespaces("sales") == ["sales.eu"]
    assert three.has_child_namespaces("sales") and not three.has_child_namespaces("sales.eu")
    # Version 5 rolled forward to version 2's content: the nested namespace is gone again.
    five = three.open_version(5)
    assert five.list_namespaces() == ["sales"] and five.child_namespaces("sales") == []
    assert dict(five.items()) == dict(two.items())


def test_the_version_log_lists_every_root_and_marks_a_damaged_one(lake: Lakehouse) -> None:
    root = Path(lake.uri.removeprefix("file://"))
    (root / root_node_file_name(3)).write_bytes(b"not an arrow file")
    clear_caches()
    log = sorted(list_versions(lake.storage), key=lambda v: v.version)  # it lists newest first
    assert [v.version for v in log] == [0, 1, 2, 3, 4, 5]
    damaged = [v for v in log if not v.readable]
    assert [v.version for v in damaged] == [3] and damaged[0].error
    assert log[5].rollback_from_version == 3  # asked on version 3; version 4 is its pin
    assert all(v.created_at_millis for v in log if v.readable)
    with pytest.raises(CorruptFileError):
        open_version(lake.uri, 3)
    assert open_version(lake.uri, 2).list_tables("sales") == ["orders", "refunds", "returns"]


def test_exports_are_recorded_by_name_and_refused_twice(lake: Lakehouse) -> None:
    definition = lake.lakehouse_def
    recorded = with_export_recorded(definition, "nightly", root_node_file_name(2), "minimal", None)
    (info,) = export_infos(recorded)
    assert (info.name, info.version, info.mode, info.target) == ("nightly", 2, "minimal", None)
    with pytest.raises(AlreadyExistsError, match="nightly"):
        check_export_name_free(recorded, "nightly")
    check_export_name_free(recorded, "weekly")


def test_a_copy_is_read_only_and_its_marks_are_reserved(lake: Lakehouse) -> None:
    assert read_only_reason(lake.lakehouse_def) is None
    copy_def = lake.lakehouse_def.with_changes(properties={EXPORT_MODE_PROPERTY: "full"})
    assert "export" in (read_only_reason(copy_def) or "")
    with pytest.raises(InvalidArgumentError, match=EXPORT_MODE_PROPERTY):
        check_user_properties([EXPORT_MODE_PROPERTY])
    check_user_properties(["owner", "team.name"])


def test_a_definition_of_a_later_major_version_is_refused_by_name(lake: Lakehouse) -> None:
    message = lake.lakehouse_def.to_message()
    message.major_version = 2  # as a future lakecore would write it
    location = "_lakehouse_def_future.binpb"
    lake.storage.write(location, message.SerializeToString())
    with pytest.raises(UnsupportedFormatVersionError):
        read_lakehouse_def(lake.storage, location)
    refuse_unsupported_format(lake.storage)  # the lakehouse's own definition is fine


def test_has_lakehouse_is_a_root_file_at_the_top(tmp_path: Path, lake: Lakehouse) -> None:
    assert has_lakehouse(lake.storage)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a lakehouse")
    assert not has_lakehouse(Storage(str(empty)))
    assert has_lakehouse(Lakehouse.create(str(tmp_path / "new"), name="e").storage)
