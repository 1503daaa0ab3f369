"""Damaged versions and the deleting jobs: exit 6 with the next step, expiry of a version whose
tree cannot be read (its root file only), and ``repair drop-damaged``.

The lakehouse of the new-user trial: a node file reached only by the newest few versions is
truncated, and ``repair rollback --to-last-valid`` rolls forward past them."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.tree import SHARED_CACHE
from lakecore.core.versions import list_root_versions
from lakecore.core.view import clear_definition_cache
from lakecore.errors import ExitCode, LakecoreError, StorageError
from lakecore.lakehouse import Lakehouse, repair
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance.expire import expire_in_process
from lakecore.maintenance.gc import gc_in_process
from lakecore.maintenance.tree_files import reachable_from_root
from tests.reliability.faulty_storage import tree_digest

FAR_FUTURE = 10**12  # added to now: every version is past its age


@dataclass
class Damaged:
    path: Path
    latest: int  # before the repair
    lost: str  # the truncated node file
    reached_by: list[int]  # the versions whose tree reaches it

    @property
    def storage(self) -> Storage:
        return Storage(str(self.path))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "lake"
    lh = Lakehouse.create(
        str(path),
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("a")
    for i in range(40):
        with lh.transaction() as tx:
            tx.create_table("a", f"t{i:03d}", properties={"i": str(i)})
    return path


def _damage(template: Path, tmp_path: Path, how: str = "truncated") -> Damaged:
    """Copy the template and truncate (or delete) a node file that only the newest few versions reach."""
    path = tmp_path / "lake"
    shutil.copytree(template, path)
    SHARED_CACHE.clear()
    lh = Lakehouse.open(str(path))
    latest = lh.version
    reach = {
        v: reachable_from_root(lh.store, lh.at_version(v).root).nodes
        for v in range(latest - 8, latest + 1)
    }

    def newest_without(node: str) -> int:
        return max((v for v in reach if node not in reach[v]), default=-1)

    lost = min((n for n in sorted(reach[latest]) if newest_without(n) >= 0), key=newest_without)
    reached_by = [v for v in reach if lost in reach[v]]
    assert reached_by == list(range(newest_without(lost) + 1, latest + 1)) and len(reached_by) >= 2
    if how == "deleted":
        (path / lost).unlink()
    else:
        (path / lost).write_bytes((path / lost).read_bytes()[:100])  # `truncate -s 100`
    SHARED_CACHE.clear()
    return Damaged(path, latest, lost, reached_by)


@pytest.fixture
def damaged(template: Path, tmp_path: Path) -> Damaged:
    return _damage(template, tmp_path)


@pytest.fixture
def repaired(damaged: Damaged) -> Damaged:
    outcome = repair.rollback(damaged.storage, to_last_valid=True, apply=True)
    assert outcome.new_version == damaged.latest + 1
    SHARED_CACHE.clear()
    return damaged


def _now() -> int:
    return int(time.time() * 1000)


def _refusal(call: object) -> LakecoreError:
    with pytest.raises(LakecoreError) as caught:
        call()  # type: ignore[operator]
    return caught.value


# -- 2: damage before the repair is exit 6 with the roll-forward hint -----------------------------


def test_gc_and_expiry_on_a_damaged_latest_version_exit_6_with_the_rollback_hint(
    damaged: Damaged,
) -> None:
    storage = damaged.storage
    storage.write(
        root_node_file_name(damaged.latest), b"not a root"
    )  # the newest root, as in the trial
    before = tree_digest(damaged.path)
    for call in (
        lambda: gc_in_process(storage, now_millis=_now(), grace_millis=0, dry_run=True),
        lambda: expire_in_process(storage, now_millis=_now() + FAR_FUTURE, dry_run=True),
    ):
        error = _refusal(call)
        assert error.exit_code == ExitCode.DAMAGED, error.one_line()
        assert "repair rollback --to-last-valid" in str(error), error.one_line()
        assert str(damaged.latest) in str(error)
    assert tree_digest(damaged.path) == before


def test_gc_on_a_damaged_latest_tree_exits_6_with_the_rollback_hint(damaged: Damaged) -> None:
    error = _refusal(lambda: gc_in_process(damaged.storage, now_millis=_now(), grace_millis=0))
    assert error.exit_code == ExitCode.DAMAGED, error.one_line()
    assert "repair rollback --to-last-valid" in str(error)


def test_a_node_that_fails_to_read_for_a_storage_reason_stays_exit_4(
    repaired: Damaged, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Damage is exit 6; a read that failed (and may work next time) stays retryable."""
    original = Storage.read

    def flaky(self: Storage, path: str) -> bytes:
        if path == repaired.lost:
            raise StorageError(f"{self.uri(path)}: connection reset")
        return original(self, path)

    monkeypatch.setattr(Storage, "read", flaky)
    for call in (
        lambda: gc_in_process(repaired.storage, now_millis=_now(), grace_millis=0, dry_run=True),
        lambda: expire_in_process(repaired.storage, now_millis=_now() + FAR_FUTURE, dry_run=True),
    ):
        error = _refusal(call)
        assert error.exit_code == ExitCode.FAILURE, error.one_line()


