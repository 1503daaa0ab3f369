"""The token file while the server runs: read again when it changes, its principals replaced at
once (issue 44, finding 7), a bad file keeping the old ones; and the checks at start (finding 8,
and the token-file part of finding 17). The file's check interval runs on an injected clock."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from lakecore.cli import main
from lakecore.errors import ExitCode, InvalidArgumentError
from lakecore.rest import tokenfile
from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from lakecore.rest.serve import ServeOptions, authenticator_for
from lakecore.rest.tokenfile import CHECK_SECONDS, TokenFile
from tests.rest.auth_helpers import (
    OTHER_SECRET,
    READER_SECRET,
    WRITER_SECRET,
    client_credentials,
    exchange,
    issued_token,
    may_write,
    standard_lines,
    status_of,
    write_token_file,
)
from tests.rest.conftest import Served


@dataclass
class Watched:
    """A server whose token file the test rewrites, with the file check's clock in hand."""

    path: Path
    url: str
    token_file: TokenFile
    tick: list[float]

    def rewrite(self, text: str, mode: int = 0o600) -> None:
        write_token_file(self.path, text, mode)
        self.tick[0] += CHECK_SECONDS  # the next request checks the file

    def reloads(self) -> dict[str, float]:
        text = requests.get(f"{self.url}/metrics").text
        found = re.findall(r'lakecore_rest_token_file_reloads_total\{outcome="(\w+)"\} (\S+)', text)
        return {outcome: float(value) for outcome, value in found}


@pytest.fixture
def watched(rest: Served, tmp_path: Path, serve_app: Callable[..., str]) -> Watched:
    path = write_token_file(tmp_path / "tokens", standard_lines())
    tick = [0.0]
    token_file = TokenFile(path, monotonic=lambda: tick[0])
    url = serve_app(app(rest.catalog, authenticator=Authenticator(token_file=token_file)))
    rest.catalog.create_namespace("db")
    return Watched(path, url, token_file, tick)


