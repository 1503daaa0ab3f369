"""Hostile structure: well-formed node files that describe an impossible or escaping tree.

Each case is crafted with ``encode_node`` and plain storage writes on a copy of a small
lakehouse (order 4), and committed as the next version:

    self-loop        an internal node whose child is itself
    ancestor-cycle   root -> A -> B -> A
    too-deep         a chain longer than order 4 allows (TreeShape.max_depth levels)
    pvalue-*         a table's pvalue that escapes the root: ``../outside/x``, an absolute path,
                     ``s3://other-bucket/x``, a ``file://`` URI elsewhere
    pnode-*          a child pointer that escapes the root, the same four ways (in an internal
                     node; ``root-pnode-*`` in the root itself)
    root-mismatch    root 3's bytes under root 5's name (the lakehouse was at version 4)

Reading (get, scan, list, load), fsck (``check_version`` deep, and ``lakecore fsck --deep``),
the validate job and gc (in-process and the job) must each detect the case and stop, and never
follow the pointer out of the root. The proof: every escape target exists as a *valid* file
(a table definition or a node) in a sentinel directory outside the root, watched with inotify
(IN_OPEN | IN_ACCESS, which sees every process, Spark's JVM and Python workers included); no
event may arrive. In-process, every ``Storage`` created is recorded and must be on the
lakehouse root (this covers ``s3://other-bucket``, which has no file to watch). gc must delete
nothing: the listing of the root and of the sentinel directory is unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lakecore.core import keys as K
from lakecore.core.defs import encode_def, table_def
from lakecore.core.locations import new_node_file_path, root_node_file_name
from lakecore.core.node import Node, encode_node
from lakecore.core.storage import Storage
from lakecore.core.tree import TreeShape
from lakecore.core.versions import encode_root, latest_version, write_hint
from lakecore.errors import LakecoreError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from lakecore.maintenance.gc import gc_in_process
from lakecore.maintenance.recheck import reach_new_versions
from tests.reliability.faulty_storage import clear_caches, emit_summary, tree_digest

pytestmark = pytest.mark.reliability

ORDER = 4
LAKE_DEF: dict[str, Any] = dict(
    order=ORDER,
    node_file_max_size_bytes=4096,
    namespace_name_max_size_bytes=16,
    table_name_max_size_bytes=16,
    file_name_max_size_bytes=100,
)
OTHER_BUCKET_URI = "s3://other-bucket/x.binpb"

# -- watching the sentinel directory -----------------------------------------------------------

IN_ACCESS = 0x1
IN_OPEN = 0x20
_EVENT = struct.Struct("iIII")


class OpenWatch:
    """inotify on one directory: did any process open or read a file in it?"""

    def __init__(self, directory: Path) -> None:
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if self.libc.inotify_add_watch(self.fd, str(directory).encode(), IN_OPEN | IN_ACCESS) < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch")
        self.events: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.events
            pos = 0
            while pos + _EVENT.size <= len(data):  # struct inotify_event, then the name
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
                name = (
                    data[pos + _EVENT.size : pos + _EVENT.size + length]
                    .rstrip(b"\0")
                    .decode(errors="replace")
                )
                self.events.append(f"{'open' if mask & IN_OPEN else 'read'} {name}")
                pos += _EVENT.size + length

    def close(self) -> None:
        os.close(self.fd)


# -- the template and the cases ----------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lakehouse at version 4 holding namespace ns and tables t00..t12."""
    path = tmp_path_factory.mktemp("hostile-structure") / "lake"
    lh = Lakehouse.create(str(path), name="hostile", **LAKE_DEF)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        for i in range(6):
            tx.create_table("ns", f"t{i:02d}")
    with lh.transaction() as tx:
        for i in range(6, 12):
            tx.create_table("ns", f"t{i:02d}")
    with lh.transaction() as tx:
        tx.create_table("ns", "t12")
    with lh.transaction() as tx:
        tx.update_table("ns", "t00", properties={"u": "1"})
    assert lh.version == 4
    return path


@dataclass
class Crafted:
    """A lakehouse with one hostile version, and what must fail on it."""

    name: str
    lake: Path
    outside: Path
    failing_reads: list[tuple[str, tuple[Any, ...]]]
    open_fails: bool = False  # the latest root itself is unreadable: opening must fail
    rules: set[str] = field(default_factory=set)  # fsck rules, any of which counts as detected

    @property
    def uri(self) -> str:
        return str(self.lake)