# -- 1b: after the repair, retained damaged versions: exit 6 naming them and drop-damaged ------------


@pytest.mark.parametrize(
    "target_tasks", [8, 1]
)  # the damage met by the driver's cut, or by a subtree walk
def test_after_the_repair_gc_and_expiry_exit_6_naming_the_versions_and_drop_damaged(
    repaired: Damaged, target_tasks: int
) -> None:
    storage = repaired.storage
    before = tree_digest(repaired.path)
    error = _refusal(
        lambda: gc_in_process(storage, now_millis=_now(), grace_millis=0, target_tasks=target_tasks)
    )
    assert error.exit_code == ExitCode.DAMAGED, error.one_line()
    text = str(error)
    assert f"retained version(s) {', '.join(map(str, repaired.reached_by))} " in text, text
    assert (
        "repair drop-damaged" in text
        and "compact-versions" in text
        and "nothing was deleted" in text
    )
    # Within retention (the newest 3 are kept): compaction refuses the same way.
    error = _refusal(
        lambda: expire_in_process(
            storage, now_millis=_now() + FAR_FUTURE, target_tasks=target_tasks
        )
    )
    assert error.exit_code == ExitCode.DAMAGED, error.one_line()
    assert "repair drop-damaged" in str(error)
    assert tree_digest(repaired.path) == before


# -- 1a: an expired version whose tree cannot be read: its root only, the rest to gc ---------------


def _retained_whole(path: Path) -> None:
    SHARED_CACHE.clear()
    lh = Lakehouse.open(str(path))
    for version in list_root_versions(lh.storage):
        view = lh if version == lh.version else lh.at_version(version)
        result = check_version(view, deep=True)
        assert result.ok, (version, result.violations[:3])


def test_expiry_expires_unreadable_versions_by_their_root_file_and_gc_collects_the_rest(
    repaired: Damaged,
) -> None:
    storage = repaired.storage
    lh = Lakehouse.open(str(repaired.path))
    for name in ("x", "y", "z"):  # the damaged versions fall out of the newest 3
        with lh.transaction() as tx:
            tx.create_namespace(name)
    SHARED_CACHE.clear()
    result = expire_in_process(storage, now_millis=_now() + FAR_FUTURE)
    assert set(repaired.reached_by) <= set(result.roots.deleted)
    assert result.difference is not None
    assert result.difference.unreadable_versions == repaired.reached_by
    assert (repaired.path / repaired.lost).exists(), (
        "expiry must leave an unreadable version's files to gc"
    )
    _retained_whole(repaired.path)
    gc = gc_in_process(storage, now_millis=_now(), grace_millis=0)
    assert repaired.lost in gc.deleted.deleted_paths
    _retained_whole(repaired.path)


def test_drop_damaged_plans_first_then_drops_only_damaged_roots(repaired: Damaged) -> None:
    storage = repaired.storage
    latest = repaired.latest + 1
    before = tree_digest(repaired.path)
    plan = repair.drop_damaged(storage, apply=False)
    assert plan.status == "planned" and sorted(plan.damaged_versions) == repaired.reached_by
    assert tree_digest(repaired.path) == before
    done = repair.drop_damaged(storage, apply=True)
    assert done.dropped_versions == repaired.reached_by
    after = tree_digest(repaired.path)
    assert set(before) - set(after) == {root_node_file_name(v) for v in repaired.reached_by}
    assert latest in list_root_versions(storage)
    # gc and compaction run again; what only the dropped versions reached goes as orphans.
    SHARED_CACHE.clear()
    gc = gc_in_process(storage, now_millis=_now(), grace_millis=0)
    assert repaired.lost in gc.deleted.deleted_paths
    expire_in_process(storage, now_millis=_now())
    _retained_whole(repaired.path)
    assert Lakehouse.open(str(repaired.path)).version == latest
    assert repair.drop_damaged(storage, apply=True).status == "noop"


