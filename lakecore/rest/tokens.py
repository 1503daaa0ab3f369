"""The access tokens ``POST /v1/oauth/tokens`` issues: JWTs (RFC 7519) signed with HS256 by PyJWT.

A token is ``base64url(header).base64url(claims).base64url(HMAC-SHA256)``:

* header ``{"alg": "HS256", "kid": KID, "typ": "JWT"}``;
* claims ``iss`` (``ISSUER``), ``sub`` (the principal's name), ``iat`` (issued at), ``exp``
  (expires at), ``auth_time`` (when the client last proved its credential: the client-credentials
  grant that started the token's line) and ``jti`` (random, so no two tokens are equal); times
  are whole seconds since the epoch.

Rules:

* Keys come from the token file, one per principal, derived from its secret and never the
  secret itself: the signing key is ``HMAC-SHA256(secret, KEY_LABEL)``, and the ``kid`` is the
  first 16 bytes of ``HMAC-SHA256(secret, KID_LABEL)`` in base64url, a fingerprint that names the
  key without revealing it. A server process that reads the same file accepts the tokens of the
  others (no shared state); a secret changed or removed takes its key, and with it every token
  signed with it, away at once.
* Verification chooses the key by ``kid`` from the header alone, and PyJWT checks the signature
  before it decodes the claims: an unknown ``kid``, any algorithm but ``HS256`` (``none``,
  ``RS256`` and the rest are refused before any key is used), or a bad signature ends it
  without a claim read. The header is read only when it is at most ``MAX_HEADER_CHARS`` and the
  token at most ``MAX_TOKEN_CHARS`` long.
* After the signature: ``iss``, ``sub``, ``iat`` and ``exp`` are required; ``iss`` must be
  ``ISSUER`` and ``sub`` the principal the ``kid`` names; ``iat``, ``exp`` and ``auth_time`` must
  be integers, ``iat`` not more than ``CLOCK_SKEW_SECONDS`` in the future and ``exp`` in the
  future. The times are checked against the ``Keyring``'s caller's clock (``now``), so PyJWT's
  own checks, which read the wall clock, are off; its ``require`` still refuses a token without
  them.
* ``verify`` returns ``None`` for every token it does not accept and raises nothing.
* A token carries no role: the role is the one the token file gives the principal now.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import jwt

ISSUER: Final = "lakecore-rest"
ALGORITHM: Final = "HS256"
KEY_LABEL: Final = b"lakecore rest access token signing key v1"
KID_LABEL: Final = b"lakecore rest access token key id v1"
MAX_TOKEN_CHARS: Final = 4096
MAX_HEADER_CHARS: Final = 256
CLOCK_SKEW_SECONDS: Final = 60
REQUIRED_CLAIMS: Final = ("iss", "sub", "iat", "exp")
_DECODE_OPTIONS: Final[Any] = {
    "require": list(REQUIRED_CLAIMS),
    "verify_signature": True,
    "verify_iss": True,
    "verify_sub": True,
    "verify_aud": True,
    "verify_exp": False,  # checked below against the caller's clock
    "verify_iat": False,
    "verify_nbf": False,
    "enforce_minimum_key_length": True,
}


def signing_key(secret: bytes) -> bytes:
    return hmac.new(secret, KEY_LABEL, hashlib.sha256).digest()


def key_id(secret: bytes) -> str:
    digest = hmac.new(secret, KID_LABEL, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Claims:
    """What a verified token says."""

    subject: str
    issued_at: int
    expires_at: int
    auth_time: int


@dataclass(frozen=True)
class _Key:
    name: str
    key: bytes


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Keyring:
    """The signing keys of a set of principals: issues and verifies their tokens."""

    def __init__(self, secrets_by_name: Iterable[tuple[str, str]]) -> None:
        self._by_kid: dict[str, _Key] = {}
        self._kid_of: dict[str, str] = {}
        for name, secret in secrets_by_name:
            raw = secret.encode("utf-8")
            kid = key_id(raw)
            self._by_kid[kid] = _Key(name, signing_key(raw))
            self._kid_of[name] = kid

    def issue(self, name: str, *, now: int, expires_at: int, auth_time: int) -> str:
        """A token for principal ``name`` (which must be in the ring)."""
        kid = self._kid_of[name]
        claims = {
            "iss": ISSUER,
            "sub": name,
            "iat": now,
            "exp": expires_at,
            "auth_time": auth_time,
            "jti": secrets.token_urlsafe(12),
        }
        return jwt.encode(
            claims, self._by_kid[kid].key, algorithm=ALGORITHM, headers={"kid": kid, "typ": "JWT"}
        )

    def verify(self, token: str, now: float, *, allow_expired: bool = False) -> Claims | None:
        """The claims of a token this ring signed, or None (see the module docstring).

        ``allow_expired`` skips the ``exp`` check only: a token exchange authenticated by the
        client's own credential may name the client's expired token."""
        try:
            return self._verify(token, now, allow_expired)
        except Exception:  # a malformed token of any kind: not one of ours
            return None

    def _verify(self, token: str, now: float, allow_expired: bool) -> Claims | None:
        if len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
            return None
        if len(token.partition(".")[0]) > MAX_HEADER_CHARS:
            return None
        header = jwt.get_unverified_header(token)
        kid = header.get("kid")
        if header.get("alg") != ALGORITHM or not isinstance(kid, str):
            return None
        key = self._by_kid.get(kid)
        if key is None:
            return None
        claims = jwt.decode(
            token,
            key.key,
            algorithms=[ALGORITHM],
            issuer=ISSUER,
            subject=key.name,
            options=_DECODE_OPTIONS,
        )
        issued_at, expires_at = claims["iat"], claims["exp"]
        auth_time = claims.get("auth_time", issued_at)
        if not (_is_int(issued_at) and _is_int(expires_at) and _is_int(auth_time)):
            return None
        if issued_at > now + CLOCK_SKEW_SECONDS:
            return None
        if expires_at <= now and not allow_expired:
            return None
        return Claims(key.name, issued_at, expires_at, auth_time)


__all__ = [
    "ALGORITHM",
    "CLOCK_SKEW_SECONDS",
    "ISSUER",
    "MAX_HEADER_CHARS",
    "MAX_TOKEN_CHARS",
    "Claims",
    "Keyring",
    "key_id",
    "signing_key",
]