class Crafter:
    def __init__(self, lake: Path) -> None:
        self.storage = Storage(str(lake))
        clear_caches()
        self.lh = Lakehouse.open(str(lake))
        self.items = list(self.lh.items())  # (key, pvalue), sorted
        self.def_path = self.lh.root_info.lakehouse_def_path

    def kv(self, i: int) -> tuple[str, str]:
        return self.items[i]

    def leaf(self, *indexes: int) -> str:
        keys = [self.items[i][0] for i in indexes]
        values = [self.items[i][1] for i in indexes]
        return self.node(Node(keys, values))

    def node(self, node: Node, path: str | None = None) -> str:
        path = path or new_node_file_path()
        self.storage.write(path, encode_node(node, ORDER))
        return path

    def commit_root(self, node: Node) -> int:
        version = latest_version(self.storage) + 1
        data = encode_root(
            node,
            ORDER,
            lakehouse_def_path=self.def_path,
            previous_root=root_node_file_name(version - 1),
            created_at_millis=int(time.time() * 1000),
        )
        self.storage.create_exclusive(root_node_file_name(version), data)
        write_hint(self.storage, version)
        return version


def _sentinels(outside: Path) -> dict[str, str]:
    """Valid files outside the root, one per escape; returns the escaping location of each."""
    outside.mkdir()
    definition = encode_def(table_def("t_escape"))
    node = encode_node(Node(["C===zzz"], ["0000/0000/0000/00000000-table-x.binpb"]), ORDER)
    for name in ("rel", "abs", "uri"):
        (outside / f"{name}.binpb").write_bytes(definition)
        (outside / f"{name}.arrow").write_bytes(node)
    return {
        "relative": "../outside/rel",
        "absolute": str(outside / "abs"),
        "other-bucket": OTHER_BUCKET_URI.removesuffix(".binpb"),
        "file-uri": f"file://{outside}/uri",
    }


def _craft(name: str, template: Path, base: Path) -> Crafted:
    lake = base / "lake"
    shutil.copytree(template, lake)
    escapes = _sentinels(base / "outside")
    c = Crafter(lake)
    n = len(c.items)
    assert n >= 12
    k = [c.kv(i)[0] for i in range(n)]
    v = [c.kv(i)[1] for i in range(n)]
    middle_reads: list[tuple[str, tuple[Any, ...]]] = [
        ("get", (k[5],)),
        ("items", ()),
        ("list_tables", ("ns",)),
    ]
    if name == "self-loop":
        loop = new_node_file_path()
        c.node(Node([k[6]], [v[6]], [loop, c.leaf(9)]), loop)
        c.commit_root(Node([k[3]], [v[3]], [c.leaf(0, 1), loop]))
        return Crafted(name, lake, base / "outside", middle_reads, rules={"cycle"})
    if name == "ancestor-cycle":
        a, b = new_node_file_path(), new_node_file_path()
        c.node(Node([k[9]], [v[9]], [b, c.leaf(11)]), a)
        c.node(Node([k[6]], [v[6]], [c.leaf(4), a]), b)
        c.commit_root(Node([k[3]], [v[3]], [c.leaf(0, 1), a]))
        return Crafted(
            name,
            lake,
            base / "outside",
            [("get", (k[7],)), ("items", ()), ("list_tables", ("ns",))],
            rules={"cycle"},
        )
    if name == "too-deep":
        levels = TreeShape(ORDER, 1).max_depth + 2
        keys = [f"C===deep{10_000 - i:05d}" for i in range(levels)]
        child = c.node(Node(["C===deep00000"], ["x"]))
        for i in reversed(range(1, levels)):
            child = c.node(Node([keys[i]], ["x"], [child, c.node(Node([keys[i] + "a"], ["x"]))]))
        c.commit_root(Node([keys[0]], ["x"], [child, c.node(Node([keys[0] + "a"], ["x"]))]))
        return Crafted(
            name,
            lake,
            base / "outside",
            [("get", ("C===deep00000",)), ("items", ()), ("list_tables", ("ns",))],
            rules={"depth"},
        )
    if name.startswith("pvalue-"):
        target = escapes[name.removeprefix("pvalue-")]
        key = K.table_key("ns", "t_escape", c.lh.lakehouse_def)
        root = c.lh.root
        c.commit_root(Node(root.keys, root.values, root.children, {**root.buffer, key: target}))
        return Crafted(
            name,
            lake,
            base / "outside",
            [("load_table", ("ns", "t_escape"))],
            rules={"pvalue-location", "definition-missing"},
        )
    if name.startswith("pnode-"):
        target = escapes[name.removeprefix("pnode-")] + ".arrow"
        inner = c.node(Node([k[6]], [v[6]], [target, c.leaf(9)]))
        c.commit_root(Node([k[3]], [v[3]], [c.leaf(0, 1), inner]))
        return Crafted(name, lake, base / "outside", middle_reads, rules={"unreadable-node"})
    if name.startswith("root-pnode-"):
        target = escapes[name.removeprefix("root-pnode-")] + ".arrow"
        c.commit_root(Node([k[3]], [v[3]], [c.leaf(0, 1), target]))
        unreadable_root = name.endswith(
            ("relative", "absolute")
        )  # the decoder refuses the root itself
        return Crafted(
            name,
            lake,
            base / "outside",
            [("get", (k[5],)), ("items", ())],
            open_fails=unreadable_root,
            rules={"unreadable-node"},
        )
    if name == "root-mismatch":
        assert latest_version(c.storage) == 4
        (lake / root_node_file_name(5)).write_bytes((lake / root_node_file_name(3)).read_bytes())
        write_hint(c.storage, 5)
        return Crafted(name, lake, base / "outside", [], open_fails=True, rules={"unreadable-node"})
    raise AssertionError(name)


