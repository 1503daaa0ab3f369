"""Issue 11, part 6: exports can be listed and dropped, settings changed after init, and an
exported copy is read-only.

Each case does what a user does (the CLI, or a job's entrypoint, in a subprocess), checks the
message and the exit code, and compares a listing of the lakehouse folders (path -> bytes)
before and after: nothing may be lost, and a refused command writes nothing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from lakecore import clear_caches
from lakecore.core.locations import LATEST_HINT_FILE_NAME, root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.units import format_duration_millis, parse_duration_millis
from lakecore.errors import (
    AlreadyExistsError,
    ExitCode,
    InvalidArgumentError,
    NotFoundError,
    ReadOnlyLakehouseError,
)
from lakecore.lakehouse import Lakehouse

REPO = Path(__file__).resolve().parents[2]
DAY_MILLIS = 86_400_000
HINT = LATEST_HINT_FILE_NAME


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKECORE_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "lakecore.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )


def run_job(job: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A maintenance job's entrypoint, as spark-submit.sh runs it (refusals come before Spark)."""
    env = {**os.environ, "LAKECORE_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, f"jobs/{job}.py", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )


def listing(*folders: Path) -> dict[str, str]:
    """Every file under the folders: relative path -> digest of its bytes."""
    out = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                out[str(path.relative_to(folder.parent))] = hashlib.sha256(
                    path.read_bytes()
                ).hexdigest()
    return out


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def nothing_lost(
    before: dict[str, str], after: dict[str, str], *, may_change: Sequence[str] = ()
) -> set[str]:
    """Every file of ``before`` is still there with the same bytes (but the hints); returns the new files."""
    for path, digest in before.items():
        assert path in after, f"{path} was lost"
        if not path.endswith(tuple(may_change)):
            assert after[path] == digest, f"{path} was rewritten"
    return set(after) - set(before)


def json_out(proc: subprocess.CompletedProcess[str]) -> dict:  # type: ignore[type-arg]
    assert proc.returncode == 0, proc.stderr
    data: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    return data


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A small lakehouse: namespace ns with tables t00..t05 in versions 1..7 (order 4)."""
    path = tmp_path / "lake"
    lh = Lakehouse.create(
        str(path),
        name="lake",
        order=4,
        node_file_max_size_bytes=16384,
        namespace_name_max_size_bytes=16,
        table_name_max_size_bytes=16,
        file_name_max_size_bytes=100,
        minimum_versions_to_keep=1,
    )
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(6):
        with lh.transaction() as tx:
            tx.create_table("ns", f"t{i:02d}")
    return path


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("7d", 7 * DAY_MILLIS),
        ("12h", 12 * 3_600_000),
        ("90m", 5_400_000),
        ("30s", 30_000),
        ("250ms", 250),
        ("1.5h", 5_400_000),
        (" 2D ", 2 * DAY_MILLIS),
    ],
)
def test_durations_parse(text: str, millis: int) -> None:
    assert parse_duration_millis(text) == millis


@pytest.mark.parametrize(
    "text", ["", "7", "7w", "-1d", "d", "1e3s", "nan", "inf", "1 d 2h", "99999999999999999999d"]
)
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_duration_millis(text)


def test_plain_numbers_only_where_the_unit_is_named() -> None:
    from lakecore.contract.option_types import duration_millis

    assert parse_duration_millis("90", plain_unit="s") == 90_000
    older_than = duration_millis("duration", plain_unit="s")  # gc's --older-than
    assert older_than("90") == 90_000 and older_than("3d") == 3 * 86_400_000
    assert older_than("250ms") == 250
    assert [
        format_duration_millis(m) for m in (0, 7 * DAY_MILLIS, 5_400_000, 1500, 36 * 3_600_000)
    ] == ["0s", "7d", "90m", "1500ms", "36h"]


# -- exports: list and drop ------------------------------------------------------------------------


def test_export_list_and_drop_let_expiry_and_gc_collect_the_pinned_version(
    lake: Path, tmp_path: Path
) -> None:
    from lakecore.maintenance.expire import expire_in_process
    from lakecore.maintenance.gc import gc_in_process

    copy = tmp_path / "copy"
    proc = run("-l", str(lake), "export", "create", "keep", "--mode", "full", "--target", str(copy))
    assert proc.returncode == 0 and "recorded in version 8" in proc.stdout, proc.stderr
    assert (
        run("-l", str(lake), "export", "old-style", "--mode", "minimal").returncode == 0
    )  # `export NAME` still works
    lh = Lakehouse.open(str(lake))
    for i in range(6):  # the source moves on: what version 7 has is dropped here
        with lh.transaction() as tx:
            tx.drop_table("ns", f"t{i:02d}")
    listed = json_out(run("-l", str(lake), "--json", "export", "list"))
    assert [(e["name"], e["version"], e["mode"]) for e in listed["exports"]] == [
        ("keep", 7, "full"),
        ("old-style", 8, "minimal"),
    ]
    assert listed["exports"][0]["target"] == copy.as_uri() + "/"
    human = run("-l", str(lake), "export", "list")
    assert human.returncode == 0 and "keep  version 7  full" in human.stdout

    future = int(time.time() * 1000) + 30 * DAY_MILLIS
    # Pinned: version expiry keeps 7 (and 8) and every file they reach.
    clear_caches()
    first = expire_in_process(Storage(str(lake)), now_millis=future)
    assert 7 not in first.plan.expired and 8 not in first.plan.expired and 3 in first.plan.expired
    assert (lake / root_node_file_name(7)).exists()

    for name in ("keep", "old-style"):
        before = listing(lake, copy)
        proc = run("-l", str(lake), "export", "drop", name)
        assert proc.returncode == 0, proc.stderr
        assert f"dropped export {name!r}" in proc.stdout and "no longer pinned" in proc.stdout
        new = nothing_lost(before, listing(lake, copy), may_change=[HINT])
        assert len(new) == 2 and {p.rsplit(".", 1)[-1] for p in new} == {"arrow", "binpb"}, (
            new
        )  # a root + a definition
    assert json_out(run("-l", str(lake), "--json", "export", "list"))["exports"] == []

    # Unpinned: the next expiry takes version 7 and the files only it reached; gc finds no orphan left.
    clear_caches()
    second = expire_in_process(Storage(str(lake)), now_millis=future)
    assert 7 in second.plan.expired and 8 in second.plan.expired
    assert not (lake / root_node_file_name(7)).exists()
    assert second.files.deleted > 0, (
        "dropping the export freed nothing: not a test of what it pinned"
    )
    clear_caches()
    gc = gc_in_process(Storage(str(lake)), now_millis=future, grace_millis=0)
    assert gc.deleted.errors == []
    clear_caches()
    latest = Lakehouse.open(str(lake))
    assert latest.list_tables("ns") == []
    assert run("-l", str(lake), "fsck", "--all", "--deep").returncode == 0
    # The copy is a lakehouse of its own: dropping the record in the source did not touch it.
    assert Lakehouse.open(str(copy)).list_tables("ns") == [f"t{i:02d}" for i in range(6)]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (
            ["export", "drop", "nope"],
            ExitCode.NOT_FOUND,
            ["NotFoundError", "'nope'", "'snap'", "export list"],
        ),
        (["export", "drop"], ExitCode.BAD_INPUT, ["needs the export's NAME"]),
        (["export", "list", "snap"], ExitCode.BAD_INPUT, ["export list takes no NAME"]),
        (
            ["export", "drop", "snap", "--mode", "full"],
            ExitCode.BAD_INPUT,
            ["--mode only applies to export create"],
        ),
        (["export", "snap", "extra"], ExitCode.BAD_INPUT, ["unknown action 'snap'"]),
        (["export", "create", "snap"], ExitCode.BAD_INPUT, ["AlreadyExistsError", "export drop"]),
        (
            ["export", "create", "bad name"],
            ExitCode.BAD_INPUT,
            ["must be non-empty with no spaces"],
        ),
    ],
)
def test_refused_export_commands_write_nothing(
    lake: Path, args: list[str], code: int, words: list[str]
) -> None:
    assert run("-l", str(lake), "export", "snap").returncode == 0
    before = listing(lake)
    one_line_error(run("-l", str(lake), *args), code, *words)
    assert listing(lake) == before


def test_an_export_into_a_folder_of_other_files_is_refused_but_a_partial_copy_is_overwritten(
    lake: Path, tmp_path: Path
) -> None:
    """A mistyped --target (., ~) would have scattered the copy among someone's files; a copy
    that failed part-way left only lakehouse files, and a rerun still overwrites them."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "important.txt").write_text("mine\n")
    before, lake_before = listing(theirs), listing(lake)
    one_line_error(
        run("-l", str(lake), "export", "snap", "--mode", "full", "--target", str(theirs)),
        ExitCode.BAD_INPUT,
        "AlreadyExistsError",
        "already holds other files (important.txt)",
        "export to an empty or new folder",
    )
    assert listing(theirs) == before
    assert listing(lake) == lake_before
    # A full copy, then its root, definition and hint removed: what a copy that failed part-way
    # leaves (the files it reaches, no root). The rerun completes it.
    copy = tmp_path / "copy"
    assert (
        run("-l", str(lake), "export", "first", "--mode", "full", "--target", str(copy)).returncode
        == 0
    )
    for top in copy.iterdir():
        if top.is_file():
            top.unlink()
    assert any(copy.rglob("*.arrow")) or any(copy.rglob("*.binpb")), (
        "nothing copied: not a partial copy"
    )
    proc = run("-l", str(lake), "export", "second", "--mode", "full", "--target", str(copy))
    assert proc.returncode == 0, proc.stderr
    assert Lakehouse.open(str(copy)).version == 0


def test_an_export_target_reached_through_a_link_to_the_source_is_refused(
    lake: Path, tmp_path: Path
) -> None:
    """The trial: a target that was a symbolic link to the source was accepted, and the copy's
    files went into the source's hash folders. Roots are compared with links resolved."""
    hash_folder = next(p for p in lake.iterdir() if p.is_dir())
    cases = {
        "itself": (tmp_path / "to-lake", lake),
        "inside the lakehouse": (tmp_path / "to-hash-folder", hash_folder),
        "holds the lakehouse": (tmp_path / "to-parent", tmp_path),
    }
    before = listing(lake)
    for words, (link, target) in cases.items():
        link.symlink_to(target)
        proc = run("-l", str(lake), "export", "snap", "--mode", "full", "--target", str(link))
        one_line_error(proc, ExitCode.BAD_INPUT, "AlreadyExistsError", words, "links resolved")
    # The source named through a link, the target by its real path: the same folder.
    proc = run("-l", str(tmp_path / "to-lake"), "export", "snap", "--target", str(lake))
    one_line_error(proc, ExitCode.BAD_INPUT, "itself")
    assert listing(lake) == before
    assert Lakehouse.open(str(lake)).list_exports() == []


def test_two_exports_to_one_target_at_once_one_wins_and_the_other_says_so(
    lake: Path, tmp_path: Path
) -> None:
    """Two full exports to one target at once (a new-user trial): the loser failed with
    "AlreadyExistsError: file .../_000...arrow already exists" and left its own definition file
    beside the winner's. The winner is simulated inside the loser's copy, after its checks."""
    from lakecore.lakehouse.export import copy_reachable_files

    target = tmp_path / "copy"
    loser = Lakehouse.open(str(lake))

    def copy_then_lose_the_race(*args: object) -> None:
        copy_reachable_files(*args)  # type: ignore[arg-type]
        Lakehouse.open(str(lake)).export_snapshot("winner", "full", target=str(target))

    with pytest.raises(
        AlreadyExistsError,
        match=r"another export to file://.*/copy/ committed its version 0 first "
        r"\(two exports to one target at once\?\); that copy stands and this one records nothing",
    ):
        loser.export_snapshot(
            "loser", "full", target=str(target), copy_files=copy_then_lose_the_race
        )
    definitions = [p.name for p in target.iterdir() if p.name.startswith("_lakehouse_def")]
    assert len(definitions) == 1, definitions  # the winner's only
    assert Lakehouse.open(str(target)).version == 0
    assert [e.name for e in Lakehouse.open(str(lake)).list_exports()] == ["winner"]


def test_an_export_named_like_an_action_needs_the_create_form(lake: Path) -> None:
    proc = run("-l", str(lake), "export", "create", "list")
    assert proc.returncode == 0, proc.stderr
    assert [
        e["name"] for e in json_out(run("-l", str(lake), "--json", "export", "list"))["exports"]
    ] == ["list"]
    assert run("-l", str(lake), "export", "drop", "list").returncode == 0


def test_drop_export_is_an_optimistic_commit(lake: Path) -> None:
    """A stale object's drop rebases onto a concurrent commit and keeps it; a second drop of the
    same export (by another stale object) finds it gone."""
    a, b, c = (Lakehouse.open(str(lake)) for _ in range(3))
    a.export_snapshot("snap")
    stale = b.version
    with b.transaction() as tx:  # b is stale (a recorded the export): its commit rebases
        tx.create_namespace("other")
    c.refresh()
    assert c.drop_export("snap") > stale
    with pytest.raises(NotFoundError, match="no export named 'snap'"):
        a.drop_export("snap")  # a is stale: the export is already gone at the latest version
    latest = Lakehouse.open(str(lake))
    assert latest.list_exports() == [] and latest.list_namespaces() == ["ns", "other"]


# -- settings --------------------------------------------------------------------------------------


def test_settings_set_and_show(lake: Path) -> None:
    shown = json_out(run("-l", str(lake), "--json", "settings", "show"))
    assert (
        shown["maximum_version_age_millis"] == 7 * DAY_MILLIS
        and shown["minimum_versions_to_keep"] == 1
    )
    before = listing(lake)
    proc = run(
        "-l",
        str(lake),
        "settings",
        "set",
        "--maximum-version-age",
        "36h",
        "--minimum-versions-to-keep",
        "10",
        "--version-age-override",
        "3=30d",
        "--version-age-override",
        "4=90m",
        "--property",
        "owner=team-a",
    )
    assert proc.returncode == 0, proc.stderr
    assert "settings changed in version 8" in proc.stdout and "36h" in proc.stdout
    assert len(nothing_lost(before, listing(lake), may_change=[HINT])) == 2
    lh = Lakehouse.open(str(lake))
    d = lh.lakehouse_def
    assert (d.maximum_version_age_millis, d.minimum_versions_to_keep) == (36 * 3_600_000, 10)
    assert dict(d.maximum_version_age_millis_overrides) == {3: 30 * DAY_MILLIS, 4: 90 * 60_000}
    assert dict(d.properties) == {"owner": "team-a"}
    assert lh.list_tables("ns") == [f"t{i:02d}" for i in range(6)]  # the tree is untouched

    proc = run(
        "-l",
        str(lake),
        "settings",
        "set",
        "--unset-version-age-override",
        "4",
        "--unset-property",
        "owner",
        "--maximum-version-age-millis",
        "1000",
    )
    assert proc.returncode == 0, proc.stderr
    shown = json_out(run("-l", str(lake), "--json", "settings", "show"))
    assert shown["maximum_version_age_millis_overrides"] == {"3": 30 * DAY_MILLIS}
    assert (
        shown["properties"] == {}
        and shown["maximum_version_age_millis"] == 1000
        and shown["version"] == 9
    )


def test_a_settings_set_that_changes_nothing_commits_nothing(lake: Path) -> None:
    assert (
        run(
            "-l", str(lake), "settings", "set", "--maximum-version-age", "2d", "--property", "a=b"
        ).returncode
        == 0
    )
    before = listing(lake)
    proc = run(
        "-l",
        str(lake),
        "settings",
        "set",
        "--maximum-version-age-millis",
        str(2 * DAY_MILLIS),
        "--property",
        "a=b",
        "--minimum-versions-to-keep",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "nothing committed (version 8)" in proc.stdout
    assert listing(lake) == before


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        ([], ExitCode.BAD_INPUT, ["needs at least one change"]),
        (
            ["--minimum-versions-to-keep", "0"],
            ExitCode.BAD_INPUT,
            ["InvalidLakehouseDefError", "at least 1"],
        ),
        (
            ["--maximum-version-age", "7"],
            ExitCode.BAD_INPUT,
            ["--maximum-version-age '7'", "with a unit"],
        ),
        (["--maximum-version-age=-1d"], ExitCode.BAD_INPUT, ["is negative"]),
        (
            ["--maximum-version-age", "7d", "--maximum-version-age-millis", "5"],
            ExitCode.BAD_INPUT,
            ["not allowed with"],
        ),
        (
            ["--maximum-version-age-millis", "-5"],
            ExitCode.BAD_INPUT,
            ["maximum_version_age_millis must be"],
        ),
        (["--version-age-override", "x=1d"], ExitCode.BAD_INPUT, ["VERSION=DURATION"]),
        (["--version-age-override", "3=soon"], ExitCode.BAD_INPUT, ["age override of version 3"]),
        (
            ["--version-age-override", "3=1d", "--version-age-override", "3=2d"],
            ExitCode.BAD_INPUT,
            ["same version twice"],
        ),
        (
            ["--unset-version-age-override", "3"],
            ExitCode.NOT_FOUND,
            ["version 3 has no maximum-version-age override"],
        ),
        (["--unset-property", "owner"], ExitCode.NOT_FOUND, ["'owner' is not set"]),
        (
            ["--property", "lakecore.export.mode=full"],
            ExitCode.BAD_INPUT,
            ["is reserved"],
        ),
        (
            ["--property", "a=1", "--unset-property", "a"],
            ExitCode.BAD_INPUT,
            ["both set and unset"],
        ),
    ],
)
def test_refused_settings_write_nothing(
    lake: Path, args: list[str], code: int, words: list[str]
) -> None:
    before = listing(lake)
    one_line_error(run("-l", str(lake), "settings", "set", *args), code, *words)
    assert listing(lake) == before


