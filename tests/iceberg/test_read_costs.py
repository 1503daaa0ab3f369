"""What a read costs the store (``lakecore.lakehouse.latest``, the catalog's caches): a load of a
table that did not change asks one question, whether a newer version exists, and concurrent
loads share it; nothing that never changes is read twice; and a read is never older than the
request that asked for it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table.update import SetPropertiesUpdate

from lakecore.iceberg import LakecoreCatalog
from tests.iceberg.conftest import SCHEMA, local_lake


@pytest.fixture
def counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LakecoreCatalog, Counter[str], str]]:
    """A catalog over a lakehouse with table ``ns.t``, and a count of every request it makes of
    the lakehouse's storage and of pyiceberg's FileIO (reads of metadata files)."""
    lake = local_lake(tmp_path)
    setup = lake.catalog()
    setup.create_namespace("ns")
    setup.create_table("ns.t", SCHEMA)
    # No full look at the latest version during the test (once a minute by default): on a slow
    # machine one would add its requests to a count.
    catalog = LakecoreCatalog(
        "counted", uri=lake.uri, **{"lakecore.latest.full-check-seconds": "3600"}
    )
    catalog.load_table("ns.t")  # the first read's full look, and the caches filled
    calls: Counter[str] = Counter()
    storage = catalog.lakehouse.storage
    for name in ("read", "exists", "write", "create_exclusive", "list_top_level"):
        original = getattr(storage, name)

        def counting(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kw)

        monkeypatch.setattr(storage, name, counting)
    new_input = PyArrowFileIO.new_input

    def counting_input(self: PyArrowFileIO, location: str) -> Any:
        calls["metadata_read"] += 1
        return new_input(self, location)

    monkeypatch.setattr(PyArrowFileIO, "new_input", counting_input)
    yield catalog, calls, lake.uri


def test_a_load_of_an_unchanged_table_costs_one_request(
    counted: tuple[LakecoreCatalog, Counter[str], str],
) -> None:
    catalog, calls, _ = counted
    catalog.load_table("ns.t")  # the first read fills the caches
    calls.clear()
    for _ in range(20):
        catalog.load_table("ns.t")
    assert dict(calls) == {"exists": 20}, "one request a load: does root v+1 exist?"


def test_concurrent_loads_share_their_question(
    counted: tuple[LakecoreCatalog, Counter[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a store that answers in 50 ms, 16 loads at once ask it twice at most: the check in
    flight when they arrive is too old for them, the next one serves them all."""
    catalog, calls, _ = counted
    catalog.load_table("ns.t")
    storage = catalog.lakehouse.storage
    quick = storage.exists

    def slow_exists(path: str) -> bool:
        time.sleep(0.05)
        return bool(quick(path))

    monkeypatch.setattr(storage, "exists", slow_exists)
    calls.clear()
    threads = [threading.Thread(target=catalog.load_table, args=("ns.t",)) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert 1 <= calls["exists"] <= 3, calls


def test_a_load_sees_a_commit_another_process_made_before_it(
    counted: tuple[LakecoreCatalog, Counter[str], str],
) -> None:
    catalog, _, uri = counted
    assert "k" not in catalog.load_table("ns.t").properties
    other = LakecoreCatalog("other", uri=uri)
    for i in range(3):
        other.commit_changes(("ns", "t"), (), (SetPropertiesUpdate(updates={"k": str(i)}),))
        assert catalog.load_table("ns.t").properties["k"] == str(i)


def test_a_commit_reads_nothing_it_already_knows(
    counted: tuple[LakecoreCatalog, Counter[str], str],
) -> None:
    """A set-properties commit after a load: one question about the latest version, the hint,
    and the writes; no definition or metadata file is read again."""
    catalog, calls, _ = counted
    catalog.load_table("ns.t")
    calls.clear()
    catalog.commit_changes(("ns", "t"), (), (SetPropertiesUpdate(updates={"k": "v"}),))
    assert catalog.settle()  # the hint, written after the answer, is the commit's request too
    assert calls["metadata_read"] == 0
    assert calls["read"] <= 1, calls  # the hint, before the root is created
    assert calls["exists"] == 1, calls
    calls.clear()
    assert catalog.load_table("ns.t").properties["k"] == "v"
    assert dict(calls) == {"exists": 1}, "the commit's own version is known without asking"
