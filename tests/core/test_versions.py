"""Versions on their own (lakecore/core/versions.py): root files, the hint, latest-version discovery,
reading a version by number and by time, and the retention arithmetic.

The catalog and the reliability suites exercise these through commits; here each rule is held
to its edge cases directly, on local disk and on ``memory://`` where only names matter.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import LATEST_HINT_FILE_NAME, MAX_VERSION, root_node_file_name
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.core.versions import (
    decode_root,
    encode_root,
    expired_versions,
    export_pins,
    highest_version,
    latest_version,
    list_root_versions,
    probe_up,
    read_hint,
    read_version,
    version_as_of,
    write_hint,
)
from lakecore.errors import InvalidLocationError, NotFoundError, VersionExpiredError
from lakecore.lakehouse import Lakehouse

DAY = 86_400_000


def memory_storage() -> Storage:
    return Storage(f"memory://versions-{uuid.uuid4().hex}")


def roots(storage: Storage, versions: range | list[int]) -> None:
    """Root files by name alone: what probing and listing look at."""
    for version in versions:
        storage.write(root_node_file_name(version), b"root")


@pytest.fixture
def lake(tmp_path: Path) -> Lakehouse:
    """Versions 0..5, one namespace each after the first."""
    lh = Lakehouse.create(str(tmp_path / "lake"), name="versions", order=8)
    for name in "abcde":
        time.sleep(0.002)  # each version in a millisecond of its own
        with lh.transaction() as tx:
            tx.create_namespace(name)
    return lh


def test_a_root_round_trips_with_its_system_rows() -> None:
    node = Node(keys=["B===a"], values=["a.binpb"])
    data = encode_root(
        node,
        8,
        lakehouse_def_path="_lakehouse_def_x.binpb",
        previous_root=root_node_file_name(6),
        created_at_millis=1_767_225_600_123,
        rollback_from_root=root_node_file_name(2),
    )
    root = decode_root(data, 7, "memory://x/" + root_node_file_name(7), 8)
    assert root.version == 7 and root.size == len(data)
    assert root.lakehouse_def_path == "_lakehouse_def_x.binpb"
    assert root.previous_root == root_node_file_name(6)
    assert root.rollback_from_root == root_node_file_name(2)
    assert root.created_at_millis == 1_767_225_600_123
    assert root.path == root_node_file_name(7)


def test_latest_is_the_end_of_the_chain_from_the_hint() -> None:
    storage = memory_storage()
    roots(storage, range(0, 5))
    assert latest_version(storage) == 4  # no hint: from the largest listed root
    write_hint(storage, 2)
    assert read_hint(storage) == 2 and latest_version(storage) == 4  # a hint behind: probe up


def test_a_long_way_behind_the_hint_is_found_by_galloping() -> None:
    storage = memory_storage()
    roots(storage, range(0, 1000))
    for start in (0, 1, 7, 8, 9, 500, 998, 999):
        assert probe_up(storage, start) == 999, start


def test_a_gap_below_never_hides_the_roots_above_it() -> None:
    """A probe from version 0 would stop at a gap (a dropped damaged version, versions expired
    below an export's pin) and a commit would take a number below newer roots."""
    storage = memory_storage()
    roots(storage, [0, 1, 3, 4, 5])
    assert latest_version(storage) == 5
    write_hint(storage, 2)  # a hint at the missing version: the listing decides
    assert latest_version(storage) == 5
    assert list_root_versions(storage) == [0, 1, 3, 4, 5]
    assert highest_version(storage) == 5


@pytest.mark.parametrize("hint", [b"", b"abc", b"-3", b"9" * 40, str(MAX_VERSION + 1).encode()])
def test_a_hint_that_is_not_a_version_is_no_hint(hint: bytes) -> None:
    storage = memory_storage()
    roots(storage, range(0, 3))
    storage.write(LATEST_HINT_FILE_NAME, hint)
    assert read_hint(storage) is None
    assert latest_version(storage) == 2


def test_no_root_at_all_is_no_lakehouse(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"no lakehouse at .*the folder does not exist"):
        latest_version(Storage(str(tmp_path / "nothing-here")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match="no root node file found"):
        latest_version(Storage(str(tmp_path / "empty")))
    assert highest_version(Storage(str(tmp_path / "empty"))) is None


def test_reading_a_version_says_why_it_is_not_there(lake: Lakehouse) -> None:
    storage = lake.storage
    assert read_version(storage, 3).version == 3
    with pytest.raises(NotFoundError, match="version 9 does not exist yet; the latest is 5"):
        read_version(storage, 9)
    storage.delete([root_node_file_name(2)])
    with pytest.raises(
        VersionExpiredError, match=r"missing from the log .* between versions 1 and 3"
    ):
        read_version(storage, 2)
    storage.delete([root_node_file_name(0), root_node_file_name(1)])
    with pytest.raises(VersionExpiredError, match="expired by version compaction; the oldest"):
        read_version(storage, 0)
    with pytest.raises(InvalidLocationError):
        read_version(storage, -1)


def test_as_of_a_time_is_the_newest_version_created_by_then(lake: Lakehouse) -> None:
    storage = lake.storage
    created = {v: read_version(storage, v).created_at_millis for v in range(6)}
    latest = read_version(storage, 5)
    for version, at in created.items():
        assert version_as_of(storage, at, latest).version == version
        if version:
            assert version_as_of(storage, at - 1, latest).version == version - 1
    assert version_as_of(storage, created[5] + DAY, latest).version == 5
    with pytest.raises(NotFoundError, match="did not exist yet"):
        version_as_of(storage, created[0] - 1, latest)


def test_as_of_a_time_inside_a_hole_cannot_be_told(lake: Lakehouse) -> None:
    storage = lake.storage
    latest = read_version(storage, 5)
    created_3 = read_version(storage, 3).created_at_millis
    created_5 = read_version(storage, 5).created_at_millis
    assert created_3 < created_5 - 1  # the fixture's commits are apart in time
    storage.delete([root_node_file_name(4)])
    # Version 4 is gone: at a time after version 3 was made, 4 may have been the newest.
    with pytest.raises(VersionExpiredError, match=r"cannot be told.*version 4"):
        version_as_of(storage, created_5 - 1, latest)


def definition(**changes: object) -> LakehouseDef:
    base = LakehouseDef(name="d")
    return base.with_changes(**changes) if changes else base


def test_expiry_keeps_the_latest_the_newest_n_the_young_and_the_pinned() -> None:
    now = 100 * DAY
    created = {v: now - (10 - v) * DAY for v in range(10)}  # v0 ten days old ... v9 one day old
    lakehouse_def = definition(maximum_version_age_millis=3 * DAY, minimum_versions_to_keep=2)
    # Older than 3 days: v0..v6 (v7 is exactly 3 days old, not older).
    assert expired_versions(created, 9, lakehouse_def, now) == [0, 1, 2, 3, 4, 5, 6]
    pinned = lakehouse_def.with_changes(
        exported_snapshots={"keep": root_node_file_name(4), "elsewhere": "s3://b/other/_x.arrow"}
    )
    assert export_pins(pinned) == {"keep": 4}
    assert expired_versions(created, 9, pinned, now) == [0, 1, 2, 3, 5, 6]
    override = lakehouse_def.with_changes(maximum_version_age_millis_overrides={2: 30 * DAY})
    assert 2 not in expired_versions(created, 9, override, now)
    keep_all = lakehouse_def.with_changes(minimum_versions_to_keep=10)
    assert expired_versions(created, 9, keep_all, now) == []
