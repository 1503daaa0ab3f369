"""The direct S3 request path: GetObject (whole or a range), HeadObject and PutObject (with
``If-None-Match: *`` when asked), HTTP/1.1 over sockets kept alive and shared by a process's
threads, signed by ``sigv4``; s3fs and botocore keep everything else (listings, batch
deletes, the store's clock, multipart uploads).

Why: botocore (and s3fs on top of it) costs 1.6-2.0 ms of client CPU per request, whatever
the request; a commit makes a few, the REST server's group commit (issue 45) has a budget of
2 ms of CPU per commit, and every maintenance job pays per request too. This path costs a
fraction of that (``bench/bench_s3_requests.py``; docs/scaling.md). What it leaves out is
what makes the cost: an event system, a service model, a response parser per operation. The
HTTP client is its own (``http.client`` parses a response's headers with the email package:
0.12 ms a response here, against 0.02).

Rules:

- **Configured by botocore, as the s3fs client is.** ``open_s3_requests`` builds a botocore
  client from the arguments s3fs gets (its defaults too: 5 s to connect, 15 s to read) and has
  it prepare one HeadObject, which is never sent: its URL is the endpoint and the addressing
  botocore chose (path-style for a custom endpoint, virtual-hosted for AWS's own, as
  ``config_kwargs.s3.addressing_style`` says; FIPS, dual-stack, accelerate, the us-east-1
  global endpoint), its credential scope the signing region; the client's merged
  configuration (options, ``AWS_*`` variables, the profile) gives the timeouts, the retry mode
  and attempts, the checksum settings and the pool size.
- **What it does not support goes through s3fs instead, whole** (``Unsupported``, decided once
  per client, its reason logged): a proxy (``config_kwargs.proxies``, or ``HTTP(S)_PROXY`` for
  the endpoint's host and not bypassed by ``NO_PROXY``), a client certificate, adaptive retries
  or botocore's preview retries, a signature other than SigV4 (or none, for ``anon``), a
  HeadObject botocore would send with headers of its own (an S3 Express or Outposts bucket, a
  plugin's), ``requester_pays``, ``version_aware``, ``s3_additional_kwargs`` (encryption,
  ACLs), and any
  option or ``client_kwargs``/``config_kwargs`` entry not named in ``_SUPPORTED_*`` below. A
  PUT of ``SINGLE_PUT_MAX_BYTES`` or more is s3fs's multipart upload.
- **Credentials**: ``key``/``secret``(/``token``) when given; none for ``anon``; else
  botocore's own chain (``Session.get_credentials()`` of the profile: variables, profiles,
  SSO, IMDS, IRSA, web identity), refreshable credentials frozen afresh for every attempt.
- **Connections** are kept alive in one pool per client (per root and options in a process),
  shared by every thread, up to ``max_pool_connections`` idle (more are opened when more
  threads ask at once, and closed after). One found closed by the server (readable while idle)
  is dropped before use; a request whose kept-alive connection fails before any answer is
  sent again at once on a new connection, without counting as an attempt, once (a
  conditional PUT only if it did not leave whole: it may have reached the store). A forked child
  never uses its parent's connections. ``TCP_NODELAY`` on, ``tcp_keepalive`` as configured.
- **Retries as botocore's mode.** ``legacy`` (botocore's default): 5 attempts, a random wait
  of up to 1, 2, 4, 8 s; for connection failures and read timeouts, 429, 500, 502, 503 (S3's
  SlowDown), 504, 509, and 400 with a throttling code, ``RequestTimeout`` or ``BadDigest``.
  ``standard``: 3 attempts, waits of up to 1, 2, 4 .. 20 s, for connection failures, 500,
  502, 503, 504, the throttling codes, ``RequestTimeout`` and ``PriorRequestNotComplete``,
  within botocore's retry quota (500, a retry costs 5, a timeout's 10, a success gives back).
  ``max_attempts`` and the mode come from ``config_kwargs.retries`` or ``AWS_MAX_ATTEMPTS``
  and ``AWS_RETRY_MODE``, as botocore reads them. A PUT whose answer was lost is sent again,
  as botocore does, except a conditional one (``If-None-Match``, an exclusive create): once
  it may have reached the store (sent whole, and no answer, or an answer that does not say
  it did nothing, such as a 500) it is never sent again here. Its failure is raised as the
  s3fs path raises it, an outcome unknown (``StorageError``, ``StorageTimeoutError`` "may or
  may not have taken effect"), and whoever asked finds out by looking: the commit reads the
  root back (``lakecore.core.commit``). It is retried only where it cannot have taken effect: a
  connect that failed, a send that failed, 429, 503 and the throttling and ``RequestTimeout``
  codes. 409 (``ConditionalRequestConflict``) is not retried here: the backend does that.
- **Nothing hangs.** Each request carries one overall deadline (``lakecore_timeout_seconds``)
  across everything it waits for: building the client on first use (``LazyS3Requests``: the
  credential chain may make requests of its own, a container endpoint that never answers
  took 3 x 2 s), a credential refresh, connect, the TLS handshake, every read and write (each
  at most its own timeout and what is left), and the waits between attempts. When it is spent
  the request fails with fsspec's ``FSTimeoutError``, as the s3fs path does, which
  ``Storage`` reports as one line naming the deadline.
- **Errors as the s3fs path raises them**: an S3 error is botocore's ``ClientError`` (its
  response dict: ``Error.Code`` from the XML body, or the status for a HEAD; the status and
  headers in ``ResponseMetadata``), translated by ``s3fs.errors.translate_boto_error``
  (404/NoSuchKey ``FileNotFoundError``, 403 ``PermissionError``, 412 on ``If-None-Match``
  ``FileExistsError``, ...), the ClientError chained; connection failures are botocore's
  ``EndpointConnectionError``, ``ConnectTimeoutError``, ``ReadTimeoutError``,
  ``ConnectionClosedError``, ``SSLError``; no credentials is ``NoCredentialsError``. So
  ``lakecore.core.storage.translate`` classifies them as before.
- **Region redirects as botocore's**: where S3 says the bucket is in another region (a 301,
  302 or 307, ``PermanentRedirect``, ``AuthorizationHeaderMalformed`` naming the region, a
  HeadObject's 400), with the region in ``x-amz-bucket-region`` or the error, the endpoint is
  resolved again for that region and the request sent there, once; later requests go there
  at once. AWS's own endpoints only, as botocore.
- **Checksums as botocore's defaults** (``request_checksum_calculation`` and
  ``response_checksum_validation``, ``when_supported`` unless configured): a PUT carries the
  body's CRC32 in ``x-amz-checksum-crc32`` (S3 refuses a body that does not match it, and
  keeps the checksum; botocore over https sends the same value in an ``aws-chunked``
  trailer, which costs a second encoding of the body); a GET sends
  ``x-amz-checksum-mode: ENABLED`` and, for a whole object, checks the first checksum of the
  answer it can compute (crc32, sha1, sha256, sha512; crc32c and crc64nvme with awscrt),
  skipping a multipart object's composite one: ``FlexibleChecksumError`` when it differs. A
  range's answer is not checked (a checksum there would be the whole object's). The payload
  hash is signed (``x-amz-content-sha256``) except for a PUT with its checksum over https
  (``UNSIGNED-PAYLOAD``), or as ``config_kwargs.s3.payload_signing_enabled`` says, as botocore.
- **HTTP/1.1 as S3 speaks it**: the request's head and a body up to 64 KiB in one write, a
  larger body in 1 MiB writes; an answer read by ``Content-Length``, chunked, or to the end of
  the connection; ``Connection: close`` honoured; no ``Expect: 100-continue`` (a small body
  costs a round trip less, and nothing waits for a ``100`` that may never come).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import importlib
import logging
import os
import random
import re
import select
import socket
import ssl
import threading
import time
import xml.etree.ElementTree as ElementTree
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from http.client import responses
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from lakecore.core.storage import sigv4

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# s3fs's rule: a body below two of its 50 MiB chunks is one PutObject, anything bigger a
# multipart upload (which stays with s3fs).
SINGLE_PUT_MAX_BYTES: Final = 100 * 2**20

# The s3fs arguments this path understands (anything else, set to something other than its
# default, sends every request through s3fs).
_SUPPORTED_OPTIONS: Final = frozenset(
    {
        "anon",
        "key",
        "secret",
        "token",
        "username",
        "password",
        "use_ssl",
        "endpoint_url",
        "client_kwargs",
        "config_kwargs",
        "profile",
        "skip_instance_cache",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "max_concurrency",
        "fixed_upload_size",
        "cache_regions",
    }
)
# Options that are fine at their default (False, empty) and change requests otherwise.
_OFF_BY_DEFAULT: Final = frozenset({"requester_pays", "version_aware", "s3_additional_kwargs"})
_SUPPORTED_CLIENT_KWARGS: Final = frozenset(
    {
        "endpoint_url",
        "region_name",
        "use_ssl",
        "verify",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    }
)
_SUPPORTED_CONFIG_KWARGS: Final = frozenset(
    {
        "connect_timeout",
        "read_timeout",
        "max_pool_connections",
        "retries",
        "s3",
        "region_name",
        "signature_version",
        "request_checksum_calculation",
        "response_checksum_validation",
        "tcp_keepalive",
        "parameter_validation",
        "inject_host_prefix",
    }
)
_SUPPORTED_S3_CONFIG: Final = frozenset(
    {
        "addressing_style",
        "use_accelerate_endpoint",
        "use_dualstack_endpoint",
        "us_east_1_regional_endpoint",
        "payload_signing_enabled",
        "use_arn_region",
    }
)
# Headers botocore puts on a plain HeadObject; any other one means it would send something
# this path does not (requester pays, an S3 Express session token, a plugin's header).
_PLAIN_HEAD_HEADERS: Final = frozenset(
    {
        "authorization",
        "x-amz-date",
        "x-amz-content-sha256",
        "x-amz-security-token",
        "user-agent",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
    }
)
_PROBE_KEY: Final = "lakecore-endpoint-probe"
_SIGV4_SCOPE: Final = re.compile(
    r"AWS4-HMAC-SHA256 Credential=[^/,]+/\d{8}/(?P<region>[^/,]+)/(?P<service>[^/,]+)/aws4_request,"
)

# Retry policies (botocore's ``legacy`` and ``standard`` modes).
_LEGACY_ATTEMPTS: Final = 5
_LEGACY_STATUSES: Final = frozenset({429, 500, 502, 503, 504, 509})
_LEGACY_CODES_ON_400: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "ProvisionedThroughputExceededException",
        "RequestTimeout",
        "BadDigest",
    }
)
_STANDARD_ATTEMPTS: Final = 3
_STANDARD_MAX_BACKOFF_SECONDS: Final = 20.0
_STANDARD_STATUSES: Final = frozenset({500, 502, 503, 504})
_STANDARD_CODES: Final = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "EC2ThrottledException",
    }
)
_QUOTA_CAPACITY: Final = 500
_QUOTA_RETRY_COST: Final = 5
_QUOTA_TIMEOUT_RETRY_COST: Final = 10
_QUOTA_SUCCESS_REFUND: Final = 1

# The HTTP exchange.
_MAX_HEAD_BYTES: Final = 64 * 1024
_RECV_BYTES: Final = 64 * 1024  # below malloc's mmap threshold: no mmap per answer
_SEND_CHUNK_BYTES: Final = 1 << 20
_SEND_IN_ONE_BYTES: Final = 64 * 1024


class Unsupported(Exception):
    """The configuration asks for something this path does not do: s3fs serves the client."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send the requests of one bucket, as botocore resolved it."""

    scheme: str  # "http" or "https"
    host: str  # to connect to (an IPv6 address without brackets)
    port: int
    host_header: str  # as signed: no default port, IPv6 in brackets
    path_prefix: str  # "/bucket/" (path-style) or "/" (virtual-hosted), plus any endpoint path
    region: str | None  # the signing region; None: unsigned requests (anon)
    custom: bool  # an endpoint of the options' or the environment's, not AWS's own
    connect_timeout: float
    read_timeout: float
    retry_mode: str  # "legacy" or "standard"
    max_attempts: int
    pool_size: int
    tcp_keepalive: bool
    put_checksum: bool
    get_checksum: bool
    sign_payload: bool | None  # config s3.payload_signing_enabled
    verify: bool | str
    response_algorithms: tuple[str, ...]  # checksums a GET may answer with, by priority

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host_header}"


