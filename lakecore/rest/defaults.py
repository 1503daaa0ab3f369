"""The REST server's defaults, shared by the app, ``lakecore serve`` and its help text.

Rules: the server listens on loopback unless told otherwise (``DEFAULT_HOST``), on the port
Iceberg's REST catalogs conventionally use (``DEFAULT_PORT``, 8181), and refuses request bodies
over ``DEFAULT_MAX_BODY_BYTES`` (16 MiB: a commit of thousands of snapshot changes fits; a
runaway client does not fill the server's memory). Reads and writes run on thread pools of
their own (``READ_THREADS``, ``WRITE_THREADS``): however many writers wait for storage, a read
finds a thread. A JSON body nested deeper than ``MAX_JSON_DEPTH`` is refused (an Iceberg schema
of 60 nested structs is about 180 levels deep). An issued token lives
``ISSUED_TOKEN_SECONDS`` (one hour, ``lakecore.rest.auth``), ``--token-lifetime`` at least
``MIN_TOKEN_SECONDS`` (a Java client refreshes a tenth of it before the end) and at most
``MAX_TOKEN_SECONDS`` (a day: a revoked credential's tokens die with the file change anyway, but
a stolen token should not outlive a working day). A request body must arrive within
``BODY_SECONDS`` of its headers (a client that stops sending is 408 and its connection closed:
uvicorn itself has no such timeout, so a stalled body held its connection, and a graceful stop,
for good); on SIGTERM or SIGINT, requests in flight get ``SHUTDOWN_SECONDS`` to finish.

An idle client connection is kept open for ``KEEP_ALIVE_SECONDS`` (75 s, as nginx does): a
server that closes one while its client sends on it resets that request, and a reset commit is one whose outcome the client does not know.
pyiceberg loads a table, writes its data files for seconds, then commits on the same pooled
connection; uvicorn's own 5 s put that moment in the common range (the load suite met it).
Longer than the 60 s a load balancer such as AWS's ALB keeps its idle connections to the
server, so that the balancer, not the server, closes them.
"""

from __future__ import annotations

from typing import Final

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8181
DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
READ_THREADS: Final = 32
# A commit waits in its thread for the batch that holds it: as many threads as writers a
# server serves at once, or the threads, not the root writes, would bound the batches.
WRITE_THREADS: Final = 256
MAX_JSON_DEPTH: Final = 256
# The JSON of the metadata files loadTable answered, kept (they never change): 64 MiB.
ANSWER_CACHE_BYTES: Final = 64 << 20
ISSUED_TOKEN_SECONDS: Final = 3600
MIN_TOKEN_SECONDS: Final = 60
MAX_TOKEN_SECONDS: Final = 86400
BODY_SECONDS: Final = 30.0
SHUTDOWN_SECONDS: Final = 10
KEEP_ALIVE_SECONDS: Final = 75

__all__ = [
    "ANSWER_CACHE_BYTES",
    "BODY_SECONDS",
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "ISSUED_TOKEN_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "MAX_JSON_DEPTH",
    "MAX_TOKEN_SECONDS",
    "MIN_TOKEN_SECONDS",
    "READ_THREADS",
    "SHUTDOWN_SECONDS",
    "WRITE_THREADS",
]
