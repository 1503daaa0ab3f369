"""Storage over file://, memory:// and s3:// (moto's server on 127.0.0.1)."""

from __future__ import annotations

import errno
import multiprocessing
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from lakecore.cli import main as cli_main
from lakecore.core.locations import FileKind, classify_path, new_temp_path
from lakecore.core.storage import S3_MAX_POOL_CONNECTIONS, FileInfo, Storage, parse_storage_options
from lakecore.errors import (
    AlreadyExistsError,
    ExitCode,
    InvalidArgumentError,
    InvalidLocationError,
    LakecoreError,
    NotFoundError,
    StorageError,
    StorageTimeoutError,
)
from tests.conftest import MotoClock, S3TestServer, SilentEndpoint

BACKENDS = ["file", "memory", pytest.param("s3", marks=pytest.mark.s3)]
BAD_PATHS = ["../x", "/abs", "s3://other/x", "a//b", "a/./b", "a/../b", "", "a/"]


@dataclass
class Roots:
    """Where one test's lakehouse roots live: ``<base>/<name>/``, all fresh."""

    kind: str
    base: str  # no trailing '/'
    options: dict[str, Any]

    def make(self, name: str = "lake") -> Storage:
        return Storage(f"{self.base}/{name}", self.options)

    def outer(self) -> Storage:
        """A storage over the whole base, to see what was written next to the roots."""
        return Storage(self.base, self.options)


@pytest.fixture(params=BACKENDS)
def roots(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Roots]:
    kind: str = request.param
    if kind == "file":
        yield Roots(kind, str(tmp_path), {})
    elif kind == "memory":
        r = Roots(kind, f"memory://lakecore-test-{uuid.uuid4()}", {})
        yield r
        outer = r.outer()
        outer.delete(info.path for info in outer.list())
    else:
        s3: S3TestServer = request.getfixturevalue("s3_server")
        root, options = s3.new_root()
        yield Roots(kind, root.rstrip("/"), options)


def paths_of(infos: list[FileInfo]) -> set[str]:
    return {info.path for info in infos}


# ---------------------------------------------------------------------------------------------
# Round trips


def test_round_trip(roots: Roots) -> None:
    st = roots.make()
    assert st.root_uri.endswith("/lake/")
    assert not st.exists("_latest_hint.txt")
    assert st.list() == [] and st.list_top_level() == []

    st.write("_latest_hint.txt", b"7")
    st.write("0110/0000/1011/01111000-node-a.arrow", b"0123456789")
    assert st.read("_latest_hint.txt") == b"7"
    assert st.exists("0110/0000/1011/01111000-node-a.arrow")
    assert st.size("0110/0000/1011/01111000-node-a.arrow") == 10
    assert st.read_range("0110/0000/1011/01111000-node-a.arrow", 2, 5) == b"234"
    assert st.read_range("0110/0000/1011/01111000-node-a.arrow", 8, 100) == b"89"
    assert st.read_range("0110/0000/1011/01111000-node-a.arrow", 10, 20) == b""
    assert st.read_range("0110/0000/1011/01111000-node-a.arrow", 3, 3) == b""

    st.write("_latest_hint.txt", b"12")  # overwrite
    assert st.read("_latest_hint.txt") == b"12"
    st.write("empty", b"")
    assert st.read("empty") == b"" and st.size("empty") == 0 and st.exists("empty")

    assert paths_of(st.list()) == {
        "_latest_hint.txt",
        "0110/0000/1011/01111000-node-a.arrow",
        "empty",
    }
    assert paths_of(st.list_top_level()) == {"_latest_hint.txt", "empty"}
    assert st.uri("_latest_hint.txt") == st.root_uri + "_latest_hint.txt"

    assert st.delete(["_latest_hint.txt", "0110/0000/1011/01111000-node-a.arrow"]) == 2
    assert not st.exists("_latest_hint.txt")
    assert paths_of(st.list()) == {"empty"}


def test_file_info(roots: Roots) -> None:
    st = roots.make()
    before = time.time()
    st.write("d/file.bin", b"x" * 1234)
    after = time.time()
    [info] = st.list()
    assert info.path == "d/file.bin" and info.size == 1234
    # S3 LastModified has one-second resolution; allow for it and for clock skew.
    assert (before - 5) * 1000 <= info.mtime_millis <= (after + 5) * 1000
    assert st.info("d/file.bin") == info


