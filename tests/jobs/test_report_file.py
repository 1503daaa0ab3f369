"""The JSON report's file: a path that cannot be written is refused before the job works, and a
write that fails after a commit says the commit landed (exit 4, not 1, and not a traceback)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

import jobs.command_line
import lakecore.contract.job_report
from jobs.flush_job import main as flush_main
from lakecore.contract.one_line_parser import ArgumentError
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse


def _lake_with_buffered_messages(path: Path) -> Lakehouse:
    lh = Lakehouse.create(str(path), name="reports", order=8)
    with lh.transaction() as tx:
        tx.create_namespace("a")
        tx.create_table("a", "t1", properties={})
    return lh


@pytest.mark.parametrize("where", ["under-a-file", "a-folder", "a-uri"])
def test_a_report_path_that_cannot_be_written_is_refused_before_any_work(
    tmp_path: Path, where: str
) -> None:
    lh = _lake_with_buffered_messages(tmp_path / "lake")
    version = lh.version
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    report, words = {
        "under-a-file": (a_file / "flush.json", "is a file, not a folder"),
        "a-folder": (tmp_path, "is a folder; name a file in it"),
        # It used to be written to ./s3:/bucket/flush.json, beside wherever the job ran.
        "a-uri": (
            "s3://bucket/flush.json",
            "is a URI; this writes a file on this machine: give a local path",
        ),
    }[where]
    with pytest.raises(ArgumentError, match=words):
        jobs.command_line.base_parser("flush", "").parse_args(
            ["--lakehouse", lh.uri, "--report", str(report)]
        )
    # Through the job: its one line, exit 2, and no Spark session asked for (spark=None would
    # make one; the refusal comes first).
    assert flush_main(["--lakehouse", lh.uri, "--report", str(report)]) == ExitCode.BAD_INPUT
    assert Lakehouse.open(lh.uri).version == version
    assert a_file.read_text() == "mine\n"


def test_a_report_that_fails_to_write_after_a_commit_says_the_commit_landed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lh = _lake_with_buffered_messages(tmp_path / "lake")
    version = lh.version

    def disk_full(report: Any, path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lakecore.contract.job_report, "write_report", disk_full)
    code = flush_main(
        ["--lakehouse", lh.uri, "--mode", "full", "--report", str(tmp_path / "r.json")], spark=spark
    )
    assert code == ExitCode.FAILURE
    assert Lakehouse.open(lh.uri).version == version + 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"lakecore flush: the report could not be written to {tmp_path / 'r.json'} (No space left on "
        f"device); version {version + 1} was committed, see the summary above"
    )


def test_two_runs_writing_one_report_path_at_once_each_publish_a_whole_file(tmp_path: Path) -> None:
    """A job started twice with the same --report: with one fixed temporary name (PATH.tmp) the
    runs renamed each other's half-written file or failed to find it (739 of 3,000 writes in a
    review). Each write now publishes a whole report of its own, and leaves no temporary file."""
    import json
    import threading

    path = tmp_path / "reports" / "gc.json"
    failures: list[BaseException] = []

    def writer(run: int) -> None:
        report = lakecore.contract.job_report.JobReport(job="gc", lakehouse=f"run-{run}")
        for _ in range(300):
            try:
                lakecore.contract.job_report.write_report(report, str(path))
            except BaseException as exc:  # counted, then asserted
                failures.append(exc)

    threads = [threading.Thread(target=writer, args=(run,)) for run in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert json.loads(path.read_text())["lakehouse"] in ("run-0", "run-1")
    assert [p.name for p in path.parent.iterdir()] == ["gc.json"]
