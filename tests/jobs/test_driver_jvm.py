"""The driver JVM's options (jobs/driver_jvm.py): the quick JIT and the class archive.

The archive's name follows the JVM and Spark it was made for, it is offered only when it exists,
a failed build leaves nothing behind, the wrapper passes the options to the driver, and the
archive `make setup` wrote maps into a JVM on Spark's classpath (checked with ``-Xshare:on``,
which refuses to start when it cannot).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jobs import driver_jvm

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "spark-submit.sh"


def _fake_spark(tmp_path: Path) -> tuple[Path, Path]:
    """A SPARK_HOME with two jars and a JAVA_HOME with a java binary (neither runs)."""
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (home / "jars" / name).write_bytes(b"jar " + name.encode())
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_bytes(b"#!/bin/sh\n")
    return home, java_home


def test_the_archive_name_follows_the_jvm_and_the_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, java_home = _fake_spark(tmp_path)
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    first = driver_jvm.archive_key()
    assert first is not None and first == driver_jvm.archive_key()  # stable
    (home / "jars" / "spark-sql.jar").write_bytes(b"a new build of spark-sql")
    second = driver_jvm.archive_key()
    assert second != first  # a changed jar: a new name, so the old archive is never offered
    (java_home / "bin" / "java").write_bytes(b"#!/bin/sh\n# another JDK\n")
    third = driver_jvm.archive_key()
    assert third not in (first, second)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))  # on Spark's classpath too
    assert driver_jvm.archive_key() != third
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert driver_jvm.archive_key() is None and driver_jvm.archive_path() is None


def test_options_offer_the_archive_only_when_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, java_home = _fake_spark(tmp_path)
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setattr(driver_jvm, "ARCHIVE_DIR", tmp_path / "build")
    monkeypatch.delenv(driver_jvm.ARCHIVE_VARIABLE, raising=False)
    monkeypatch.delenv(driver_jvm.JIT_VARIABLE, raising=False)
    crash_log = f"-XX:ErrorFile={tempfile.gettempdir()}/lakecore-jvm-crash-%p.log"  # never the working directory
    assert driver_jvm.java_options().split() == [driver_jvm.QUICK_JIT, crash_log]  # no archive yet
    key = driver_jvm.archive_key()
    archive = tmp_path / "build" / f"spark-driver-{key}-10.jsa"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"an archive")  # 10 bytes, as its name says
    assert driver_jvm.archive_path() == archive
    options = driver_jvm.java_options().split()
    assert options[0] == driver_jvm.QUICK_JIT and f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xlog:cds=off" in options  # an unusable archive is silent: stderr is the job's
    archive.write_bytes(b"an arch")  # truncated: a JVM mapping it would die of SIGBUS
    assert driver_jvm.archive_path() is None
    assert not any(
        option.startswith("-XX:SharedArchiveFile") for option in driver_jvm.java_options().split()
    )
    archive.write_bytes(b"an archive")
    monkeypatch.setenv(driver_jvm.JIT_VARIABLE, "full")
    assert driver_jvm.QUICK_JIT not in driver_jvm.java_options()
    monkeypatch.setenv(driver_jvm.ARCHIVE_VARIABLE, "0")
    assert driver_jvm.java_options() == crash_log


def test_a_failed_build_leaves_no_archive_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, java_home = _fake_spark(tmp_path)
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setattr(driver_jvm, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(driver_jvm, "ARCHIVE_DIR", tmp_path / "build" / "jvm")
    # A workload that fails, then one that cannot even start: the build fails closed each time,
    # and the command still exits 0 (the jobs run without an archive).
    failing = tmp_path / "failing-python"
    failing.write_text("#!/bin/sh\necho 'the sample jobs exited [4]' >&2\nexit 1\n")
    failing.chmod(0o755)
    for interpreter, reason in (
        (failing, "the sample jobs exited [4]"),
        (java_home / "bin" / "java", "cannot run"),
    ):
        monkeypatch.setattr(sys, "executable", str(interpreter))
        assert driver_jvm.build() == 0
        assert list((tmp_path / "build" / "jvm").iterdir()) == []  # no archive, no partial file
        err = capsys.readouterr().err.strip().splitlines()
        assert (
            len(err) == 1 and err[0].startswith("jvm archive: not written (") and reason in err[0]
        ), err
        assert "the jobs start without one" in err[0]


def test_the_wrapper_gives_the_driver_the_options(tmp_path: Path) -> None:
    record = tmp_path / "record"
    stub = tmp_path / "spark-submit"
    stub.write_text(f'#!/bin/sh\necho "$@" > {record}\n')
    stub.chmod(0o755)
    env = {**os.environ, "SPARK_SUBMIT": str(stub), "SPARK_MASTER": ""}
    env.pop(driver_jvm.JIT_VARIABLE, None)
    (tmp_path / "lake").mkdir()  # the wrapper's own check refuses a folder that does not exist
    done = subprocess.run(
        [str(WRAPPER), "flush", "--lakehouse", str(tmp_path / "lake")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    argv = record.read_text()
    assert (
        f"--driver-java-options -Dlog4j2.configurationFile=file:{REPO}/conf/log4j2.properties "
        f"{driver_jvm.QUICK_JIT}" in argv
    )
    archive = driver_jvm.archive_path()
    assert (f"-XX:SharedArchiveFile={archive}" in argv) == (
        archive is not None and archive.is_file()
    )


@pytest.mark.spark
def test_the_built_archive_maps_into_a_jvm_on_sparks_classpath() -> None:
    """``make setup`` (and so ``make test``) wrote it; -Xshare:on makes the JVM refuse to start
    when the archive does not fit the JVM or Spark's classpath, instead of ignoring it."""
    archive = driver_jvm.archive_path()
    if archive is None or not archive.is_file():
        pytest.skip("no class archive on this machine: run `make jvm-archive`")
    home = driver_jvm.spark_home()
    assert home is not None
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_SUBMIT_OPTS": f"-XX:SharedArchiveFile={archive} -Xshare:on",
    }
    done = subprocess.run(
        [str(home / "bin" / "spark-submit"), "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "version" in (done.stdout + done.stderr).lower()
    broken = {**env, "SPARK_SUBMIT_OPTS": f"-XX:SharedArchiveFile={archive}.missing -Xshare:on"}
    refused = subprocess.run(
        [str(home / "bin" / "spark-submit"), "--version"],
        env=broken,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0  # the check can fail: a missing archive does not start


@pytest.mark.parametrize("argv", [[], ["--buld"], ["--build", "--path"]])
def test_a_wrong_command_line_is_one_line_and_exit_2(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobs.driver_jvm", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m jobs.driver_jvm: "), done.stderr
    assert "--help" in lines[0]
