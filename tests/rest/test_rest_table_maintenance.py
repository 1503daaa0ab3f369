"""End to end through the REST server: a table pyiceberg writes through ``lakecore serve``'s
API, its snapshots expired and its debris cleaned by ``lakecore table-maintenance``, dropped
with ``purgeRequested``, brought back with ``lakecore table undrop``, purged for good.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from lakecore.cli import main as cli_main
from lakecore.lakehouse import Lakehouse
from tests.rest.conftest import Served

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
LATER = str(int(time.time() * 1000) + 30 * 86_400_000)


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def _maintain(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    code = cli_main(
        [
            "-l",
            str(root),
            "--json",
            "table-maintenance",
            "--now",
            LATER,
            "--i-understand-grace-risk",
        ]
    )
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    assert code == 0, report
    return report


def test_written_through_rest_expired_cleaned_purged_undropped(
    rest: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    client = rest.client()
    client.create_namespace("db")
    table = client.create_table("db.t", SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    table.overwrite(pa.table({"id": pa.array([7, 8], pa.int64())}))
    table = client.load_table("db.t")
    location = Path(table.location().removeprefix("file://"))
    junk = location / "data" / "failed-write.parquet"
    junk.write_bytes(b"x")
    old = time.time() - 10 * 86400
    os.utime(junk, (old, old))
    Lakehouse.open(str(rest.root)).update_settings(
        minimum_versions_to_keep=1, maximum_version_age_millis=0
    )
    before = _files(location)

    report = _maintain(rest.root, capsys)

    counts = report["counts"]
    assert isinstance(counts, dict)
    assert counts["snapshots_expired"] == len(table.metadata.snapshots) - 1
    assert counts["files_deleted"] > 0 and not junk.exists()
    table = client.load_table("db.t")
    assert len(table.metadata.snapshots) == 1
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [7, 8]
    assert not before <= _files(location)  # expired files went

    lakehouse = Lakehouse.open(str(rest.root))
    lakehouse.update_settings(minimum_versions_to_keep=3)  # the version before a drop stays
    client.purge_table("db.t")  # DELETE .../tables/t?purgeRequested=true: drop and mark
    with pytest.raises(NoSuchTableError):
        client.load_table("db.t")
    assert _files(location)
    assert cli_main(["-l", str(rest.root), "table", "undrop", "db", "t"]) == 0
    assert sorted(client.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [7, 8]

    client.purge_table("db.t")
    lakehouse.update_settings(minimum_versions_to_keep=1)  # the drop leaves retention
    report = _maintain(rest.root, capsys)
    counts = report["counts"]
    assert isinstance(counts, dict) and counts["purge_marks_finished"] == 1
    assert not _files(location)
    capsys.readouterr()
    assert cli_main(["-l", str(rest.root), "table", "undrop", "db", "t"]) == 5
    assert "no retained version holds a table db.t" in capsys.readouterr().err