@dataclass(frozen=True)
class Head:
    """What a HeadObject tells."""

    size: int
    last_modified: str | None  # the header as sent (an HTTP date)


def open_s3_requests(
    fs_options: Mapping[str, Any], bucket: str, deadline_seconds: float
) -> S3Requests:
    """The direct client for ``bucket`` given s3fs's arguments; ``Unsupported`` when this path
    cannot serve them as s3fs would. May raise what botocore raises for a bad configuration
    (``ProfileNotFound``): it is the same failure either way."""
    check_supported(fs_options, bucket)
    import botocore.session

    session = botocore.session.Session(profile=fs_options.get("profile") or None)
    endpoint = resolve_endpoint(session, fs_options, bucket)
    credentials = _credentials(session, fs_options)
    return S3Requests(
        endpoint,
        credentials,
        deadline_seconds,
        lambda region: resolve_endpoint(session, fs_options, bucket, region),
    )


class LazyS3Requests:
    """The direct client of one backend, built on first use (``open_s3_requests``) within the
    deadline of the request that needs it. The build runs in a thread of its own: it resolves
    credentials by botocore's chain, whose providers make requests of their own (IMDS, a
    container's endpoint, STS) with their own timeouts and retries (a container endpoint that
    never answers: 3 x 2 s), and loads botocore's models. A request that has waited out its
    deadline fails with fsspec's ``FSTimeoutError`` while the build goes on; the next request
    waits for the same build. A build that fails (a missing profile) is raised to each request
    that waited for it, and the next one builds again."""

    def __init__(self, fs_options: Mapping[str, Any], bucket: str, deadline_seconds: float):
        self._fs_options = fs_options
        self._bucket = bucket
        self._deadline_seconds = deadline_seconds
        self._lock = threading.Lock()
        self._build: Future[S3Requests] | None = None
        self._decided = False
        self._client: S3Requests | None = None

    def client(self, deadline: float) -> S3Requests | None:
        """The client, or None where s3fs serves every request (``Unsupported``, logged once)."""
        if self._decided:
            return self._client
        with self._lock:
            if self._decided:
                return self._client
            if self._build is None:
                self._build = within_deadline(
                    lambda: open_s3_requests(
                        self._fs_options, self._bucket, self._deadline_seconds
                    ),
                    None,
                )
            build = self._build
        done, _ = futures_wait([build], timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            from fsspec.exceptions import FSTimeoutError

            raise FSTimeoutError()
        try:
            client = build.result()
        except Unsupported as why:
            log.info(
                "s3://%s: requests go through s3fs (the direct path does not support %s)",
                self._bucket,
                why,
            )
            client = None
        except BaseException:
            self._forget(build)
            raise
        with self._lock:
            self._client, self._decided = client, True
        return client

    def _forget(self, build: Future[S3Requests]) -> None:
        with self._lock:
            if self._build is build:
                self._build = None


def within_deadline(call: Callable[[], _T], deadline: float | None) -> Future[_T]:
    """``call()`` in a daemon thread of its own, for a blocking call of botocore's that no
    socket timeout of this module bounds. With a ``deadline``, waited for until then
    (``_DeadlineSpent`` after it; the call goes on, its result dropped); without one, not
    waited for. Either way the future, done or not."""
    future: Future[_T] = Future()

    def run() -> None:
        try:
            result = call()
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name="lakecore-s3-requests", daemon=True).start()
    if deadline is not None:
        done, _ = futures_wait([future], timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            raise _DeadlineSpent()
    return future


def check_supported(fs_options: Mapping[str, Any], bucket: str) -> None:
    """``Unsupported`` naming the first option this path does not serve."""
    for name, value in fs_options.items():
        if name in _OFF_BY_DEFAULT:
            if value:
                raise Unsupported(f"storage option {name}")
        elif name not in _SUPPORTED_OPTIONS:
            raise Unsupported(f"storage option {name}")
    client_kwargs = fs_options.get("client_kwargs") or {}
    config_kwargs = fs_options.get("config_kwargs") or {}
    for nested, supported, where in (
        (client_kwargs, _SUPPORTED_CLIENT_KWARGS, "client_kwargs"),
        (config_kwargs, _SUPPORTED_CONFIG_KWARGS, "config_kwargs"),
        (config_kwargs.get("s3") or {}, _SUPPORTED_S3_CONFIG, "config_kwargs.s3"),
    ):
        unknown = sorted(str(k) for k in nested if k not in supported)
        if unknown:
            raise Unsupported(f"storage option {where}.{unknown[0]}")
    if (config_kwargs.get("retries") or {}).get("mode", "legacy") not in ("legacy", "standard"):
        raise Unsupported("a retry mode other than legacy or standard")
    if config_kwargs.get("signature_version") not in (None, "s3v4", "v4"):
        raise Unsupported(f"signature_version {config_kwargs.get('signature_version')!r}")
    if bucket.endswith(("--x-s3", "--op-s3")) or ":" in bucket:
        raise Unsupported("an S3 Express, Outposts or ARN bucket")
    from botocore.configprovider import NEW_RETRIES_ENABLED

    if NEW_RETRIES_ENABLED:
        raise Unsupported("botocore's preview retries (AWS_NEW_RETRIES_2026)")


class _Prepared(Exception):
    """Raised from botocore's before-send event: the request it would send."""

    def __init__(self, request: Any) -> None:
        super().__init__("prepared")
        self.request = request


def resolve_endpoint(
    session: Any, fs_options: Mapping[str, Any], bucket: str, region: str | None = None
) -> Endpoint:
    """The endpoint botocore would send ``bucket``'s requests to (``region`` overrides the
    configured one: a redirect), from a client built as s3fs builds its own."""
    from botocore.config import Config
    from s3fs import S3FileSystem

    client_kwargs = dict(fs_options.get("client_kwargs") or {})
    # A copy of its own: botocore rewrites the retries entry in place.
    config_kwargs = copy.deepcopy(dict(fs_options.get("config_kwargs") or {}))
    # s3fs's _prepare_config_kwargs: its own timeouts unless the options give them.
    config_kwargs.setdefault("connect_timeout", S3FileSystem.connect_timeout)
    config_kwargs.setdefault("read_timeout", S3FileSystem.read_timeout)
    anonymous = bool(fs_options.get("anon"))
    if anonymous:
        from botocore import UNSIGNED

        config_kwargs["signature_version"] = UNSIGNED
    verify = client_kwargs.pop("verify", None)
    for name in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token"):
        client_kwargs.pop(name, None)
    endpoint_url = client_kwargs.pop("endpoint_url", None) or fs_options.get("endpoint_url")
    use_ssl = client_kwargs.pop("use_ssl", fs_options.get("use_ssl", True))
    if region is not None:
        client_kwargs["region_name"] = region
    # Credentials of no one: resolving an endpoint needs none, and asks no provider.
    client = session.create_client(
        "s3",
        config=Config(**config_kwargs),
        endpoint_url=endpoint_url,
        use_ssl=use_ssl,
        aws_access_key_id="LAKECOREPROBE",
        aws_secret_access_key="lakecore-probe",
        **client_kwargs,
    )
    config = client.meta.config
    if config.proxies or config.proxies_config or config.client_cert:
        raise Unsupported("a proxy or a client certificate in config_kwargs")
    retries = dict(config.retries or {})
    mode = retries.get("mode", "legacy")
    if mode not in ("legacy", "standard"):
        raise Unsupported(f"retry mode {mode}")

    def prepared(request: Any, **_: Any) -> None:
        raise _Prepared(request)

    client.meta.events.register_first("before-send.s3.HeadObject", prepared)
    try:
        client.head_object(Bucket=bucket, Key=_PROBE_KEY)
    except _Prepared as probe:
        request = probe.request
    else:  # pragma: no cover - botocore always emits before-send
        raise Unsupported("botocore sent the probe request")
    url = urlsplit(request.url)
    if url.query or not url.path.endswith("/" + _PROBE_KEY) or not url.hostname:
        raise Unsupported(f"a request URL of another form ({request.url})")
    headers = {
        str(k).lower(): v.decode("latin-1") if isinstance(v, bytes) else str(v)
        for k, v in request.headers.items()
    }
    extra = sorted(set(headers) - _PLAIN_HEAD_HEADERS)
    if extra:
        raise Unsupported(f"botocore adds the header {extra[0]}")
    signing_region: str | None = None
    authorization = headers.get("authorization")
    if authorization is not None:
        scope = _SIGV4_SCOPE.match(authorization)
        if scope is None or scope["service"] != "s3":
            raise Unsupported("a signature other than SigV4 for s3")
        signing_region = scope["region"]
    elif not anonymous:
        raise Unsupported("unsigned requests without anon")
    scheme = url.scheme.lower()
    if _proxied(scheme, url.hostname):
        raise Unsupported(f"a proxy for {scheme}://{url.hostname} in the environment")
    port = url.port or (443 if scheme == "https" else 80)
    host = url.hostname
    host_header = f"[{host}]" if ":" in host else host
    if url.port is not None and url.port != {"http": 80, "https": 443}.get(scheme):
        host_header += f":{url.port}"
    if verify is None:
        verify = session.get_config_variable("ca_bundle")
    operation = client.meta.service_model.operation_model("GetObject")
    response_algorithms = tuple(
        a for a in _CHECKSUM_PRIORITY if a.upper() in operation.http_checksum["responseAlgorithms"]
    )
    return Endpoint(
        scheme=scheme,
        host=host,
        port=port,
        host_header=host_header,
        path_prefix=url.path[: -len(_PROBE_KEY)],
        region=signing_region,
        custom=endpoint_url is not None,
        connect_timeout=float(config.connect_timeout),
        read_timeout=float(config.read_timeout),
        retry_mode=mode,
        max_attempts=int(
            retries.get("total_max_attempts")
            or (_LEGACY_ATTEMPTS if mode == "legacy" else _STANDARD_ATTEMPTS)
        ),
        pool_size=int(config.max_pool_connections),
        tcp_keepalive=bool(config.tcp_keepalive),
        put_checksum=config.request_checksum_calculation != "when_required",
        get_checksum=config.response_checksum_validation != "when_required",
        sign_payload=(config.s3 or {}).get("payload_signing_enabled"),
        verify=True if verify is None else verify,
        response_algorithms=response_algorithms,
    )


def _proxied(scheme: str, host: str) -> bool:
    """True when the environment's proxies would carry requests to ``host``."""
    import urllib.request

    return scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)


