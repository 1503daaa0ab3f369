"""A loopback reverse proxy that makes a local S3 server (moto's) behave like a distant one:
every request waits a **first-byte latency** and every body moves at a **bandwidth cap**.

The S3 client's ``endpoint_url`` points at the proxy; the proxy forwards each request to the
target (``--target``, moto's server) and sends the answer back:

* **Latency, per request**: the first byte of a response leaves the proxy no earlier than
  ``latency_ms`` after the request was fully received (headers and body). The target gets the
  request at once, so its own service time is *inside* the latency (a request that took the
  target longer than the latency is counted in ``over_latency``: then the target, not the
  simulated network, was the limit). Requests do not queue behind each other: the server is
  threaded (one thread per client connection, ``ThreadingHTTPServer``) and the latency is a
  sleep in that thread, so N concurrent requests take one latency, not N, as on S3.
* **Bandwidth, per connection**: request and response bodies are paced to
  ``bandwidth_mbps`` **megabytes** (10^6 bytes, not megabits) per second, for each connection
  on its own (an S3 client gets about that much per connection and more with more
  connections); 0 disables the cap. A GET of S bytes takes about latency + S / bandwidth.
* **Transparent**: any method (GET, PUT, HEAD, POST, DELETE, ...), the path and query string
  untouched, every end-to-end header forwarded as it came, ``Host`` included, so a SigV4
  signature made for the proxy's address is the signature the target sees (moto's server does
  not check signatures anyway: ``moto.settings.INITIAL_NO_AUTH_ACTION_COUNT`` is infinite unless
  set). Bodies with a ``Content-Length`` stream through in 64 KiB blocks (``aws-chunked``
  uploads are such bodies: the framing is inside, the proxy does not look at it);
  ``Transfer-Encoding: chunked`` request bodies are de-chunked and sent on with a
  ``Content-Length`` (S3 itself wants one); ``Expect: 100-continue`` is answered by the proxy.
  Hop-by-hop headers (``Connection``, ``Keep-Alive``, ``Transfer-Encoding``, ``Expect``, ...)
  are not forwarded. Each client connection has its own keep-alive connection to the target.
* **Counters**: requests by kind (``list`` is a GET with ``list-type=2``, ``list_v1`` a GET of
  a bucket without it, ``get``, ``head``, ``put``, ``delete``, ``delete_objects`` a POST with
  ``?delete``, ``post`` any other POST), by method and by status, bytes each way, the target's
  time. ``requests_by_kind()``, ``stats()``, ``reset()`` (returns what it cleared).

Library::

    with MotoS3() as moto, LatencyProxy(moto.endpoint, latency_ms=20) as proxy:
        client = boto3.client("s3", endpoint_url=proxy.endpoint, region_name="us-east-1")
        ...
        print(proxy.requests_by_kind())

``MotoS3`` runs moto's S3 server in this process (``ThreadedMotoServer`` on 127.0.0.1, a free
port, as the tests' ``s3_server`` fixture does) with dummy credentials in the environment, and
with ``indexed_listing`` on by default: moto answers every ``ListObjectsV2`` by scanning (and
sorting) every key of the bucket, about 17 ms at 20k keys and 130 ms at 200k, which would make
a listing of 4,096 prefixes cost moto minutes of CPU where S3 answers each page in its usual
latency. ``indexed_listing`` keeps a sorted index of each bucket's keys (updated on every put
and delete) and answers from it: the cost of a page is then its own size, as on S3. It also
writes objects and sets their ``LastModified`` directly in moto's backend (``put_objects``,
``set_last_modified``): a benchmark can load a large lakehouse without an HTTP request per file
and plant files that look days old. ``fast_list_rendering`` (also on by default) renders
ListObjectsV2 pages itself, checked against moto's rendering of each page's first entry: moto
5.2's generic serializer spent about 0.3 CPU-seconds on a page of 1,000 keys.

Command line (runs until interrupted, then prints the counters)::

    python bench/latency_proxy.py --target http://127.0.0.1:5000 --port 5001 --latency-ms 20
    python bench/latency_proxy.py --moto --port 5001      # also starts moto (bucket --bucket)
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import hashlib
import http.client
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "DEFAULT_BANDWIDTH_MBPS",
    "DEFAULT_LATENCY_MS",
    "LatencyProxy",
    "MotoS3",
    "cached_backend_lookup",
    "fast_list_rendering",
    "indexed_listing",
    "request_kind",
]

DEFAULT_LATENCY_MS = 20.0
#: Megabytes (10^6 bytes) per second, per connection.
DEFAULT_BANDWIDTH_MBPS = 100.0
BLOCK = 64 * 1024
UPSTREAM_TIMEOUT_SECONDS = 300.0
#: Request bodies up to this size are read whole before they go on (so that they can be sent
#: again if the target had closed the keep-alive connection); bigger ones stream through.
REPLAYABLE_BODY_BYTES = 16 << 20
#: Not forwarded in either direction (RFC 9110 section 7.6.1, plus Expect, which the proxy answers).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
    }
)
#: Dummy credentials for moto (it never checks them, botocore insists on having some).
MOTO_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
#: Settings that would send a client somewhere else than the endpoint it is given.
MOTO_ENV_REMOVED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


# =============================================================================================
# What a request is


def request_kind(method: str, target: str) -> str:
    """The S3 operation family of a request, from its method and path-style target
    (``/bucket/key?query``): list, list_v1, get, head, put, delete, delete_objects, post."""
    parsed = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
    path = parsed.path.strip("/")
    bucket_level = "/" not in path
    if method == "GET":
        if query.get("list-type") == ["2"]:
            return "list"
        if (
            bucket_level
            and path
            and not ({"location", "versioning", "policy", "acl", "tagging"} & query.keys())
        ):
            return "list_v1"
        return "get"
    if method == "POST":
        return "delete_objects" if "delete" in query else "post"
    if method in ("HEAD", "PUT", "DELETE"):
        return method.lower()
    return "other"


class _Counters:
    # A request is counted once its answer has left: a client can hold the answer a moment
    # before the proxy's thread counts it, so a snapshot first waits (this long at most) for
    # the requests in flight to be counted.
    SETTLE_SECONDS = 5.0

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._clear()

    def _clear(self) -> None:
        self.by_kind: dict[str, int] = {}
        self.by_method: dict[str, int] = {}
        self.by_status: dict[str, int] = {}
        self.bytes_in = 0  # request bodies, client -> target
        self.bytes_out = 0  # response bodies, target -> client
        self.upstream_seconds = 0.0
        self.upstream_max_seconds = 0.0
        self.over_latency = 0
        self.errors = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(
        self,
        kind: str,
        method: str,
        status: int,
        bytes_in: int,
        bytes_out: int,
        upstream: float,
        over: bool,
        failed: bool,
    ) -> None:
        with self._lock:
            self.in_flight -= 1
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            self.by_method[method] = self.by_method.get(method, 0) + 1
            self.by_status[str(status)] = self.by_status.get(str(status), 0) + 1
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out
            self.upstream_seconds += upstream
            self.upstream_max_seconds = max(self.upstream_max_seconds, upstream)
            self.over_latency += over
            self.errors += failed
            self._lock.notify_all()

    def snapshot(self, reset: bool = False) -> dict[str, Any]:
        with self._lock:
            self._lock.wait_for(lambda: self.in_flight <= 0, timeout=self.SETTLE_SECONDS)
            total = sum(self.by_kind.values())
            out = {
                "requests": total,
                "by_kind": dict(sorted(self.by_kind.items())),
                "by_method": dict(sorted(self.by_method.items())),
                "by_status": dict(sorted(self.by_status.items())),
                "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out,
                "upstream_seconds_total": round(self.upstream_seconds, 3),
                "upstream_ms_mean": round(self.upstream_seconds / total * 1e3, 2)
                if total
                else None,
                "upstream_ms_max": round(self.upstream_max_seconds * 1e3, 1),
                "over_latency": self.over_latency,
                "proxy_errors": self.errors,
                "max_in_flight": self.max_in_flight,
            }
            if reset:
                in_flight = self.in_flight
                self._clear()
                self.in_flight = in_flight
            return out


class _Pacer:
    """Sleeps so that the bytes counted so far never run ahead of ``rate`` bytes/s."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.sent = 0

    def account(self, n: int) -> None:
        self.sent += n
        if self.rate > 0:
            delay = self.start + self.sent / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)


