"""Locations (docs/format.md#locations): path optimization, file names, root URIs, stored paths."""

from __future__ import annotations

import os
import re
import uuid

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.core.locations import (
    FILE_NAME_SEGMENT_MAX_BYTES,
    FileKind,
    check_relative_path,
    classify_path,
    hash_directories,
    hash_directory_prefixes,
    kind_value,
    kind_values,
    new_lakehouse_def_path,
    new_namespace_def_path,
    new_node_file_path,
    new_table_def_path,
    new_temp_path,
    normalize_root_uri,
    optimize_path,
    root_node_file_name,
    version_from_root_node_file_name,
)
from lakecore.errors import InvalidLocationError, InvalidNameError, LakecoreError

# The worked examples of docs/format.md#path-optimization, verbatim.
OPTIMIZATION_VECTORS = [
    (
        "node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow",
        "0110/0000/1011/01111000-node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow",
    ),
    (
        "table-t1-ns1-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb",
        "1001/0011/1000/10010110-table-t1-ns1-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb",
    ),
    (
        "my/path/my-table-definition.binpb",
        "0010/0010/0101/00111101-my-path-my-table-definition.binpb",
    ),
]

ROOT_NAME_VECTORS = [
    (0, "_00000000000000000000000000000000.arrow"),
    (1, "_10000000000000000000000000000000.arrow"),
    (100, "_00100110000000000000000000000000.arrow"),
]

PREFIX_LEN = len("bbbb/bbbb/bbbb/bbbbbbbb-")


def expected_prefix(name: str) -> str:
    """The optimized prefix of ``name``, recomputed from mmh3 without lakecore's helper."""
    low20 = mmh3.hash(name.encode("utf-8"), 0, signed=False) & 0xFFFFF
    bits = "".join("1" if (low20 >> (19 - i)) & 1 else "0" for i in range(20))
    return f"{bits[:4]}/{bits[4:8]}/{bits[8:12]}/{bits[12:]}-"


def split_optimized(path: str) -> tuple[str, str]:
    assert re.fullmatch(r"[01]{4}/[01]{4}/[01]{4}/[01]{8}-.+", path), path
    return path[:PREFIX_LEN], path[PREFIX_LEN:]


def assert_uuid4(text: str) -> None:
    parsed = uuid.UUID(text)
    assert parsed.version == 4
    assert str(parsed) == text  # lower case, canonical hyphens


def assert_location_error(exc: pytest.ExceptionInfo[BaseException]) -> None:
    assert isinstance(exc.value, InvalidLocationError)
    assert isinstance(exc.value, LakecoreError)
    assert str(exc.value)


# ---------------------------------------------------------------------------------------------
# Path optimization and file names


@pytest.mark.parametrize(("original", "optimized"), OPTIMIZATION_VECTORS)
def test_optimize_path_vectors(original: str, optimized: str) -> None:
    assert optimize_path(original) == optimized


def test_vectors_agree_with_independent_recomputation() -> None:
    # Guards the vectors themselves: hash of the '-'-replaced name, low 20 bits, MSB first.
    for original, optimized in OPTIMIZATION_VECTORS:
        name = original.replace("/", "-")
        assert optimized == expected_prefix(name) + name


def test_optimize_path_hashes_the_replaced_name_not_the_original() -> None:
    original = "my/path/my-table-definition.binpb"
    hash_of_original = expected_prefix(original)
    assert not optimize_path(original).startswith(hash_of_original)


def test_optimize_path_hashes_utf8_bytes() -> None:
    name = "namespace-é漢-x.binpb"
    assert optimize_path(name) == expected_prefix(name) + name


@pytest.mark.parametrize(("version", "name"), ROOT_NAME_VECTORS)
def test_root_node_file_name_vectors(version: int, name: str) -> None:
    assert root_node_file_name(version) == name
    assert version_from_root_node_file_name(name) == version
    assert version_from_root_node_file_name("some/dir/" + name) == version


