"""Who may call the REST catalog, and how a client gets a token: ``Authenticator``.

Principals come from the token file (``lakecore.rest.tokenfile``: ``NAME ROLE SECRET`` lines,
read again when it changes) or, for a server on a loopback address only, from nobody at all
(anonymous access). Rules:

* A role is ``read-only`` (GET and HEAD of the catalog API) or ``read-write`` (everything).
  A read-only principal's write is 403 ``ForbiddenException``.
* Authentication comes first on every catalog route and ``GET /v1/config``: the app matches
  the raw path against the spec's (public) route table, so that the log and the metrics name
  the operation, and then asks ``principal_of`` before it reads the warehouse prefix, a query,
  a body or anything of the catalog. ``/healthz`` and ``/metrics`` are the operator's and need
  no token. ``principal_of`` returns a principal or raises a 401 ``RestError``
  (``NotAuthorizedException``, one line, never the token), and nothing else: a missing,
  malformed, oversized (over ``MAX_AUTHORIZATION_CHARS``), forged, expired or revoked token is
  401 whatever it holds, on a commit route too, and on an anonymous server too (only *no*
  token is anonymous there). pyiceberg without a token sends ``Authorization: Bearer None``:
  that counts as no token.
* A bearer token is accepted when it is
  1. a secret of the token file itself (pyiceberg's ``token=``): compared as SHA-256 digests
     with ``hmac.compare_digest`` against every entry, so the time taken depends neither on how
     much of a guess was right nor on which entry matched;
  2. or a token this server issued (``lakecore.rest.tokens``: an HS256 JWT whose key is
     derived from the principal's secret and chosen by its ``kid`` header; the signature is
     checked before any claim is read);
  3. or a token one of the ``verifiers`` accepts (``BearerVerifier``): the place for an
     identity provider's tokens (OIDC) later. None ships; such a verifier must check the
     signature against the provider's keys with a fixed algorithm list before it trusts a
     claim, and map the identity to a ``Principal``; whatever it raises is a 401.
  The role is the one the token file gives the principal at the time of the request.
* Tokens are issued at ``POST /v1/oauth/tokens`` (``token_response``; RFC 6749 errors
  ``{"error", "error_description"}``, never a secret):

  - the client-credentials grant: ``client_id=<name>`` (optional) and ``client_secret=<secret>``
    in the form or an ``Authorization: Basic`` header (pyiceberg's and DuckDB's
    ``credential=name:secret``, Spark's and Trino's ``credential``). The token lives
    ``token_seconds`` (``ISSUED_TOKEN_SECONDS``, one hour; ``lakecore serve
    --token-lifetime``) from this grant: that is its absolute lifetime.
  - a token exchange (``grant_type=urn:ietf:params:oauth:grant-type:token-exchange``) with
    ``subject_token`` and no client credentials returns a new token that expires when the
    subject does, never later; a subject with less than a tenth of ``token_seconds`` left is
    400 ``invalid_grant`` (the client then falls back to its credential, below). The same
    exchange with the client's credentials (Basic header or form) is a new client-credentials
    grant, and the new token lives ``token_seconds`` again: the subject may be expired or
    unverifiable (a token from before an upgrade), but not another principal's token.

Why the exchange works this way (apache/iceberg ``OAuth2Util.AuthSession``, the session of
Spark's and Trino's REST catalog with ``credential=``; ``AuthManagers`` picks this
``OAuth2Manager`` for the ``oauth2`` type): the Java client reads the expiry from the JWT's
``exp`` (``OAuth2Util.expiresAtMillis``) and refreshes by token exchange ``min(expires_in / 10,
5 min)`` before it, then again ``expires_in / 10`` before the expiry the answer's
``expires_in`` gives, so an answer whose ``expires_in`` shrinks makes it ask again sooner and
sooner (300 s, 30 s, 3 s, then every 10 ms in the last second). A failed exchange (an OAuth2
error is a ``BadRequestException``, logged as a warning with its stack trace) is retried five
times with back-off (about 3 s in all, ``Tasks.retry``), then its ``onFailure`` calls
``refreshExpiredToken``: the same exchange, with the expired-or-not token as subject and the
credential as ``Authorization: Basic``; that answer is adopted and the next refresh scheduled
from its ``expires_in``. Without a credential (a client given ``token=``) the client logs
"Failed to refresh token" and keeps its token until it expires. So refusing the exchange in
the last tenth of the lifetime makes a Java client with ``credential=`` fetch a fresh token
about 5 minutes before the old one expires, never after, and keeps it working past the hour
with one refused exchange and its retries an hour; a client with a token alone keeps it no
longer than its absolute lifetime. pyiceberg with ``credential=`` never exchanges: on a 401 it
fetches a new token with the credential and retries (``RestCatalog._refresh_token``).

Anonymous access (``allow_anonymous``) excludes a token file: a request without a token is then
the ``anonymous`` principal with read-write rights (``lakecore.rest.serve`` allows it on a
loopback ``--host`` only). The alternative, anonymous read-only beside the token file, was not
chosen: a read-only principal could drop its token and read as anyone, every client that
forgets its token would read instead of being told to log in, and "who read this" would have
no answer in the access log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol
from urllib.parse import unquote_plus

from lakecore.errors import InvalidArgumentError
from lakecore.rest.defaults import ISSUED_TOKEN_SECONDS, MAX_TOKEN_SECONDS, MIN_TOKEN_SECONDS
from lakecore.rest.errors import FORBIDDEN, NOT_AUTHORIZED, RestError
from lakecore.rest.tokenfile import (
    ROLES,
    Entries,
    Principal,
    Role,
    TokenFile,
    TokenFileEntry,
    check_entries,
)
from lakecore.rest.tokens import MAX_TOKEN_CHARS, Keyring

# An exchange is refused when its subject has less than 1/EXCHANGE_FLOOR_DIVISOR of the
# lifetime left (see the module docstring).
EXCHANGE_FLOOR_DIVISOR: Final = 10
MAX_AUTHORIZATION_CHARS: Final = MAX_TOKEN_CHARS + 64
CLIENT_CREDENTIALS: Final = "client_credentials"
TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
ANONYMOUS: Final = "anonymous"
# pyiceberg's RestCatalog without a token or credential still sends this header
# (LegacyOAuth2AuthManager.auth_header formats its token, None): it means "no token".
PYICEBERG_NO_TOKEN: Final = "Bearer None"
_INVALID_TOKEN = (
    "the bearer token is not valid (malformed, unknown, expired, or its secret was changed "
    "or removed): send a secret from the server's token file, or a token from "
    "POST /v1/oauth/tokens"
)


class BearerVerifier(Protocol):
    """A further kind of bearer token (an identity provider's, say): see the module docstring.

    ``principal_of`` returns the principal a token names, or None if the token is not one it
    accepts; ``now`` is the authenticator's clock (seconds since the epoch)."""

    def principal_of(self, token: str, now: float) -> Principal | None: ...


class OAuthError(Exception):
    """An OAuth2 error response (``{"error", "error_description"}``, RFC 6749 5.2)."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


@dataclass(frozen=True)
class TokenGrant:
    """An answer of ``POST /v1/oauth/tokens``: its JSON body and whom it was issued to."""

    body: dict[str, object]
    principal: str


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class _View:
    """One set of principals, with what checking them needs (rebuilt when the file changes)."""

    def __init__(self, entries: Entries) -> None:
        self.entries = entries
        self.keyring = Keyring((e.name, e.secret) for e in entries)
        self.by_name = {e.name: e for e in entries}
        self.digests = tuple((_digest(e.secret), e) for e in entries)

    def entry_of_secret(self, secret: str, name: str | None = None) -> TokenFileEntry | None:
        """The entry whose secret this is (and named ``name``, if given); every entry compared."""
        presented = _digest(secret)
        found: TokenFileEntry | None = None
        for digest, entry in self.digests:  # every entry, always: no early exit
            if hmac.compare_digest(presented, digest) and (name is None or entry.name == name):
                found = entry
        return found


def unauthorized(message: str, error: str | None = None) -> RestError:
    challenge = f'Bearer error="{error}"' if error else "Bearer"
    return RestError(401, NOT_AUTHORIZED, message, {"WWW-Authenticate": challenge})


class Authenticator:
    """Checks the ``Authorization`` header of each request and issues OAuth2 tokens.

    Principals are ``entries`` (``(name, role, secret)``, fixed) or a ``token_file`` (read
    again when it changes), not both; ``clock`` is the wall clock of token times (tests pass
    their own)."""

    def __init__(
        self,
        entries: Iterable[tuple[str, Role, str]] = (),
        *,
        token_file: TokenFile | None = None,
        allow_anonymous: bool = False,
        clock: Callable[[], float] | None = None,
        token_seconds: int = ISSUED_TOKEN_SECONDS,
        verifiers: Iterable[BearerVerifier] = (),
    ) -> None:
        fixed = check_entries(
            TokenFileEntry(name, role, secret, number)
            for number, (name, role, secret) in enumerate(entries, start=1)
        )
        if fixed and token_file is not None:
            raise InvalidArgumentError("give the principals as entries or a token file, not both")
        if allow_anonymous and (fixed or token_file is not None):
            raise InvalidArgumentError(
                "anonymous access and a token file exclude each other: a principal could drop "
                "its token and act as anonymous"
            )
        if not MIN_TOKEN_SECONDS <= token_seconds <= MAX_TOKEN_SECONDS:
            raise InvalidArgumentError(
                f"the token lifetime must be {MIN_TOKEN_SECONDS} to {MAX_TOKEN_SECONDS} "
                f"seconds, not {token_seconds}"
            )
        self.token_file = token_file
        self.allow_anonymous = allow_anonymous
        self.token_seconds = token_seconds
        self._fixed = fixed
        self._verifiers = tuple(verifiers)
        self._now: Callable[[], float] = clock or time.time
        self._view = _View(token_file.entries() if token_file is not None else fixed)

    def _current_view(self) -> _View:
        entries = self.token_file.entries() if self.token_file is not None else self._fixed
        view = self._view
        if view.entries is not entries:
            view = self._view = _View(entries)
        return view

    # -- requests -----------------------------------------------------------------------------

    def principal_of(self, authorization: str | None) -> Principal:
        """The caller named by an ``Authorization`` header value.

        Raises:
            RestError: 401, and only that (see the module docstring).
        """
        try:
            return self._principal_of(authorization)
        except RestError as exc:
            if exc.code == 401:
                raise
        except Exception:
            pass
        raise unauthorized(_INVALID_TOKEN, "invalid_token")

    def _principal_of(self, authorization: str | None) -> Principal:
        value = (authorization or "").strip()
        if not value or value == PYICEBERG_NO_TOKEN:
            if self.allow_anonymous:
                return Principal(ANONYMOUS, "read-write")
            raise unauthorized(
                "no bearer token: send 'Authorization: Bearer <token>' (a secret from the "
                "server's token file, or a token from POST /v1/oauth/tokens)"
            )
        if len(value) > MAX_AUTHORIZATION_CHARS:
            raise unauthorized(
                f"the Authorization header is longer than {MAX_AUTHORIZATION_CHARS} characters",
                "invalid_token",
            )
        scheme, _, token = value.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized("the Authorization header is not 'Bearer <token>'")
        principal = self.principal_of_token(token)
        if principal is None:
            raise unauthorized(_INVALID_TOKEN, "invalid_token")
        return principal

    def principal_of_token(self, token: str) -> Principal | None:
        """The principal of a secret, an issued token, or a verifier's token; None if neither.

        Never raises."""
        try:
            return self._principal_of_token(token)
        except Exception:
            return None

    def _principal_of_token(self, token: str) -> Principal | None:
        view = self._current_view()
        now = self._now()
        entry = view.entry_of_secret(token)
        if entry is not None:
            return entry.principal
        claims = view.keyring.verify(token, now)
        if claims is not None:
            found = view.by_name.get(claims.subject)
            return found.principal if found is not None else None
        for verifier in self._verifiers:
            try:
                principal = verifier.principal_of(token, now)
            except Exception:
                principal = None
            if principal is not None and principal.role in ROLES:
                return principal
        return None

    @staticmethod
    def require_write(principal: Principal, what: str) -> None:
        if not principal.may_write:
            raise RestError(
                403,
                FORBIDDEN,
                f"{what}: principal {principal.name!r} is read-only; use a read-write token",
            )

    # -- POST /v1/oauth/tokens ----------------------------------------------------------------

    def token_response(self, form: Mapping[str, str], authorization: str | None) -> TokenGrant:
        """Answer ``POST /v1/oauth/tokens`` (``form``: the body's fields; ``authorization``:
        the request's header, for client credentials sent as HTTP Basic).

        Raises:
            OAuthError: 400 for an unsupported grant, a missing field or an unusable subject
                token, 401 for bad client credentials; nothing else.
        """
        try:
            return self._token_response(form, authorization)
        except OAuthError:
            raise
        except Exception:
            raise OAuthError(
                400, "invalid_request", "the token request could not be read"
            ) from None

    def _token_response(self, form: Mapping[str, str], authorization: str | None) -> TokenGrant:
        grant = form.get("grant_type", "")
        view = self._current_view()
        now = int(self._now())
        if grant == CLIENT_CREDENTIALS:
            client = self._client(view, form, authorization)
            if client is None:
                raise OAuthError(400, "invalid_request", "client_secret is required")
            return self._grant(view, client.name, now, now + self.token_seconds, now)
        if grant == TOKEN_EXCHANGE:
            subject = form.get("subject_token", "")
            if not subject:
                raise OAuthError(400, "invalid_request", "subject_token is required")
            client = self._client(view, form, authorization)
            if client is not None:
                return self._exchange_as_client(view, client, subject, now)
            return self._exchange(view, subject, now)
        raise OAuthError(
            400,
            "unsupported_grant_type",
            f"grant_type must be {CLIENT_CREDENTIALS} or {TOKEN_EXCHANGE}",
        )

    def _grant(
        self, view: _View, name: str, now: int, expires_at: int, auth_time: int
    ) -> TokenGrant:
        token = view.keyring.issue(name, now=now, expires_at=expires_at, auth_time=auth_time)
        body: dict[str, object] = {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": expires_at - now,
            "issued_token_type": ACCESS_TOKEN_TYPE,
        }
        return TokenGrant(body, name)

    def _exchange_as_client(
        self, view: _View, client: TokenFileEntry, subject: str, now: int
    ) -> TokenGrant:
        """A token exchange the client authenticated: a new client-credentials grant. The
        credential alone entitles the client to it, so a subject that cannot be verified (an
        expired token, one from before an upgrade) is no obstacle; a subject that is verifiably
        another principal's is refused, lest the answer pass for a token of the subject."""
        claims = view.keyring.verify(subject, now, allow_expired=True)
        other = view.entry_of_secret(subject)
        subject_name = claims.subject if claims is not None else other.name if other else None
        if subject_name is not None and subject_name != client.name:
            raise OAuthError(
                400, "invalid_grant", f"the subject token is not a token of {client.name!r}"
            )
        return self._grant(view, client.name, now, now + self.token_seconds, now)

    def _exchange(self, view: _View, subject: str, now: int) -> TokenGrant:
        """A token exchange on the subject token alone: never a later expiry than its own."""
        entry = view.entry_of_secret(subject)
        if entry is not None:  # a secret is a credential: as the client-credentials grant
            return self._grant(view, entry.name, now, now + self.token_seconds, now)
        claims = view.keyring.verify(subject, now)
        if claims is None or claims.subject not in view.by_name:
            raise OAuthError(
                400,
                "invalid_grant",
                "the subject token is not valid (malformed, unknown, expired, or its secret "
                "was changed or removed): get a new token with the client credentials",
            )
        left = claims.expires_at - now
        if left * EXCHANGE_FLOOR_DIVISOR < self.token_seconds:
            raise OAuthError(
                400,
                "invalid_grant",
                f"the subject token expires in {left} s and an exchange cannot extend it: get "
                "a new token with the client credentials",
            )
        return self._grant(view, claims.subject, now, claims.expires_at, claims.auth_time)

    def _client(
        self, view: _View, form: Mapping[str, str], authorization: str | None
    ) -> TokenFileEntry | None:
        """The client the request authenticates as; None if it sends no client secret.

        Raises:
            OAuthError: 401 ``invalid_client`` for credentials that match no principal.
        """
        candidates = _basic_credentials(authorization)
        if not candidates and form.get("client_secret"):
            candidates = [(form.get("client_id", ""), form["client_secret"])]
        if not candidates:
            return None
        match: TokenFileEntry | None = None
        for client_id, secret in candidates:
            # pyiceberg's credential=SECRET (no "NAME:") sends no client_id: the secret alone
            # names the principal then.
            found = view.entry_of_secret(secret, client_id or None)
            match = match or found
        if match is None:
            raise OAuthError(401, "invalid_client", "unknown client or wrong secret")
        return match


def _basic_credentials(authorization: str | None) -> list[tuple[str, str]]:
    """The ``(client_id, client_secret)`` readings of an ``Authorization: Basic`` header.

    RFC 6749 2.3.1 form-encodes both before Base64; Iceberg's Java client does not
    (``OAuth2Util.basicAuthHeaders``), so the raw reading is tried as well."""
    if not authorization or not authorization.strip().lower().startswith("basic "):
        return []
    try:
        decoded = base64.b64decode(authorization.strip()[6:].strip(), validate=True)
        text = decoded.decode("utf-8")
    except ValueError:
        return []
    client_id, sep, secret = text.partition(":")
    if not sep:
        return []
    readings = [(client_id, secret)]
    unquoted = (unquote_plus(client_id), unquote_plus(secret))
    if unquoted != readings[0]:
        readings.append(unquoted)
    return readings


__all__ = [
    "ACCESS_TOKEN_TYPE",
    "ANONYMOUS",
    "CLIENT_CREDENTIALS",
    "ISSUED_TOKEN_SECONDS",
    "MAX_AUTHORIZATION_CHARS",
    "MAX_TOKEN_SECONDS",
    "MIN_TOKEN_SECONDS",
    "ROLES",
    "TOKEN_EXCHANGE",
    "Authenticator",
    "BearerVerifier",
    "OAuthError",
    "Principal",
    "Role",
    "TokenGrant",
    "unauthorized",
]
