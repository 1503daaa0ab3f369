"""The README's S3 section, run as it is: the server block in bash, the pyiceberg and DuckDB blocks
in their own processes with no ``AWS_*`` variable at all, against moto's S3 and STS (the only
change: ``AWS_ENDPOINT_URL`` points the server at moto, and the bucket is made first)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import S3TestServer
from tests.rest.test_rest_duckdb import DUCKDB_PYTHON

pytestmark = pytest.mark.s3

REPO = Path(__file__).resolve().parents[2]
BUCKET = "lakecore-demo"


def readme_blocks() -> dict[str, str]:
    """The code blocks that follow a ``<!-- readme-s3: NAME -->`` marker, by name."""
    text = (REPO / "README.md").read_text()
    found = re.findall(r"<!-- readme-s3: (\w+) -->\s*```\w*\n(.*?)```", text, re.S)
    return dict(found)


def without_aws(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("AWS_")}


def test_the_readme_s3_section_works_as_written(s3_server: S3TestServer, tmp_path: Path) -> None:
    blocks = readme_blocks()
    assert set(blocks) == {"server", "pyiceberg", "duckdb"}
    client = s3_server.client()
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
    }
    server = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", blocks["server"]],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while "listening on" not in line:
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                pytest.fail(f"the server block ended: {server.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the server did not start"
        assert "credentials vended from" in line
        pyiceberg = subprocess.run(
            [str(REPO / ".venv" / "bin" / "python"), "-c", blocks["pyiceberg"]],
            cwd=tmp_path,
            env=without_aws(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert pyiceberg.returncode == 0, pyiceberg.stderr[-3000:]
        assert pyiceberg.stdout.strip().splitlines()[-1] == "3"
        if not DUCKDB_PYTHON.exists():
            pytest.skip(f"no DuckDB venv at {DUCKDB_PYTHON}: run `make .venv-duckdb/.installed`")
        duckdb = subprocess.run(
            [str(DUCKDB_PYTHON), "-c", blocks["duckdb"]],
            cwd=tmp_path,
            env=without_aws(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert duckdb.returncode == 0, duckdb.stderr[-3000:]
        assert duckdb.stdout.strip().splitlines()[-1] == "5"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
