"""The lakecore command line, run as a real subprocess where exit codes and stderr matter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakecore.cli import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKECORE_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "lakecore.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_catalog_tour_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = str(tmp_path / "lake")
    assert main(["init", lake, "--name", "tour", "--order", "8"]) == 0
    assert main(["-l", lake, "namespace", "create", "sales", "--property", "owner=team-a"]) == 0
    assert (
        main(
            [
                "-l",
                lake,
                "table",
                "create",
                "sales",
                "orders",
                "--column",
                "1:id:INT8:required",
                "--column",
                "2:amount:DECIMAL",
                "--property",
                "tier=gold",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["-l", lake, "--json", "table", "show", "sales", "orders"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "orders" and shown["properties"] == {"tier": "gold"}
    assert [c["name"] for c in shown["schema"]["columns"]] == ["id", "amount"]
    assert main(["-l", lake, "--json", "versions"]) == 0
    versions = json.loads(capsys.readouterr().out)
    assert [v["version"] for v in versions] == [2, 1, 0]
    assert main(["-l", lake, "get", "--namespace", "sales", "--table", "orders"]) == 0
    assert capsys.readouterr().out.strip().endswith(".binpb")
    assert main(["-l", lake, "--json", "tree"]) == 0
    assert json.loads(capsys.readouterr().out)["depth"] == 1
    assert main(["-l", lake, "tree", "--dot"]) == 0
    assert capsys.readouterr().out.startswith("digraph")
    assert main(["-l", lake, "rollback", "--to-version", "1"]) == 0
    capsys.readouterr()
    assert main(["-l", lake, "table", "list", "sales"]) == 0
    assert capsys.readouterr().out.strip() == "(no tables)"
    assert (
        main(["-l", lake, "export", "snap", "--target", str(tmp_path / "exp"), "--mode", "full"])
        == 0
    )
    # Versions 3 and 4 were the rollback (its pin, then the rolling forward).
    assert "recorded in version 5" in capsys.readouterr().out
    assert main(["-l", lake, "--json", "fsck", "--all", "--deep"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["-l", "{lake}", "namespace", "create", "bad name"], 2, "InvalidNameError"),
        (["-l", "s3://bucket/../x", "namespace", "list"], 2, "InvalidLocationError"),
        (["-l", "{missing}", "namespace", "list"], 5, "no lakehouse"),
        (
            ["-l", "{lake}", "table", "create", "nope", "t", "--column", "1:id:INT8"],
            5,
            "does not exist",
        ),
        (["-l", "{lake}", "namespace", "drop", "full"], 2, "NamespaceNotEmptyError"),
        (
            ["init", "{lake}", "--order", "128", "--node-file-max-size-bytes", "100"],
            2,
            "node_file_max_size_bytes",
        ),
        (["-l", "{lake}", "rollback", "--to-version", "77"], 5, "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(
    tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    lake = tmp_path / "lake"
    assert main(["init", str(lake)]) == 0
    assert main(["-l", str(lake), "namespace", "create", "full"]) == 0
    assert main(["-l", str(lake), "table", "create", "full", "t", "--column", "1:id:INT8"]) == 0
    before = sorted(p.name for p in lake.rglob("*"))
    proc = run(*[a.format(lake=lake, missing=tmp_path / "missing") for a in args])
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert sorted(p.name for p in lake.rglob("*")) == before, "a failed command left files behind"


def test_fsck_reports_a_missing_node_with_exit_code_1(tmp_path: Path) -> None:
    from lakecore.lakehouse import Lakehouse

    lake = str(tmp_path / "lake")
    lh = Lakehouse.create(
        lake,
        order=3,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=8,
        table_name_max_size_bytes=8,
        file_name_max_size_bytes=100,
    )
    for i in range(30):
        with lh.transaction() as tx:
            tx.create_namespace(f"n{i:02d}")
    node = lh.root.children[0]
    (tmp_path / "lake" / node).unlink()
    proc = run("-l", lake, "fsck")
    assert proc.returncode == 1
    assert "unreadable-node" in proc.stdout and node in proc.stdout


def test_a_definition_deleted_by_hand_is_damage_named_with_the_way_out(tmp_path: Path) -> None:
    # The trial's finding: `table show` of a table whose definition file was deleted said "file
    # ... does not exist" with exit 5 (not found), and plain fsck said "clean".
    lake = tmp_path / "lake"
    assert main(["init", str(lake)]) == 0
    assert main(["-l", str(lake), "namespace", "create", "ns"]) == 0
    assert main(["-l", str(lake), "table", "create", "ns", "t", "--column", "1:id:INT8"]) == 0
    assert main(["-l", str(lake), "table", "create", "ns", "kept", "--column", "1:id:INT8"]) == 0
    (definition,) = lake.rglob("*-table-t-ns-*.binpb")
    definition.unlink()

    show = run("-l", str(lake), "table", "show", "ns", "t")
    assert show.returncode == 6, show.stderr
    (line,) = show.stderr.strip().splitlines()
    assert "MissingDefinitionError: table ns.t:" in line and definition.name in line
    assert "fsck --deep" in line and "table drop ns t" in line
    assert run("-l", str(lake), "table", "show", "ns", "kept").returncode == 0

    plain = run("-l", str(lake), "fsck")
    assert (
        plain.returncode == 0
        and "the tree is clean (--deep also reads every definition file)" in plain.stdout
    )
    deep = run("-l", str(lake), "fsck", "--deep")
    assert deep.returncode == 1 and "1 version with violations" in deep.stdout
    assert "[definition-missing] table ns.t: file " in deep.stdout  # named, not the padded key

    # The way out the line names works: the table goes, the other stays, fsck --deep is clean.
    assert run("-l", str(lake), "table", "drop", "ns", "t").returncode == 0
    after = run("-l", str(lake), "fsck", "--deep")
    assert after.returncode == 0 and ": clean" in after.stdout, after.stdout
    assert run("-l", str(lake), "table", "list", "ns").stdout.split() == ["kept"]


def test_init_takes_the_place_as_every_command_does_or_as_its_argument(tmp_path: Path) -> None:
    # ``lakecore -l URI init`` is how a user writes every other command; it used to be refused
    # ("the following arguments are required: uri").
    by_option, by_argument = tmp_path / "by-option", tmp_path / "by-argument"
    assert run("-l", str(by_option), "init").returncode == 0
    assert run("init", str(by_argument)).returncode == 0
    assert run("-l", str(by_option), "namespace", "list").returncode == 0
    assert run("-l", str(by_argument), "namespace", "list").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    two = run("-l", str(by_option), "init", str(elsewhere))
    assert two.returncode == 2 and "two places given" in two.stderr and not elsewhere.exists()
    env_free = {k: v for k, v in os.environ.items() if k != "LAKECORE_LAKEHOUSE"}
    nowhere = subprocess.run(
        [sys.executable, "-m", "lakecore.cli", "init"],
        capture_output=True,
        text=True,
        env=env_free,
        timeout=120,
        cwd=tmp_path,
    )
    assert nowhere.returncode == 2 and "say where to create the lakehouse" in nowhere.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["by-argument", "by-option"]


def test_names_at_the_limits_and_with_a_backslash_make_tables_on_local_disk(tmp_path: Path) -> None:
    # Both failed at create: a 259-byte file name ("File name too long", exit 4) and a path with
    # a backslash ("not relative to the lakehouse root", exit 2); docs/format.md#object-names
    # allows both names.
    lake = tmp_path / "lake"
    assert main(["init", str(lake)]) == 0
    ns, long_table = "n" * 100, "t" * 100
    assert main(["-l", str(lake), "namespace", "create", ns]) == 0
    assert main(["-l", str(lake), "table", "create", ns, long_table, "--column", "1:id:INT8"]) == 0
    assert main(["-l", str(lake), "table", "create", ns, "a\\b", "--column", "1:id:INT8"]) == 0
    listed = run("-l", str(lake), "table", "list", ns)
    assert listed.returncode == 0 and sorted(listed.stdout.split()) == sorted([long_table, "a\\b"])
    shown = run("-l", str(lake), "--json", "table", "show", ns, "a\\b")
    assert shown.returncode == 0 and '"a\\\\b"' in shown.stdout, shown.stdout
    deep = run("-l", str(lake), "fsck", "--deep")
    assert deep.returncode == 0 and ": clean" in deep.stdout, deep.stdout


# Importing the commands' modules is where a Ctrl-C lands in the first third of a second; this
# finder makes that import raise KeyboardInterrupt, as a Ctrl-C then does.
_INTERRUPTED_IMPORT = """
import sys

class Interrupting:
    def find_spec(self, name, path=None, target=None):
        if name == "lakecore.cli.dispatch":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupting())
import lakecore.cli
sys.exit(lakecore.cli.main(["--version"]))
"""


def test_a_ctrl_c_while_the_command_starts_is_one_line_and_exit_130() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "lakecore: interrupted while starting; nothing was done\n"
    assert proc.stdout == ""


def test_the_entry_point_stays_a_function_once_every_cli_module_is_imported() -> None:
    """A submodule's name is bound on its package when it is imported: had one been named
    ``main``, ``from lakecore.cli import main`` would give that module after it, not this
    function (97 tests failed so in one CI run)."""
    import importlib
    import pkgutil

    import lakecore.cli

    for module in pkgutil.iter_modules(lakecore.cli.__path__):
        if module.name != "__main__":  # that one runs the command
            importlib.import_module(f"lakecore.cli.{module.name}")
    from lakecore.cli import main as entry

    assert callable(entry) and entry.__module__ == "lakecore.cli"
