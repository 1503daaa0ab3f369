"""``lakecore table-maintenance`` and ``lakecore table undrop`` as an operator meets them: one
line and a documented exit code for each mistake, nothing changed by a refused command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakecore.cli import main
from lakecore.lakehouse import Lakehouse
from tests.iceberg_histories import history, local, new_lake


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip()


def test_a_lakehouse_without_iceberg_tables_is_a_noop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Lakehouse.create(str(tmp_path / "lake"))
    assert main(["-l", str(tmp_path / "lake"), "--json", "table-maintenance"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "noop" and "no Iceberg table" in report["details"]["noop_reason"]


def test_mistakes_are_one_line_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, catalog = new_lake(tmp_path / "lake")
    history(catalog, "t", ["append", "overwrite"])
    version = Lakehouse.open(uri).version
    capsys.readouterr()
    assert main(["-l", uri, "table-maintenance", "--older-than", "10m"]) == 2
    refused = _err(capsys)
    assert "shorter than 1h" in refused and "--i-understand-grace-risk" in refused
    assert main(["-l", uri, "table-maintenance", "--dry-runn"]) == 2
    assert "--dry-run" in _err(capsys)  # the nearest option is named
    assert main(["-l", str(tmp_path / "nowhere"), "table-maintenance"]) == 5
    assert len(_err(capsys).splitlines()) == 1
    assert Lakehouse.open(uri).version == version  # nothing was committed


def test_undrop_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri, catalog = new_lake(tmp_path / "lake", latest_only=False)
    t = history(catalog, "t", ["append"])
    rows = t.scan().to_arrow()["id"].to_pylist()
    assert main(["-l", uri, "table", "drop", "ns", "t"]) == 0  # a plain drop: files stay
    dropped_at = Lakehouse.open(uri).version
    capsys.readouterr()

    assert main(["-l", uri, "--json", "table", "undrop", "ns", "t"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["from_version"] == dropped_at - 1 and answer["committed"]
    assert catalog.load_table("ns.t").scan().to_arrow()["id"].to_pylist() == rows

    assert main(["-l", uri, "table", "undrop", "ns", "t"]) == 2
    assert "the name is taken now" in _err(capsys)
    assert main(["-l", uri, "table", "undrop", "ns", "nope"]) == 5
    assert "no retained version holds a table ns.nope" in _err(capsys)
    assert main(["-l", uri, "table", "undrop", "ns", "nope", "--version", "999"]) == 5
    assert "there is no version 999 (the latest is" in _err(capsys)

    # A table the lakehouse API made (no Iceberg metadata) comes back too.
    assert main(["-l", uri, "table", "create", "ns", "plain", "--column", "1:id:INT8"]) == 0
    assert main(["-l", uri, "table", "drop", "ns", "plain"]) == 0
    assert main(["-l", uri, "table", "undrop", "ns", "plain"]) == 0
    assert Lakehouse.open(uri).table_exists("ns", "plain")


def test_undrop_refuses_a_folder_another_table_took(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, catalog = new_lake(tmp_path / "lake", latest_only=False)
    t = history(catalog, "t", ["append"])
    folder = t.location()
    catalog.drop_table("ns.t")
    catalog.create_table("ns.other", t.schema(), location=folder)
    capsys.readouterr()
    assert main(["-l", uri, "table", "undrop", "ns", "t"]) == 2
    assert "table ns.other" in _err(capsys)
    assert not catalog.table_exists("ns.t") and local(folder).exists()
