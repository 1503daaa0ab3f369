"""Model-based: over random histories of two Iceberg tables (appends, overwrites, deletes,
branches, tags, a file one table adds from the other, expiry properties, drops with and without
purge), interleaved with table-maintenance runs, nothing a retained snapshot reaches is ever
deleted.

The invariant is checked by the oracle of ``tests/iceberg_histories.py`` (pyiceberg's readers
through time-travel catalogs), never by the code under test: after every run, every file any
table of any retained lakehouse version names exists, and every snapshot of every table of the
latest version scans. A second property: a run deletes something only when the oracle agrees
nothing retained names it (the run's deletes are a subset of the unnamed files).

``make test`` runs a few short histories; ``-m slow`` runs many longer ones.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.exceptions import NoSuchTableError

from lakecore.core.storage import Storage
from lakecore.iceberg.expiry import CatalogCommitter
from lakecore.lakehouse import Lakehouse
from lakecore.maintenance.tables.result import TableMaintenanceOptions
from lakecore.maintenance.tables.run import table_maintenance_in_process
from tests.iceberg_histories import (
    DAY,
    SCHEMA,
    catalog_of,
    files_under,
    history,
    retained_named,
    rows,
)

TABLES = ("a", "b")
STEP = st.one_of(
    st.tuples(
        st.sampled_from(["append", "overwrite", "delete", "tag", "branch", "append@dev"]),
        st.sampled_from(TABLES),
    ),
    st.tuples(st.just("add-other"), st.sampled_from(TABLES)),
    st.tuples(st.just("min-keep"), st.sampled_from(TABLES)),
    st.tuples(st.sampled_from(["drop", "purge", "undrop"]), st.sampled_from(TABLES)),
    st.tuples(st.just("maintain"), st.sampled_from(["now", "later", "later-dry"])),
)


def _retained_versions(uri: str, now_millis: int) -> list[int]:
    """The versions retention keeps at ``now_millis``, by the rule of docs/format.md#retention
    (no export pins one here): the latest, the newest ``minimum_versions_to_keep``, and every
    version not older than ``maximum_version_age_millis``."""
    lh = Lakehouse.open(uri)
    settings = lh.lakehouse_def
    infos = sorted((v for v in lh.versions() if v.readable), key=lambda v: -v.version)
    kept = []
    for position, info in enumerate(infos):
        young = now_millis - int(info.created_at_millis or 0) <= settings.maximum_version_age_millis
        if position == 0 or position < settings.minimum_versions_to_keep or young:
            kept.append(info.version)
    return sorted(kept)


def _check(uri: str, now_millis: int) -> None:
    versions = _retained_versions(uri, now_millis)
    named = retained_named(uri, versions)
    present = files_under(Path(uri) / "warehouse")
    assert named.files <= present, sorted(named.files - present)[:5]
    catalog = catalog_of(uri)
    for identifier in catalog.list_tables("ns"):
        table = catalog.load_table(identifier)
        for snapshot in table.metadata.snapshots:
            table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()


def _apply(catalog: Any, uri: str, step: tuple[str, str], tag: list[int]) -> int | None:
    action, name = step
    identifier = f"ns.{name}"
    exists = catalog.table_exists(identifier)
    if action in ("drop", "purge", "undrop", "maintain"):
        return _lifecycle(catalog, uri, action, name, exists)
    if not exists:
        history(catalog, name, ["append"])
        return None
    table = catalog.load_table(identifier)
    tag[0] += 1
    if action == "append":
        table.append(rows(range(tag[0] * 10, tag[0] * 10 + 2)))
    elif action == "overwrite":
        table.overwrite(rows([tag[0]]))
    elif action == "delete":
        table.delete("id >= 0")
    elif action in ("tag", "branch") and table.current_snapshot() is not None:
        snapshot = table.current_snapshot()
        assert snapshot is not None
        manage = table.manage_snapshots()
        if action == "tag":
            manage.create_tag(snapshot.snapshot_id, f"t{tag[0]}").commit()
        elif "dev" not in table.metadata.refs:
            manage.create_branch(snapshot.snapshot_id, "dev").commit()
    elif action == "append@dev" and "dev" in table.metadata.refs:
        table.append(rows([tag[0]]), branch="dev")
    elif action == "add-other":
        other = (
            catalog.load_table(f"ns.{'b' if name == 'a' else 'a'}")
            if catalog.table_exists(f"ns.{'b' if name == 'a' else 'a'}")
            else None
        )
        if other is not None:
            files = [task.file.file_path for task in other.scan().plan_files()]
            if files:
                with contextlib.suppress(ValueError):  # already part of the table
                    table.add_files(files[:1])
    elif action == "min-keep":
        table.transaction().set_properties(
            {"history.expire.min-snapshots-to-keep": str(1 + tag[0] % 3)}
        ).commit_transaction()
    return None


def _lifecycle(catalog: Any, uri: str, action: str, name: str, exists: bool) -> int | None:
    """A drop, purge or undrop; or a maintenance run (returns its ``now``)."""
    identifier = f"ns.{name}"
    if action == "drop" and exists:
        catalog.drop_table(identifier)
    elif action == "purge" and exists:
        catalog.purge_table(identifier)
    elif action == "undrop" and not exists:
        # Refused when no retained version holds it or its files are gone (NoSuchTableError):
        # the refusals the undrop tests pin; here only what an undrop does may not break.
        with contextlib.suppress(NoSuchTableError):
            restored = catalog.undrop_table(identifier)
            assert restored is not None
            restored.scan().to_arrow()
    elif action == "maintain":
        later = int(time.time() * 1000) + (30 * DAY if name.startswith("later") else 0)
        options = TableMaintenanceOptions(
            grace_millis=3 * DAY,
            now_millis=later,
            override_grace=True,
            dry_run=name.endswith("dry"),
        )
        before = files_under(Path(uri) / "warehouse")
        result = table_maintenance_in_process(
            Storage(uri), CatalogCommitter(catalog, later, options.defaults), options
        )
        assert not result.blocked.problems
        gone = before - files_under(Path(uri) / "warehouse")
        if options.dry_run:
            assert not gone
        assert gone <= result.chosen
        return later
    return None


def _run_history(tmp_path: Path, latest_only: bool, steps: list[tuple[str, str]]) -> None:
    uri = str(tmp_path / "lake")
    if latest_only:
        Lakehouse.create(uri, minimum_versions_to_keep=1, maximum_version_age_millis=0)
    else:
        Lakehouse.create(uri)
    catalog = catalog_of(uri)
    catalog.create_namespace("ns")
    catalog.create_table("ns.a", SCHEMA)
    counter = [0]
    now = 0  # the latest "now" a run used: what it found past retention may be gone
    for step in [*steps, ("maintain", "later")]:
        ran = _apply(catalog, uri, step, counter)
        if ran is not None:
            now = max(now, ran)
            _check(uri, now)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(latest_only=st.booleans(), steps=st.lists(STEP, min_size=3, max_size=8))
def test_nothing_a_retained_snapshot_reaches_is_ever_deleted(
    tmp_path_factory: pytest.TempPathFactory, latest_only: bool, steps: list[tuple[str, str]]
) -> None:
    _run_history(tmp_path_factory.mktemp("model"), latest_only, steps)


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(latest_only=st.booleans(), steps=st.lists(STEP, min_size=5, max_size=25))
def test_nothing_a_retained_snapshot_reaches_is_ever_deleted_long(
    tmp_path_factory: pytest.TempPathFactory, latest_only: bool, steps: list[tuple[str, str]]
) -> None:
    _run_history(tmp_path_factory.mktemp("model"), latest_only, steps)
