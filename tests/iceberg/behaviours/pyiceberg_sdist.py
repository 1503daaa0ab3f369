"""pyiceberg's own tests, from the sdist of the pinned version on the package index, unpacked
into ``build/`` once and reused (``make test`` calls ``python -m
tests.iceberg.behaviours.pyiceberg_sdist``; the suite's conftest calls ``ensure_suite`` too).

Why not ``pip download --no-binary :all: pyiceberg==0.12.0``: pip prepares the metadata of every
sdist it downloads, so it installs the build backend's requirements, and ``--no-binary :all:``
makes it build those from source too (it was seen hanging in "Installing build dependencies").
No pip option skips that step. So this module does what pip's finder does and no more: it
asks the index pip is configured with (``PIP_INDEX_URL``, else ``pip config``'s ``index-url``,
else PyPI) for the project page (PEP 691 JSON, or PEP 503 HTML), takes the sdist's URL, and
checks the file against the sha256 pinned here and the one the index gives. Nothing is built.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Final

PROJECT: Final = "pyiceberg"
VERSION: Final = "0.12.0"
SDIST: Final = f"{PROJECT}-{VERSION}.tar.gz"
# The sha256 the package index publishes for the file: a different file is refused.
SDIST_SHA256: Final = "19f165d298054f9436108691098b60fa0fa99d0eff5fb884700c43b29334a39d"
DEFAULT_INDEX: Final = "https://pypi.org/simple"
REPO: Final = Path(__file__).resolve().parents[3]
BUILD: Final = REPO / "build"
SUITE_DIR: Final = BUILD / f"{PROJECT}-{VERSION}"
# The files of the sdist that the harness uses.
BEHAVIOURS: Final = SUITE_DIR / "tests" / "catalog" / "test_catalog_behaviors.py"
CONFTEST: Final = SUITE_DIR / "tests" / "conftest.py"
TIMEOUT_SECONDS: Final = 120


def _pip_config() -> dict[str, str]:
    """``pip config list`` as a mapping (empty when pip cannot say)."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    config = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip()] = value.strip().strip("'\"")
    return config


def _setting(config: dict[str, str], name: str) -> str | None:
    """A pip setting as pip would take it: the environment first, then ``download.``,
    ``global.`` in the configuration files."""
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env
    for section in (":env:", "download", "global"):
        value = config.get(f"{section}.{name}")
        if value:
            return value
    return None


def index_url() -> str:
    return (_setting(_pip_config(), "index-url") or DEFAULT_INDEX).rstrip("/")


def _ssl_context() -> ssl.SSLContext:
    cert = _setting(_pip_config(), "cert")
    return ssl.create_default_context(cafile=cert) if cert else ssl.create_default_context()


class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def sdist_url(index: str, context: ssl.SSLContext) -> tuple[str, str | None]:
    """The sdist's URL on the index and the sha256 the index gives for it (if any)."""
    page = f"{index}/{PROJECT}/"
    request = urllib.request.Request(
        page,
        headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"},
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS, context=context) as response:
        body = response.read()
        kind = response.headers.get_content_type()
    if kind == "application/vnd.pypi.simple.v1+json":
        for entry in json.loads(body)["files"]:
            if entry["filename"] == SDIST:
                return urllib.parse.urljoin(page, entry["url"]), entry.get("hashes", {}).get(
                    "sha256"
                )
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        for href in parser.hrefs:
            url, _, fragment = href.partition("#")
            if url.rsplit("/", 1)[-1] == SDIST:
                digest = (
                    fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
                )
                return urllib.parse.urljoin(page, url), digest
    raise SystemExit(f"error: {page} lists no {SDIST}; is {PROJECT} {VERSION} on that index?")


def download(target: Path) -> None:
    """Fetch the sdist into ``target``, checked against the pinned sha256."""
    index = index_url()
    context = _ssl_context()
    url, published = sdist_url(index, context)
    if published is not None and published != SDIST_SHA256:
        raise SystemExit(
            f"error: {index} publishes sha256 {published} for {SDIST}, not the pinned {SDIST_SHA256}"
        )
    with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS, context=context) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(
            f"error: {url} has sha256 {digest}, not the pinned {SDIST_SHA256}; refusing it"
        )
    target.write_bytes(data)


def ensure_suite() -> Path:
    """The unpacked sdist's folder, downloaded and unpacked first when it is not in build/."""
    if BEHAVIOURS.is_file() and CONFTEST.is_file():
        return SUITE_DIR
    BUILD.mkdir(exist_ok=True)
    archive = BUILD / SDIST
    if not archive.is_file() or hashlib.sha256(archive.read_bytes()).hexdigest() != SDIST_SHA256:
        partial = archive.with_suffix(".part")
        download(partial)
        partial.replace(archive)
    # Unpack beside, then move into place: an interrupted unpack never looks complete.
    with tempfile.TemporaryDirectory(dir=BUILD) as scratch, tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
        shutil.rmtree(SUITE_DIR, ignore_errors=True)
        (Path(scratch) / SUITE_DIR.name).replace(SUITE_DIR)
    return SUITE_DIR


if __name__ == "__main__":
    print(ensure_suite())