def test_a_changed_or_removed_secret_is_refused_right_after_the_file_changes(
    watched: Watched, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 7: the file was read once at start, so a removed secret and its tokens kept
    working until a restart, though the README said a change revokes them."""
    url = watched.url
    etl_token = issued_token(url, "etl", WRITER_SECRET)
    reader_token = issued_token(url, "dashboards", READER_SECRET)
    for token in (WRITER_SECRET, READER_SECRET, etl_token, reader_token):
        assert status_of(url, token) == 200
    with caplog.at_level(logging.INFO, logger="lakecore.rest.tokenfile"):
        watched.rewrite(f"etl read-write {OTHER_SECRET}\n")
        for token in (WRITER_SECRET, READER_SECRET, etl_token, reader_token):
            assert status_of(url, token) == 401
            assert status_of(url, token, "/v1/config") == 401
            assert exchange(url, token).json()["error"] == "invalid_grant"
    assert client_credentials(url, "etl", WRITER_SECRET).json()["error"] == "invalid_client"
    assert status_of(url, OTHER_SECRET) == 200
    assert status_of(url, issued_token(url, "etl", OTHER_SECRET)) == 200
    assert [r.getMessage() for r in caplog.records] == [
        f"token file {watched.path} reloaded (changed): 1 principals"
    ]
    assert watched.reloads() == {"reloaded": 1.0, "failed": 0.0}


def test_a_role_change_takes_effect_at_once_for_secrets_and_tokens(watched: Watched) -> None:
    url = watched.url
    etl_token = issued_token(url, "etl", WRITER_SECRET)
    reader_token = issued_token(url, "dashboards", READER_SECRET)
    assert may_write(url, etl_token, "a") == 200
    assert may_write(url, reader_token, "b") == 403
    watched.rewrite(f"etl read-only {WRITER_SECRET}\ndashboards read-write {READER_SECRET}\n")
    for token in (WRITER_SECRET, etl_token):
        assert status_of(url, token) == 200 and may_write(url, token, "c") == 403
    for number, token in enumerate((READER_SECRET, reader_token)):
        assert may_write(url, token, f"d{number}") == 200


def test_the_file_is_read_only_when_its_stat_changes(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``stat`` at most once a ``CHECK_SECONDS``, never a read per request."""
    reads: list[Path] = []
    real = tokenfile.read_token_file_at

    def counting(path: Path) -> tokenfile.TokenFileRead:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(tokenfile, "read_token_file_at", counting)
    for _ in range(20):
        watched.tick[0] += CHECK_SECONDS
        assert status_of(watched.url, WRITER_SECRET) == 200
    assert reads == []
    watched.rewrite(standard_lines(writer_secret=OTHER_SECRET))
    for _ in range(5):
        status_of(watched.url, OTHER_SECRET)
    assert reads == [watched.path]
    assert watched.token_file.reload("SIGHUP") and len(reads) == 2  # SIGHUP reads, changed or not


@pytest.mark.parametrize(
    ("content", "logged"),
    [
        (
            f"etl read-write {OTHER_SECRET}\nops read-only {OTHER_SECRET}\n",
            "lines 1 and 2: 'etl' and 'ops' have the same secret",
        ),
        (b"etl read-write " + b"\xff" * 20 + b"\n", "is not UTF-8 text (line 1"),
        (f"etl read-write {OTHER_SECRET}\nops writer {READER_SECRET}\n", "line 2: role 'writer'"),
        ("# all commented out\n", "names no principal"),
        (None, "cannot read the token file"),
    ],
    ids=["duplicate-secret", "not-utf8", "bad-role", "empty", "removed"],
)
def test_a_bad_file_keeps_the_old_principals_and_logs_one_line(
    watched: Watched,
    caplog: pytest.LogCaptureFixture,
    content: str | bytes | None,
    logged: str,
) -> None:
    token = issued_token(watched.url, "etl", WRITER_SECRET)
    with caplog.at_level(logging.INFO, logger="lakecore.rest.tokenfile"):
        if content is None:
            watched.path.unlink()
        elif isinstance(content, bytes):
            watched.path.write_bytes(content)
        else:
            watched.path.write_text(content)
        for _ in range(5):  # the file stays bad: one line, not one a second
            watched.tick[0] += CHECK_SECONDS
            assert status_of(watched.url, WRITER_SECRET) == 200
            assert status_of(watched.url, token) == 200
        assert status_of(watched.url, OTHER_SECRET) == 401
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and len(caplog.records) == 1, caplog.text
    message = errors[0].getMessage()
    assert message.startswith(f"token file {watched.path} not reloaded (changed); keeping the 2 ")
    assert logged in message and "\n" not in message and OTHER_SECRET not in message
    assert watched.reloads() == {"reloaded": 0.0, "failed": 1.0}
    assert not watched.token_file.reload("SIGHUP")  # a SIGHUP tries again, and fails again
    watched.rewrite(standard_lines(writer_secret=OTHER_SECRET))
    assert status_of(watched.url, OTHER_SECRET) == 200 and status_of(watched.url, token) == 401
    assert watched.reloads() == {"reloaded": 1.0, "failed": 2.0}


def test_duplicate_secrets_refuse_to_start(tmp_path: Path) -> None:
    """Finding 8: two principals with one secret were accepted, the secret acting as the last."""
    path = write_token_file(
        tmp_path / "tokens",
        f"# tokens\netl read-write {OTHER_SECRET}\n\nviewer read-only {READER_SECRET}\n"
        f"ops read-only {OTHER_SECRET}\n",
    )
    with pytest.raises(InvalidArgumentError) as caught:
        authenticator_for(ServeOptions(str(tmp_path / "lake"), token_file=str(path)))
    assert caught.value.exit_code == ExitCode.BAD_INPUT
    assert str(caught.value) == (
        f"the token file {path} lines 2 and 5: 'etl' and 'ops' have the same secret; give each "
        "principal its own"
    )


def test_a_token_file_others_can_read_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 8: a world-readable token file was used silently."""
    path = write_token_file(tmp_path / "tokens", standard_lines(), 0o644)
    lake = str(tmp_path / "lake")
    with caplog.at_level(logging.WARNING):
        authenticator = authenticator_for(ServeOptions(lake, token_file=str(path)))
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: the token file {path} can be read or written by its group or others "
        f"(mode 0644); chmod 600 {path}"
    ]
    caplog.clear()
    os.chmod(path, 0o600)
    with caplog.at_level(logging.WARNING):
        authenticator_for(ServeOptions(lake, token_file=str(path)))
        assert authenticator.token_file is not None
        write_token_file(path, standard_lines(writer_secret=OTHER_SECRET), 0o640)
        assert authenticator.token_file.reload("SIGHUP")
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: the token file {path} can be read or written by its group or others "
        f"(mode 0640); chmod 600 {path}"
    ]


def test_a_non_utf8_token_file_is_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Finding 17: a non-UTF-8 token file was "unexpected UnicodeDecodeError", exit 4."""
    lake = tmp_path / "lake"
    from lakecore.lakehouse import Lakehouse

    Lakehouse.create(str(lake))
    path = tmp_path / "tokens"
    path.write_bytes(f"etl read-write {WRITER_SECRET}\n".encode() + b"ops read-only \xe9t\xe9" * 4)
    os.chmod(path, 0o600)
    code = main(["-l", str(lake), "serve", "--port", "0", "--token-file", str(path)])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    assert err.strip().splitlines() == [
        f"lakecore: InvalidArgumentError: the token file {path} is not UTF-8 text (line 2, byte "
        f"{len(WRITER_SECRET) + 30}); save it as UTF-8"
    ]