# =============================================================================================
# The proxy


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 drops SYNs when many clients connect at once
    proxy: LatencyProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the status line and headers go out in one write and the body in another; with
    # Nagle's algorithm the body would wait for the client's delayed ACK of the headers (40 ms).
    disable_nagle_algorithm = True
    server: _Server
    _upstreams: dict[tuple[str, int], http.client.HTTPConnection] | None = None
    _dest: tuple[str, int] = ("", 0)  # where the request being forwarded goes
    _body_received = 0.0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = do_GET

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._close_upstream()

    def _connection(self, dest: tuple[str, int]) -> http.client.HTTPConnection:
        if self._upstreams is None:
            self._upstreams = {}
        conn = self._upstreams.get(dest)
        if conn is None:
            conn = http.client.HTTPConnection(*dest, timeout=UPSTREAM_TIMEOUT_SECONDS)
            self._upstreams[dest] = conn
        return conn

    def _read_chunked(self, pacer: _Pacer) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self.rfile.readline(65537)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass  # trailers: dropped (S3's trailing checksums come inside aws-chunked bodies)
                return b"".join(parts)
            data = self.rfile.read(size)
            pacer.account(len(data))
            parts.append(data)
            self.rfile.readline(3)

    def _read_body(self, length: int, pacer: _Pacer) -> bytes:
        parts: list[bytes] = []
        remaining = length
        while remaining > 0:
            block = self.rfile.read(min(BLOCK, remaining))
            if not block:
                raise ConnectionError("the client closed the connection in the middle of a body")
            remaining -= len(block)
            pacer.account(len(block))
            parts.append(block)
        return b"".join(parts)

    def _send_upstream(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        length: int,
        pacer: _Pacer,
    ) -> tuple[http.client.HTTPResponse, float]:
        """Send the request on: ``body``, or else ``length`` bytes streamed from the client.
        Returns the response and the moment the request was fully received."""
        conn = self._connection(self._dest)
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for key, value in headers:
            conn.putheader(key, value)
        conn.endheaders()
        if body is not None:
            conn.send(body)
            received = self._body_received
        else:
            remaining = length
            while remaining > 0:
                block = self.rfile.read(min(BLOCK, remaining))
                if not block:
                    raise ConnectionError(
                        "the client closed the connection in the middle of a body"
                    )
                remaining -= len(block)
                pacer.account(len(block))
                conn.send(block)
            received = time.monotonic()
        return conn.getresponse(), received

    def _forward(self) -> None:
        proxy = self.server.proxy
        method, target = self.command, self.path
        kind = request_kind(method, target)
        dests = proxy.destinations(kind, target)
        if len(dests) > 1:
            self._forward_listing(dests, kind)
            return
        self._dest = dests[0]
        proxy.counters.begin()
        status, length, bytes_out, upstream_s, over, failed, answered = (
            0,
            0,
            0,
            0.0,
            False,
            False,
            False,
        )
        try:
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
            length = int(self.headers.get("Content-Length") or 0)
            pacer = _Pacer(proxy.bandwidth_bytes_per_second)
            body: bytes | None = None  # None: a big body, streamed to the target as it comes
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                body = self._read_chunked(pacer)
                length = len(body)
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
                headers.append(("Content-Length", str(length)))
            elif length <= REPLAYABLE_BODY_BYTES:
                body = self._read_body(length, pacer)
            self._body_received = time.monotonic()
            try:
                response, received = self._send_upstream(
                    method, target, headers, body, length, pacer
                )
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The target dropped the idle keep-alive connection: once more on a fresh one,
                # unless the body was streamed (gone).
                self._close_upstream()
                if body is None:
                    raise
                response, received = self._send_upstream(
                    method, target, headers, body, length, pacer
                )
            upstream_s = time.monotonic() - received
            status = response.status
            over = upstream_s > proxy.latency_seconds
            delay = received + proxy.latency_seconds - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the first byte leaves no earlier than the latency
            out_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            has_body = method != "HEAD" and status not in (204, 304) and not 100 <= status < 200
            buffered: bytes | None = None
            if has_body and response.getheader("Content-Length") is None:
                buffered = response.read()  # no length from the target: buffer it and give one
                out_headers.append(("Content-Length", str(len(buffered))))
            answered = True
            self.send_response_only(status, response.reason)
            for key, value in out_headers:
                self.send_header(key, value)
            self.end_headers()
            pacer = _Pacer(proxy.bandwidth_bytes_per_second)
            blocks: Iterable[bytes] = (
                (buffered[i : i + BLOCK] for i in range(0, len(buffered), BLOCK))
                if buffered is not None
                else iter(lambda: response.read(BLOCK), b"")
                if has_body
                else ()
            )
            for block in blocks:
                pacer.account(len(block))  # a block leaves when the cap would have it delivered
                self.wfile.write(block)
                bytes_out += len(block)
            if not has_body:
                response.read()
            self.wfile.flush()
            if response.will_close:
                self._close_upstream()
        except Exception as exc:
            failed = True
            self._close_upstream()
            self.close_connection = True
            if not answered:  # nothing sent yet: tell the client
                status = 502
                with contextlib.suppress(OSError):
                    self.send_error(502, f"latency proxy: {type(exc).__name__}: {exc}")
        finally:
            proxy.counters.end(kind, method, status, length, bytes_out, upstream_s, over, failed)

    def _forward_listing(self, dests: list[tuple[str, int]], kind: str) -> None:
        """A listing whose prefix spans several targets (``routes``): asked of each; the one
        answer with entries goes back (or the first, when none has any). Two with entries
        would need their pages merged: a 502 says so."""
        proxy = self.server.proxy
        proxy.counters.begin()
        status, bytes_out, failed = 0, 0, False
        received = time.monotonic()
        try:
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
            answers = []
            for dest in dests:
                self._dest = dest
                response, _ = self._send_upstream(
                    self.command, self.path, headers, b"", 0, _Pacer(0)
                )
                answers.append((response, response.read()))
            full = [a for a in answers if b"<Contents>" in a[1] or b"<CommonPrefixes>" in a[1]]
            if len(full) > 1:
                raise ValueError("a listing with entries on several routed targets (not merged)")
            response, body = (full or answers)[0]
            status = response.status
            delay = received + proxy.latency_seconds - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.send_response_only(status, response.reason)
            for key, value in response.getheaders():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            bytes_out = len(body)
        except Exception as exc:
            failed = True
            self._close_upstream()
            self.close_connection = True
            status = 502
            with contextlib.suppress(OSError):
                self.send_error(502, f"latency proxy: {type(exc).__name__}: {exc}")
        finally:
            proxy.counters.end(
                kind, self.command, status, 0, bytes_out, time.monotonic() - received, False, failed
            )

    def _close_upstream(self) -> None:
        for conn in (self._upstreams or {}).values():
            conn.close()
        self._upstreams = None


