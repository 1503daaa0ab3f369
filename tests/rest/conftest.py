"""Fixtures of the REST server tests: a session server (``tests/rest/server.py``) and, per test, a
fresh lakehouse with a ``LakecoreCatalog`` served through it (``rest``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")

from pyiceberg.catalog.rest import RestCatalog

from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app
from tests.rest.server import SessionServer, shared_server


@pytest.fixture(scope="session")
def session_server() -> SessionServer:
    return shared_server()


@dataclass
class Served:
    """A lakehouse, its catalog, and the REST server in front of it."""

    root: Path
    catalog: LakecoreCatalog
    url: str
    server: SessionServer

    def client(self, **properties: Any) -> RestCatalog:
        return RestCatalog("rest", uri=self.url, **properties)

    def new_catalog(self) -> LakecoreCatalog:
        """Another catalog object on the same lakehouse (another server process's)."""
        return LakecoreCatalog("lakecore", uri=str(self.root))


@pytest.fixture
def rest(session_server: SessionServer, tmp_path: Path) -> Served:
    root = tmp_path / "lake"
    Lakehouse.create(str(root))
    catalog = LakecoreCatalog("lakecore", uri=str(root))
    url = session_server.serve(app(catalog))
    return Served(root, catalog, url, session_server)


@pytest.fixture
def serve_app(session_server: SessionServer) -> Callable[..., str]:
    """Serve an app of the test's choosing: ``serve_app(app(...))`` gives its URL."""
    return session_server.serve
