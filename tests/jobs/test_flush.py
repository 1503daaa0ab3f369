"""The flush job on real local[2] Spark: local disk and moto S3, full and threshold modes,
concurrent commits, bad options."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobs.flush_job import main as flush_main
from lakecore.core.tree import items
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.treeinfo import buffered_messages
from lakecore.lakehouse.version_check import check_version


def _catalog(uri: str, options: dict[str, Any] | None = None, tables: int = 60) -> Lakehouse:
    lh = Lakehouse.create(
        uri,
        name="flushme",
        storage_options=options,
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("a")
        tx.create_namespace("b")
    for i in range(tables):
        with lh.transaction() as tx:
            tx.create_table("a" if i % 3 else "b", f"t{i:03d}", properties={"i": str(i)})
        if i % 9 == 8:
            with lh.transaction() as tx:
                tx.drop_table("a" if (i - 1) % 3 else "b", f"t{i - 1:03d}")
    return lh


def _buffered(lh: Lakehouse) -> int:
    return buffered_messages(lh.store, lh.root)


def test_full_flush_empties_buffers_keeps_the_catalog_and_validates(
    run_job, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    lh = _catalog(str(tmp_path / "lake"))
    before = dict(items(lh.store, lh.root))
    assert _buffered(lh) > 0
    code, report = run_job(
        flush_main, "--lakehouse", lh.uri, "--mode", "full", "--parallelism", "4"
    )
    assert code == 0, report
    assert report["new_version"] == report["base_version"] + 1
    assert report["counts"]["subtree_tasks"] >= 2
    assert report["durations_seconds"]["flush"] >= 0
    after = Lakehouse.open(lh.uri)
    assert dict(items(after.store, after.root)) == before
    assert _buffered(after) == 0
    assert check_version(after, deep=True).ok
    # Old versions are untouched.
    assert dict(items(lh.store, lh.at_version(lh.version).root)) == before


def test_threshold_flush(run_job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lh = _catalog(str(tmp_path / "lake"))
    before = dict(items(lh.store, lh.root))
    code, report = run_job(
        flush_main, "--lakehouse", lh.uri, "--mode", "threshold", "--fill", "0.2"
    )
    assert code == 0, report
    after = Lakehouse.open(lh.uri)
    assert dict(items(after.store, after.root)) == before
    assert check_version(after, deep=True).ok


def test_threshold_flush_of_a_small_lakehouse_commits_nothing(run_job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The trial: a fresh depth-1 lakehouse (its root is a leaf) with 2 buffered messages, its
    buffer nowhere near full; a threshold flush used to empty it and commit a version anyway."""
    lh = Lakehouse.create(str(tmp_path / "lake"), name="small")
    for name in ("a", "b"):
        with lh.transaction() as tx:
            tx.create_namespace(name)
    version, root = lh.version, lh.root_info.node
    assert not root.children and len(root.buffer) == 2
    for fill in ("0.5", "0.9"):
        code, report = run_job(
            flush_main, "--lakehouse", lh.uri, "--mode", "threshold", "--fill", fill
        )
        assert code == 0, report
        assert report["status"] == "noop" and report["new_version"] is None, report
        assert f"no buffer is fuller than {float(fill):.0%}" in report["details"]["noop_reason"]
        assert (
            report["counts"]["root_messages_before"] == report["counts"]["root_messages_after"] == 2
        )
        assert (
            report["counts"]["node_files_written"]
            == report["counts"]["node_files_not_committed"]
            == 0
        )
        assert Lakehouse.open(lh.uri).version == version
    # Fill 0 means any buffer that holds a message: the root leaf applies its 2 messages.
    code, report = run_job(flush_main, "--lakehouse", lh.uri, "--mode", "threshold", "--fill", "0")
    assert code == 0 and report["status"] == "ok" and report["new_version"] == version + 1, report
    assert (
        report["counts"]["root_messages_before"] == 2
        and report["counts"]["root_messages_after"] == 0
    )
    after = Lakehouse.open(lh.uri)
    assert after.list_namespaces() == ["a", "b"] and not after.root_info.node.buffer
    assert check_version(after, deep=True).ok


