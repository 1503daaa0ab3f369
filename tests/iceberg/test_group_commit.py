"""Group commit in ``LakecoreCatalog`` (``lakecore.lakehouse.group_commit``): the changes that
arrive together share a lakehouse version, each judged on what its batch built before it, and
none of them fails another.

Batches are made deterministic with ``lakecore.group-commit.max-wait-ms``: the leader waits
until ``max-batch`` changes are queued (or the wait ends), so the changes of a test that starts
them together are one batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table.update import (
    AssertCreate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetPropertiesUpdate,
)

from lakecore.core import background_hint
from lakecore.core.storage import Storage
from lakecore.core.versions import read_hint
from lakecore.core.view import clear_definition_cache
from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.commits import TableCommits
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.group_commit import BATCH_ATTEMPTS
from tests.conftest import S3TestServer
from tests.iceberg.conftest import RETRY_PROPERTIES, SCHEMA, local_lake, rows, s3_lake

WRONG_UUID = "00000000-0000-0000-0000-000000000000"


def batching(uri: str, size: int, wait_ms: int = 2000) -> LakecoreCatalog:
    """A catalog whose batches hold ``size`` changes: its leader waits for that many."""
    return LakecoreCatalog(
        "batching",
        uri=uri,
        **{
            "lakecore.group-commit.max-batch": str(size),
            "lakecore.group-commit.max-wait-ms": str(wait_ms),
        },
    )


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads of their own at once; their results, or the exceptions they
    raised, in order."""
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except Exception as exc:  # the test looks at it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def set_property(catalog: LakecoreCatalog, table: str, value: str, **kw: Any) -> Callable[[], Any]:
    requirements = kw.get("requirements", ())
    return lambda: catalog.commit_changes(
        ("ns", table), tuple(requirements), (SetPropertiesUpdate(updates={"k": value}),)
    )


@pytest.fixture
def lake_with_tables(tmp_path: Path) -> tuple[str, LakecoreCatalog]:
    lake = local_lake(tmp_path)
    setup = lake.catalog()
    setup.create_namespace("ns")
    for name in ("a", "b", "c"):
        setup.create_table(f"ns.{name}", SCHEMA, properties=RETRY_PROPERTIES)
    return lake.uri, setup


def version(uri: str) -> int:
    return Lakehouse.open(uri).version


