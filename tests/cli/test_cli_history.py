"""Issue 15's command line: history, describe, the completed CLI, human units. No Spark."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from lakecore.cli.dispatch import build_parser, main
from lakecore.core.storage import Storage
from lakecore.core.tree import SHARED_CACHE
from lakecore.core.units import format_bytes, format_seconds, format_time_millis, plural
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.history import display_name, history
from lakecore.lakehouse.treeinfo import to_dot


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def lake(tmp_path: Path) -> Lakehouse:
    """Versions: 0 create, 1-3 namespaces (one named a.b), 4-6 tables (two both print as a.b.c
    without quoting), 7 a table update (metadata_location, as an Iceberg commit), 8 a settings
    change, 9 an export, 10 a drop, 11 and 12 a rollback to 9's content (its pin, then the
    rolling forward)."""
    lh = Lakehouse.create(str(tmp_path / "lake"), name="hist", order=4)
    for ns in ("sales", "a.b", "a"):
        with lh.transaction() as tx:
            tx.create_namespace(ns)
    for ns, table in (("sales", "orders"), ("a.b", "c"), ("a", "b.c")):
        with lh.transaction() as tx:
            tx.create_table(
                ns, table, columns=[{"id": 1, "name": "id", "type": "INT8", "nullable": False}]
            )
    with lh.transaction() as tx:
        # As the Iceberg catalog points a table at its metadata (the API refuses it otherwise).
        tx.update_table(
            "sales",
            "orders",
            format_properties={"metadata_location": "s3://w/m/00001.json"},
            checked_by_catalog=True,
        )
    lh.update_settings(maximum_version_age_millis=14 * 86_400_000)
    lh.export_snapshot("nightly")
    with lh.transaction() as tx:
        tx.drop_table("a", "b.c")
    lh.rollback(to_version=9)
    return lh


def test_history_derives_each_version_from_its_parent(lake: Lakehouse) -> None:
    entries = {e.version: e for e in history(lake.storage)}
    assert entries[0].operation == "create"
    assert entries[2].summary == 'created namespace "a.b"'
    assert (
        entries[5].summary == 'created table "a.b".c'
        and entries[6].summary == 'created table a."b.c"'
    )
    update = entries[7]
    assert update.operation == "commit" and update.summary == "updated table sales.orders"
    assert update.changes[0].fields == [
        {"field": "format_properties.metadata_location", "old": None, "new": "s3://w/m/00001.json"}
    ]
    assert entries[8].operation == "definition" and "14d" in entries[8].summary
    assert entries[9].operation == "export" and "nightly" in entries[9].summary
    assert entries[10].summary == 'dropped table a."b.c"'
    pin = entries[11]
    assert pin.operation == "rollback-pin" and pin.summary.startswith(
        "rollback to version 9 begins: pinned (rollback:"
    )
    rollback = entries[12]
    assert rollback.operation == "rollback" and rollback.restored_version == 9
    assert (
        rollback.summary
        == 'rollback from version 10 to the content of version 9; created table a."b.c"'
    )
    assert (
        entries[12].state == "latest"
        and entries[8].state == "pinned"
        and entries[8].pinned_by == ["nightly"]
    )
    assert all(e.root_bytes and e.root_bytes > 0 for e in entries.values())
    assert [e.version for e in history(lake.storage, limit=3)] == [12, 11, 10]
    # Far in the future every version is past 14 days: all but the kept and pinned ones are "expired".
    later = history(lake.storage, now_millis=lake.created_at_millis + 30 * 86_400_000)
    # 8 is pinned by the export; 10-12 are the newest three.
    assert {e.version for e in later if e.state == "expired"} == {*range(0, 8), 9}


def test_history_command_text_json_and_since(
    lake: Lakehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "-l", lake.uri, "history", "--limit", "5")
    assert (code == 0 and "rollback" in out and "KiB" in out) or " B " in out
    data = _json(capsys, "-l", lake.uri, "history", "--json")
    assert [v["version"] for v in data["versions"]] == list(range(12, -1, -1))
    since = lake.at_version(10).created_at_millis
    data = _json(capsys, "-l", lake.uri, "history", "--since", str(since), "--json")
    assert [v["version"] for v in data["versions"]] == [12, 11, 10]
    versions = _json(
        capsys, "-l", lake.uri, "versions", "--json", "--limit", "2"
    )  # --json after the command
    assert [v["operation"] for v in versions] == ["rollback", "rollback-pin"]


def test_describe_and_health_page(
    lake: Lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _json(capsys, "-l", lake.uri, "describe", "--json")
    assert data["versions"]["latest"] == 12 and data["versions"]["pinned"] == [8]
    assert data["definition"]["maximum_version_age_millis"] == 14 * 86_400_000
    assert data["files"]["by_kind"]["root_node"]["count"] == 13 and data["tree"]["depth"] >= 1
    code, out, _ = _run(capsys, "-l", lake.uri, "describe", "--html", str(tmp_path / "h.html"))
    assert code == 0 and "versions older than 14d expire" in out
    page = (tmp_path / "h.html").read_text()
    assert page.count("<svg") >= 3 and "<script" not in page


def test_diff_shows_fields_and_tells_dotted_names_apart(
    lake: Lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = str(tmp_path / "cache")
    code, out, _ = _run(capsys, "-l", lake.uri, "diff", "3", "7", "--cache-dir", cache)
    assert code == 0
    assert '+ table "a.b".c' in out and '+ table a."b.c"' in out
    code, out, _ = _run(capsys, "-l", lake.uri, "diff", "6", "7", "--cache-dir", cache)
    assert (
        "~ table sales.orders" in out
        and "format_properties.metadata_location: (unset) -> 's3://w/m/00001.json'" in out
    )
    data = _json(capsys, "-l", lake.uri, "diff", "6", "7", "--cache-dir", cache, "--json")
    assert (
        data["changed"][0]["object"] == "sales.orders"
        and data["changed"][0]["fields"][0]["field"] == "format_properties.metadata_location"
    )


def test_property_commands_as_of_and_lookup_by_name(
    lake: Lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "-l", lake.uri, "namespace", "set-properties", "sales", "owner=a", "tier=1"
    )
    assert code == 0 and out.startswith("set properties of namespace 'sales' in version 13")
    code, out, _ = _run(capsys, "-l", lake.uri, "namespace", "unset-properties", "sales", "tier")
    assert code == 0 and lake.refresh().load_namespace("sales").properties == {"owner": "a"}
    code, out, _ = _run(capsys, "-l", lake.uri, "table", "set-properties", "a.b", "c", "k=v")
    assert code == 0 and 'table "a.b".c' in out
    code, out, _ = _run(capsys, "-l", lake.uri, "table", "set-properties", "a.b", "c", "k=v")
    assert code == 0 and "nothing committed" in out
    code, _, err = _run(capsys, "-l", lake.uri, "table", "unset-properties", "a.b", "c", "nope")
    assert code == ExitCode.NOT_FOUND and "nope" in err
    # --as-of: the newest version at or before a time; here version 3's own timestamp.
    at3 = (
        format_time_millis(lake.at_version(3).created_at_millis)
        .replace(" UTC", "Z")
        .replace(" ", "T")
    )
    data = _json(capsys, "-l", lake.uri, "namespace", "list", "--as-of", at3, "--json")
    assert data == {"version": 3, "namespaces": ["a", "a.b", "sales"]}
    code, _, err = _run(capsys, "-l", lake.uri, "namespace", "list", "--as-of", "2000-01-01")
    assert code == ExitCode.NOT_FOUND, err
    data = _json(
        capsys,
        "-l",
        lake.uri,
        "--json",
        "lookup",
        "get",
        "--namespace",
        "a",
        "--table",
        "b.c",
        "--cache-dir",
        str(tmp_path / "c"),
    )
    assert next(iter(data.values())).endswith(".binpb")


def test_errors_are_json_with_json(lake: Lakehouse, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "-l", lake.uri, "table", "show", "sales", "nope", "--json")
    assert code == ExitCode.NOT_FOUND and json.loads(out) == {
        "error": f"NotFoundError: table sales.nope does not exist at version {lake.version}",
        "exit_code": 5,
    }
    assert err.count("\n") == 1
    code, out, _ = _run(capsys, "--json", "no-such-command")
    assert code == ExitCode.BAD_INPUT and json.loads(out)["exit_code"] == 2


def test_every_option_has_help_and_version_prints(capsys: pytest.CaptureFixture[str]) -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            elif not action.help and not isinstance(action, argparse._HelpAction):
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "lakecore")
    assert missing == []
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("lakecore ")


def test_completion_script(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("argcomplete")
    code, out, _ = _run(capsys, "completion", "bash")
    assert code == 0 and "complete" in out and "lakecore" in out


def test_tree_dot_ranks_levels_with_key_ranges_and_cuts(tmp_path: Path) -> None:
    lh = Lakehouse.create(
        str(tmp_path / "deep"), name="deep", order=4, node_file_max_size_bytes=4096
    )
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(10):
        with lh.transaction() as tx:
            for j in range(4):
                tx.create_table(
                    "ns",
                    f"t{i}{j}",
                    columns=[{"id": 1, "name": "x", "type": "INT8", "nullable": True}],
                )
    dot = to_dot(lh, max_levels=2)
    assert "rank=same" in dot and "[* .. ns.t" in dot and "nodes below" in dot
    full = to_dot(lh, max_levels=10)
    assert "nodes below" not in full and full.count("rank=same") >= 3


def test_human_units() -> None:
    assert format_bytes(2053414) == "1.96 MiB" and format_bytes(512) == "512 B"
    assert (
        format_seconds(259200) == "3d"
        and format_seconds(1.44) == "1.4s"
        and format_seconds(125) == "2m 05s"
    )
    assert format_time_millis(1795219200000) == "2026-11-21 00:00:00 UTC"
    assert plural(1, "violation") == "1 violation" and plural(2, "violation") == "2 violations"
    assert plural(30313, "file") == "30,313 files"
    assert display_name("a.b", "c") != display_name("a", "b.c")


def test_storage_listing_is_the_one_in_describe(lake: Lakehouse) -> None:
    from lakecore.lakehouse.describe import file_stats

    stats = file_stats(Storage(lake.uri))
    assert stats["by_kind"]["table_def"]["count"] >= 4 and stats["errors"] == []


def _lake_with_a_damaged_latest_node(path: Path) -> tuple[Lakehouse, int]:
    """A lakehouse whose latest commit wrote a node file below the root, now truncated; returns
    it and that version."""
    from lakecore import clear_caches
    from lakecore.core.locations import is_full_uri
    from lakecore.maintenance.tree_files import reachable_from_root

    # Small node files: a commit that overflows the root pushes messages down into new nodes.
    lh = Lakehouse.create(
        str(path),
        name="damaged",
        order=4,
        node_file_max_size_bytes=4096,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    only_latest: set[str] = set()
    for i in range(60):  # until a commit writes a node file its parent does not reach
        before = reachable_from_root(lh.store, lh.root, include_values=False).nodes
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i:02d}")
        only_latest = set(reachable_from_root(lh.store, lh.root, include_values=False).nodes) - set(
            before
        )
        if only_latest:
            break
    assert only_latest, "no commit wrote a node file below the root: nothing to damage"
    victim = sorted(p for p in only_latest if not is_full_uri(p))[0]
    (path / victim).write_bytes(b"truncated")
    clear_caches()  # this process wrote the node and keeps it decoded: read it from disk
    return lh, lh.version


def test_a_rollback_from_a_damaged_version_is_still_a_rollback_in_the_log(tmp_path: Path) -> None:
    """After a repair rolled back from a version with a damaged node file, the log showed the
    healthy new version as "unknown ... cannot be compared"; it is the rollback, and it says
    why its changes are not known."""
    lh, damaged_version = _lake_with_a_damaged_latest_node(tmp_path / "lake")
    restored = lh.rollback(to_version=damaged_version - 1)
    entries = {e.version: e for e in history(lh.storage)}
    entry = entries[restored]
    assert entry.operation == "rollback"
    # Its parent is its pin's version, which carries the damaged tree it was asked on.
    assert entry.summary.startswith(
        f"rollback from version {damaged_version} to the content of version "
        f"{damaged_version - 1}; changes unknown: the tree of version {damaged_version + 1} "
        "cannot be read (CorruptNodeFileError"
    )
    # The damaged version's own row names its own tree, not its parent's.
    assert entries[damaged_version].summary.startswith(
        f"changes unknown: the tree of version {damaged_version} cannot be read (CorruptNodeFileError"
    ), entries[damaged_version].summary
    # Once drop-damaged has removed the damaged version, the rollback still names what it restored.
    from lakecore.lakehouse import repair

    dropped = repair.drop_damaged(lh.storage, apply=True).dropped_versions
    assert dropped == [damaged_version, damaged_version + 1]  # and the pin's, which shared its tree
    entry = {e.version: e for e in history(lh.storage)}[restored]
    assert entry.operation == "rollback" and entry.restored_version == damaged_version - 1
    assert entry.summary == (
        f"rollback from version {damaged_version} to the content of version "
        f"{damaged_version - 1} (parent unavailable)"
    )


def test_a_damaged_node_in_the_latest_version_names_the_next_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged root said how to repair; a damaged node below a whole root said only
    "truncated or foreign file"."""
    lh, _ = _lake_with_a_damaged_latest_node(tmp_path / "lake")
    code, _out, err = _run(capsys, "-l", lh.uri, "table", "list", "ns")
    assert code == ExitCode.DAMAGED
    (line,) = err.strip().splitlines()
    assert line.startswith("lakecore: CorruptNodeFileError: ")
    assert line.endswith(
        f"A file of the lakehouse is damaged: `lakecore -l {lh.uri} fsck --all` names the damaged "
        f"versions, and `lakecore -l {lh.uri} repair rollback --to-last-valid` rolls forward to the "
        "newest clean one (a plan first; add --yes)"
    )


