"""The clients and the server process of the REST soak (``test_rest_soak.py``).

* ``ServerProcess``: a real ``lakecore serve`` with a token file, its stderr (the access log)
  in a file, its URL read from the line it prints; ``kill`` is SIGKILL, ``start`` again on the
  same port.
* ``writer_process``: a spawned child running writer threads. Each appends batches of rows
  with unique ids to a random table through pyiceberg's ``RestCatalog`` and acknowledges each
  append that returned (its snapshot id and ids) with a line appended and fsynced to its ack
  file. A 409 (``CommitFailedException``) is retried with the same rows on fresh metadata, so
  a batch lands at most once unless its outcome was unknown; a commit whose answer never came
  (the server was killed) or was ``CommitStateUnknownException`` is recorded as unknown and its
  rows are not sent again (the end check counts which of those landed).
* ``Reader``: a thread sending ``loadTable`` (timed), ``listTables`` and ``listNamespaces``.
* ``Hostile``: a thread sending random bodies, paths, methods and tokens, some with a
  ``Content-Length`` shorter than the body.
* ``Sampler``: the server's RSS (``/proc/PID/status``) and ``/metrics`` every second.

Every client counts its answers by status; a connection refused or reset (the server is down
for its restart) is counted as ``"down"``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import requests

NAMESPACE = "soak"
WRITER_SECRET = "soak-writer-0123456789abcdef"
READER_SECRET = "soak-reader-0123456789abcdef"
START_TIMEOUT_SECONDS = 60.0


class ServerProcess:
    """``lakecore -l LAKE serve`` on 127.0.0.1 (see the module docstring)."""

    def __init__(self, lake: Path, token_file: Path, log: Path, port: int = 0) -> None:
        self.lake = lake
        self.token_file = token_file
        self.log = log
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.ready = False  # listening, not killed
        self.lifetimes: list[dict[str, Any]] = []

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "lakecore.cli",
            "-l",
            str(self.lake),
            "serve",
            "--port",
            str(self.port),
            "--token-file",
            str(self.token_file),
        ]

    def start(self) -> float:
        """Start the server and wait for its line; the seconds that took."""
        started = time.monotonic()
        with open(self.log, "a", encoding="utf-8") as err:
            self.process = subprocess.Popen(
                self.command(),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        line = _read_line(self.process.stdout, START_TIMEOUT_SECONDS)
        if not line.startswith("lakecore serve: listening on "):
            self.process.kill()
            raise AssertionError(f"the server did not start: {line!r}; see {self.log}")
        self.url = line.split()[4]
        self.port = int(self.url.rsplit(":", 1)[1])
        self.lifetimes.append({"pid": self.process.pid, "started": time.time()})
        self.ready = True
        return time.monotonic() - started

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        assert self.process is not None
        self.ready = False
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.lifetimes[-1]["killed"] = time.time()

    def stop(self) -> int:
        """SIGTERM, as an operator stops it; its exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process is not None else 0
        self.ready = False
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9


def _read_line(stream: IO[str] | None, timeout: float) -> str:
    assert stream is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0].strip() if lines else ""