def test_root_node_file_name_extremes() -> None:
    assert root_node_file_name(2**32 - 1) == "_" + "1" * 32 + ".arrow"
    assert root_node_file_name(2**31) == "_" + "0" * 31 + "1.arrow"


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_root_node_file_name_round_trip(version: int) -> None:
    name = root_node_file_name(version)
    assert re.fullmatch(r"_[01]{32}\.arrow", name)
    assert int(name[1:33][::-1], 2) == version
    assert version_from_root_node_file_name(name) == version
    assert classify_path(name) is not None
    assert classify_path(name).kind is FileKind.ROOT_NODE  # type: ignore[union-attr]
    assert classify_path(name).version == version  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [-1, 2**32, 2**40, True, False, 1.0, "1", None])
def test_root_node_file_name_rejects(bad: object) -> None:
    with pytest.raises(InvalidLocationError) as exc:
        root_node_file_name(bad)  # type: ignore[arg-type]
    assert_location_error(exc)


@pytest.mark.parametrize(
    "bad",
    [
        "_0.arrow",
        "_" + "0" * 31 + ".arrow",
        "_" + "0" * 33 + ".arrow",
        "_" + "0" * 31 + "2.arrow",
        "_" + "0" * 32 + ".ipc",
        "0" * 32 + ".arrow",
        "_latest_hint.txt",
        "",
    ],
)
def test_version_from_root_node_file_name_rejects(bad: str) -> None:
    with pytest.raises(InvalidLocationError) as exc:
        version_from_root_node_file_name(bad)
    assert_location_error(exc)


def test_new_node_file_path_shape() -> None:
    paths = {new_node_file_path() for _ in range(50)}
    assert len(paths) == 50
    for path in paths:
        prefix, name = split_optimized(path)
        match = re.fullmatch(r"node-(.+)\.arrow", name)
        assert match, name
        assert_uuid4(match.group(1))
        assert prefix == expected_prefix(name)
        assert classify_path(path) is not None
        assert classify_path(path).kind is FileKind.NODE  # type: ignore[union-attr]
        check_relative_path(path)


@pytest.mark.parametrize("ns", ["ns1", "default", "é-ns", "a.b"])
def test_new_namespace_def_path_shape(ns: str) -> None:
    path = new_namespace_def_path(ns)
    prefix, name = split_optimized(path)
    assert name.startswith(f"namespace-{ns}-") and name.endswith(".binpb")
    assert_uuid4(name[len(f"namespace-{ns}-") : -len(".binpb")])
    assert prefix == expected_prefix(name)
    assert classify_path(path).kind is FileKind.NAMESPACE_DEF  # type: ignore[union-attr]
    check_relative_path(path)


@pytest.mark.parametrize(("ns", "table"), [("ns1", "t1"), ("default", "orders"), ("ü", "表")])
def test_new_table_def_path_shape(ns: str, table: str) -> None:
    path = new_table_def_path(ns, table)
    prefix, name = split_optimized(path)
    head = f"table-{table}-{ns}-"
    assert name.startswith(head) and name.endswith(".binpb")
    assert_uuid4(name[len(head) : -len(".binpb")])
    assert prefix == expected_prefix(name)
    assert classify_path(path).kind is FileKind.TABLE_DEF  # type: ignore[union-attr]
    check_relative_path(path)


def test_new_lakehouse_def_path_shape() -> None:
    path = new_lakehouse_def_path()
    match = re.fullmatch(r"_lakehouse_def_(.+)\.binpb", path)
    assert match, path  # not optimized: lives at the top of the root
    assert_uuid4(match.group(1))
    assert classify_path(path).kind is FileKind.LAKEHOUSE_DEF  # type: ignore[union-attr]
    assert new_lakehouse_def_path() != path


