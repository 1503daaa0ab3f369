"""Failures of a backend as lakecore errors: one line naming the URI, the cause chained.

No raw ``OSError`` or botocore exception leaves ``Storage``:

- a missing file is ``NotFoundError`` naming the full URI (reading: a directory, or a file
  where a directory should be, on the path means that file does not exist);
- a timeout is ``StorageTimeoutError``. A request that changes the store (write, exclusive
  create, delete, sync) may or may not have taken effect; one that only looks changed nothing.
  When the overall deadline (``TIMEOUT_OPTION``) is what ran out, the line names it;
- a request that changes the store whose connection closed before its answer came (botocore's
  ``ConnectionClosedError``: it was sent, and may have been carried out) is ``StorageError``
  saying that it may or may not have taken effect, not that it could not be done;
- a refusal (no space, no permission, a read-only file system, S3's 403 codes) is
  ``StorageRefusedError`` with the cause as a person reads it: it did not take effect;
- a server that cannot be reached at all (refused, no route, a name that does not resolve)
  says to check the endpoint; a missing AWS profile is a bad option (exit 2), missing
  credentials say where they may come from;
- anything else is ``StorageError`` with the client's message, capped at ``MESSAGE_MAX_CHARS``.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Final, NoReturn

from lakecore.core.storage.options import TIMEOUT_OPTION
from lakecore.errors import (
    InvalidArgumentError,
    LakecoreError,
    NotFoundError,
    StorageError,
    StorageRefusedError,
    StorageTimeoutError,
)

# How far to follow __cause__/__context__ when classifying an exception from a client library
# (s3fs wraps botocore errors, which wrap urllib3/aiohttp errors).
_MAX_CAUSE_DEPTH = 8


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps, following __cause__ then __context__."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < _MAX_CAUSE_DEPTH and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def find_client_error(
    exc: BaseException, codes: tuple[str, ...], statuses: tuple[int, ...]
) -> bool:
    """True when a botocore ClientError with one of these codes or HTTP statuses is in the chain."""
    for e in causes(exc):
        response = getattr(e, "response", None)
        if not isinstance(response, dict):
            continue
        error = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        if error.get("Code") in codes or meta.get("HTTPStatusCode") in statuses:
            return True
    return False


def _timeout_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [TimeoutError]  # also socket.timeout, asyncio's, fsspec's
    try:
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

        types += [ConnectTimeoutError, ReadTimeoutError]
    except ImportError:  # pragma: no cover - botocore comes with s3fs
        pass
    return tuple(types)


def _is_timeout(exc: BaseException) -> bool:
    timeout_types = _timeout_types()
    for e in causes(exc):
        if isinstance(e, timeout_types):
            return True
        if isinstance(e, OSError) and e.errno == errno.ETIMEDOUT:
            return True
    return False


# What a store answers when it refuses a request outright: it did not take effect, and a retry
# fails the same way until space is freed or access granted.
_REFUSING_ERRNOS: Final = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG}
)
_REFUSING_S3_CODES: Final = (
    "AccessDenied",
    "AllAccessDisabled",
    "AccountProblem",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "EntityTooLarge",
)


def _refusal(exc: BaseException) -> str | None:
    """The cause, as a person reads it (``No space left on device``), when the store refused the
    request outright; None when the failure may be passing or may have taken effect."""
    for e in causes(exc):
        if isinstance(e, OSError) and e.errno in _REFUSING_ERRNOS:
            return e.strerror or os.strerror(e.errno)
        if isinstance(e, PermissionError):  # s3fs's translation of a 403 carries no errno
            return f"Permission denied ({capped(e)})"
    if find_client_error(exc, codes=_REFUSING_S3_CODES, statuses=(403,)):
        return f"access denied ({capped(exc)})"
    return None


def _is_unreachable(exc: BaseException) -> bool:
    """True when no connection to the server could be made at all (refused, no route, a name
    that does not resolve): most often a wrong endpoint or a server that is down. Checked after
    timeouts, which may or may not have taken effect."""
    types: list[type[BaseException]] = [ConnectionRefusedError, socket.gaierror]
    try:
        from botocore.exceptions import EndpointConnectionError

        types.append(EndpointConnectionError)
    except ImportError:  # pragma: no cover - botocore comes with s3fs
        pass
    return any(isinstance(e, tuple(types)) for e in causes(exc))


# Actions that change the store: a timeout may or may not have taken effect. The others only
# look, and a timeout there changed nothing.
_CHANGING_ACTIONS: Final = ("write", "exclusively create", "delete", "sync")


def raise_translated(
    exc: Exception,
    uri: str,
    action: str,
    reading: bool = False,
    *,
    deadline_seconds: float | None = None,
) -> NoReturn:
    """Re-raise a backend failure as a lakecore error naming ``uri``; the original is chained.

    ``reading``: the operation reads one file, so a directory (or a file where a directory
    should be) on its path means that file does not exist. ``deadline_seconds``: the overall
    deadline of the request (``TIMEOUT_OPTION``), named when it is what ran out."""
    if isinstance(exc, LakecoreError):
        raise exc
    if _is_timeout(exc):
        if type(exc).__name__ == "FSTimeoutError" and deadline_seconds is not None:
            # fsspec's overall deadline, which has no message of its own.
            cause = (
                f"the store did not answer within {deadline_seconds:g} s (storage option "
                f"{TIMEOUT_OPTION})"
            )
        else:
            cause = f"{type(exc).__name__}: {capped(exc)}"
        if action.startswith(_CHANGING_ACTIONS):
            raise StorageTimeoutError(
                f"timed out trying to {action} {uri}: {cause}; it may or may not have taken "
                "effect, check before retrying"
            ) from exc
        raise StorageTimeoutError(
            f"timed out trying to {action} {uri}: {cause}; nothing was changed"
        ) from exc
    lost = next((e for e in causes(exc) if type(e).__name__ == "ConnectionClosedError"), None)
    if lost is not None and action.startswith(_CHANGING_ACTIONS):
        # botocore's, found by name: the request went out and its answer never came.
        raise StorageError(
            f"lost the answer trying to {action} {uri}: the connection closed before the store "
            f"answered ({type(lost).__name__}: {capped(lost)}); it may or may not have taken "
            "effect, check before retrying"
        ) from exc
    if isinstance(exc, ImportError) or (
        isinstance(exc, OSError) and str(exc).startswith("Unable to load lib")
    ):
        # fsspec knows the scheme but its package or native library is missing (gs:// without
        # gcsfs; hdfs:// without a Hadoop client, whose error lists every path it tried):
        # setup, not a storage failure a retry could fix.
        raise InvalidArgumentError(
            f"cannot open {uri}: {capped(exc)} (this installation has no working file system for "
            f"{uri.split('://')[0]}://)"
        ) from exc
    if reading and isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError)):
        raise NotFoundError(f"file {uri} does not exist") from exc
    if isinstance(exc, FileNotFoundError):
        # Not the file itself but something it needs: a bucket, a container, the root.
        raise NotFoundError(f"could not {action} {uri}: {exc} (does the bucket exist?)") from exc
    refusal = _refusal(exc)
    if refusal is not None:
        raise StorageRefusedError(f"could not {action} {uri}: {refusal}") from exc
    if _is_unreachable(exc):
        raise StorageError(
            f"could not {action} {uri}: the storage server cannot be reached ({type(exc).__name__}: {exc}); "
            "check the endpoint (storage option endpoint_url, or AWS_ENDPOINT_URL) and that the server is up"
        ) from exc
    missing_profile = next((e for e in causes(exc) if type(e).__name__ == "ProfileNotFound"), None)
    if (
        missing_profile is not None
    ):  # botocore's: a name the AWS config lacks, a setting a retry cannot fix
        raise InvalidArgumentError(
            f"could not {action} {uri}: ProfileNotFound: {capped(missing_profile)}; check the storage option "
            "profile (or AWS_PROFILE) against the AWS config (~/.aws/config, or AWS_CONFIG_FILE)"
        ) from exc
    if (
        type(exc).__name__ == "NoCredentialsError"
    ):  # botocore's, found by name: botocore is optional
        raise StorageError(
            f"could not {action} {uri}: NoCredentialsError: no AWS credentials were found; give them to this "
            "process (and the executors): AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance "
            "role, or --storage-option key=... secret=..."
        ) from exc
    raise StorageError(f"could not {action} {uri}: {type(exc).__name__}: {capped(exc)}") from exc


# An error line is read by a person and kept by a scheduler: a backend's message beyond this
# (a native loader's list of every path it tried ran to 15 KB) is cut, the original chained.
MESSAGE_MAX_CHARS: Final = 400


def capped(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) <= MESSAGE_MAX_CHARS:
        return text
    return f"{text[:MESSAGE_MAX_CHARS]}... ({len(text) - MESSAGE_MAX_CHARS:,} more characters)"