class LatencyProxy:
    """A reverse proxy to ``target`` (``http://host:port``) on ``host:port`` (0: a free port),
    adding ``latency_ms`` per request and a per-connection ``bandwidth_mbps`` (megabytes per
    second; 0 = unlimited) cap. Both can be changed while it runs."""

    def __init__(
        self,
        target: str,
        latency_ms: float = DEFAULT_LATENCY_MS,
        bandwidth_mbps: float = DEFAULT_BANDWIDTH_MBPS,
        host: str = "127.0.0.1",
        port: int = 0,
        routes: Iterable[tuple[str, str]] = (),
    ) -> None:
        """``routes``: (path prefix, target) pairs; a request whose path (``/bucket/key``)
        starts with a prefix goes to its target (the first that matches), any other to
        ``target``. A listing goes to every target whose keys its prefix may hold."""
        self.target = target
        self.target_host, self.target_port = _host_port(target)
        self.routes = [(prefix, _host_port(to)) for prefix, to in routes]
        self.latency_ms = latency_ms
        self.bandwidth_mbps = bandwidth_mbps
        self.counters = _Counters()
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def destinations(self, kind: str, target: str) -> list[tuple[str, int]]:
        """Where a request goes (see ``routes``): one target, or for a listing every target
        whose keys its prefix may hold."""
        default = (self.target_host, self.target_port)
        if not self.routes:
            return [default]
        parsed = urllib.parse.urlsplit(target)
        if kind in ("list", "list_v1"):
            query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
            path = parsed.path.rstrip("/") + "/" + query.get("prefix", [""])[0]
            found = [
                to
                for prefix, to in self.routes
                if prefix.startswith(path) or path.startswith(prefix)
            ]
            if not any(path.startswith(prefix) for prefix, _ in self.routes):
                found.append(default)
            return list(dict.fromkeys(found)) or [default]
        path = urllib.parse.unquote(parsed.path)
        for prefix, to in self.routes:
            if path.startswith(prefix):
                return [to]
        return [default]

    @property
    def latency_seconds(self) -> float:
        return max(0.0, self.latency_ms) / 1e3

    @property
    def bandwidth_bytes_per_second(self) -> float:
        return max(0.0, self.bandwidth_mbps) * 1e6

    def start(self) -> LatencyProxy:
        server = _Server((self._host, self._port), _Handler)
        server.proxy = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="latency-proxy",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        return f"http://{self._host}:{self.port}"

    def requests_by_kind(self) -> dict[str, int]:
        by_kind: dict[str, int] = self.counters.snapshot()["by_kind"]
        return by_kind

    def stats(self) -> dict[str, Any]:
        return {
            **self.counters.snapshot(),
            "latency_ms": self.latency_ms,
            "bandwidth_mbps": self.bandwidth_mbps,
        }

    def reset(self) -> dict[str, Any]:
        """Zero the counters; returns what they held."""
        return self.counters.snapshot(reset=True)