def rss_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) if match else None


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of a live process (``/proc/PID/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def is_down(exc: BaseException) -> bool:
    """A connection refused or reset, or an answer cut off: the server is being restarted."""
    return isinstance(
        exc,
        (
            requests.ConnectionError,
            requests.exceptions.ChunkedEncodingError,  # killed while it sent an answer
            ConnectionError,
            socket.timeout,
        ),
    )


# -- writers (in spawned children) ---------------------------------------------------------------


def _append_line(path: str, record: dict[str, Any]) -> None:
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _writer_loop(
    url: str, tables: list[str], ack_path: str, stop_path: str, writer: int, counts: Counter[str]
) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

    rng = random.Random(writer)
    catalog: RestCatalog | None = None
    batch = 0
    ids: list[int] | None = None
    name = ""
    while not os.path.exists(stop_path):
        if ids is None:
            batch += 1
            ids = [writer * 1_000_000_000 + batch * 10 + k for k in range(3)]
            name = rng.choice(tables)
        try:
            if catalog is None:
                catalog = RestCatalog("soak", uri=url, token=WRITER_SECRET)
            table = catalog.load_table((NAMESPACE, name))
            table.append(pa.table({"id": pa.array(ids, pa.int64()), "writer": [writer] * 3}))
            snapshot = table.current_snapshot()
            assert snapshot is not None
            _append_line(
                ack_path,
                {"table": name, "snapshot": snapshot.snapshot_id, "ids": ids, "at": time.time()},
            )
            counts["acknowledged"] += 1
            ids = None
        except CommitFailedException:
            counts["conflicts"] += 1  # lost a race: same rows again on fresh metadata
        except CommitStateUnknownException:
            counts["unknown"] += 1
            _append_line(ack_path, {"table": name, "unknown": ids, "why": "CommitStateUnknown"})
            ids = None
        except Exception as exc:
            if not is_down(exc) and "Connection" not in type(exc).__name__:
                counts[f"error {type(exc).__name__}"] += 1
                _append_line(ack_path, {"error": f"{type(exc).__name__}: {exc}"[:500]})
                ids = None
                time.sleep(0.2)
                continue
            # The server went away: if the commit was sent, its outcome is unknown.
            counts["down"] += 1
            text = str(exc)
            if any(w in text for w in ("aborted", "RemoteDisconnected", "reset", "broken")):
                counts["in_flight_at_kill"] += 1
                _append_line(ack_path, {"table": name, "unknown": ids, "why": text[:200]})
                ids = None
            catalog = None
            time.sleep(0.2)


def writer_process(
    url: str, tables: list[str], ack_dir: str, stop_path: str, first: int, threads: int
) -> None:
    """``threads`` writers numbered from ``first``, until ``stop_path`` exists; each writes
    ``acks-<n>.jsonl`` and, at the end, ``done-<n>.json`` with its counts."""
    counts = [Counter[str]() for _ in range(threads)]
    workers = [
        threading.Thread(
            target=_writer_loop,
            args=(
                url,
                tables,
                f"{ack_dir}/acks-{first + i}.jsonl",
                stop_path,
                first + i,
                counts[i],
            ),
        )
        for i in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for i, c in enumerate(counts):
        Path(f"{ack_dir}/done-{first + i}.json").write_text(json.dumps(dict(c)))


# -- readers and the hostile client (threads of the test process) -------------------------------


@dataclass
class Client:
    """A loop in a thread, counting answers by status."""

    url: str
    stop: threading.Event
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def count(self, response: requests.Response | None, what: str) -> None:
        if response is None:
            self.counts["down"] += 1
            return
        self.counts[str(response.status_code)] += 1
        if response.status_code >= 500 and len(self.problems) < 20:
            self.problems.append(f"{what}: {response.status_code} {response.text[:300]}")


@dataclass
class Reader(Client):
    tables: list[str] = field(default_factory=list)
    seed: int = 0
    # (wall time, seconds) of each loadTable answered 200
    load_times: list[tuple[float, float]] = field(default_factory=list)

    def run(self) -> None:
        rng = random.Random(self.seed)
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {READER_SECRET}"
        base = f"{self.url}/v1/namespaces"
        while not self.stop.is_set():
            choice = rng.random()
            if choice < 0.7:
                path = f"{base}/{NAMESPACE}/tables/{rng.choice(self.tables)}"
            elif choice < 0.9:
                path = f"{base}/{NAMESPACE}/tables"
            else:
                path = base
            started = time.perf_counter()
            try:
                response = session.get(path, timeout=30)
            except Exception as exc:
                if not is_down(exc):
                    self.problems.append(f"GET {path}: {type(exc).__name__}: {exc}"[:300])
                self.count(None, path)
                session = requests.Session()
                session.headers["Authorization"] = f"Bearer {READER_SECRET}"
                time.sleep(0.1)
                continue
            seconds = time.perf_counter() - started
            self.count(response, f"GET {path}")
            if choice < 0.7 and response.status_code == 200:
                self.load_times.append((time.time(), seconds))


HOSTILE_BODIES: list[bytes] = [
    b"",
    b"[" * 2000,
    b'{"a":' * 400,
    b"1e999",
    b"\xff\xfe\x00",
    b'{"requirements": [], "updates": [{"action": "set-statistics"}]}',
    b'{"requirements": [], "updates": [{"action": "bogus"}]}',
    b'{"requirements": [{"type": "assert-bogus"}], "updates": []}',
    b'{"requirements": [], "updates": [{"action": "set-location", "location": "/etc"}]}',
    b'{"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 1e999}]}',
    b'{"name": "x", "schema": {"type": "struct", "fields": [{"id": -1, "name": "a", "type": "bogus", "required": 1}]}}',
    b'{"name": "..", "schema": {"type": "struct", "fields": []}}',
    b'{"name": "q", "schema": {"type": "struct", "fields": []}, "location": "/tmp/escape?x"}',
    b'{"name": "r", "metadata-location": "/etc/passwd"}',
    b'{"namespace": ["zw\\u200bsp"]}',
    b'{"source": {"namespace": ["soak"], "name": "t0"}, "destination": {"namespace": [], "name": ""}}',
    b'{"table-changes": [{"requirements": [], "updates": []}]}',
    b'{"table-changes": "x"}',
    b'{"report-type": 1}',
    b"null",
    b"9" * 5000,
]
HOSTILE_PATHS = [
    "/v1/namespaces",
    "/v1/namespaces/soak",
    "/v1/namespaces/soak/tables",
    "/v1/namespaces/soak/tables/t0",
    "/v1/namespaces/soak/tables/t0/metrics",
    "/v1/namespaces/soak/register",
    "/v1/namespaces/soak/properties",
    "/v1/tables/rename",
    "/v1/transactions/commit",
    "/v1/config",
    "/v1/oauth/tokens",
    "/v1/version-1/namespaces/soak/tables/t0",
    "/v1/namespaces/%2e%2e/tables/%00",
    "/v1/namespaces/a%0Ab/tables/x",
    "/v1/namespaces/soak/tables/%E2%80%AE",
    "//v1/config",
    "/v1/namespaces/soak/tables/t0?snapshots=x",
    "/v1/namespaces?pageToken=!!!&pageSize=0",
    "/v1/namespaces?pageToken=&pageSize=99999999999",
    "/healthz",
    "/metrics",
    "/nothing",
]
HOSTILE_TOKENS = [
    None,
    "Bearer None",
    f"Bearer {WRITER_SECRET}",
    f"Bearer {READER_SECRET}",
    "Bearer lk1.eyJleHAiOjFlOTk5fQ.x",
    "Bearer " + "x" * 9000,
    "Bearer eyJhbGciOiJub25lIn0.e30.",
    "Basic Og==",
    "Bearer a.b.c",
]


@dataclass
class Hostile(Client):
    seed: int = 0

    def run(self) -> None:
        rng = random.Random(self.seed)
        host, port = self.url.removeprefix("http://").split(":")
        while not self.stop.is_set():
            method = rng.choice(["GET", "POST", "POST", "POST", "DELETE", "HEAD", "PUT", "BREW"])
            path = rng.choice(HOSTILE_PATHS)
            body = rng.choice(HOSTILE_BODIES)
            headers = {"Connection": "close"}
            token = rng.choice(HOSTILE_TOKENS)
            if method == "DELETE" and token == f"Bearer {WRITER_SECRET}":
                token = None  # a writer's own drop is no attack: it would take the tables away
            if token is not None:
                headers["Authorization"] = token
            # One in ten says its body is shorter than it is (the rest reads as a malformed
            # next request); never longer, which would hold the connection until a timeout.
            length = len(body) if rng.random() > 0.1 else max(0, len(body) - rng.randint(1, 5))
            headers["Content-Length"] = str(length)
            try:
                status = _raw_request(host, int(port), method, path, headers, body)
            except Exception as exc:
                if not is_down(exc):
                    self.problems.append(f"{method} {path}: {type(exc).__name__}: {exc}"[:300])
                self.counts["down"] += 1
                time.sleep(0.1)
                continue
            self.counts[str(status)] += 1
            if status >= 500 and len(self.problems) < 20:
                self.problems.append(f"{method} {path} {body[:80]!r} {token!r}: {status}")


def _raw_request(
    host: str, port: int, method: str, path: str, headers: dict[str, str], body: bytes
) -> int:
    """One request on a socket of its own, headers exactly as given; the status."""
    with socket.create_connection((host, port), timeout=30) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode("latin-1") + body)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionResetError("the server closed the connection before answering")
            answer += chunk
    return int(answer.split(b" ", 2)[1])


# -- the sampler ------------------------------------------------------------------------------


_METRIC = re.compile(
    r'^lakecore_rest_requests_total\{method="([^"]*)",operation="([^"]*)",status="(\d+)"\} (\S+)$',
    re.MULTILINE,
)


@dataclass
class Sampler:
    """The server's RSS each second, and its request counters (``/metrics``) of each lifetime."""

    server: ServerProcess
    stop: threading.Event
    rss: list[tuple[float, int, int]] = field(default_factory=list)  # (time, pid, KiB)
    by_pid: dict[int, Counter[str]] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.sample()

    def sample(self) -> None:
        if not self.server.ready:
            return
        pid = self.server.pid
        kib = rss_kib(pid)
        if kib is None:
            return
        self.rss.append((time.time(), pid, kib))
        spent = cpu_seconds(pid)
        if spent is not None:
            self.cpu[pid] = spent
        try:
            text = requests.get(f"{self.server.url}/metrics", timeout=10).text
        except Exception:
            return
        counts: Counter[str] = Counter()
        for _method, operation, status, value in _METRIC.findall(text):
            counts[f"{operation} {status}"] += int(float(value))
        self.by_pid[pid] = counts


__all__ = [
    "NAMESPACE",
    "READER_SECRET",
    "WRITER_SECRET",
    "Hostile",
    "Reader",
    "Sampler",
    "ServerProcess",
    "writer_process",
]
