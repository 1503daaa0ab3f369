"""A Trino server on 127.0.0.1 for the tests, and a small client of its HTTP protocol.

``TrinoServer.start`` runs Trino (``build/engines/trino-server-476``: its ``lib/`` and the
Iceberg plugin only) on a Java 24+ as one coordinator that also runs the tasks, sized for a
2-core machine shared with the rest of the suite: a 1 GiB heap, the quick JIT only (start-up
and small statements are what the tests pay for), two task threads. Catalogs are dynamic
(``catalog.management=dynamic``, kept in memory): each test creates its ``lake`` catalog with
``CREATE CATALOG`` (``catalog_properties``, the settings the README shows for
``etc/catalog/lake.properties``) and drops it at its end, so one server serves the session.

``query`` speaks Trino's client protocol (``POST /v1/statement``, then ``nextUri`` until the
last page) with the standard library; a failed statement raises ``TrinoQueryFailed`` with
Trino's ``errorName`` and message.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START_TIMEOUT = 240.0
QUERY_TIMEOUT = 300.0
USER = "lakecore-tests"
_WITHHELD_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
)
JVM_OPTIONS = (
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:+EnableDynamicAgentLoading",
    "-Djdk.attach.allowAttachSelf=true",
    "--enable-native-access=ALL-UNNAMED",
    "-Dfile.encoding=UTF-8",
)


def catalog_properties(uri: str, **options: str) -> dict[str, str]:
    """An Iceberg catalog over the REST catalog at ``uri``, reading and writing local files
    (``fs.native-local.enabled``: ``file:///`` locations, rooted at ``/``). ``options`` are more
    properties (``iceberg.rest-catalog.security``, ``...oauth2.credential``, ...)."""
    properties = {
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": uri,
        "fs.native-local.enabled": "true",
        "local.location": "/",
    }
    properties.update(options)
    return properties


class TrinoError(RuntimeError):
    """The server did not start or stopped answering (with its log's tail)."""


class TrinoQueryFailed(AssertionError):
    def __init__(self, sql: str, error: Mapping[str, Any]) -> None:
        self.name = str(error.get("errorName", ""))
        self.message = str(error.get("message", ""))
        super().__init__(f"{sql}\n-> {self.name}: {self.message}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass
class TrinoServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    started_seconds: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, home: Path, java: Path, base: Path) -> TrinoServer:
        etc = base / "etc"
        data = base / "data"
        for folder in (etc, data):
            folder.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        config = {
            "coordinator": "true",
            "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(port),
            "discovery.uri": f"http://127.0.0.1:{port}",
            "plugin.dir": str(home / "plugin"),
            "catalog.management": "dynamic",
            "catalog.store": "memory",
            "query.max-memory": "384MB",
            "query.max-memory-per-node": "384MB",
            "memory.heap-headroom-per-node": "256MB",
            "task.concurrency": "2",
            "task.max-worker-threads": "4",
            "task.min-drivers": "2",
        }
        (etc / "config.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        (etc / "log.properties").write_text("io.trino=WARN\nio.airlift=WARN\n")
        command = [
            str(java),
            *JVM_OPTIONS,
            f"-Djava.io.tmpdir={data}",
            "-Dnode.environment=test",
            "-Dnode.id=lakecore-tests",
            # Listens on loopback only.
            "-Dnode.bind-ip=127.0.0.1",
            "-Dnode.internal-address=127.0.0.1",
            f"-Dlog.path={base / 'server.log'}",
            f"-Dnode.data-dir={data}",
            f"-Dconfig={etc / 'config.properties'}",
            f"-Dlog.levels-file={etc / 'log.properties'}",
            "-cp",
            str(home / "lib" / "*"),
            "io.trino.server.TrinoServer",
        ]
        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD_ENV}
        env.update(
            {
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(base / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(base / "no-aws-credentials"),
            }
        )
        log = base / "stdout.log"
        started = time.monotonic()
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=base,
                env=env,
                start_new_session=True,
            )
        server = cls(process, port, log)
        try:
            server._wait_started(started + START_TIMEOUT)
        except TrinoError:
            server.stop()
            raise
        server.started_seconds = time.monotonic() - started
        return server

    def _wait_started(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TrinoError(f"Trino exited with {self.process.returncode}" + self.tail())
            try:
                with urllib.request.urlopen(f"{self.url}/v1/info", timeout=5) as response:
                    if json.loads(response.read()).get("starting") is False:
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.25)
        raise TrinoError(f"Trino did not start in {START_TIMEOUT:.0f} s" + self.tail())

    def tail(self, lines: int = 30) -> str:
        """The last lines of Trino's log and of its own output (start-up errors go there)."""
        shown = ""
        for path in (self.log.with_name("server.log"), self.log):
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            shown += f"\n--- {path} (last {lines} lines) ---\n" + "\n".join(text)
        return shown

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)

    # -- the client protocol -------------------------------------------------------------------

    def _call(self, request: urllib.request.Request, sql: str) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT) as response:
                document: dict[str, Any] = json.loads(response.read())
                return document
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:2000]
            raise TrinoError(f"{sql}: HTTP {exc.code} from Trino: {body}" + self.tail()) from None
        except OSError as exc:
            if self.process.poll() is not None:
                raise TrinoError(
                    f"Trino is gone (exit {self.process.returncode})" + self.tail()
                ) from exc
            raise

    def query(
        self, sql: str, catalog: str | None = None, schema: str | None = None
    ) -> list[list[Any]]:
        """The statement's rows. Raises TrinoQueryFailed when Trino refused or failed it."""
        headers = {"X-Trino-User": USER, "Content-Type": "text/plain"}
        if catalog:
            headers["X-Trino-Catalog"] = catalog
        if schema:
            headers["X-Trino-Schema"] = schema
        request = urllib.request.Request(
            f"{self.url}/v1/statement", data=sql.encode(), headers=headers, method="POST"
        )
        document = self._call(request, sql)
        rows: list[list[Any]] = []
        deadline = time.monotonic() + QUERY_TIMEOUT
        while True:
            rows.extend(document.get("data") or [])
            if "error" in document:
                raise TrinoQueryFailed(sql, document["error"])
            next_uri = document.get("nextUri")
            if not next_uri:
                return rows
            if time.monotonic() > deadline:
                raise TrinoError(f"{sql}: no result in {QUERY_TIMEOUT:.0f} s" + self.tail())
            page = urllib.request.Request(next_uri, headers={"X-Trino-User": USER})
            document = self._call(page, sql)

    def fails(self, sql: str) -> TrinoQueryFailed:
        """The failure of a statement that must fail (AssertionError if it succeeds)."""
        try:
            rows = self.query(sql)
        except TrinoQueryFailed as exc:
            return exc
        raise AssertionError(f"{sql!r} succeeded ({rows}); it should have failed")

    def create_catalog(self, name: str, properties: Mapping[str, str]) -> None:
        options = ", ".join(f'"{key}" = {_quote(value)}' for key, value in properties.items())
        self.query(f"CREATE CATALOG {name} USING iceberg WITH ({options})")

    def drop_catalog(self, name: str) -> None:
        self.query(f"DROP CATALOG IF EXISTS {name}")
