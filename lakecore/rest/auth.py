"""Who may call the REST catalog: static bearer tokens, OAuth2 client credentials, anonymous.

The token file (``lakecore serve --token-file PATH``) has one principal a line, ``#`` comments
and blank lines ignored::

    # name      role        secret (at least 16 characters)
    etl         read-write  4f1c9e0b7a2d48e5b6c3...
    dashboards  read-only   9b8a7c6d5e4f3a2b1c0d...

Rules:

* A role is ``read-only`` (GET and HEAD of the catalog API) or ``read-write`` (everything).
  A read-only principal's write is 403 ``ForbiddenException``; no token, or one that matches
  nothing, is 401 ``NotAuthorizedException``.
* A client presents either the secret itself (``Authorization: Bearer <secret>``; pyiceberg's
  ``token=``), or exchanges ``client_id=<name>`` (optional) and ``client_secret=<secret>`` at
  ``POST /v1/oauth/tokens`` (the client-credentials grant; pyiceberg's and DuckDB's
  ``credential=name:secret``, Spark's ``credential``) for an access token it then presents. A
  token exchange (``grant_type=urn:ietf:params:oauth:grant-type:token-exchange``) with a valid
  ``subject_token`` renews one: Java clients refresh their tokens this way.
* An issued token is ``lk1.<payload>.<mac>``: the payload names the principal, its role and
  the expiry (``ISSUED_TOKEN_SECONDS``); the mac is HMAC-SHA256 keyed by that principal's
  secret. Every server process reading the same file accepts the others' tokens (no shared
  state), and changing a principal's secret revokes its tokens.
* Secrets and tokens are compared with ``hmac.compare_digest`` against every entry, so the
  time taken does not depend on how much of a guess was right, nor on which entry matched.
  Neither is ever logged or put into an error message.
* Anonymous access (``--allow-anonymous``) is only for a server bound to a loopback address
  (``lakecore.rest.serve`` refuses anything else): a request without a token is then the
  ``anonymous`` principal with read-write rights. A wrong token is still 401. pyiceberg
  without a token sends ``Authorization: Bearer None``: that counts as no token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from lakecore.errors import InvalidArgumentError
from lakecore.rest.errors import FORBIDDEN, NOT_AUTHORIZED, RestError

Role = Literal["read-only", "read-write"]
ROLES: Final[tuple[Role, ...]] = ("read-only", "read-write")
MIN_SECRET_CHARS: Final = 16
ISSUED_TOKEN_SECONDS: Final = 3600
TOKEN_PREFIX: Final = "lk1"
CLIENT_CREDENTIALS: Final = "client_credentials"
TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
ANONYMOUS: Final = "anonymous"
# pyiceberg's RestCatalog without a token or credential still sends this header
# (LegacyOAuth2AuthManager.auth_header formats its token, None): it means "no token".
PYICEBERG_NO_TOKEN: Final = "Bearer None"


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role

    @property
    def may_write(self) -> bool:
        return self.role == "read-write"


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    secret: bytes


class OAuthError(Exception):
    """An OAuth2 error response (``{"error", "error_description"}``, RFC 6749 5.2)."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