# =============================================================================================
# moto: a listing that costs what S3's does, and a server in this process

_INDEX_LOCK = threading.RLock()
_INDEX_ATTR = "_bench_sorted_names"
_installed: dict[str, Any] = {}
_generation = [0]


def _names(store: Any) -> list[str]:
    """The sorted key names of a moto key store, (re)built when missing or stale."""
    index = store.__dict__.get(_INDEX_ATTR)
    if index is None or index[0] != _generation[0]:
        index = (_generation[0], sorted(dict.keys(store)))
        store.__dict__[_INDEX_ATTR] = index
    names: list[str] = index[1]
    return names


def _index_add(store: Any, name: str) -> None:
    index = store.__dict__.get(_INDEX_ATTR)
    if index is not None and index[0] == _generation[0]:
        names = index[1]
        i = bisect.bisect_left(names, name)
        if i == len(names) or names[i] != name:
            names.insert(i, name)


def _index_remove(store: Any, name: str) -> None:
    index = store.__dict__.get(_INDEX_ATTR)
    if index is not None and index[0] == _generation[0]:
        names = index[1]
        i = bisect.bisect_left(names, name)
        if i < len(names) and names[i] == name:
            del names[i]


def _prefix_end(prefix: str) -> str:
    """The least string greater than every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _list_objects_v2_indexed(
    self: Any,
    bucket: Any,
    prefix: str | None,
    delimiter: str | None,
    continuation_token: str | None,
    start_after: str | None,
    max_keys: int,
) -> Any:
    """``S3Backend.list_objects_v2`` from the sorted index: bisect to the start, read one page."""
    from moto.s3.models import FakeDeleteMarker, FakeTableStorageBucket

    original = _installed["list_objects_v2"]
    after = self._pagination_tokens.get(continuation_token) if continuation_token else start_after
    if isinstance(bucket, FakeTableStorageBucket) or (continuation_token and after is None):
        return original(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
    prefix = prefix or ""
    if max_keys == 0:
        return [], False, None
    page: list[Any] = []
    truncated = False
    with _INDEX_LOCK:
        store = bucket.keys
        names = _names(store)
        i = bisect.bisect_left(names, prefix)
        if after is not None and after >= prefix:
            i = bisect.bisect_right(names, after)
        n = len(names)
        while i < n:
            name = names[i]
            if not name.startswith(prefix):
                break
            rest = name[len(prefix) :]
            cut = rest.find(delimiter) if delimiter else -1
            if delimiter and cut >= 0:
                folder = prefix + rest[: cut + len(delimiter)]
                i = bisect.bisect_left(names, _prefix_end(folder), i)
                if after is not None and folder <= after:
                    continue
                entry: Any = folder
            else:
                i += 1
                versions = dict.get(store, name)
                if not versions or isinstance(versions[-1], FakeDeleteMarker):
                    continue
                entry = versions[-1]
            if len(page) == max_keys:
                truncated = True
                break
            page.append(entry)
    token = None
    if truncated:
        last = page[-1] if isinstance(page[-1], str) else page[-1].name
        token = hashlib.md5(last.encode("utf-8")).hexdigest()  # moto's own token
        self._pagination_tokens[token] = last
    return page, truncated, token


def _install_indexed_listing() -> None:
    from moto.s3.models import S3Backend
    from moto.s3.utils import _VersionedKeyStore

    with _INDEX_LOCK:
        if _installed:
            return
        _generation[0] += 1
        setitem, setlist, pop = (
            _VersionedKeyStore.__setitem__,
            _VersionedKeyStore.setlist,
            _VersionedKeyStore.pop,
        )

        def patched_setitem(store: Any, key: str, value: Any) -> Any:
            with _INDEX_LOCK:
                _index_add(store, key)
                return setitem(store, key, value)

        def patched_setlist(store: Any, key: Any, list_: Any) -> Any:
            with _INDEX_LOCK:
                _index_add(store, key)
                return setlist(store, key, list_)

        def patched_pop(store: Any, key: str) -> None:
            with _INDEX_LOCK:
                _index_remove(store, key)
                pop(store, key)

        _installed.update(
            {
                "__setitem__": setitem,
                "setlist": setlist,
                "pop": pop,
                "list_objects_v2": S3Backend.list_objects_v2,
            }
        )
        _VersionedKeyStore.__setitem__ = patched_setitem  # type: ignore[method-assign]
        _VersionedKeyStore.setlist = patched_setlist  # type: ignore[method-assign,assignment]
        _VersionedKeyStore.pop = patched_pop  # type: ignore[method-assign,assignment]
        S3Backend.list_objects_v2 = _list_objects_v2_indexed  # type: ignore[method-assign]


def _uninstall_indexed_listing() -> None:
    from moto.s3.models import S3Backend
    from moto.s3.utils import _VersionedKeyStore

    with _INDEX_LOCK:
        if not _installed:
            return
        _VersionedKeyStore.__setitem__ = _installed["__setitem__"]  # type: ignore[method-assign]
        _VersionedKeyStore.setlist = _installed["setlist"]  # type: ignore[method-assign]
        _VersionedKeyStore.pop = _installed["pop"]  # type: ignore[method-assign]
        S3Backend.list_objects_v2 = _installed["list_objects_v2"]  # type: ignore[method-assign]
        _installed.clear()
        _generation[0] += 1  # indexes built so far are not kept up to date any more


@contextlib.contextmanager
def indexed_listing() -> Iterator[None]:
    """moto's ListObjectsV2 answered from a sorted index of each bucket's keys while inside
    (process-wide: every moto S3 backend in this process)."""
    installed_here = not _installed
    _install_indexed_listing()
    try:
        yield
    finally:
        if installed_here:
            _uninstall_indexed_listing()


@contextlib.contextmanager
def cached_backend_lookup() -> Iterator[None]:
    """moto's server finds the service of every request by its Host header twice, each time
    walking its list of modules with an ``os.path.isdir`` per module and matching URL patterns
    (about 3 ms of CPU per S3 request, half of what moto spends on one). The answer depends on
    the host alone: remember it while inside (process-wide)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_backend_for_host
    if getattr(original, "_bench_cached", False):
        yield
        return
    cache: dict[str | None, Any] = {}
    lock = threading.Lock()

    def cached(self: Any, host: str | None) -> Any:
        with lock:
            if host in cache:
                return cache[host]
        backend = original(self, host)
        with lock:
            cache[host] = backend
        return backend

    cached._bench_cached = True  # type: ignore[attr-defined]
    DomainDispatcherApplication.get_backend_for_host = cached  # type: ignore[method-assign]
    try:
        yield
    finally:
        DomainDispatcherApplication.get_backend_for_host = original  # type: ignore[method-assign]