def test_init_takes_durations_and_validates_as_settings_set(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert run("init", str(lake), "--maximum-version-age", "12h").returncode == 0
    assert (
        json_out(run("-l", str(lake), "--json", "settings", "show"))["maximum_version_age_millis"]
        == 12 * 3_600_000
    )
    other = tmp_path / "other"
    assert (
        run("init", str(other), "--maximum-version-age-millis", "5000").returncode == 0
    )  # the old spelling
    assert Lakehouse.open(str(other)).lakehouse_def.maximum_version_age_millis == 5000
    for args, words in (
        (["--maximum-version-age", "12"], "with a unit"),
        (["--property", "lakecore.exports.x.mode=full"], "is reserved"),
        (["--minimum-versions-to-keep", "0"], "at least 1"),
    ):
        one_line_error(run("init", str(tmp_path / "refused"), *args), ExitCode.BAD_INPUT, *[words])
        assert not (tmp_path / "refused").exists() or listing(tmp_path / "refused") == {}


# -- an exported copy is read-only -----------------------------------------------------------------


@pytest.mark.spark  # runs the jobs through spark-submit.sh on the copy
@pytest.mark.parametrize("mode", ["minimal", "full"])
def test_an_exported_copy_refuses_changes_and_keeps_serving_reads(
    lake: Path, tmp_path: Path, mode: str
) -> None:
    copy = tmp_path / "copy"
    assert (
        run("-l", str(lake), "export", "snap", "--mode", mode, "--target", str(copy)).returncode
        == 0
    )
    before = listing(lake, copy)
    c = str(copy)
    refused = [
        ["-l", c, "namespace", "create", "x"],
        ["-l", c, "table", "drop", "ns", "t00"],
        ["-l", c, "rollback", "--to-version", "0"],
        ["-l", c, "settings", "set", "--maximum-version-age", "1d"],
        ["-l", c, "export", "again", "--target", str(tmp_path / "copy2")],
        ["-l", c, "export", "drop", "snap"],
    ]
    for args in refused:
        line = one_line_error(
            run(*args),
            ExitCode.BAD_INPUT,
            "ReadOnlyLakehouseError",
            f"read-only {mode} export 'snap'",
            f"of version 7 of {lake.as_uri()}/",
            "source lakehouse",
        )
        assert c in line
    for job, args in (
        ("flush", ["--mode", "full"]),
        ("repair", ["rollback", "--to-version", "0", "--yes"]),
        ("export", ["--name", "again", "--mode", "full", "--target", str(tmp_path / "copy3")]),
    ):
        proc = run_job(job, "--lakehouse", c, *args)
        assert proc.returncode == ExitCode.BAD_INPUT, (job, proc.stdout, proc.stderr)
        assert "ReadOnlyLakehouseError" in proc.stderr and "read-only" in proc.stderr
    assert listing(lake, copy) == before
    assert not (tmp_path / "copy2").exists() and not (tmp_path / "copy3").exists()

    # Reads, time travel and checks work as before.
    assert run("-l", c, "table", "list", "ns").stdout.split() == [f"t{i:02d}" for i in range(6)]
    assert run("-l", c, "--json", "table", "show", "ns", "t03", "--version", "0").returncode == 0
    assert json_out(run("-l", c, "--json", "fsck", "--all", "--deep"))["ok"] is True
    assert "read-only" in run("-l", c, "settings", "show").stdout
    assert [v["version"] for v in json.loads(run("-l", c, "--json", "versions").stdout)] == [0]
    assert listing(lake, copy) == before


def test_expiry_never_expires_a_copy_s_versions(tmp_path: Path) -> None:
    """A copy that took commits before copies refused them: version expiry keeps its versions."""
    from lakecore.maintenance.expire import expire_in_process

    path = tmp_path / "old-copy"
    lh = Lakehouse.create(str(path), minimum_versions_to_keep=1)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    # What an exported copy's definition says (written the way an old lakecore let commits through).
    lh.update_definition(
        lambda d: replace(
            d,
            properties={
                "lakecore.export.mode": "full",
                "lakecore.export.name": "n",
                "lakecore.export.version": "4",
            },
        )
    )
    with pytest.raises(ReadOnlyLakehouseError), lh.transaction() as tx:
        tx.create_namespace("more")
    before = listing(path)
    with pytest.raises(
        ReadOnlyLakehouseError, match=r"cannot expire versions \[0, 1\].*nothing was deleted"
    ):
        expire_in_process(Storage(str(path)), now_millis=int(time.time() * 1000) + 30 * DAY_MILLIS)
    assert listing(path) == before
    # With nothing to expire it runs as on any lakehouse.
    assert (
        expire_in_process(Storage(str(path)), now_millis=int(time.time() * 1000)).plan.expired == []
    )


def test_a_dropped_export_pins_while_a_retained_definition_still_names_it(lake: Path) -> None:
    """With minimum_versions_to_keep 3 the two versions before the drop stay, and their
    definitions still name the export: it pins until they expire too."""
    from lakecore.maintenance.expire import plan_expiry

    lh = Lakehouse.open(str(lake))
    lh.update_settings(minimum_versions_to_keep=3)  # 8
    lh.export_snapshot("snap", version=5)  # 9
    with lh.transaction() as tx:  # 10
        tx.drop_table("ns", "t00")
    lh.drop_export("snap")  # 11: retained with 9 and 10, which name the export
    future = int(time.time() * 1000) + 30 * DAY_MILLIS
    plan = plan_expiry(Storage(str(lake)), future)
    assert plan.pinned == {"snap": 5} and 5 not in plan.expired and plan.retained == [5, 9, 10, 11]
    for i in (1, 2):  # two more versions push 9 and 10 out of the newest three
        with lh.transaction() as tx:
            tx.drop_table("ns", f"t{i:02d}")
    plan = plan_expiry(Storage(str(lake)), future)
    assert plan.pinned == {} and 5 in plan.expired and plan.retained == [11, 12, 13]