def _credentials(session: Any, fs_options: Mapping[str, Any]) -> Any:
    """The options' credentials (botocore's ``Credentials``), else the session's chain (None:
    none found; False: anonymous)."""
    if fs_options.get("anon"):
        return False
    client_kwargs = fs_options.get("client_kwargs") or {}
    key = (
        client_kwargs.get("aws_access_key_id")
        or fs_options.get("key")
        or fs_options.get("username")
    )
    secret = (
        client_kwargs.get("aws_secret_access_key")
        or fs_options.get("secret")
        or fs_options.get("password")
    )
    token = client_kwargs.get("aws_session_token") or fs_options.get("token")
    if key and secret:
        from botocore.credentials import Credentials

        return Credentials(key, secret, token)
    if key or secret:
        raise Unsupported("a key without a secret, or a secret without a key")
    return session.get_credentials()


# -- checksums ---------------------------------------------------------------------------------


def _crc32(data: bytes) -> bytes:
    return zlib.crc32(data).to_bytes(4, "big")


def _hashing(name: str) -> Callable[[bytes], bytes]:
    return lambda data: hashlib.new(name, data).digest()


_CHECKSUMS: dict[str, Callable[[bytes], bytes]] = {
    "crc32": _crc32,
    "sha1": _hashing("sha1"),
    "sha256": _hashing("sha256"),
    "sha512": _hashing("sha512"),
}
try:  # botocore checks these only with the AWS CRT installed; so does this path
    _crt: Any = importlib.import_module("awscrt.checksums")
    _CHECKSUMS["crc32c"] = lambda data: int(_crt.crc32c(data)).to_bytes(4, "big")
    if hasattr(_crt, "crc64nvme"):
        _CHECKSUMS["crc64nvme"] = lambda data: int(_crt.crc64nvme(data)).to_bytes(8, "big")
