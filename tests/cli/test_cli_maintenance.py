"""``lakecore gc`` and ``lakecore compact-versions``: the in-process units with the jobs'
options, safety checks, report and exit codes (``lakecore/cli/maintenance.py``). No Spark.

The Spark jobs' own reports are compared with these commands' in tests/jobs/test_gc.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lakecore import clear_caches
from lakecore.cli import main as lakecore_main
from lakecore.core.locations import new_node_file_path, new_table_def_path, root_node_file_name
from lakecore.core.versions import list_root_versions
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse

DAY_SECONDS = 86_400


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """Eleven versions (0..10), every file ten days old, and three orphans: two old, one new."""
    path = tmp_path / "lake"
    lh = Lakehouse.create(str(path), order=4, minimum_versions_to_keep=2)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(9):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i}", properties={"i": str(i)})
    old = time.time() - 10 * DAY_SECONDS
    for p in path.rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))
    for i, rel in enumerate(
        [new_node_file_path(), new_table_def_path("ns", "gone"), new_node_file_path()]
    ):
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * 10)
        if i < 2:
            os.utime(target, (old, old))
    clear_caches()
    return path


def run(tmp_path: Path, *argv: str) -> tuple[int, dict[str, object]]:
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    code = lakecore_main([*argv, "--report", str(report)])
    return code, json.loads(report.read_text()) if report.exists() else {}


def test_gc_dry_run_then_gc(lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = files(lake)
    code, dry = run(tmp_path, "-l", str(lake), "gc", "--dry-run", "--older-than", "1d")
    assert code == ExitCode.OK, dry
    assert files(lake) == before
    counts = dry["counts"]
    assert isinstance(counts, dict)
    assert (counts["orphans_found"], counts["skipped_too_young"], counts["orphans_to_delete"]) == (
        3,
        1,
        2,
    )
    assert counts["orphans_deleted"] == 0 and dry["dry_run"] is True and dry["job"] == "gc"
    out = capsys.readouterr().out
    assert out.startswith("lakecore gc [ok (dry run)]") and "would delete 2" in out

    code, done = run(tmp_path, "-l", str(lake), "gc", "--older-than", "1d")
    assert code == ExitCode.OK, done
    gone = before - files(lake)
    assert len(gone) == 2 and all(p.endswith((".arrow", ".binpb")) for p in gone)
    samples = done["samples"]
    assert isinstance(samples, dict) and set(samples["deleted"]) == gone
    for section in ("counts", "bytes", "samples", "details"):  # the keys do not depend on --dry-run
        assert set(done[section]) == set(dry[section]), section  # type: ignore[arg-type]
    assert lakecore_main(["-l", str(lake), "fsck", "--all"]) == ExitCode.OK


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--older-than", "30m"], "--older-than 30m is shorter than 1h"),
        (["--now", str(int(time.time() * 1000) + 3_600_000)], "ahead of this machine's clock"),
        (["--env", "nowhere"], "no maintenance settings for environment 'nowhere'"),
    ],
)
def test_gc_refuses_what_the_job_refuses(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    before = files(lake)
    code = lakecore_main(["-l", str(lake), "gc", *argv])
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert files(lake) == before


def test_compact_versions_dry_run_then_run(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    versions = list_root_versions_of(lake)
    future = str(int(time.time() * 1000) + 400 * DAY_SECONDS * 1000)
    before = files(lake)
    # A --now ahead of the clock: refused for a run, shown by a dry run.
    assert (
        lakecore_main(["-l", str(lake), "compact-versions", "--now", future]) == ExitCode.BAD_INPUT
    )
    assert "--i-understand-expiry-risk" in capsys.readouterr().err
    code, dry = run(tmp_path, "-l", str(lake), "compact-versions", "--now", future, "--dry-run")
    assert code == ExitCode.OK, dry
    assert files(lake) == before
    out = capsys.readouterr().out
    assert "would expire 9 versions" in out and "bytes freed" not in out
    code, done = run(
        tmp_path,
        "-l",
        str(lake),
        "compact-versions",
        "--now",
        future,
        "--i-understand-expiry-risk",
    )
    assert code == ExitCode.OK, done
    assert list_root_versions_of(lake) == versions[-2:]
    counts = done["counts"]
    assert isinstance(counts, dict) and counts["expired_versions"] == 9
    assert not (lake / root_node_file_name(versions[0])).exists()
    for section in ("counts", "bytes", "samples", "details"):
        assert set(done[section]) == set(dry[section]), section  # type: ignore[arg-type]
    assert lakecore_main(["-l", str(lake), "fsck", "--all"]) == ExitCode.OK


def list_root_versions_of(lake: Path) -> list[int]:
    from lakecore.core.storage import Storage

    return list_root_versions(Storage(str(lake)))


def test_a_refusal_writes_its_report_and_says_one_line(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A latest root that cannot be read: exit 6 (damage), the next step in the line, and the
    report says so."""
    latest = max(list_root_versions_of(lake))
    (lake / root_node_file_name(latest)).write_bytes(b"garbage")
    clear_caches()
    before = files(lake)
    code, report = run(tmp_path, "-l", str(lake), "gc", "--older-than", "1d")
    assert code == report["exit_code"] != ExitCode.OK
    assert report["status"] == "failed" and report["error"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lakecore: "), err
    assert files(lake) == before
