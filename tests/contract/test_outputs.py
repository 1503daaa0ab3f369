"""Outputs never land on a file they do not own (lakecore/contract/outputs.py).

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

from jobs import gc_job, validate_job
from lakecore.cli import main as cli_main
from lakecore.contract.outputs import (
    Output,
    OutputKind,
    check_outputs,
    write_text_atomically,
)
from lakecore.core.locations import root_node_file_name
from lakecore.errors import ExitCode, InvalidArgumentError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.report.html import GENERATOR_META

REPO = Path(__file__).resolve().parents[2]


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
    assert "holds the lakehouse root" in refused(lake.parent, OutputKind.PARQUET_DATASET, lake)


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


PART = "part-00000-1b2c3d4e-0000-4000-8000-00000000abcd-c000.snappy.parquet"


def test_a_dataset_folder_must_hold_only_what_spark_writes(tmp_path: Path) -> None:
    dataset = tmp_path / "r.json.orphans.parquet"
    dataset.mkdir()
    for name in (PART, f".{PART}.crc", "_SUCCESS", "._SUCCESS.crc"):
        (dataset / name).write_bytes(b"x")
    check_outputs([Output("--full-list", str(dataset), OutputKind.PARQUET_DATASET)], None)
    (dataset / "thesis.tex").write_text("years of work")
    assert "'thesis.tex'" in refused(dataset, OutputKind.PARQUET_DATASET, None)
    (dataset / "thesis.tex").unlink()
    # The trial: a '_temporary' folder holding a whole lakehouse, a user's 'part-0001.csv' and
    # a link named like a part file were all deleted by a dry run's overwrite.
    for name, make in (
        ("_temporary", lambda p: p.mkdir()),
        ("part-0001.csv", lambda p: p.write_text("a,b")),
        ("part-00001-x.snappy.parquet", lambda p: p.symlink_to(tmp_path)),
    ):
        entry = dataset / name
        make(entry)
        assert repr(name) in refused(dataset, OutputKind.PARQUET_DATASET, None), name
        if entry.is_dir() and not entry.is_symlink():
            entry.rmdir()
        else:
            entry.unlink()


def test_a_lakehouse_the_command_does_not_name_is_protected_too(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    Lakehouse.create(str(other), name="other")
    target = latest_root(other)
    before = target.read_bytes()
    code = cli_main(["-l", str(lake), "describe", "--html", str(target)])
    assert code == ExitCode.BAD_INPUT
    assert f"is inside the lakehouse at {other}" in capsys.readouterr().err
    assert target.read_bytes() == before
    assert "inside the lakehouse" in refused(
        other / "0010" / "x.json", OutputKind.JSON_REPORT, None
    )


def test_two_outputs_of_one_command_may_not_be_one_file(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trial: validate --report x.html (its own page is x.html too) ran a full validation,
    then failed with a traceback and exit 1; now refused up front, exit 2."""
    out = tmp_path / "out"
    for argv in (
        ["--report", str(out / "same.html")],
        ["--report", str(out / "b.json"), "--html", str(out / "b.json")],
        [
            "--report",
            str(out / "q.json"),
            "--full-list",
            "--html",
            str(out / "q.json.violations.parquet"),
        ],
    ):
        assert validate_job.main(["--lakehouse", str(lake), *argv]) == ExitCode.BAD_INPUT, argv
        err = capsys.readouterr().err
        assert "are the same file" in err or "where the validation's own page goes" in err, err
    assert not out.exists()


