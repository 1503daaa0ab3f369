"""``lakecore -l LAKEHOUSE serve``: run the REST catalog server over a lakehouse with uvicorn.

Rules:

* The catalog is a ``LakecoreCatalog`` named ``CATALOG_NAME`` over the lakehouse (which must
  exist), with ``--warehouse`` as its warehouse (default: the one the lakehouse recorded,
  ``<lakehouse>/warehouse`` before that),
  ``--storage-option`` for the lakehouse's own files and ``--property KEY=VALUE`` catalog
  properties for pyiceberg's FileIO (``s3.endpoint``, ...).
* Who may call: ``--token-file`` (``lakecore.rest.tokenfile``, ``lakecore.rest.auth``), or
  ``--allow-anonymous``, which is refused unless ``--host`` is a loopback address
  (127.0.0.0/8, ::1, localhost). Without either the server does not start: a catalog open to
  anyone who can reach the port is never the default. Both together are refused too (exit 2):
  a principal could drop its token and act as anonymous.
* The token file is read before the catalog is opened: a file that is unreadable, not UTF-8,
  malformed or gives two principals one secret stops the start (one line, exit 2); one its
  group or others can read is a warning line on stderr. While the server runs, the file is
  read again when it changes (checked at most once a second, on the next request) and on
  SIGHUP; a bad file then keeps the principals read before and logs one error line.
* ``--token-lifetime`` is the absolute lifetime of the tokens ``POST /v1/oauth/tokens`` issues
  (``ISSUED_TOKEN_SECONDS``, one hour; 60 s to a day).
* When the socket listens, one line goes to stdout: ``lakecore serve: listening on
  http://HOST:PORT (...)``, with the port actually bound (``--port 0`` picks a free one).
  The access log and errors go to stderr. SIGINT and SIGTERM stop it gracefully: uvicorn
  stops listening and gives the requests in flight ``SHUTDOWN_SECONDS`` (10 s) to finish, then
  cancels the rest (a catalog call already running in a thread finishes before the process
  exits, its answer unsent); exit code 0.
* An idle client connection stays open ``KEEP_ALIVE_SECONDS`` (75 s; uvicorn's default 5 s
  reset commits sent just as it closed the connection: ``lakecore.rest.defaults``).
* A socket that cannot listen (the port taken, ``--host`` not an address of this machine, a
  port below 1024 without the right) is one line naming the address, why, and what to do, and
  exit code 4 (``ExitCode.FAILURE``): uvicorn itself logs the ``OSError`` with a timestamp and
  exits with its own code 3, which here means a commit conflict.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

import uvicorn
from pyiceberg.exceptions import ValidationError

from lakecore.errors import ExitCode, InvalidArgumentError, LakecoreError, NoLakehouseError
from lakecore.iceberg.catalog import LakecoreCatalog
from lakecore.iceberg.properties import LINGER_PROPERTY, MAX_BATCH_PROPERTY, MAX_WAIT_PROPERTY
from lakecore.lakehouse.group_commit import (
    DEFAULT_LINGER_SECONDS,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_WAIT_SECONDS,
)
from lakecore.rest.app import app, client_properties_for
from lakecore.rest.auth import Authenticator
from lakecore.rest.credentials import CredentialVendor, VendingOptions
from lakecore.rest.defaults import (
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    ISSUED_TOKEN_SECONDS,
    KEEP_ALIVE_SECONDS,
    SHUTDOWN_SECONDS,
)
from lakecore.rest.tokenfile import TokenFile

CATALOG_NAME: Final = "lakecore"


@dataclass
class ServeOptions:
    lakehouse: str
    warehouse: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token_file: str | None = None
    allow_anonymous: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    token_lifetime: int = ISSUED_TOKEN_SECONDS
    storage_options: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    max_batch: int = DEFAULT_MAX_BATCH
    max_batch_wait_ms: float = DEFAULT_MAX_WAIT_SECONDS * 1000
    batch_linger_ms: float = DEFAULT_LINGER_SECONDS * 1000
    client_properties: dict[str, str] = field(default_factory=dict)
    vending: VendingOptions | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def authenticator_for(options: ServeOptions) -> Authenticator:
    """Raises: InvalidArgumentError: no way to authenticate, anonymous off loopback or with a
    token file, or an unusable token file."""
    if options.allow_anonymous and options.token_file is not None:
        raise InvalidArgumentError(
            "--allow-anonymous and --token-file exclude each other (a principal could drop its "
            "token and act as anonymous): give one"
        )
    if options.allow_anonymous and not is_loopback(options.host):
        raise InvalidArgumentError(
            f"--allow-anonymous is only for a loopback --host (127.0.0.1, ::1, localhost), not "
            f"{options.host}; give --token-file for a server others can reach"
        )
    if options.token_file is None and not options.allow_anonymous:
        raise InvalidArgumentError(
            "serve needs --token-file FILE (lines 'NAME read-only|read-write SECRET'), or "
            "--allow-anonymous on a loopback --host for local use"
        )
    token_file = TokenFile(options.token_file) if options.token_file is not None else None
    return Authenticator(
        token_file=token_file,
        allow_anonymous=options.allow_anonymous,
        token_seconds=options.token_lifetime,
    )


def catalog_for(
    options: ServeOptions, properties: Mapping[str, str] | None = None
) -> LakecoreCatalog:
    extra: dict[str, Any] = dict(properties or options.properties)
    if options.warehouse:
        extra["warehouse"] = options.warehouse
    extra.setdefault(MAX_BATCH_PROPERTY, str(options.max_batch))
    extra.setdefault(MAX_WAIT_PROPERTY, str(options.max_batch_wait_ms))
    extra.setdefault(LINGER_PROPERTY, str(options.batch_linger_ms))
    try:
        return LakecoreCatalog(
            CATALOG_NAME,
            uri=options.lakehouse,
            storage_options=options.storage_options or None,
            **extra,
        )
    except NoLakehouseError:
        raise NoLakehouseError(
            f"there is no lakehouse at {options.lakehouse}: create one first with "
            f"`lakecore -l {options.lakehouse} init`"
        ) from None
    except ValidationError as exc:
        # pyiceberg's type for a refused option (a --warehouse that is not the lakehouse's):
        # the operator's mistake, exit 2 with the catalog's own message.
        cause = exc.__cause__
        if isinstance(cause, LakecoreError):
            raise type(cause)(str(cause)) from None
        raise InvalidArgumentError(" ".join(str(exc).split())) from None


class BindErrors(logging.Filter):
    """Keeps, instead of printing, the ``OSError`` uvicorn logs when it cannot listen (it logs
    the exception itself, then exits): ``serve`` says it in its own line."""

    def __init__(self) -> None:
        super().__init__()
        self.error: OSError | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, OSError):
            self.error = record.msg
            return False
        return True


_LISTEN_HINTS: Final = {
    errno.EADDRINUSE: "another process listens there (a lakecore serve already running?): "
    "stop it, or give another --port",
    errno.EADDRNOTAVAIL: "--host must be an address of this machine (0.0.0.0 listens on all)",
    errno.EACCES: "a port below 1024 needs privileges: give another --port",
}


def cannot_listen(options: ServeOptions, error: OSError | None, code: object) -> LakecoreError:
    host = options.host.strip("[]")
    address = f"[{host}]:{options.port}" if ":" in host else f"{host}:{options.port}"
    if error is None:
        return LakecoreError(f"serve could not listen on {address} (uvicorn exited with {code})")
    reason = os.strerror(error.errno).lower() if error.errno else str(error)
    hint = _LISTEN_HINTS.get(error.errno or 0)
    if error.errno == errno.EACCES and options.port >= 1024:
        hint = None
    return LakecoreError(f"cannot listen on {address}: {reason}" + (f"; {hint}" if hint else ""))


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints one line with its URL once it listens, and calls
    ``on_sighup`` (in its event loop, not in the signal handler) for each SIGHUP from then on.
    """

    def __init__(
        self, config: uvicorn.Config, note: str, on_sighup: Callable[[], object] | None = None
    ) -> None:
        super().__init__(config)
        self.note = note
        self.on_sighup = on_sighup

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return  # the bind failed; uvicorn has logged why
        if self.on_sighup is not None and hasattr(signal, "SIGHUP"):
            # Before the line below: a client that waits for it may send SIGHUP at once.
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.on_sighup)
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        print(f"lakecore serve: listening on http://{shown}:{port} ({self.note})", flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # uvicorn's own handler re-raises the signal once it has shut down, so a clean stop
        # would end with "killed by SIGTERM"; a graceful stop is exit 0 here. A second SIGINT
        # still forces the exit, as in uvicorn.
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def serve(options: ServeOptions) -> int:
    """Run until interrupted. Raises InvalidArgumentError for unusable options."""
    # Logging first: reading the token file may warn about its mode.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    authenticator = authenticator_for(options)
    catalog = catalog_for(options)
    catalog.warm_up()
    client_properties = client_properties_for(catalog, options.client_properties)
    vendor = (
        None if options.vending is None else CredentialVendor(options.vending, client_properties)
    )
    # uvicorn's own start lines would repeat ours ("listening on ..."); its warnings stay.
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    # The access log is ours (lakecore.rest.accesslog); uvicorn's would repeat every line.
    config = uvicorn.Config(
        app(
            catalog,
            authenticator=authenticator,
            max_body_bytes=options.max_body_bytes,
            client_properties=options.client_properties,
            vendor=vendor,
        ),
        host=options.host.strip("[]"),
        port=options.port,
        access_log=False,
        log_config=None,
        lifespan="off",
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    who = "anonymous allowed" if options.allow_anonymous else f"tokens from {options.token_file}"
    batching = (
        "group commit off"
        if options.max_batch == 1
        else f"group commit up to {options.max_batch} a version"
    )
    # Said when the server starts: without a role, clients need storage credentials of their own.
    vending = (
        "no credentials vended (--vended-credentials-role not given)"
        if options.vending is None
        else f"credentials vended from {options.vending.role_arn}"
    )
    note = (
        f"lakehouse {catalog.lakehouse.storage.root_uri}, warehouse {catalog.warehouse}, {who}, "
        f"{batching}, {vending}"
    )
    token_file = authenticator.token_file
    server = AnnouncingServer(
        config, note, (lambda: token_file.reload("SIGHUP")) if token_file is not None else None
    )
    bind_errors = BindErrors()
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(bind_errors)
    try:
        server.run()
    except SystemExit as exc:
        if server.started:
            raise
        raise cannot_listen(options, bind_errors.error, exc.code) from None
    finally:
        uvicorn_log.removeFilter(bind_errors)
    return ExitCode.OK if server.started else ExitCode.FAILURE


__all__ = [
    "CATALOG_NAME",
    "AnnouncingServer",
    "BindErrors",
    "ServeOptions",
    "authenticator_for",
    "cannot_listen",
    "catalog_for",
    "is_loopback",
    "serve",
]
