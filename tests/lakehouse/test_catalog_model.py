"""The catalog against a dict model: random transactions, every read method, time travel."""

from __future__ import annotations

import uuid

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from lakecore.errors import AlreadyExistsError, NamespaceNotEmptyError, NotFoundError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version

NAMES = st.sampled_from(["a", "b", "sales", "ops", "x1", "é"])
TABLES = st.sampled_from(["t1", "t2", "orders", "users", "ü"])
PROPS = st.dictionaries(
    st.sampled_from(["owner", "tier", "k"]), st.text("abcxyz", max_size=4), max_size=2
)

Model = tuple[dict[str, dict[str, str]], dict[tuple[str, str], dict[str, str]]]


class CatalogVersusModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        # Tiny nodes: a few dozen objects already flush, split and merge the tree.
        self.lh = Lakehouse.create(
            f"memory://catalog-model/{uuid.uuid4()}",
            name="model",
            order=4,
            namespace_name_max_size_bytes=8,
            table_name_max_size_bytes=8,
            file_name_max_size_bytes=90,
            node_file_max_size_bytes=6000,
        )
        self.namespaces: dict[str, dict[str, str]] = {}
        self.tables: dict[tuple[str, str], dict[str, str]] = {}
        self.snapshots: dict[int, Model] = {0: ({}, {})}

    def _snapshot(self) -> None:
        self.snapshots[self.lh.version] = (
            {k: dict(v) for k, v in self.namespaces.items()},
            {k: dict(v) for k, v in self.tables.items()},
        )

    @rule(ns=NAMES, props=PROPS)
    def create_namespace(self, ns: str, props: dict[str, str]) -> None:
        try:
            with self.lh.transaction() as tx:
                tx.create_namespace(ns, properties=props)
        except AlreadyExistsError:
            assert ns in self.namespaces
            return
        assert ns not in self.namespaces
        self.namespaces[ns] = props
        self._snapshot()

    @rule(ns=NAMES, table=TABLES, props=PROPS)
    def create_table(self, ns: str, table: str, props: dict[str, str]) -> None:
        try:
            with self.lh.transaction() as tx:
                tx.create_table(
                    ns, table, columns=[{"id": 1, "name": "x", "type": "INT8"}], properties=props
                )
        except NotFoundError:
            assert ns not in self.namespaces
            return
        except AlreadyExistsError:
            assert (ns, table) in self.tables
            return
        assert ns in self.namespaces and (ns, table) not in self.tables
        self.tables[(ns, table)] = props
        self._snapshot()

    @precondition(lambda self: bool(self.tables))
    @rule(data=st.data(), props=PROPS)
    def update_table(self, data: st.DataObject, props: dict[str, str]) -> None:
        ns, table = data.draw(st.sampled_from(sorted(self.tables)))
        with self.lh.transaction() as tx:
            tx.update_table(ns, table, properties=props)
            # A transaction sees its own writes.
            assert dict(tx.load_table(ns, table).properties) == {
                **self.tables[(ns, table)],
                **props,
            }
        self.tables[(ns, table)] = {**self.tables[(ns, table)], **props}
        self._snapshot()

    @precondition(lambda self: bool(self.tables))
    @rule(data=st.data())
    def drop_table(self, data: st.DataObject) -> None:
        ns, table = data.draw(st.sampled_from(sorted(self.tables)))
        with self.lh.transaction() as tx:
            tx.drop_table(ns, table)
            assert table not in tx.list_tables(ns)
        del self.tables[(ns, table)]
        self._snapshot()

    @rule(ns=NAMES)
    def drop_namespace(self, ns: str) -> None:
        try:
            with self.lh.transaction() as tx:
                tx.drop_namespace(ns)
        except NotFoundError:
            assert ns not in self.namespaces
            return
        except NamespaceNotEmptyError:
            assert any(t_ns == ns for t_ns, _ in self.tables)
            return
        assert not any(t_ns == ns for t_ns, _ in self.tables)
        del self.namespaces[ns]
        self._snapshot()

    @rule(ns=NAMES, table=TABLES)
    def aborted_transaction_writes_nothing(self, ns: str, table: str) -> None:
        before = self.lh.version
        try:
            with self.lh.transaction() as tx:
                tx.create_namespace(ns + "z")
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        except AlreadyExistsError:
            pass
        assert Lakehouse.open(self.lh.uri).version == before

    @precondition(lambda self: len(self.snapshots) > 1)
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.snapshots)))
        namespaces, tables = self.snapshots[target]
        self.lh.rollback(to_version=target)
        self.namespaces = {k: dict(v) for k, v in namespaces.items()}
        self.tables = {k: dict(v) for k, v in tables.items()}
        self._snapshot()

    @invariant()
    def reads_match_the_model(self) -> None:
        if not hasattr(self, "lh"):
            return
        _assert_view_matches(Lakehouse.open(self.lh.uri), self.namespaces, self.tables)

    @invariant()
    def time_travel_matches_old_models(self) -> None:
        if not hasattr(self, "lh"):
            return
        for version in sorted(self.snapshots)[-3:]:
            namespaces, tables = self.snapshots[version]
            _assert_view_matches(self.lh.at_version(version), namespaces, tables)

    def teardown(self) -> None:
        if not hasattr(self, "lh"):
            return
        for version, (namespaces, tables) in self.snapshots.items():
            view = self.lh.at_version(version)
            _assert_view_matches(view, namespaces, tables)
            result = check_version(view, deep=True)
            assert result.ok, [str(v) for v in result.violations]


def _assert_view_matches(view, namespaces, tables) -> None:  # type: ignore[no-untyped-def]
    assert view.list_namespaces() == sorted(namespaces, key=lambda n: n.encode())
    for ns, props in namespaces.items():
        loaded = view.load_namespace(ns)
        assert loaded.name == ns and dict(loaded.properties) == props
        expected = sorted((t for n, t in tables if n == ns), key=lambda t: t.encode())
        assert view.list_tables(ns) == expected
    for (ns, table), props in tables.items():
        loaded = view.load_table(ns, table)
        assert loaded.name == table and dict(loaded.properties) == props
        assert [c.name for c in loaded.schema.columns] == ["x"]
        assert view.table_exists(ns, table)


CatalogVersusModel.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_catalog_versus_model = CatalogVersusModel.TestCase