# ListObjectsV2's Contents entries rendered here take exactly these fields (what moto gives a
# listing without fetch-owner or checksums); any other entry makes the page moto's alone.
_PLAIN_ENTRY_FIELDS = frozenset({"Key", "LastModified", "ETag", "Size", "StorageClass"})
_rendering: dict[str, Any] = {}
#: Pages answered by ``_serialized_fast`` ("fast") and by moto alone ("moto"): what the tests read.
RENDERED_PAGES: dict[str, int] = {"fast": 0, "moto": 0}
# LastModified values (moto's ISO strings) -> their text in moto's answers, learnt from moto.
_timestamp_texts: dict[str, str] = {}


def _entry_xml(entry: dict[str, Any], timestamp_text: str) -> str:
    """One ``<Contents>`` element as moto's serializer writes it (xmltodict's text escaping is
    ``xml.sax.saxutils.escape``: &, < and >)."""
    from xml.sax.saxutils import escape

    return (
        f"<Contents><Key>{escape(entry['Key'])}</Key><LastModified>{timestamp_text}</LastModified>"
        f"<ETag>{escape(entry['ETag'])}</ETag><Size>{int(entry['Size'])}</Size>"
        f"<StorageClass>{escape(entry['StorageClass'])}</StorageClass></Contents>"
    )


