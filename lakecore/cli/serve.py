"""The ``lakecore serve`` command: its options, and the call into ``lakecore.rest.serve``.

Rules: ``add_commands(sub, subcommand)`` registers the command with the main parser (as
``lakecore.cli.lookup`` does); importing this module imports neither Starlette nor uvicorn, so
``lakecore --help`` works without the ``[server]`` extra, and ``serve`` without it is one line
naming the install command (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from lakecore.cli.shared_options import (
    add_property_option,
    add_storage_option,
    key_value,
    lakehouse_uri,
    storage_options_of,
)
from lakecore.errors import InvalidArgumentError
from lakecore.lakehouse.group_commit import (
    DEFAULT_LINGER_SECONDS,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_WAIT_SECONDS,
    MAX_BATCH_LIMIT,
    MAX_WAIT_MILLIS_LIMIT,
)
from lakecore.rest.credentials import DEFAULT_DURATION_SECONDS
from lakecore.rest.defaults import (
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    ISSUED_TOKEN_SECONDS,
    MAX_TOKEN_SECONDS,
    MIN_TOKEN_SECONDS,
)


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    p = subcommand(
        sub,
        "serve",
        "serve the lakehouse as an Iceberg REST catalog (Spark, Trino, DuckDB, pyiceberg)",
        description="Serve the lakehouse over the Iceberg REST Catalog API until interrupted. "
        "Prints one line with its URL when it listens; logs one line per request to stderr. "
        "Needs the [server] extra.",
    )
    p.add_argument(
        "--warehouse",
        metavar="URI",
        help="where tables keep their files (default: the lakehouse's recorded warehouse, or "
        "<lakehouse>/warehouse before its first Iceberg change)",
    )
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})"
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="who may call: lines 'NAME read-only|read-write SECRET' (chmod 600); clients send a "
        "SECRET as token, or NAME:SECRET as OAuth2 credential; read again when it changes and "
        "on SIGHUP",
    )
    p.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="requests without a token may read and write (only with a loopback --host, and "
        "not with --token-file)",
    )
    p.add_argument(
        "--token-lifetime",
        type=int,
        default=ISSUED_TOKEN_SECONDS,
        metavar="SECONDS",
        help=f"absolute lifetime of the tokens /v1/oauth/tokens issues; a token exchange never "
        f"extends it (default {ISSUED_TOKEN_SECONDS}, {MIN_TOKEN_SECONDS} to {MAX_TOKEN_SECONDS})",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help=f"refuse larger request bodies with 413 (default {DEFAULT_MAX_BODY_BYTES})",
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=DEFAULT_MAX_BATCH,
        metavar="N",
        help="group commit: at most N changes in one lakehouse version (default "
        f"{DEFAULT_MAX_BATCH}; 1 to {MAX_BATCH_LIMIT})",
    )
    p.add_argument(
        "--max-batch-wait",
        type=float,
        default=DEFAULT_MAX_WAIT_SECONDS * 1000,
        metavar="MS",
        help="group commit: how long a batch may wait to fill, in milliseconds (default "
        f"{DEFAULT_MAX_WAIT_SECONDS * 1000:g}: a batch is what arrived during the previous "
        "root write)",
    )
    p.add_argument(
        "--batch-linger",
        type=float,
        default=DEFAULT_LINGER_SECONDS * 1000,
        metavar="MS",
        help="group commit: how long a batch waits for the writers the last batch answered to "
        f"send their next change, in milliseconds (default {DEFAULT_LINGER_SECONDS * 1000:g}; "
        "0: never; after a wait in vain it does not wait for a while)",
    )
    p.add_argument(
        "--no-group-commit",
        action="store_true",
        help="one change per lakehouse version, in arrival order (the same as --max-batch 1)",
    )
    add_storage_option(p)
    add_property_option(
        p,
        "a catalog property, e.g. s3.endpoint=http://... (repeatable); with --storage-option "
        "and the AWS_* variables one S3 configuration for the lakehouse, the warehouse and the "
        "table files",
    )
    p.add_argument(
        "--client-property",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="a property clients get from /v1/config and loadTable (repeatable); the S3 "
        "endpoint, region and path-style addressing come from the server's own settings "
        "unless given; KEY= leaves one out",
    )
    p.add_argument(
        "--vended-credentials-role",
        metavar="ARN",
        help="vend short-lived credentials scoped to each table: STS AssumeRole of this role "
        "with a session policy of the table's folders (read-only for read-only principals and "
        "time travel); without it no credentials are vended",
    )
    p.add_argument(
        "--vended-credentials-duration",
        default=f"{DEFAULT_DURATION_SECONDS}s",
        metavar="DURATION",
        help="how long vended credentials live (15m to 12h; default 1h; the role's own "
        "maximum applies too)",
    )
    p.add_argument(
        "--vended-credentials-refresh",
        metavar="DURATION",
        help="vend new credentials for a table once its kept ones are this old (default: half "
        "the duration)",
    )
    p.add_argument(
        "--vended-credentials-sts-endpoint",
        metavar="URL",
        help="the STS endpoint (default: AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, or AWS's)",
    )
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from lakecore.rest.serve import ServeOptions, serve
    except ImportError as exc:
        raise InvalidArgumentError(
            f"serve needs the [server] extra ({exc.name or exc} is missing): "
            "pip install '.[server]' in the lakecore checkout (make setup installs it)"
        ) from None
    if args.port < 0 or args.port > 65535:
        raise InvalidArgumentError(f"--port {args.port} is not a port number (0-65535)")
    if args.max_body_bytes < 1:
        raise InvalidArgumentError(f"--max-body-bytes {args.max_body_bytes} must be positive")
    if not MIN_TOKEN_SECONDS <= args.token_lifetime <= MAX_TOKEN_SECONDS:
        raise InvalidArgumentError(
            f"--token-lifetime {args.token_lifetime} must be {MIN_TOKEN_SECONDS} to "
            f"{MAX_TOKEN_SECONDS} seconds"
        )
    if not 1 <= args.max_batch <= MAX_BATCH_LIMIT:
        raise InvalidArgumentError(f"--max-batch {args.max_batch} must be 1 to {MAX_BATCH_LIMIT}")
    if not 0 <= args.batch_linger <= MAX_WAIT_MILLIS_LIMIT:
        raise InvalidArgumentError(
            f"--batch-linger {args.batch_linger:g} must be 0 to {MAX_WAIT_MILLIS_LIMIT} ms"
        )
    if not 0 <= args.max_batch_wait <= MAX_WAIT_MILLIS_LIMIT:
        raise InvalidArgumentError(
            f"--max-batch-wait {args.max_batch_wait:g} must be 0 to {MAX_WAIT_MILLIS_LIMIT} ms"
        )
    if args.no_group_commit and (
        args.max_batch != DEFAULT_MAX_BATCH
        or args.max_batch_wait != DEFAULT_MAX_WAIT_SECONDS * 1000
        or args.batch_linger != DEFAULT_LINGER_SECONDS * 1000
    ):
        raise InvalidArgumentError(
            "--no-group-commit takes no --max-batch, --max-batch-wait or --batch-linger"
        )
    options = ServeOptions(
        lakehouse=lakehouse_uri(args),
        warehouse=args.warehouse,
        host=args.host,
        port=args.port,
        token_file=args.token_file,
        allow_anonymous=args.allow_anonymous,
        max_body_bytes=args.max_body_bytes,
        token_lifetime=args.token_lifetime,
        storage_options=storage_options_of(args),
        properties=dict(args.property or []),
        client_properties=dict(args.client_property or []),
        vending=vending_options(args),
        max_batch=1 if args.no_group_commit else args.max_batch,
        max_batch_wait_ms=0.0 if args.no_group_commit else args.max_batch_wait,
        batch_linger_ms=0.0 if args.no_group_commit else args.batch_linger,
    )
    return serve(options)


def vending_options(args: argparse.Namespace) -> Any:
    """The ``--vended-credentials-*`` options (None without a role). Raises
    InvalidArgumentError for a malformed duration or a role that is no ARN."""
    from lakecore.core.units import parse_duration_millis
    from lakecore.rest.credentials import VendingOptions

    if not args.vended_credentials_role:
        for given in ("refresh", "sts_endpoint"):
            if getattr(args, f"vended_credentials_{given}"):
                raise InvalidArgumentError(
                    f"--vended-credentials-{given.replace('_', '-')} needs "
                    "--vended-credentials-role"
                )
        return None
    duration = parse_duration_millis(args.vended_credentials_duration) // 1000
    refresh = (
        parse_duration_millis(args.vended_credentials_refresh) // 1000
        if args.vended_credentials_refresh
        else duration // 2
    )
    return VendingOptions(
        role_arn=args.vended_credentials_role,
        duration_seconds=duration,
        refresh_seconds=refresh,
        sts_endpoint=args.vended_credentials_sts_endpoint,
    )


__all__ = ["add_commands", "cmd_serve", "vending_options"]