@pytest.mark.parametrize("bad", ["", "a b", "a\x00", "a\x1f", "a\x7f"])
def test_def_paths_refuse_bad_names(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        new_namespace_def_path(bad)
    with pytest.raises(InvalidNameError):
        new_table_def_path("ns", bad)
    with pytest.raises(InvalidNameError):
        new_table_def_path(bad, "t")


def test_classify_latest_hint() -> None:
    assert classify_path("_latest_hint.txt").kind is FileKind.LATEST_HINT  # type: ignore[union-attr]


def _flip_prefix_bit(path: str, index: int) -> str:
    chars = list(path)
    positions = [i for i, c in enumerate(path[:PREFIX_LEN]) if c in "01"]
    pos = positions[index]
    chars[pos] = "1" if chars[pos] == "0" else "0"
    return "".join(chars)


@pytest.mark.parametrize("bit", [0, 5, 11, 19])
def test_classify_refuses_wrong_hash_prefix(bit: int) -> None:
    for path in (new_node_file_path(), new_namespace_def_path("ns"), new_table_def_path("ns", "t")):
        assert classify_path(path) is not None
        assert classify_path(_flip_prefix_bit(path, bit)) is None


def _optimized(name: str) -> str:
    return expected_prefix(name) + name


@pytest.mark.parametrize(
    "path",
    [
        "x.arrow",
        "node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow",  # not optimized
        _optimized("foo.txt"),  # correct hash, foreign name
        _optimized("node-6fcb514b-b878-1c9d-95b7-8dc3a7ce6fd8.arrow"),  # uuid version 1
        _optimized("node-6FCB514B-B878-4C9D-95B7-8DC3A7CE6FD8.arrow"),  # upper case
        _optimized("node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.ipc"),
        _optimized("node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow.bak"),
        _optimized("namespace-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb"),  # no name
        "0000/0000/0000/00000000-node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow",
        "extra/" + _optimized("node-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow"),
        "sub/_00000000000000000000000000000000.arrow",
        "_0000.arrow",
        "_lakehouse_def_not-a-uuid.binpb",
        "_lakehouse_def_6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow",
        "latest_hint.txt",
        "_latest_hint.txt.bak",
        "",
        # A slash in the name: optimize_path would have made it '-', whatever the prefix says.
        _optimized("namespace-a/b-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb"),
        expected_prefix("table-a-b-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb")
        + "table-a/b-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb",
        # The name's hash is right, its shape is not: a trailing newline (an old pattern's `$`
        # let it through), a newline inside the name, a node with more than its UUID, a table
        # definition with the suffix of a node.
        _optimized("table-t-ns-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb\n"),
        _optimized("table-t\nx-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb"),
        _optimized("node-x-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow"),
        _optimized("nodex6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow"),
        _optimized("table-t-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.arrow"),
        _optimized("namespace--6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb"),
        _optimized("table-6fcb514b-b878-4c9d-95b7-8dc3a7ce6fd8.binpb"),
    ],
)
def test_classify_refuses_look_alikes(path: str) -> None:
    assert classify_path(path) is None
    assert kind_value(path) is None


def test_kind_values_classifies_a_column_as_kind_value_does_one_path() -> None:
    """The bulk classifier (one RE2 match over the column) and the scalar one agree on real
    names, on look-alikes made from them a character at a time, and on names Arrow refuses."""
    import random

    rng = random.Random(7)
    genuine = [new_node_file_path() for _ in range(50)] + [
        new_namespace_def_path(f"n{i}") for i in range(50)
    ]
    genuine += [new_table_def_path(f"ns-{i}", f"t{i}") for i in range(50)]
    paths = [
        *genuine,
        "_latest_hint.txt",
        root_node_file_name(3),
        new_temp_path("0000/1111/0000"),
        "x",
    ]
    alphabet = "01/-\nab.xyz"
    for path in genuine:
        for _ in range(8):
            at = rng.randrange(len(path) + 1)
            edit = rng.choice(["insert", "delete", "replace"])
            char = rng.choice(alphabet)
            if edit == "insert":
                paths.append(path[:at] + char + path[at:])
            elif edit == "delete":
                paths.append(path[:at] + path[at + 1 :])
            else:
                paths.append(path[:at] + char + path[at + 1 :])
    paths.append(
        new_node_file_path() + "\udcff"
    )  # a name that is not UTF-8: Arrow refuses the column
    assert kind_values(paths) == [kind_value(path) for path in paths]
    assert kind_value(paths[-1]) is None and classify_path(paths[-1]) is None
    assert kind_values(paths[:-1]) == [kind_value(path) for path in paths[:-1]]
    assert all(kind is not None for kind in kind_values(genuine))
    assert kind_values([]) == []


def test_kind_value_is_the_classified_kind() -> None:
    paths = [
        new_node_file_path(),
        new_namespace_def_path("ns"),
        new_table_def_path("ns", "t-1"),
        new_table_def_path("n-s", "-"),
        "_latest_hint.txt",
        root_node_file_name(5),
        new_lakehouse_def_path(),
        new_temp_path("0000/0000/0000"),
        new_temp_path(""),
    ]
    for path in paths:
        classified = classify_path(path)
        assert classified is not None, path
        assert kind_value(path) == classified.kind.value


def test_hash_directories() -> None:
    dirs = hash_directories()
    assert len(dirs) == 4096
    assert len(set(dirs)) == 4096
    for d in dirs:
        assert re.fullmatch(r"[01]{4}/[01]{4}/[01]{4}", d), d
    # Every optimized file lives in one of them.
    assert set(dirs) >= {new_node_file_path()[:14] for _ in range(200)}
    assert dirs[0] == "0000/0000/0000" and dirs[-1] == "1111/1111/1111"


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_hash_directory_prefixes_cover_every_hash_directory_once(levels: int) -> None:
    prefixes = hash_directory_prefixes(levels)
    assert len(prefixes) == 16**levels and prefixes == sorted(prefixes)
    for directory in hash_directories():
        assert sum(1 for p in prefixes if directory.startswith(p + "/") or directory == p) == 1, (
            directory
        )


@pytest.mark.parametrize("levels", [0, 4, -1])
def test_hash_directory_prefixes_refuse_other_depths(levels: int) -> None:
    with pytest.raises(ValueError):
        hash_directory_prefixes(levels)


# ---------------------------------------------------------------------------------------------
# Root URIs


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/lake", "s3://bucket/lake/"),
        ("s3://bucket/lake/", "s3://bucket/lake/"),
        ("s3://bucket", "s3://bucket/"),
        ("s3a://bucket/lake", "s3://bucket/lake/"),
        ("memory://lake", "memory://lake/"),
        ("file:///tmp/lake", "file:///tmp/lake/"),
        ("file:///tmp/lake/", "file:///tmp/lake/"),
    ],
)
def test_normalize_root_uri(uri: str, expected: str) -> None:
    assert normalize_root_uri(uri) == expected
    assert normalize_root_uri(expected) == expected  # idempotent