ESCAPES = ["relative", "absolute", "other-bucket", "file-uri"]
CASES = (
    ["self-loop", "ancestor-cycle", "too-deep", "root-mismatch"]
    + [f"pvalue-{e}" for e in ESCAPES]
    + [f"pnode-{e}" for e in ESCAPES]
    + [f"root-pnode-{e}" for e in ESCAPES]
)


# Cases whose files are damaged (a cycle, a tree too deep, a root or node file that cannot be
# decoded): gc refuses with exit 6 (DAMAGED) and the repair to run. A pointer that leaves the
# root is refused as a forgery gc will not collect around: exit 4.
DAMAGE_CASES = frozenset(
    {
        "self-loop",
        "ancestor-cycle",
        "too-deep",
        "root-mismatch",
        "pnode-relative",
        "pnode-absolute",
        "root-pnode-relative",
        "root-pnode-absolute",
    }
)


def gc_exit_code(name: str) -> int:
    return 6 if name in DAMAGE_CASES else 4


# -- the spies ---------------------------------------------------------------------------------


@contextlib.contextmanager
def watched(case: Crafted) -> Iterator[tuple[OpenWatch, list[str]]]:
    """inotify on the sentinel directory, and a record of every Storage root created here."""
    roots: list[str] = []
    original = Storage._setup

    def spy(self: Storage, root_uri: str, storage_options: Any) -> None:
        original(self, root_uri, storage_options)
        roots.append(self.root_uri)

    watch = OpenWatch(case.outside)
    Storage._setup = spy  # type: ignore[method-assign]
    try:
        yield watch, roots
    finally:
        Storage._setup = original  # type: ignore[method-assign]
        watch.drain()
        watch.close()


def _assert_never_left(case: Crafted, watch: OpenWatch, roots: list[str], what: str) -> None:
    events = watch.drain()
    assert not events, f"{case.name}: {what} opened a file outside the root: {events}"
    root = Storage(case.uri).root_uri
    foreign = sorted({r for r in roots if r != root})
    assert not foreign, f"{case.name}: {what} made a Storage outside the root: {foreign}"


TALLY: dict[str, int] = {
    "cases": 0,
    "reads_refused": 0,
    "fsck_detected": 0,
    "gc_refused": 0,
    "jobs_run": 0,
    "sentinel_opens": 0,
}


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    emit_summary("hostile_structure", **TALLY)


def _read(lh: Lakehouse, op: str, args: tuple[Any, ...]) -> Any:
    target: Callable[..., Any] = getattr(lh, op)
    result = target(*args)
    return list(result) if op == "items" else result


# -- reading and fsck, every case ----------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_reading_and_fsck_detect_and_stop(name: str, template: Path, tmp_path: Path) -> None:
    case = _craft(name, template, tmp_path)
    TALLY["cases"] += 1
    with watched(case) as (watch, roots):
        clear_caches()
        if case.open_fails:
            with pytest.raises(LakecoreError):
                Lakehouse.open(case.uri)
            TALLY["reads_refused"] += 1
            _assert_never_left(case, watch, roots, "opening")
        else:
            lh = Lakehouse.open(case.uri)
            for op, args in case.failing_reads:
                clear_caches()
                with pytest.raises(LakecoreError) as caught:
                    _read(lh, op, args)
                assert type(caught.value).__name__ in (
                    "TreeStructureError",
                    "CorruptNodeFileError",
                    "InvalidLocationError",
                ), caught.value
                TALLY["reads_refused"] += 1
            _assert_never_left(case, watch, roots, "reading")
            clear_caches()
            result = check_version(lh, deep=True)
            assert not result.ok, f"{name}: fsck found nothing"
            found = {v.rule for v in result.violations}
            assert found & case.rules, (
                f"{name}: fsck reported {found}, expected one of {case.rules}"
            )
            TALLY["fsck_detected"] += 1
            _assert_never_left(case, watch, roots, "fsck")
        # The command line: fsck --deep exits 1 (violations) or 6 (the latest root is damaged).
        from lakecore.cli import main as cli_main

        stderr = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            code = cli_main(["--lakehouse", case.uri, "fsck", "--deep"])
        assert code == (6 if case.open_fails else 1), (code, stderr.getvalue())
        assert len(stderr.getvalue().strip().splitlines()) <= 1
        _assert_never_left(case, watch, roots, "lakecore fsck")