def test_describe_of_a_damaged_tree_describes_the_rest_and_exits_6(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lh = Lakehouse.create(
        str(tmp_path / "lake"),
        name="hurt",
        order=4,
        node_file_max_size_bytes=4096,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
    )
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(20):  # a small root: commits push buffered keys down into child node files
        with lh.transaction() as tx:
            tx.create_table(
                "ns", f"t{i}", columns=[{"id": 1, "name": "id", "type": "INT8", "nullable": False}]
            )
    nodes = sorted(p for p in (tmp_path / "lake").rglob("*-node-*.arrow"))
    assert nodes, "the tree has child node files"
    for (
        node
    ) in nodes:  # truncated child nodes: the latest tree cannot be walked, its root still read
        node.write_bytes(node.read_bytes()[:50])
    SHARED_CACHE.clear()  # the writer's nodes are cached in this process: read the damaged files
    code, out, err = _run(capsys, "-l", lh.uri, "describe", "--html", str(tmp_path / "h.html"))
    assert code == ExitCode.DAMAGED
    assert "lakehouse 'hurt'" in out and "tree at version" in out and "DAMAGED" in out
    assert err.count("\n") == 1 and "is damaged" in err and "repair rollback --to-last-valid" in err
    assert "the tree of version" in (tmp_path / "h.html").read_text()
    code, out, _ = _run(capsys, "-l", lh.uri, "describe", "--json")
    assert code == ExitCode.DAMAGED and json.loads(out)["tree"]["damaged"]


def test_the_oldest_version_kept_says_its_parent_is_gone_and_what_it_holds(lake: Lakehouse) -> None:
    """After compact-versions deletes the root files of versions 0-4, version 5 has no parent to
    compare with: history says so, and what the version holds, rather than only "unknown"."""
    from lakecore.core.locations import root_node_file_name

    for version in range(5):
        (
            Path(lake.storage.root_uri.removeprefix("file://")) / root_node_file_name(version)
        ).unlink()
    SHARED_CACHE.clear()
    oldest = {e.version: e for e in history(lake.storage)}[5]
    assert oldest.operation == "unknown" and oldest.error is None
    assert oldest.summary == (
        "changes unknown: version 4, its parent, is gone (expired by compact-versions, "
        "or dropped by repair); it holds 3 namespaces and 2 tables"
    )
