"""Vended credentials: short-lived S3 credentials a client gets for one table, so that engines
need no storage keys of their own.

A client that sends ``X-Iceberg-Access-Delegation: vended-credentials`` (pyiceberg and Iceberg's
Java client do by default) gets, in a table's ``storage-credentials`` and at
``GET .../tables/{t}/credentials``, credentials from STS ``AssumeRole`` of the server's role
(``serve --vended-credentials-role ARN``) with a session policy that allows only that table.

Rules:

* **Scope.** The session policy (``session_policy``) allows the objects under the table's
  folders (its location and any ``write.*.path``), and listing those prefixes of their buckets;
  nothing else of the bucket, nothing of another. The role's own policy bounds it further: a
  session policy only takes away.
* **Access.** A read-only principal, and any request under a time-travel prefix, gets read
  access (``s3:GetObject``, ``s3:GetObjectVersion``, listing); a read-write principal on the
  live catalog also ``s3:PutObject``, ``s3:DeleteObject`` and the multipart calls. A client that
  may not write then fails at its first upload, before any file is written.
* **Lifetime.** ``duration_seconds`` (``--vended-credentials-duration``, 15 minutes to 12 hours,
  STS's bounds; the role's own maximum applies too). Credentials are kept per table folder set
  and access, and replaced once older than ``refresh_seconds``, so a busy table costs one STS
  call per refresh period, not one per load; a client always gets at least
  ``duration - refresh`` of life. The expiry goes to the client as
  ``s3.session-token-expires-at-ms``.
* **Never logged**, never in an error message; the session is named after the principal
  (``lakecore-<principal>``), so that CloudTrail shows who asked.
* A server without a role vends nothing and says so when it starts.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from lakecore.errors import InvalidArgumentError, StorageError, StorageRefusedError

MIN_DURATION_SECONDS: Final = 900
MAX_DURATION_SECONDS: Final = 43_200
DEFAULT_DURATION_SECONDS: Final = 3600
READ_ACTIONS: Final = ("s3:GetObject", "s3:GetObjectVersion")
WRITE_ACTIONS: Final = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
_SESSION_NAME_CHARACTERS: Final = re.compile(r"[^\w+=,.@-]")
# Credentials kept at most: one per table folder set and access, the least recently used go.
MAX_KEPT: Final = 10_000


@dataclass(frozen=True)
class VendingOptions:
    role_arn: str
    duration_seconds: int = DEFAULT_DURATION_SECONDS
    refresh_seconds: int = DEFAULT_DURATION_SECONDS // 2
    sts_endpoint: str | None = None
    region: str | None = None

    def __post_init__(self) -> None:
        if not self.role_arn.startswith("arn:"):
            raise InvalidArgumentError(
                f"--vended-credentials-role {self.role_arn!r} is not a role ARN "
                "(arn:aws:iam::ACCOUNT:role/NAME)"
            )
        if not MIN_DURATION_SECONDS <= self.duration_seconds <= MAX_DURATION_SECONDS:
            raise InvalidArgumentError(
                f"--vended-credentials-duration {self.duration_seconds}s must be "
                f"{MIN_DURATION_SECONDS}s to {MAX_DURATION_SECONDS}s (STS's bounds)"
            )
        if not 0 < self.refresh_seconds < self.duration_seconds:
            raise InvalidArgumentError(
                f"--vended-credentials-refresh {self.refresh_seconds}s must be shorter than the "
                f"duration, {self.duration_seconds}s"
            )


@dataclass(frozen=True)
class Vended:
    """One set of credentials for some folders, and when it expires (epoch milliseconds)."""

    prefix: str
    config: dict[str, str]
    expires_at_millis: int
    issued_at: float


def split_s3(location: str) -> tuple[str, str]:
    """(bucket, key prefix without a trailing '/') of an ``s3://`` location.

    Raises:
        InvalidArgumentError: not an S3 location.
    """
    scheme, sep, rest = location.partition("://")
    if not sep or scheme.lower() not in ("s3", "s3a", "s3n"):
        raise InvalidArgumentError(f"{location} is not an S3 location: no credentials for it")
    bucket, _, key = rest.partition("/")
    return bucket, key.rstrip("/")


def session_policy(folders: Iterable[str], write: bool) -> dict[str, Any]:
    """The session policy for the objects under ``folders`` (S3 locations): read, and with
    ``write`` also write, and listing those prefixes (see the module docstring)."""
    objects: list[str] = []
    prefixes: dict[str, list[str]] = {}
    for folder in sorted(set(folders)):
        bucket, key = split_s3(folder)
        objects.append(f"arn:aws:s3:::{bucket}/{key}/*")
        prefixes.setdefault(bucket, []).extend([key, f"{key}/*"])
    statements: list[dict[str, Any]] = [
        {
            "Sid": "TableObjects",
            "Effect": "Allow",
            "Action": [*READ_ACTIONS, *(WRITE_ACTIONS if write else ())],
            "Resource": objects,
        }
    ]
    for bucket, keys in sorted(prefixes.items()):
        statements.append(
            {
                "Sid": f"List{len(statements)}",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": sorted(set(keys))}},
            }
        )
        statements.append(
            {
                "Sid": f"Location{len(statements)}",
                "Effect": "Allow",
                "Action": ["s3:GetBucketLocation"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def session_name(principal: str) -> str:
    """``lakecore-<principal>``, in the characters and the length STS takes."""
    return _SESSION_NAME_CHARACTERS.sub("-", f"lakecore-{principal}")[:64]


class CredentialVendor:
    """Vends credentials (see the module docstring); ``sts`` is a botocore STS client (made
    from the options when not given)."""

    def __init__(
        self,
        options: VendingOptions,
        client_properties: Mapping[str, str],
        *,
        sts: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self.client_properties = dict(client_properties)
        self._sts = sts
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[tuple[str, ...], bool], Vended] = {}
        self.sts_calls = 0
        self.vended = 0

    def _client(self) -> Any:
        if self._sts is None:
            try:
                import botocore.session
            except ImportError as exc:
                raise InvalidArgumentError(
                    "vended credentials need botocore: pip install '.[s3]' in the lakecore "
                    "checkout (make setup installs it)"
                ) from exc
            session = botocore.session.get_session()
            self._sts = session.create_client(
                "sts",
                region_name=self.options.region or session.get_config_variable("region"),
                endpoint_url=self.options.sts_endpoint,
            )
        return self._sts

    def credentials_for(self, folders: Iterable[str], *, write: bool, principal: str) -> Vended:
        """Credentials for the objects under ``folders`` (the first is the table's location,
        the prefix clients match them by).

        Raises:
            InvalidArgumentError: a folder is not on S3.
            StorageRefusedError: STS refused (the role does not trust the server, say).
            StorageError: STS did not answer.
        """
        listed = tuple(dict.fromkeys(folders))
        key = (tuple(sorted(listed)), write)
        now = self._clock()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept.issued_at < self.options.refresh_seconds:
            self.vended += 1
            return kept
        policy = session_policy(listed, write)
        try:
            answer = self._client().assume_role(
                RoleArn=self.options.role_arn,
                RoleSessionName=session_name(principal),
                DurationSeconds=self.options.duration_seconds,
                Policy=json.dumps(policy, separators=(",", ":")),
            )
        except Exception as exc:
            self._raise(exc)
        self.sts_calls += 1
        given = answer["Credentials"]
        expiration = given["Expiration"]
        expires = (
            int(expiration.timestamp() * 1000)
            if hasattr(expiration, "timestamp")
            else int((now + self.options.duration_seconds) * 1000)
        )
        vended = Vended(
            prefix=listed[0],
            config={
                **self.client_properties,
                "s3.access-key-id": given["AccessKeyId"],
                "s3.secret-access-key": given["SecretAccessKey"],
                "s3.session-token": given["SessionToken"],
                "s3.session-token-expires-at-ms": str(expires),
            },
            expires_at_millis=expires,
            issued_at=now,
        )
        with self._lock:
            self._kept[key] = vended
            while len(self._kept) > MAX_KEPT:
                self._kept.pop(next(iter(self._kept)))
        self.vended += 1
        return vended

    def _raise(self, exc: Exception) -> None:
        """STS's failure as lakecore's: refused (4xx from STS) or unavailable; never with
        anything of the request (the policy names folders, not secrets, but stays out too)."""
        response = getattr(exc, "response", None)
        code = ""
        status = 0
        if isinstance(response, Mapping):
            code = str(response.get("Error", {}).get("Code", ""))
            status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if 400 <= status < 500:
            raise StorageRefusedError(
                f"STS refused AssumeRole of {self.options.role_arn} ({code or status}): check that "
                "the role trusts the server's identity and allows sts:AssumeRole"
            ) from None
        raise StorageError(
            f"STS did not vend credentials for {self.options.role_arn} "
            f"({code or type(exc).__name__}); retry"
        ) from None


__all__ = [
    "DEFAULT_DURATION_SECONDS",
    "MAX_DURATION_SECONDS",
    "MIN_DURATION_SECONDS",
    "CredentialVendor",
    "Vended",
    "VendingOptions",
    "session_name",
    "session_policy",
    "split_s3",
]
