"""Iceberg views in the lakehouse: pyiceberg's view calls on ``LakecoreCatalog``, time travel,
history and diff, gc and version compaction, fsck, and the rule that tables and views share a
namespace's names (docs/format.md#iceberg-views)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyiceberg.exceptions import (
    NamespaceNotEmptyError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ValidationError,
    ViewAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from lakecore.cli import main as lakecore_main
from lakecore.core import keys as K
from lakecore.core.defs import encode_def, table_def, view_def
from lakecore.core.view import clear_definition_cache
from lakecore.errors import AlreadyExistsError, CommitConflictError
from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.views import (
    AddSchemaUpdate,
    AddViewVersionUpdate,
    AssertViewUUID,
    SetCurrentViewVersionUpdate,
    SetPropertiesUpdate,
)
from lakecore.lakehouse import Lakehouse

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
WIDER = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)
DAY_MILLIS = 24 * 3600 * 1000


def version(sql: str, dialect: str = "spark", schema_id: int = 0) -> ViewVersion:
    return ViewVersion(
        schema_id=schema_id,
        representations=[
            ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect=dialect))
        ],
        default_namespace=("ns",),
    )


def replace(catalog: LakecoreCatalog, name: str, sql: str, schema: Schema = WIDER) -> str:
    """``CREATE OR REPLACE VIEW`` as Iceberg's Java client commits it; the new metadata location."""
    current = catalog.load_view(name)
    _, location = catalog.commit_view(
        name,
        [AssertViewUUID(type="assert-view-uuid", uuid=str(current.uuid()))],
        [
            AddSchemaUpdate.model_validate({"action": "add-schema", "schema": schema}),
            AddViewVersionUpdate.model_validate(
                {"action": "add-view-version", "view-version": version(sql, schema_id=-1)}
            ),
            SetCurrentViewVersionUpdate.model_validate(
                {"action": "set-current-view-version", "view-version-id": -1}
            ),
        ],
    )
    return location


@pytest.fixture
def catalog(tmp_path: Path) -> LakecoreCatalog:
    Lakehouse.create(str(tmp_path / "lake"))
    catalog = LakecoreCatalog("lakecore", uri=str(tmp_path / "lake"))
    catalog.create_namespace("ns")
    return catalog


def test_create_load_list_replace_and_drop(catalog: LakecoreCatalog) -> None:
    created = catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id"), properties={"a": "b"})
    assert catalog.list_views("ns") == [("ns", "v")]
    assert catalog.view_exists("ns.v") and not catalog.view_exists("ns.w")
    assert not catalog.view_exists("v") and not catalog.table_exists("ns.v")
    loaded = catalog.load_view("ns.v")
    assert loaded == created and loaded.properties == {"a": "b"}
    assert loaded.location().startswith(catalog.warehouse + "/ns/v-")
    first = loaded.metadata
    second_location = replace(catalog, "ns.v", "SELECT 2 AS id, 'x' AS name")
    assert second_location.split("/")[-1].startswith("00001-")
    replaced = catalog.load_view("ns.v")
    assert replaced.uuid() == created.uuid() and replaced.current_version().version_id == 2
    assert [f.name for f in replaced.schema().fields] == ["id", "name"]
    assert [e.version_id for e in replaced.history()] == [1, 2]
    # The lakehouse definition mirrors the current schema.
    definition = catalog.lakehouse.refresh().load_view("ns", "v")
    assert [c.name for c in definition.schema.columns] == ["id", "name"]
    assert definition.format_properties["metadata_location"] == second_location
    # Setting an equal version again reuses its id; nothing changes, no new file.
    again, location = catalog.commit_view("ns.v", [], [])
    assert location == second_location and again == replaced.metadata
    # Another UUID: the view's own with its last digit changed (setting it to "0" left a UUID
    # that ended in 0, one in 16, as it was: the commit went through).
    own = str(first.view_uuid)
    stale = AssertViewUUID(
        type="assert-view-uuid", uuid=own[:-1] + ("1" if own[-1] == "0" else "0")
    )
    with pytest.raises(Exception, match="view UUID does not match"):
        catalog.commit_view("ns.v", [stale], [])
    catalog.drop_view("ns.v")
    assert catalog.list_views("ns") == []
    with pytest.raises(NoSuchViewError, match=r"View does not exist: ns\.v"):
        catalog.load_view("ns.v")
    with pytest.raises(NoSuchViewError):
        catalog.drop_view("ns.v")


def test_version_history_keeps_the_newest_and_the_current(catalog: LakecoreCatalog) -> None:
    catalog.create_view("ns.v", SCHEMA, version("SELECT 0 AS id"))
    catalog.commit_view(
        "ns.v",
        [],
        [
            SetPropertiesUpdate(
                action="set-properties", updates={"version.history.num-entries": "2"}
            )
        ],
    )
    for n in range(1, 4):
        replace(catalog, "ns.v", f"SELECT {n} AS id", SCHEMA)
    view = catalog.load_view("ns.v")
    assert [v.version_id for v in view.versions] == [3, 4]
    assert view.sql_for("spark").sql == "SELECT 3 AS id"  # type: ignore[union-attr]