def test_list_paths_is_list_as_columns(roots: Roots) -> None:
    st = roots.make()
    for path in ["a/x", "a/b/z", "ab/y", "top"]:
        st.write(path, path.encode() * 3)
    listed = st.list_paths("a")
    assert sorted(listed.paths) == ["a/b/z", "a/x"]
    by_path = {info.path: info for info in st.list("a")}
    if roots.kind == "file":
        # A local listing reads names only: a size or time would cost a stat per file.
        assert listed.sizes is None and listed.mtimes_millis is None
    else:
        assert listed.sizes is not None and listed.mtimes_millis is not None
        assert [by_path[p].size for p in listed.paths] == listed.sizes
        assert [by_path[p].mtime_millis for p in listed.paths] == listed.mtimes_millis
    assert sorted(st.list_paths().paths) == ["a/b/z", "a/x", "ab/y", "top"]
    assert st.list_paths("zzz").paths == [] and st.list_paths("top").paths == []


def test_missing_files(roots: Roots) -> None:
    st = roots.make()
    for call in (
        lambda: st.read("nope"),
        lambda: st.size("nope"),
        lambda: st.info("nope"),
        lambda: st.read_range("nope", 0, 4),
        lambda: st.read_range("nope", 0, 0),
    ):
        with pytest.raises(NotFoundError) as info:
            call()
        assert st.uri("nope") in str(info.value)
    assert not st.exists("nope")
    assert st.delete(["nope"]) in (0, 1)  # S3 acknowledges missing keys as deleted
    assert st.list("nope") == []


def test_directory_is_not_a_file(roots: Roots) -> None:
    st = roots.make()
    st.write("dir/file", b"abc")
    assert not st.exists("dir")
    with pytest.raises(NotFoundError):
        st.read("dir")
    with pytest.raises(NotFoundError):
        st.size("dir")
    with pytest.raises(NotFoundError):
        st.info("dir")


def test_read_range_arguments(roots: Roots) -> None:
    st = roots.make()
    st.write("f", b"abc")
    for start, end in [(-1, 2), (2, 1)]:
        with pytest.raises(InvalidArgumentError):
            st.read_range("f", start, end)