def test_the_repair_job_drops_damaged_versions_too(repaired: Damaged, tmp_path: Path) -> None:
    """``spark-submit.sh repair ... drop-damaged``: the same plan and act as the CLI's, no Spark
    session needed (the driver does it), and a report that names what it dropped."""
    from jobs.repair_job import main as repair_main

    before = tree_digest(repaired.path)
    report_path = tmp_path / "repair.json"
    args = ["--lakehouse", str(repaired.path), "drop-damaged", "--report", str(report_path)]
    assert repair_main(args) == 0
    planned = json.loads(report_path.read_text())
    assert planned["status"] == "planned" and planned["counts"]["damaged_versions"] == len(
        repaired.reached_by
    )
    assert tree_digest(repaired.path) == before
    assert repair_main([*args, "--yes"]) == 0
    done = json.loads(report_path.read_text())
    assert done["details"]["dropped_versions"] == repaired.reached_by
    assert set(before) - set(tree_digest(repaired.path)) == {
        root_node_file_name(v) for v in repaired.reached_by
    }
    assert repair_main([*args[:3], "--to-version", "3"]) == 2  # rollback's option, refused


def test_drop_damaged_counts_a_deleted_node_file_as_damage(template: Path, tmp_path: Path) -> None:
    """A node file deleted by hand under versions a roll forward went past: drop-damaged failed
    with "NotFoundError: node file ... is missing", exit 5, and dropped nothing (found through
    the repair DAG)."""
    deleted = _damage(template, tmp_path, how="deleted")
    storage = deleted.storage
    assert (
        repair.rollback(storage, to_last_valid=True, apply=True).new_version == deleted.latest + 1
    )
    SHARED_CACHE.clear()
    plan = repair.drop_damaged(storage, apply=False)
    assert plan.status == "planned" and sorted(plan.damaged_versions) == deleted.reached_by
    assert all("is missing" in reasons[0] for reasons in plan.damaged_versions.values())
    done = repair.drop_damaged(storage, apply=True)
    assert done.dropped_versions == deleted.reached_by
    SHARED_CACHE.clear()
    _retained_whole(deleted.path)


def test_a_missing_node_is_damage_only_while_its_root_is_there(
    template: Path, tmp_path: Path
) -> None:
    """The race a missing node may be: compaction deletes an expired version's root, then its
    files, while a walk holds the root it read earlier. With the root gone it is no damage."""
    from lakecore.maintenance.damage import damaged_versions
    from lakecore.maintenance.roots import load_root

    deleted = _damage(template, tmp_path, how="deleted")
    storage = deleted.storage
    roots = [load_root(storage, v, StorageError) for v in deleted.reached_by]
    SHARED_CACHE.clear()
    assert sorted(damaged_versions(storage, roots)) == deleted.reached_by
    oldest = deleted.reached_by[0]
    storage.delete([root_node_file_name(oldest)])  # as compaction would, before the files
    SHARED_CACHE.clear()
    assert sorted(damaged_versions(storage, roots)) == deleted.reached_by[1:]


def test_drop_damaged_refuses_while_the_latest_version_is_damaged(damaged: Damaged) -> None:
    before = tree_digest(damaged.path)
    outcome = repair.drop_damaged(damaged.storage, apply=True)
    assert outcome.status == "failed" and outcome.exit_code == ExitCode.DAMAGED
    assert outcome.error is not None and "rollback --to-last-valid" in outcome.error
    assert tree_digest(damaged.path) == before


