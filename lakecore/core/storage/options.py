"""Storage options: which keys each scheme accepts, how a command line's text becomes them.

Rules:

- **Unknown keys are refused before any I/O.** A typo (``endpoint=`` for ``endpoint_url=``)
  would otherwise surface as a TypeError deep inside the client on first use, or worse, be
  silently ignored. The S3 keys are s3fs's S3FileSystem arguments that can be given as text or
  JSON (not ``session``/``loop``), plus ``region`` as a shorthand; a scheme lakecore has no
  backend of its own for is left to its fsspec file system to judge.
- **One parser for every command line** (``parse_storage_options``): ``KEY=VALUE`` pairs,
  ``client_kwargs.NAME=VALUE`` for one entry of a nested option, booleans and integers typed
  by key (botocore refuses a connection pool size given as text).
- **Nothing hangs** (``TIMEOUT_OPTION``): every S3 call carries an overall deadline, taken out
  of the options before they reach s3fs. botocore's read timeout does not cover a PUT that
  waits for ``100 Continue`` from a silent server, which otherwise blocks a commit forever.
- **lakecore's own keys** (``LAKECORE_OPTIONS``: the deadline, and ``S3_REQUESTS_OPTION``,
  which turns the direct S3 request path off) never reach a file system client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from lakecore.errors import InvalidArgumentError

# A lakecore option (taken out of storage_options before they reach s3fs): the most seconds one
# S3 request, retries included, may take before it fails with StorageTimeoutError. Generous,
# because it must outlast botocore's and s3fs's own retries; it exists so that nothing hangs.
TIMEOUT_OPTION: Final = "lakecore_timeout_seconds"
DEFAULT_S3_TIMEOUT_SECONDS: Final = 300.0
# A lakecore option for s3:// roots: false sends every request through s3fs and botocore, where
# by default reads, HEADs and single PUTs take the direct path (lakecore.core.storage.s3_requests).
S3_REQUESTS_OPTION: Final = "lakecore_s3_requests"
LAKECORE_OPTIONS: Final = frozenset({TIMEOUT_OPTION, S3_REQUESTS_OPTION})

# The storage options each scheme accepts. Unknown keys are refused before any I/O: a typo
# (``endpoint=`` for ``endpoint_url=``) would otherwise surface as a TypeError deep inside the
# client on first use, or worse, be silently ignored. These are s3fs's S3FileSystem arguments
# that can be given as text or JSON (not ``session``/``loop``), plus ``region`` as a shorthand.
S3_OPTIONS: Final = frozenset(
    {
        "anon",
        "endpoint_url",
        "key",
        "secret",
        "token",
        "use_ssl",
        "client_kwargs",
        "requester_pays",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "version_aware",
        "config_kwargs",
        "s3_additional_kwargs",
        "username",
        "password",
        "cache_regions",
        "max_concurrency",
        "fixed_upload_size",
        "profile",
        "region",
    }
)
OPTIONS_BY_SCHEME: Final[dict[str, frozenset[str]]] = {
    "s3": S3_OPTIONS | {S3_REQUESTS_OPTION},
    "file": frozenset(),
    "memory": frozenset(),
}
# How text values from the command line are typed, by key (everything else stays a string).
_BOOLEAN_OPTIONS: Final = frozenset(
    {
        "anon",
        "use_ssl",
        "requester_pays",
        "default_fill_cache",
        "version_aware",
        "cache_regions",
        "fixed_upload_size",
        S3_REQUESTS_OPTION,
    }
)
# Typed by their full key on a command line; the nested one is the S3 client's connection pool
# (see S3_MAX_POOL_CONNECTIONS), which botocore refuses as text.
_INTEGER_OPTIONS: Final = frozenset(
    {"default_block_size", "max_concurrency", "config_kwargs.max_pool_connections"}
)
_NESTED_OPTIONS: Final = frozenset({"client_kwargs", "config_kwargs", "s3_additional_kwargs"})


def accepted_storage_options(scheme: str) -> frozenset[str] | None:
    """The option keys a scheme accepts (lakecore's own included), or None when lakecore cannot
    know them (a scheme it has no backend of its own for: fsspec's file system decides)."""
    known = OPTIONS_BY_SCHEME.get(scheme)
    return None if known is None else known | {TIMEOUT_OPTION}


def checked_options(scheme: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a dict, with ``region`` folded into ``client_kwargs``; raises
    ``InvalidArgumentError`` naming the accepted keys when a key is unknown for ``scheme``."""
    if not isinstance(options, Mapping):
        raise InvalidArgumentError(
            f"storage options must be a mapping, not {type(options).__name__}"
        )
    accepted = accepted_storage_options(scheme)
    if accepted is not None:
        unknown = sorted(str(k) for k in options if k not in accepted)
        if unknown:
            listed = ", ".join(sorted(accepted))
            raise InvalidArgumentError(
                f"unknown storage option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for {scheme}:// "
                f"(accepted: {listed})"
            )
    out = dict(options)
    if "region" in out:
        out["client_kwargs"] = {
            **(out.get("client_kwargs") or {}),
            "region_name": out.pop("region"),
        }
    for key in _NESTED_OPTIONS & out.keys():
        if not isinstance(out[key], Mapping):
            raise InvalidArgumentError(
                f"storage option {key} must be a mapping (give {key}.NAME=VALUE)"
            )
    return out


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """The one parser of ``KEY=VALUE`` storage options from a command line or a job.

    ``client_kwargs.NAME=VALUE`` (and ``config_kwargs.``, ``s3_additional_kwargs.``) set one
    entry of a nested option; booleans (``anon=true``) and integers are typed by key. Which keys
    a scheme accepts is checked when the options reach ``Storage``."""
    options: dict[str, Any] = {}
    for item in pairs:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgumentError(f"storage option {item!r} is not KEY=VALUE")
        value: Any = text
        if key in _BOOLEAN_OPTIONS:
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise InvalidArgumentError(f"storage option {key}={text!r} must be true or false")
            value = text.lower() in ("true", "1", "yes")
        elif key in _INTEGER_OPTIONS:
            if not text.isdigit():
                raise InvalidArgumentError(f"storage option {key}={text!r} must be a whole number")
            value = int(text)
        head, dot, name = key.partition(".")
        if dot:
            if head not in _NESTED_OPTIONS or not name:
                raise InvalidArgumentError(
                    f"storage option {key!r}: only {', '.join(sorted(_NESTED_OPTIONS))} take .NAME"
                )
            options.setdefault(head, {})[name] = value
        else:
            options[key] = value
    return options


def timeout_seconds(options: Mapping[str, Any], root_uri: str) -> float:
    """The overall deadline of one request (``TIMEOUT_OPTION``), checked: a positive number."""
    value = options.get(TIMEOUT_OPTION, DEFAULT_S3_TIMEOUT_SECONDS)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise InvalidArgumentError(
            f"storage option {TIMEOUT_OPTION}={value!r} for {root_uri} must be a "
            "positive number of seconds"
        )
    return seconds


def s3_requests_enabled(options: Mapping[str, Any], root_uri: str) -> bool:
    """Whether the direct S3 request path may serve this root (``S3_REQUESTS_OPTION``, on
    unless false)."""
    value = options.get(S3_REQUESTS_OPTION, True)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise InvalidArgumentError(
        f"storage option {S3_REQUESTS_OPTION}={value!r} for {root_uri} must be true or false"
    )


def without_lakecore_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a file system client gets: lakecore's own keys taken out."""
    return {k: v for k, v in options.items() if k not in LAKECORE_OPTIONS}
