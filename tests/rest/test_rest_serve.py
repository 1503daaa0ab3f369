"""``lakecore -l LAKEHOUSE serve`` as a user runs it: a process that prints its URL once it
listens, answers, and stops on SIGTERM; and one-line refusals of unsafe or broken options."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
import requests

from lakecore.cli import main
from lakecore.errors import ExitCode
from lakecore.lakehouse import Lakehouse

LAKECORE = [sys.executable, "-m", "lakecore.cli"]
REPO = Path(__file__).resolve().parents[2]


def test_serve_prints_its_url_serves_reloads_on_sighup_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """The one process test of the server's life: start, serve, SIGHUP, SIGTERM. SIGHUP once
    killed the server; now it reads the token file again (issue 44, finding 7): a changed
    secret and the tokens issued for it are refused at once."""
    lake = tmp_path / "lake"
    Lakehouse.create(str(lake))
    tokens = tmp_path / "tokens"
    tokens.write_text("ops read-write 0123456789abcdef0123\n")
    tokens.chmod(0o600)
    with subprocess.Popen(
        [*LAKECORE, "-l", str(lake), "serve", "--port", "0", "--token-file", str(tokens)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        try:
            serve_reload_and_stop(process, lake, tokens)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def serve_reload_and_stop(process: subprocess.Popen[str], lake: Path, tokens: Path) -> None:
    log = LineReader(process.stderr)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line.startswith("lakecore serve: listening on http://127.0.0.1:"), line
    assert f"tokens from {tokens}" in line and "warehouse file://" in line
    url = line.split()[4]
    headers = {"Authorization": "Bearer 0123456789abcdef0123"}
    assert requests.post(
        f"{url}/v1/namespaces", json={"namespace": ["db"]}, headers=headers, timeout=10
    ).ok
    assert requests.get(f"{url}/healthz", timeout=10).text == "ok\n"
    assert Lakehouse.open(str(lake)).namespace_exists("db")
    issued = requests.post(
        f"{url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_secret": "0123456789abcdef0123"},
        timeout=10,
    ).json()["access_token"]
    jwt_headers = {"Authorization": f"Bearer {issued}"}
    assert requests.get(f"{url}/v1/namespaces", headers=jwt_headers, timeout=10).ok

    # No request between the change and SIGHUP: the signal alone makes the server read it.
    tokens.write_text("ops read-write fedcba9876543210fedc\n")
    process.send_signal(signal.SIGHUP)
    reloaded = log.wait_for("reloaded (SIGHUP)")
    assert reloaded.endswith(f"token file {tokens} reloaded (SIGHUP): 1 principals"), reloaded
    for old in (headers, jwt_headers):
        refused = requests.get(f"{url}/v1/namespaces", headers=old, timeout=10)
        assert refused.status_code == 401, refused.text
    renewed = {"Authorization": "Bearer fedcba9876543210fedc"}
    assert requests.get(f"{url}/v1/namespaces", headers=renewed, timeout=10).ok

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    text = log.rest()
    assert "POST /v1/namespaces 200" in text and "principal=ops" in text
    assert "GET /v1/namespaces 401" in text
    for secret in ("0123456789abcdef0123", "fedcba9876543210fedc", issued, "eyJ"):
        assert secret not in text


class LineReader:
    """Reads a process's stream in a thread, so that a test can wait for a line with a timeout."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} in: {self.seen}")

    def rest(self) -> str:
        self.thread.join(timeout=20)
        while not self.lines.empty():
            line = self.lines.get()
            if line is not None:
                self.seen.append(line)
        return "\n".join(self.seen)


def test_a_port_in_use_is_one_line_and_exit_4(tmp_path: Path) -> None:
    """A second ``lakecore serve`` on a taken port printed uvicorn's timestamped log line and
    ended with uvicorn's own code 3, which reads as a commit conflict to retry (a trial)."""
    lake = tmp_path / "lake"
    Lakehouse.create(str(lake))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run(
            [*LAKECORE, "-l", str(lake), "serve", "--allow-anonymous", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert refused.returncode == ExitCode.FAILURE, refused.stderr
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"lakecore: LakecoreError: cannot listen on 127.0.0.1:{port}: address already in use; "
        "another process listens there (a lakecore serve already running?): stop it, or give "
        "another --port"
    ]


def test_serve_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    Lakehouse.create(str(lake))
    cases = [
        (["serve", "--allow-anonymous", "--host", "0.0.0.0"], "only for a loopback --host", 2),
        (["serve"], "serve needs --token-file FILE", 2),
        (["serve", "--token-file", str(tmp_path / "none")], "cannot read the token file", 2),
        (["serve", "--allow-anonymous", "--port", "70000"], "is not a port number", 2),
        (
            ["serve", "--allow-anonymous", "--token-lifetime", "5"],
            "--token-lifetime 5 must be 60 to 86400 seconds",
            2,
        ),
    ]
    for argv, message, code in cases:
        assert main(["-l", str(lake), *argv]) == code, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert main(["-l", str(tmp_path / "nolake"), "serve", "--allow-anonymous"]) == (
        ExitCode.NOT_FOUND
    )
    err = capsys.readouterr().err
    assert "there is no lakehouse" in err and "init" in err


def test_without_the_server_extra_the_cli_works_and_serve_says_what_to_install(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "blocker"
    for name in ("starlette", "uvicorn", "prometheus_client"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked')\n")
    lake = tmp_path / "lake"
    Lakehouse.create(str(lake))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])}
    listed = subprocess.run(
        [*LAKECORE, "-l", str(lake), "namespace", "list"], capture_output=True, text=True, env=env
    )
    assert listed.returncode == 0, listed.stderr
    refused = subprocess.run(
        [*LAKECORE, "-l", str(lake), "serve", "--allow-anonymous"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert refused.returncode == ExitCode.BAD_INPUT
    assert "serve needs the [server] extra" in refused.stderr
    assert "pip install '.[server]' in the lakecore checkout" in refused.stderr
