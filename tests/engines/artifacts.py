"""The engines' files from Maven Central, fetched with Maven's own client into ``build/engines/``.

``make test-setup`` runs ``python -m tests.engines.artifacts``; the engine fixtures ask the same
module where the files are (``spark_jars``, ``trino_home``) and which Java runs Trino
(``java_for_trino``). Standard library only.

Rules:

* Each file is fetched with ``mvn dependency:copy`` from the repositories Maven is configured
  with (``~/.m2/settings.xml``, a mirror if one is set): Maven's local repository is the
  cache between runs on one machine, so a fresh clone copies instead of downloading.
* Each file is checked against the sha512 pinned here (Maven Central publishes only sha1 for
  some of them; each sha512 was taken from a file whose sha1 matched the published one). A file
  that does not match is deleted and the run fails: nothing unverified is used.
* Trino's server tarball (821 MB) is unpacked in part: ``lib/`` and the Iceberg plugin without
  its HDFS folder (``fs.hadoop.enabled`` is off), about 360 MB instead of 1.5 GB. The tarball
  stores files shared by plugins as hard links to the first plugin's copy, so the wanted files
  are found in a first pass and written in a second. The copy of the tarball is deleted once
  unpacked; a stamp file holding its sha512 says the unpacked folder is complete.
* Without ``mvn`` or without a Java 24+ for Trino this says so in one line and exits 0: the
  engine tests are then skipped, each naming what is missing. A failed download or a checksum
  mismatch is an error (exit 1).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[2]
ENGINES_DIR: Final = REPO / "build" / "engines"
MVN_TIMEOUT_SECONDS: Final = 1800
TRINO_MIN_JAVA: Final = 24


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str
    packaging: str
    sha512: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}:{self.packaging}"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.{self.packaging}"


ICEBERG_VERSION: Final = "1.12.0"
# Iceberg's Spark runtime for Spark 4.1 and Scala 2.13 (.venv-spark has pyspark 4.1.4; there is
# no runtime for the 4.3 of .venv), and its AWS bundle for S3FileIO.
SPARK_RUNTIME: Final = Artifact(
    "org.apache.iceberg",
    "iceberg-spark-runtime-4.1_2.13",
    ICEBERG_VERSION,
    "jar",
    "ac1e2cb00970309f0c6bf241fabf334aef373c1f3e3b443181d429d5f2c0903a"
    "ce47df9cfc1d55c95807a096cf405ae0a8868831b9e9eb5696dfdb6380587f38",
)
AWS_BUNDLE: Final = Artifact(
    "org.apache.iceberg",
    "iceberg-aws-bundle",
    ICEBERG_VERSION,
    "jar",
    "b01456f80142c8837004e31329a0f40db8a9d44917a4a694cb7d8d6d3a68cb20"
    "c61e6f7788fa1bdcb95c0edf724322b49667d6f9ef60fc9cc46da5c24ce5c7de",
)
# The newest Trino server tarball on Maven Central (479 and later are not published there).
TRINO_VERSION: Final = "476"
TRINO_SERVER: Final = Artifact(
    "io.trino",
    "trino-server",
    TRINO_VERSION,
    "tar.gz",
    "fe5e5b8cb2d71e8ccaccfc2acb60f88d43686a2a77b239bfd4fda6d2b0a5016e"
    "01f3bfad078954928de9b88f76b55023871c2b0efb83b609d9300906813ac7c2",
)
SPARK_ARTIFACTS: Final = (SPARK_RUNTIME, AWS_BUNDLE)
TRINO_TOP: Final = f"trino-server-{TRINO_VERSION}"
TRINO_STAMP: Final = ".lakecore-unpacked"
# What of the tarball the tests run: the server's classpath and the one connector they use.
TRINO_WANTED: Final = (f"{TRINO_TOP}/lib/", f"{TRINO_TOP}/plugin/iceberg/")
TRINO_LEFT_OUT: Final = (f"{TRINO_TOP}/plugin/iceberg/hdfs/",)


class ArtifactError(Exception):
    """A download failed or a file is not the one pinned."""


# -- where things are ---------------------------------------------------------------------------


def spark_jars() -> list[Path]:
    return [ENGINES_DIR / a.file_name for a in SPARK_ARTIFACTS]


def trino_home() -> Path:
    return ENGINES_DIR / TRINO_TOP


def spark_ready() -> bool:
    return all(_verified(ENGINES_DIR / a.file_name, a) for a in SPARK_ARTIFACTS)


def trino_ready() -> bool:
    stamp = trino_home() / TRINO_STAMP
    return stamp.is_file() and stamp.read_text().strip() == TRINO_SERVER.sha512


def java_version(java: Path) -> int | None:
    """The feature release of ``java`` (17, 25, ...); None when it does not run."""
    try:
        done = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)', done.stderr)
    return int(match.group(1)) if match else None


def java_for_trino() -> Path | None:
    """A ``java`` of release 24 or later: ``$LAKECORE_TRINO_JAVA_HOME``, else the newest JDK
    under /usr/lib/jvm, else ``$JAVA_HOME``, else the ``java`` on PATH."""
    candidates: list[Path] = []
    if os.environ.get("LAKECORE_TRINO_JAVA_HOME"):
        candidates.append(Path(os.environ["LAKECORE_TRINO_JAVA_HOME"]) / "bin" / "java")
    found = [Path(p) for p in glob.glob("/usr/lib/jvm/*/bin/java")]
    candidates += sorted(found, key=lambda p: java_version(p) or 0, reverse=True)
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    for java in candidates:
        if java.is_file() and (java_version(java) or 0) >= TRINO_MIN_JAVA:
            return java
    return None


# -- fetching and checking ----------------------------------------------------------------------


def sha512_of(path: Path) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_of(path: Path) -> Path:
    return path.with_name(path.name + ".sha512")


def _verified(path: Path, artifact: Artifact) -> bool:
    """The file was checked once (its stamp holds the pinned sum) and has not changed since."""
    stamp = _stamp_of(path)
    if not (path.is_file() and stamp.is_file()):
        return False
    recorded, _, mtime = stamp.read_text().partition(" ")
    return recorded == artifact.sha512 and mtime.strip() == str(path.stat().st_mtime_ns)


def mvn() -> str | None:
    return shutil.which("mvn")


def fetch(artifact: Artifact, into: Path) -> Path:
    """``artifact`` copied by Maven into ``into`` and checked against its pinned sha512.

    Raises:
        ArtifactError: Maven failed, or the file is not the pinned one (it is deleted).
    """
    command = mvn()
    if command is None:
        raise ArtifactError("mvn is not installed")
    into.mkdir(parents=True, exist_ok=True)
    target = into / artifact.file_name
    done = subprocess.run(
        [
            command,
            "-B",
            "-q",
            "-Dstyle.color=never",
            "dependency:copy",
            f"-Dartifact={artifact.coordinates}",
            f"-DoutputDirectory={into}",
            "-Dmdep.overWriteReleases=true",
        ],
        capture_output=True,
        text=True,
        timeout=MVN_TIMEOUT_SECONDS,
        check=False,
        cwd=into,
    )
    if done.returncode != 0 or not target.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise ArtifactError(
            f"mvn could not fetch {artifact.coordinates}:\n" + "\n".join("  " + t for t in tail)
        )
    digest = sha512_of(target)
    if digest != artifact.sha512:
        target.unlink()
        raise ArtifactError(
            f"{artifact.coordinates} has sha512 {digest}, not the pinned {artifact.sha512}; "
            "deleted it (is a mirror serving another file?)"
        )
    return target


def ensure_spark_jars() -> list[Path]:
    for artifact in SPARK_ARTIFACTS:
        path = ENGINES_DIR / artifact.file_name
        if not _verified(path, artifact):
            fetch(artifact, ENGINES_DIR)
            _stamp_of(path).write_text(f"{artifact.sha512} {path.stat().st_mtime_ns}\n")
    return spark_jars()


# -- Trino's tarball, in part -------------------------------------------------------------------


def _wanted(name: str) -> bool:
    if any(name.startswith(p) for p in TRINO_LEFT_OUT):
        return False
    return any(name.startswith(p) for p in TRINO_WANTED)


def _safe_target(top: Path, name: str) -> Path:
    target = (top / name).resolve()
    if not target.is_relative_to(top.resolve()):
        raise ArtifactError(f"the tarball's member {name!r} leads outside the folder")
    return target


def unpack_trino(tarball: Path, into: Path) -> None:
    """Unpack the wanted part of the tarball into ``into`` (which must not exist yet)."""
    # First pass: which files are wanted, and for a wanted hard link, which member holds its data.
    destinations: dict[str, list[str]] = {}
    with tarfile.open(tarball, "r|gz") as tar:
        for member in tar:
            if not _wanted(member.name):
                continue
            if member.islnk():
                destinations.setdefault(member.linkname, []).append(member.name)
            elif member.isfile():
                destinations.setdefault(member.name, []).insert(0, member.name)
    # Second pass: each member that holds wanted data is written once and hard-linked to the
    # other names that share it.
    with tarfile.open(tarball, "r|gz") as tar:
        for member in tar:
            names = destinations.get(member.name)
            if not names or not member.isfile():
                continue
            source = tar.extractfile(member)
            assert source is not None
            first = _safe_target(into, names[0])
            first.parent.mkdir(parents=True, exist_ok=True)
            with open(first, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            os.chmod(first, 0o755 if member.mode & 0o111 else 0o644)
            for other in names[1:]:
                link = _safe_target(into, other)
                link.parent.mkdir(parents=True, exist_ok=True)
                os.link(first, link)
    if not (into / TRINO_TOP / "lib").is_dir():
        raise ArtifactError(f"{tarball.name} holds no {TRINO_TOP}/lib/")


def ensure_trino() -> Path:
    home = trino_home()
    if trino_ready():
        return home
    ENGINES_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ENGINES_DIR, prefix=".trino-") as scratch:
        tarball = fetch(TRINO_SERVER, Path(scratch) / "download")
        unpacked = Path(scratch) / "unpacked"
        unpack_trino(tarball, unpacked)
        tarball.unlink()
        (unpacked / TRINO_TOP / TRINO_STAMP).write_text(TRINO_SERVER.sha512 + "\n")
        shutil.rmtree(home, ignore_errors=True)
        (unpacked / TRINO_TOP).replace(home)
    return home


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("engine", nargs="*", help="spark, trino (default: both)")
    engines = set(parser.parse_args(list(argv) if argv is not None else None).engine)
    if not engines <= {"spark", "trino"}:
        parser.error(f"unknown engine(s): {', '.join(sorted(engines - {'spark', 'trino'}))}")
    engines = engines or {"spark", "trino"}
    if mvn() is None:
        print(
            "note: no mvn (Maven) on PATH: the Spark SQL and Trino tests (tests/engines) will "
            "be skipped; install Maven (apt-get install maven) to run them"
        )
        return 0
    try:
        if "spark" in engines:
            ensure_spark_jars()
        if "trino" in engines:
            if java_for_trino() is None:
                print(
                    f"note: no Java {TRINO_MIN_JAVA}+ (set LAKECORE_TRINO_JAVA_HOME): the Trino "
                    "tests will be skipped"
                )
            else:
                ensure_trino()
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