def test_outputs_stay_out_of_an_export_target(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobs import export_job

    target = tmp_path / "copy"
    argv = ["--lakehouse", str(lake), "--name", "e", "--mode", "full", "--target", str(target)]
    assert export_job.main([*argv, "--report", str(target / "_latest_hint.txt")]) == 2
    err = capsys.readouterr().err
    # Named as what it is: the lakehouse the export makes, not the lakehouse exported.
    assert "is inside the export target (--target)" in err and not target.exists(), err


def test_a_tilde_is_read_and_written_the_same(
    lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--html=~/x is not expanded by the shell: the check read it as $HOME/x and the writer
    wrote ./~/x (replacing a file there)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (work / "~").mkdir(parents=True)
    (work / "~" / "health.html").write_text("precious")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert cli_main(["-l", str(lake), "tree", "--html=~/health.html"]) == 0
    assert GENERATOR_META in (home / "health.html").read_text()
    assert (work / "~" / "health.html").read_text() == "precious"


def test_a_log_file_planned_inside_the_lakehouse_is_refused(
    lake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """LAKECORE_LOG_DIR set to the root: spark-submit.sh wrote Spark's log into it, and gc
    then counted it as a foreign file. The wrapper names the log before the argument check."""
    monkeypatch.setenv("LAKECORE_PARSE_ONLY", "1")
    monkeypatch.setenv("LAKECORE_SPARK_LOG", str(lake / "lakecore-gc-20261128T000000Z-1.log"))
    assert gc_job.main(["--lakehouse", str(lake), "--dry-run"]) == ExitCode.BAD_INPUT
    assert "LAKECORE_LOG_DIR's log" in capsys.readouterr().err
    assert not list(lake.glob("*.log"))


def test_a_report_that_appeared_while_the_job_ran_is_left_alone(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last-moment check raised past the report writer: a traceback and exit 1 after the
    job's work. Now one line, exit 2, and the file keeps its bytes."""
    from jobs.command_line import JobOptions, base_parser
    from jobs.run import run_job

    report = tmp_path / "r.json"

    def run(options: JobOptions, ctx: object) -> None:
        report.write_text("someone else's notes")

    code = run_job(
        "gc",
        parser=base_parser("gc", "a stub job"),
        options=lambda args, common: common,
        run=run,
        render=lambda result, job_report: None,
        argv=["--lakehouse", str(lake), "--report", str(report)],
        spark=object(),  # type: ignore[arg-type]  # the stub run asks nothing of it
    )
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT and err.count("\n") == 1
    assert "the report could not be written" in err and "not a lakecore JSON report" in err
    assert report.read_text() == "someone else's notes"


def test_two_runs_writing_one_full_list_each_publish_a_whole_one(tmp_path: Path) -> None:
    """Two gc runs with one --report --full-list: Spark's overwrite of one folder left a
    dataset with a _SUCCESS and no part file, and one run failed with a raw Py4JJavaError."""
    import threading
    import time as time_module

    from jobs.command_line import write_full_list

    class Frame:  # what write_full_list asks of a DataFrame: .write.parquet(path)
        def __init__(self, tag: str) -> None:
            self.tag = tag
            self.write = self

        def parquet(self, path: str) -> None:
            folder = Path(path)
            folder.mkdir()
            time_module.sleep(0.05)  # the two writes overlap
            (folder / PART.replace("0000abcd", f"0000{self.tag}")).write_text(self.tag)
            (folder / "_SUCCESS").touch()

    target = tmp_path / "r.json.orphans.parquet"
    threads = [
        threading.Thread(target=write_full_list, args=(Frame(t), str(target)))
        for t in ("aaaa", "bbbb")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    parts = sorted(p.name for p in target.iterdir())
    assert len(parts) == 2 and "_SUCCESS" in parts  # one run's whole dataset
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temporary left


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


@pytest.mark.parametrize("given", ["file://{cache}", "file:{cache}", "s3://bucket/cache"])
@pytest.mark.parametrize("how", ["option", "environment"])
def test_lookup_refuses_a_cache_folder_given_as_a_uri(
    lake: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    given: str,
    how: str,
) -> None:
    """A URI was taken for a relative folder: ``--cache-dir file:///x/lake/c`` wrote
    ``./file:/x/lake/c/...`` in the working directory (a trial found it), whose name says the
    lakehouse."""
    uri = given.format(cache=lake / "cache")
    monkeypatch.chdir(tmp_path)
    argv = ["-l", str(lake), "lookup", "build"]
    if how == "option":
        argv += ["--cache-dir", uri]
    else:
        monkeypatch.setenv("LAKECORE_CACHE_DIR", uri)
    assert cli_main(argv) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{uri} is a URI" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake"]


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


def test_an_export_never_writes_through_a_link_in_its_target(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target holding a link to one of the source's hash folders: the export rewrote the
    source's files through it. The local store never writes through a link below its root."""
    hashed = sorted(p for p in lake.iterdir() if p.is_dir())
    target = tmp_path / "copy"
    target.mkdir()
    for folder in hashed:
        (target / folder.name).symlink_to(folder)

    def stamps() -> dict[Path, int]:  # the files the links expose (the export's record and
        # its withdrawal are commits of the source, at its top)
        return {p: p.stat().st_mtime_ns for f in hashed for p in f.rglob("*") if p.is_file()}

    before = stamps()
    code = cli_main(["-l", str(lake), "export", "e", "--mode", "full", "--target", str(target)])
    assert code == ExitCode.BAD_INPUT
    assert "holds a symbolic link" in capsys.readouterr().err
    # Below the top, where the target check does not look, the store refuses the write.
    a_file = next(p for f in hashed for p in f.rglob("*") if p.is_file())
    first, second = a_file.relative_to(lake).parts[:2]
    (tmp_path / "copy2" / first).mkdir(parents=True)
    (tmp_path / "copy2" / first / second).symlink_to(lake / first / second)
    argv = ["-l", str(lake), "export", "f", "--mode", "full", "--target", str(tmp_path / "copy2")]
    assert cli_main(argv) == ExitCode.FAILURE
    assert "reached through a symbolic link below the root" in capsys.readouterr().err
    assert stamps() == before
    assert stamps() == before


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_an_export_never_lands_inside_another_lakehouse(
    lake: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    where: str,
) -> None:
    """A trial exported into a folder of a lakehouse other than the source (``--target
    OTHER/copy``, or through a link to OTHER): the copy's files landed in that lakehouse's
    root. Only the source was compared."""
    if where == "local":
        source, options = str(lake), []
        other = tmp_path / "other"
        Lakehouse.create(str(other))
        (tmp_path / "to-other").symlink_to(other)
        targets = [f"{other}/copy", f"{other}/a/b", f"{tmp_path}/to-other/copy"]
        fresh = str(tmp_path / "copy")
    else:
        s3 = request.getfixturevalue("s3_server")
        base, storage = s3.new_root()
        options = s3.job_args()
        source = f"{base}lake"
        Lakehouse.create(source, storage_options=storage)
        Lakehouse.create(f"{base}other", storage_options=storage)
        targets = [f"{base}other/copy", f"{base}other/a/b"]
        fresh = f"{base}otherX"  # a sibling prefix, not inside
    version = Lakehouse.open(source, storage_options=None if where == "local" else storage).version
    for number, target in enumerate(targets):
        argv = [
            *options,
            "-l",
            source,
            "export",
            f"e{number}",
            "--mode",
            "full",
            "--target",
            target,
        ]
        assert cli_main(argv) == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is inside the lakehouse at" in err
    opened = Lakehouse.open(source, storage_options=None if where == "local" else storage)
    assert opened.version == version
    if where == "local":
        assert not (tmp_path / "other" / "copy").exists()
        assert not (tmp_path / "other" / "a").exists()
    argv = [*options, "-l", source, "export", "ok", "--mode", "full", "--target", fresh]
    assert cli_main(argv) == ExitCode.OK


def test_no_lakehouse_is_created_inside_another(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lakecore init LAKE/sub`` (or into a hash folder, or through a link to LAKE) made a
    lakehouse inside another, whose gc then counted its files as foreign; so did ``make demo
    DEMO_LAKE=LAKE/demo``."""
    hashed = next(p for p in lake.rglob("*") if p.is_file() and len(p.relative_to(lake).parts) == 4)
    (tmp_path / "to-lake").symlink_to(lake)
    for inside in (lake / "sub", hashed.parent / "x", tmp_path / "to-lake" / "sub"):
        assert cli_main(["init", str(inside)]) == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"is inside the lakehouse at file://{lake}/" in err
        assert not inside.exists()
    assert cli_main(["init", str(tmp_path / "beside")]) == ExitCode.OK


def test_an_export_to_a_device_is_refused_before_anything_is_committed(
    lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--target /dev/null committed the export's record and its withdrawal (two versions) and
    failed with exit 4, which the DAGs retry: two more versions every retry."""
    version = Lakehouse.open(str(lake)).version
    code = cli_main(["-l", str(lake), "export", "e", "--mode", "full", "--target", "/dev/null"])
    assert code == ExitCode.BAD_INPUT
    assert "not a folder" in capsys.readouterr().err
    assert Lakehouse.open(str(lake)).version == version


def test_the_lookup_cache_never_writes_through_a_link(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lakecore.core.lookup.cache import VersionCache

    cache = tmp_path / "cache"
    view = Lakehouse.open(str(lake))
    store_folder = VersionCache(cache).path_for(view).parent
    cache.mkdir()
    store_folder.symlink_to(lake)  # the store's folder name is in the command's own output
    argv = ["-l", str(lake), "lookup", "build", "--cache-dir", str(cache)]
    assert cli_main(argv) == ExitCode.BAD_INPUT
    assert "is a symbolic link" in capsys.readouterr().err
    assert not list(lake.glob("*.lookup"))


def test_the_demo_removes_only_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make clean ran rm -rf demo-reports (a user's lakehouse and notes there went too), and the
    demo's remover took a lakehouse whose operator had unset the demo's mark."""
    from jobs import demo
    from jobs.pipeline import pipeline_steps
    from lakecore.lakehouse.demo import DEMO_PROPERTY

    monkeypatch.chdir(tmp_path)
    reports = tmp_path / "demo-reports"
    reports.mkdir()
    (reports / "notes.txt").write_text("mine")
    ours = reports / f"{pipeline_steps('')[0].report_name}.json"
    ours.write_text(json.dumps({"job": "flush", "lakehouse": "x", "status": "ok", "exit_code": 0}))
    sample = tmp_path / "demo-lakehouse"
    assert demo.main(["--lakehouse", str(sample), "--no-pipeline"]) == 0
    taken = Lakehouse.open(str(sample))
    taken.update_settings(unset_properties=[DEMO_PROPERTY])  # the operator takes it over
    assert demo.main(["--lakehouse", str(sample), "--remove"]) == ExitCode.BAD_INPUT
    assert Lakehouse.open(str(sample)).version == taken.version
    taken.update_settings(set_properties={DEMO_PROPERTY: "true"})
    assert demo.main(["--lakehouse", str(sample), "--remove"]) == 0
    assert not sample.exists() and not ours.exists()
    assert (reports / "notes.txt").read_text() == "mine"
    # The reports folder as the lakehouse: refused before anything is built.
    assert demo.main(["--lakehouse", str(reports), "--no-pipeline"]) == ExitCode.BAD_INPUT
