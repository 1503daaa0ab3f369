"""Outputs never land on a file they do not own (lakecore/cli/outputs.py).

A report path inside the lakehouse once replaced the latest root file with a JSON report, from a
dry run, and every command then failed with ``DamagedLakehouseError``. Each case below is
refused with exit 2 before any work, and the file that was there keeps its bytes. The jobs'
cases run their parser in this process: the check refuses before a SparkSession is asked for.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jobs import gc as gc_job
from jobs import validate as validate_job
from lakecore.cli import main as cli_main
from lakecore.cli.outputs import (
    Output,
    OutputKind,
    check_outputs,
    write_text_atomically,
)
from lakecore.errors import ExitCode, InvalidArgumentError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.report.html import GENERATOR_META
from lakecore.locations import root_node_file_name

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    lh = Lakehouse.create(str(root), name="outputs", order=8)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    return root


def latest_root(lake: Path) -> Path:
    return lake / root_node_file_name(Lakehouse.open(str(lake)).version)


def refused(path: str | Path, kind: OutputKind, lakehouse: str | Path | None) -> str:
    with pytest.raises(InvalidArgumentError) as caught:
        check_outputs([Output("--report", str(path), kind)], str(lakehouse) if lakehouse else None)
    return str(caught.value)


# -- inside the lakehouse --------------------------------------------------------------------


def test_a_path_inside_the_root_is_refused_whatever_it_names(lake: Path) -> None:
    root_file = latest_root(lake)
    assert "inside the lakehouse root" in refused(root_file, OutputKind.JSON_REPORT, lake)
    assert "inside the lakehouse root" in refused(lake / "new.json", OutputKind.JSON_REPORT, lake)
    assert "inside the lakehouse root" in refused(lake / "a/b/c.html", OutputKind.HTML_PAGE, lake)
    assert "inside the lakehouse root" in refused(lake, OutputKind.PARQUET_DATASET, lake)
    assert "inside the lakehouse root" in refused(lake / "c", OutputKind.CACHE_FOLDER, lake)
    # The root as a file:// URI, and with a trailing slash, is the same root.
    assert "inside" in refused(lake / "x.json", OutputKind.JSON_REPORT, f"file://{lake}/")


def test_links_are_resolved_on_both_sides(
    lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    into_lake = tmp_path / "reports"
    into_lake.symlink_to(lake)  # a folder that is the lakehouse under another name
    message = refused(into_lake / root_node_file_name(0), OutputKind.JSON_REPORT, lake)
    assert "inside the lakehouse root" in message and str(lake) in message
    lake_link = tmp_path / "lake-link"
    lake_link.symlink_to(lake)  # the lakehouse named through a link
    assert "inside" in refused(lake / "r.json", OutputKind.JSON_REPORT, lake_link)
    # A relative path resolves against the working directory.
    monkeypatch.chdir(lake)
    assert "inside" in refused("report.json", OutputKind.JSON_REPORT, lake)


def test_a_dataset_folder_that_holds_the_lakehouse_is_refused(lake: Path) -> None:
    # Spark's overwrite deletes the dataset folder first: one above the root would take it.
    assert "inside" in refused(lake.parent, OutputKind.PARQUET_DATASET, lake)


def test_outside_the_root_and_other_stores_pass(lake: Path, tmp_path: Path) -> None:
    neighbour = tmp_path / "lake-reports" / "r.json"  # a sibling whose name begins like the root
    check_outputs([Output("--report", str(neighbour), OutputKind.JSON_REPORT)], str(lake))
    check_outputs([Output("--report", str(neighbour), OutputKind.JSON_REPORT)], "s3://b/lake")
    check_outputs([Output("--report", str(neighbour), OutputKind.JSON_REPORT)], None)


# -- onto a file no lakecore command wrote ---------------------------------------------------


def test_an_existing_file_is_replaced_only_when_lakecore_wrote_it(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": true}')
    assert "is not a lakecore JSON report" in refused(foreign, OutputKind.JSON_REPORT, None)
    page = tmp_path / "index.html"
    page.write_text("<html><body>someone's page</body></html>")
    assert "is not a lakecore HTML page" in refused(page, OutputKind.HTML_PAGE, None)
    assert json.loads(foreign.read_text()) == {"mine": True}

    report = tmp_path / "gc.json"
    report.write_text(json.dumps({"job": "gc", "lakehouse": "x", "status": "ok", "exit_code": 0}))
    ours_page = tmp_path / "health.html"
    ours_page.write_text(f"<!DOCTYPE html><html><head>{GENERATOR_META}</head></html>")
    empty = tmp_path / "from-mktemp"
    empty.touch()  # REPORT=$(mktemp) is a common way to name a report
    check_outputs(
        [
            Output("--report", str(report), OutputKind.JSON_REPORT),
            Output("--html", str(ours_page), OutputKind.HTML_PAGE),
            Output("--report", str(empty), OutputKind.JSON_REPORT),
        ],
        None,
    )


def test_links_devices_and_folders_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text(json.dumps({"job": "gc", "lakehouse": "x", "status": "ok", "exit_code": 0}))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert "is a symbolic link" in refused(link, OutputKind.JSON_REPORT, None)
    # Replacing /dev/null would replace the device node itself.
    assert "not a regular file" in refused("/dev/null", OutputKind.JSON_REPORT, None)
    assert "is a folder" in refused(tmp_path, OutputKind.HTML_PAGE, None)


def test_a_dataset_folder_must_hold_only_what_spark_writes(tmp_path: Path) -> None:
    dataset = tmp_path / "r.json.orphans.parquet"
    dataset.mkdir()
    for name in ("part-00000-a.snappy.parquet", ".part-00000-a.snappy.parquet.crc", "_SUCCESS"):
        (dataset / name).write_bytes(b"x")
    check_outputs([Output("--full-list", str(dataset), OutputKind.PARQUET_DATASET)], None)
    (dataset / "thesis.tex").write_text("years of work")
    assert "'thesis.tex'" in refused(dataset, OutputKind.PARQUET_DATASET, None)


def test_the_writer_checks_again_before_it_replaces(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("appeared while the job ran")
    with pytest.raises(InvalidArgumentError):
        write_text_atomically(target, "{}", OutputKind.JSON_REPORT)
    assert target.read_text() == "appeared while the job ran"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left


# -- the commands ----------------------------------------------------------------------------


def test_describe_and_tree_refuse_a_page_on_the_latest_root(
    lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root_file = latest_root(lake)
    before = root_file.read_bytes()
    for command in (["describe"], ["tree"]):
        code = cli_main(["-l", str(lake), *command, "--html", str(root_file)])
        assert code == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "inside the lakehouse root" in err
    assert root_file.read_bytes() == before
    assert cli_main(["-l", str(lake), "fsck"]) == 0


def test_lookup_refuses_a_cache_folder_inside_the_lakehouse(
    lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(["-l", str(lake), "lookup", "build", "--cache-dir", str(lake / "cache")])
    assert code == ExitCode.BAD_INPUT
    assert "--cache-dir" in capsys.readouterr().err
    assert not (lake / "cache").exists()


def test_jobs_refuse_a_report_on_the_latest_root_even_in_a_dry_run(
    lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root_file = latest_root(lake)
    before = root_file.read_bytes()
    argv = ["--lakehouse", str(lake), "--dry-run", "--report", str(root_file)]
    assert gc_job.main(argv) == ExitCode.BAD_INPUT  # refused while parsing: no Spark asked for
    assert "inside the lakehouse root" in capsys.readouterr().err
    assert root_file.read_bytes() == before
    assert Lakehouse.open(str(lake)).list_namespaces() == ["ns"]


def test_validate_checks_the_files_it_writes_beside_the_report(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "out"
    elsewhere.mkdir()
    own_page = elsewhere / "v.html"  # validate's own page goes beside the report
    own_page.write_text("<html>a colleague's notes</html>")
    code = validate_job.main(["--lakehouse", str(lake), "--report", str(elsewhere / "v.json")])
    assert code == ExitCode.BAD_INPUT
    assert "v.html exists and is not a lakecore HTML page" in capsys.readouterr().err
    dataset = elsewhere / "v2.json.violations.parquet"
    dataset.mkdir()
    (dataset / "keep.txt").write_text("keep")
    argv = ["--lakehouse", str(lake), "--report", str(elsewhere / "v2.json"), "--full-list"]
    assert validate_job.main(argv) == ExitCode.BAD_INPUT
    assert "'keep.txt'" in capsys.readouterr().err
    argv = ["--lakehouse", str(lake), "--html", str(lake / "health.html")]
    assert validate_job.main(argv) == ExitCode.BAD_INPUT
    assert "--html" in capsys.readouterr().err and not (lake / "health.html").exists()


def test_spark_submit_refuses_it_before_the_jvm_starts(lake: Path) -> None:
    root_file = latest_root(lake)
    before = root_file.read_bytes()
    done = subprocess.run(
        [
            str(REPO / "spark-submit.sh"),
            "gc",
            "--lakehouse",
            str(lake),
            "--dry-run",
            "--report",
            str(root_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == ExitCode.BAD_INPUT
    assert "inside the lakehouse root" in done.stderr
    assert "SparkContext" not in done.stdout + done.stderr  # no JVM was started
    assert root_file.read_bytes() == before
