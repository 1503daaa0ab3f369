"""``app(catalog)``: the Iceberg REST catalog server over any pyiceberg ``Catalog``, an ASGI app.

Rules:

* Built on Starlette; run it with any ASGI server (``lakecore serve`` uses uvicorn). Catalog
  calls block, so each runs in Starlette's thread pool; the event loop only reads bodies,
  checks tokens and writes answers.
* Routes: ``GET /v1/config``, ``POST /v1/oauth/tokens``, the catalog API of
  ``lakecore.rest.routes`` under ``/v1/``, ``GET /healthz`` (200 ``ok`` while the catalog
  answers a namespace listing; 503 otherwise) and ``GET /metrics`` (Prometheus text). Only the
  catalog API and ``/v1/config`` need a token; health and metrics are for the operator's
  probes and scrapers and reveal no catalog content.
* A body larger than ``max_body_bytes`` is 413 before it is read whole; a malformed JSON body is
  400 ``BadRequestException``; every error is the spec's error model (``lakecore.rest.errors``).
* Each request is logged once (``lakecore.rest.accesslog``) and counted
  (``lakecore.rest.metrics``), with the operation's name and the principal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from pyiceberg.catalog import Catalog
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lakecore.rest.accesslog import log_request
from lakecore.rest.auth import Authenticator, OAuthError, Principal
from lakecore.rest.defaults import DEFAULT_MAX_BODY_BYTES
from lakecore.rest.errors import RestError, bad_request, rest_error_of
from lakecore.rest.metrics import CONTENT_TYPE, ServerMetrics
from lakecore.rest.paging import Listings
from lakecore.rest.routes import Call, Reply, Router, endpoints, json_reply
from lakecore.rest.warehouses import Warehouses

_LOG = logging.getLogger(__name__)


class Server:
    """The state behind one app: the catalog's warehouses, who may call, limits, metrics."""

    def __init__(
        self,
        catalog: Catalog,
        authenticator: Authenticator,
        max_body_bytes: int,
        warehouse_names: Iterable[str],
    ) -> None:
        self.catalog = catalog
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes
        self.warehouses = Warehouses(catalog, warehouse_names)
        self.router = Router()
        self.metrics = ServerMetrics()
        if authenticator.token_file is not None:
            self.metrics.watch_token_file(authenticator.token_file)
        self.endpoints = endpoints(catalog)
        self.listings = Listings()

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def remember(request: Request, operation: str, principal: Principal | None = None) -> None:
        request.state.operation = operation
        if principal is not None:
            request.state.principal = principal.name

    @staticmethod
    def error_response(error: RestError, method: str) -> Response:
        body = None if method == "HEAD" else json_reply(error.body()).body
        return Response(body, error.code, error.headers, media_type="application/json")

    async def read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise self.too_large()
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self.too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def too_large(self) -> RestError:
        return RestError(
            413,
            "RequestEntityTooLargeException",
            f"the request body is over this server's limit of {self.max_body_bytes} bytes",
        )

    # -- endpoints ------------------------------------------------------------------------------

    async def catalog_api(self, request: Request) -> Response:
        method = request.method
        raw_path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        raw_path = raw_path.split("?", 1)[0]
        self.remember(request, "unmatched")
        commit = False
        try:
            match = self.router.match(raw_path, method)
            if match is None:
                raise RestError(404, "NotFoundException", f"no such route: {method} {raw_path}")
            operation = match.operation
            commit = operation.commit
            self.remember(request, operation.name)
            principal = self.authenticator.principal_of(request.headers.get("authorization"))
            self.remember(request, operation.name, principal)
            target = self.warehouses.target(match.prefix)
            if operation.write:
                self.authenticator.require_write(principal, operation.name)
                if target.version is not None:
                    raise RestError(
                        403,
                        "ForbiddenException",
                        f"{operation.name}: prefix {match.prefix} is lakehouse version "
                        f"{target.version}, read-only (time travel); write through the live "
                        "catalog (a warehouse without @version/@as-of)",
                    )
            body = await self.read_body(request) if method in ("POST", "PUT") else b""
            call = Call(
                target=target,
                principal=principal,
                params=match.params,
                query=dict(request.query_params),
                headers=request.headers,
                body=body,
                listings=self.listings,
            )
            reply: Reply = await run_in_threadpool(operation.handler, call)
        except Exception as exc:
            error = rest_error_of(exc, commit=commit, read=method in ("GET", "HEAD"))
            if error.code >= 500:
                _LOG.error("%s %s failed: %s", method, raw_path, error.message, exc_info=exc)
            return self.error_response(error, method)
        body_out = None if method == "HEAD" else reply.body
        return Response(body_out, reply.status, reply.headers, media_type="application/json")

    async def config(self, request: Request) -> Response:
        self.remember(request, "config")
        try:
            principal = self.authenticator.principal_of(request.headers.get("authorization"))
            self.remember(request, "config", principal)
            prefix = await run_in_threadpool(
                self.warehouses.prefix_for, request.query_params.get("warehouse")
            )
        except Exception as exc:
            return self.error_response(rest_error_of(exc), request.method)
        overrides = {} if prefix is None else {"prefix": prefix}
        payload = {"defaults": {}, "overrides": overrides, "endpoints": self.endpoints}
        reply = json_reply(payload)
        return Response(reply.body, 200, media_type="application/json")

    async def oauth_tokens(self, request: Request) -> Response:
        self.remember(request, "oauthTokens")
        try:
            raw = await self.read_body(request)
        except RestError as exc:
            return self.error_response(exc, request.method)
        try:
            form = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
            grant = self.authenticator.token_response(form, request.headers.get("authorization"))
        except OAuthError as exc:
            body = {"error": exc.error, "error_description": exc.description}
            return Response(json_reply(body).body, exc.status, media_type="application/json")
        except UnicodeDecodeError:
            body = {"error": "invalid_request", "error_description": "the body is not UTF-8"}
            return Response(json_reply(body).body, 400, media_type="application/json")
        request.state.principal = grant.principal
        headers = {"Cache-Control": "no-store"}
        return Response(json_reply(grant.body).body, 200, headers, media_type="application/json")

    async def healthz(self, request: Request) -> Response:
        self.remember(request, "healthz")
        try:
            await run_in_threadpool(self.catalog.list_namespaces)
        except Exception as exc:
            return Response(f"unhealthy: {rest_error_of(exc).message}\n", 503)
        return Response("ok\n", 200, media_type="text/plain")

    async def metrics_endpoint(self, request: Request) -> Response:
        self.remember(request, "metrics")
        return Response(self.metrics.exposition(), 200, media_type=CONTENT_TYPE)


