"""The gc job on real local-mode Spark: what it deletes, what it never deletes, and when it refuses.

Every lakehouse here is a copy of one built per module (order 4, small nodes, a few dozen
commits, so there are many versions and node files). Files are aged with ``os.utime`` so that
only reachability, not the grace period, protects the live ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.gc_job import main as gc_main
from lakecore.cli import main as lakecore_main
from lakecore.core.locations import (
    hash_directories,
    new_lakehouse_def_path,
    new_namespace_def_path,
    new_node_file_path,
    new_table_def_path,
    new_temp_path,
    root_node_file_name,
)
from lakecore.core.storage import Storage
from lakecore.core.versions import list_root_versions
from lakecore.errors import CommitConflictError, LakecoreError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance import listing, reach, recheck, roots, tally
from lakecore.maintenance import settings as maintenance_settings
from lakecore.maintenance.gc import gc_in_process
from lakecore.maintenance.listing import kind_of
from tests.conftest import MotoClock

pytestmark = pytest.mark.spark

DAY_SECONDS = 86400
LAKE_DEF = dict(
    order=4,
    node_file_max_size_bytes=4096,
    namespace_name_max_size_bytes=16,
    table_name_max_size_bytes=16,
    file_name_max_size_bytes=100,
)
RunJob = Callable[..., tuple[int, dict[str, Any]]]


# -- building and inspecting lakehouses ---------------------------------------------------------


def build_lake(
    uri: str, storage_options: dict[str, Any] | None = None, commits: int = 30
) -> Lakehouse:
    """A lakehouse with ``commits`` + 1 versions: tables created, updated and dropped, so that
    older versions reach definition files the latest no longer does."""
    lh = Lakehouse.create(uri, storage_options=storage_options, **LAKE_DEF)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(commits):
        with lh.transaction() as tx:
            for j in range(5):
                tx.create_table("ns", f"t{i:02d}_{j}", properties={"i": str(i)})
            if i >= 4:
                tx.update_table("ns", f"t{i - 3:02d}_0", properties={"u": str(i)})
                tx.drop_table("ns", f"t{i - 4:02d}_1")
    return lh


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gc-template") / "lake"
    build_lake(str(path))
    return path


@pytest.fixture
def lake(template: Path, tmp_path: Path) -> Path:
    """A private copy of the template lakehouse, every file aged ten days."""
    path = tmp_path / "lake"
    shutil.copytree(template, path)
    age(path, 10 * DAY_SECONDS)
    return path


def age(root: Path, seconds: float, paths: list[Path] | None = None) -> None:
    stamp = time.time() - seconds
    for p in paths if paths is not None else [p for p in root.rglob("*") if p.is_file()]:
        os.utime(p, (stamp, stamp))


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def fresh_caches() -> None:
    """Forget every node and definition this process has seen, so that checks really read."""
    from lakecore import clear_caches

    clear_caches()


def resolved_maps(
    uri: str, storage_options: dict[str, Any] | None = None
) -> dict[int, dict[str, str]]:
    fresh_caches()
    lh = Lakehouse.open(uri, storage_options=storage_options)
    return {v: dict(lh.at_version(v).items()) for v in list_root_versions(lh.storage)}


def assert_every_version_valid(uri: str, storage_options: dict[str, Any] | None = None) -> None:
    fresh_caches()
    lh = Lakehouse.open(uri, storage_options=storage_options)
    for version in list_root_versions(lh.storage):
        result = check_version(lh.at_version(version), deep=True)
        assert result.ok, (version, [str(v) for v in result.violations][:5])


def plant(storage: Storage, path: str, data: bytes = b"orphan") -> str:
    storage.write(path, data)
    return path


def plant_orphans(storage: Storage) -> set[str]:
    """One orphan of every deletable kind."""
    return {
        plant(storage, new_node_file_path(), b"x" * 100),
        plant(storage, new_table_def_path("ns", "gone")),
        plant(storage, new_namespace_def_path("gone")),
        plant(storage, new_lakehouse_def_path()),
        plant(storage, new_temp_path("")),
        plant(storage, new_temp_path(hash_directories()[77])),
    }


def plant_foreign(storage: Storage) -> set[str]:
    node = new_node_file_path()
    lookalike = "0000/0000/0000/" + node.rsplit("/", 1)[1]  # a node name in the wrong hash dir
    if lookalike == node:
        lookalike = "0000/0000/0001/" + node.rsplit("/", 1)[1]
    return {
        plant(storage, "notes.txt"),
        plant(storage, "0101/0101/0101/README"),
        plant(storage, "0101/0101/0101/sub/deeper.arrow"),
        plant(storage, lookalike),
        plant(storage, "_lakehouse_def_not-a-uuid.binpb"),
    }


def gc_args(uri: str, *extra: str) -> list[str]:
    return ["--lakehouse", uri, "--parallelism", "4", *extra]


# -- tests ------------------------------------------------------------------------------------------


@pytest.fixture(params=["flat", "hash-directories"])
def listing_mode(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """How gc lists: a lakehouse this small gets one flat listing on the driver; with the flat
    listing turned off, executors list the 4,096 hash directories as a large one's are (a local
    one without a stat per file)."""
    if request.param == "hash-directories":
        conf = tmp_path / "conf"
        conf.mkdir()
        settings = json.loads(
            (maintenance_settings.CONF_DIR / "maintenance-local.json").read_text()
        )
        settings["gc_flat_listing_max_files"] = 0
        (conf / "maintenance-local.json").write_text(json.dumps(settings))
        monkeypatch.setattr(maintenance_settings, "CONF_DIR", conf)
    return str(request.param)


def test_gc_deletes_old_orphans_and_keeps_young_foreign_and_live_files(
    lake: Path, run_job: RunJob, listing_mode: str
) -> None:
    storage = Storage(str(lake))
    old = plant_orphans(storage)
    foreign = plant_foreign(storage)
    age(lake, 10 * DAY_SECONDS, [lake / p for p in old | foreign])
    young = {plant(storage, new_node_file_path()), plant(storage, new_table_def_path("ns", "new"))}
    age(lake, 3600, [lake / p for p in young])  # an hour old: well inside the 3-day grace
    maps = resolved_maps(storage.root_uri)
    before = files(lake)
    before_bytes = sum((lake / p).stat().st_size for p in before)
    assert all(kind_of(p) == "foreign" for p in foreign)

    code, report = run_job(gc_main, *gc_args(storage.root_uri, "--dry-run"))
    assert code == 0, report.get("error")
    assert report["details"]["listing"] == listing_mode
    assert report["dry_run"] and files(lake) == before
    assert set(report["samples"]["would_delete"]) == old
    assert report["counts"]["orphans_found"] == len(old | young)
    assert report["counts"]["skipped_too_young"] == len(young)
    assert report["counts"]["orphans_deleted"] == 0

    code, report = run_job(gc_main, *gc_args(storage.root_uri))
    assert code == 0, report.get("error")
    after = files(lake)
    assert after == before - old
    assert set(report["samples"]["deleted"]) == old
    counts = report["counts"]
    assert counts["orphans_deleted"] == len(old)
    assert counts["foreign_files"] == len(foreign)
    assert set(report["samples"]["foreign"]) == foreign
    assert counts["files_listed"] == len(before)
    assert counts["retained_versions"] == len(maps)
    assert report["details"]["retained_versions"] == sorted(maps)
    assert report["bytes"]["freed_bytes"] == sum(len(b) for b in [b"x" * 100] + [b"orphan"] * 5)
    # Without a stat per listed file, reached definitions have no size; node files take theirs
    # from the walk.
    unsized = counts.get("files_listed_unsized", 0)
    if listing_mode == "flat":
        assert unsized == 0 and report["bytes"]["listed_bytes"] == before_bytes
    else:
        # Unsized: what is in a hash directory and neither an orphan (statted) nor a node file.
        assert unsized == len(
            {
                p
                for p in before - old - young
                if "/" in p and kind_of(p) in ("table_def", "namespace_def", "foreign")
            }
        )
    assert set(report["durations_seconds"]) >= {
        "retained",
        "plan",
        "list-reach-anti-join",
        "delete",
    }
    assert resolved_maps(storage.root_uri) == maps
    assert_every_version_valid(storage.root_uri)

    # A second run finds nothing more to delete.
    code, report = run_job(gc_main, *gc_args(storage.root_uri))
    assert code == 0 and report["counts"]["orphans_deleted"] == 0 and files(lake) == after


def test_gc_names_a_reachable_file_that_is_missing_and_deletes_nothing_for_it(
    lake: Path, run_job: RunJob, listing_mode: str
) -> None:
    """A table definition the latest version reaches, deleted by hand: the join knows it only by
    its path's hash, and the report still names it."""
    storage = Storage(str(lake))
    latest = max(resolved_maps(storage.root_uri).items())[1]
    dangling = sorted(
        location for key, location in latest.items() if kind_of(location) == "table_def"
    )[0]
    (lake / dangling).unlink()
    old = plant_orphans(storage)
    age(lake, 10 * DAY_SECONDS, [lake / p for p in old])
    before = files(lake)

    code, report = run_job(gc_main, *gc_args(storage.root_uri, "--dry-run"))
    assert code == 0, report.get("error")
    assert report["details"]["listing"] == listing_mode
    assert report["counts"]["reachable_missing"] == 1
    assert report["samples"]["reachable_missing"] == [dangling]
    assert set(report["samples"]["would_delete"]) == old and files(lake) == before
    # Its own line in the summary (it was one count among thirty), naming the file and the next step.
    assert report["summary"][-1] == (
        f"1 file that retained versions reach is missing (e.g. {dangling}); gc deleted nothing because of it, but "
        f"the lakehouse is damaged: `lakecore -l {storage.root_uri} fsck --all --deep` names the versions"
    )
    assert "reachable (1 missing)" in report["summary"][0]