def test_tables_and_views_share_names(catalog: LakecoreCatalog) -> None:
    catalog.create_table("ns.t", SCHEMA)
    catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id"))
    with pytest.raises(ViewAlreadyExistsError, match="already exists as a table"):
        catalog.create_view("ns.t", SCHEMA, version("SELECT 1 AS id"))
    with pytest.raises(TableAlreadyExistsError, match="already exists as a view"):
        catalog.create_table("ns.v", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match="already exists as a view"):
        catalog.rename_table("ns.t", "ns.v")
    catalog.create_view("ns.w", SCHEMA, version("SELECT 1 AS id"))
    with pytest.raises(ViewAlreadyExistsError):
        catalog.rename_view("ns.w", "ns.t")
    with pytest.raises(ViewAlreadyExistsError):
        catalog.rename_view("ns.w", "ns.v")
    catalog.drop_table("ns.t")
    with pytest.raises(NamespaceNotEmptyError, match="view"):
        catalog.drop_namespace("ns")


def test_concurrent_creates_of_a_table_and_a_view_of_one_name_conflict(tmp_path: Path) -> None:
    """Each create guards the other kind's key: the second commit to land conflicts, though
    the keys the two write differ."""
    lake = Lakehouse.create(str(tmp_path / "lake"))
    with lake.transaction() as tx:
        tx.create_namespace("ns")
    first = Lakehouse.open(str(tmp_path / "lake")).transaction()
    second = Lakehouse.open(str(tmp_path / "lake")).transaction()
    first.create_table("ns", "x")
    second.create_view("ns", "x")
    first.commit()
    with pytest.raises(CommitConflictError):
        second.commit()
    latest = Lakehouse.open(str(tmp_path / "lake"))
    assert latest.table_exists("ns", "x") and not latest.view_exists("ns", "x")
    with pytest.raises(AlreadyExistsError), latest.transaction() as tx:
        tx.create_view("ns", "x")


def test_view_locations_stay_in_the_warehouse_and_out_of_tables(
    catalog: LakecoreCatalog, tmp_path: Path
) -> None:
    table = catalog.create_table("ns.t", SCHEMA)
    for location, words in [
        (f"file://{tmp_path}/elsewhere/v", "warehouse"),
        (table.location() + "/inside", "a folder of table ns.t"),
        (catalog.warehouse + "/ns/../v", "remove"),
    ]:
        with pytest.raises(ValidationError, match=words):
            catalog.create_view("ns.v", SCHEMA, version("SELECT 1"), location=location)
    assert catalog.list_views("ns") == []
    placed = catalog.create_view(
        "ns.v", SCHEMA, version("SELECT 1"), location=catalog.warehouse + "/views/v"
    )
    assert placed.location() == catalog.warehouse + "/views/v"


def test_register_view_points_at_existing_metadata(catalog: LakecoreCatalog) -> None:
    catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id"))
    location = (
        catalog.lakehouse.refresh().load_view("ns", "v").format_properties["metadata_location"]
    )
    registered = catalog.register_view("ns.r", location)
    assert registered.uuid() == catalog.load_view("ns.v").uuid()
    with pytest.raises(ValidationError, match="not a readable Iceberg view metadata"):
        catalog.register_view("ns.bad", catalog.warehouse + "/ns/nothing.metadata.json")
    with pytest.raises(ValidationError, match="warehouse"):
        catalog.register_view("ns.bad", "file:///etc/passwd")


