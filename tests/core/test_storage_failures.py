"""A store that cannot be read is a failure (exit 4), never a verdict on the lakehouse.

The checker and validate's planning must raise the ``StorageError`` instead of turning it into
an ``unreadable-node`` violation; a ``StorageError`` raised on an executor must come back to the
driver as itself (``jobs.executor_errors``), with a hint when credentials are missing. The
cluster test (tests/cluster) does the same end to end with executors that have no credentials.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import lakecore
from jobs.executor_errors import (
    CREDENTIALS_HINT,
    error_from_executor,
    executor_errors,
    spark_unavailable,
    storage_error_from_executor,
)
from lakecore.core.storage import Storage
from lakecore.errors import (
    ExitCode,
    InvalidArgumentError,
    NotFoundError,
    StorageError,
    StorageTimeoutError,
)
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.version_check import check_version
from tests.jobs.test_gc import build_lake


def _lake(tmp_path: Path) -> Lakehouse:
    build_lake(str(tmp_path / "lake"), commits=8)
    lakecore.clear_caches()
    return Lakehouse.open(str(tmp_path / "lake"))


def _failing_node_reads(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    real = Storage.read

    def read(self: Storage, path: str, *args: Any, **kwargs: Any) -> bytes:
        if "-node-" in path:
            raise error
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Storage, "read", read)


@pytest.mark.parametrize(
    "error",
    [
        StorageError("could not read x: NoCredentialsError: Unable to locate credentials"),
        StorageTimeoutError("timed out trying to read x"),
    ],
)
def test_the_checker_raises_a_storage_error_instead_of_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: StorageError
) -> None:
    lh = _lake(tmp_path)
    _failing_node_reads(monkeypatch, error)
    with pytest.raises(StorageError) as raised:
        check_version(lh, deep=True)
    assert raised.value is error
    assert raised.value.exit_code == ExitCode.FAILURE


def test_a_missing_node_file_is_still_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lh = _lake(tmp_path)
    _failing_node_reads(monkeypatch, NotFoundError("node file x is missing"))
    result = check_version(lh)
    assert not result.ok
    assert {v.rule for v in result.violations} == {"unreadable-node"}


class Py4JJavaError(Exception):
    """Stands in for py4j's: only the class name and the text matter."""


SPARK_TEXT = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 0.0 failed 4 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/botocore/auth.py", line 418, in add_auth
    raise NoCredentialsError()
botocore.exceptions.NoCredentialsError: Unable to locate credentials

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/lakecore/core/storage.py", line 906, in _raise_translated
lakecore.errors.StorageError: could not read s3://b/l/0001-node-1.arrow: NoCredentialsError: Unable to locate credentials
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:624)
"""


def test_an_executors_storage_error_comes_back_as_itself() -> None:
    with pytest.raises(StorageError) as raised, executor_errors():
        raise Py4JJavaError(SPARK_TEXT)
    message = str(raised.value)
    assert message.startswith(
        "on an executor: could not read s3://b/l/0001-node-1.arrow: NoCredentialsError"
    )
    assert message.endswith(CREDENTIALS_HINT)
    assert "\n" not in message and "org.apache" not in message
    assert raised.value.exit_code == ExitCode.FAILURE


def test_other_executor_failures_are_left_alone() -> None:
    other = Py4JJavaError(SPARK_TEXT.replace("lakecore.errors.StorageError", "ValueError"))
    assert storage_error_from_executor(other) is None
    assert storage_error_from_executor(ValueError(SPARK_TEXT)) is None  # not Spark's wrapper
    with pytest.raises(Py4JJavaError), executor_errors():
        raise other
    timeout = Py4JJavaError(
        SPARK_TEXT.replace(
            "lakecore.errors.StorageError: could not read",
            "lakecore.errors.StorageTimeoutError: timed out trying to read",
        )
    )
    translated = storage_error_from_executor(timeout)
    assert isinstance(translated, StorageTimeoutError) and CREDENTIALS_HINT in str(translated)


def test_a_master_that_does_not_answer_is_one_line() -> None:
    jvm = Py4JJavaError(
        "An error occurred while calling None.org.apache.spark.sql.classic.SparkSession.\n: "
        "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.\n"
        "This stopped SparkContext was created at:\n\norg.apache.spark.api.java.JavaSparkContext.<init>"
    )
    error = spark_unavailable("spark://127.0.0.1:1", jvm)
    assert str(error) == (
        "could not start a Spark application on spark://127.0.0.1:1: Cannot call methods on a "
        "stopped SparkContext; check that the master is up and reachable from this host "
        "(SPARK_MASTER, --master)"
    )
    assert error.exit_code == ExitCode.FAILURE


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed here")
def test_a_scheme_whose_package_is_missing_is_bad_input_not_a_storage_failure() -> None:
    """gs:// without gcsfs was exit 4 ("retrying may help"); no retry installs a package."""
    with pytest.raises(
        InvalidArgumentError,
        match=r"cannot open gs://bucket/lake/: .*gcsfs.*no working file system "
        r"for gs://",
    ):
        Storage("gs://bucket/lake").first_files(1)
    assert InvalidArgumentError("x").exit_code == ExitCode.BAD_INPUT


