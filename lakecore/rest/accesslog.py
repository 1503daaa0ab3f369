"""The REST server's access log: one line per request, which no request can forge or colour.

Rules:

* The line is ``METHOD PATH STATUS MILLISms principal=NAME operation=OP``, logged at INFO on the
  ``lakecore.rest.access`` logger (``lakecore serve`` sends it to stderr).
* PATH is the path as the client sent it (still percent-encoded, so ``%0A`` stays three
  characters), without the query string. Every field a client chooses (the path, the method,
  the principal's name) has each character outside printable ASCII written as an escape
  (``\\x1b``, ``\\u202e``): a request can neither start a line of its own nor send a terminal
  escape sequence to whoever reads the log. A field longer than ``MAX_FIELD_CHARS`` is cut.
* Headers are never logged, so neither is a bearer token; the OAuth2 exchange's secrets travel
  in its body, which is never logged either.
* ``principal`` is ``-`` when the request was refused before it was authenticated.
"""

from __future__ import annotations

import logging
import re
from typing import Final

LOGGER_NAME: Final = "lakecore.rest.access"
MAX_FIELD_CHARS: Final = 2048
_LOG = logging.getLogger(LOGGER_NAME)
_UNPRINTABLE: Final = re.compile(r"[^\x21-\x7e]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def log_safe(text: str) -> str:
    """``text`` as one log field: printable ASCII, every other character escaped, cut to
    ``MAX_FIELD_CHARS``."""
    if len(text) > MAX_FIELD_CHARS:
        text = text[:MAX_FIELD_CHARS] + "..."
    return _UNPRINTABLE.sub(_escape, text)


def log_request(
    method: str, path: str, status: int, seconds: float, principal: str | None, operation: str
) -> None:
    if _LOG.isEnabledFor(logging.INFO):
        _LOG.info(
            "%s %s %d %.1fms principal=%s operation=%s",
            log_safe(method),
            log_safe(path),
            status,
            seconds * 1000.0,
            log_safe(principal or "-"),
            operation,
        )


__all__ = ["LOGGER_NAME", "MAX_FIELD_CHARS", "log_request", "log_safe"]
