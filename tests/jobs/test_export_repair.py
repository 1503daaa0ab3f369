"""The export and repair jobs on real local[2] Spark: a full export copied on executors, exports
that must write nothing, and repairs that plan first and act only with --yes."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.export_job import main as export_main
from jobs.repair_job import main as repair_main
from lakecore.core.locations import LATEST_HINT_FILE_NAME, root_node_file_name
from lakecore.core.tree import SHARED_CACHE
from lakecore.core.versions import read_hint
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance.tree_files import reachable_from_root

RunJob = Callable[..., tuple[int, dict[str, Any]]]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lakehouse with a three-level tree and a few dozen versions, built once per module."""
    path = tmp_path_factory.mktemp("template") / "lake"
    lh = Lakehouse.create(
        str(path),
        name="repairme",
        order=4,
        node_file_max_size_bytes=4000,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
        minimum_versions_to_keep=100,
    )
    with lh.transaction() as tx:
        tx.create_namespace("a")
        tx.create_namespace("b")
    for i in range(40):
        with lh.transaction() as tx:
            tx.create_table("a" if i % 3 else "b", f"t{i:03d}", properties={"i": str(i)})
        if i % 9 == 8:
            with lh.transaction() as tx:
                tx.drop_table("a" if (i - 1) % 3 else "b", f"t{i - 1:03d}")
    assert lh.root.children, "the template must have a multi-level tree"
    return path


@pytest.fixture
def lake(template: Path, tmp_path: Path) -> Lakehouse:
    path = tmp_path / "lake"
    shutil.copytree(template, path)
    return Lakehouse.open(str(path))


