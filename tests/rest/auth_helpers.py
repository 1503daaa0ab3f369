"""What the REST authentication tests share: secrets, token files, hostile tokens, OAuth2 calls."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import requests

WRITER_SECRET = "w" * 8 + "0123456789abcdef"
READER_SECRET = "r" * 8 + "fedcba9876543210"
OTHER_SECRET = "o" * 8 + "00112233445566778899"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def write_token_file(path: Path, text: str, mode: int = 0o600) -> Path:
    """Write ``text`` as a token file with ``mode``; a change always shows in its ``stat``."""
    before = path.stat().st_mtime_ns if path.exists() else None
    path.write_text(text)
    os.chmod(path, mode)
    if before is not None and path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))
    return path


def standard_lines(writer_role: str = "read-write", writer_secret: str = WRITER_SECRET) -> str:
    return (
        "# name role secret\n"
        f"etl {writer_role} {writer_secret}\n"
        "\n"
        f"dashboards read-only {READER_SECRET}\n"
    )


def hostile_tokens() -> list[str]:
    """Bearer values that crashed or could crash a parser reading claims before the signature
    (issue 44, finding 4), and their cousins in the JWT format."""
    deep = b"[" * 1000
    huge = b'{"sub":"x","role":"r","exp":1e999}'
    long_int = b'{"sub":"x","role":"r","exp":' + b"9" * 5000 + b"}"
    claims_1e999 = b'{"iss":"lakecore-rest","sub":"etl","iat":1e999,"exp":1e999}'
    hs256 = b'{"alg":"HS256","typ":"JWT"}'
    none = b'{"alg":"none","typ":"JWT"}'
    kid_list = b'{"alg":"HS256","kid":[1]}'
    crit = b'{"alg":"HS256","crit":["exp"]}'
    detached = b'{"alg":"HS256","b64":false}'
    empty = b64(b"{}")
    return [
        f"lk1.{b64(huge)}.x",  # was 500 OverflowError
        f"lk1.{b64(deep)}.x",  # was 500 RecursionError
        f"lk1.{b64(long_int)}.x",
        f"{b64(deep)}.{empty}.x",  # nesting in a JWT header
        f"{b64(hs256)}.{b64(deep)}.x",  # nesting in a JWT payload
        f"{b64(hs256)}.{b64(claims_1e999)}.x",
        f"{b64(none)}.{b64(claims_1e999)}.",
        f"{b64(kid_list)}.{empty}.x",
        f"{b64(crit)}.{empty}.x",
        f"{b64(detached)}.{empty}.x",
        "a.b.c",
        "." * 3000,
        "x" * 9000,  # over the length cap
        f"{'A' * 5000}.e30.x",
    ]


def hostile_header_values() -> list[str | bytes]:
    values: list[str | bytes] = [f"Bearer {token}" for token in hostile_tokens()]
    values += [b"Bearer \xff\xfe\x80", "Bearer", "Bearer  ", "Basic Og==", "Token abc", "bearer"]
    return values


def client_credentials(url: str, name: str | None, secret: str, **extra: Any) -> requests.Response:
    data = {"grant_type": "client_credentials", "client_secret": secret}
    if name is not None:
        data["client_id"] = name
    return requests.post(f"{url}/v1/oauth/tokens", data=data, timeout=10, **extra)


def exchange(url: str, subject: str, **extra: Any) -> requests.Response:
    data = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject,
        "subject_token_type": ACCESS_TOKEN_TYPE,
    }
    return requests.post(f"{url}/v1/oauth/tokens", data=data, timeout=10, **extra)


def issued_token(url: str, name: str | None, secret: str) -> str:
    response = client_credentials(url, name, secret)
    assert response.status_code == 200, response.text
    token = response.json()["access_token"]
    assert isinstance(token, str)
    return token


def claims_of(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified (for assertions only)."""
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def status_of(url: str, token: str | None, path: str = "/v1/namespaces") -> int:
    headers = bearer(token) if token is not None else {}
    return requests.get(f"{url}{path}", headers=headers, timeout=10).status_code


def may_write(url: str, token: str, namespace: str) -> int:
    """The status of creating ``namespace`` with ``token``."""
    return requests.post(
        f"{url}/v1/namespaces", json={"namespace": [namespace]}, headers=bearer(token), timeout=10
    ).status_code