class Observed:
    """ASGI middleware: times each request, then logs and counts it once.

    The request is recorded just before the last chunk of its answer goes out, so that a
    client never sees an answer whose log line and counters are not written yet (a request
    that ends without an answer, such as a client gone away, is recorded when it ends)."""

    def __init__(self, inner: ASGIApp, server: Server) -> None:
        self.inner = inner
        self.server = server

    def record(self, scope: Scope, status: int, seconds: float) -> None:
        state: dict[str, Any] = scope["state"]
        operation = str(state.get("operation", "unmatched"))
        self.server.metrics.observe(
            operation,
            scope["method"],
            status,
            seconds,
            commit=operation in ("updateTable", "commitTransaction"),
        )
        log_request(
            scope["method"], scope["path"], status, seconds, state.get("principal"), operation
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        started = time.perf_counter()
        scope.setdefault("state", {})
        status = [500]
        recorded = [False]

        async def send_and_record(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            elif (
                message["type"] == "http.response.body"
                and not message.get("more_body")
                and not recorded[0]
            ):
                recorded[0] = True
                self.record(scope, status[0], time.perf_counter() - started)
            await send(message)

        metrics = self.server.metrics
        metrics.in_flight.inc()
        try:
            await self.inner(scope, receive, send_and_record)
        finally:
            metrics.in_flight.dec()
            if not recorded[0]:
                self.record(scope, status[0], time.perf_counter() - started)


def app(
    catalog: Catalog,
    *,
    authenticator: Authenticator | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    warehouse_names: Iterable[str] = (),
) -> ASGIApp:
    """The REST catalog server for ``catalog`` (see the module docstring).

    ``authenticator`` defaults to anonymous read-write access: ``lakecore serve`` allows that
    on loopback addresses only, and an embedding program must make the same choice.
    ``warehouse_names`` are further names ``GET /v1/config?warehouse=`` accepts for the live
    catalog (besides the catalog's name and, for a lakehouse, its URI and warehouse).
    """
    if max_body_bytes < 1:
        raise bad_request(f"max_body_bytes must be positive, got {max_body_bytes}")
    server = Server(
        catalog,
        authenticator or Authenticator(allow_anonymous=True),
        max_body_bytes,
        warehouse_names,
    )
    methods = ["GET", "HEAD", "POST", "DELETE", "PUT", "PATCH"]
    starlette = Starlette(
        routes=[
            Route("/healthz", server.healthz, methods=["GET"]),
            Route("/metrics", server.metrics_endpoint, methods=["GET"]),
            Route("/v1/config", server.config, methods=["GET"]),
            Route("/v1/oauth/tokens", server.oauth_tokens, methods=["POST"]),
            Route("/v1/{path:path}", server.catalog_api, methods=methods),
        ]
    )
    return Observed(starlette, server)


__all__ = ["Server", "app"]
