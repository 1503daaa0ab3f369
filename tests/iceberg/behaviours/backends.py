"""The catalogs pyiceberg's behaviour suite runs against: one factory per backend.

A factory is a generator: it gets the test's ``request``, the catalog name the suite expects
("test_catalog") and the warehouse folder pyiceberg's fixture would give its own catalog,
yields a fresh, empty catalog whose warehouse is that folder, and cleans up after the test.
Anything a backend shares between tests (a server) comes from a session fixture it asks
``request`` for; each test still gets a fresh catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog

from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.warehouse import MARKER_NAME

Factory = Callable[[pytest.FixtureRequest, str, Path], Iterator[Catalog]]


def sql_catalog(request: pytest.FixtureRequest, name: str, warehouse: Path) -> Iterator[Catalog]:
    """pyiceberg's SqlCatalog on in-memory SQLite: the baseline, as pyiceberg's own fixture."""
    catalog = SqlCatalog(name, uri="sqlite:///:memory:", warehouse=f"file://{warehouse}")
    catalog.create_tables()
    yield catalog
    catalog.destroy_tables()


def lakecore_catalog(
    request: pytest.FixtureRequest, name: str, warehouse: Path
) -> Iterator[Catalog]:
    """A LakecoreCatalog in-process on a fresh lakehouse on local disk, beside the warehouse.
    The suite's ``warehouse`` folder is one for the whole session, and each test's lakehouse
    claims it (lakecore.iceberg.warehouse): the lakehouse is thrown away after the test, and
    its claim with it, as an operator deleting a lakehouse deletes its marker."""
    root = request.getfixturevalue("tmp_path_factory").mktemp("lakehouse")
    yield LakecoreCatalog(
        name, uri=str(root), warehouse=f"file://{warehouse}", **{"lakecore.create": "true"}
    )
    (warehouse / MARKER_NAME).unlink(missing_ok=True)


def rest_catalog(request: pytest.FixtureRequest, name: str, warehouse: Path) -> Iterator[Catalog]:
    """pyiceberg's RestCatalog pointed at lakecore's REST server (``lakecore.rest``) serving a
    LakecoreCatalog on a fresh lakehouse, as ``lakecore_catalog`` makes it. One uvicorn server
    per session (``tests/rest/server.py``) gets a new app for every test: a fresh server per
    test in all but its socket."""
    from pyiceberg.catalog.rest import RestCatalog

    from lakecore.rest.app import app
    from tests.rest.server import shared_server

    lakecore = lakecore_catalog(request, name, warehouse)
    served = next(lakecore)
    client = RestCatalog(name, uri=shared_server().serve(app(served)))
    yield client
    client.close()
    next(lakecore, None)  # its teardown


# Backend name -> factory. The name is the catalog fixtures' parameter (it shows in test ids)
# and the key of allowed_failures.json.
BACKENDS: dict[str, Factory] = {
    "sql": sql_catalog,
    "lakecore": lakecore_catalog,
    "rest": rest_catalog,
}
