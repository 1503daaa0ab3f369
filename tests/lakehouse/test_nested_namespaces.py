"""Namespaces of any depth (issue 38): the lakehouse API, the command line and the Iceberg
catalog; bad names refused naming the level, nothing written on a refusal; a lakehouse written
before nesting reads the same and stays clean under fsck."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.exceptions import (
    NamespaceNotEmptyError as IcebergNamespaceNotEmptyError,
)
from pyiceberg.exceptions import (
    NoSuchNamespaceError,
    ValidationError,
)

from lakecore.cli import main as cli_main
from lakecore.core import keys as K
from lakecore.core.defs import encode_def, namespace_def
from lakecore.core.locations import new_namespace_def_path
from lakecore.errors import (
    CommitConflictError,
    InvalidNameError,
    LakecoreError,
    NamespaceNotEmptyError,
    NotFoundError,
)
from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from tests.iceberg.conftest import SCHEMA


def _files(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()}


def test_children_are_listed_level_by_level(tmp_path: Path) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"))
    with lh.transaction() as tx:
        for name in ("a", "a.b", "a.b.c", "a.b-x", "a.b!", "a.c", "a0", "b"):
            tx.create_namespace(name)
    assert lh.child_namespaces() == ["a", "a0", "b"]
    assert lh.child_namespaces("a") == ["a.b", "a.b!", "a.b-x", "a.c"]
    assert lh.child_namespaces("a.b") == ["a.b.c"]
    assert lh.child_namespaces("a.b.c") == []
    with pytest.raises(NotFoundError, match="'zz' does not exist"):
        lh.child_namespaces("zz")
    # Every namespace, by its full name, as before nesting.
    assert lh.list_namespaces() == ["a", "a.b", "a.b!", "a.b-x", "a.b.c", "a.c", "a0", "b"]


def test_a_missing_parent_is_implied_or_created(tmp_path: Path) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"))
    with lh.transaction() as tx:
        tx.create_namespace("x.y")
    assert not lh.namespace_exists("x") and lh.child_namespaces() == ["x"]
    assert lh.child_namespaces("x") == ["x.y"]
    with lh.transaction() as tx:
        tx.create_namespace("p.q.r", {"k": "v"}, parents=True)
    assert lh.namespace_exists("p") and lh.namespace_exists("p.q")
    assert dict(lh.load_namespace("p.q").properties) == {}
    assert dict(lh.load_namespace("p.q.r").properties) == {"k": "v"}


def test_a_namespace_with_children_cannot_be_dropped(tmp_path: Path) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"))
    with lh.transaction() as tx:
        tx.create_namespace("a.b", parents=True)
    version = lh.version
    with (
        pytest.raises(NamespaceNotEmptyError, match=r"'a' still holds namespace\(s\) \(a\.b\)"),
        lh.transaction() as tx,
    ):
        tx.drop_namespace("a")
    assert lh.refresh().version == version  # nothing written
    with lh.transaction() as tx:
        tx.drop_namespace("a.b")
        tx.drop_namespace("a")
    assert lh.list_namespaces() == []


def test_a_drop_conflicts_with_a_child_created_meanwhile(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    lh = Lakehouse.create(uri)
    with lh.transaction() as tx:
        tx.create_namespace("a")
    dropper = Lakehouse.open(uri).transaction(max_retries=3)
    dropper.drop_namespace("a")
    with Lakehouse.open(uri).transaction() as tx:
        tx.create_namespace("a.late")
    with pytest.raises(CommitConflictError, match=r"range 'B===a\.'"):
        dropper.commit()
    assert Lakehouse.open(uri).child_namespaces("a") == ["a.late"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a..b", "level 2 is empty"),
        (".a", "level 1 is empty"),
        ("a.", "level 2 is empty"),
        ("a.b c", "control characters, space and DEL"),
        ("a." + "x" * 20, "is 22 bytes in UTF-8; the lakehouse allows at most 12"),
    ],
)
def test_bad_names_are_refused_naming_the_part(tmp_path: Path, name: str, message: str) -> None:
    lh = Lakehouse.create(str(tmp_path / "lake"), namespace_name_max_size_bytes=12)
    before = _files(tmp_path / "lake")
    with pytest.raises(InvalidNameError, match=message), lh.transaction() as tx:
        tx.create_namespace(name, parents=True)
    assert _files(tmp_path / "lake") == before


def test_the_catalog_refuses_bad_levels_with_pyicebergs_types(tmp_path: Path) -> None:
    Lakehouse.create(str(tmp_path / "lake"), namespace_name_max_size_bytes=12)
    catalog = LakecoreCatalog("c", uri=str(tmp_path / "lake"))
    before = _files(tmp_path / "lake")
    with pytest.raises(ValidationError, match=r"level 'a\.b' holds '\.'"):
        catalog.create_namespace(("a.b", "c"))
    with pytest.raises(NoSuchNamespaceError, match="Empty namespace identifier"):
        catalog.create_namespace(("a", ""))
    with pytest.raises(ValidationError, match="at most 12"):
        catalog.create_namespace(("abcdef", "ghijkl"))
    with pytest.raises(NoSuchNamespaceError, match="Namespace does not exist: nope"):
        catalog.list_namespaces("nope")
    with pytest.raises(NoSuchNamespaceError, match="has no namespace"):
        catalog.create_table("t", SCHEMA)
    assert _files(tmp_path / "lake") == before
    catalog.create_namespace(("abc", "def", "ghi"))  # parents created with it
    assert catalog.list_namespaces() == [("abc",)]
    assert catalog.list_namespaces("abc") == [("abc", "def")]
    table = catalog.create_table(("abc", "def", "ghi", "t"), SCHEMA)
    assert table.name() == ("abc", "def", "ghi", "t")
    assert table.location().startswith(f"{catalog.warehouse}/abc/def/ghi/t-")
    assert catalog.list_tables("abc.def.ghi") == [("abc", "def", "ghi", "t")]
    with pytest.raises(IcebergNamespaceNotEmptyError, match=r"Namespace abc\.def is not empty"):
        catalog.drop_namespace("abc.def")


# Each bad input of issue 38 through the Iceberg catalog: (call, pyiceberg's type, the message
# naming the offending part). The lakehouse: abc.def.ghi with a table t, names of at most 16 bytes.
BAD_NESTED_INPUT: list[tuple[str, Any, type[Exception], str]] = [
    # A level that is empty or holds the separator.
    (
        "empty level, string",
        lambda c: c.create_namespace("abc..x"),
        NoSuchNamespaceError,
        r"'abc\.\.x' \(level 2 of 3 is empty",
    ),
    (
        "empty level, tuple",
        lambda c: c.create_namespace(("abc", "")),
        NoSuchNamespaceError,
        r"\('abc', ''\) \(level 2 of 2 is empty",
    ),
    (
        "blank level",
        lambda c: c.create_namespace(("abc", " ", "x")),
        NoSuchNamespaceError,
        r"level 2 of 3 is empty",
    ),
    (
        "level holds '.'",
        lambda c: c.create_namespace(("abc", "d.e")),
        ValidationError,
        r"level 'd\.e' holds '\.'.*\('d', 'e'\)",
    ),
    # Too long once joined, though each level is short.
    (
        "too long joined",
        lambda c: c.create_namespace(("abc", "def", "ghijklmno")),
        ValidationError,
        r"'abc\.def\.ghijklmno' is 17 bytes in UTF-8; the lakehouse allows at most 16",
    ),
    (
        "too long joined, table",
        lambda c: c.create_table(("abc", "def", "ghijklmno", "t"), SCHEMA),
        NoSuchNamespaceError,
        r"'abc\.def\.ghijklmno' is 17 bytes",
    ),
    # A parent that does not exist where one is required.
    (
        "list children of a missing namespace",
        lambda c: c.list_namespaces(("abc", "nope")),
        NoSuchNamespaceError,
        r"Namespace does not exist: abc\.nope",
    ),
    (
        "list tables of a missing namespace",
        lambda c: c.list_tables(("abc", "nope")),
        NoSuchNamespaceError,
        r"Namespace does not exist: abc\.nope",
    ),
    (
        "table in a missing namespace",
        lambda c: c.create_table(("abc", "nope", "t"), SCHEMA),
        NoSuchNamespaceError,
        r"'abc\.nope' does not exist",
    ),
    (
        "table in a missing deeper namespace",
        lambda c: c.create_table(("abc", "def", "ghi", "jk", "t"), SCHEMA),
        NoSuchNamespaceError,
        r"'abc\.def\.ghi\.jk' does not exist",
    ),
    (
        "rename into a missing namespace",
        lambda c: c.rename_table(("abc", "def", "ghi", "t"), ("abc", "nope", "t")),
        NoSuchNamespaceError,
        r"'abc\.nope' does not exist",
    ),
    (
        "properties of a missing namespace",
        lambda c: c.load_namespace_properties(("abc", "x")),
        NoSuchNamespaceError,
        r"Namespace abc\.x does not exists",
    ),
    (
        "update a missing namespace",
        lambda c: c.update_namespace_properties(("abc", "x"), updates={"k": "v"}),
        NoSuchNamespaceError,
        r"Namespace abc\.x does not exists",
    ),
    (
        "drop a missing namespace",
        lambda c: c.drop_namespace(("abc", "x")),
        NoSuchNamespaceError,
        r"Namespace abc\.x does not exists",
    ),
    # A namespace that has children is dropped only once empty.
    (
        "drop a namespace with a child namespace",
        lambda c: c.drop_namespace(("abc", "def")),
        IcebergNamespaceNotEmptyError,
        r"Namespace abc\.def is not empty: .*still holds namespace\(s\) \(abc\.def\.ghi\)",
    ),
    (
        "drop a namespace with a deeper child",
        lambda c: c.drop_namespace("abc"),
        IcebergNamespaceNotEmptyError,
        r"Namespace abc is not empty: .*\(abc\.def, abc\.def\.ghi\)",
    ),
    (
        "drop a namespace with a table",
        lambda c: c.drop_namespace("abc.def.ghi"),
        IcebergNamespaceNotEmptyError,
        r"Namespace abc\.def\.ghi is not empty: .*still holds 1 table\(s\) \(t",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_NESTED_INPUT],
)
def test_each_bad_nested_input_is_refused_naming_it_and_writes_nothing(
    tmp_path: Path, call: Any, error: type[Exception], message: str
) -> None:
    uri = str(tmp_path / "lake")
    Lakehouse.create(uri, namespace_name_max_size_bytes=16)
    catalog = LakecoreCatalog("c", uri=uri, warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace(("abc", "def", "ghi"))
    catalog.create_table(("abc", "def", "ghi", "t"), SCHEMA)
    version = catalog.lakehouse.refresh().version
    before = _files(tmp_path)
    with pytest.raises(error, match=message) as refused:
        call(catalog)
    if isinstance(refused.value.__cause__, LakecoreError):  # lakecore's detail is kept
        assert str(refused.value).endswith(str(refused.value.__cause__))
    assert _files(tmp_path) == before  # nothing written: no root, definition or metadata file
    assert Lakehouse.open(uri).version == version
    assert catalog.list_namespaces(("abc", "def")) == [("abc", "def", "ghi")]
    assert catalog.list_tables(("abc", "def", "ghi")) == [("abc", "def", "ghi", "t")]


def test_the_cli_creates_lists_and_drops_nested_namespaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "lake")
    Lakehouse.create(uri)
    assert cli_main(["-l", uri, "namespace", "create", "sales.eu.de", "--parents"]) == 0
    assert cli_main(["-l", uri, "namespace", "create", "sales.us"]) == 0
    capsys.readouterr()
    assert cli_main(["-l", uri, "--json", "namespace", "list", "--parent", "sales"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["namespaces"] == ["sales.eu", "sales.us"] and listing["parent"] == "sales"
    assert cli_main(["-l", uri, "namespace", "list"]) == 0
    assert capsys.readouterr().out.split() == ["sales", "sales.eu", "sales.eu.de", "sales.us"]
    assert cli_main(["-l", uri, "namespace", "drop", "sales.eu"]) == 2
    assert "still holds namespace(s) (sales.eu.de)" in capsys.readouterr().err
    assert cli_main(["-l", uri, "namespace", "create", "bad..name"]) == 2
    assert "level 2 is empty" in capsys.readouterr().err
    assert cli_main(["-l", uri, "namespace", "list", "--parent", "nope"]) == 5


def test_a_lakehouse_from_before_nesting_reads_the_same(tmp_path: Path) -> None:
    """Flat names holding '.', written as a lakehouse from before could have (a.b without a,
    and a name with an empty level): the same keys, the same listing, fsck --all --deep clean."""
    uri = str(tmp_path / "lake")
    lh = Lakehouse.create(uri)
    # The previous release wrote such names with no level rule: put the keys as it did.
    old_style = ("a.b", "x..y", "plain")
    with lh.transaction() as tx:
        for name in old_style:
            key = K.namespace_key(name, lh.lakehouse_def)
            path = new_namespace_def_path(name)
            tx.new_files[path] = encode_def(namespace_def(name, {}))
            tx.writes[key] = path
        tx.create_table("a.b", "t")
    lh = Lakehouse.open(uri)
    assert lh.list_namespaces() == ["a.b", "plain", "x..y"]
    assert lh.list_tables("a.b") == ["t"]
    assert lh.child_namespaces() == ["a", "plain", "x"]
    assert lh.child_namespaces("a") == ["a.b"]
    assert cli_main(["-l", uri, "fsck", "--all", "--deep"]) == 0
    result = check_version(lh, deep=True)
    assert result.ok, [str(v) for v in result.violations]


PREVIOUS_RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "lakehouse-0b64641.tar.gz"


def test_a_lakehouse_the_previous_release_made_opens_unchanged(tmp_path: Path) -> None:
    """The lakehouse in tests/fixtures/lakehouse-0b64641.tar.gz was written by the CLI of
    0b64641, the last commit before namespaces nested (tests/fixtures/make_lakehouse_0b64641.sh):
    16 versions with flat names holding '.', one with an empty level, and a rollback. Every
    version reads as that release wrote it, reading writes nothing, fsck --all --deep is clean,
    and a nested change on top keeps it clean."""
    lake = tmp_path / "lake"
    lake.mkdir()
    with tarfile.open(PREVIOUS_RELEASE) as tar:
        tar.extractall(lake, filter="data")
    uri = str(lake)
    written = {p: p.read_bytes() for p in _files(lake)}

    assert cli_main(["-l", uri, "fsck", "--all", "--deep"]) == 0
    lh = Lakehouse.open(uri)
    versions = lh.versions()
    assert [v.version for v in versions] == list(range(15, -1, -1))
    assert versions[0].rollback_from_version == 14 and all(v.error is None for v in versions)
    for info in versions:
        result = check_version(lh.at_version(info.version), deep=True)
        assert result.ok, (info.version, [str(v) for v in result.violations])

    names = ["archive.2024", "plain", "sales", "sales.eu", "sales.eu.de", "x..y"]
    assert lh.list_namespaces() == names
    assert lh.child_namespaces() == ["archive", "plain", "sales", "x"]
    assert lh.child_namespaces("sales") == ["sales.eu"]
    assert lh.child_namespaces("sales.eu") == ["sales.eu.de"]
    assert lh.child_namespaces("archive") == ["archive.2024"]  # 'archive' is implied
    assert not lh.namespace_exists("archive")
    assert lh.child_namespaces("x") == []  # 'x..y' has an empty level: no child of 'x'
    tables = {ns: lh.list_tables(ns) for ns in names}
    assert tables == {
        "archive.2024": ["events"],
        "plain": ["scratch"],
        "sales": ["orders"],
        "sales.eu": ["orders"],
        "sales.eu.de": [],
        "x..y": ["t"],
    }
    assert dict(lh.load_namespace("sales").properties) == {"owner": "alice"}
    assert dict(lh.load_namespace("sales.eu").properties) == {"region": "eu"}
    orders = lh.load_table("sales", "orders")
    assert dict(orders.properties) == {"k": "w", "owner": "bob"}
    assert [(c.id, c.name, c.nullable) for c in orders.schema.columns] == [
        (1, "id", False),
        (2, "amount", True),
    ]
    # Time travel: the scratch table and plain's note, before and after the rollback to 12.
    assert lh.at_version(9).list_namespaces() == names
    assert lh.at_version(9).list_tables("x..y") == []
    assert lh.at_version(13).list_tables("plain") == []
    assert dict(lh.at_version(14).load_namespace("plain").properties) == {"note": "kept"}
    assert dict(lh.load_namespace("plain").properties) == {}
    assert {p: p.read_bytes() for p in _files(lake)} == written  # reading wrote nothing

    with lh.transaction() as tx:
        tx.create_namespace("sales.eu.fr")
    assert lh.child_namespaces("sales.eu") == ["sales.eu.de", "sales.eu.fr"]
    with (
        pytest.raises(NamespaceNotEmptyError, match=r"sales\.eu\.de, sales\.eu\.fr"),
        lh.transaction() as tx,
    ):
        tx.drop_namespace("sales.eu")
    assert cli_main(["-l", uri, "fsck", "--all", "--deep"]) == 0