def test_write_rejects_text(roots: Roots) -> None:
    st = roots.make()
    with pytest.raises(InvalidArgumentError):
        st.write("f", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        st.create_exclusive("f", "text")  # type: ignore[arg-type]
    assert roots.outer().list() == []


# ---------------------------------------------------------------------------------------------
# Paths never leave the root


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_invalid_paths_are_refused(roots: Roots, bad: str) -> None:
    st = roots.make()
    st.write("keep", b"k")
    calls: dict[str, Callable[[], object]] = {
        "uri": lambda: st.uri(bad),
        "read": lambda: st.read(bad),
        "read_range": lambda: st.read_range(bad, 0, 1),
        "size": lambda: st.size(bad),
        "exists": lambda: st.exists(bad),
        "write": lambda: st.write(bad, b"evil"),
        "create_exclusive": lambda: st.create_exclusive(bad, b"evil"),
        "delete": lambda: st.delete(["keep", bad]),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidLocationError):
            call()
            pytest.fail(f"{name}({bad!r}) was accepted")
    if bad not in ("", "a/"):  # '' is the whole root and 'a/' is directory 'a' for list
        with pytest.raises(InvalidLocationError):
            st.list(bad)
    # Nothing written anywhere next to the root, and the one-bad-path delete deleted nothing.
    assert paths_of(roots.outer().list()) == {"lake/keep"}


def test_list_prefix_is_a_directory(roots: Roots) -> None:
    st = roots.make()
    for path in ["a/x", "a/b/z", "ab/y", "top", "abc"]:
        st.write(path, path.encode())
    assert paths_of(st.list("a")) == {"a/x", "a/b/z"}
    assert paths_of(st.list("a/")) == {"a/x", "a/b/z"}
    assert paths_of(st.list("a/b")) == {"a/b/z"}
    assert paths_of(st.list("ab")) == {"ab/y"}
    assert st.list("abc") == []  # a file is not a directory
    assert st.list("zzz") == []
    assert paths_of(st.list()) == {"a/x", "a/b/z", "ab/y", "top", "abc"}
    assert paths_of(st.list_top_level()) == {"top", "abc"}


def test_neighbour_roots_are_invisible(roots: Roots) -> None:
    lake, lake2 = roots.make("lake"), roots.make("lake2")
    for st in (lake, lake2):
        st.write("_latest_hint.txt", st.root_uri.encode())
        st.write("0000/0000/0000/00000000-node-x.arrow", b"n")
    lake2.write("only-in-lake2", b"2")
    lake2.write("d/only-in-lake2", b"2")

    assert paths_of(lake.list()) == {"_latest_hint.txt", "0000/0000/0000/00000000-node-x.arrow"}
    assert paths_of(lake.list_top_level()) == {"_latest_hint.txt"}
    assert lake.list("d") == []
    assert not lake.exists("only-in-lake2")
    with pytest.raises(InvalidLocationError):
        lake.delete(["../lake2/only-in-lake2"])

    assert lake.delete(info.path for info in lake.list()) == 2
    assert lake.list() == []
    assert paths_of(lake2.list()) == {
        "_latest_hint.txt",
        "0000/0000/0000/00000000-node-x.arrow",
        "only-in-lake2",
        "d/only-in-lake2",
    }
    assert lake2.read("_latest_hint.txt") == lake2.root_uri.encode()


def test_delete_in_batches(roots: Roots) -> None:
    st = roots.make()
    paths = [f"b/f{i:02d}" for i in range(25)]
    for p in paths:
        st.write(p, b"x")
    st.write("stay", b"s")
    deleted = st.delete(iter([*paths, "b/f00", "missing"]), batch_size=7)
    # Duplicates count once; S3 cannot tell a missing key from a deleted one.
    assert deleted == (26 if roots.kind == "s3" else 25)
    assert paths_of(st.list()) == {"stay"}
    assert st.delete([]) == 0
    with pytest.raises(InvalidArgumentError):
        st.delete(["stay"], batch_size=0)
    with pytest.raises(InvalidArgumentError):
        st.delete("stay")
    assert st.exists("stay")


# ---------------------------------------------------------------------------------------------
# Exclusive create


def test_create_exclusive(roots: Roots) -> None:
    st = roots.make()
    st.create_exclusive("_00000000000000000000000000000000.arrow", b"first")
    with pytest.raises(AlreadyExistsError) as info:
        st.create_exclusive("_00000000000000000000000000000000.arrow", b"second")
    assert st.uri("_00000000000000000000000000000000.arrow") in str(info.value)
    assert st.read("_00000000000000000000000000000000.arrow") == b"first"
    st.create_exclusive("0000/0000/0000/00000000-deep.arrow", b"deep")  # parents made as needed
    # No temporary file is left behind.
    assert paths_of(st.list()) == {
        "_00000000000000000000000000000000.arrow",
        "0000/0000/0000/00000000-deep.arrow",
    }


def test_create_exclusive_race_between_threads(roots: Roots) -> None:
    st = roots.make()
    target = "_10000000000000000000000000000000.arrow"
    n = 32
    barrier = threading.Barrier(n)
    outcomes: list[str] = [""] * n

    def contender(i: int) -> None:
        st.exists("warm-up")  # build this thread's client before the race starts
        barrier.wait()
        try:
            st.create_exclusive(target, f"writer {i} ".encode() * (i + 1))
            outcomes[i] = "won"
        except AlreadyExistsError:
            outcomes[i] = "lost"
        except Exception as exc:
            outcomes[i] = f"error {exc!r}"

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    winners = [i for i, outcome in enumerate(outcomes) if outcome == "won"]
    assert len(winners) == 1, outcomes
    assert outcomes.count("lost") == n - 1, outcomes
    assert st.read(target) == f"writer {winners[0]} ".encode() * (winners[0] + 1)
    assert paths_of(st.list()) == {target}


def _race_in_process(root: str, tag: str, count: int, start: Any, results: Any) -> None:
    st = Storage(root)
    start.wait()
    won = []
    for i in range(count):
        try:
            st.create_exclusive(f"f{i}", f"{tag}-{i}".encode())
            won.append(i)
        except AlreadyExistsError:
            pass
    results.put((tag, won))


def test_create_exclusive_race_between_processes(tmp_path: Any) -> None:
    root = str(tmp_path / "lake")
    count = 200
    # spawn, not fork: the test process may already run moto's and fsspec's threads.
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_race_in_process, args=(root, tag, count, start, results))
        for tag in ("p1", "p2")
    ]
    for p in procs:
        p.start()
    start.set()
    won = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert set(won["p1"]).isdisjoint(won["p2"])
    assert sorted(won["p1"] + won["p2"]) == list(range(count))
    st = Storage(root)
    for tag, indices in won.items():
        for i in indices:
            assert st.read(f"f{i}") == f"{tag}-{i}".encode()
    assert len(st.list()) == count  # no temp files left