def read_token_file(path: str | Path) -> list[tuple[str, Role, str]]:
    """The file's ``(name, role, secret)`` lines.

    Raises:
        InvalidArgumentError: unreadable, or a malformed line (named by number, never its secret).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot read the token file {path}: {exc.strerror or exc}"
        ) from None
    entries: list[tuple[str, Role, str]] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        where = f"token file {path} line {number}"
        if len(parts) != 3:
            raise InvalidArgumentError(
                f"{where}: expected 'NAME ROLE SECRET' (3 fields), found {len(parts)}"
            )
        name, role, secret = parts
        if role not in ROLES:
            raise InvalidArgumentError(f"{where}: role {role!r} must be read-only or read-write")
        if len(secret) < MIN_SECRET_CHARS:
            raise InvalidArgumentError(
                f"{where}: the secret of {name!r} is shorter than {MIN_SECRET_CHARS} characters; "
                "make one with: python3 -c 'import secrets; print(secrets.token_hex(24))'"
            )
        if name in names:
            raise InvalidArgumentError(f"{where}: {name!r} is named twice")
        names.add(name)
        entries.append((name, role, secret))
    if not entries:
        raise InvalidArgumentError(f"the token file {path} names no principal")
    return entries


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authenticator:
    """Checks the ``Authorization`` header of each request and issues OAuth2 tokens."""

    def __init__(
        self,
        entries: Iterable[tuple[str, Role, str]] = (),
        *,
        allow_anonymous: bool = False,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._entries = [
            _Entry(Principal(name, role), secret.encode("utf-8")) for name, role, secret in entries
        ]
        self.allow_anonymous = allow_anonymous
        self._now: Callable[[], float] = clock or time.time

    @property
    def enabled(self) -> bool:
        """False when every request is anonymous (no token file)."""
        return bool(self._entries)

    # -- requests -----------------------------------------------------------------------------

    def principal_of(self, authorization: str | None) -> Principal:
        """The caller named by an ``Authorization`` header value.

        Raises:
            RestError: 401 for no token (unless anonymous access is on) or an unknown token.
        """
        if not authorization or authorization.strip() == PYICEBERG_NO_TOKEN:
            if self.allow_anonymous:
                return Principal(ANONYMOUS, "read-write")
            raise RestError(
                401,
                NOT_AUTHORIZED,
                "no bearer token: send 'Authorization: Bearer <token>' (a secret from the server's "
                "token file, or a token from POST /v1/oauth/tokens)",
                {"WWW-Authenticate": "Bearer"},
            )
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise RestError(
                401,
                NOT_AUTHORIZED,
                "the Authorization header is not 'Bearer <token>'",
                {"WWW-Authenticate": "Bearer"},
            )
        principal = self.principal_of_token(token.strip())
        if principal is None:
            raise RestError(
                401,
                NOT_AUTHORIZED,
                "the bearer token is not valid (unknown, expired, or its secret was changed)",
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return principal

    def principal_of_token(self, token: str) -> Principal | None:
        """The principal of a static secret or an issued token; None if it is neither."""
        presented = token.encode("utf-8")
        found: Principal | None = None
        for entry in self._entries:  # every entry, always: no early exit
            if hmac.compare_digest(presented, entry.secret):
                found = entry.principal
        if found is not None:
            return found
        return self._verify_issued(token)

    @staticmethod
    def require_write(principal: Principal, what: str) -> None:
        if not principal.may_write:
            raise RestError(
                403,
                FORBIDDEN,
                f"{what}: principal {principal.name!r} is read-only; use a read-write token",
            )

    # -- issued tokens ------------------------------------------------------------------------

    def _mac(self, secret: bytes, payload: str) -> str:
        key = hashlib.sha256(b"lakecore-rest-token\0" + secret).digest()
        return _b64(hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest())

    def issue(self, principal: Principal, secret: bytes) -> tuple[str, int]:
        expires = int(self._now()) + ISSUED_TOKEN_SECONDS
        body = json.dumps(
            {"sub": principal.name, "role": principal.role, "exp": expires}, separators=(",", ":")
        )
        payload = _b64(body.encode("utf-8"))
        return f"{TOKEN_PREFIX}.{payload}.{self._mac(secret, payload)}", ISSUED_TOKEN_SECONDS

    def _verify_issued(self, token: str) -> Principal | None:
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
            return None
        _, payload, mac = parts
        try:
            claims = json.loads(_unb64(payload))
            name, role, expires = claims["sub"], claims["role"], int(claims["exp"])
        except (ValueError, KeyError, TypeError):
            return None
        found: Principal | None = None
        for entry in self._entries:
            expected = self._mac(entry.secret, payload)
            if hmac.compare_digest(mac.encode("ascii", "replace"), expected.encode("ascii")):
                found = entry.principal
        if found is None or found.name != name or found.role != role:
            return None  # a role changed in the file since: the token names the old one
        if expires < self._now():
            return None
        return found

    def token_response(
        self, form: dict[str, str], basic: tuple[str, str] | None
    ) -> dict[str, object]:
        """Answer ``POST /v1/oauth/tokens``.

        Raises:
            OAuthError: 400 for an unsupported grant or a missing field, 401 for bad credentials.
        """
        grant = form.get("grant_type", "")
        if grant == CLIENT_CREDENTIALS:
            client_id, client_secret = basic or (
                form.get("client_id", ""),
                form.get("client_secret", ""),
            )
            if not client_secret:
                raise OAuthError(400, "invalid_request", "client_secret is required")
            presented = client_secret.encode("utf-8")
            match: _Entry | None = None
            for entry in self._entries:
                # pyiceberg's credential=SECRET (no "NAME:") sends no client_id: the secret
                # alone names the principal then.
                if hmac.compare_digest(presented, entry.secret) and (
                    not client_id or entry.principal.name == client_id
                ):
                    match = entry
            if match is None:
                raise OAuthError(401, "invalid_client", "unknown client or wrong secret")
            principal, secret = match.principal, match.secret
        elif grant == TOKEN_EXCHANGE:
            subject = form.get("subject_token", "")
            subject_principal = self.principal_of_token(subject) if subject else None
            if subject_principal is None:
                raise OAuthError(401, "invalid_grant", "the subject token is not valid")
            principal = subject_principal
            secret = next(e.secret for e in self._entries if e.principal == principal)
        else:
            raise OAuthError(
                400,
                "unsupported_grant_type",
                f"grant_type must be {CLIENT_CREDENTIALS} or {TOKEN_EXCHANGE}",
            )
        token, expires_in = self.issue(principal, secret)
        return {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": expires_in,
            "issued_token_type": ACCESS_TOKEN_TYPE,
        }


__all__ = [
    "ANONYMOUS",
    "ISSUED_TOKEN_SECONDS",
    "ROLES",
    "Authenticator",
    "OAuthError",
    "Principal",
    "Role",
    "read_token_file",
]