def test_normalize_bare_absolute_path(tmp_path: os.PathLike[str]) -> None:
    path = os.fspath(tmp_path)
    assert normalize_root_uri(path) == f"file://{path}/"
    assert normalize_root_uri(path + "/") == f"file://{path}/"


def test_normalize_bare_relative_path(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cwd = os.getcwd()
    assert normalize_root_uri("lake") == f"file://{cwd}/lake/"
    assert normalize_root_uri("a/lake") == f"file://{cwd}/a/lake/"
    result = normalize_root_uri("lake")
    assert result.startswith("file:///")


@pytest.mark.parametrize(
    "bad",
    [
        "s3://b/../x",
        "s3://b//x",
        "s3://b/./x",
        "s3://b/x/..",
        "s3://b/.",
        "s3://",
        "s3:///x",
        "",
        "   ",
        "file://relative",
        "file://relative/path",
        " s3://b/x",
        "s3://b/x ",
        "s3://b/x\n",
        "s3://b/\tx",
        "s3://b/\x00x",
        "s3://b/\x7fx",
        "/tmp/a/../b",
        "/tmp//b",
    ],
)
def test_normalize_root_uri_refuses(bad: str) -> None:
    with pytest.raises(InvalidLocationError) as exc:
        normalize_root_uri(bad)
    assert_location_error(exc)


# ---------------------------------------------------------------------------------------------
# Stored relative paths


@pytest.mark.parametrize(
    "good",
    [
        "x",
        "a/b",
        "_00000000000000000000000000000000.arrow",
        "0110/0000/1011/01111000-node-x.arrow",
        "a..b",
        ".hidden",
    ],
)
def test_check_relative_path_accepts(good: str) -> None:
    assert check_relative_path(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "..",
        ".",
        "./x",
        "a/..",
        "a/../../x",
        "a/../b",
        "/abs",
        "//host/x",
        "s3://other/x",
        "file:///etc/passwd",
        "memory://x",
        "a//b",
        "a/./b",
        "",
        "a/",
        "a/b/",
        "a\x00b",
        "a\x1fb",
        "a\nb",
        "a\x7fb",
        "a\\..\\b",
        # Shaped like an optimized path up to the name: the one-match fast path must not let
        # these through.
        "0000/0000/0000/00000000-a/../../x",
        "0000/0000/0000/00000000-x/",
        "0000/0000/0000/00000000-a\x00b",
        "0000/0000/0000/00000000-a\nb",
        "0000/0000/0000/00000000-a\\..\\b",
        "0000/0000/0000/00000000-s3://x",
        "0000/0000/0000/../../x",
    ],
)
def test_check_relative_path_refuses(bad: str) -> None:
    with pytest.raises(InvalidLocationError) as exc:
        check_relative_path(bad)
    assert_location_error(exc)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "x.arrow"]), min_size=1, max_size=5))