def test_a_damaged_version_an_export_pins_stays_and_says_what_releases_it(damaged: Damaged) -> None:
    """A new-user trial: drop-damaged refused over an export, then again over the same export
    after `export drop`, since a retained version still named it; gc said "wait until
    compact-versions expires" a version the pin kept. Now the others are dropped, and every
    line says what holds the pinned one and what releases it."""
    pinned = damaged.reached_by[0]
    lh = Lakehouse.open(str(damaged.path))
    exported_in = lh.export_snapshot(
        "nightly", version=pinned
    )  # its tree is the latest's: damaged too
    SHARED_CACHE.clear()
    rolled = repair.rollback(damaged.storage, to_last_valid=True, apply=True).new_version
    assert rolled == exported_in + 1
    SHARED_CACHE.clear()
    refusal = _refusal(lambda: gc_in_process(damaged.storage, now_millis=_now(), grace_millis=0))
    assert refusal.exit_code == ExitCode.DAMAGED
    assert (
        f"version {pinned} stays while an export pins it (export 'nightly' pins it: drop the export first"
        in refusal.one_line()
    ), refusal.one_line()
    SHARED_CACHE.clear()
    outcome = repair.drop_damaged(damaged.storage, apply=True)
    assert outcome.status == "ok", outcome.as_dict()
    assert outcome.dropped_versions == sorted({*damaged.reached_by, exported_in} - {pinned})
    assert any(
        f"version {pinned} stays while an export pins it" in line for line in outcome.summary
    )
    assert root_node_file_name(pinned) in tree_digest(damaged.path)
    # The export dropped: the version before still names it, so the pin holds until it expires.
    SHARED_CACHE.clear()
    Lakehouse.open(str(damaged.path)).drop_export("nightly")
    SHARED_CACHE.clear()
    again = repair.drop_damaged(damaged.storage, apply=True)
    assert again.status == "failed" and again.exit_code == ExitCode.DAMAGED
    assert (
        again.error is not None
        and (
            f"nothing was deleted: version {pinned} stays while an export pins it (export 'nightly' was dropped, but "
            f"retained version(s) {rolled} still name it: the pin lasts until compact-versions expires them)"
        )
        == again.error
    ), again.error


def test_a_deleted_old_definition_file_is_damage_that_drop_damaged_repairs(tmp_path: Path) -> None:
    """An operator "cleans up" the first of several ``_lakehouse_def_*.binpb`` files. gc and
    compaction refused with exit 4 (retried for ever by the DAGs) and drop-damaged said every
    version could be read: nothing led out. It is damage to the versions that name it: exit 6
    naming them and drop-damaged, which then drops their roots, and gc runs again."""
    lh = Lakehouse.create(str(tmp_path / "lake"))
    with lh.transaction() as tx:
        tx.create_namespace("a")  # version 1, on the first definition
    first_definition = lh.root_info.lakehouse_def_path
    lh.update_settings(minimum_versions_to_keep=2)  # version 2, on a second definition
    with lh.transaction() as tx:
        tx.create_namespace("b")  # version 3
    storage = Storage(str(tmp_path / "lake"))
    storage.delete([first_definition])
    SHARED_CACHE.clear()

    def gc_dry_run() -> Any:
        return gc_in_process(storage, now_millis=_now(), grace_millis=0, dry_run=True)

    def expiry_dry_run() -> Any:
        return expire_in_process(storage, now_millis=_now() + FAR_FUTURE, dry_run=True)

    # With the definition still cached in this process gc finds it unlisted; a fresh process (the
    # cache cleared) fails to read it: both ways are damage.
    for clear_cache, call in ((False, gc_dry_run), (True, gc_dry_run), (True, expiry_dry_run)):
        if clear_cache:
            clear_definition_cache()
        error = _refusal(call)
        assert error.exit_code == ExitCode.DAMAGED, error.one_line()
        assert "drop-damaged" in str(error) and "0, 1" in str(error), error.one_line()
    plan = repair.drop_damaged(storage, apply=False)
    assert sorted(plan.damaged_versions) == [0, 1], plan.damaged_versions
    assert all("is missing" in reasons[0] for reasons in plan.damaged_versions.values())
    assert repair.drop_damaged(storage, apply=True).dropped_versions == [0, 1]
    SHARED_CACHE.clear()
    gc_in_process(storage, now_millis=_now(), grace_millis=0, dry_run=True)
    assert Lakehouse.open(str(tmp_path / "lake")).list_namespaces() == ["a", "b"]
