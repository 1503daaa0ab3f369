"""Spark SQL for the tests: one driver JVM for the session, a Spark session per test.

``SparkSQLEngine.start`` runs ``tests/engines/spark_sql_driver.py`` on ``.venv-spark``'s Python
(pyspark 4.1 with Iceberg's Spark runtime and AWS bundle from ``build/engines``) and talks to it
over its stdin and stdout, one JSON document a line. ``session(name, conf)`` gives a
``SparkSQLSession`` of that one Spark with the test's own settings (its ``lake`` catalog), so a
test pays for statements, not for a JVM.

Why a driver over a pipe and not Spark Connect: one JVM either way, but Spark Connect needs a
Connect client of the server's version in the test process (lakecore's venv has pyspark 4.3,
which Iceberg has no runtime for) and a gRPC server beside the driver; the pipe needs neither,
and a statement's error arrives whole (its Java causes too), which the tests assert on.

``catalog_conf`` is the catalog's settings, the same the README shows for ``spark-sql``.
Standard library only.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SPARK_PYTHON = Path(os.environ.get("LAKECORE_SPARK_PYTHON", REPO / ".venv-spark/bin/python"))
DRIVER = Path(__file__).with_name("spark_sql_driver.py")
START_TIMEOUT = 240.0
STATEMENT_TIMEOUT = 300.0
# What the driver must not inherit from the test process: its own pyspark decides its Spark,
# and it reaches storage with the credentials a test gives its catalog, not the test's.
_WITHHELD_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "PYTHONPATH",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "PYSPARK_SUBMIT_ARGS",
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_MASTER",
    "SPARK_SUBMIT_OPTS",
)


def catalog_conf(name: str, uri: str, **options: str) -> dict[str, str]:
    """``spark.sql.catalog.<name>.*``: an Iceberg REST catalog at ``uri``. ``options`` are more
    catalog options (``credential``, ``oauth2-server-uri``, ``warehouse``, ``io-impl``, ...)."""
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": uri,
        # Another engine's commit is seen at the next statement, not after the 30 s the
        # catalog would otherwise keep a loaded table.
        f"{prefix}.cache-enabled": "false",
    }
    conf.update({f"{prefix}.{key}": value for key, value in options.items()})
    return conf


class SparkSQLError(RuntimeError):
    """The driver did not start, died, or did not answer in time (with its log's tail)."""


@dataclass(frozen=True)
class StatementError:
    """A statement that failed: pyspark's exception type and message, and the Java causes."""

    type: str
    message: str
    causes: list[str]

    def __str__(self) -> str:
        return "\n".join([f"{self.type}: {self.message}", *self.causes])

    def mentions(self, text: str) -> bool:
        return text in str(self)


class StatementFailed(AssertionError):
    def __init__(self, sql: str, error: StatementError) -> None:
        super().__init__(f"{sql}\n-> {error}")
        self.error = error


@dataclass
class SparkSQLSession:
    engine: SparkSQLEngine
    name: str

    def sql(self, text: str) -> list[list[Any]]:
        """The statement's rows. Raises StatementFailed when Spark refused or failed it."""
        answer = self.engine.request({"op": "sql", "session": self.name, "sql": text})
        if "error" in answer:
            raise StatementFailed(text, StatementError(**answer["error"]))
        rows: list[list[Any]] = answer["rows"]
        return rows

    def fails(self, text: str) -> StatementError:
        """The error of a statement that must fail (AssertionError if it succeeds)."""
        try:
            rows = self.sql(text)
        except StatementFailed as exc:
            return exc.error
        raise AssertionError(f"{text!r} succeeded ({rows}); it should have failed")

    def close(self) -> None:
        self.engine.request({"op": "close", "name": self.name})


@dataclass
class SparkSQLEngine:
    process: subprocess.Popen[str]
    log: Path
    version: str = ""
    started_seconds: float = 0.0
    answers: queue.Queue[str | None] = field(default_factory=queue.Queue)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: int = 0

    @classmethod
    def start(
        cls, jars: list[Path], base: Path, conf: Mapping[str, str] | None = None
    ) -> SparkSQLEngine:
        base.mkdir(parents=True, exist_ok=True)
        scratch = base / "scratch"
        scratch.mkdir(exist_ok=True)
        settings = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.local.dir": str(scratch),
            "spark.sql.warehouse.dir": str(base / "spark-warehouse"),
            "spark.sql.catalogImplementation": "in-memory",
            # The quick JIT only: statements here are small, start-up is what costs.
            "spark.driver.extraJavaOptions": f"-XX:TieredStopAtLevel=1 -Djava.io.tmpdir={scratch}",
            **(conf or {}),
        }
        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD_ENV}
        env.update(
            {
                "SPARK_LOCAL_IP": "127.0.0.1",
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(base / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(base / "no-aws-credentials"),
            }
        )
        log = base / "driver.log"
        started = time.monotonic()
        with open(log, "w") as log_file:
            process = subprocess.Popen(
                [
                    str(SPARK_PYTHON),
                    str(DRIVER),
                    json.dumps({"jars": [str(j) for j in jars], "conf": settings}),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
                cwd=base,
                env=env,
            )
        engine = cls(process, log)
        threading.Thread(target=engine._read, name="spark-sql-answers", daemon=True).start()
        try:
            ready = json.loads(engine._answer(START_TIMEOUT))
        except SparkSQLError:
            engine.stop()
            raise
        engine.version = ready["spark"]
        engine.started_seconds = time.monotonic() - started
        return engine

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(line)
        self.answers.put(None)

    def _answer(self, timeout: float) -> str:
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            raise SparkSQLError(
                f"the Spark SQL driver did not answer in {timeout:.0f} s" + self.tail()
            ) from None
        if line is None:
            self.process.wait(timeout=30)
            raise SparkSQLError(
                f"the Spark SQL driver exited with {self.process.returncode}" + self.tail()
            )
        return line

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return f"\n--- {self.log} (last {lines} lines) ---\n" + "\n".join(text)

    def request(
        self, message: dict[str, Any], timeout: float = STATEMENT_TIMEOUT
    ) -> dict[str, Any]:
        with self.lock:
            if self.process.poll() is not None:
                raise SparkSQLError(
                    f"the Spark SQL driver is gone (exit {self.process.returncode})" + self.tail()
                )
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
            answer: dict[str, Any] = json.loads(self._answer(timeout))
            return answer

    def session(self, conf: Mapping[str, str]) -> SparkSQLSession:
        self.sessions += 1
        name = f"s{self.sessions}"
        answer = self.request({"op": "session", "name": name, "conf": dict(conf)})
        if "error" in answer:
            raise SparkSQLError(f"could not make a session: {answer['error']}")
        return SparkSQLSession(self, name)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.close()  # the driver stops Spark and exits
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=30)