def _moto_page(
    self: Any, result: dict[str, Any], contents: list[dict[str, Any]]
) -> tuple[Any, Any, str]:
    """moto's own answer for ``result`` with these entries, its body as text."""
    from moto.core.responses import ActionResult

    status, headers, body = _rendering["serialized"](
        self, ActionResult(dict(result, Contents=contents))
    )
    return status, headers, body.decode("utf-8") if isinstance(body, bytes) else body


def _serialized_fast(self: Any, action_result: Any) -> Any:
    """``S3Response.serialized`` for ListObjectsV2: moto renders the page with its first entry
    only (the envelope, and that entry as the check of the rendering here), and every entry is
    rendered here and put in that entry's place. An entry whose timestamp moto has not rendered
    yet is first rendered by moto alone and checked the same way. Anything else (another
    action, an entry with other fields, a check that fails) is moto's own answer."""
    from moto.core.responses import ActionResult

    serialized = _rendering["serialized"]
    result = action_result.result if type(action_result) is ActionResult else None
    contents = result.get("Contents") if isinstance(result, dict) else None
    if (
        self.data.get("Action") != "ListObjectsV2"
        or not isinstance(contents, list)
        or len(contents) < 2
        or not all(
            isinstance(e, dict)
            and e.keys() == _PLAIN_ENTRY_FIELDS
            and isinstance(e["LastModified"], str)
            for e in contents
        )
    ):
        if self.data.get("Action") == "ListObjectsV2":
            RENDERED_PAGES["moto"] += 1
        return serialized(self, action_result)
    assert isinstance(result, dict)
    for entry in contents:
        stamp = entry["LastModified"]
        if stamp not in _timestamp_texts:
            _, _, body = _moto_page(self, result, [entry])
            opened, closed = body.find("<LastModified>"), body.find("</LastModified>")
            text = body[opened + len("<LastModified>") : closed] if 0 <= opened < closed else None
            if text is None or body.count(_entry_xml(entry, text)) != 1:
                RENDERED_PAGES["moto"] += 1
                return serialized(self, action_result)
            _timestamp_texts[stamp] = text
    rendered = [_entry_xml(entry, _timestamp_texts[entry["LastModified"]]) for entry in contents]
    status, headers, body = _moto_page(self, result, contents[:1])
    if body.count(rendered[0]) != 1:
        RENDERED_PAGES["moto"] += 1
        return serialized(self, action_result)
    RENDERED_PAGES["fast"] += 1
    data = body.replace(rendered[0], "".join(rendered)).encode("utf-8")
    for name in list(headers):
        if name.lower() == "content-length":
            headers[name] = str(len(data))
    return status, headers, data


