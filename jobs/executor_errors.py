"""Storage failures raised on an executor, brought back to the driver as what they are.

A ``StorageError`` raised inside a Spark task (after Spark's own task retries) reaches the
driver as a ``Py4JJavaError`` whose text holds the whole Java stack trace and, inside it, the
Python traceback. ``run_job`` would report that as one very long "other failure" line. Inside
``executor_errors()`` it becomes the ``StorageError`` it was on the executor, with its one-line
message and, when the executor had no credentials at all, what to do about it; the job then
exits ``ExitCode.FAILURE`` (4, retried) with a readable error.

Only the ``StorageError`` family is translated inside ``executor_errors()``: a job's own
handling of other failures stays as it was. What still escapes a job's body goes through
``error_from_executor`` in ``run_job``: a lakecore error raised on an executor comes back as its
class (and exit code), any other Python error as its last traceback line, never Spark's
wrapper with the Java and Python traces.
``SparkUnavailableError`` is the one-line error for a SparkSession that cannot start (a master
that does not answer), instead of the JVM's stack trace.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from lakecore import errors

# How Python's traceback prints the last line of a lakecore error: "lakecore.errors.Name: message".
_LAST_LINE = re.compile(r"lakecore\.errors\.(\w+): ([^\n]*)")
# gRPC's message in an RPC error's text: details = "failed to connect to all addresses; ..."
_GRPC_DETAILS = re.compile(r'details = "([^"]*)"')
_NO_CREDENTIALS = ("NoCredentialsError", "Unable to locate credentials")
CREDENTIALS_HINT = (
    "the executors found no S3 credentials: give them the same ones as the driver with "
    "--conf spark.executorEnv.AWS_ACCESS_KEY_ID=... --conf spark.executorEnv.AWS_SECRET_ACCESS_KEY=... "
    "(LAKECORE_SPARK_ARGS), an instance role or IRSA on every node, or --storage-option key=/secret= "
    "(see 'Running on a cluster' in the README)"
)


class SparkUnavailableError(errors.LakecoreError):
    """No Spark application could be started on the master (exit 4: the master may come back)."""

    exit_code = errors.ExitCode.FAILURE


def spark_unavailable(master: str, exc: BaseException) -> SparkUnavailableError:
    """The error for a session that did not start: the master and the JVM's first words."""
    first = " ".join(str(exc).split())
    for marker in ("IllegalStateException: ", "SparkException: "):
        if marker in first:
            first = first.split(marker, 1)[1]
            break
    first = first.split(". ", 1)[0]  # the first sentence; the rest is the JVM's call sites
    return SparkUnavailableError(
        f"could not start a Spark application on {master or 'the default master'}: {first[:200]}; "
        "check that the master is up and reachable from this host (SPARK_MASTER, --master)"
    )


def connect_unavailable(remote: str, exc: BaseException) -> SparkUnavailableError:
    """The error for a Spark Connect endpoint that does not answer: gRPC's own words (its
    ``details``), not the channel's debug dump."""
    text = str(exc)
    details = _GRPC_DETAILS.search(text)
    first = details.group(1) if details else " ".join(text.split()).split(". ", 1)[0]
    return SparkUnavailableError(
        f"could not reach the Spark Connect server at {remote}: {' '.join(first.split())[:200]}; "
        "check that it is up and reachable from this host (--remote, $SPARK_REMOTE)"
    )


def storage_error_from_executor(exc: BaseException) -> errors.StorageError | None:
    """The ``StorageError`` an executor raised, if ``exc`` is Spark's report of one."""
    if type(exc).__name__ not in ("Py4JJavaError", "PythonException", "SparkException"):
        return None
    found = _LAST_LINE.findall(str(exc))
    for name, message in reversed(found):  # the innermost (last printed) error first
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, errors.StorageError):
            text = " ".join(message.split())
            if any(marker in text for marker in _NO_CREDENTIALS):
                text += f"; {CREDENTIALS_HINT}"
            return cls(f"on an executor: {text}")
    return None


# The last line of a Python traceback inside Spark's text: "module.Name: message".
_PYTHON_LAST_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): (.*)$", re.M)


class ExecutorFailure(errors.LakecoreError):
    """A Python error on an executor that is not one of lakecore's: its last traceback line."""


def error_from_executor(exc: BaseException) -> errors.LakecoreError | None:
    """What an executor raised, if ``exc`` is Spark's report of a Python failure there: the
    lakecore error it was (its class, so its exit code; ``storage_error_from_executor`` for the
    storage family), else an ``ExecutorFailure`` with the innermost Python error's line. None
    when ``exc`` is not Spark's report of an executor's Python failure."""
    storage = storage_error_from_executor(exc)
    if storage is not None:
        return storage
    if type(exc).__name__ not in ("Py4JJavaError", "PythonException", "SparkException"):
        return None
    text = str(exc)
    for name, message in reversed(_LAST_LINE.findall(text)):
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, errors.LakecoreError):
            return _rebuilt(cls, f"on an executor: {' '.join(message.split())}")
    if "Traceback (most recent call last)" not in text:
        return None
    lines = _PYTHON_LAST_LINE.findall(text.split("JVM stacktrace:")[0])
    python_lines = [(n, m) for n, m in lines if not n.startswith(("org.", "java.", "scala."))]
    if not python_lines:
        return None
    name, message = python_lines[-1]
    return ExecutorFailure(f"an executor failed: {name}: {' '.join(message.split())[:400]}")


def _rebuilt(cls: type[errors.LakecoreError], message: str) -> errors.LakecoreError:
    """An instance of ``cls`` carrying ``message``, whatever its constructor takes (the damage
    errors take a location and a rule: the message stands for both)."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    if isinstance(error, errors.CorruptFileError | errors.TreeStructureError):
        error.location, error.rule = "", message
    return error


@contextlib.contextmanager
def executor_errors() -> Iterator[None]:
    """Re-raise an executor's ``StorageError`` as itself instead of Spark's wrapper."""
    try:
        yield
    except Exception as exc:
        translated = storage_error_from_executor(exc)
        if translated is None:
            raise
        raise translated from None
