"""The REST server's defaults, shared by the app, ``lakecore serve`` and its help text.

Rules: the server listens on loopback unless told otherwise (``DEFAULT_HOST``), on the port
Iceberg's REST catalogs conventionally use (``DEFAULT_PORT``, 8181), and refuses request bodies
over ``DEFAULT_MAX_BODY_BYTES`` (16 MiB: a commit of thousands of snapshot changes fits; a
runaway client does not fill the server's memory).
"""

from __future__ import annotations

from typing import Final

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8181
DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024

__all__ = ["DEFAULT_HOST", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_PORT"]