@contextlib.contextmanager
def fast_list_rendering() -> Iterator[None]:
    """moto's ListObjectsV2 pages rendered at the cost of their bytes while inside
    (process-wide). moto 5.2's serializer walks the botocore shape for every field of every
    entry and parses each LastModified with dateutil: about 0.3 CPU-seconds per page of 1,000
    keys on the development VM, so that a listing of 100k objects cost moto half a minute of
    the two cores the jobs run on, where S3 answers each page in its latency. moto still
    renders every page's envelope and first entry; the other entries are written as it writes
    them (``_serialized_fast``)."""
    from moto.s3.responses import S3Response

    with _INDEX_LOCK:
        nested = bool(_rendering)
        if not nested:
            _rendering["serialized"] = S3Response.serialized
            S3Response.serialized = _serialized_fast  # type: ignore[method-assign]
    try:
        yield
    finally:
        if not nested:
            with _INDEX_LOCK:
                S3Response.serialized = _rendering.pop("serialized")  # type: ignore[method-assign]


class MotoS3:
    """moto's S3 server in this process on 127.0.0.1 (a free port unless ``port``), dummy
    credentials in this process's environment while it runs, buckets made directly in moto."""

    def __init__(self, port: int = 0, indexed: bool = True, region: str = "us-east-1") -> None:
        """``indexed``: ``indexed_listing`` and ``cached_backend_lookup`` while it runs."""
        self._port = port
        self.indexed = indexed
        self.region = region
        self._server: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._listing: contextlib.ExitStack | None = None

    def start(self) -> MotoS3:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request on stderr
        for name in (*MOTO_ENV, *MOTO_ENV_REMOVED):
            self._saved_env[name] = os.environ.get(name)
        os.environ.update(MOTO_ENV)
        for name in MOTO_ENV_REMOVED:
            os.environ.pop(name, None)
        self._listing = contextlib.ExitStack()
        if self.indexed:
            self._listing.enter_context(indexed_listing())
            self._listing.enter_context(cached_backend_lookup())
            self._listing.enter_context(fast_list_rendering())
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self._port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._listing is not None:
            self._listing.close()
            self._listing = None
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()

    def __enter__(self) -> MotoS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"

    @property
    def backend(self) -> Any:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    def create_bucket(self, bucket: str) -> None:
        self.backend.create_bucket(bucket, self.region)

    def put_objects(self, bucket: str, items: Iterable[tuple[str, bytes]]) -> int:
        """Write objects straight into moto's backend (no HTTP); returns how many."""
        backend = self.backend
        count = 0
        for key, data in items:
            backend.put_object(bucket, key, data)
            count += 1
        return count

    def set_last_modified(self, bucket: str, key: str, epoch_seconds: float) -> None:
        """Backdate an object (S3 itself never allows this)."""
        obj = self.backend.get_object(bucket, key)
        obj.last_modified = datetime.fromtimestamp(epoch_seconds, UTC).replace(
            tzinfo=None
        )  # moto's are naive UTC

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix``, sorted (from the backend, no HTTP)."""
        store = self.backend.get_bucket(bucket).keys
        return sorted(k for k in list(dict.keys(store)) if k.startswith(prefix))

    def delete_objects(self, bucket: str, keys: Iterable[str]) -> int:
        backend = self.backend
        count = 0
        for key in keys:
            backend.delete_object(bucket, key)
            count += 1
        return count


# =============================================================================================
# Command line


def _serve_moto_only(bucket: str) -> int:
    with MotoS3() as moto:
        moto.create_bucket(bucket)
        print(f"moto S3 on {moto.endpoint}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            while not stop.wait(1.0):
                pass
    return 0


class MotoS3Process:
    """``MotoS3`` in a process of its own (``--moto --moto-only``), with ``bucket`` made.

    A load test keeps moto out of the process that runs the latency proxy and the clients'
    bookkeeping: in one process the proxy's threads and moto's share one interpreter lock, and
    requests in flight wait for it, a queue S3 itself never shows."""

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self._process: subprocess.Popen[str] | None = None
        self.endpoint = ""

    def __enter__(self) -> MotoS3Process:
        self._process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--moto",
                "--moto-only",
                "--bucket",
                self.bucket,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.startswith("moto S3 on "):
            self._process.kill()
            raise RuntimeError(f"moto did not start: {line!r}")
        self.endpoint = line.split("moto S3 on ", 1)[1].strip()
        return self

    def cpu_seconds(self) -> float:
        """The moto process's CPU time so far (user + system)."""
        assert self._process is not None
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None