def test_changes_that_arrive_together_share_one_version(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, setup = lake_with_tables
    catalog = batching(uri, 3)
    before = version(uri)
    results = together(*(set_property(catalog, t, "1") for t in ("a", "b", "c")))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert version(uri) == before + 1
    for t in ("a", "b", "c"):
        assert setup.load_table(f"ns.{t}").properties["k"] == "1"
    assert catalog.commit_stats.batches == 1 and catalog.commit_stats.units_committed == 3


def test_a_change_whose_requirement_fails_is_refused_alone(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, setup = lake_with_tables
    catalog = batching(uri, 3)
    before = version(uri)
    results = together(
        set_property(catalog, "a", "kept"),
        set_property(catalog, "b", "refused", requirements=[AssertTableUUID(uuid=WRONG_UUID)]),
        set_property(catalog, "c", "kept"),
    )
    assert isinstance(results[1], CommitFailedException)
    assert not isinstance(results[0], Exception) and not isinstance(results[2], Exception)
    assert version(uri) == before + 1
    assert "k" not in setup.load_table("ns.b").properties
    assert setup.load_table("ns.a").properties["k"] == setup.load_table("ns.c").properties["k"]


def test_each_change_is_judged_on_what_its_batch_built_before_it(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    """Two appends to one table in one batch, both based on its empty main branch: the first
    lands, the second fails its requirement against the first (as it would one version later),
    and pyiceberg's retry of it lands next."""
    uri, setup = lake_with_tables
    catalog = batching(uri, 2, wait_ms=500)  # pyiceberg's retry is a batch of one: no long wait
    first, second = catalog.load_table("ns.a"), catalog.load_table("ns.a")
    results = together(
        lambda: first.append(rows(range(0, 2), "first")),
        lambda: second.append(rows(range(2, 4), "second")),
    )
    assert not [r for r in results if isinstance(r, Exception)], results
    table = setup.load_table("ns.a")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]
    assert len(table.metadata.snapshots) == 2
    assert catalog.commit_stats.units_refused >= 1  # the second, before pyiceberg retried it


def test_a_multi_table_transaction_is_all_or_nothing_within_a_batch(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, setup = lake_with_tables
    catalog = batching(uri, 2)
    update = (SetPropertiesUpdate(updates={"k": "tx"}),)
    results = together(
        lambda: catalog.commit_tables(
            [
                (("ns", "a"), (), update),
                (("ns", "b"), (AssertTableUUID(uuid=WRONG_UUID),), update),
            ]
        ),
        set_property(catalog, "c", "alone"),
    )
    assert isinstance(results[0], CommitFailedException)
    assert "k" not in setup.load_table("ns.a").properties  # nothing of the transaction
    assert "k" not in setup.load_table("ns.b").properties
    assert setup.load_table("ns.c").properties["k"] == "alone"


def test_a_create_and_a_commit_to_it_in_one_batch(tmp_path: Path) -> None:
    """A staged create and an append to another table, and a create and a drop: each sees the
    other's effect in the batch's order."""
    lake = local_lake(tmp_path)
    setup = lake.catalog()
    setup.create_namespace("ns")
    setup.create_table("ns.existing", SCHEMA)
    catalog = batching(lake.uri, 2)
    staged = catalog.create_table_transaction("ns.new", SCHEMA)
    creates = (("ns", "new"), (AssertCreate(),), tuple(staged._updates))
    results = together(
        lambda: catalog.commit_tables([creates]),
        lambda: catalog.drop_table("ns.existing"),
    )
    assert not [r for r in results if isinstance(r, Exception)], results
    assert setup.table_exists("ns.new") and not setup.table_exists("ns.existing")


def test_a_batch_another_writer_beat_is_staged_again(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    """Another process commits to one of the batch's tables while the batch writes its files:
    the whole batch is staged again on the new version. The change without requirements lands
    on top of the other writer's; the one whose requirement no longer holds is refused; the
    change to a table nobody else touched lands as it was."""
    uri, setup = lake_with_tables
    other = LakecoreCatalog("other", uri=uri)
    main_a = setup.load_table("ns.a").metadata.current_snapshot_id

    class Beaten(LakecoreCatalog):
        raced = False

        def _write_new_metadata(self, metadata: Any, io: Any, metadata_path: str) -> None:
            super()._write_new_metadata(metadata, io, metadata_path)
            if not Beaten.raced:
                Beaten.raced = True
                other.load_table("ns.a").append(rows(range(9, 10), "other"))
                other.commit_changes(("ns", "b"), (), (SetPropertiesUpdate(updates={"o": "1"}),))

    catalog = Beaten(
        "beaten",
        uri=uri,
        **{"lakecore.group-commit.max-batch": "3", "lakecore.group-commit.max-wait-ms": "2000"},
    )
    results = together(
        # Requires main of a as it was: the other writer's append breaks that.
        set_property(
            catalog,
            "a",
            "mine",
            requirements=[AssertRefSnapshotId(ref="main", snapshot_id=main_a)],
        ),
        set_property(catalog, "b", "mine"),
        set_property(catalog, "c", "mine"),
    )
    assert isinstance(results[0], CommitFailedException)
    assert not isinstance(results[1], Exception) and not isinstance(results[2], Exception)
    assert catalog.commit_stats.restagings == 1
    b = setup.load_table("ns.b").properties
    assert b["k"] == "mine" and b["o"] == "1"  # neither writer's change lost
    assert setup.load_table("ns.c").properties["k"] == "mine"
    assert [r["id"] for r in setup.load_table("ns.a").scan().to_arrow().to_pylist()] == [9]


def test_a_batch_that_keeps_losing_is_refused_after_its_attempts(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, setup = lake_with_tables
    other = LakecoreCatalog("other", uri=uri)
    races = [0]

    class Losing(LakecoreCatalog):
        def _write_new_metadata(self, metadata: Any, io: Any, metadata_path: str) -> None:
            super()._write_new_metadata(metadata, io, metadata_path)
            races[0] += 1
            other.commit_changes(
                ("ns", "a"), (), (SetPropertiesUpdate(updates={"o": str(races[0])}),)
            )

    catalog = Losing("losing", uri=uri)
    with pytest.raises(CommitFailedException):
        set_property(catalog, "a", "mine")()
    assert races[0] == BATCH_ATTEMPTS
    assert setup.load_table("ns.a").properties["o"] == str(BATCH_ATTEMPTS)


def test_a_change_refused_on_an_older_version_is_judged_again_on_the_latest(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    """A batch stands on the version this process knows while its check runs beside it. A
    change that another server's commit made valid (its client saw that commit) fails its
    requirement on the known version: it is judged again on the latest, and lands."""
    uri, setup = lake_with_tables
    catalog = batching(uri, 1, wait_ms=0)
    set_property(catalog, "b", "known")()  # the catalog now knows the latest version
    other = LakecoreCatalog("other", uri=uri)
    other.load_table("ns.a").append(rows(range(0, 1), "other"))
    seen = other.load_table("ns.a").metadata.current_snapshot_id
    assert seen is not None
    set_property(
        catalog, "a", "mine", requirements=[AssertRefSnapshotId(ref="main", snapshot_id=seen)]
    )()
    assert setup.load_table("ns.a").properties["k"] == "mine"
    assert catalog.commit_stats.units_refused == 0


def test_a_refusal_on_the_latest_version_is_answered_at_once(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    """When the check finds no newer version, a change whose requirement fails is answered
    with its own error, and nothing is committed for it."""
    uri, _ = lake_with_tables
    catalog = batching(uri, 1, wait_ms=0)
    set_property(catalog, "b", "known")()
    before = version(uri)
    with pytest.raises(CommitFailedException, match="UUID"):
        set_property(catalog, "a", "x", requirements=[AssertTableUUID(uuid=WRONG_UUID)])()
    assert version(uri) == before
    assert catalog.commit_stats.units_refused == 1 and catalog.commit_stats.restagings == 0


def test_a_change_reads_its_tables_files_before_it_joins_a_batch(
    lake_with_tables: tuple[str, LakecoreCatalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The definition and metadata of a table the server has not read lately are read in the
    caller's thread, beside other callers', not one after another in the committer's turn."""
    uri, _ = lake_with_tables
    catalog = batching(uri, 2, wait_ms=500)
    catalog.load_table("ns.c")  # the catalog knows the latest version; a and b are cold
    clear_definition_cache()
    staging = threading.local()
    reads_while_staging: list[str] = []
    storage = catalog.lakehouse.storage
    original_read = storage.read

    def read(path: str, *args: Any, **kw: Any) -> Any:
        if getattr(staging, "on", False):
            reads_while_staging.append(path)
        return original_read(path, *args, **kw)

    monkeypatch.setattr(storage, "read", read)
    new_input = PyArrowFileIO.new_input

    def counting_input(self: PyArrowFileIO, location: str) -> Any:
        if getattr(staging, "on", False):
            reads_while_staging.append(location)
        return new_input(self, location)

    monkeypatch.setattr(PyArrowFileIO, "new_input", counting_input)
    stage_one = TableCommits._stage_one

    def staged(self: TableCommits, *args: Any) -> Any:
        staging.on = True
        try:
            return stage_one(self, *args)
        finally:
            staging.on = False

    monkeypatch.setattr(TableCommits, "_stage_one", staged)
    results = together(set_property(catalog, "a", "1"), set_property(catalog, "b", "1"))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert reads_while_staging == []


def test_writers_that_come_back_share_the_next_batch(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    """Two writers committing in a loop: the leader waits (lingers) for the writer its last
    batch answered, so both share each batch instead of taking turns."""
    uri, _ = lake_with_tables
    catalog = LakecoreCatalog("lingering", uri=uri, **{"lakecore.group-commit.linger-ms": "2000"})
    rounds = 6

    def loop(table: str) -> None:
        for i in range(rounds):
            set_property(catalog, table, str(i))()

    results = together(lambda: loop("a"), lambda: loop("b"))
    assert not [r for r in results if isinstance(r, Exception)], results
    stats = catalog.commit_stats
    assert stats.units_committed == 2 * rounds
    assert stats.batches <= rounds + 1, stats  # taking turns: 2 * rounds
    assert stats.linger_misses <= 1  # at the end, a writer done with its loop does not return


def test_a_wait_in_vain_stops_the_lingering_for_a_while(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, _ = lake_with_tables
    catalog = LakecoreCatalog(
        "lingering",
        uri=uri,
        **{
            "lakecore.group-commit.max-batch": "2",
            "lakecore.group-commit.max-wait-ms": "300",
            "lakecore.group-commit.linger-ms": "200",
        },
    )
    together(set_property(catalog, "a", "1"), set_property(catalog, "b", "1"))  # one batch
    set_property(catalog, "a", "2")()  # waits for b as well, which does not come back
    set_property(catalog, "a", "3")()
    assert catalog.commit_stats.linger_misses == 1


def test_max_batch_one_commits_one_change_per_version(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, _ = lake_with_tables
    catalog = batching(uri, 1, wait_ms=0)
    before = version(uri)
    results = together(*(set_property(catalog, t, "1") for t in ("a", "b", "c")))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert version(uri) == before + 3


@pytest.mark.s3
def test_on_an_object_store_a_change_is_answered_before_its_hint_is_written(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint follows the root off the path: a held hint write delays no answer, and the
    hint names the new version once it is let through."""
    lake = s3_lake(s3_server)
    setup = lake.catalog()
    setup.create_namespace("ns")
    for name in ("a", "b"):
        setup.create_table(f"ns.{name}", SCHEMA)
    assert setup.settle()
    storage = Storage(lake.uri, lake.storage_options)
    before = Lakehouse.open(lake.uri, storage_options=lake.storage_options).version
    assert read_hint(storage) == before
    release = threading.Event()
    real_write = background_hint.write_hint

    def held_write(target: Any, version: int) -> bool:
        release.wait(30)
        return real_write(target, version)

    monkeypatch.setattr(background_hint, "write_hint", held_write)
    catalog = lake.catalog(**{"lakecore.group-commit.max-batch": "1"})
    for name in ("a", "b"):  # the second is answered too: the first hint write is held
        catalog.commit_changes(("ns", name), (), (SetPropertiesUpdate(updates={"k": "1"}),))
    assert Lakehouse.open(lake.uri, storage_options=lake.storage_options).version == before + 2
    assert read_hint(storage) == before  # both commits answered, neither hint written yet
    release.set()
    assert catalog.settle()
    assert read_hint(storage) == before + 2


def test_on_local_disk_the_hint_is_written_before_the_answer(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    """A local lakehouse is listed and checked right after a change (by its tools, by tests):
    its hint is written before the answer, as a Lakehouse writes it."""
    uri, _ = lake_with_tables
    catalog = batching(uri, 1, wait_ms=0)
    set_property(catalog, "a", "1")()
    assert read_hint(Storage(uri)) == version(uri)
    assert not [p for p in Path(uri).iterdir() if p.name.startswith(".lakecore-tmp")]


def test_a_commit_to_a_missing_table_fails_alone(
    lake_with_tables: tuple[str, LakecoreCatalog],
) -> None:
    uri, setup = lake_with_tables
    catalog = batching(uri, 2)
    results = together(set_property(catalog, "nope", "x"), set_property(catalog, "a", "x"))
    assert isinstance(results[0], NoSuchTableError)
    assert setup.load_table("ns.a").properties["k"] == "x"


@pytest.mark.parametrize("value", ["0", "4097", "1.5", "x"])
def test_bad_group_commit_properties_are_refused(tmp_path: Path, value: str) -> None:
    from pyiceberg.exceptions import ValidationError

    lake = local_lake(tmp_path)
    with pytest.raises(ValidationError, match="max-batch"):
        LakecoreCatalog("x", uri=lake.uri, **{"lakecore.group-commit.max-batch": value})


def test_many_writers_lose_nothing(lake_with_tables: tuple[str, LakecoreCatalog]) -> None:
    """16 writers, each appending to its own table while four share one, with pyiceberg's
    retries: every append lands once, in fewer versions than commits."""
    uri, setup = lake_with_tables
    catalog = LakecoreCatalog("many", uri=uri)
    for i in range(12):
        setup.create_table(f"ns.own{i}", SCHEMA)
    before = version(uri)

    def writer(table: str, start: int) -> Callable[[], None]:
        def run() -> None:
            for j in range(3):
                catalog.load_table(f"ns.{table}").append(
                    rows(range(start + j, start + j + 1), table)
                )

        return run

    calls = [writer(f"own{i}", 100 * i) for i in range(12)]
    calls += [writer("a", 10_000 + 10 * k) for k in range(4)]
    results = together(*calls)
    assert not [r for r in results if isinstance(r, Exception)], results
    for i in range(12):
        ids = setup.load_table(f"ns.own{i}").scan().to_arrow().column("id").to_pylist()
        assert sorted(ids) == [100 * i + j for j in range(3)]
    shared = setup.load_table("ns.a").scan().to_arrow().column("id").to_pylist()
    assert sorted(shared) == sorted(10_000 + 10 * k + j for k in range(4) for j in range(3))
    assert version(uri) - before < 48, "no commit shared a version"
