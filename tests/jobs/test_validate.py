"""The validate job against real local[2] Spark, and its units against ``lakecore.lakehouse.version_check``.

One small-node lakehouse (order 4, 8 KiB nodes: a three-level tree with ~18 nodes) is built
once per module with the catalog API; every test that damages it works on its own copy.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jobs.expectations as expectations_module
from jobs.validate_job import main
from lakecore.core import keys as K
from lakecore.core.commit import RootPlan
from lakecore.core.defs import encode_def, table_def
from lakecore.core.locations import root_node_file_name
from lakecore.core.node import Node, decode_node, encode_node
from lakecore.core.tree import SHARED_CACHE, TreeShape, TreeWriter
from lakecore.core.view import LakehouseView
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance.node_rows import (
    SECTION_BUFFER,
    SECTION_KEY_TABLE,
    SECTION_SYSTEM,
    UniqueCandidates,
    key_span,
    node_rows,
    unique_key_candidates,
)
from lakecore.maintenance.tree_files import reachable_from_root
from lakecore.maintenance.validate import (
    TREE_SCOPE,
    combine_version,
    fresh_store,
    merge_work,
    plan_version,
    run_subtree_work,
)
from lakecore.maintenance.validate_run import validate_view

pytestmark = pytest.mark.spark

NAMESPACES = ("alpha", "beta", "gamma", "delta")
RunJob = Callable[..., tuple[int, dict[str, Any]]]


def _build(path: Path) -> None:
    lh = Lakehouse.create(
        str(path),
        order=4,
        node_file_max_size_bytes=8192,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
    )
    for ns in NAMESPACES:
        with lh.transaction() as tx:
            tx.create_namespace(ns)
    for i in range(60):
        with lh.transaction() as tx:
            tx.create_table(NAMESPACES[i % 4], f"t{i:03d}")
    for i in range(0, 60, 7):
        with lh.transaction() as tx:
            tx.drop_table(NAMESPACES[i % 4], f"t{i:03d}")
            tx.update_namespace(NAMESPACES[(i + 1) % 4], {"touched": str(i)})
    # Views (schema ID 3, D=== keys): a clean lakehouse holds every kind of object key.
    for i in range(3):
        with lh.transaction() as tx:
            tx.create_view(NAMESPACES[i], f"v{i}", [{"id": 1, "name": "id", "type": "INT8"}])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("validate") / "lake"
    _build(path)
    return path


@pytest.fixture
def lake(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "lake"
    shutil.copytree(pristine, copy)
    SHARED_CACHE.clear()  # the copy's nodes must be read from its own files
    return copy


def _open(path: Path) -> Lakehouse:
    SHARED_CACHE.clear()
    return Lakehouse.open(str(path))


def _nodes(lh: LakehouseView) -> list[str]:
    return sorted(reachable_from_root(lh.store, lh.root, include_values=False).nodes)


def _leaf_and_top(lh: LakehouseView) -> tuple[str, str]:
    """A leaf of the latest version, and a child of its root (an internal node)."""
    node, location = lh.root, ""
    while node.children:
        location = node.children[-1]
        node = lh.store.load(location)
    return location, lh.root.children[0]


def _fsck(path: Path, versions: list[int], deep: bool) -> set[tuple[int, str, str, str]]:
    lh = _open(path)
    out = set()
    for version in versions:
        SHARED_CACHE.clear()
        result = check_version(lh.at_version(version), deep=deep)
        out |= {(version, v.location, v.rule, v.detail) for v in result.violations}
    return out


def _job_violations(data: dict[str, Any]) -> set[tuple[int, str, str, str]]:
    assert not data["details"]["violations_truncated"]
    return {
        (v["version"], v["location"], v["rule"], v["detail"]) for v in data["details"]["violations"]
    }


def _expectation(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        e for e in data["details"]["expectations"]["expectations"] if e["name"] == name
    )
    return found


# -- the job -----------------------------------------------------------------------------------------


def test_clean_lakehouse_passes_every_expectation_and_writes_html(
    lake: Path, run_job: RunJob
) -> None:
    code, data = run_job(main, "--lakehouse", str(lake), "--parallelism", "4")
    assert code == 0, data
    assert data["status"] == "ok"
    latest = _open(lake).version
    assert data["counts"]["versions_checked"] == 1 and data["base_version"] == latest
    assert data["counts"]["subtree_tasks"] >= 2, "the tree was not cut into subtrees"
    assert data["counts"]["nodes_checked"] == len(_nodes(_open(lake))) + 1
    assert data["counts"]["keys"] > 0 and data["bytes"]["node_bytes_checked"] > 0
    expectations = data["details"]["expectations"]
    assert expectations["success"] and expectations["evaluated"] >= 8
    assert all(e["success"] and e["unexpected_count"] == 0 for e in expectations["expectations"]), (
        expectations
    )
    assert all(e["element_count"] and e["element_count"] > 0 for e in expectations["expectations"])
    # All passed in GE's cheap first pass: nothing was run again for details.
    assert expectations["detailed_again"] == []
    assert len({e["element_count"] for e in expectations["expectations"]}) == 1
    html = Path(data["details"]["html_report"])
    assert html.exists() and html.suffix == ".html"
    assert "unique-keys" in html.read_text() and "FAILED" not in html.read_text()


def test_all_retained_deep_checks_every_version_like_fsck(lake: Path, run_job: RunJob) -> None:
    code, data = run_job(
        main,
        "--lakehouse",
        str(lake),
        "--all-retained",
        "--deep",
        "--no-expectations",
        "--parallelism",
        "3",
    )
    assert code == 0, data
    versions = [info.version for info in _open(lake).versions()]
    assert [v["version"] for v in data["details"]["versions"]] == versions
    assert data["counts"]["versions_checked"] == len(versions) > 60
    assert all(v["ok"] and v["catalog_checked"] for v in data["details"]["versions"])
    lh = _open(lake)
    assert [v["catalog_keys"] for v in data["details"]["versions"]] == [
        len(list(lh.at_version(v).items())) for v in versions
    ]
    assert data["details"]["expectations"] is None
    assert _fsck(lake, versions, deep=True) == set()


def test_a_deleted_node_file_is_a_violation_naming_it(lake: Path, run_job: RunJob) -> None:
    lh = _open(lake)
    leaf, top = _leaf_and_top(lh)
    (lake / leaf).unlink()
    (lake / top).unlink()
    code, data = run_job(
        main, "--lakehouse", str(lake), "--all-retained", "--no-expectations", "--parallelism", "4"
    )
    assert code == 1, data
    assert data["status"] == "failed" and "unreadable-node" in data["error"]
    assert f"the latest version {lh.version} is damaged: roll forward" in data["error"]
    found = _job_violations(data)
    assert {(lh.version, leaf, "unreadable-node"), (lh.version, top, "unreadable-node")} <= {
        f[:3] for f in found
    }
    versions = [v["version"] for v in data["details"]["versions"]]
    assert found == _fsck(lake, versions, deep=False)


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_corrupt_node_file_is_a_violation(lake: Path, run_job: RunJob, damage: str) -> None:
    lh = _open(lake)
    leaf, _ = _leaf_and_top(lh)
    data = (lake / leaf).read_bytes()
    if damage == "truncated":
        damaged = data[: len(data) // 2]
    else:
        damaged = bytes(b ^ 0xFF for b in data[:64]) + data[64:]
    (lake / leaf).write_bytes(damaged)
    code, report = run_job(main, "--lakehouse", str(lake), "--no-expectations")
    assert code == 1, report
    found = _job_violations(report)
    assert any(loc == leaf and rule == "unreadable-node" for _, loc, rule, _ in found), found
    assert found == _fsck(lake, [lh.version], deep=False)


def test_a_corrupt_root_is_a_violation_not_a_crash(lake: Path, run_job: RunJob) -> None:
    lh = _open(lake)
    root = lake / lh.root_info.path
    root.write_bytes(root.read_bytes()[:100])
    code, data = run_job(
        main, "--lakehouse", str(lake), "--version", str(lh.version), "--no-expectations"
    )
    assert code == 1, data
    # fsck's name for it (validate said unreadable-node), and the error line says what to do.
    assert [(v["location"], v["rule"]) for v in data["details"]["violations"]] == [
        (lh.root_info.path, "unreadable-root")
    ]
    assert data["error"].startswith(
        "1 violation in 1 version (unreadable-root 1); the latest version "
        f"{lh.version} is damaged: roll forward to the newest readable version with"
    )
    assert "repair rollback --to-last-valid" in data["error"]


def test_damage_only_in_an_older_version_names_drop_damaged_not_a_roll_forward(
    lake: Path, run_job: RunJob
) -> None:
    """A review: the damage advice named `rollback --to-last-valid` even when the latest
    version was whole, where that does nothing."""
    lh = _open(lake)
    older = lh.version - 1
    root = lake / root_node_file_name(older)
    root.write_bytes(root.read_bytes()[:100])
    code, data = run_job(
        main, "--lakehouse", str(lake), "--version", str(older), "--no-expectations"
    )
    assert code == 1, data
    assert (
        f"the latest version {lh.version} is readable: drop the damaged root(s) {older}"
        in data["error"]
    )
    assert "repair drop-damaged" in data["error"] and "rollback" not in data["error"]


def test_deep_finds_a_definition_carrying_another_name(lake: Path, run_job: RunJob) -> None:
    lh = _open(lake)
    _key, location = next(iter(lh.items(K.TABLE_KEY_PREFIX)))
    (lake / location).write_bytes(encode_def(table_def("impostor")))
    code, data = run_job(main, "--lakehouse", str(lake), "--no-expectations")
    assert code == 0, "without --deep the tree alone is checked"
    code, data = run_job(main, "--lakehouse", str(lake), "--deep", "--no-expectations")
    assert code == 1, data
    found = _job_violations(data)
    assert {(loc, rule) for _, loc, rule, _ in found} == {(location, "definition-name")}
    assert "impostor" in next(iter(found))[3]
    assert found == _fsck(lake, [lh.version], deep=True)


def test_deep_finds_tables_whose_namespace_key_was_removed(lake: Path, run_job: RunJob) -> None:
    lh = _open(lake)
    writer = TreeWriter(lh.store, TreeShape.of(lh.lakehouse_def), lh.root)
    writer.put(K.namespace_key("beta", lh.lakehouse_def), None)
    crafted = writer.finish()
    lh.commit_plan(lambda base: RootPlan(crafted, base.lakehouse_def_path), lambda latest: None)
    orphans = {location for _, location in lh.items(K.table_key_prefix("beta", lh.lakehouse_def))}
    assert len(orphans) > 5
    views = {location for _, location in lh.items(K.view_key_prefix("beta", lh.lakehouse_def))}
    assert len(views) == 1  # a view without its namespace is found too
    orphans |= views
    code, data = run_job(
        main, "--lakehouse", str(lake), "--deep", "--no-expectations", "--parallelism", "4"
    )
    assert code == 1, data
    found = _job_violations(data)
    assert {(loc, rule) for _, loc, rule, _ in found} == {
        (loc, "table-namespace") for loc in orphans
    }
    assert found == _fsck(lake, [lh.version], deep=True)


def test_deep_lists_the_tables_of_a_namespace_whose_definition_is_gone(
    lake: Path, run_job: RunJob
) -> None:
    # The namespace's key is there, so the executors only counted its tables; the driver lists
    # them once the namespace turns out broken, exactly as fsck does.
    lh = _open(lake)
    ns_location = lh.get(K.namespace_key("beta", lh.lakehouse_def))
    assert ns_location is not None
    (lake / ns_location).unlink()
    tables = {location for _, location in lh.items(K.table_key_prefix("beta", lh.lakehouse_def))}
    assert len(tables) > 5
    tables |= {location for _, location in lh.items(K.view_key_prefix("beta", lh.lakehouse_def))}
    code, data = run_job(
        main, "--lakehouse", str(lake), "--deep", "--no-expectations", "--parallelism", "4"
    )
    assert code == 1, data
    found = _job_violations(data)
    assert {(loc, rule) for _, loc, rule, _ in found} == (
        {(ns_location, "definition-missing")} | {(loc, "table-namespace") for loc in tables}
    )
    assert found == _fsck(lake, [lh.version], deep=True)


def test_deep_subtree_results_carry_table_counts_not_every_table(lake: Path) -> None:
    # What an executor sends the driver for a clean version: every table counted, none listed.
    lh = _open(lake)
    store = fresh_store(lh.storage, lh.lakehouse_def.order, ())
    plan = plan_version(
        lh.storage,
        lh.version,
        lh.root,
        lh.root_info.path,
        lh.root_info.size,
        lh.lakehouse_def,
        store,
        4,
        deep=True,
    )
    assert plan.keyed_namespaces == frozenset(lh.list_namespaces())
    works = merge_work([plan], deep=True, rows=False)
    results = [run_subtree_work(lh.storage, work) for work in works]
    parts = [part for result in results for _, part in result.catalog]
    assert len(parts) >= 2
    assert all(part.tables == {} for part in parts)
    # A view counts with its namespace's tables.
    tables = sum(len(lh.list_tables(ns)) + len(lh.list_views(ns)) for ns in lh.list_namespaces())
    top_tables = sum(plan.top_catalog.table_counts.values()) if plan.top_catalog else 0
    assert sum(sum(part.table_counts.values()) for part in parts) + top_tables == tables
    assert combine_version(plan, results, deep=True).ok


def test_counted_subtree_results_give_the_same_verdict_and_counts(lake: Path) -> None:
    # What an executor sends the driver once the violations stay with it: counts by rule.
    lh = _open(lake)
    for _, location in list(lh.items(K.TABLE_KEY_PREFIX))[:5]:
        (lake / location).unlink()
    leaves = [location for location in _nodes(lh) if not lh.store.load(location).children]
    # The catalog's violations first (the tree clean), then the tree's with the catalog's
    # left out (a broken tree's catalog is not checked, as in fsck).
    for broken_tree, deep in ((False, True), (True, False), (True, True)):
        if broken_tree:
            (lake / leaves[0]).unlink(missing_ok=True)
        SHARED_CACHE.clear()
        store = fresh_store(lh.storage, lh.lakehouse_def.order, ())
        plan = plan_version(
            lh.storage,
            lh.version,
            lh.root,
            lh.root_info.path,
            lh.root_info.size,
            lh.lakehouse_def,
            store,
            4,
            deep=deep,
        )
        results = [
            run_subtree_work(lh.storage, work) for work in merge_work([plan], deep=deep, rows=False)
        ]
        full = combine_version(plan, results, deep=deep)
        counted = [result.counted_only() for result in results]
        assert all(
            not r.report.violations and all(not part.violations for _, part in r.catalog)
            for r in counted
        )
        slim = combine_version(plan, counted, deep=deep)
        assert not slim.ok and slim.violation_count == full.violation_count > 0
        assert slim.violations_by_rule() == full.violations_by_rule()
        assert slim.catalog_checked == full.catalog_checked == (deep and not broken_tree)
        # The listed ones plus the results' entries that count are exactly the full list.
        entries = [
            violation
            for result in results
            for _, scope, violation in result.violation_entries()
            if scope == TREE_SCOPE or full.catalog_checked
        ]
        assert sorted(map(str, slim.violations + entries)) == sorted(map(str, full.violations))
        assert {v.rule for v in entries} == (
            {"definition-missing"} if not broken_tree else {"unreadable-node"}
        )


def test_an_expectation_failure_on_a_crafted_node_exits_1(lake: Path, run_job: RunJob) -> None:
    lh = _open(lake)
    leaf, _ = _leaf_and_top(lh)
    node = decode_node((lake / leaf).read_bytes(), leaf, lh.lakehouse_def.order)
    table_keys = [i for i, key in enumerate(node.keys) if key.startswith(K.TABLE_KEY_PREFIX)]
    assert table_keys, "the leaf holds no table key"
    i = table_keys[0]
    short = node.keys[i][:-1]  # one padding byte short; still sorted and inside the bounds
    crafted = Node(
        [*node.keys[:i], short, *node.keys[i + 1 :]],
        node.values,
        node.children,
        node.buffer,
        node.system,
    )
    (lake / leaf).write_bytes(encode_node(crafted, lh.lakehouse_def.order))
    code, data = run_job(main, "--lakehouse", str(lake), "--parallelism", "4")
    assert code == 1, data
    assert data["status"] == "failed" and "object-key-length" in data["error"]
    assert data["details"]["violations"] == [], "the tree rules still hold"
    assert _fsck(lake, [lh.version], deep=False) == set()
    failed = _expectation(data, "object-key-length")
    assert not failed["success"] and failed["unexpected_count"] == 1
    assert failed["unexpected_values"] == [short]
    assert [
        e["name"] for e in data["details"]["expectations"]["expectations"] if not e["success"]
    ] == ["object-key-length"]
    # Only the failure ran again with GE's SUMMARY; the element count GE gave it there is the
    # row count the first pass reports for the expectations that passed.
    assert data["details"]["expectations"]["detailed_again"] == ["object-key-length"]
    assert {e["element_count"] for e in data["details"]["expectations"]["expectations"]} == {
        failed["element_count"]
    }
    assert "FAILED" in Path(data["details"]["html_report"]).read_text()


@pytest.mark.parametrize("candidates_max", [256, 0], ids=["candidates-named", "every-key-named"])
def test_a_key_in_two_leaves_fails_unique_keys(
    lake: Path, run_job: RunJob, candidates_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last key of a leaf copied to the front of the next leaf: both still decode and are
    # sorted, the tree check finds the copy outside its leaf's bounds, and unique-keys names
    # the key with its version; whether the suite's column holds only the candidates (the
    # leaves' key ranges now overlap), or (more candidates than the limit) every key.
    monkeypatch.setattr(expectations_module, "UNIQUE_CANDIDATES_MAX", candidates_max)
    lh = _open(lake)
    parent = lh.root
    while parent.children and lh.store.load(parent.children[-1]).children:
        parent = lh.store.load(parent.children[-1])
    left, right = (lh.store.load(location) for location in parent.children[-2:])
    assert not left.children and not right.children and left.keys and right.keys
    copied = left.keys[-1]
    assert copied.startswith(K.TABLE_KEY_PREFIX)
    crafted = Node(
        [copied, *right.keys],
        [left.values[-1], *right.values],
        right.children,
        right.buffer,
        right.system,
    )
    location = parent.children[-1]
    (lake / location).write_bytes(encode_node(crafted, lh.lakehouse_def.order))
    code, data = run_job(main, "--lakehouse", str(lake), "--parallelism", "4")
    assert code == 1, data
    assert data["details"]["violations"], "the tree check sees the copy outside its leaf's bounds"
    failed = _expectation(data, "unique-keys")
    assert not failed["success"] and failed["unexpected_count"] == 2
    assert set(failed["unexpected_values"]) == {f"v{lh.version} {copied}"}


def test_settings_can_turn_expectations_off(
    lake: Path, run_job: RunJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from lakecore.maintenance import settings as maintenance_settings

    conf = tmp_path / "conf"
    conf.mkdir()
    settings = json.loads((maintenance_settings.CONF_DIR / "maintenance-local.json").read_text())
    (conf / "maintenance-nogx.json").write_text(
        json.dumps({**settings, "validate_ge_enabled": False})
    )
    monkeypatch.setattr(maintenance_settings, "CONF_DIR", conf)
    code, data = run_job(main, "--lakehouse", str(lake), "--env", "nogx")
    assert code == 0, data
    assert (
        data["details"]["expectations_enabled"] is False and data["details"]["expectations"] is None
    )


def _newest_first(found: set[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
    """The report's order of violations: version (newest first), location, rule, detail."""
    return sorted(found, key=lambda v: (-v[0], v[1], v[2], v[3]))