def _host_port(url: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or not parsed.hostname:
        raise ValueError(f"target must be http://host:port, not {url!r}")
    return parsed.hostname, parsed.port or 80


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None, ready: Callable[[LatencyProxy], None] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--target", help="the S3 server to forward to: http://HOST:PORT")
    target.add_argument(
        "--moto", action="store_true", help="start moto's S3 server here and forward to it"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="the proxy's port on 127.0.0.1 (default: a free one)"
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=DEFAULT_LATENCY_MS,
        help=f"first-byte latency per request (default {DEFAULT_LATENCY_MS:g})",
    )
    parser.add_argument(
        "--bandwidth-mbps",
        type=float,
        default=DEFAULT_BANDWIDTH_MBPS,
        help="body bandwidth per connection in megabytes (10^6 bytes) per second, "
        f"0 = unlimited (default {DEFAULT_BANDWIDTH_MBPS:g})",
    )
    parser.add_argument(
        "--bucket", default="bench", help="with --moto: a bucket to create (default bench)"
    )
    parser.add_argument(
        "--moto-only",
        action="store_true",
        help="with --moto: no proxy; print moto's endpoint on stdout and serve until SIGTERM "
        "(MotoS3Process runs this: moto in a process of its own)",
    )
    args = parser.parse_args(argv)
    if args.moto_only:
        if not args.moto:
            parser.error("--moto-only needs --moto")
        return _serve_moto_only(args.bucket)
    with contextlib.ExitStack() as stack:
        endpoint = args.target
        if args.moto:
            moto = stack.enter_context(MotoS3())
            moto.create_bucket(args.bucket)
            endpoint = moto.endpoint
            print(
                f"moto S3 on {endpoint} (bucket {args.bucket}; credentials: any, e.g. "
                f"AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing)",
                file=sys.stderr,
                flush=True,
            )
        proxy = stack.enter_context(
            LatencyProxy(endpoint, args.latency_ms, args.bandwidth_mbps, port=args.port)
        )
        print(
            f"latency proxy on {proxy.endpoint} -> {endpoint}: {args.latency_ms:g} ms per request, "
            f"{args.bandwidth_mbps:g} MB/s per connection",
            file=sys.stderr,
            flush=True,
        )
        if ready is not None:
            ready(proxy)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        import json

        print(json.dumps(proxy.stats(), indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
