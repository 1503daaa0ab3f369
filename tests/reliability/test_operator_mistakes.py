"""Operator mistakes, done the way an operator does them: the CLI, the demo and spark-submit.sh
in real subprocesses, each checked for its one line on stderr, its documented exit code, and a
listing of the folder before and after (nothing lost, nothing half-written).

The cases are the new-user trial's findings: the demo and a folder of one's own, a truncated
root file, jobs with nothing to do, exit codes and signals, unchecked input.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import LATEST_HINT_FILE_NAME, root_node_file_name
from lakecore.core.storage import Storage
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse
from tests.conftest import SilentEndpoint

# Every test here runs real processes (the lakecore CLI, spark-submit.sh): the marker keeps the
# whole file out of make test-quick, as the other reliability suites are.
pytestmark = pytest.mark.reliability

REPO = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = REPO / "spark-submit.sh"
COLUMN = ["--column", "1:id:INT8"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return env


def cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``lakecore ARGV`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "lakecore.cli", *argv],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=120,
    )


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def s3_listing(storage: Storage) -> dict[str, bytes]:
    return {info.path: storage.read(info.path) for info in storage.list()}


def make_lake(path: str, options: dict[str, Any] | None = None) -> Lakehouse:
    """Versions 0..5: empty, namespaces a and b, table a.t, namespace c, then table b.u."""
    lh = Lakehouse.create(path, name="trial", storage_options=options)
    for step in ("a", "b", "t", "c", "u"):
        with lh.transaction() as tx:
            if step == "t":
                tx.create_table("a", "t", columns=[{"id": 1, "name": "id", "type": "INT8"}])
            elif step == "u":
                tx.create_table("b", "u", columns=[{"id": 1, "name": "id", "type": "INT8"}])
            else:
                tx.create_namespace(step)
    return lh


# -- 1. the demo and a folder of one's own --------------------------------------------------------


def test_demo_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "notes.txt").write_text("precious")
    (mine / "sub" / "data.csv").write_text("1,2,3")
    before = listing(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.demo",
            "--lakehouse",
            str(mine),
            "--no-pipeline",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
    line = one_line(proc)
    assert str(mine) in line and "did not make" in line and "nothing was touched" in line
    assert listing(tmp_path) == before


def test_demo_refuses_a_lakehouse_it_did_not_make_and_recreates_its_own(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    assert cli("init", str(theirs)).returncode == 0
    before = listing(theirs)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.demo",
            "--lakehouse",
            str(theirs),
            "--no-pipeline",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == ExitCode.BAD_INPUT and "no lakecore.demo property" in one_line(proc)
    assert listing(theirs) == before

    ours = tmp_path / "ours"
    for _ in range(2):  # the second run replaces the first run's lakehouse
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "jobs.demo",
                "--lakehouse",
                str(ours),
                "--no-pipeline",
            ],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=tmp_path,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
    assert Lakehouse.open(str(ours)).list_namespaces() == [
        "sales_0",
        "sales_1",
        "sales_2",
        "sales_3",
    ]
    # An extra file makes the folder someone else's again.
    (ours / "keep-me.txt").write_text("mine now")
    before = listing(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.demo", "--lakehouse", str(ours), "--remove"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == ExitCode.BAD_INPUT and "keep-me.txt" in one_line(proc)
    assert listing(tmp_path) == before


# -- 2. damaged root files lock nobody out -------------------------------------------------------

DAMAGE = {
    "truncated": lambda data: data[:100],
    "empty": lambda data: b"",
    "garbage": lambda data: b"\x00garbage\xff" * 20,
}


def _damage(storage: Storage, version: int, how: str) -> None:
    path = root_node_file_name(version)
    if how == "missing":
        storage.delete([path])
    else:
        storage.write(path, DAMAGE[how](storage.read(path)))


@pytest.fixture(params=["local", "s3"])
def where(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, list[str], Storage]]:
    """A lakehouse root, the CLI's storage options for it, and its Storage."""
    if request.param == "local":
        uri = str(tmp_path / "lake")
        yield uri, [], Storage(uri)
    else:
        server = request.getfixturevalue("s3_server")
        uri, options = server.new_root()
        args = [
            f"--storage-option=endpoint_url={server.endpoint}",
            "--storage-option=key=lakecore-test",
            "--storage-option=secret=lakecore-test",
        ]
        yield uri, args, Storage(uri, options)


def _snapshot(storage: Storage) -> dict[str, bytes]:
    return s3_listing(storage)