def test_an_unknown_scheme_is_bad_input_before_any_request() -> None:
    """foo:// (a typo) was a StorageError on the first listing, exit 4, which DAGs retry (found by
    a new-user trial)."""
    with pytest.raises(
        InvalidArgumentError, match=r"foo://x/: no file system is known for foo:// \(a typo\?"
    ):
        Storage("foo://x")
    assert (
        Storage("s3a://bucket/lake").scheme == "s3" and Storage("memory://lake").scheme == "memory"
    )


def test_a_native_library_that_cannot_load_is_bad_input_and_one_short_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hdfs:// without a Hadoop client: pyarrow's loader lists every path it tried, a 15 KB
    error line, as a storage failure (exit 4). Now exit 2, and the backend's words are capped."""
    import fsspec

    tried = " ".join(
        f"dlopen(/usr/lib/jvm/{i}/libjvm.so) failed: cannot open shared object file"
        for i in range(200)
    )

    def no_jvm(protocol: str, **options: object) -> object:
        raise OSError(f"Unable to load libjvm {tried}")

    monkeypatch.setattr(fsspec, "filesystem", no_jvm)
    with pytest.raises(InvalidArgumentError) as caught:
        Storage("hdfs://nn/lake").first_files(1)
    message = str(caught.value)
    assert message.startswith("cannot open hdfs://nn/lake/: Unable to load libjvm dlopen(")
    assert "more characters) (this installation has no working file system for hdfs://)" in message
    assert len(message) < 600


def test_any_error_an_executor_raised_comes_back_as_one_line() -> None:
    """What escapes a job's body (``run_job``): a lakecore error raised on an executor as its
    class and exit code, any other Python error as its last traceback line."""
    damaged = Py4JJavaError(
        SPARK_TEXT.replace(
            "lakecore.errors.StorageError: could not read s3://b/l/0001-node-1.arrow: "
            "NoCredentialsError: Unable to locate credentials",
            "lakecore.errors.CorruptNodeFileError: s3://b/l/0001-node-1.arrow: bad magic",
        )
    )
    translated = error_from_executor(damaged)
    assert translated is not None and translated.exit_code == ExitCode.DAMAGED
    assert str(translated) == "on an executor: s3://b/l/0001-node-1.arrow: bad magic"
    other = Py4JJavaError(
        SPARK_TEXT.replace(
            "lakecore.errors.StorageError: could not read s3://b/l/0001-node-1.arrow: "
            "NoCredentialsError: Unable to locate credentials",
            "OSError: [Errno 28] No space left on device",
        )
    )
    translated = error_from_executor(other)
    assert translated is not None and translated.exit_code == ExitCode.FAILURE
    assert str(translated) == "an executor failed: OSError: [Errno 28] No space left on device"
    assert error_from_executor(ValueError("not Spark's")) is None
