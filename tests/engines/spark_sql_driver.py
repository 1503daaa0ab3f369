"""A Spark SQL driver that takes its statements over a pipe; for ``.venv-spark``'s Python.

``python spark_sql_driver.py '<json>'`` with ``{"jars": [PATH, ...], "conf": {KEY: VALUE}}``
starts one SparkSession (master ``local[2]``, Iceberg's SQL extensions, the jars) and then
answers requests, one JSON document a line on stdin, one answer a line on the stdout it was
started with (Spark's own output goes to stderr):

* ``{"op": "session", "name": N, "conf": {...}}``: a new session of the same Spark
  (``SparkSession.newSession``: its own SQL configuration and catalogs) named ``N``, with
  ``conf`` set in it (``spark.sql.catalog.lake.*`` for a test's catalog). ``{}``.
* ``{"op": "sql", "session": N, "sql": TEXT}``: ``{"columns": [...], "rows": [[...]]}``, values
  as JSON (decimals, dates, times and binaries as text), or ``{"error": {"type": T,
  "message": M, "causes": ["java.Class: message", ...]}}`` when the statement failed.
* ``{"op": "close", "name": N}``: the session is forgotten. ``{}``.

One Spark serves every test of a pytest session: a test's catalog lives in its own Spark
session, so tests never see each other's catalogs or settings. Standard library and pyspark
only: this file runs outside lakecore's venv (pyspark 4.1 there; Iceberg has no runtime for
the 4.3 of lakecore's venv).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sys
from typing import Any

MAX_MESSAGE_CHARS = 4000


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal | dt.date | dt.datetime | dt.time):
        return value.isoformat() if not isinstance(value, decimal.Decimal) else str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return {k: jsonable(v) for k, v in value.asDict().items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def java_causes(exc: BaseException) -> list[str]:
    """The Java exception behind ``exc`` and its causes, ``class: message`` each."""
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    causes: list[str] = []
    while throwable is not None and len(causes) < 12:
        try:
            causes.append(str(throwable.toString())[:MAX_MESSAGE_CHARS])
            throwable = throwable.getCause()
        except Exception:
            break
    return causes


def error_of(exc: BaseException) -> dict[str, Any]:
    message = str(exc).split("\n\tat ", 1)[0].split("JVM stacktrace:", 1)[0].strip()
    return {
        "type": type(exc).__name__,
        "message": message[:MAX_MESSAGE_CHARS],
        "causes": java_causes(exc),
    }


def main() -> None:
    spec = json.loads(sys.argv[1])
    # The answers go to the stdout this process was started with; everything else that writes
    # to fd 1 (the JVM Spark starts inherits it) goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lakecore-engine-tests")
        .config("spark.jars", ",".join(spec["jars"]))
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
    )
    for key, value in spec.get("conf", {}).items():
        builder = builder.config(key, value)
    base = builder.getOrCreate()
    base.sparkContext.setLogLevel("ERROR")
    sessions: dict[str, Any] = {}
    answers.write(json.dumps({"ready": True, "spark": base.version}) + "\n")

    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        answer: dict[str, Any] = {}
        try:
            if op == "session":
                session = base.newSession()
                for key, value in request.get("conf", {}).items():
                    session.conf.set(key, value)
                sessions[request["name"]] = session
            elif op == "sql":
                frame = sessions[request["session"]].sql(request["sql"])
                rows = frame.collect()
                answer = {
                    "columns": list(frame.columns),
                    "rows": [[jsonable(v) for v in row] for row in rows],
                }
            elif op == "close":
                sessions.pop(request["name"], None)
            else:
                answer = {"error": {"type": "BadRequest", "message": f"unknown op {op!r}"}}
        except Exception as exc:
            answer = {"error": error_of(exc)}
        answers.write(json.dumps(answer) + "\n")
    base.stop()


if __name__ == "__main__":
    main()