def test_commits_that_land_before_the_flush_commits_are_counted(
    run_job,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Commits that only add root-buffer messages between the plan and the commit: their
    messages go on top of the flushed root. The report used to say 'root buffer N -> N' in
    its summary and 'root messages after 0' in its counts; both now describe the version
    committed, and the messages that came from the other commits."""
    import lakecore.lakehouse.flush as flush_job  # where the job's flush plans

    lh = _catalog(str(tmp_path / "lake"), tables=20)
    # An empty root buffer first, so that the other commits' few messages fit in the root (a
    # commit that overflows the root flushes it, and the job would redo instead of rebasing).
    code, _report = run_job(flush_main, "--lakehouse", lh.uri)
    assert code == 0
    lh.refresh()
    for i in range(2):
        with lh.transaction() as tx:
            tx.create_table("a", f"new{i}")
    assert lh.root_info.node.children, "the flush must have subtrees to hand out"
    base = lh.version
    base_messages = len(lh.root_info.node.buffer)
    real_plan = flush_job.plan_flush
    landed: list[int] = []

    def plan_then_let_three_commits_land(*args: Any, **kwargs: Any) -> Any:
        run = real_plan(*args, **kwargs)
        if not landed:
            other = Lakehouse.open(lh.uri)
            for i in range(3):
                with other.transaction() as tx:
                    tx.create_namespace(f"late{i}")
                landed.append(other.version)
        return run

    flush_job.plan_flush = plan_then_let_three_commits_land  # type: ignore[assignment]
    capsys.readouterr()
    try:
        code, report = run_job(flush_main, "--lakehouse", lh.uri)
    finally:
        flush_job.plan_flush = real_plan  # type: ignore[assignment]
    assert code == 0 and report["status"] == "ok", report
    assert landed == [base + 1, base + 2, base + 3]
    assert report["new_version"] == base + 4 and report["counts"]["redos"] == 0, report
    final = Lakehouse.open(lh.uri)
    committed = final.root_info.node
    counts = report["counts"]
    assert counts["root_messages_before"] == base_messages
    assert (
        counts["root_messages_after"]
        == len(committed.buffer)
        == counts["root_messages_from_later_commits"]
        > 0
    )
    assert counts["commit_retries"] >= 1 and counts["node_files_not_committed"] == 0, counts
    summary = capsys.readouterr().out
    assert (
        f"root buffer {base_messages} -> 0 messages; 3 commits landed meanwhile, and {len(committed.buffer)} "
        f"newer root messages went on top: version {base + 4}'s root buffer holds {len(committed.buffer)}"
    ) in summary, summary
    assert {f"late{i}" for i in range(3)} <= set(final.list_namespaces())
    assert check_version(final, deep=True).ok


@pytest.mark.s3
def test_full_flush_on_s3(run_job, s3_server) -> None:  # type: ignore[no-untyped-def]
    uri, options = s3_server.new_root()
    lh = _catalog(uri, options, tables=30)
    before = dict(items(lh.store, lh.root))
    code, report = run_job(flush_main, "--lakehouse", uri, *s3_server.job_args())
    assert code == 0, report
    after = Lakehouse.open(uri, storage_options=options)
    assert dict(items(after.store, after.root)) == before
    assert _buffered(after) == 0
    assert check_version(after, deep=True).ok


def test_commits_landing_during_the_flush_are_kept(run_job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lh = _catalog(str(tmp_path / "lake"))
    stop = threading.Event()
    created: list[str] = []

    # A bounded writer: commits that flush the root buffer themselves make the job redo, and an
    # endless stream of them would starve any flush (that is what --max-redos bounds). Once the
    # writer stops, the next redo must land, so the redos allowed exceed the writer's commits.
    writes = 25

    def writer() -> None:
        other = Lakehouse.open(lh.uri)
        for i in range(writes):
            if stop.is_set():
                return
            with other.transaction() as tx:
                tx.create_table("b", f"late{i:03d}")
            created.append(f"late{i:03d}")
            other.refresh()
            time.sleep(0.02)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        code, report = run_job(flush_main, "--lakehouse", lh.uri, "--max-redos", str(writes + 1))
    finally:
        stop.set()
        thread.join()
    assert code == 0, report
    assert report["counts"]["redos"] <= writes
    final = Lakehouse.open(lh.uri)
    assert set(created) <= set(final.list_tables("b"))
    assert check_version(final, deep=True).ok


@pytest.mark.parametrize(
    "argv",
    [
        ["--mode", "nope"],
        ["--mode", "threshold", "--fill", "1.5"],
        ["--mode", "full", "--fill", "0.5"],
        [],
    ],
)
def test_bad_options_exit_2_and_write_nothing(run_job, tmp_path: Path, argv: list[str]) -> None:  # type: ignore[no-untyped-def]
    lh = _catalog(str(tmp_path / "lake"), tables=5)
    files = sorted(p for p in (tmp_path / "lake").rglob("*"))
    args = ["--lakehouse", lh.uri, *argv] if argv else ["--lakehouse", "s3://bad/../x"]
    code, _report = run_job(flush_main, *args)
    assert code == 2
    assert sorted(p for p in (tmp_path / "lake").rglob("*")) == files


def test_missing_lakehouse_is_exit_5(run_job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, report = run_job(flush_main, "--lakehouse", str(tmp_path / "nothing"))
    assert code == 5 and "no lakehouse" in report["error"]