def test_a_file_whose_name_is_not_utf8_is_foreign_and_kept(
    lake: Path, run_job: RunJob, listing_mode: str
) -> None:
    """A local file system may hold names that are not UTF-8 (Python sees surrogate escapes,
    which Arrow refuses): gc lists them as foreign files, shown with their bytes as \\xNN, and
    deletes nothing because of them. Before, the listing task failed on them."""
    storage = Storage(str(lake))
    node_name = new_node_file_path().rsplit("/", 1)[1]
    strange = [
        b"0101/0101/0101/caf\xe9.txt",
        b"notes-\xff",
        ("0000/0000/0000/" + node_name[:-6]).encode() + b"\xff.arrow",
    ]
    for name in strange:
        (lake / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
        with open(os.path.join(os.fsencode(lake), name), "wb") as f:
            f.write(b"not ours")
    old = plant_orphans(storage)
    age(lake, 10 * DAY_SECONDS)
    before = files(lake)

    code, report = run_job(gc_main, *gc_args(storage.root_uri))
    assert code == 0, report.get("error")
    assert report["details"]["listing"] == listing_mode
    assert files(lake) == before - old
    shown = {name.decode("utf-8", "backslashreplace") for name in strange}
    assert set(report["samples"]["foreign"]) == shown
    assert report["counts"]["foreign_files"] == len(strange)


def test_full_list_writes_every_orphan_to_parquet_beside_the_report(
    lake: Path, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    storage = Storage(str(lake))
    old = plant_orphans(storage)
    age(lake, 10 * DAY_SECONDS, [lake / p for p in old])
    young = plant(storage, new_node_file_path())
    report_path = tmp_path / "gc.json"
    code = gc_main(
        [*gc_args(storage.root_uri, "--dry-run", "--full-list"), "--report", str(report_path)],
        spark=spark,
    )
    assert code == 0
    report = json.loads(report_path.read_text())
    dataset = report["details"]["orphans_dataset"]
    assert dataset == str(report_path) + ".orphans.parquet"
    rows = pq.read_table(dataset).to_pylist()
    assert {row["path"]: row["old_enough"] for row in rows} == {
        **{p: True for p in old},
        young: False,
    }
    assert set(rows[0]) == {"path", "size", "mtime_millis", "kind", "old_enough"}
    # Without --report there is nowhere to write it: refused as the command line is read.
    before = files(lake)
    assert gc_main(gc_args(storage.root_uri, "--full-list"), spark=spark) == 2
    assert (
        "--full-list writes beside the JSON report: give --report PATH too"
        in capsys.readouterr().err
    )
    assert files(lake) == before


def _interrupt_with_sigint(before: Callable[[], None] = lambda: None) -> Callable[..., Any]:
    """A stand-in for a unit of gc that does ``before``, then gets a real SIGINT (the job's own
    handler turns it into JobInterrupted, as a Ctrl-C would)."""
    import signal

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        before()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the handler raises in here
        raise AssertionError("no SIGINT arrived")

    return interrupted


def test_a_delete_interrupted_says_some_orphans_may_be_gone(
    lake: Path, run_job: RunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while executors delete: the line used to say only "nothing was committed ...;
    run the job again", and the report counted no deletes, while most orphans were gone."""
    import jobs.gc_job

    storage = Storage(str(lake))
    old = plant_orphans(storage)
    age(lake, 10 * DAY_SECONDS, [lake / p for p in old])
    first = sorted(old)[0]
    before = files(lake)
    monkeypatch.setattr(
        jobs.gc_job, "delete_frame", _interrupt_with_sigint(lambda: (lake / first).unlink())
    )
    code, report = run_job(gc_main, *gc_args(storage.root_uri))
    assert code == 130, report
    assert report["status"] == "interrupted" and report["details"]["interrupted_stage"] == "delete"
    assert report["error"] == (
        f"interrupted by SIGINT during delete: some of the {len(old)} old orphans may be deleted already (orphans "
        "only: no file a retained version reaches); run gc again to finish, or with --dry-run to see what is left; "
        "nothing was committed, nothing is half-committed"
    )
    assert files(lake) == before - {first}


def test_a_listing_interrupted_says_to_run_again(
    lake: Path, run_job: RunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jobs.gc_job

    storage = Storage(str(lake))
    before = files(lake)
    monkeypatch.setattr(jobs.gc_job, "driver_reach", _interrupt_with_sigint())
    code, report = run_job(gc_main, *gc_args(storage.root_uri))
    assert code == 130, report
    assert report["details"]["interrupted_stage"] == "list-reach-anti-join"
    assert report["error"] == (
        "interrupted by SIGINT during list-reach-anti-join; nothing was committed, nothing is "
        "half-committed; run the job again"
    )
    assert files(lake) == before


def _judge(
    storage: Storage, spark: Any, listed: list[str], reached: list[tuple[str, int]]
) -> dict[str, Any]:
    """jobs.gc_job.judge_listing over a listing without sizes or times (a local one), by path."""
    from jobs.frames import driver_rows
    from jobs.gc_job import LISTING, judge_listing
    from jobs.persisted import Persisted
    from jobs.spark_units import REACH

    listing_rows = driver_rows(spark, [(p, None, None, kind_of(p)) for p in listed], LISTING)
    reach_rows = driver_rows(spark, reached, REACH)
    cutoff = int((time.time() - DAY_SECONDS) * 1000)
    with Persisted() as persist:
        return {
            row["path"]: row
            for row in judge_listing(storage, listing_rows, reach_rows, cutoff, persist).collect()
        }


def test_judge_stats_the_orphans_a_local_listing_did_not(lake: Path, spark: Any) -> None:
    storage = Storage(str(lake))
    old = plant(storage, new_node_file_path(), b"old orphan")
    age(lake, 10 * DAY_SECONDS, [lake / old])
    young = plant(storage, new_table_def_path("ns", "young"), b"young")
    gone = new_node_file_path()  # listed, then deleted before its stat: nothing to judge
    node, definition = new_node_file_path(), new_table_def_path("ns", "live")
    rows = _judge(
        storage,
        spark,
        [old, young, gone, node, definition],
        [(node, 77), (node, -1), (definition, -1)],
    )
    assert set(rows) == {old, young, node, definition}
    assert not any(row["error"] for row in rows.values())
    assert rows[old]["orphan"] and rows[old]["old"] and rows[old]["size"] == len(b"old orphan")
    assert rows[young]["orphan"] and not rows[young]["old"] and rows[young]["size"] == len(b"young")
    assert rows[node]["reached"] and not rows[node]["orphan"] and rows[node]["size"] == 77
    assert rows[definition]["reached"] and rows[definition]["size"] is None


def test_an_orphan_that_cannot_be_statted_is_an_error_not_a_keeper(lake: Path, spark: Any) -> None:
    # The stat runs on an executor: the fault plan travels with the pickled storage.
    from tests.reliability.faulty_storage import Fault, FaultyStorage

    orphan = plant(Storage(str(lake)), new_node_file_path())
    age(lake, 10 * DAY_SECONDS, [lake / orphan])
    rows = _judge(FaultyStorage(str(lake), faults=[Fault("stat", 1)]), spark, [orphan], [])
    assert len(rows) == 1
    ((path, row),) = rows.items()
    assert (
        row["error"]
        and not row["orphan"]
        and path.startswith(f"statting {Storage(str(lake)).uri(orphan)}")
    )


@pytest.mark.parametrize("damage", ["missing-node", "truncated-node", "corrupt-root"])
def test_gc_fails_closed_when_a_retained_version_cannot_be_read(
    lake: Path, run_job: RunJob, damage: str
) -> None:
    """Damaged bytes, and a node file missing under a root that is still there, are exit 6,
    naming the damaged versions and the next step (a missing node was exit 4, "may be a race",
    which a scheduler retried for ever; version compaction deletes a root before its files, so
    with the root there it is no race with it)."""
    storage = Storage(str(lake))
    orphans = plant_orphans(storage)
    age(lake, 10 * DAY_SECONDS, [lake / p for p in orphans])
    if damage in ("missing-node", "truncated-node"):
        # A leaf of an old version: only an executor's subtree walk meets it.
        fresh_caches()
        view = Lakehouse.open(str(lake)).at_version(12)
        node = view.store.load(view.root.children[0])
        while node.children:
            victim = node.children[-1]
            node = view.store.load(victim)
        if damage == "missing-node":
            (lake / victim).unlink()
        else:
            (lake / victim).write_bytes((lake / victim).read_bytes()[:100])
    else:
        victim = "_00100000000000000000000000000000.arrow"  # version 4
        (lake / victim).write_bytes(b"not an arrow file")
    before = files(lake)
    code, report = run_job(gc_main, *gc_args(storage.root_uri, "--older-than", "1d"))
    assert code == 6, report
    assert report["status"] == "failed"
    assert victim in report["error"] and "nothing was deleted" in report["error"]
    if damage in (
        "missing-node",
        "truncated-node",
    ):  # the leaf is shared up to the latest version: roll forward
        assert "the latest version 31 is damaged" in report["error"], report["error"]
        assert "repair rollback --to-last-valid" in report["error"]
    elif damage == "corrupt-root":  # an old root, below a whole latest version
        assert "repair drop-damaged" in report["error"], report["error"]
    assert files(lake) == before


def test_unsafe_or_bad_options_exit_2(
    lake: Path,
    run_job: RunJob,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    uri = str(lake)
    before = files(lake)
    # Every one is refused as the command line is read: one line on stderr and no report, which
    # spark-submit.sh's check gives before any JVM (the grace period's safety too: it needs
    # only the options and the local settings file).
    cases = [
        (["--older-than", "30m"], "--older-than 30m is shorter than 1h"),
        (["--older-than", "0s"], "--older-than 0s is shorter than 1h"),
        (["--older-than", "soon"], "argument --older-than:"),
        (["--now", "yesterday"], "argument --now:"),
        (
            ["--now", str(int(time.time() * 1000) + 3 * DAY_SECONDS * 1000)],
            "ahead of this machine's clock",
        ),
        (["--older-than=-5m", "--i-understand-grace-risk"], "argument --older-than:"),
    ]
    for extra, words in cases:
        capsys.readouterr()
        code, report = run_job(gc_main, *gc_args(uri, *extra))
        err = capsys.readouterr().err
        assert code == 2, (extra, report, err)
        assert report == {} and words in err, (extra, err)
    # Under the configured commit timeout (here two hours) is unsafe too.
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "maintenance-slow.json").write_text(json.dumps({"commit_timeout_seconds": 7200}))
    monkeypatch.setattr(maintenance_settings, "CONF_DIR", conf)
    capsys.readouterr()
    code, report = run_job(gc_main, *gc_args(uri, "--env", "slow", "--older-than", "90m"))
    err = capsys.readouterr().err
    assert code == 2 and report == {}
    assert (
        "--older-than 90m is shorter than 2h (one hour, or the commit timeout of 2h if longer)"
        in err
    ), err
    monkeypatch.undo()
    # ISO times are accepted; with the override a short grace runs.
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    code, report = run_job(
        gc_main,
        *gc_args(
            uri, "--now", iso, "--older-than", "10m", "--i-understand-grace-risk", "--dry-run"
        ),
    )
    assert code == 0, report.get("error")
    assert files(lake) == before


def test_gc_while_commits_land_deletes_nothing_live(lake: Path, run_job: RunJob) -> None:
    uri = Storage(str(lake)).root_uri
    storage = Storage(uri)
    orphans = plant_orphans(storage)
    stop = threading.Event()
    committed: list[int] = []
    failures: list[str] = []

    def writer(tag: str) -> None:
        lh = Lakehouse.open(uri)
        i = 0
        while not stop.is_set():
            try:
                lh.refresh()
                with lh.transaction() as tx:
                    tx.create_table("ns", f"{tag}{i:03d}", properties={"w": tag})
                    tx.update_table("ns", "t20_0", properties={"last": f"{tag}{i}"})
                committed.append(lh.version)
            except CommitConflictError:
                pass
            except LakecoreError as exc:  # with grace 0 a temp file may vanish under a write
                failures.append(exc.one_line())
            i += 1
            time.sleep(0.2)  # a steady trickle, and the GIL left to the job's driver

    threads = [threading.Thread(target=writer, args=(tag,), daemon=True) for tag in ("a", "b")]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        code, report = run_job(
            gc_main, *gc_args(uri, "--older-than", "0s", "--i-understand-grace-risk")
        )
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert code == 0, report.get("error")
    assert committed, failures
    assert orphans <= set(report["samples"]["deleted"])
    assert not orphans & files(lake)
    assert report["details"]["versions_rechecked"], "no commit landed during gc"
    assert len(failures) <= 2, failures
    assert_every_version_valid(uri)


@pytest.mark.parametrize(
    ("key", "spark_default", "chosen"),
    [
        ("spark.sql.shuffle.partitions", "200", "3"),
        ("spark.sql.inMemoryColumnarStorage.compressed", "true", "false"),
    ],
)
def test_a_borrowed_session_gets_its_settings_back(
    lake: Path, run_job: RunJob, spark: Any, key: str, spark_default: str, chosen: str
) -> None:
    """Spark's defaults of 200 shuffle partitions and compressed caches are nobody's choice:
    the job sizes its joins from the session's cores instead (200 partitions meant 200 tasks
    for every query over the cached join) and keeps its short-lived caches uncompressed, and
    gives a caller's session back as it came."""
    detail = {
        "spark.sql.shuffle.partitions": "shuffle_partitions",
        "spark.sql.inMemoryColumnarStorage.compressed": "cache_compressed",
    }[key]
    before = spark.conf.get(key)
    spark.conf.set(key, spark_default)
    try:
        code, data = run_job(gc_main, *gc_args(str(lake), "--dry-run", "--older-than", "1d"))
        assert code == 0, data
        assert data["details"][detail] == (
            spark.sparkContext.defaultParallelism if detail == "shuffle_partitions" else False
        )
        assert spark.conf.get(key) == spark_default
        # A value somebody chose is left alone.
        spark.conf.set(key, chosen)
        code, data = run_job(gc_main, *gc_args(str(lake), "--dry-run", "--older-than", "1d"))
        assert code == 0 and detail not in data["details"], data
        assert spark.conf.get(key) == chosen
    finally:
        spark.conf.set(key, before)


def test_in_process_gc_matches_the_job(lake: Path, run_job: RunJob, tmp_path: Path) -> None:
    """gc_in_process (``lakecore gc``) and the job return one result type, which one renderer
    turns into the report: both report the same, and a dry run the same keys as a run."""
    storage = Storage(str(lake))
    orphans = plant_orphans(storage)
    foreign = plant_foreign(storage)
    now = int(time.time() * 1000)
    result = gc_in_process(storage, now_millis=now, grace_millis=0, dry_run=True)
    assert {f.path for f in result.would_delete} == orphans
    assert set(result.seen.foreign) == foreign
    flags = ("--older-than", "0s", "--i-understand-grace-risk", "--now", str(now))
    code, dry = run_job(gc_main, *gc_args(storage.root_uri, *flags, "--dry-run"))
    assert code == 0, dry.get("error")
    assert set(dry["samples"]["would_delete"]) == orphans
    assert dry["counts"]["reachable_files"] == result.seen.reachable
    assert (
        dry["counts"]["orphans_to_delete"] == len(orphans) and dry["counts"]["orphans_deleted"] == 0
    )

    cli_report = tmp_path / "lakecore-gc.json"
    argv = ["-l", storage.root_uri, "gc", *flags, "--dry-run", "--report", str(cli_report)]
    assert lakecore_main(argv) == 0
    ours = json.loads(cli_report.read_text())
    assert ours["status"] == dry["status"] and ours["summary"] == dry["summary"]
    # The job's local listing reads no size of a reached definition (it counts them apart), and
    # its subtree tasks follow its parallelism; everything else is the same.
    apart = {
        "files_listed_unsized",
        "listed_bytes",
        "subtree_tasks",
        "subtree_tasks_shared_by_versions",
    }
    for section in ("counts", "bytes", "samples"):
        assert {k: v for k, v in ours[section].items() if k not in apart} == {
            k: v for k, v in dry[section].items() if k not in apart
        }, section
    spark_only = {"shuffle_partitions", "cache_compressed"}
    assert set(ours["details"]) == set(dry["details"]) - spark_only

    code, done = run_job(gc_main, *gc_args(storage.root_uri, *flags))
    assert code == 0, done.get("error")
    for section in ("counts", "bytes", "samples", "details"):
        assert set(done[section]) == set(dry[section]), section
    assert done["counts"]["orphans_deleted"] == len(orphans) and not orphans & files(lake)


def test_recheck_rescues_the_files_of_a_version_committed_after_the_listing(lake: Path) -> None:
    """The units, in one process: a version whose root lands after the top-level listing has
    its new files listed as orphans; the re-check walks it and takes them out again."""
    storage = Storage(str(lake))
    before = files(lake)
    lh = Lakehouse.open(str(lake))
    with lh.transaction() as tx:
        for i in range(30):  # enough to overflow the root's buffer: new nodes are written
            tx.create_table("ns", f"late{i:02d}", properties={"k": "v"})
    late_root = root_node_file_name(lh.version)
    written = files(lake) - before - {late_root}
    assert any(kind_of(p) == "node" for p in written) and any(
        kind_of(p) == "table_def" for p in written
    )
    top = [f for f in listing.list_top(storage) if f.path != late_root]  # listed before the commit
    retained = roots.read_retained(storage, top)
    listed = top + list(listing.list_directories(storage, hash_directories(), threads=4))
    plan = reach.plan_reach(storage, retained.roots.values(), 4)
    reached = list(plan.driver_paths.items()) + list(reach.run_reach_tasks(storage, plan.tasks))
    seen = tally.tally_in_memory(listed, reached)
    orphans = {f.path for f in seen.orphans}
    assert written <= orphans
    reachable = {p for p, _ in reached}
    asked: list[set[str]] = []

    def known(paths: set[str]) -> set[str]:
        asked.append(paths)
        return paths & reachable

    rechecked = recheck.reach_new_versions(
        storage, retained.latest, known, covered=plan.covered, unreached=orphans
    )
    assert rechecked.versions == [lh.version]
    assert written <= rechecked.paths
    assert all(not (paths & orphans) for paths in asked)  # orphans are descended without asking


@pytest.mark.s3
def test_gc_on_s3_never_touches_a_neighbouring_lakehouse(
    s3_server: Any, run_job: RunJob, listing_mode: str
) -> None:
    # "hash-directories" on an object store: each task lists its directories and walks its
    # subtrees side by side (jobs.gc_job._listing_and_reach).
    base = f"s3://{s3_server.bucket}/{uuid.uuid4()}"
    options = s3_server.storage_options()
    lake, lake2 = f"{base}/lake", f"{base}/lake2"
    build_lake(lake, options, commits=12)
    build_lake(lake2, options, commits=6)
    storage, storage2 = Storage(lake, options), Storage(lake2, options)
    orphans = plant_orphans(storage)
    orphans2 = plant_orphans(storage2)
    files2 = {f.path for f in storage2.list("")}
    assert orphans2 <= files2
    own = {f.path for f in storage.list("")}
    maps = resolved_maps(lake, options)
    # Executors build their own clients: hand them the endpoint and the (dummy) credentials.
    s3_options = [
        "--storage-option",
        f"endpoint_url={s3_server.endpoint}",
        "--storage-option",
        f"key={os.environ['AWS_ACCESS_KEY_ID']}",
        "--storage-option",
        f"secret={os.environ['AWS_SECRET_ACCESS_KEY']}",
    ]
    code, report = run_job(
        gc_main, *gc_args(lake, *s3_options, "--older-than", "0s", "--i-understand-grace-risk")
    )
    assert code == 0, report.get("error")
    assert report["details"]["listing"] == (
        "flat" if listing_mode == "flat" else "hash-directories, walked alongside"
    )
    assert report["counts"]["files_listed"] == len(own)
    assert set(report["samples"]["deleted"]) == orphans
    assert {f.path for f in storage.list("")} == own - orphans
    assert {f.path for f in storage2.list("")} == files2  # the neighbour, orphans and all
    assert resolved_maps(lake, options) == maps
    assert_every_version_valid(lake, options)
    assert_every_version_valid(lake2, options)


@pytest.mark.s3
def test_gc_on_s3_ages_files_by_the_store_clock_when_this_machine_runs_ahead(
    s3_server: Any, run_job: RunJob, moto_clock: MotoClock
) -> None:
    # This machine's clock 3 h ahead of the store's: by its own clock a file written a moment
    # ago would be 3 h old, past a grace period of 1 h, and gc would delete a commit in flight.
    lake = f"s3://{s3_server.bucket}/{uuid.uuid4()}/lake"
    options = s3_server.storage_options()
    storage = Storage(lake, options)
    moto_clock.behind_seconds = 5 * 3600
    build_lake(lake, options, commits=4)
    old = plant_orphans(storage)  # 2 h old by the store's clock once it runs 3 h behind
    moto_clock.behind_seconds = 3 * 3600
    young = plant_orphans(storage)  # just written, by either clock that dates files
    maps = resolved_maps(lake, options)
    started = time.monotonic()
    code, report = run_job(gc_main, *gc_args(lake, *s3_server.job_args(), "--older-than", "1h"))
    run_millis = (time.monotonic() - started) * 1000
    assert code == 0, report.get("error")
    assert set(report["samples"]["deleted"]) == old
    assert set(report["samples"]["too_young"]) == young
    listed = {f.path for f in storage.list("")}
    assert young <= listed and not old & listed
    clocks = report["details"]["clocks"]
    # This machine's clock is read, then the store's Date (whole seconds) comes back: the skew
    # is 3 h less the request's time, plus at most the Date's lost fraction of a second. The
    # request's time is bounded by the run's (a CI run under load saw 2.7 s).
    short_of_three_hours = 3 * 3600 * 1000 - clocks["clock_skew_millis"]
    assert -1000 <= short_of_three_hours <= run_millis, (short_of_three_hours, run_millis)
    assert report["details"]["now_millis"] == clocks["store_clock_millis"]
    # 3 h less the Date's lost fraction of a second: "2h 59m" or "3h 00m".
    assert any(
        re.match(r"this machine's clock is (2h 59m|3h 00m) ahead of the store's", line)
        for line in report["summary"]
    ), report["summary"]
    assert resolved_maps(lake, options) == maps
    # A --now by this machine's clock is 3 h ahead of the clock that dates the files: refused.
    now = str(int(time.time() * 1000))
    code, report = run_job(
        gc_main, *gc_args(lake, *s3_server.job_args(), "--older-than", "1h", "--now", now)
    )
    assert code == 2 and "ahead of the store's clock" in report["error"]
    assert {f.path for f in storage.list("")} == listed


@pytest.mark.s3
@pytest.mark.parametrize("listing_mode", ["hash-directories"], indirect=True)
def test_on_s3_the_listing_and_walk_rows_are_cached_whole_before_the_join_reads_them(
    s3_server: Any, run_job: RunJob, listing_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The join's two sides are stages that both scan the listed-or-reached rows and may run at
    # once. On a cluster a task of the second side on another executor, finding no cached
    # block, lists and walks the same share again (1.3-1.4x the requests on a standalone cluster).
    # So the rows must be in the cache, every partition, before the join is planned.
    import jobs.gc_job

    lake = f"s3://{s3_server.bucket}/{uuid.uuid4()}/lake"
    options = s3_server.storage_options()
    build_lake(lake, options, commits=6)
    real_judge = jobs.gc_job.judge_listing
    cached_at_join: list[list[tuple[int, int]]] = []

    def judge_after_looking(
        storage: Storage, listing: Any, reach: Any, cutoff: int, persist: Any
    ) -> Any:
        infos = listing.sparkSession.sparkContext._jsc.sc().getRDDStorageInfo()
        cached_at_join.append(
            [(int(i.numCachedPartitions()), int(i.numPartitions())) for i in infos]
        )
        return real_judge(storage, listing, reach, cutoff, persist)

    monkeypatch.setattr(jobs.gc_job, "judge_listing", judge_after_looking)
    code, report = run_job(gc_main, *gc_args(lake, *s3_server.job_args(), "--dry-run"))
    assert code == 0, report.get("error")
    assert report["details"]["listing"] == "hash-directories, walked alongside"
    assert len(cached_at_join) == 1
    assert any(cached == partitions > 0 for cached, partitions in cached_at_join[0]), cached_at_join


def test_gc_on_s3_fails_closed_when_a_walk_meets_a_damaged_node(
    s3_server: Any, run_job: RunJob, listing_mode: str
) -> None:
    # The walk's error travels beside the listing's rows (hash-directories on an object store)
    # and still stops every delete.
    lake = f"s3://{s3_server.bucket}/{uuid.uuid4()}/lake"
    options = s3_server.storage_options()
    build_lake(lake, options, commits=12)
    storage = Storage(lake, options)
    plant_orphans(storage)
    fresh_caches()
    view = Lakehouse.open(lake, storage_options=options)
    node = view.store.load(view.root.children[0])
    while node.children:
        victim = node.children[-1]
        node = view.store.load(victim)
    storage.write(victim, storage.read(victim)[:100])
    before = {f.path for f in storage.list("")}
    code, report = run_job(
        gc_main,
        *gc_args(lake, *s3_server.job_args(), "--older-than", "0s", "--i-understand-grace-risk"),
    )
    assert code == 6, report
    assert victim in report["error"] and "nothing was deleted" in report["error"]
    assert {f.path for f in storage.list("")} == before