except ImportError:
    pass
# botocore's order of preference when an answer carries several.
_CHECKSUM_PRIORITY: Final = tuple(
    name
    for name in ("crc64nvme", "crc32c", "crc32", "sha1", "sha256", "sha512")
    if name in _CHECKSUMS
)


def _check_checksum(endpoint: Endpoint, headers: Mapping[str, str], body: bytes) -> None:
    """``FlexibleChecksumError`` when the answer's checksum (the first one it carries that can be
    computed here) is not the body's."""
    for name in endpoint.response_algorithms:
        expected = headers.get(f"x-amz-checksum-{name}")
        if expected is None:
            continue
        if "-" in expected:  # a multipart object's checksum of its parts' checksums
            continue
        actual = base64.b64encode(_CHECKSUMS[name](body)).decode()
        if actual != expected:
            from botocore.exceptions import FlexibleChecksumError

            raise FlexibleChecksumError(
                error_msg=f"Expected checksum {expected} did not match calculated checksum: {actual}"
            )
        return


# -- the client ---------------------------------------------------------------------------------


@dataclass
class _Response:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class _DeadlineSpent(Exception):
    """The overall deadline ran out in the middle of an exchange."""


class S3Requests:
    """GetObject, HeadObject and PutObject for one bucket (see the module doc)."""

    # The random factor of a retry's wait, in [0, 1) (a test makes it 0).
    jitter: Callable[[], float] = staticmethod(random.random)

    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Any,
        deadline_seconds: float,
        resolve_for_region: Callable[[str], Endpoint] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._credentials = credentials
        self._deadline_seconds = deadline_seconds
        self._resolve_for_region = resolve_for_region
        self._pool = _Pool(endpoint)
        self._quota = _RetryQuota()
        self._user_agent = "lakecore-s3-requests"

    # -- operations --------------------------------------------------------------------------

    def get(
        self,
        key: str,
        start: int | None = None,
        end: int | None = None,
        *,
        deadline: float | None = None,
    ) -> bytes:
        """The object's bytes; ``start``/``end`` (exclusive; None: to the end) make it a range.
        ``deadline`` (``time.monotonic()``; here and below): the request's own, when the caller
        started counting before (the first request, which builds the client); by default
        ``deadline_seconds`` from now."""
        headers: dict[str, str] = {}
        if start is not None:
            headers["range"] = f"bytes={start}-" if end is None else f"bytes={start}-{end - 1}"
        if self.endpoint.get_checksum:
            headers["x-amz-checksum-mode"] = "ENABLED"
        response = self._call("GetObject", "GET", key, headers, b"", deadline)
        if self.endpoint.get_checksum and response.status == 200:
            # A whole object's checksum; a range (206) is part of the object it describes.
            _check_checksum(self.endpoint, response.headers, response.body)
        return response.body

    def head(self, key: str, *, deadline: float | None = None) -> Head:
        response = self._call("HeadObject", "HEAD", key, {}, b"", deadline)
        return Head(
            int(response.headers.get("content-length", "0")),
            response.headers.get("last-modified"),
        )

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        deadline: float | None = None,
    ) -> None:
        """One PutObject (``data`` below ``SINGLE_PUT_MAX_BYTES``); with ``if_none_match`` it
        creates the object only where there is none (412 otherwise), and is never sent again
        once it may have reached the store (see the module doc)."""
        headers: dict[str, str] = {}
        if if_none_match:
            headers["if-none-match"] = "*"
        if self.endpoint.put_checksum:
            headers["x-amz-checksum-crc32"] = base64.b64encode(_crc32(data)).decode()
            headers["x-amz-sdk-checksum-algorithm"] = "CRC32"
        self._call("PutObject", "PUT", key, headers, data, deadline, idempotent=not if_none_match)

    # -- one request, its attempts ---------------------------------------------------------------

    def _call(
        self,
        operation: str,
        method: str,
        key: str,
        headers: dict[str, str],
        body: bytes,
        deadline: float | None,
        *,
        idempotent: bool = True,
    ) -> _Response:
        """One request and its attempts. ``idempotent`` False (a conditional PUT): sent again
        only where it cannot have taken effect (it never reached the store whole, or the store
        answered that it did nothing)."""
        from fsspec.exceptions import FSTimeoutError

        if deadline is None:
            deadline = time.monotonic() + self._deadline_seconds
        redirected = False
        attempt = 0
        quota_drawn = 0
        while True:
            attempt += 1
            endpoint = self.endpoint
            failure: Exception
            response: _Response | None = None
            try:
                answer = self._attempt(endpoint, method, key, headers, body, deadline, idempotent)
            except _DeadlineSpent as spent:
                raise FSTimeoutError() from spent.__cause__
            except _NoAnswer as lost:
                if lost.delivered and not idempotent:
                    # It may have taken effect: whoever asked finds out by looking (the commit
                    # reads the root back), never by a blind second request.
                    raise _as_s3fs_raises(lost.failure) from lost.__cause__
                failure = lost.failure
            except Exception as exc:
                if not _is_connection_failure(exc):
                    raise
                failure = exc
            else:
                if answer.status < 300:
                    self._quota.refill(quota_drawn or _QUOTA_SUCCESS_REFUND)
                    return answer
                response = answer
                failure = _client_error(operation, answer, attempt)
                if not redirected and self._redirect(endpoint, operation, answer, failure):
                    redirected = True
                    attempt -= 1
                    continue
            delay, drawn = self._retry_delay(attempt, failure, response, idempotent)
            if delay is None:
                raise _as_s3fs_raises(failure)
            quota_drawn = drawn
            remaining = deadline - time.monotonic()
            if delay >= remaining:
                time.sleep(max(0.0, remaining))
                raise FSTimeoutError() from failure
            log.debug("retrying %s %s after %s (attempt %d)", method, key, failure, attempt)
            time.sleep(delay)

    def _retry_delay(
        self, attempt: int, failure: Exception, response: _Response | None, idempotent: bool
    ) -> tuple[float | None, int]:
        """Seconds to wait before the next attempt (None: give up), and what it drew from the
        retry quota (botocore's rules for its mode; a request that is not idempotent only
        after an answer saying that nothing was done)."""
        endpoint = self.endpoint
        if attempt >= endpoint.max_attempts:
            return None, 0
        status = response.status if response is not None else None
        code = _error_code(failure)
        if not idempotent and response is not None and not _nothing_done(status, code):
            return None, 0
        if endpoint.retry_mode == "legacy":
            if not (
                response is None
                or status in _LEGACY_STATUSES
                or (status == 400 and code in _LEGACY_CODES_ON_400)
            ):
                return None, 0
            return self.jitter() * 2 ** (attempt - 1), 0
        if not (response is None or status in _STANDARD_STATUSES or code in _STANDARD_CODES):
            return None, 0
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

        timeout = isinstance(failure, (ConnectTimeoutError, ReadTimeoutError))
        cost = _QUOTA_TIMEOUT_RETRY_COST if timeout else _QUOTA_RETRY_COST
        if not self._quota.acquire(cost):
            return None, 0
        return self.jitter() * min(2 ** (attempt - 1), _STANDARD_MAX_BACKOFF_SECONDS), cost

    def _redirect(
        self, endpoint: Endpoint, operation: str, response: _Response, failure: Exception
    ) -> bool:
        """Re-resolve the endpoint for the bucket's own region when S3 says the bucket is in
        another one (botocore's region redirector); True when the request is to be sent again."""
        code = _error_code(failure)
        error = getattr(failure, "response", {}).get("Error", {})
        if not (
            response.status in (301, 302, 307)
            or code == "PermanentRedirect"
            or (code == "AuthorizationHeaderMalformed" and "Region" in error)
            or (operation == "HeadObject" and response.status == 400)
        ):
            return False
        region = response.headers.get("x-amz-bucket-region") or error.get("Region")
        if not region or region == endpoint.region or endpoint.custom:
            return False
        if self._resolve_for_region is None:
            return False
        try:
            redirected = self._resolve_for_region(region)
        except Exception as exc:  # a courtesy: without it the error stands
            log.debug("no redirect to %s: %s", region, exc)
            return False
        log.debug("the bucket is in %s: its requests go to %s", region, redirected.url)
        self.endpoint = redirected
        self._pool = _Pool(redirected)
        return True

    def _attempt(
        self,
        endpoint: Endpoint,
        method: str,
        key: str,
        headers: dict[str, str],
        body: bytes,
        deadline: float,
        idempotent: bool,
    ) -> _Response:
        """One attempt: sent once more at once on a new connection when a kept-alive one turns
        out to be closed before any answer (a request that is not idempotent: only when it
        never left whole). ``_NoAnswer`` when no whole answer came."""
        path = endpoint.path_prefix + sigv4.uri_path(key)
        url = endpoint.url + path  # botocore's exceptions name the request's URL
        request = self._request_head(endpoint, method, path, headers, body, deadline)
        pool = self._pool
        fresh = False
        while True:
            connection = pool.take(url, deadline, fresh=fresh)
            try:
                response, keep = connection.exchange(url, request, body, method, deadline)
            except _NoAnswer as lost:
                connection.close()
                if (
                    lost.stale
                    and connection.reused
                    and not fresh
                    and (idempotent or not lost.delivered)
                ):
                    fresh = True
                    continue
                raise
            except BaseException:
                connection.close()
                raise
            if keep:
                pool.give(connection)
            else:
                connection.close()
            return response

    def _request_head(
        self,
        endpoint: Endpoint,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        deadline: float,
    ) -> bytes:
        """The request line and headers, signed."""
        signed = {"host": endpoint.host_header, **headers}
        # botocore's rule: as configured; else not a PUT's body that carries a checksum over
        # TLS; else signed.
        if endpoint.sign_payload is not None:
            sign_payload = endpoint.sign_payload
        else:
            sign_payload = not (
                method == "PUT" and endpoint.scheme == "https" and "x-amz-checksum-crc32" in headers
            )
        signed["x-amz-content-sha256"] = (
            sigv4.payload_hash(body) if sign_payload else sigv4.UNSIGNED_PAYLOAD
        )
        signed["x-amz-date"] = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        lines = [f"{method} {path} HTTP/1.1"]
        if endpoint.region is not None:
            credentials = self._frozen_credentials(deadline)
            if credentials.token:
                signed["x-amz-security-token"] = credentials.token
            authorization = sigv4.authorization(
                method=method,
                path=path,
                query="",
                headers=signed,
                access_key=credentials.access_key,
                secret_key=credentials.secret_key,
                region=endpoint.region,
            )
            lines.append(f"authorization: {authorization}")
        lines.extend(f"{name}: {value}" for name, value in signed.items())
        lines.append(f"user-agent: {self._user_agent}")
        if method == "PUT":
            lines.append(f"content-length: {len(body)}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    def _frozen_credentials(self, deadline: float) -> Any:
        """The credentials to sign with; a refresh (IMDS, a container's endpoint, STS: requests
        of botocore's own, with timeouts and retries of their own) waits no longer than the
        deadline."""
        credentials = self._credentials
        if not credentials:
            from botocore.exceptions import NoCredentialsError

            raise NoCredentialsError()
        refresh_needed = getattr(credentials, "refresh_needed", None)
        if refresh_needed is None or not refresh_needed():
            return credentials.get_frozen_credentials()
        return within_deadline(credentials.get_frozen_credentials, deadline).result()


def _error_code(failure: Exception) -> str | None:
    response = getattr(failure, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def _nothing_done(status: int | None, code: str | None) -> bool:
    """True when S3's answer says the request was not carried out (throttled, busy, or its
    body not read in time), so that sending it again cannot do it twice."""
    return status in (429, 503) or code in _STANDARD_CODES


def _is_connection_failure(exc: Exception) -> bool:
    from botocore.exceptions import ConnectionError, HTTPClientError

    return isinstance(exc, (ConnectionError, HTTPClientError))


def _client_error(operation: str, response: _Response, attempt: int) -> Exception:
    """botocore's ClientError for an S3 error answer, with botocore's response dict."""
    from botocore.exceptions import ClientError

    error: dict[str, str] = {}
    if response.body:
        try:
            root = ElementTree.fromstring(response.body)
        except ElementTree.ParseError:
            root = None
        if root is not None and _local_name(root.tag) == "Error":
            for child in root:
                error[_local_name(child.tag)] = child.text or ""
    request_id = error.pop("RequestId", None) or response.headers.get("x-amz-request-id", "")
    host_id = error.pop("HostId", None) or response.headers.get("x-amz-id-2", "")
    if "Code" not in error:
        # botocore's: the status as the code, its standard phrase as the message.
        error = {"Code": str(response.status), "Message": responses.get(response.status, "")}
    error.setdefault("Message", "")
    parsed = {
        "Error": error,
        "ResponseMetadata": {
            "RequestId": request_id,
            "HostId": host_id,
            "HTTPStatusCode": response.status,
            "HTTPHeaders": dict(response.headers),
            "RetryAttempts": attempt - 1,
        },
    }
    return ClientError(parsed, operation)  # type: ignore[no-any-return]


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _as_s3fs_raises(failure: Exception) -> Exception:
    """What s3fs raises for it: an S3 error as the Python exception s3fs maps it to (the
    ClientError chained); anything else as it is."""
    if getattr(failure, "response", None) is None:
        return failure
    from s3fs.errors import translate_boto_error

    translated: Exception = translate_boto_error(failure)
    return translated


# -- connections ---------------------------------------------------------------------------------


class _NoAnswer(Exception):
    """An exchange that ended without a whole answer. ``failure``: botocore's exception for it;
    ``delivered``: the whole request was sent, so the store may have acted on it; ``stale``:
    not a byte of an answer came (a kept-alive connection the server had closed, or reset)."""

    def __init__(self, failure: Exception, *, delivered: bool, stale: bool) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.delivered = delivered
        self.stale = stale


class _RetryQuota:
    """botocore's retry quota for the standard mode: retries draw on it, successes refill it."""

    def __init__(self) -> None:
        self._available = _QUOTA_CAPACITY
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def acquire(self, amount: int) -> bool:
        self._after_fork()
        with self._lock:
            if amount > self._available:
                return False
            self._available -= amount
            return True

    def refill(self, amount: int) -> None:
        if self._available >= _QUOTA_CAPACITY:
            return
        self._after_fork()
        with self._lock:
            self._available = min(_QUOTA_CAPACITY, self._available + amount)

    def _after_fork(self) -> None:
        if self._pid != os.getpid():  # a lock held by another thread at the fork stays held
            self._lock, self._pid = threading.Lock(), os.getpid()


class _Pool:
    """Idle kept-alive connections to one endpoint, shared by the threads of one process."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._tls: ssl.SSLContext | None = None
        if endpoint.scheme == "https":
            self._tls = _tls_context(endpoint.verify)

    def take(self, url: str, deadline: float, fresh: bool = False) -> _Connection:
        if self._pid != os.getpid():
            # A forked child: the parent's connections are the parent's (and the lock may be
            # held by a thread that does not exist here). Left alone, never closed.
            self._idle, self._lock, self._pid = [], threading.Lock(), os.getpid()
        while not fresh:
            with self._lock:
                if not self._idle:
                    break
                connection = self._idle.pop()
            if connection.usable():
                connection.reused = True
                return connection
            connection.close()
        return _Connection.open(self._endpoint, self._tls, url, deadline)

    def give(self, connection: _Connection) -> None:
        if self._pid == os.getpid():
            with self._lock:
                if len(self._idle) < self._endpoint.pool_size:
                    self._idle.append(connection)
                    return
        connection.close()


def _tls_context(verify: bool | str) -> ssl.SSLContext:
    """TLS as botocore's: the configured CA bundle (or botocore's default one), or none."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    from botocore.httpsession import get_cert_path

    bundle = get_cert_path(verify)
    if isinstance(bundle, str) and os.path.isdir(bundle):
        return ssl.create_default_context(capath=bundle)
    return ssl.create_default_context(cafile=bundle)


def _remaining(configured: float, deadline: float) -> tuple[float, bool]:
    """The timeout of one wait: the configured one, or less when the deadline comes first (then
    True). ``_DeadlineSpent`` when nothing is left."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _DeadlineSpent()
    return (left, True) if left < configured else (configured, False)


class _Connection:
    """One HTTP/1.1 connection: requests go out whole, answers are read by Content-Length (or
    chunked, or to the end)."""

    __slots__ = ("_buffer", "endpoint", "reused", "sock")

    def __init__(self, endpoint: Endpoint, sock: socket.socket) -> None:
        self.endpoint = endpoint
        self.sock = sock
        self.reused = False
        self._buffer = b""

    @classmethod
    def open(
        cls, endpoint: Endpoint, tls: ssl.SSLContext | None, url: str, deadline: float
    ) -> _Connection:
        timeout, clipped = _remaining(endpoint.connect_timeout, deadline)
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
        except OSError as exc:
            raise _connect_failure(url, exc, clipped) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.tcp_keepalive:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if tls is not None:
                # The handshake has the connect timeout too, but never past the deadline
                # (a slow connect left less of it).
                timeout, clipped = _remaining(endpoint.connect_timeout, deadline)
                sock.settimeout(timeout)
                sock = tls.wrap_socket(sock, server_hostname=endpoint.host)
        except _DeadlineSpent:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            raise _connect_failure(url, exc, clipped) from exc
        return cls(endpoint, sock)

    def usable(self) -> bool:
        """False when the server closed the idle connection (or sent something unasked)."""
        if self._buffer:
            return False
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return False
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def exchange(
        self, url: str, head: bytes, body: bytes, method: str, deadline: float
    ) -> tuple[_Response, bool]:
        """Send a request, read its answer: (the answer, whether the connection stays open).
        ``_NoAnswer`` when no whole answer came."""
        sent = False
        try:
            self._send(head, body, deadline)
            sent = True
            return self._receive(method, deadline)
        except _DeadlineSpent:
            raise
        except TimeoutError as exc:  # the configured timeout (the deadline's is _DeadlineSpent)
            raise _NoAnswer(_read_timeout(url, exc), delivered=sent, stale=False) from exc
        except (OSError, _ProtocolError) as exc:
            stale = not sent or isinstance(exc, _NothingReceived)
            raise _NoAnswer(_closed(url, exc), delivered=sent, stale=stale) from exc

    def _send(self, head: bytes, body: bytes, deadline: float) -> None:
        timeout = self.endpoint.read_timeout
        if len(body) <= _SEND_IN_ONE_BYTES:
            self._wait(timeout, deadline, self.sock.sendall, head + body)
            return
        self._wait(timeout, deadline, self.sock.sendall, head)
        view = memoryview(body)
        for offset in range(0, len(body), _SEND_CHUNK_BYTES):
            self._wait(
                timeout, deadline, self.sock.sendall, view[offset : offset + _SEND_CHUNK_BYTES]
            )

    def _wait(self, configured: float, deadline: float, call: Any, *args: Any) -> Any:
        """``call(*args)`` on the socket under the configured timeout, or the deadline's."""
        timeout, clipped = _remaining(configured, deadline)
        self.sock.settimeout(timeout)
        try:
            return call(*args)
        except TimeoutError as exc:
            if clipped:
                raise _DeadlineSpent() from exc
            raise

    def _recv(self, deadline: float) -> bytes:
        data: bytes = self._wait(self.endpoint.read_timeout, deadline, self.sock.recv, _RECV_BYTES)
        return data

    def _receive(self, method: str, deadline: float) -> tuple[_Response, bool]:
        while True:
            status, reason, version, headers = self._read_head(deadline)
            if not 100 <= status < 200:
                break
        keep = version == "HTTP/1.1"
        connection = headers.get("connection", "").lower()
        if "close" in connection:
            keep = False
        elif "keep-alive" in connection:
            keep = True
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._read_chunked(deadline)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise _ProtocolError(f"Content-Length {headers['content-length']!r}") from None
            body = self._read_exactly(length, deadline)
        else:
            body = self._read_to_the_end(deadline)
            keep = False
        if self._buffer:  # more than the answer: nothing can be trusted on this connection
            keep = False
        return _Response(status, reason, headers, body), keep

    def _read_head(self, deadline: float) -> tuple[int, str, str, dict[str, str]]:
        received_any = bool(self._buffer)
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buffer) > _MAX_HEAD_BYTES:
                raise _ProtocolError("an answer's headers longer than 64 KiB")
            data = self._recv(deadline)
            if not data:
                if received_any:
                    raise _ProtocolError("the connection closed in the middle of an answer")
                raise _NothingReceived("the connection closed before any answer")
            received_any = True
            self._buffer += data
        head = self._buffer[:end].decode("latin-1")
        self._buffer = self._buffer[end + 4 :]
        lines = head.split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _ProtocolError(f"not an HTTP answer: {lines[0][:100]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise _ProtocolError(f"a header line without a colon: {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return int(code), reason, version, headers

    def _read_exactly(self, length: int, deadline: float) -> bytes:
        if len(self._buffer) >= length:
            body, self._buffer = self._buffer[:length], self._buffer[length:]
            return body
        out = bytearray(length)
        view = memoryview(out)
        filled = len(self._buffer)
        view[:filled] = self._buffer
        self._buffer = b""
        while filled < length:
            received = self._wait(
                self.endpoint.read_timeout, deadline, self.sock.recv_into, view[filled:]
            )
            if not received:
                raise _ProtocolError(f"the body ended after {filled} of {length} bytes")
            filled += received
        return bytes(out)

    def _read_line(self, deadline: float) -> bytes:
        while True:
            end = self._buffer.find(b"\r\n")
            if end >= 0:
                line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
                return line
            if len(self._buffer) > _MAX_HEAD_BYTES:
                raise _ProtocolError("a chunk header longer than 64 KiB")
            data = self._recv(deadline)
            if not data:
                raise _ProtocolError("the connection closed in the middle of a chunked body")
            self._buffer += data

    def _read_chunked(self, deadline: float) -> bytes:
        parts: list[bytes] = []
        while True:
            size_text = self._read_line(deadline).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _ProtocolError(f"a chunk size of {size_text[:20]!r}") from None
            if size == 0:
                while self._read_line(deadline):  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self._read_exactly(size, deadline))
            if self._read_line(deadline):
                raise _ProtocolError("a chunk longer than its size")

    def _read_to_the_end(self, deadline: float) -> bytes:
        parts = [self._buffer]
        self._buffer = b""
        while data := self._recv(deadline):
            parts.append(data)
        return b"".join(parts)


class _ProtocolError(Exception):
    """An answer that is not HTTP/1.1 as this client reads it, or one cut short."""


class _NothingReceived(_ProtocolError):
    """The connection closed before a single byte of an answer came."""


def _connect_failure(url: str, exc: OSError, clipped: bool) -> Exception:
    from botocore import exceptions

    failure: Exception
    if isinstance(exc, TimeoutError):
        if clipped:
            return _DeadlineSpent()
        failure = exceptions.ConnectTimeoutError(endpoint_url=url, error=exc)
    elif isinstance(exc, ssl.SSLError):
        failure = exceptions.SSLError(endpoint_url=url, error=exc)
    else:
        failure = exceptions.EndpointConnectionError(endpoint_url=url, error=exc)
    return failure


def _read_timeout(url: str, exc: BaseException) -> Exception:
    from botocore.exceptions import ReadTimeoutError

    return ReadTimeoutError(endpoint_url=url, error=exc)  # type: ignore[no-any-return]


def _closed(url: str, exc: BaseException) -> Exception:
    from botocore.exceptions import ConnectionClosedError, SSLError

    if isinstance(exc, ssl.SSLError) and not isinstance(
        exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)
    ):
        return SSLError(endpoint_url=url, error=exc)  # type: ignore[no-any-return]
    return ConnectionClosedError(endpoint_url=url)  # type: ignore[no-any-return]
