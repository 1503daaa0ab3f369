"""``app(catalog)``: the Iceberg REST catalog server over any pyiceberg ``Catalog``, an ASGI app.

Rules:

* Built on Starlette; run it with any ASGI server (``lakecore serve`` uses uvicorn). Catalog
  calls block, so each runs in a thread: reads (GET, HEAD) and writes on pools of their own
  (``READ_THREADS``, ``WRITE_THREADS``), so that writers waiting for storage never hold the
  threads a read needs. The event loop only reads bodies, checks tokens and writes answers;
  no storage IO happens on it, and no lock a read takes is held across a write's IO.
* Routes: ``GET /v1/config``, ``POST /v1/oauth/tokens``, the catalog API of
  ``lakecore.rest.routes`` under ``/v1/``, ``GET /healthz`` (200 ``ok`` while the catalog
  answers a namespace listing; 503 ``unhealthy`` otherwise, the reason in the server's log
  only) and ``GET /metrics`` (Prometheus text). Only the catalog API and ``/v1/config`` need a
  token; health and metrics are for the operator's probes and scrapers and reveal no catalog
  content, nor where the lakehouse lies.
* **Authenticate first.** A ``/v1/`` request's token is checked before its path is matched
  or its body read: a request that does not authenticate learns nothing (401 whatever the
  route), and no parser sees what it sent.
* A body larger than ``max_body_bytes`` is 413 before it is read whole, one that has not
  arrived ``BODY_SECONDS`` after the headers is 408 (its connection closed); a malformed JSON body is
  400 ``BadRequestException``; every error, an unknown path (``//v1``, an escaped newline)
  included, is the spec's JSON error model (``lakecore.rest.errors``).
* Each request is logged once (``lakecore.rest.accesslog``) and counted
  (``lakecore.rest.metrics``), with the operation's name and the principal.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl

import anyio
import anyio.to_thread
from pyiceberg.catalog import Catalog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lakecore.core.sized_lru import SizedLRU
from lakecore.errors import InvalidArgumentError
from lakecore.iceberg.storage_settings import is_s3
from lakecore.rest.accesslog import log_request
from lakecore.rest.auth import Authenticator, OAuthError, Principal
from lakecore.rest.credentials import CredentialVendor
from lakecore.rest.defaults import (
    ANSWER_CACHE_BYTES,
    BODY_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    READ_THREADS,
    WRITE_THREADS,
)
from lakecore.rest.errors import NOT_FOUND, RestError, bad_request, rest_error_of
from lakecore.rest.metrics import CONTENT_TYPE, ServerMetrics
from lakecore.rest.paging import Listings
from lakecore.rest.routes import (
    Call,
    Reply,
    Router,
    TableAccess,
    endpoints,
    json_reply,
    listing_scope,
)
from lakecore.rest.warehouses import Warehouses, expired_under

_LOG = logging.getLogger(__name__)
T = TypeVar("T")


class Server:
    """The state behind one app: the catalog's warehouses, who may call, limits, metrics."""

    def __init__(
        self,
        catalog: Catalog,
        authenticator: Authenticator,
        max_body_bytes: int,
        warehouse_names: Iterable[str],
        client_properties: Mapping[str, str] | None = None,
        vendor: CredentialVendor | None = None,
    ) -> None:
        self.catalog = catalog
        self.client_properties = client_properties_for(catalog, client_properties or {})
        self.vendor = vendor
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes
        self.warehouses = Warehouses(catalog, warehouse_names)
        self.router = Router()
        self.metrics = ServerMetrics()
        if authenticator.token_file is not None:
            self.metrics.watch_token_file(authenticator.token_file)
        if vendor is not None:
            self.metrics.watch_vendor(vendor)
        commit_stats = getattr(catalog, "commit_stats", None)
        if commit_stats is not None:
            self.metrics.watch_commits(commit_stats)
        self.endpoints = endpoints(catalog)
        self.listings = Listings()
        # The JSON of metadata files loadTable answered (immutable files: never stale).
        self.answers = SizedLRU[tuple[str, str], bytes](ANSWER_CACHE_BYTES)
        # A catalog that raises CommitStateUnknownException itself for every commit whose
        # outcome it cannot know (LakecoreCatalog); for any other, an unforeseen failure of a
        # commit is answered as unknown (lakecore.rest.errors).
        self.catalog_reports_unknown_commits = bool(
            getattr(catalog, "reports_unknown_commits", False)
        )
        self.read_limiter = anyio.CapacityLimiter(READ_THREADS)
        self.write_limiter = anyio.CapacityLimiter(WRITE_THREADS)

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
        # uvicorn has no body timeout: a client that stops sending held its connection (and a
        # graceful stop) for good. 408, and the connection is closed.
        with anyio.move_on_after(BODY_SECONDS) as reading:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise self.too_large()
                chunks.append(chunk)
        if reading.cancelled_caught:
            message = f"the request body did not arrive within {BODY_SECONDS:g} s"
            raise RestError(408, "RequestTimeoutException", message, {"Connection": "close"})
        return b"".join(chunks)

    def too_large(self) -> RestError:
        return RestError(
            413,
            "RequestEntityTooLargeException",
            f"the request body is over this server's limit of {self.max_body_bytes} bytes",
        )

    # -- endpoints ------------------------------------------------------------------------------

    async def in_thread(self, work: Callable[[], T], *, write: bool) -> T:
        """Run blocking catalog work in a thread of the read or the write pool."""
        limiter = self.write_limiter if write else self.read_limiter
        return await anyio.to_thread.run_sync(work, limiter=limiter)

    async def catalog_api(self, request: Request) -> Response:
        method = request.method
        raw_path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        raw_path = raw_path.split("?", 1)[0]
        self.remember(request, "unmatched")
        commit_route = False  # set once the request is known to be a commit
        try:
            # Before anything the request sent is parsed: an unauthenticated caller learns
            # nothing, not even which routes exist.
            principal = self.authenticator.principal_of(request.headers.get("authorization"))
            self.remember(request, "unmatched", principal)
            match = self.router.match(raw_path, method)
            if match is None:
                raise RestError(404, NOT_FOUND, f"no such route: {method} {raw_path}")
            operation = match.operation
            self.remember(request, operation.name, principal)
            commit_route = operation.commit
            version = self.warehouses.version_of_prefix(match.prefix)
            if operation.write:
                self.authenticator.require_write(principal, operation.name)
                if version is not None:
                    raise RestError(
                        403,
                        "ForbiddenException",
                        f"{operation.name}: prefix {match.prefix} is lakehouse version "
                        f"{version}, read-only (time travel); write through the live "
                        "catalog (a warehouse without @version/@as-of)",
                    )
            body = await self.read_body(request) if method in ("POST", "PUT") else b""
            query = dict(request.query_params)

            def work() -> Reply:
                target = self.warehouses.target(match.prefix)
                call = Call(
                    target=target,
                    principal=principal,
                    params=match.params,
                    query=query,
                    headers=request.headers,
                    body=body,
                    listings=self.listings,
                    scope=listing_scope(match.prefix),
                    answers=self.answers,
                    access=TableAccess(self.client_properties, self.vendor),
                )
                try:
                    return operation.handler(call)
                except StopIteration as exc:
                    # Would end the thread's future oddly ("coroutine raised StopIteration").
                    raise RuntimeError(f"{operation.name} raised StopIteration") from exc
                except Exception as exc:
                    expired = expired_under(target, exc)
                    if expired is not None:
                        raise expired from exc
                    raise

            reply = await self.in_thread(work, write=operation.write)
        except Exception as exc:
            error = rest_error_of(
                exc,
                commit=commit_route and not self.catalog_reports_unknown_commits,
                read=method in ("GET", "HEAD"),
            )
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
            warehouse = request.query_params.get("warehouse")
            prefix = await self.in_thread(
                functools.partial(self.warehouses.prefix_for, warehouse), write=False
            )
        except Exception as exc:
            error = rest_error_of(exc)
            if error.code >= 500:
                _LOG.error("GET /v1/config failed: %s", error.message, exc_info=exc)
            return self.error_response(error, request.method)
        overrides = {} if prefix is None else {"prefix": prefix}
        payload = {
            "defaults": self.client_properties,
            "overrides": overrides,
            "endpoints": self.endpoints,
        }
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
            await self.in_thread(self.catalog.list_namespaces, write=False)
        except Exception as exc:
            # The reason (which names where the lakehouse lies) goes to the operator's log,
            # not to an anonymous caller.
            _LOG.error("health check failed: %s", rest_error_of(exc).message)
            return Response("unhealthy: the catalog cannot be read (see the server's log)\n", 503)
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
        # The path as sent (percent-escapes kept), not the decoded one: %0A stays %0A.
        raw = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
        path = raw.decode("latin-1").split("?", 1)[0]
        log_request(scope["method"], path, status, seconds, state.get("principal"), operation)

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
    client_properties: Mapping[str, str] | None = None,
    vendor: CredentialVendor | None = None,
) -> ASGIApp:
    """The REST catalog server for ``catalog`` (see the module docstring).

    ``authenticator`` defaults to anonymous read-write access: ``lakecore serve`` allows that
    on loopback addresses only, and an embedding program must make the same choice.
    ``warehouse_names`` are further names ``GET /v1/config?warehouse=`` accepts for the live
    catalog (besides the catalog's name and, for a lakehouse, its URI and warehouse).
    ``client_properties`` go to clients in ``/v1/config``'s defaults and every table's
    ``config``, over those derived from the catalog's storage settings (``client_properties_for``);
    ``vendor`` vends credentials per table (``lakecore.rest.credentials``).
    """
    if max_body_bytes < 1:
        raise bad_request(f"max_body_bytes must be positive, got {max_body_bytes}")
    server = Server(
        catalog,
        authenticator or Authenticator(allow_anonymous=True),
        max_body_bytes,
        warehouse_names,
        client_properties,
        vendor,
    )
    methods = ["GET", "HEAD", "POST", "DELETE", "PUT", "PATCH"]
    starlette = Starlette(
        routes=[
            Route("/healthz", server.healthz, methods=["GET"]),
            Route("/metrics", server.metrics_endpoint, methods=["GET"]),
            Route("/v1/config", server.config, methods=["GET"]),
            Route("/v1/oauth/tokens", server.oauth_tokens, methods=["POST"]),
            Route("/v1/{path:path}", server.catalog_api, methods=methods),
        ],
        exception_handlers={HTTPException: _http_exception_as_json},
    )
    # No redirect from /v1 to /v1/: its URL decodes the query as UTF-8, and a query byte that
    # is not (an ASGI server may pass any) was a 500. An API path is exact; else a JSON 404.
    starlette.router.redirect_slashes = False
    return Observed(starlette, server)