@pytest.mark.s3
@pytest.mark.parametrize(
    ("damaged", "how"),
    [
        pytest.param([5], "truncated", id="newest-truncated"),
        # Empty and truncated are one kind of damage to the reader (too short a file); a
        # damaged root in the middle is the newest's case with versions after it: slow.
        pytest.param([5], "empty", id="newest-empty", marks=pytest.mark.slow),
        pytest.param([3, 4, 5], "garbage", id="newest-three-garbage"),
        pytest.param([3], "truncated", id="middle-truncated", marks=pytest.mark.slow),
        pytest.param([5], "missing", id="newest-missing"),
    ],
)
def test_damaged_roots_are_listed_and_repaired(
    where: tuple[str, list[str], Storage], damaged: list[int], how: str
) -> None:
    uri, opts, storage = where
    make_lake(uri, storage.storage_options)
    expected = {1: ["a"], 2: ["a", "b"], 3: ["a", "b"], 4: ["a", "b", "c"], 5: ["a", "b", "c"]}
    for version in damaged:
        _damage(storage, version, how)
    storage.write(LATEST_HINT_FILE_NAME, b"\xffnot a number")  # the hint is garbage too
    readable = [v for v in range(6) if v not in damaged]
    highest = max(readable) if how == "missing" else 5  # a damaged root keeps its number

    before = _snapshot(storage)
    # The log and the checker show damage instead of failing on it.
    proc = cli(*opts, "-l", uri, "--json", "versions")
    assert proc.returncode == 0, proc.stderr
    states = {entry["version"]: entry["state"] for entry in json.loads(proc.stdout)}
    if how != "missing":
        assert all(states[v] == "unreadable" for v in damaged), states
    assert all(states[v] != "unreadable" for v in readable), states
    proc = cli(*opts, "-l", uri, "fsck", "--all")
    if how == "missing":
        assert proc.returncode == 0, proc.stdout + proc.stderr
    else:
        assert proc.returncode == ExitCode.VIOLATIONS and "unreadable-root" in proc.stdout, (
            proc.stdout
        )
    newest_damaged = how != "missing" and 5 in damaged
    if newest_damaged:
        for argv in (["namespace", "list"], ["rollback", "--to-version", "1"], ["tree"]):
            proc = cli(*opts, "-l", uri, *argv)
            assert proc.returncode == ExitCode.DAMAGED, (argv, proc.stderr)
            line = one_line(proc)
            assert root_node_file_name(5) in line and "repair rollback --to-last-valid" in line, (
                line
            )
    else:  # the latest version reads fine: the catalog works as ever
        proc = cli(*opts, "-l", uri, "namespace", "list")
        assert proc.returncode == 0 and proc.stdout.split() == expected[max(readable)], proc.stderr
    assert _snapshot(storage) == before

    # The plan first: nothing written.
    proc = cli(*opts, "-l", uri, "repair", "rollback", "--to-last-valid")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if how == "missing":  # nothing is damaged: the log just ends one version earlier
        assert "nothing to roll back" in proc.stdout, proc.stdout
        return
    assert "would roll forward" in proc.stdout or "would commit version" in proc.stdout, proc.stdout
    assert _snapshot(storage) == before
    # Then the repair: a new version above every existing root file, readable or not.
    proc = cli(*opts, "-l", uri, "--json", "repair", "rollback", "--to-last-valid", "--yes")
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    last_valid = max(readable)
    assert outcome["rollback_to"] == last_valid and outcome["new_version"] == highest + 1, outcome
    for path, data in before.items():  # nothing lost: every file is still there, unchanged
        if path != LATEST_HINT_FILE_NAME:
            assert storage.read(path) == data, path
    lh = Lakehouse.open(uri, storage_options=storage.storage_options)
    assert lh.version == highest + 1 and lh.list_namespaces() == expected[last_valid]
    assert lh.versions()[0].rollback_from_version == highest
    # --to-version works on the repaired lakehouse too, and never reuses a number.
    proc = cli(*opts, "-l", uri, "repair", "rollback", "--to-version", "1", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert Lakehouse.open(uri, storage_options=storage.storage_options).list_namespaces() == ["a"]
    proc = cli(*opts, "-l", uri, "fsck")
    assert proc.returncode == 0, proc.stdout
    # Maintenance is not locked out either: version compaction expires the damaged roots the
    # repair rolled past (and nothing else: every readable version is young), then gc runs.
    from lakecore.maintenance.expire import expire_in_process
    from lakecore.maintenance.gc import gc_in_process

    now = int(time.time() * 1000)
    result = expire_in_process(storage, now_millis=now)
    assert result.roots.deleted == sorted(damaged), result.roots
    assert gc_in_process(storage, now_millis=now, grace_millis=0, dry_run=True) is not None
    proc = cli(*opts, "-l", uri, "fsck", "--all")
    assert proc.returncode == 0, proc.stdout


@pytest.mark.spark  # starts a driver JVM through spark-submit.sh
def test_repair_through_spark_submit_after_a_truncated_root(tmp_path: Path) -> None:
    """What the trial ran: `truncate -s 100` on the newest root, then spark-submit.sh repair."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    os.truncate(lake / root_node_file_name(5), 100)
    before = listing(lake)
    env = _env()
    report = tmp_path / "repair.json"
    proc = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "repair",
            "--lakehouse",
            str(lake),
            "--report",
            str(report),
            "rollback",
            "--to-last-valid",
            "--yes",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(report.read_text())
    assert (
        data["status"] == "ok" and data["new_version"] == 6 and data["details"]["rollback_to"] == 4
    )
    assert data["details"]["invalid_versions"].keys() == {"5"}
    after = listing(lake)
    assert all(
        after[path] == content for path, content in before.items() if path != LATEST_HINT_FILE_NAME
    )
    assert Lakehouse.open(str(lake)).list_namespaces() == ["a", "b", "c"]


# -- 3. jobs with nothing to do commit nothing ----------------------------------------------------


@pytest.mark.spark
def test_flush_with_nothing_to_do_commits_nothing(tmp_path: Path, spark: Any) -> None:
    from jobs.flush_job import main as flush_main

    lake = tmp_path / "lake"
    lh = Lakehouse.create(
        str(lake),
        name="flushy",
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("a")
    reports = []
    for argv in (["--mode", "full"], ["--mode", "full"], ["--mode", "threshold", "--fill", "0.9"]):
        report = tmp_path / f"flush-{len(reports)}.json"
        code = flush_main(["--lakehouse", str(lake), *argv, "--report", str(report)], spark=spark)
        assert code == 0
        reports.append(json.loads(report.read_text()))
    first, second, third = reports
    assert first["status"] == "ok" and first["new_version"] == 2
    for noop in (second, third):
        assert noop["status"] == "noop" and noop["new_version"] is None, noop
        assert noop["details"]["noop_reason"] and noop["counts"]["redos"] == 0
    assert Lakehouse.open(str(lake)).version == 2


@pytest.mark.spark
def test_a_flush_that_lost_the_race_commits_nothing_and_counts_its_redo(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two flushes at once: the loser redoes its plan on the winner's version, finds nothing
    to do, and says so; its report counts the redo."""
    import jobs.flush_job as flush_job
    import lakecore.lakehouse.flush as flush_loop  # where the job's flush plans

    lake = tmp_path / "lake"
    lh = Lakehouse.create(
        str(lake),
        name="race",
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    for i in range(12):
        with lh.transaction() as tx:
            tx.create_namespace(f"n{i:02d}")
    base = lh.version
    real_plan = flush_loop.plan_flush
    raced: list[int] = []

    def plan_then_lose_the_race(*args: Any, **kwargs: Any) -> Any:
        run = real_plan(*args, **kwargs)
        if not raced:  # the other flush commits between this one's plan and its commit
            raced.append(1)
            other = tmp_path / "winner.json"
            assert (
                flush_job.main(["--lakehouse", str(lake), "--report", str(other)], spark=spark) == 0
            )
        return run

    report_path = tmp_path / "loser.json"
    flush_loop.plan_flush = plan_then_lose_the_race  # type: ignore[assignment]
    try:
        code = flush_job.main(["--lakehouse", str(lake), "--report", str(report_path)], spark=spark)
    finally:
        flush_loop.plan_flush = real_plan  # type: ignore[assignment]
    loser_summary = capsys.readouterr().out.split("lakecore flush [noop]")[-1]
    report = json.loads(report_path.read_text())
    assert code == 0 and report["status"] == "noop", report
    assert report["counts"]["redos"] == 1 and len(report["details"]["redos"]) == 1, report
    assert Lakehouse.open(str(lake)).version == base + 1  # only the winner's version
    # The report agrees with itself: it found the winner's version (base + 1, its root buffer
    # flushed), and the node files its first attempt wrote are in no version, for gc.
    assert report["base_version"] == base + 1 and report["details"]["planned_from_versions"] == [
        base,
        base + 1,
    ]
    assert loser_summary.startswith(f" {report['lakehouse']} version {base + 1}\n"), loser_summary
    reason = report["details"]["noop_reason"]
    assert (
        f"redone on version {base + 1}, which another commit made while this job flushed version {base}"
        in reason
    )
    counts = report["counts"]
    assert counts["root_messages_before"] == counts["root_messages_after"] == 0, counts
    assert counts["node_files_written"] == counts["node_files_not_committed"] > 0, counts
    assert report["bytes"]["node_bytes_written"] == report["bytes"]["node_bytes_not_committed"] > 0
    assert len(report["samples"]["not_committed_node_files"]) == min(
        counts["node_files_not_committed"], 50
    )
    assert report["samples"]["written_node_files"] == []
    assert (
        f"{counts['node_files_not_committed']} node files" in loser_summary
        and "in no version: gc deletes them" in loser_summary
    ), loser_summary
    winner = Lakehouse.open(str(lake))
    in_the_tree: set[str] = set()
    stack = list(winner.root_info.node.children)
    while stack:
        path = stack.pop()
        in_the_tree.add(path)
        stack.extend(winner.store.load(path).children)
    assert in_the_tree and not in_the_tree & set(report["samples"]["not_committed_node_files"])


# -- 4. exit codes, storage options, signals, pipes ------------------------------------------------


def test_not_found_and_already_exists_have_their_own_codes(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert cli("init", str(lake)).returncode == 0
    assert cli("-l", str(lake), "namespace", "create", "a").returncode == 0
    before = listing(lake)
    for argv, code, words in [
        (["namespace", "show", "nope"], ExitCode.NOT_FOUND, "does not exist"),
        (["table", "show", "a", "nope"], ExitCode.NOT_FOUND, "does not exist"),
        (["get", "--namespace", "nope"], ExitCode.NOT_FOUND, ""),
        (["namespace", "create", "a"], ExitCode.BAD_INPUT, "already exists"),
    ]:
        proc = cli("-l", str(lake), *argv)
        assert proc.returncode == code, (argv, proc.returncode, proc.stderr)
        if words:
            assert words in one_line(proc)
    assert listing(lake) == before


@pytest.mark.s3
def test_a_mistyped_storage_option_is_refused_before_any_io(tmp_path: Path, s3_server: Any) -> None:
    uri, _options = s3_server.new_root()
    client = s3_server.client()
    before = client.list_objects_v2(Bucket=s3_server.bucket).get("KeyCount", 0)
    for argv in (["init", uri], ["-l", uri, "namespace", "list"]):
        proc = cli(f"--storage-option=endpoint={s3_server.endpoint}", *argv)
        assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
        line = one_line(proc)
        assert "unknown storage option endpoint" in line and "endpoint_url" in line, line
    assert client.list_objects_v2(Bucket=s3_server.bucket).get("KeyCount", 0) == before
    # The same typo in a job: exit 2 and the same line, before Spark starts.
    proc = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "validate",
            "--lakehouse",
            uri,
            f"--storage-option=endpoint={s3_server.endpoint}",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == ExitCode.BAD_INPUT and "endpoint_url" in proc.stderr, proc.stderr[
        -2000:
    ]
    # AWS_ENDPOINT_URL works instead of the option.
    env = {
        **_env(),
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": "lakecore-test",
        "AWS_SECRET_ACCESS_KEY": "lakecore-test",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "lakecore.cli", "init", uri],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_a_closed_pipe_ends_the_cli_quietly(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert cli("init", str(lake)).returncode == 0
    with Lakehouse.open(str(lake)).transaction() as tx:
        for i in range(3000):
            tx.create_namespace(f"ns{i:05d}")
    shell = (
        f"{sys.executable} -m lakecore.cli -l {lake} namespace list | head -1; "
        'echo "status=${PIPESTATUS[0]}"'
    )
    proc = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert proc.stdout.splitlines() == ["ns00000", "status=0"], proc.stdout
    assert proc.stderr == "", proc.stderr


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    children = [int(p) for p in out.split()]
    return children + [g for c in children for g in _descendants(c)]


def _catches_sigterm(pid: int) -> bool:
    """True once the process has a SIGTERM handler: the job's signal handling is in place."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        executable = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    if not executable.startswith("python"):  # the JVM catches SIGTERM too
        return False
    caught = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16
    )
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _runs_python_tasks(pid: int) -> bool:
    """True for Spark's Python worker daemon: the session is up and a job is running tasks."""
    try:
        return b"pyspark.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.spark
@pytest.mark.parametrize(
    ("sig", "when"),
    [
        pytest.param(signal.SIGINT, "early", id="ctrl-c"),
        pytest.param(signal.SIGINT, "mid-job", id="ctrl-c-mid-job"),
        # SIGTERM early takes the path Ctrl-C early does; to the whole group, the path the
        # wrapper's forwarding takes: each about 30 s of a loaded run, so slow.
        pytest.param(signal.SIGTERM, "early", id="sigterm", marks=pytest.mark.slow),
        pytest.param(signal.SIGTERM, "to-the-wrapper-mid-job", id="sigterm-to-spark-submit-sh"),
        pytest.param(
            signal.SIGTERM,
            "to-the-group-mid-job",
            id="sigterm-to-the-process-group",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_signal_stops_a_job_cleanly(tmp_path: Path, sig: signal.Signals, when: str) -> None:
    """Early: as soon as the driver handles signals. Mid-job: once Spark runs Python tasks, when
    the SparkContext has installed its own SIGINT handler and the JVM gets the same Ctrl-C. To
    the wrapper: a scheduler's SIGTERM for the process it started, which passes it on to the
    driver, not to Spark's Python workers (children of the JVM as well)."""
    lake = tmp_path / "lake"
    lh = make_lake(str(lake))
    with lh.transaction() as tx:
        for i in range(400):
            tx.create_table("a", f"t{i:04d}", columns=[{"id": 1, "name": "id", "type": "INT8"}])
    before = listing(lake)
    report = tmp_path / "validate.json"
    job = subprocess.Popen(
        [
            str(SPARK_SUBMIT),
            "validate",
            "--lakehouse",
            str(lake),
            "--deep",
            "--report",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and job.poll() is None:
        ready = _runs_python_tasks if when.endswith("mid-job") else _catches_sigterm
        if any(ready(pid) for pid in _descendants(job.pid)):
            break
        time.sleep(0.05)
    assert job.poll() is None, "the job ended before it could be interrupted"
    if sig == signal.SIGINT or when == "to-the-group-mid-job":
        # What Ctrl-C in a terminal does, and what a scheduler's kill of the task's process
        # group does (Airflow's, on a timeout): the whole group, the JVM included.
        os.killpg(job.pid, sig)
    elif when == "to-the-wrapper-mid-job":
        job.send_signal(sig)
    else:
        for pid in _descendants(job.pid):  # what a scheduler's kill does to the driver
            if _catches_sigterm(pid):
                os.kill(pid, sig)
    try:
        out, err = job.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)  # leave no JVM behind for the rest of the suite
        raise
    assert job.returncode == ExitCode.INTERRUPTED, (job.returncode, err[-3000:])
    # The job's line on stderr (spark-submit.sh prints it there: Spark's PythonRunner would have
    # relayed it on stdout), and besides it the JVM's start-up warning at most.
    noise = [line for line in err.splitlines() if line.strip() and "incubator modules" not in line]
    assert len(noise) == 1, err
    assert "Traceback" not in out + err and "py4j" not in (out + err).lower(), out + err
    assert "interrupted by SIG" in noise[0] and "half-committed" in noise[0], err
    data = json.loads(report.read_text())
    assert data["status"] == "interrupted" and data["exit_code"] == ExitCode.INTERRUPTED, data
    assert listing(lake) == before


def _is_java(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "java"
    except OSError:
        return False


# gc run as ``python -m jobs.gc`` would, with its one Spark stage held open: the stage's task
# waits (up to ten minutes) for a file the test never writes, so only a cancel ends it.
_A_STAGE_THAT_WAITS = """
import os, sys, time
import jobs.gc_job

MARKS = sys.argv.pop(1)
real_judge_listing = jobs.gc_job.judge_listing

def waiting(batches):
    open(os.path.join(MARKS, "task-started"), "w").close()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not os.path.exists(os.path.join(MARKS, "release")):
        time.sleep(0.05)
    open(os.path.join(MARKS, "task-ended"), "w").close()
    yield from batches

def judge_listing(*args, **kwargs):
    judged = real_judge_listing(*args, **kwargs)
    return judged.mapInArrow(waiting, judged.schema)

jobs.gc_job.judge_listing = judge_listing
sys.exit(jobs.gc_job.main(sys.argv[1:]))
"""


@pytest.mark.spark
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c-to-the-terminal", "sigterm-to-the-driver"]
)
def test_a_signal_stops_a_spark_stage_without_waiting_for_it(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A signal used to be acted on only when the Spark action the driver waited in returned:
    after the stage, which on a big lakehouse is minutes (4-5 s on moto's S3 here). The job's
    Spark work is now cancelled at once; its Python workers are stopped first, so none prints a
    traceback. Ctrl-C goes to the terminal's whole process group; a scheduler's SIGTERM to the
    driver alone."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    before = listing(lake)
    marks = tmp_path / "marks"
    marks.mkdir()
    report = tmp_path / "gc.json"
    job = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _A_STAGE_THAT_WAITS,
            str(marks),
            "--lakehouse",
            str(lake),
            "--master",
            "local[1]",
            "--dry-run",
            "--report",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
        start_new_session=True,
    )
    processes: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline
            and job.poll() is None
            and not (marks / "task-started").exists()
        ):
            processes.update(_descendants(job.pid))
            time.sleep(0.05)
        assert (marks / "task-started").exists(), "the stage never started"
        processes.update(_descendants(job.pid))
        if sig == signal.SIGINT:
            os.killpg(job.pid, sig)
        else:
            job.send_signal(sig)
        out, err = job.communicate(timeout=120)  # the task alone would wait ten minutes
    finally:
        (marks / "release").touch()
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == ExitCode.INTERRUPTED, (job.returncode, err[-3000:])
    assert not (marks / "task-ended").exists(), "the stage ran to its end"
    noise = [line for line in err.splitlines() if line.strip() and "incubator modules" not in line]
    assert noise == [
        f"lakecore gc: interrupted by {sig.name} during list-reach-anti-join; nothing was committed, "
        "nothing is half-committed; run the job again"
    ], err
    assert "Traceback" not in out and "[interrupted (dry run)]" in out, out
    data = json.loads(report.read_text())
    assert (
        data["status"] == "interrupted"
        and data["details"]["interrupted_stage"] == "list-reach-anti-join"
    )
    # The JVM (in a session of its own) and its Python workers end with the driver.
    gone_by = time.monotonic() + 15
    while time.monotonic() < gone_by and any(Path(f"/proc/{pid}").exists() for pid in processes):
        time.sleep(0.1)
    left = [pid for pid in processes if Path(f"/proc/{pid}").exists()]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "the job's JVM or Python workers outlived it"
    assert listing(lake) == before


@pytest.mark.spark
def test_ctrl_c_while_spark_starts_stops_it(tmp_path: Path) -> None:
    """Before the JVM has started the driver (about a second): the JVM ignores SIGINT (so that
    later the driver can stop cleanly) and no driver is there to act on it, so the job used to
    run to its end. Now spark-submit.sh stops the JVM (or passes the Ctrl-C to a driver that
    is starting) and exits 130 with one line."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    before = listing(lake)
    report = tmp_path / "validate.json"
    job = subprocess.Popen(
        [str(SPARK_SUBMIT), "validate", "--lakehouse", str(lake), "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and job.poll() is None
        and not any(map(_is_java, _descendants(job.pid)))
    ):
        time.sleep(0.01)
    assert job.poll() is None, "the job ended before Spark started"
    os.killpg(job.pid, signal.SIGINT)
    out, err = job.communicate(timeout=60)
    assert job.returncode == ExitCode.INTERRUPTED, (job.returncode, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err, out + err
    lines = [line for line in (out + err).splitlines() if "interrupted by SIGINT" in line]
    assert len(lines) == 1, out + err
    # Usually the wrapper's line; the driver's own when it was starting at that moment.
    assert "while Spark was starting" in lines[0] or "half-committed" in lines[0], lines
    assert listing(lake) == before


# A job run as ``python -m jobs.JOB`` imports for about 0.4 s before its handler is in place.
# This runs the job the same way, and sends the signal from inside the import of jobs.run, so
# that it lands in those imports every time.
_SIGNAL_WHILE_IMPORTING = """
import importlib.abc, os, runpy, signal, sys
class SignalOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "jobs.run":
            os.kill(os.getpid(), signal.{sig})
        return None
sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["{job}", *sys.argv[1:]]
runpy.run_module("jobs.{module}", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("job", ["gc", "validate", "compact-versions"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_while_a_job_imports_is_one_line(
    tmp_path: Path, job: str, sig: signal.Signals
) -> None:
    """Before: a KeyboardInterrupt traceback through importlib (SIGINT), or exit 143 and no
    word (SIGTERM)."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    before = listing(lake)
    program = _SIGNAL_WHILE_IMPORTING.format(sig=sig.name, job=job, module=job.replace("-", "_"))
    proc = subprocess.run(
        [sys.executable, "-c", program, "--lakehouse", str(lake)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == ExitCode.INTERRUPTED, (proc.returncode, proc.stderr[-2000:])
    assert one_line(proc) == (
        f"lakecore {job}: interrupted by {sig.name} while starting, before the job "
        "began; nothing was done"
    )
    assert proc.stdout == ""
    assert listing(lake) == before


def test_the_early_handler_gives_way_to_the_job_and_to_spark_submit(tmp_path: Path) -> None:
    """Under spark-submit the driver starts with SIGINT ignored and its wrapper handles both
    signals: nothing is installed. A job that began takes back what was there before, once."""
    program = """
import signal
from jobs.startup import quiet_until_the_job_begins, take_dispositions_before_startup
ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
quiet_until_the_job_begins("gc")
installed = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
taken = take_dispositions_before_startup()
again = take_dispositions_before_startup()
if ignored:
    print(installed == (signal.SIG_IGN, signal.SIG_DFL), taken == {} == again)
else:
    print(installed[0] not in (signal.default_int_handler, signal.SIG_IGN), installed[1] != signal.SIG_DFL,
          taken == {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}, again == {})
"""
    plain = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=60,
    )
    assert plain.stdout.split() == ["True"] * 4, plain.stderr
    under_jvm = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert under_jvm.stdout.split() == ["True"] * 2, under_jvm.stderr


@pytest.mark.spark
def test_ctrl_c_while_pyspark_launches_the_jvm_leaves_no_jvm(tmp_path: Path) -> None:
    """``python -m jobs.JOB`` with a local master: pyspark launches the JVM itself. A Ctrl-C
    then (once the JVM process exists) used to leave it running for good, printing a Java
    stack trace into the terminal a second later; the session is now made on a helper thread
    and the launching JVM stopped. The one line, exit 130, and no JVM of the job's left."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    before = listing(lake)
    job = subprocess.Popen(
        [sys.executable, "-m", "jobs.validate", "--lakehouse", str(lake), "--master", "local[1]"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    javas: list[int] = []
    while time.monotonic() < deadline and job.poll() is None and not javas:
        javas = [pid for pid in _descendants(job.pid) if _is_java(pid)]
        time.sleep(0.01)
    assert javas, "no JVM was launched"
    os.killpg(job.pid, signal.SIGINT)
    try:
        out, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        for pid in javas:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        raise
    assert job.returncode == ExitCode.INTERRUPTED, (job.returncode, err[-3000:])
    assert "Traceback" not in out + err and "py4j" not in (out + err).lower(), out + err
    lines = [line for line in (out + err).splitlines() if "interrupted by SIGINT" in line]
    assert len(lines) == 1, out + err
    gone_by = time.monotonic() + 15
    while time.monotonic() < gone_by and any(_is_java(pid) for pid in javas):
        time.sleep(0.1)
    left = [pid for pid in javas if _is_java(pid)]
    for pid in left:  # leave nothing for the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert not left, "the JVM pyspark was launching outlived the job"
    assert listing(lake) == before


@pytest.mark.spark  # starts a driver JVM through spark-submit.sh
def test_a_job_tells_spark_submit_sh_when_it_has_begun(tmp_path: Path) -> None:
    """The wrapper's traps leave a signal to a driver whose job has begun, even one that has
    ended by the time they look (it printed its line; the wrapper used to add "while Spark was
    starting" and stop the JVM mid-start). The driver says so with a file the wrapper names;
    spark-submit.sh's own argument check (parse only) says nothing."""
    began = tmp_path / "began"
    (tmp_path / "none").mkdir()  # no lakehouse in it: the job begins, then finds none
    parse_only = subprocess.run(
        [sys.executable, "-m", "jobs.gc", "--lakehouse", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**_env(), "LAKECORE_JOB_BEGAN_FILE": str(began), "LAKECORE_PARSE_ONLY": "1"},
    )
    assert parse_only.returncode == 0, parse_only.stderr
    assert not began.exists()
    job = subprocess.run(
        [sys.executable, "-m", "jobs.gc", "--lakehouse", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**_env(), "LAKECORE_JOB_BEGAN_FILE": str(began)},
    )
    assert job.returncode == ExitCode.NOT_FOUND, job.stderr
    assert began.exists()


@pytest.mark.spark
def test_a_signal_while_connecting_to_spark_connect_ends_the_job(
    tmp_path: Path, silent_endpoint: SilentEndpoint
) -> None:
    """An endpoint that accepts the connection and never answers: the job's SIGTERM while its
    Connect client waits. Before: the job's one line, then pyspark's exit hook retried the
    endpoint for minutes."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    before = listing(lake)
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.gc",
            "--lakehouse",
            str(lake),
            "--dry-run",
            "--remote",
            f"sc://127.0.0.1:{silent_endpoint.port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    assert silent_endpoint.connected.wait(120), "the job never connected"  # the job has begun
    job.send_signal(signal.SIGTERM)
    try:
        out, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        raise
    assert job.returncode == ExitCode.INTERRUPTED, (job.returncode, err[-2000:])
    assert "Traceback" not in out + err, out + err
    assert err.strip().splitlines() == [
        "lakecore gc: interrupted by SIGTERM; nothing was committed, nothing "
        "is half-committed; run the job again"
    ], err
    assert listing(lake) == before


def test_a_signal_while_the_connect_probe_retries_ends_the_job_at_once(tmp_path: Path) -> None:
    """An endpoint that hangs up on every connection: the Connect client's first request
    retries for about 8 s. Found by a new-user trial: a Ctrl-C 3 s in took effect only when the
    retries ran out (5.1-5.6 s after the signal), because the interrupted job gave the session
    it was making 15 s to finish, as it must for a classic JVM."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    connections = threading.Semaphore(0)
    stop = threading.Event()

    def hang_up() -> None:
        while not stop.is_set():
            try:
                listener.accept()[0].close()
            except OSError:
                continue
            connections.release()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.gc",
            "--lakehouse",
            str(lake),
            "--dry-run",
            "--remote",
            f"sc://127.0.0.1:{listener.getsockname()[1]}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    try:
        # The second connection is a retry: the job is in the probe's back-off.
        assert connections.acquire(timeout=120) and connections.acquire(timeout=30), (
            "the probe never retried"
        )
        signalled = time.monotonic()
        job.send_signal(signal.SIGINT)
        _, err = job.communicate(timeout=60)
        waited = time.monotonic() - signalled
    finally:
        if job.poll() is None:
            job.kill()
        stop.set()
        thread.join()
        listener.close()
    assert job.returncode == ExitCode.INTERRUPTED, (job.returncode, err[-2000:])
    assert err.strip().splitlines() == [
        "lakecore gc: interrupted by SIGINT; nothing was committed, nothing "
        "is half-committed; run the job again"
    ], err
    # Not the rest of the retries (several seconds): the job ends as it is told.
    assert waited < 3.0, f"the job ended {waited:.1f} s after the signal"


# -- 5. input that used to be silently ignored ----------------------------------------------------


def test_unchecked_input_is_refused_with_what_to_do(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert cli("init", str(lake)).returncode == 0
    assert cli("-l", str(lake), "namespace", "create", "a").returncode == 0
    before = listing(lake)
    cases = [
        (
            ["table", "create", "a", "t", *COLUMN, "--version", "3"],
            "unrecognized option --version",
        ),
        (["namespace", "show"], "the following arguments are required: namespace"),
        (["namespace", "create", "b", "--version", "1"], "unrecognized option --version"),
        (
            ["table", "list", "a", "--column", "1:x:INT8"],
            "unrecognized option --column (see 'lakecore table list --help')",
        ),
        # A command's mistyped option is named with its nearest by the command's parser, and
        # the hint is that command's help, as a job's is.
        (
            ["table", "list", "a", "--jsn"],
            "unrecognized option --jsn (did you mean --json?) (see 'lakecore table list --help')",
        ),
        (
            ["namespace", "create", "b", "--prop", "k=v"],
            "unrecognized option --prop (did you mean --property? options are written in full)",
        ),
        (["--jsn", "versions"], "unrecognized option --jsn (did you mean --json?) (see 'lakecore"),
        (["table", "create", "a", "t"], "at least one --column"),
        (
            ["table", "create", "a", "t", "--column", "1:x:INT8", "--column", "2:x:INT8"],
            "column name 'x' is used twice",
        ),
        (
            ["table", "create", "a", "t", "--column", "1:x:INT8", "--column", "1:y:INT8"],
            "column id 1",
        ),
        (["table", "create", "a", "t", *COLUMN, "--property", "=v"], "empty key"),
        (["namespace", "create", "b", "--property", "=v"], "empty key"),
        # A mistyped command is named with the nearest one, as a mistyped job or option is.
        (["fsk"], "invalid choice 'fsk' (did you mean fsck?); choose from init, namespace"),
        (
            ["table", "lst", "a"],
            "invalid choice 'lst' (did you mean list?); choose from create, drop, undrop, list",
        ),
        (["qqq"], "invalid choice 'qqq'; choose from init"),
        # Another tool's word: spelling alone offered "tree" for "create" (a new-user trial).
        (["create", str(tmp_path / "new")], "invalid choice 'create' (did you mean init?)"),
        (
            ["history", "--since", "bad"],
            "argument --since: the time 'bad' is neither epoch milliseconds",
        ),
    ]
    for argv, words in cases:
        proc = cli("-l", str(lake), *argv)
        assert proc.returncode == ExitCode.BAD_INPUT, (argv, proc.stderr)
        assert words in one_line(proc), (argv, proc.stderr)
    assert listing(lake) == before

    full = tmp_path / "full"
    full.mkdir()
    (full / "report.csv").write_text("a,b")
    before = listing(full)
    proc = cli("init", str(full))
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "already holds other files (report.csv)" in one_line(proc)
    assert listing(full) == before


def test_a_mistyped_job_option_is_named_before_spark_starts(tmp_path: Path) -> None:
    """A typo in --lakehouse used to be reported as --lakehouse missing; a bad --older-than,
    --now or flush --fill was refused only after Spark had started (about 2 s, and a summary on
    stdout). All are now one line from spark-submit.sh's check, before any JVM: nothing on
    stdout."""
    lake = tmp_path / "lake"
    make_lake(str(lake))
    before = listing(lake)
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    cases = [
        (
            ["validate", "--lakehose", str(lake)],
            "unrecognized option --lakehose (did you mean --lakehouse?)",
        ),
        # With every required option given, argparse's own line named no option to try instead.
        (
            ["gc", "--lakehouse", str(lake), "--dryrun"],
            "unrecognized option --dryrun (did you mean --dry-run?)",
        ),
        (["gc", "--lakehouse", str(a_file), "--dry-run"], f"{a_file} is a file, not a folder"),
        # Whole numbers with a floor: these started Spark first, or were accepted (parallelism 0).
        (
            ["validate", "--lakehouse", str(lake), "--version", "-1"],
            "argument --version: -1 is below 0",
        ),
        (
            ["flush", "--lakehouse", str(lake), "--parallelism", "0"],
            "argument --parallelism: 0 is below 1",
        ),
        (
            [
                "export",
                "--lakehouse",
                str(lake),
                "--name",
                "x",
                "--target",
                str(tmp_path / "copy"),
                "--batch-size",
                "many",
            ],
            "argument --batch-size: 'many' is not a whole number",
        ),
        (
            ["flush", "--lakehouse", str(lake), "--report", str(a_file / "flush.json")],
            f"argument --report: {a_file / 'flush.json'} cannot be created: {a_file} is a file, not a folder",
        ),
        (
            ["validate", "--lakehouse", str(lake), "--html", str(tmp_path)],
            f"argument --html: {tmp_path} is a folder",
        ),
        (
            ["gc", "--lakehouse", str(lake), "--older-than", "3dd"],
            "argument --older-than: duration '3dd'",
        ),
        (["gc", "--lakehouse", str(lake), "--now", "yesterday"], "argument --now:"),
        (["compact-versions", "--lakehouse", str(lake), "--now", "2026-13-01"], "argument --now:"),
        # A typo in epoch millis: accepted, it expired every version the settings let go, and the
        # report held a number past 64 bits (found by a new-user trial).
        (
            [
                "compact-versions",
                "--lakehouse",
                str(lake),
                "--now",
                "99999999999999999999",
                "--dry-run",
            ],
            "argument --now: the time 99999999999999999999 is after the year 9999 as epoch milliseconds",
        ),
        # A mistyped year in --now: it expired every version the settings let go, minutes-old
        # ones too, and time travel to them was lost (found by a new-user trial). A dry run may.
        (
            [
                "compact-versions",
                "--lakehouse",
                str(lake),
                "--now",
                str(int(time.time() * 1000) + 365 * 86_400_000),
            ],
            "ahead of this machine's clock: versions would expire before their age",
        ),
        # The health page would have replaced the validation's own page beside the report.
        (
            [
                "validate",
                "--lakehouse",
                str(lake),
                "--report",
                str(tmp_path / "v.json"),
                "--html",
                str(tmp_path / "v.html"),
            ],
            "is where the validation's own page goes",
        ),
        # argparse takes a value that starts with '-' for an option: the line names the value
        # and the --option=VALUE form (which then reaches the duration check).
        (
            ["gc", "--lakehouse", str(lake), "--older-than", "-5m"],
            "argument --older-than: expected one argument, and '-5m' after it reads as an option; "
            "write --older-than=-5m",
        ),
        (["gc", "--lakehouse", str(lake), "--older-than=-5m"], "duration '-5m' is negative"),
        # flush's --fill: its range, and the mode it needs (the default mode, full, ignores it),
        # were checked only after Spark had started.
        (
            ["flush", "--lakehouse", str(lake), "--mode", "threshold", "--fill", "1.5"],
            "argument --fill: 1.5 is outside 0..1",
        ),
        (
            ["flush", "--lakehouse", str(lake), "--mode", "threshold", "--fill", "half"],
            "argument --fill: 'half' is not a number from 0 to 1",
        ),
        (
            ["flush", "--lakehouse", str(lake), "--fill", "0.5"],
            "--fill applies only to --mode threshold; --mode full empties every buffer",
        ),
    ]
    for argv, words in cases:
        proc = subprocess.run(
            [str(SPARK_SUBMIT), *argv], capture_output=True, text=True, env=_env(), timeout=120
        )
        assert proc.returncode == ExitCode.BAD_INPUT, (argv, proc.stdout, proc.stderr)
        assert words in one_line(proc), (argv, proc.stderr)
        line = one_line(proc)
        assert line.startswith(f"lakecore {argv[0]}: "), (argv, line)
        if (
            "is a file, not a folder" not in words or "argument" in words
        ):  # else not an argparse line
            # The invocation once, in the hint (it said "spark-submit.sh JOB:" after "lakecore JOB:").
            assert line.endswith(f" (see 'spark-submit.sh {argv[0]} --help')"), (argv, line)
            assert f"spark-submit.sh {argv[0]}:" not in line, (argv, line)
        assert proc.stdout == "", (argv, proc.stdout)
    # A folder that does not exist: one line before any JVM, exit 5, naming the likely typo (it
    # started Spark, then suggested `lakecore init`). Nothing on stdout: no driver ran to print a summary.
    proc = subprocess.run(
        [str(SPARK_SUBMIT), "gc", "--lakehouse", str(tmp_path / "lkae"), "--dry-run"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == ExitCode.NOT_FOUND and proc.stdout == "", (proc.stdout, proc.stderr)
    assert one_line(proc) == (
        f"lakecore gc: NoLakehouseError: no lakehouse at file://{tmp_path / 'lkae'}/: the folder does "
        "not exist; check the path (or create a lakehouse there with `lakecore init`)"
    )
    assert not (tmp_path / "lkae").exists()
    # Run as a module, a job names itself that way (it used to say spark-submit.sh there too).
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.compact_versions", "--lakehose", str(lake)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == ExitCode.BAD_INPUT, (proc.stdout, proc.stderr)
    assert one_line(proc) == (
        "lakecore compact-versions: ArgumentError: unrecognized option --lakehose (did you mean "
        "--lakehouse?) (see 'python -m jobs.compact_versions --help')"
    )
    assert listing(lake) == before
    assert a_file.read_text() == "mine\n"
    # The command line: a root that is a file is named as such (it said "no lakehouse ... create
    # one with lakecore init", and init then failed to write into it with exit 4).
    for argv in (
        ["-l", str(a_file), "versions"],
        ["init", str(a_file), "--name", "x"],
        ["-l", str(a_file / "sub"), "versions"],
        ["init", str(a_file / "sub"), "--name", "x"],
        ["-l", str(lake), "export", "e1", "--mode", "full", "--target", str(a_file)],
        ["-l", str(lake), "export", "e2", "--mode", "full", "--target", str(a_file / "sub")],
    ):
        proc = cli(*argv)
        assert proc.returncode == ExitCode.BAD_INPUT, (argv, proc.stderr)
        assert f"{a_file} is a file, not a folder" in one_line(proc), (argv, proc.stderr)
    proc = cli("-l", str(lake), "export", "e3", "--mode", "full", "--target", str(lake / "copy"))
    assert proc.returncode == ExitCode.BAD_INPUT and "is inside the lakehouse" in one_line(proc), (
        proc.stderr
    )
    assert listing(lake) == before
    assert a_file.read_text() == "mine\n"