def test_check_relative_path_never_lets_a_path_escape(segments: list[str]) -> None:
    path = "/".join(segments)
    try:
        check_relative_path(path)
    except InvalidLocationError:
        return
    # Accepted: then POSIX normalisation is the identity and stays below the root.
    assert os.path.normpath(path) == path
    assert not path.startswith("..") and ".." not in segments and "" not in segments


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "-", ".", "..", "/", "\\", "\x00", "\n", "\x7f", "é", ":"]),
        max_size=6,
    )
)
def test_check_relative_path_optimized_shape_keeps_every_rule(tail: list[str]) -> None:
    # Paths in a hash directory take a one-match fast path; whatever it accepts must satisfy
    # every rule the full check enforces.
    path = "0110/0000/1011/01111000-" + "".join(tail)
    try:
        check_relative_path(path)
    except InvalidLocationError:
        return
    segments = path.split("/")
    assert os.path.normpath(path) == path and not path.endswith("/")
    assert ".." not in segments and "." not in segments and "" not in segments
    assert "\\" not in path and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in path)


@pytest.mark.parametrize(
    ("ns", "table"), [("n" * 100, "t" * 100), ("é" * 50, "表" * 33), ("ns", "a\\b"), ("a\\", "\\b")]
)
def test_def_paths_fit_a_file_system_and_hold_no_backslash(ns: str, table: str) -> None:
    # Two names at the default limits (100 bytes each) made a 259-byte file name, which a local
    # file system refuses; a backslash, which a name may hold, made a path no reader follows.
    for path in (new_table_def_path(ns, table), new_namespace_def_path(ns)):
        segment = path.rsplit("/", 1)[1]
        assert len(segment.encode("utf-8")) <= FILE_NAME_SEGMENT_MAX_BYTES
        assert "\\" not in path
        assert check_relative_path(path) == path
        _, name = split_optimized(path)
        assert split_optimized(path)[0] == expected_prefix(name)
        assert classify_path(path) is not None
        assert_uuid4(name[-len("00000000-0000-4000-8000-000000000000.binpb") : -len(".binpb")])
    cut = split_optimized(new_table_def_path("é" * 50, "表" * 33))[1]
    assert cut.startswith("table-" + "表" * 33 + "-é")  # cut between characters, never inside one