@pytest.mark.parametrize("damage", ["leaves", "definitions"])
def test_the_report_lists_a_few_violations_and_full_list_writes_them_all(
    lake: Path, run_job: RunJob, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    import pyarrow.parquet as pq

    import jobs.validate_job as validate_module

    lh = _open(lake)
    if damage == "leaves":  # tree violations, in every retained version that shares the leaves
        leaves = [location for location in _nodes(lh) if not lh.store.load(location).children]
        for leaf in leaves[:3]:
            (lake / leaf).unlink()
        args, versions, scope = ["--all-retained"], None, "tree"
    else:  # catalog violations, one per table: the tree stays clean
        for _, location in lh.items(K.TABLE_KEY_PREFIX):
            (lake / location).unlink()
        args, versions, scope = ["--deep"], [lh.version], "catalog"
    monkeypatch.setattr(validate_module, "VIOLATIONS_LIMIT", 3)
    code, data = run_job(
        main,
        "--lakehouse",
        str(lake),
        "--no-expectations",
        "--parallelism",
        "4",
        "--full-list",
        *args,
    )
    assert code == 1, data
    versions = versions or [v["version"] for v in data["details"]["versions"]]
    expected = _fsck(lake, versions, deep=scope == "catalog")
    assert len(expected) > 10
    # The counts are exact; the listing is the first few in the report's order.
    assert data["counts"]["violations"] == len(expected)
    rules = {rule for _, _, rule, _ in expected}
    assert data["details"]["violations_by_rule"] == {
        rule: sum(1 for v in expected if v[2] == rule) for rule in sorted(rules)
    }
    assert data["details"]["violations_truncated"] is True
    listed = [
        (v["version"], v["location"], v["rule"], v["detail"]) for v in data["details"]["violations"]
    ]
    assert listed == _newest_first(expected)[:3]
    assert {v["version"]: v["violations"] for v in data["details"]["versions"]} == {
        version: sum(1 for v in expected if v[0] == version) for version in versions
    }
    assert f"{len(expected)} violations in" in data["error"]
    # The full list: every one, once, with the scope of its rule.
    dataset = data["details"]["violations_dataset"]
    assert dataset.endswith(".json.violations.parquet")
    rows = pq.read_table(dataset).to_pylist()
    assert len(rows) == len(expected)
    assert {(r["version"], r["location"], r["rule"], r["detail"]) for r in rows} == expected
    assert {r["scope"] for r in rows} == {scope}


def test_full_list_on_a_clean_lakehouse_is_an_empty_dataset(lake: Path, run_job: RunJob) -> None:
    import pyarrow.parquet as pq

    code, data = run_job(main, "--lakehouse", str(lake), "--no-expectations", "--full-list")
    assert code == 0, data
    table = pq.read_table(data["details"]["violations_dataset"])
    assert table.num_rows == 0
    assert table.column_names == ["version", "scope", "rule", "location", "detail"]


def test_a_damaged_tree_still_gets_its_health_page_and_says_deep_was_skipped(
    lake: Path, pristine: Path, run_job: RunJob, tmp_path: Path
) -> None:
    # Found by a new-user trial: with --html, a truncated leaf ended the job with exit 6 (the
    # page's tree description raised) and no page; and --deep skipped the catalog unsaid.
    lh = _open(lake)
    _, node = _leaf_and_top(lh)  # an internal node: the page's tree description reads those
    (lake / node).write_bytes((lake / node).read_bytes()[:100])
    health = tmp_path / "health.html"
    code, data = run_job(
        main, "--lakehouse", str(lake), "--no-expectations", "--deep", "--html", str(health)
    )
    assert code == 1, data
    assert (
        data["counts"]["violations"] == 1 and data["details"]["violations"][0]["location"] == node
    )
    page = health.read_text()
    assert data["details"]["health_page"] == str(health)
    assert f"the tree of version {lh.version} is damaged" in page and node in page
    assert (
        "catalog checks (--deep) skipped for 1 version whose tree has violations; run --deep again once "
        "the tree is mended"
    ) in data["summary"]
    assert (
        "; catalog checks skipped for 1 version (the tree first); the latest version"
        in data["error"]
    )
    # A clean tree: the catalog is checked, and nothing is said about skipping it.
    code, data = run_job(main, "--lakehouse", str(pristine), "--no-expectations", "--deep")
    assert code == 0 and not any("skipped" in line for line in data["summary"]), data


def test_html_may_not_replace_the_reports_own_page(
    lake: Path, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "validate.json"
    assert (
        main(
            [
                "--lakehouse",
                str(lake),
                "--report",
                str(report),
                "--html",
                str(tmp_path / "validate.html"),
            ],
            spark=spark,
        )
        == 2
    )
    assert "is where the validation's own page goes" in capsys.readouterr().err
    assert not report.exists()


def test_full_list_needs_a_report(
    lake: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--lakehouse", str(lake), "--full-list"], spark=spark) == 2
    assert (
        "--full-list writes beside the JSON report: give --report PATH too"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--version", "1", "--all-retained"], 2),
        (["--version", "-1"], 2),
        (["--version", "100000"], 5),
    ],
)
def test_bad_options(lake: Path, run_job: RunJob, args: list[str], code: int) -> None:
    got, data = run_job(main, "--lakehouse", str(lake), "--no-expectations", *args)
    assert got == code, data


# -- the units, in one process -----------------------------------------------------------------------


def test_unique_key_candidates_name_only_the_keys_that_can_repeat(spark: Any) -> None:
    schema = "version bigint, section string, key string, pvalue string, pnode string"
    clean = [
        (7, "key_table", "C===a", "p1", None),
        (7, "key_table", "C===b", "p2", None),
        (8, "key_table", "C===a", "p1", None),  # the same key in another version
        (7, "key_table", None, None, None),
        (7, "key_table", None, None, None),  # padding rows
        (7, "buffer", "C===a", "p3", None),
        (7, "system", "lakehouse_def", "d", None),
    ]
    rows = spark.createDataFrame(clean, schema)
    # Two tasks of version 7 with disjoint ranges, one of version 8: nothing can repeat.
    sound = [(7, key_span(["C===a"])), (7, key_span(["C===b"])), (8, key_span(["C===a"]))]
    assert unique_key_candidates(sound, 10) == UniqueCandidates()
    narrowed = expectations_module.with_derived_columns(
        rows, 4, 4, unique_key_candidates(sound, 10)
    )
    assert narrowed.where("version_key is not null").count() == 0

    repeated = spark.createDataFrame([*clean, (7, "key_table", "C===b", "p9", None)], schema)
    # The extra C===b in a third task whose range overlaps the second's.
    overlapping = [*sound, (7, key_span(["C===b", "C===c"]))]
    candidates = unique_key_candidates(overlapping, 10)
    assert candidates == UniqueCandidates(ranges=((7, "C===b", "C===b"),))
    named = expectations_module.with_derived_columns(repeated, 4, 4, candidates)
    assert sorted(
        r[0] for r in named.where("version_key is not null").select("version_key").collect()
    ) == ["v7 C===b", "v7 C===b"]
    # ... or within one task: named as the key itself.
    within = unique_key_candidates(
        [(7, key_span(["C===a", "C===b", "C===b"])), (8, key_span(["C===a"]))], 10
    )
    assert within == UniqueCandidates(keys=((7, "C===b"),))
    assert (
        expectations_module.with_derived_columns(repeated, 4, 4, within)
        .where("version_key is not null")
        .count()
        == 2
    )
    assert unique_key_candidates(overlapping, 0) is None
    every = expectations_module.with_derived_columns(repeated, 4, 4, None)
    assert every.where("version_key is not null").count() == 4


def test_overlapping_key_ranges_cover_every_key_two_spans_share() -> None:
    """Spans sorted by their least key, nested and chained: each overlap lies inside a named
    range, and spans that only touch without sharing a key name nothing."""
    spans = [
        (1, key_span(["C===a", "C===m"])),
        (1, key_span(["C===c", "C===d"])),  # nested
        (1, key_span(["C===l", "C===p"])),
        (1, key_span(["C===q", "C===r"])),
    ]  # chained, then apart
    candidates = unique_key_candidates(spans, 10)
    assert candidates is not None and candidates.keys == ()
    assert candidates.ranges == ((1, "C===c", "C===d"), (1, "C===l", "C===m"))
    shared = {"C===c", "C===d", "C===l", "C===m"}
    assert all(any(low <= key <= high for _, low, high in candidates.ranges) for key in shared)


def test_node_rows_follow_the_file_layout(pristine: Path) -> None:
    lh = _open(pristine)
    order = lh.lakehouse_def.order
    location = lh.root.children[0]
    node = lh.store.load(location)
    rows = node_rows(node, location, 2, order)
    assert [r[3] for r in rows] == list(range(len(rows)))
    sections = [r[2] for r in rows]
    n_system = sections.count(SECTION_SYSTEM)
    assert sections == [SECTION_SYSTEM] * n_system + [SECTION_KEY_TABLE] * order + [
        SECTION_BUFFER
    ] * len(node.buffer)
    table = rows[n_system : n_system + order]
    assert table[0][4:] == (None, None, node.children[0])
    assert [r[4] for r in table[1 : 1 + len(node.keys)]] == node.keys
    assert [r[6] for r in table[1 : 1 + len(node.keys)]] == node.children[1:]
    assert all(r[4:] == (None, None, None) for r in table[1 + len(node.keys) :])
    assert {r[4] for r in rows[:n_system]} == {"created_at_millis", "n_keys"}
    root_rows = node_rows(lh.root, lh.root_info.path, 1, order)
    assert {r[4] for r in root_rows if r[2] == SECTION_SYSTEM} >= {
        "lakehouse_def",
        "previous_root",
        "n_keys",
    }


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_units_agree_with_fsck_for_any_damaged_node(lake: Path, damage: str) -> None:
    lh = _open(lake)
    for location in _nodes(lh):
        path = lake / location
        original = path.read_bytes()
        if damage == "delete":
            path.unlink()
        else:
            path.write_bytes(original[:-10])
        for target in (1, 4, 16):
            SHARED_CACHE.clear()
            ours = validate_view(lh, target=target, deep=True)
            SHARED_CACHE.clear()
            reference = check_version(lh, deep=True)
            assert {(v.location, v.rule, v.detail) for v in ours.violations} == {
                (v.location, v.rule, v.detail) for v in reference.violations
            }, (location, target)
            assert any(v.location == location for v in ours.violations)
        path.write_bytes(original)
    SHARED_CACHE.clear()
    assert validate_view(lh, deep=True).ok


def test_units_agree_with_fsck_on_every_version(pristine: Path) -> None:
    lh = _open(pristine)
    for info in lh.versions():
        view = lh.at_version(info.version)
        for target in (1, 5, 50):
            ours = validate_view(view, target=target, deep=True)
            reference = check_version(view, deep=True)
            assert ours.ok and reference.ok
            assert ours.report.nodes_checked == reference.report.nodes_checked
            assert ours.report.keys_seen == reference.report.keys_seen
            assert ours.catalog_checked and ours.catalog_keys == len(list(view.items()))


def test_units_find_a_missing_definition_and_a_bad_key_like_fsck(lake: Path) -> None:
    lh = _open(lake)
    items = list(lh.items(K.TABLE_KEY_PREFIX))
    _, gone = items[3]
    os.unlink(lake / gone)
    bad_key = K.TABLE_KEY_PREFIX + "x"  # no valid padding: a key-shape violation
    writer = TreeWriter(lh.store, TreeShape.of(lh.lakehouse_def), lh.root)
    writer.put(bad_key, items[5][1])
    crafted = writer.finish()
    lh.commit_plan(lambda base: RootPlan(crafted, base.lakehouse_def_path), lambda latest: None)
    SHARED_CACHE.clear()
    ours = validate_view(lh, target=4, deep=True)
    SHARED_CACHE.clear()
    reference = check_version(lh, deep=True)
    found = {(v.location, v.rule, v.detail) for v in ours.violations}
    assert found == {(v.location, v.rule, v.detail) for v in reference.violations}
    assert {rule for _, rule, _ in found} == {"definition-missing", "key-shape"}


@pytest.mark.parametrize("kind", ["cycle", "shared"])
def test_units_agree_with_fsck_on_a_cycle_or_a_shared_node_in_the_top(
    lake: Path, kind: str
) -> None:
    from lakecore.core.locations import new_node_file_path

    lh = _open(lake)
    order = lh.lakehouse_def.order
    first = lh.root.children[0]
    if kind == "cycle":
        path = new_node_file_path()
        node = lh.store.load(first).copy()
        node.children[0] = path  # the node points at itself
        (lake / path).parent.mkdir(parents=True, exist_ok=True)
        (lake / path).write_bytes(encode_node(node, order))
        children = [path, *lh.root.children[1:]]
    else:
        children = [first, first, *lh.root.children[2:]]  # one subtree twice
    crafted = Node(lh.root.keys, lh.root.values, children, lh.root.buffer)
    lh.commit_plan(lambda base: RootPlan(crafted, base.lakehouse_def_path), lambda latest: None)
    for target in (1, 4, 50):
        SHARED_CACHE.clear()
        ours = validate_view(lh, target=target, deep=True)
        SHARED_CACHE.clear()
        reference = check_version(lh, deep=True)
        assert not reference.ok
        assert {(v.location, v.rule, v.detail) for v in ours.violations} == {
            (v.location, v.rule, v.detail) for v in reference.violations
        }, target


def test_units_find_a_node_shared_by_two_subtrees(lake: Path) -> None:
    lh = _open(lake)
    a, b = lh.root.children[0], lh.root.children[1]
    node_a, node_b = lh.store.load(a), lh.store.load(b).copy()
    node_b.children[0] = node_a.children[0]
    new_b = lh.store.write(node_b)
    crafted = Node(lh.root.keys, lh.root.values, [a, new_b, *lh.root.children[2:]], lh.root.buffer)
    lh.commit_plan(lambda base: RootPlan(crafted, base.lakehouse_def_path), lambda latest: None)
    SHARED_CACHE.clear()
    reference = check_version(lh)
    assert ("shared-node", new_b) in {(v.rule, v.location) for v in reference.violations}
    # Cut at the leaves, the top checker meets the leaf twice: exactly fsck's verdict.
    SHARED_CACHE.clear()
    ours = validate_view(lh, target=50)
    assert {(v.location, v.rule, v.detail) for v in ours.violations} == {
        (v.location, v.rule, v.detail) for v in reference.violations
    }
    # Cut below the root, a and new_b are separate subtree tasks: the driver sees the leaf twice.
    SHARED_CACHE.clear()
    ours = validate_view(lh, target=len(crafted.children))
    assert not ours.ok
    assert ("shared-node", node_a.children[0]) in {(v.rule, v.location) for v in ours.violations}
