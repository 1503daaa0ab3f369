"""Fixtures of the engine tests: Spark SQL and Trino as clients of the REST server.

* ``spark_sql_engine`` and ``trino_server`` (session): one Spark driver JVM and one Trino
  server for the whole pytest session (``tests/conftest.py`` marks every test that uses one
  ``engines`` and keeps them all on one xdist worker, so each JVM starts once a run).
* ``lake`` (per test): a fresh lakehouse served by the session's REST server
  (``tests/rest/server.py``), anonymous on loopback; ``lake.secure(...)`` serves it with
  tokens instead.
* ``spark_sql`` and ``trino`` (per test): the engine with a catalog ``lake`` on the test's
  lakehouse, made with the settings the README shows (``catalog_conf``,
  ``catalog_properties``); more catalogs (time travel, credentials) through ``catalog(...)``.

What they need is built by ``make test-setup`` (``.venv-spark``, ``build/engines``). Without it
a test is skipped, naming the command; under CI (``CI`` set) it fails instead, so a CI that
lost an engine says so.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")

from pyiceberg.catalog.rest import RestCatalog

from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from tests.conftest import S3_TEST_REGION, S3TestServer
from tests.engines import artifacts
from tests.engines.spark_sql import (
    SPARK_PYTHON,
    SparkSQLEngine,
    SparkSQLSession,
    catalog_conf,
)
from tests.engines.trino import TrinoQueryFailed, TrinoServer, catalog_properties
from tests.rest.server import SessionServer, shared_server


def missing(what: str) -> None:
    message = f"{what}: run `make engines` (docs/testing.md#the-engines-spark-sql-and-trino)"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def spark_sql_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSQLEngine]:
    if not SPARK_PYTHON.exists():
        missing(f"no Spark SQL venv at {SPARK_PYTHON}")
    if not artifacts.spark_ready():
        missing(f"no checked Iceberg Spark runtime in {artifacts.ENGINES_DIR}")
    engine = SparkSQLEngine.start(artifacts.spark_jars(), tmp_path_factory.mktemp("spark-sql"))
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def trino_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrinoServer]:
    java = artifacts.java_for_trino()
    if java is None:
        missing(f"no Java {artifacts.TRINO_MIN_JAVA}+ for Trino (LAKECORE_TRINO_JAVA_HOME)")
    if not artifacts.trino_ready():
        missing(f"no Trino server in {artifacts.trino_home()}")
    assert java is not None
    server = TrinoServer.start(artifacts.trino_home(), java, tmp_path_factory.mktemp("trino"))
    yield server
    server.stop()


@dataclass
class Lake:
    """A lakehouse, its catalog, and the session's REST server serving it at ``url``."""

    root: str
    catalog: LakecoreCatalog
    url: str
    server: SessionServer
    storage_options: dict[str, Any] | None = None

    def secure(self, authenticator: Authenticator) -> str:
        """Serve the lakehouse with ``authenticator`` from now on; the URL."""
        self.url = self.server.serve(app(self.catalog, authenticator=authenticator))
        return self.url

    def pyiceberg(self, **properties: Any) -> RestCatalog:
        return RestCatalog("rest", uri=self.url, **properties)

    def version(self) -> int:
        return Lakehouse.open(self.root, storage_options=self.storage_options).version

    @property
    def warehouse(self) -> str:
        return self.catalog.warehouse


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    root = str(tmp_path / "lake")
    Lakehouse.create(root)
    catalog = LakecoreCatalog("lakecore", uri=root)
    server = shared_server()
    return Lake(root, catalog, server.serve(app(catalog)), server)


@pytest.fixture
def s3_lake(s3_server: S3TestServer) -> Lake:
    """A lakehouse on moto's S3 (the warehouse beside it), served like ``lake``."""
    base = f"s3://{s3_server.bucket}/{uuid.uuid4()}"
    options = s3_server.storage_options()
    Lakehouse.create(f"{base}/lake", storage_options=options)
    catalog = LakecoreCatalog(
        "lakecore",
        uri=f"{base}/lake",
        storage_options=options,
        warehouse=f"{base}/warehouse",
        **{
            "s3.endpoint": s3_server.endpoint,
            "s3.access-key-id": options["key"],
            "s3.secret-access-key": options["secret"],
            "s3.region": S3_TEST_REGION,
        },
    )
    server = shared_server()
    return Lake(f"{base}/lake", catalog, server.serve(app(catalog)), server, options)


@dataclass
class SparkLake:
    """The session's Spark with catalogs on one test's lakehouse."""

    engine: SparkSQLEngine
    lake: Lake
    sessions: list[SparkSQLSession] = field(default_factory=list)

    def catalog(self, name: str = "lake", **options: str) -> SparkSQLSession:
        """A new Spark session with catalog ``name`` on the lakehouse (``options`` as in
        ``catalog_conf``)."""
        session = self.engine.session(catalog_conf(name, self.lake.url, **options))
        self.sessions.append(session)
        return session

    def close(self) -> None:
        for session in self.sessions:
            session.close()


@pytest.fixture
def spark_lake(spark_sql_engine: SparkSQLEngine, lake: Lake) -> Iterator[SparkLake]:
    spark = SparkLake(spark_sql_engine, lake)
    yield spark
    spark.close()


@pytest.fixture
def spark_sql(spark_lake: SparkLake) -> SparkSQLSession:
    """A Spark session whose catalog ``lake`` is the test's lakehouse."""
    return spark_lake.catalog()


_catalog_numbers = itertools.count(1)


@dataclass
class TrinoLake:
    """The session's Trino with catalogs on one test's lakehouse; ``query`` and ``fails`` run
    with ``lake`` as the session's catalog."""

    server: TrinoServer
    lake: Lake
    catalogs: list[str] = field(default_factory=list)

    def catalog(self, name: str | None = None, **options: str) -> str:
        """Create a catalog on the lakehouse (``options``: more properties, as in
        ``catalog_properties``); its name."""
        name = name or f"lake_{next(_catalog_numbers)}"
        self.server.create_catalog(name, catalog_properties(self.lake.url, **options))
        self.catalogs.append(name)
        return name

    def query(self, sql: str) -> list[list[Any]]:
        return self.server.query(sql)

    def fails(self, sql: str) -> TrinoQueryFailed:
        return self.server.fails(sql)

    def close(self) -> None:
        for name in self.catalogs:
            self.server.drop_catalog(name)


@pytest.fixture
def trino(trino_server: TrinoServer, lake: Lake) -> Iterator[TrinoLake]:
    """Trino with a catalog ``lake`` on the test's lakehouse."""
    engine = TrinoLake(trino_server, lake)
    engine.catalog("lake")
    yield engine
    engine.close()
