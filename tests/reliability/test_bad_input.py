"""Bad input to the command line and to every job: a one-line error, the documented exit code,
and nothing half-written.

Inputs: invalid object names, invalid URIs, missing lakehouses, foreign files in the root (at
the top, in hash directories, look-alikes with a wrong hash prefix, a garbage hint), and a
lakehouse definition with ``major_version = 1`` (written as protobuf directly). Exit codes
(README, ``lakecore.cli``, ``jobs.run``): 2 bad arguments, names, URIs or an unsupported
format version; 4 a missing lakehouse. Foreign files are no error: commands work, fsck is
clean, gc leaves them alone.

After each bad input the file listing (paths and bytes) of the lakehouse, and of the working
directory, is unchanged. The command line runs in-process for the whole matrix and as a real
process (``python -m lakecore.cli``) for one input of each kind; jobs run in-process on the
shared local SparkSession (``main(argv, spark=...)``, as ``spark-submit.sh`` runs them) and as
a real process for the inputs that fail before Spark starts.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakecore.cli import main as cli_main
from lakecore.core.defs import pb
from lakecore.core.locations import new_lakehouse_def_path, root_node_file_name
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.versions import encode_root, write_hint
from lakecore.lakehouse import Lakehouse
from tests.reliability.faulty_storage import clear_caches, emit_summary, tree_digest

pytestmark = pytest.mark.reliability

REPO = Path(__file__).resolve().parents[2]
LAKE_DEF: dict[str, Any] = dict(
    order=4,
    node_file_max_size_bytes=4096,
    namespace_name_max_size_bytes=16,
    table_name_max_size_bytes=16,
    file_name_max_size_bytes=100,
)

TALLY: dict[str, int] = {
    "cli_inputs": 0,
    "cli_subprocess_inputs": 0,
    "job_inputs": 0,
    "job_subprocess_inputs": 0,
    "listings_compared": 0,
    "half_written": 0,
}


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    emit_summary("bad_input", **TALLY)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bad-input") / "lake"
    lh = Lakehouse.create(str(path), name="badinput", **LAKE_DEF)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table("ns", "t", properties={"k": "v"})
    return path


@pytest.fixture
def lake(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lake"
    shutil.copytree(template, path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # relative URIs resolve here: it must stay empty
    clear_caches()
    return path


def _unsupported(path: Path) -> Path:
    """A lakehouse whose definition says major_version 1 (protobuf written directly)."""
    path.mkdir(parents=True)
    storage = Storage(str(path))
    message = pb.LakehouseDef(name="future", major_version=1, order=4)
    def_path = new_lakehouse_def_path()
    storage.write(def_path, message.SerializeToString())
    storage.create_exclusive(
        root_node_file_name(0),
        encode_root(
            Node(), 4, lakehouse_def_path=def_path, previous_root=None, created_at_millis=1
        ),
    )
    write_hint(storage, 0)
    return path


FOREIGN = {
    "notes.txt": b"someone's notes",
    "_junk.arrow": b"ARROW1 not really",
    ".hidden": b"",
    "0000/0000/0000/README": b"hash dir readme",
    "1111/1111/1111/11111111-junk.bin": os.urandom(64),
    # A look-alike: a node file name whose hash prefix is not the one its name hashes to.
    f"0101/1010/0000/00000000-node-{uuid.uuid4()}.arrow": os.urandom(200),
}


def _drop_foreign(lake: Path) -> None:
    for rel, data in FOREIGN.items():
        target = lake / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


# -- running ---------------------------------------------------------------------------------


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(list(argv))
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    TALLY["cli_inputs"] += 1
    return code, out.getvalue(), err.getvalue()


def _cli_process(*argv: str, cwd: Path) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("LAKECORE_LAKEHOUSE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "lakecore.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    TALLY["cli_subprocess_inputs"] += 1
    return proc.returncode, proc.stdout, proc.stderr


def _one_line(stderr: str, prefix: str = "lakecore") -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {stderr!r}"
    assert lines[0].startswith(prefix), lines[0]


@contextlib.contextmanager
def unchanged(*paths: Path) -> Iterator[None]:
    before = [tree_digest(p) for p in paths]
    yield
    after = [tree_digest(p) for p in paths]
    TALLY["listings_compared"] += len(paths)
    for path, b, a in zip(paths, before, after, strict=True):
        if a != b:
            TALLY["half_written"] += 1
        assert a == b, (
            f"{path} changed: added {sorted(set(a) - set(b))}, removed {sorted(set(b) - set(a))}"
        )


# -- the command line ----------------------------------------------------------------------------

BAD_NAMES = [
    "bad name",
    "tab\tname",
    "ctl\x01",
    "del\x7f",
    "",
    "x" * 17,
    "\u00e9" * 9,
]  # 18 bytes > 16


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_cli_invalid_names(lake: Path, name: str) -> None:
    with unchanged(lake, Path.cwd()):
        for argv in (
            ["namespace", "create", name],
            ["table", "create", "ns", name, "--column", "1:id:INT8"],
            ["table", "create", name, "t2", "--column", "1:id:INT8"],
            ["namespace", "show", name],
        ):
            code, _out, err = _cli("--lakehouse", str(lake), *argv)
            assert code == 2, (argv, code, err)
            _one_line(err)


BAD_URIS = [
    "s3://b/../x",
    "s3://",
    "s3:///no-bucket",
    "file://relative/path",
    " lake",
    "lake ",
    "foo:bar",
    "http//x",
    "a/../b",
    "./a//b",
    "s3://b//x",
    "memory://b/./x",
    "\x01lake",
]


@pytest.mark.parametrize("uri", BAD_URIS, ids=repr)
def test_cli_invalid_uris(lake: Path, uri: str) -> None:
    with unchanged(lake, Path.cwd()):
        for argv in (
            ["--lakehouse", uri, "namespace", "list"],
            ["--lakehouse", uri, "fsck"],
            ["--lakehouse", uri, "table", "create", "ns", "t9", "--column", "1:id:INT8"],
            ["init", uri],
        ):
            code, _out, err = _cli(*argv)
            assert code == 2, (argv, code, err)
            _one_line(err)


@pytest.mark.parametrize("where", ["empty-dir", "no-dir", "memory"])
def test_cli_missing_lakehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    uri = {
        "empty-dir": str(empty),
        "no-dir": str(tmp_path / "nothing" / "here"),
        "memory": f"memory://missing/{uuid.uuid4()}",
    }[where]
    with unchanged(tmp_path):
        for argv in (
            ["namespace", "list"],
            ["versions"],
            ["fsck", "--deep"],
            ["table", "create", "ns", "t", "--column", "1:id:INT8"],
            ["get", "--namespace", "ns"],
            ["tree"],
            ["rollback", "--to-version", "0"],
        ):
            code, _out, err = _cli("--lakehouse", uri, *argv)
            assert code == 5, (argv, code, err)
            _one_line(err)
            assert "NoLakehouseError: no lakehouse at" in err, err


def test_cli_unsupported_major_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lake = _unsupported(tmp_path / "future")
    with unchanged(lake):
        for argv in (
            ["namespace", "list"],
            ["versions"],
            ["fsck"],
            ["namespace", "create", "ns"],
            ["tree"],
            ["get", "--namespace", "ns"],
        ):
            code, _out, err = _cli("--lakehouse", str(lake), *argv)
            assert code == 2, (argv, code, err)
            _one_line(err)
            assert "UnsupportedFormatVersionError" in err, err


def test_cli_foreign_files_are_left_alone(lake: Path) -> None:
    _drop_foreign(lake)
    (lake / "_latest_hint.txt").write_bytes(b"banana\x00\xff")
    with unchanged(lake):
        for argv in (
            ["namespace", "list"],
            ["table", "list", "ns"],
            ["versions"],
            ["fsck", "--deep"],
            ["tree"],
            ["get", "--namespace", "ns", "--table", "t"],
            ["table", "show", "ns", "t"],
        ):
            code, _out, err = _cli("--lakehouse", str(lake), *argv)
            assert code == 0, (argv, code, err)
            assert err.strip() == "", err
    # A write works too, and leaves every foreign file as it was.
    foreign_before = {rel: (lake / rel).read_bytes() for rel in FOREIGN}
    code, _out, err = _cli(
        "--lakehouse", str(lake), "table", "create", "ns", "t2", "--column", "1:id:INT8"
    )
    assert code == 0, err
    assert {rel: (lake / rel).read_bytes() for rel in FOREIGN} == foreign_before
    code, _out, err = _cli("--lakehouse", str(lake), "fsck", "--deep", "--all")
    assert code == 0, err


def test_cli_as_a_real_process(lake: Path, tmp_path: Path) -> None:
    """One input of each kind through ``python -m lakecore.cli``: real exit codes, real stderr."""
    future = _unsupported(tmp_path / "future")
    cases = [
        (["--lakehouse", str(lake), "namespace", "create", "bad name"], 2, "InvalidNameError"),
        (["--lakehouse", "s3://b/../x", "namespace", "list"], 2, "InvalidLocationError"),
        (["--lakehouse", str(tmp_path / "nothing"), "versions"], 5, "NoLakehouseError"),
        (["--lakehouse", str(future), "namespace", "list"], 2, "UnsupportedFormatVersionError"),
    ]
    with unchanged(lake, future, Path.cwd()):
        for argv, expected, kind in cases:
            code, _out, err = _cli_process(*argv, cwd=Path.cwd())
            assert code == expected, (argv, code, err)
            _one_line(err)
            assert kind in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["fsck", "--version", "abc"],
        ["no-such-command"],
        ["namespace"],
        ["lookup", "fetch"],
        ["diff", "1"],
    ],
    ids=" ".join,
)
def test_regression_cli_argument_errors_are_one_line(lake: Path, argv: list[str]) -> None:
    """Argument errors used to print argparse's usage block as well (two lines or more)."""
    code, _out, err = _cli("--lakehouse", str(lake), *argv)
    assert code == 2, err
    _one_line(err)
    assert "--help" in err, err