def test_time_travel_history_diff_gc_and_fsck(
    catalog: LakecoreCatalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "lake")
    catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id"))
    created_at = catalog.lakehouse.refresh().version
    lake = catalog.lakehouse.refresh()
    first_definition = lake.get(K.view_key("ns", "v", lake.lakehouse_def))
    assert first_definition is not None and "-view-v-ns-" in first_definition
    replace(catalog, "ns.v", "SELECT 2 AS id, 'x' AS name")
    catalog.drop_view("ns.v")
    dropped_at = catalog.lakehouse.refresh().version

    # Time travel: the view as it was at each version.
    old = LakecoreCatalog("old", uri=root, version=str(created_at))
    assert old.list_views("ns") == [("ns", "v")]
    assert old.load_view("ns.v").sql_for("spark").sql == "SELECT 1 AS id"  # type: ignore[union-attr]
    with pytest.raises(Exception, match="read-only"):
        old.drop_view("ns.v")
    assert LakecoreCatalog("now", uri=root).list_views("ns") == []

    # History and diff name the view changes.
    capsys.readouterr()
    assert lakecore_main(["-l", root, "history", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    entries = entries["versions"] if isinstance(entries, dict) else entries
    summaries = {e["version"]: e["summary"] for e in entries}
    assert summaries[created_at] == "created view ns.v"
    assert summaries[created_at + 1] == "updated view ns.v"
    assert summaries[dropped_at] == "dropped view ns.v"
    assert lakecore_main(["-l", root, "diff", str(created_at), str(created_at + 1), "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["added"] == diff["removed"] == []
    [changed] = diff["changed"]
    assert (changed["kind"], changed["object"], changed["view"]) == ("view", "ns.v", "v")
    assert "schema.columns[2:name].name" in [f["field"] for f in changed["fields"]]

    # fsck checks view keys and definitions: clean.
    assert lakecore_main(["-l", root, "fsck", "--deep", "--all"]) == 0
    capsys.readouterr()

    # gc deletes nothing a retained version reaches: the old definition stays, time travel works.
    future = str(int(time.time() * 1000) + 2 * DAY_MILLIS)
    gc = ["-l", root, "gc", "--older-than", "1d", "--now", future]
    assert lakecore_main([*gc, "--i-understand-grace-risk"]) == 0
    clear_definition_cache()
    old = LakecoreCatalog("old", uri=root, version=str(created_at))
    assert old.load_view("ns.v").sql_for("spark").sql == "SELECT 1 AS id"  # type: ignore[union-attr]

    # Once those versions are expired, gc deletes their view definitions; never the Iceberg
    # metadata files (in the warehouse, not lakecore's).
    for n in range(3):  # three more versions: the view's are past minimum_versions_to_keep
        catalog.create_namespace(f"later{n}")
    metadata_files = sorted(Path(catalog.warehouse.removeprefix("file://")).rglob("*.json"))
    far = str(int(time.time() * 1000) + 400 * DAY_MILLIS)
    assert (
        lakecore_main(["-l", root, "compact-versions", "--now", far, "--i-understand-expiry-risk"])
        == 0
    )
    gc = ["-l", root, "gc", "--older-than", "1d", "--now", far, "--i-understand-grace-risk"]
    assert lakecore_main(gc) == 0
    assert not (Path(root) / first_definition).exists()
    assert sorted(Path(catalog.warehouse.removeprefix("file://")).rglob("*.json")) == metadata_files


def test_fsck_reports_a_broken_view_definition(
    catalog: LakecoreCatalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "lake"
    catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id"))
    lake = catalog.lakehouse.refresh()
    location = lake.get(K.view_key("ns", "v", lake.lakehouse_def))
    assert location is not None
    capsys.readouterr()
    # Another view's definition where this one's should be.
    (root / location).write_bytes(encode_def(view_def("other")))
    clear_definition_cache()
    assert lakecore_main(["-l", str(root), "fsck", "--deep", "--json"]) != 0
    report = capsys.readouterr().out
    assert "definition-name" in report and "'other'" in report
    # A table's definition: no view format.
    (root / location).write_bytes(encode_def(table_def("v")))
    assert lakecore_main(["-l", str(root), "fsck", "--deep", "--json"]) != 0
    report = capsys.readouterr().out
    assert "definition-corrupt" in report and "view_format" in report
    (root / location).unlink()
    assert lakecore_main(["-l", str(root), "fsck", "--deep", "--json"]) != 0
    assert "view ns.v" in capsys.readouterr().out


def test_cli_lists_shows_and_drops_views(
    catalog: LakecoreCatalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "lake")
    catalog.create_view("ns.v", WIDER, version("SELECT 1 AS id, 'a' AS name"))
    capsys.readouterr()
    assert lakecore_main(["-l", root, "view", "list", "ns", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["views"] == ["v"]
    assert lakecore_main(["-l", root, "view", "show", "ns", "v"]) == 0
    shown = capsys.readouterr().out
    assert "view ns.v (ICEBERG)" in shown and "columns: id INT8, name VARCHAR" in shown
    assert lakecore_main(["-l", root, "table", "list", "ns", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tables"] == []
    assert lakecore_main(["-l", root, "view", "drop", "ns", "v"]) == 0
    assert "dropped view ns.v" in capsys.readouterr().out
    assert lakecore_main(["-l", root, "view", "drop", "ns", "v"]) == 5  # not found
    assert "view ns.v does not exist" in capsys.readouterr().err
    assert catalog.list_views("ns") == []


def test_tables_keep_out_of_views_folders_and_views_out_of_purged_tables(
    catalog: LakecoreCatalog,
) -> None:
    """Table maintenance deletes what no table names under a table's folders (and a purged
    table's): a view's metadata must never lie there, whichever was placed first."""
    view = catalog.create_view(
        "ns.v", SCHEMA, version("SELECT 1"), location=catalog.warehouse + "/shared/v"
    )
    with pytest.raises(ValidationError, match=r"a folder of view ns\.v"):
        catalog.create_table("ns.t", SCHEMA, location=catalog.warehouse + "/shared")
    with pytest.raises(ValidationError, match=r"a folder of view ns\.v"):
        catalog.create_table("ns.t", SCHEMA, location=view.location())
    catalog.create_table("ns.t", SCHEMA, location=catalog.warehouse + "/elsewhere")
    catalog.purge_table("ns.t")  # a purge mark: maintenance deletes in the folder later
    with pytest.raises(ValidationError, match="dropped with purge"):
        catalog.create_view(
            "ns.w", SCHEMA, version("SELECT 1"), location=catalog.warehouse + "/elsewhere/w"
        )
    definition = catalog.lakehouse.refresh().load_view("ns", "v")
    assert definition.format_properties["location"] == view.location()