def test_local_crash_leaves_no_torn_target(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    st = Storage(str(tmp_path / "lake"))
    target = "_01000000000000000000000000000000.arrow"
    # A writer that crashed after writing part of its temp file, before publishing it.
    leftover = new_temp_path("")
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / leftover).write_bytes(b"half a ro")
    classified = classify_path(leftover)
    assert classified is not None and classified.kind == FileKind.TEMP

    # A crash at the publishing step: the target must not appear at all.
    def crash(src: str, dst: str) -> None:
        raise KeyboardInterrupt("simulated crash before link")

    monkeypatch.setattr(os, "link", crash)
    with pytest.raises(KeyboardInterrupt):
        st.create_exclusive(target, b"the whole root file")
    monkeypatch.undo()
    assert not st.exists(target)

    # Neither leftover blocks the create, and the target holds exactly the new bytes.
    st.create_exclusive(target, b"the whole root file")
    assert st.read(target) == b"the whole root file"
    assert st.read(leftover) == b"half a ro"
    assert paths_of(st.list()) == {target, leftover}


def test_local_without_hard_links_is_a_clear_error(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = Storage(str(tmp_path))

    def no_links(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    with pytest.raises(StorageError, match="hard links"):
        st.create_exclusive("r", b"x")
    monkeypatch.undo()
    assert st.list() == []  # the temp file went away too


def test_local_write_replaces_atomically(tmp_path: Any) -> None:
    st = Storage(str(tmp_path))
    st.write("_latest_hint.txt", b"1")
    st.write("_latest_hint.txt", b"22")
    assert st.read("_latest_hint.txt") == b"22"
    assert [p.name for p in tmp_path.iterdir()] == ["_latest_hint.txt"]


def test_exclusive_create_refused_for_other_schemes() -> None:
    st = Storage("http://example.invalid/lake")
    with pytest.raises(LakecoreError, match=r"http://") as info:
        st.create_exclusive("_00000000000000000000000000000000.arrow", b"x")
    assert not isinstance(info.value, AlreadyExistsError)


# ---------------------------------------------------------------------------------------------
# Pickling, fingerprint


def test_pickle_round_trip(roots: Roots) -> None:
    st = roots.make()
    st.write("a", b"1")  # a live client now exists in this thread
    blob = pickle.dumps(st)
    assert b"S3FileSystem" not in blob and b"MemoryFileSystem" not in blob
    assert st.__getstate__() == {"root_uri": st.root_uri, "storage_options": roots.options}
    copy = pickle.loads(blob)
    assert copy.root_uri == st.root_uri
    assert copy.fingerprint() == st.fingerprint()
    assert copy.read("a") == b"1"
    copy.write("b", b"2")
    assert st.read("b") == b"2"


def test_fingerprint_is_per_root(roots: Roots) -> None:
    a, b = roots.make("a"), roots.make("b")
    assert a.fingerprint() == roots.make("a").fingerprint()
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint().startswith(a.root_uri)


# ---------------------------------------------------------------------------------------------
# S3 specifics


def _use_after_fork(st: Storage, results: Any) -> None:
    try:
        st.write("from-child", b"child")
        results.put(st.read("from-child"))
    except BaseException as exc:
        results.put(repr(exc))


@pytest.mark.s3
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_s3_works_in_a_child_process(s3_server: S3TestServer, start_method: str) -> None:
    # fork: the child inherits a live client (Spark's python workers fork); spawn: the child
    # gets the Storage by pickle (as an executor does).
    root, options = s3_server.new_root()
    st = Storage(root, options)
    st.write("from-parent", b"parent")  # the parent's client and event loop exist now
    ctx = multiprocessing.get_context(start_method)
    results = ctx.Queue()
    child = ctx.Process(target=_use_after_fork, args=(st, results))
    child.start()
    try:
        assert results.get(timeout=30) == b"child"
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    assert st.read("from-child") == b"child"


def _count_filesystems(
    monkeypatch: pytest.MonkeyPatch, build_seconds: float = 0.0
) -> list[dict[str, Any]]:
    """The options of every fsspec file system built from now on (one per client); each build
    takes at least ``build_seconds`` (to widen a race)."""
    import fsspec

    built: list[dict[str, Any]] = []
    real_filesystem = fsspec.filesystem

    def counting(protocol: str, **options: Any) -> Any:
        built.append({"protocol": protocol, **options})
        time.sleep(build_seconds)
        return real_filesystem(protocol, **options)

    monkeypatch.setattr(fsspec, "filesystem", counting)
    return built


@pytest.mark.s3
def test_s3_clients_are_reused_across_storages_and_threads(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Spark task unpickles a fresh Storage each time; each must not build a new S3 client.
    # Nor must each thread: every s3fs client runs on fsspec's one IO thread anyway.
    built = _count_filesystems(monkeypatch)
    root, options = s3_server.new_root()
    Storage(root, options).write("a", b"1")
    for _ in range(3):
        copy = pickle.loads(pickle.dumps(Storage(root, options)))
        assert copy.read("a") == b"1"
    assert len(built) == 1
    other_root, _ = s3_server.new_root()
    Storage(other_root, options).write("b", b"2")  # another root: its own client
    assert len(built) == 2
    worker = threading.Thread(target=lambda: Storage(root, options).read("a"))
    worker.start()
    worker.join()
    assert len(built) == 2  # another thread: the same client
    assert {b["protocol"] for b in built} == {"s3"}


@pytest.mark.s3
def test_s3_threads_starting_at_once_build_one_client(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job's first step reads its roots from 16 threads at once; they must share one client
    # with a connection pool wide enough for all of them.
    built = _count_filesystems(monkeypatch, build_seconds=0.2)
    root, options = s3_server.new_root()
    Storage(root, options).write("a", b"1")
    built.clear()
    # Other options (the same server): a client of their own, built while the threads race.
    racing = {**options, "lakecore_timeout_seconds": 299}
    threads = 16
    start = threading.Barrier(threads)

    def read() -> bytes:
        storage = pickle.loads(pickle.dumps(Storage(root, racing)))
        start.wait()
        return storage.read("a")

    with ThreadPoolExecutor(threads) as pool:
        assert list(pool.map(lambda _: read(), range(threads))) == [b"1"] * threads
    assert len(built) == 1
    assert built[0]["config_kwargs"]["max_pool_connections"] == S3_MAX_POOL_CONNECTIONS


@pytest.mark.s3
def test_s3_connection_pool_size_can_be_set(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _count_filesystems(monkeypatch)
    root, options = s3_server.new_root()
    Storage(root, {**options, "config_kwargs": {"max_pool_connections": 3}}).write("a", b"1")
    assert built[0]["config_kwargs"]["max_pool_connections"] == 3


@pytest.mark.s3
def test_s3_endpoint_from_environment(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = s3_server.new_root()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    st = Storage(root)
    st.write("x", b"via env")
    assert st.read("x") == b"via env"
    assert s3_server.endpoint in st.fingerprint()


@pytest.mark.s3
def test_s3_directory_markers_and_foreign_keys_are_not_listed(s3_server: S3TestServer) -> None:
    root, options = s3_server.new_root()
    st = Storage(root, options)
    st.write("d/real", b"r")
    prefix = root.removeprefix(f"s3://{s3_server.bucket}/")
    client = s3_server.client()
    for key in ("d/", "empty-dir/", "d//double", ""):
        client.put_object(Bucket=s3_server.bucket, Key=prefix + key, Body=b"")
    assert paths_of(st.list()) == {"d/real"}
    assert st.list_top_level() == []
    assert paths_of(st.list("d")) == {"d/real"}


@pytest.mark.s3
def test_s3_create_exclusive_is_idempotent_for_own_bytes(s3_server: S3TestServer) -> None:
    # A PUT retried after a lost response meets its own object: that is a success.
    root, options = s3_server.new_root()
    st = Storage(root, options)
    st.create_exclusive("r", b"same bytes")
    st.create_exclusive("r", b"same bytes")
    with pytest.raises(AlreadyExistsError):
        st.create_exclusive("r", b"other bytes")


@pytest.fixture
def silent_server(silent_endpoint: SilentEndpoint) -> str:
    """An S3 endpoint that accepts connections and never answers."""
    return f"http://127.0.0.1:{silent_endpoint.port}"


def _impatient_options(endpoint: str) -> dict[str, Any]:
    return {
        "client_kwargs": {"endpoint_url": endpoint},
        "key": "k",
        "secret": "s",
        "lakecore_timeout_seconds": 2,
        "config_kwargs": {
            "connect_timeout": 0.3,
            "read_timeout": 0.3,
            "retries": {"max_attempts": 1, "mode": "standard"},
        },
    }


@pytest.fixture
def no_s3fs_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """s3fs retries each request five times with back-off, a class attribute; once is enough."""
    import s3fs

    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)


@pytest.mark.s3
@pytest.mark.usefixtures("no_s3fs_retries")
def test_s3_timeout_is_storage_timeout_error(silent_server: str) -> None:
    st = Storage("s3://bucket/lake", _impatient_options(silent_server))
    with pytest.raises(StorageTimeoutError) as info:
        st.read("x")
    assert st.uri("x") in str(info.value)
    with pytest.raises(StorageTimeoutError):
        st.create_exclusive("x", b"x")


@pytest.mark.s3
def test_a_hung_endpoint_fails_once_its_timeout_has_passed(
    silent_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trial: with the default timeout gc failed after 10 min 04 s (twice 300 s), on a
    read, saying the read 'may or may not have taken effect'. The hint read swallowed the
    timeout and the probe past it waited it out again. With botocore's and s3fs's own retries
    at their defaults, the overall deadline (``lakecore_timeout_seconds``) is what ends it."""
    options = ["--storage-option", f"endpoint_url={silent_server}"]
    options += ["--storage-option", "key=k", "--storage-option", "secret=s"]
    options += ["--storage-option", "lakecore_timeout_seconds=2"]
    started = time.monotonic()
    code = cli_main(["-l", "s3://bucket/lake", *options, "namespace", "list"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == ExitCode.FAILURE
    assert elapsed < 2 * 1.75, f"{elapsed:.1f} s: more than the one timeout of 2 s"
    assert err.count("\n") == 1
    assert "the store did not answer within 2 s (storage option lakecore_timeout_seconds)" in err
    assert err.rstrip().endswith("nothing was changed")
    st = Storage("s3://bucket/lake", _impatient_options(silent_server))
    with pytest.raises(StorageTimeoutError, match="may or may not have taken effect"):
        st.write("x", b"x")


@pytest.mark.s3
@pytest.mark.usefixtures("no_s3fs_retries")
def test_s3_connection_refused_is_storage_error(refusing_port: int) -> None:
    port = refusing_port
    st = Storage("s3://bucket/lake", _impatient_options(f"http://127.0.0.1:{port}"))
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        st.list()
    # One TCP connect before the client is built says so at once (botocore's and s3fs's
    # retries took 20-34 s to reach the same verdict with their default settings).
    assert time.monotonic() - started < 5
    assert "s3://bucket/lake/" in str(info.value)
    assert f"nothing answers at the S3 endpoint http://127.0.0.1:{port}" in str(info.value)
    assert "check the endpoint (storage option endpoint_url, or AWS_ENDPOINT_URL)" in str(
        info.value
    )
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    # Through a proxy the endpoint need not answer from here: no probe; botocore's own request
    # fails (the proxy is not there either), and is translated as before.
    through_proxy = _impatient_options(f"http://127.0.0.1:{port}")
    through_proxy["config_kwargs"] = {
        **through_proxy.get("config_kwargs", {}),
        "proxies": {"http": f"http://127.0.0.1:{port}"},
    }
    with pytest.raises(StorageError) as info:
        Storage("s3://bucket/lake", through_proxy).list()
    assert "nothing answers" not in str(info.value) and "s3://bucket/lake/" in str(info.value)


@pytest.mark.s3
@pytest.mark.usefixtures("no_s3fs_retries")
def test_s3_an_endpoint_whose_name_does_not_resolve_fails_at_once() -> None:
    st = Storage("s3://bucket/lake", _impatient_options("http://no-such-host.invalid:9000"))
    with pytest.raises(StorageError) as info:
        st.exists("x")
    assert "nothing answers at the S3 endpoint http://no-such-host.invalid:9000" in str(info.value)


@pytest.mark.parametrize("endpoint", ["127.0.0.1:9000", "minio.internal", "ftp://127.0.0.1:9000"])
def test_s3_an_endpoint_without_http_is_a_bad_option(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's "Invalid endpoint" was a storage failure (exit 4, retried); a trial found it."""
    st = Storage("s3://bucket/lake", {"endpoint_url": endpoint, "key": "k", "secret": "s"})
    with pytest.raises(InvalidArgumentError, match="must start with http:// or https://") as info:
        st.exists("x")
    assert info.value.exit_code == 2
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    with pytest.raises(InvalidArgumentError, match="AWS_ENDPOINT_URL"):
        Storage("s3://bucket/lake2", {"key": "k", "secret": "s"}).exists("x")


def test_storage_options_from_a_command_line_are_typed() -> None:
    assert parse_storage_options(
        [
            "endpoint_url=http://127.0.0.1:9000",
            "anon=false",
            "max_concurrency=4",
            "client_kwargs.region_name=eu-west-1",
            "config_kwargs.max_pool_connections=8",
        ]
    ) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "anon": False,
        "max_concurrency": 4,
        "client_kwargs": {"region_name": "eu-west-1"},
        "config_kwargs": {"max_pool_connections": 8},
    }


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("endpoint_url", "is not KEY=VALUE"),
        ("anon=maybe", "must be true or false"),
        ("config_kwargs.max_pool_connections=many", "must be a whole number"),
        ("key.name=x", "only client_kwargs, config_kwargs, s3_additional_kwargs take .NAME"),
    ],
)
def test_a_wrong_storage_option_is_one_clear_error(pair: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        parse_storage_options([pair])


def test_s3_no_credentials_says_what_to_give() -> None:
    """The bare "NoCredentialsError: Unable to locate credentials" named the problem and no next step (a
    trial). The name stays: the jobs recognise it in an executor's error to add their advice."""
    from botocore.exceptions import NoCredentialsError

    from lakecore.core.storage import translate as storage_translate

    with pytest.raises(StorageError) as info:
        storage_translate.raise_translated(
            NoCredentialsError(), "s3://b/lake/x", "read", reading=True
        )
    message = str(info.value)
    assert message.startswith(
        "could not read s3://b/lake/x: NoCredentialsError: no AWS credentials were found"
    )
    assert "AWS_ACCESS_KEY_ID" in message and "--storage-option key=... secret=..." in message


def test_a_file_of_unknown_age_counts_as_just_written() -> None:
    """A store that gives no modification time (or one that does not parse): the file used to
    be dated 1970, the oldest of all, and passed any grace period; it is now the newest."""
    from lakecore.core.storage import backend as storage_backend
    from lakecore.maintenance.listing import ListedFile
    from lakecore.maintenance.tally import select_by_age

    now = 1_800_000_000_000
    for unknown in (None, "yesterday", True):
        assert storage_backend.to_millis(unknown) == storage_backend.UNKNOWN_MTIME_MILLIS
    assert storage_backend.to_millis("2026-01-01T00:00:00Z") == 1_767_225_600_000
    listed = ListedFile("0001/x", 1, storage_backend.to_millis(None), FileKind.NODE)
    selection = select_by_age([listed], cutoff_millis=now)
    assert (selection.old, selection.too_young) == ([], [listed])


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-27T22:09:38.000Z",
        "2026-11-27T22:09:38Z",
        "2026-11-27T22:09:38.123456Z",
        "1999-12-31T23:59:59.5Z",
        "Fri, 27 Nov 2026 22:09:38 GMT",
        "Mon, 01 Jan 2001 00:00:00 GMT",
        "Sun, 29 Feb 2032 23:59:59 GMT",
        "2026-11-27T22:09:38+02:00",
        "1700000000",
        "2026-11-27 22:09:38",
        "Fri, 27 Nov 2026 22:09:38 +0100",
    ],
)
def test_s3_timestamps_parse_as_botocore_parses_them(text: str) -> None:
    from botocore.utils import parse_timestamp

    from lakecore.core.storage import parse_s3_timestamp

    ours, theirs = parse_s3_timestamp(text), parse_timestamp(text)
    assert ours == theirs and ours.utcoffset() == theirs.utcoffset()


@pytest.mark.s3
def test_s3_listings_parse_timestamps_without_dateutil(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A listing's timestamps and a HEAD's HTTP date come out as before, and never through
    # botocore's dateutil parser (85% of a listing's client CPU). The client's responses are
    # parsed on fsspec's IO thread; moto, in this process, parses timestamps on its own threads.
    import botocore.parsers
    import botocore.utils

    root, options = s3_server.new_root()
    st = Storage(root, options)
    st.write("d/a", b"1")
    st.write("d/b", b"22")
    slow: list[Any] = []
    original = botocore.utils.parse_timestamp

    def recorded(value: Any) -> Any:
        if threading.current_thread().name == "fsspecIO":
            slow.append(value)
        return original(value)

    # botocore's parsers take the module's default when not given one; lakecore's falls back to it.
    monkeypatch.setattr(botocore.parsers, "DEFAULT_TIMESTAMP_PARSER", recorded)
    monkeypatch.setattr(botocore.utils, "parse_timestamp", recorded)
    listed = {f.path: f for f in st.list("d")}
    assert set(listed) == {"d/a", "d/b"} and not slow
    now = time.time() * 1000
    assert all(now - 120_000 < f.mtime_millis <= now + 5_000 for f in listed.values())
    head = st.info("d/a")
    assert not slow and head.mtime_millis == listed["d/a"].mtime_millis


@pytest.mark.s3
def test_s3_profile_option_reaches_the_client_and_a_missing_one_is_a_bad_option(
    s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # lakecore gives each S3 client a session of its own; the profile option must still reach it.
    config = tmp_path / "aws-config"
    config.write_text(
        "[profile lakecore-test]\naws_access_key_id = profile-key\naws_secret_access_key = s\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    root, options = s3_server.new_root()
    st = Storage(root, {**options, "profile": "lakecore-test"})
    st.write("a", b"1")
    assert paths_of(st.list()) == {"a"}
    other_root, _ = s3_server.new_root()
    with pytest.raises(
        InvalidArgumentError, match=r"ProfileNotFound: .*lakecore-tset.* storage option profile"
    ):
        Storage(other_root, {**options, "profile": "lakecore-tset"}).write("a", b"1")


@pytest.mark.s3
def test_the_store_clock_is_the_date_s3_answers_with_and_a_local_root_has_none(
    s3_server: S3TestServer, moto_clock: MotoClock, tmp_path: Any
) -> None:
    # gc ages files by their Last-Modified, which the store's clock gives them: it must be able
    # to read that clock when this machine's runs ahead of it.
    moto_clock.behind_seconds = 3 * 3600
    root, options = s3_server.new_root()
    st = Storage(root, options)
    written = time.time() * 1000
    st.write("probe", b"x")
    before = time.time() * 1000
    clock = st.clock_millis()
    after = time.time() * 1000
    assert clock is not None
    # The Date drops the fraction of its second, and the clock is rounded up to the next whole
    # one: the store's now, 3 h back, lies in the second before it.
    assert before - 3 * 3600 * 1000 < clock <= after - 3 * 3600 * 1000 + 1000
    assert clock % 1000 == 0
    # The clock that dates the objects: both are whole seconds of the store's, the object's cut
    # down and the clock rounded up, so they differ by the time between the write and the
    # listing plus at most 2 s (a loaded machine's write and listing can fall in two seconds).
    assert 0 <= clock - st.info("probe").mtime_millis < (after - written) + 2000
    assert Storage(str(tmp_path)).clock_millis() is None  # this machine's kernel dates local files
    missing = Storage(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/lake", options)
    # A wrong bucket is the usual mistake: the same line as any listing of it, not one about clocks.
    with pytest.raises(
        NotFoundError, match=r"could not list s3://no-such-bucket-.*/lake/: .*does the bucket exist"
    ):
        missing.clock_millis()


@pytest.mark.s3
@pytest.mark.parametrize(
    "date", ["Sat, 31 Feb 2026 01:02:03 GMT", "Sat, 28 Nov 2026 25:02:03 GMT", "yesterday", ""]
)
def test_an_s3_answer_without_a_readable_date_gives_no_store_clock(
    s3_server: S3TestServer, moto_clock: MotoClock, date: str
) -> None:
    # No clock to trust is this machine's clock alone (gc says so), not a storage failure that
    # a scheduler retries for ever.
    from lakecore.maintenance.clock import read_clocks

    root, options = s3_server.new_root()
    moto_clock.date_header = date
    clocks = read_clocks(Storage(root, options))
    assert clocks.store_millis is None and clocks.store_unreadable
    assert clocks.now_millis == clocks.machine_millis
