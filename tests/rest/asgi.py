"""Calling the REST app in-process, without a socket: one ASGI request, its whole answer.

For the tests that send many requests (the fuzzing, the hostile bodies): no server thread, no
HTTP parsing, so a hundred requests cost milliseconds. What the server's own HTTP layer does
(uvicorn decoding the path, refusing malformed request lines) is not exercised here; the tests
that need it use the session server (``tests/rest/server.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error_type(self) -> str | None:
        try:
            return str(self.json()["error"]["type"])
        except (ValueError, KeyError, TypeError):
            return None


def call(
    app: ASGIApp,
    method: str,
    raw_path: str | bytes,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | Iterable[tuple[bytes, bytes]] = (),
    query: str | bytes = b"",
) -> Answer:
    """One request to ``app``: ``raw_path`` as sent on the wire (percent-escapes kept in
    ``raw_path``, decoded in ``path`` as uvicorn does), ``query`` the query string."""
    raw = raw_path.encode("latin-1") if isinstance(raw_path, str) else raw_path
    if isinstance(headers, Mapping):
        header_list = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
        ]
    else:
        header_list = list(headers)
    if body and not any(k == b"content-length" for k, _ in header_list):
        header_list.append((b"content-length", str(len(body)).encode()))
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote_to_bytes(raw).decode("utf-8", "replace"),
        "raw_path": raw,
        "root_path": "",
        "query_string": query.encode("latin-1") if isinstance(query, str) else query,
        "headers": header_list,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8181),
    }
    sent = [False]

    async def receive() -> Message:
        if sent[0]:
            await asyncio.sleep(3600)
        sent[0] = True
        return {"type": "http.request", "body": body, "more_body": False}

    answer = Answer(0)
    chunks: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = int(message["status"])
            answer.headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message["headers"]
            }
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    answer.body = b"".join(chunks)
    return answer
