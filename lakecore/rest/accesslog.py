"""The REST server's access log: one line per request.

Rules:

* The line is ``METHOD PATH STATUS MILLISms principal=NAME operation=OP``, logged at INFO on the
  ``lakecore.rest.access`` logger (``lakecore serve`` sends it to stderr).
* PATH is the raw path without the query string. Headers are never logged, so neither is a
  bearer token; the OAuth2 exchange's secrets travel in its body, which is never logged either.
* ``principal`` is ``-`` when the request was refused before it was authenticated.
"""

from __future__ import annotations

import logging
from typing import Final

LOGGER_NAME: Final = "lakecore.rest.access"
_LOG = logging.getLogger(LOGGER_NAME)


def log_request(
    method: str, path: str, status: int, seconds: float, principal: str | None, operation: str
) -> None:
    if _LOG.isEnabledFor(logging.INFO):
        _LOG.info(
            "%s %s %d %.1fms principal=%s operation=%s",
            method,
            path,
            status,
            seconds * 1000.0,
            principal or "-",
            operation,
        )


__all__ = ["LOGGER_NAME", "log_request"]