def _files(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# -- export ----------------------------------------------------------------------------------------


def test_full_export_copies_every_reachable_file(
    run_job: RunJob, lake: Lakehouse, tmp_path: Path
) -> None:
    version = lake.version - 5
    view = lake.at_version(version)
    target = tmp_path / "copy"
    code, report = run_job(
        export_main,
        "--lakehouse",
        lake.uri,
        "--name",
        "nightly",
        "--mode",
        "full",
        "--target",
        str(target),
        "--version",
        str(version),
        "--parallelism",
        "4",
        "--batch-size",
        "8",
    )
    assert code == 0, report
    assert report["status"] == "ok"
    assert report["details"]["exported_version"] == version
    assert report["counts"]["subtree_tasks"] >= 2
    assert report["counts"]["copy_tasks"] >= 2

    # Exactly the reachable files were copied; the target adds its own root 0, hint and definition.
    reachable = reachable_from_root(view.store, view.root).files
    copied = _files(target)
    copy = Lakehouse.open(str(target))
    own = {root_node_file_name(0), LATEST_HINT_FILE_NAME, copy.root_info.lakehouse_def_path}
    assert set(copied) - own == reachable
    assert report["counts"]["files_copied"] == len(reachable)
    assert (
        report["samples"]["copied_files"]
        == sorted(reachable)[: len(report["samples"]["copied_files"])]
    )
    assert report["counts"]["reachable_node_files"] + report["counts"][
        "reachable_definition_files"
    ] == len(reachable)
    source_files = _files(Path(lake.uri.removeprefix("file://")))
    assert all(copied[p] == source_files[p] for p in reachable)

    # The copy is a lakehouse of its own with the exported version's catalog, and it is clean.
    assert copy.version == 0
    assert dict(copy.items()) == dict(view.items())
    assert copy.list_tables("a") == view.list_tables("a")
    assert copy.load_table("a", "t001").properties == view.load_table("a", "t001").properties
    assert copy.lakehouse_def.properties["lakecore.export.mode"] == "full"
    assert check_version(copy, deep=True).ok

    # The source records the export (which pins the version) in a new version.
    after = Lakehouse.open(lake.uri)
    assert report["new_version"] == lake.version + 1 == after.version
    assert after.lakehouse_def.exported_snapshots == {"nightly": root_node_file_name(version)}


def test_export_to_an_existing_lakehouse_writes_nothing(
    run_job: RunJob, lake: Lakehouse, tmp_path: Path
) -> None:
    target = tmp_path / "taken"
    Lakehouse.create(str(target), name="other")
    source = Path(lake.uri.removeprefix("file://"))
    before_source, before_target = _files(source), _files(target)
    code, report = run_job(
        export_main,
        "--lakehouse",
        lake.uri,
        "--name",
        "nightly",
        "--mode",
        "full",
        "--target",
        str(target),
    )
    assert code != 0
    assert report["status"] == "failed"
    assert "already exists" in report["error"]
    assert _files(source) == before_source
    assert _files(target) == before_target


def test_export_with_a_taken_name_writes_nothing(
    run_job: RunJob, lake: Lakehouse, tmp_path: Path
) -> None:
    code, report = run_job(
        export_main,
        "--lakehouse",
        lake.uri,
        "--name",
        "weekly",
        "--mode",
        "minimal",
        "--target",
        str(tmp_path / "first"),
    )
    assert code == 0, report
    copy = Lakehouse.open(str(tmp_path / "first"))  # its pointers lead into the source
    assert copy.list_tables("a") == lake.list_tables("a")
    assert copy.load_table("b", "t003").properties == lake.load_table("b", "t003").properties
    code, report = run_job(
        export_main,
        "--lakehouse",
        lake.uri,
        "--name",
        "weekly",
        "--mode",
        "full",
        "--target",
        str(tmp_path / "second"),
    )
    assert code != 0
    assert "weekly" in report["error"]
    assert not (tmp_path / "second").exists()


def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Arguments are parsed before any SparkSession or storage is touched.
    code = export_main(
        ["--lakehouse", str(tmp_path), "--name", "n", "--mode", "nope", "--target", "x"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "--mode" in err
    code = repair_main(
        ["--lakehouse", str(tmp_path), "rollback", "--to-version", "1", "--to-last-valid"]
    )
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# -- repair ----------------------------------------------------------------------------------------


def test_rebuild_hint_plans_then_fixes_a_wrong_hint(run_job: RunJob, lake: Lakehouse) -> None:
    lake.storage.write(LATEST_HINT_FILE_NAME, b"3")
    code, report = run_job(repair_main, "--lakehouse", lake.uri, "rebuild-hint")
    assert code == 0, report
    assert report["status"] == "planned"
    assert read_hint(lake.storage) == 3
    assert any(str(lake.version) in line for line in report["details"]["plan"])

    code, report = run_job(repair_main, "--lakehouse", lake.uri, "rebuild-hint", "--yes")
    assert code == 0, report
    assert report["status"] == "ok"
    assert read_hint(lake.storage) == lake.version

    # A hint past the end (the root it names does not exist) is fixed the same way.
    lake.storage.write(LATEST_HINT_FILE_NAME, b"9999")
    code, report = run_job(repair_main, "--lakehouse", lake.uri, "rebuild-hint", "--yes")
    assert code == 0, report
    assert report["details"]["hint_before"] == 9999
    assert read_hint(lake.storage) == lake.version


def test_rollback_to_version_prints_the_plan_and_only_acts_with_yes(
    run_job: RunJob, lake: Lakehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    latest, target = lake.version, lake.version - 10
    source = Path(lake.uri.removeprefix("file://"))
    before = _files(source)
    code, report = run_job(
        repair_main, "--lakehouse", lake.uri, "rollback", "--to-version", str(target)
    )
    out = capsys.readouterr().out
    assert code == 0, report
    assert report["status"] == "planned"
    assert f"would roll forward from version {latest} to the content of version {target}" in out
    assert "--yes" in out
    assert _files(source) == before

    code, report = run_job(
        repair_main, "--lakehouse", lake.uri, "rollback", "--to-version", str(target), "--yes"
    )
    assert code == 0, report
    assert report["new_version"] == latest + 1
    after = Lakehouse.open(lake.uri)
    assert after.version == latest + 1
    assert dict(after.items()) == dict(lake.at_version(target).items())
    assert after.versions()[0].rollback_from_version == latest


def test_rollback_to_last_valid_after_a_lost_node_file(run_job: RunJob, lake: Lakehouse) -> None:
    latest = lake.version
    reach = {
        v: reachable_from_root(lake.store, lake.at_version(v).root).nodes
        for v in range(latest - 12, latest + 1)
    }

    def newest_without(node: str) -> int:
        return max((v for v in reach if node not in reach[v]), default=-1)

    # Lose a node of the latest version that only the newest few versions share: the repair then
    # has to skip every one of them.
    lost = min((n for n in sorted(reach[latest]) if newest_without(n) >= 0), key=newest_without)
    expected = newest_without(lost)
    assert 0 <= expected < latest
    (Path(lake.uri.removeprefix("file://")) / lost).unlink()
    SHARED_CACHE.clear()  # this process read the node while computing `reach`
    assert not check_version(Lakehouse.open(lake.uri), deep=False).ok

    code, report = run_job(
        repair_main, "--lakehouse", lake.uri, "rollback", "--to-last-valid", "--yes"
    )
    assert code == 0, report
    assert report["details"]["rolled_back_to"] == expected
    assert report["new_version"] == latest + 1
    assert set(report["details"]["invalid_versions"]) == {
        str(v) for v in range(expected + 1, latest + 1)
    }
    assert any(lost in line for line in report["details"]["invalid_versions"][str(latest)])
    after = Lakehouse.open(lake.uri)
    assert after.version == latest + 1
    assert check_version(after, deep=True).ok
    assert dict(after.items()) == dict(lake.at_version(expected).items())

    # Now the latest version is clean: nothing more to do.
    code, report = run_job(
        repair_main, "--lakehouse", lake.uri, "rollback", "--to-last-valid", "--yes"
    )
    assert code == 0, report
    assert report["details"]["rollback_to"] is None
    assert report["new_version"] is None


def test_a_full_export_of_an_export_is_refused_and_leaves_no_root(
    run_job: RunJob, lake: Lakehouse, tmp_path: Path
) -> None:
    # A minimal export is read-only and points into its source with full URIs: exporting it
    # again is refused (bad input, exit 2) before anything is walked or copied.
    code, report = run_job(
        export_main,
        "--lakehouse",
        lake.uri,
        "--name",
        "pointer",
        "--mode",
        "minimal",
        "--target",
        str(tmp_path / "minimal"),
    )
    assert code == 0, report
    minimal = tmp_path / "minimal"
    before = _files(minimal)
    code, report = run_job(
        export_main,
        "--lakehouse",
        str(minimal),
        "--name",
        "again",
        "--mode",
        "full",
        "--target",
        str(tmp_path / "again"),
        "--parallelism",
        "2",
    )
    assert code == 2, report
    assert "read-only minimal export" in report["error"]
    assert not (tmp_path / "again").exists()
    assert _files(minimal) == before


def test_a_node_reached_from_two_subtrees_is_refused_and_leaves_no_root(
    run_job: RunJob, lake: Lakehouse, tmp_path: Path
) -> None:
    # A crafted version whose root points twice at one child: each walk reaches that subtree,
    # and the JVM's group-by finds its nodes in two walks.
    from lakecore.core.commit import RootPlan
    from lakecore.core.node import Node

    root = lake.root
    assert len(root.children) >= 2
    children = [root.children[0], root.children[0], *root.children[2:]]
    crafted = Node(root.keys, root.values, children, root.buffer, root.system)
    lake.commit_plan(lambda base: RootPlan(crafted, base.lakehouse_def_path), lambda latest: None)
    code, report = run_job(
        export_main,
        "--lakehouse",
        lake.uri,
        "--name",
        "twice",
        "--mode",
        "full",
        "--target",
        str(tmp_path / "twice"),
        "--parallelism",
        "4",
    )
    assert code != 0, report
    assert "node is reached from two subtrees" in report["error"] and "-node-" in report["error"]
    assert not (tmp_path / "twice" / root_node_file_name(0)).exists()
    assert "twice" not in Lakehouse.open(lake.uri).lakehouse_def.exported_snapshots