# -- the jobs ---------------------------------------------------------------------------------------

JOB_MODULES = ["flush", "gc", "validate", "repair", "export", "compact_versions"]


def _job_main(name: str) -> Any:
    # jobs/NAME.py only starts the job; its code, main() included, is jobs/NAME_job.py.
    module = importlib.import_module(f"jobs.{name}_job")
    return module.main


def _job_args(name: str, tmp_path: Path) -> list[str]:
    """Arguments that are valid apart from the lakehouse."""
    if name == "repair":
        return ["rebuild-hint"]
    if name == "export":
        return [
            "--name",
            "e1",
            "--mode",
            "minimal",
            "--target",
            str(tmp_path / f"export-{uuid.uuid4().hex[:6]}"),
        ]
    if name == "gc":
        return ["--dry-run"]
    if name == "compact_versions":
        return ["--dry-run"]
    return []


def _run_job(
    spark: Any, capsys: pytest.CaptureFixture[str], name: str, argv: list[str]
) -> tuple[int, str]:
    main = _job_main(name)
    capsys.readouterr()
    code = main(argv, spark=spark)
    TALLY["job_inputs"] += 1
    return code, capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.parametrize("name", JOB_MODULES)
def test_jobs_invalid_uris_and_missing_lakehouses(
    name: str, lake: Path, tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    cases: list[tuple[str, int]] = [
        (uri, 2) for uri in ("s3://b/../x", "s3://", "a/../b", "file://rel/x")
    ]
    cases += [(str(empty), 5), (str(tmp_path / "nothing"), 5)]
    with unchanged(lake, empty, Path.cwd()):
        for uri, expected in cases:
            code, err = _run_job(
                spark, capsys, name, ["--lakehouse", uri, *_job_args(name, tmp_path)]
            )
            assert code == expected, (name, uri, code, err)
            _one_line(err)
    assert not (tmp_path / "nothing").exists(), f"{name} created the missing lakehouse's directory"


@pytest.mark.spark
@pytest.mark.parametrize("name", JOB_MODULES)
def test_jobs_unsupported_major_version(
    name: str,
    tmp_path: Path,
    spark: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    future = _unsupported(tmp_path / "future")
    with unchanged(future):
        code, err = _run_job(
            spark, capsys, name, ["--lakehouse", str(future), *_job_args(name, tmp_path)]
        )
    # Exit 2 for every job (a regression: gc and compact-versions wrapped the error into their
    # "refused" one and exited 4, validate reported a damaged root and exited 1, and repair
    # rebuild-hint never read the definition and exited 0), and the lakehouse is left unchanged.
    assert code == 2, (name, code, err)
    _one_line(err)
    assert "UnsupportedFormatVersionError" in err, err


@pytest.mark.spark
@pytest.mark.parametrize(
    "action",
    [
        ["rebuild-hint", "--yes"],
        ["rollback", "--to-version", "0", "--yes"],
        ["rollback", "--to-last-valid", "--yes"],
    ],
    ids=" ".join,
)
def test_repair_never_writes_to_a_lakehouse_of_a_newer_format(
    action: list[str], tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    future = _unsupported(tmp_path / "future")
    (future / "_latest_hint.txt").unlink()  # what rebuild-hint would write back
    with unchanged(future):
        code, err = _run_job(spark, capsys, "repair", ["--lakehouse", str(future), *action])
    assert code == 2, (action, code, err)
    assert "UnsupportedFormatVersionError" in err, err


@pytest.mark.spark
@pytest.mark.parametrize("name", ["flush", "validate", "gc", "compact_versions", "repair"])
def test_jobs_leave_foreign_files_alone(
    name: str, lake: Path, tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _drop_foreign(lake)
    before = {rel: (lake / rel).read_bytes() for rel in FOREIGN}
    argv = ["--lakehouse", str(lake)]
    if name == "gc":
        argv += ["--older-than", "0s", "--i-understand-grace-risk"]
    elif name == "repair":
        argv += ["rebuild-hint"]
    elif name == "validate":
        argv += ["--deep", "--no-expectations"]
    code, err = _run_job(spark, capsys, name, argv)
    assert code == 0, (name, code, err)
    assert {rel: (lake / rel).read_bytes() for rel in FOREIGN if (lake / rel).exists()} == before, (
        f"{name} changed or deleted a foreign file"
    )
    assert all((lake / rel).exists() for rel in FOREIGN), f"{name} deleted a foreign file"


@pytest.mark.parametrize("name", JOB_MODULES)
def test_jobs_as_real_processes(name: str, lake: Path, tmp_path: Path) -> None:
    """``python -m jobs.<name>`` with inputs refused before Spark starts: real exit code, one
    line on stderr, nothing written."""
    if importlib.util.find_spec(f"jobs.{name}") is None:
        pytest.skip(f"jobs/{name}.py does not exist")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with unchanged(lake, Path.cwd()):
        for argv, expected in (
            (["--lakehouse", "s3://b/../x"], 2),
            (["--lakehouse", str(lake), "--parallelism", "x"], 2),
        ):
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", f"jobs.{name}", *argv, *_job_args(name, tmp_path)],
                cwd=Path.cwd(),
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            TALLY["job_subprocess_inputs"] += 1
            assert proc.returncode == expected, (name, argv, proc.returncode, proc.stderr[-2000:])
            _one_line(proc.stderr)
            assert time.monotonic() - started < 120


@pytest.mark.spark
@pytest.mark.parametrize("export_name", ["bad name", "", "ctl\x01", "del\x7f"], ids=repr)
def test_export_job_invalid_names(
    export_name: str, lake: Path, tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target"
    with unchanged(lake, Path.cwd()):
        for mode in ("minimal", "full"):
            code, err = _run_job(
                spark,
                capsys,
                "export",
                [
                    "--lakehouse",
                    str(lake),
                    "--name",
                    export_name,
                    "--mode",
                    mode,
                    "--target",
                    str(target),
                ],
            )
            assert code == 2, (export_name, mode, code, err)
            _one_line(err)
    assert not target.exists() or not any(target.iterdir()), (
        "export wrote to its target despite a bad name"
    )
