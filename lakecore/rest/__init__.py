"""An Iceberg REST catalog server: Spark, Trino, DuckDB and pyiceberg on one lakehouse.

``app(catalog)`` (``lakecore.rest.app``) serves any pyiceberg ``Catalog`` over the Iceberg REST
Catalog API (apache/iceberg ``open-api/rest-catalog-open-api.yaml``) as an ASGI app;
``lakecore -l LAKEHOUSE serve`` (``lakecore.rest.serve``) runs it with uvicorn over a
``LakecoreCatalog``. Needs the ``[server]`` extra (Starlette, uvicorn, prometheus-client,
PyJWT).

One concept a module:

* ``app``: the ASGI app, body limits, health, metrics endpoint, request observation;
* ``routes``: the spec's routes, paging, ETags, commits;
* ``models``: request bodies as the spec defines them;
* ``errors``: the spec's error model and the mapping of catalog exceptions to it;
* ``auth``: who may call: bearer tokens, roles, the OAuth2 grants;
* ``tokens``: the JWTs the server issues, their keys and their checks;
* ``tokenfile``: the token file, its checks, and reading it again when it changes;
* ``warehouses``: ``GET /v1/config``'s warehouse, prefixes and time travel;
* ``metrics`` and ``accesslog``: what an operator watches;
* ``serve`` and ``cli``: the ``lakecore serve`` command.

This package imports no Starlette until ``app`` is used, so the command line works without the
extra (``lakecore serve`` then says how to install it).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from lakecore.rest.app import app

        return app
    raise AttributeError(f"module 'lakecore.rest' has no attribute {name!r}")


__all__ = ["app"]
