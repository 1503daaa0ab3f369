"""``NodeStore.prefetch``: on storage that waits on the network a walk reads ahead, with the
same results and the same errors as reading one node after another."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lakecore.errors import NotFoundError
from lakecore.lakehouse import Lakehouse
from lakecore.locations import new_node_file_path
from lakecore.maintenance.reachable import reachable_from_root
from lakecore.storage import Storage
from lakecore.tree.store import NodeCache, NodeStore
from lakecore.view import read_root_and_def


class _ReadsByThread(Storage):
    """A local Storage that says it waits on the network and notes which thread read what."""

    readers: dict[str, str]

    @property
    def waits_on_network(self) -> bool:
        return True

    def read(self, path: str) -> bytes:
        self.readers[path] = threading.current_thread().name
        return super().read(path)


def _lake(path: Path) -> Lakehouse:
    lh = Lakehouse.create(str(path), order=4, node_file_max_size_bytes=4096)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
    for i in range(6):
        with lh.transaction() as tx:
            for j in range(8):
                tx.create_table("ns", f"t{i}_{j}")
    return lh


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    _lake(tmp_path / "lake")
    return tmp_path / "lake"


def test_a_walk_reads_ahead_and_reaches_the_same_files(lake: Path) -> None:
    plain = Storage(str(lake))
    root, lakehouse_def = read_root_and_def(plain, None)
    expected = reachable_from_root(NodeStore(plain, lakehouse_def.order, cache=NodeCache()), root.node)
    assert len(expected.nodes) > 4

    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    walked = reachable_from_root(NodeStore(storage, lakehouse_def.order, cache=NodeCache()), root.node)
    assert walked.nodes == expected.nodes and walked.values == expected.values
    node_readers = {storage.readers[path] for path in walked.nodes}
    assert all(name.startswith("lakecore-requests") for name in node_readers), node_readers


def test_a_prefetched_read_that_fails_fails_the_load_as_before(lake: Path) -> None:
    storage = _ReadsByThread(str(lake))
    storage.readers = {}
    missing = new_node_file_path()
    store = NodeStore(storage, 4, cache=NodeCache())
    store.prefetch([missing])
    with pytest.raises(NotFoundError, match=f"node file {storage.uri(missing)} is missing"):
        store.load(missing)
    assert storage.readers[missing].startswith("lakecore-requests")


def test_local_storage_reads_in_the_walking_thread(lake: Path) -> None:
    class Local(_ReadsByThread):
        @property
        def waits_on_network(self) -> bool:
            return False

    storage = Local(str(lake))
    storage.readers = {}
    root, lakehouse_def = read_root_and_def(storage, None)
    walked = reachable_from_root(NodeStore(storage, lakehouse_def.order, cache=NodeCache()), root.node)
    assert {storage.readers[path] for path in walked.nodes} == {threading.current_thread().name}