# What clients may not be given as plain properties: credentials are vended per table.
SECRET_CLIENT_PROPERTIES: Final = frozenset(
    {
        "s3.access-key-id",
        "s3.secret-access-key",
        "s3.session-token",
        "client.access-key-id",
        "client.secret-access-key",
        "client.session-token",
        "token",
        "credential",
    }
)


def client_properties_for(catalog: Catalog, given: Mapping[str, str]) -> dict[str, str]:
    """What clients are told to reach the warehouse: for a ``LakecoreCatalog`` whose warehouse
    is on S3, the endpoint, region and addressing of its own storage settings
    (``lakecore.iceberg.storage_settings``), then ``given`` over them (an empty value leaves a
    key out).

    Raises:
        InvalidArgumentError: ``given`` holds a credential (vend them instead).
    """
    secret = sorted(k for k in given if k.lower() in SECRET_CLIENT_PROPERTIES)
    if secret:
        raise InvalidArgumentError(
            f"client property {', '.join(secret)} is a credential: clients get credentials "
            "vended per table (--vended-credentials-role), never one static key for all"
        )
    derived: dict[str, str] = {}
    settings = getattr(catalog, "storage_settings", None)
    warehouse = getattr(catalog, "warehouse", None)
    if settings is not None and is_s3(warehouse):
        derived = settings.client_properties()
    merged = {**derived, **given}
    return {k: v for k, v in merged.items() if v != ""}


async def _http_exception_as_json(request: Request, exc: Exception) -> Response:
    """Starlette's own answers (no route matched: ``//v1/config``, a path holding an escaped
    newline; a method a route does not take) in the spec's JSON error model, not plain text."""
    assert isinstance(exc, HTTPException)
    kind = {404: NOT_FOUND, 405: "MethodNotAllowedException"}.get(
        exc.status_code, "BadRequestException"
    )
    message = "no such route" if exc.status_code == 404 else str(exc.detail)
    error = RestError(exc.status_code, kind, message, dict(exc.headers or {}))
    return Server.error_response(error, request.method)


__all__ = ["Server", "app"]