@pytest.mark.parametrize("name", CASES)
def test_gc_in_process_refuses_and_deletes_nothing(
    name: str, template: Path, tmp_path: Path
) -> None:
    case = _craft(name, template, tmp_path)
    before, outside_before = tree_digest(case.lake), tree_digest(case.outside)
    with watched(case) as (watch, roots):
        clear_caches()
        refused = False
        try:
            gc_in_process(
                Storage(case.uri), now_millis=int(time.time() * 1000) + 10**9, grace_millis=0
            )
        except LakecoreError as exc:
            refused = True
            assert exc.exit_code == gc_exit_code(name), (name, exc.one_line())
        _assert_never_left(case, watch, roots, "gc")
    assert tree_digest(case.outside) == outside_before, "gc touched files outside the root"
    # A forged pvalue hides no node, but gc refuses it too (it used to proceed): the issue asks
    # every reader to detect an escaping pointer and stop.
    assert refused, f"{name}: gc did not refuse a version it cannot walk"
    assert tree_digest(case.lake) == before, f"{name}: gc deleted files"
    TALLY["gc_refused"] += 1


# -- the Spark jobs -------------------------------------------------------------------------------

JOB_CASES = [
    "self-loop",
    "ancestor-cycle",
    "too-deep",
    "root-mismatch",
    "pvalue-relative",
    "pvalue-file-uri",
    "pnode-relative",
    "pnode-file-uri",
    "root-pnode-file-uri",
]


@pytest.mark.spark
@pytest.mark.parametrize(
    "name", [pytest.param(c, marks=() if c in JOB_CASES else pytest.mark.slow) for c in CASES]
)
def test_validate_and_gc_jobs_detect_and_stop(
    name: str, template: Path, tmp_path: Path, run_job: Any
) -> None:
    from jobs.gc_job import main as gc_main
    from jobs.validate_job import main as validate_main

    case = _craft(name, template, tmp_path)
    before, outside_before = tree_digest(case.lake), tree_digest(case.outside)
    watch = OpenWatch(case.outside)
    try:
        code, report = run_job(
            validate_main,
            "--lakehouse",
            case.uri,
            "--deep",
            "--no-expectations",
            "--parallelism",
            "2",
        )
        assert code == 1, (code, report.get("error"), report.get("counts"))
        code, report = run_job(
            gc_main,
            "--lakehouse",
            case.uri,
            "--older-than",
            "0s",
            "--i-understand-grace-risk",
            "--parallelism",
            "2",
        )
        TALLY["jobs_run"] += 2
        events = watch.drain()
    finally:
        watch.close()
    TALLY["sentinel_opens"] += len(events)
    assert not events, f"{name}: a job opened a file outside the root: {events}"
    assert tree_digest(case.outside) == outside_before
    assert code == gc_exit_code(name), (code, report.get("error"))
    assert tree_digest(case.lake) == before, f"{name}: the gc job deleted files"


def test_regression_gc_refuses_a_forged_full_uri_child_whatever_the_cut(
    template: Path, tmp_path: Path
) -> None:
    """A root child ``file:///elsewhere/...`` in a lakehouse that is no export copy: gc refused
    when the cut descended into it (target_tasks=8) but proceeded when the cut stopped at the
    root's children (target_tasks=2, the job with --parallelism 2), where the pointer became a
    subtree task and was skipped as if it were an export's source. Now both refuse, naming it."""
    case = _craft("root-pnode-file-uri", template, tmp_path)
    before = tree_digest(case.lake)
    for target_tasks in (8, 2, 1):
        clear_caches()
        with pytest.raises(LakecoreError, match="file://"):
            gc_in_process(
                Storage(case.uri),
                now_millis=int(time.time() * 1000),
                grace_millis=0,
                target_tasks=target_tasks,
            )
    assert tree_digest(case.lake) == before


@pytest.mark.parametrize("name", ["pvalue-absolute", "pvalue-file-uri", "root-pnode-file-uri"])
def test_the_recheck_refuses_a_new_version_that_points_out_of_the_root(
    name: str, template: Path, tmp_path: Path
) -> None:
    """gc's re-check walks versions committed during the run itself: one whose value or node
    pointer leaves the root is refused there too, naming the pointer, before a file is read
    through it."""
    case = _craft(name, template, tmp_path)
    storage = Storage(case.uri)
    clear_caches()
    with watched(case) as (watch, roots):
        with pytest.raises(LakecoreError, match="a version committed during the run") as refused:
            reach_new_versions(storage, latest_version(storage) - 1, lambda asked: set())
        _assert_never_left(case, watch, roots, "the re-check")
    assert "outside" in str(refused.value) or "points out of" in str(refused.value)
