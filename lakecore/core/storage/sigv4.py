"""AWS Signature Version 4 for S3 requests, signed in the ``Authorization`` header.

A signature is an HMAC-SHA256, under a key derived from the secret, the date, the region and
the service, of a "string to sign" that hashes the *canonical request*. Every character of
the canonical request counts, so each part has one rule (AWS's "Create a canonical request
for Signature Version 4"; S3's own variant):

- **Canonical URI: the path exactly as sent.** S3 signs the URI-encoded path once (other
  services encode it twice) and never normalises it (``a/./b`` and ``a//b`` are keys of their
  own). ``uri_path`` is the one encoder of a key into a path: every byte of its UTF-8 but the
  unreserved characters ``A-Z a-z 0-9 - _ . ~`` and ``/`` becomes ``%XX`` (upper-case hex):
  a space is ``%20``, never ``+``; ``+``, ``=`` and ``%`` are encoded; ``/`` is kept.
- **Canonical query: each name and value URI-encoded** (``/`` too), sorted by encoded name
  and then encoded value, joined by ``&``, a name without a value as ``name=``.
  ``canonical_query`` makes it, and the request sends that same string.
- **Canonical headers: every header the request sends, ``host`` included**, names
  lower-cased, values trimmed with inner runs of spaces made one, sorted by name, each
  ``name:value\\n``; ``SignedHeaders`` lists the same names joined by ``;``.
- **Payload hash: ``x-amz-content-sha256``**, the hex SHA-256 of the body (``UNSIGNED_PAYLOAD``
  where the caller chooses not to sign it), sent as a header and signed.
- **Time and token.** ``x-amz-date`` (``YYYYMMDDTHHMMSSZ``, UTC) and, for temporary
  credentials, ``x-amz-security-token`` are headers, and signed. S3 refuses a request whose
  time is more than 15 minutes off its own clock.
- **Signing keys are cached** per (secret, date, region, service): four HMACs a day instead of
  four a request. The cache is small, shared by the threads (a lost race only computes a key
  twice) and forgets everything when it fills (a rotated secret, a new day).

Checked against botocore's signer on a matrix of keys, queries and headers, and against the
examples of AWS's S3 documentation (``tests/core/test_s3_requests.py``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import quote

ALGORITHM: Final = "AWS4-HMAC-SHA256"
# The hash of an empty body: every GET and HEAD.
EMPTY_SHA256: Final = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD: Final = "UNSIGNED-PAYLOAD"
# Signing keys kept at once: a few regions and dates; cleared, not evicted, when full.
_SIGNING_KEYS_MAX: Final = 32
_SIGNING_KEYS: dict[tuple[str, str, str, str], bytes] = {}


def uri_path(text: str) -> str:
    """``text`` (a key, or ``bucket/key``) as a URI path: UTF-8, every byte but the unreserved
    characters and ``/`` percent-encoded."""
    return quote(text, safe="/~")


def uri_encode(text: str) -> str:
    """``text`` URI-encoded for a query string: everything but the unreserved characters."""
    return quote(text, safe="~")


def canonical_query(params: Iterable[tuple[str, str]]) -> str:
    """The canonical query string of ``params`` (also the query the request sends)."""
    pairs = sorted((uri_encode(name), uri_encode(value)) for name, value in params)
    return "&".join(f"{name}={value}" for name, value in pairs)


def payload_hash(body: bytes | bytearray | memoryview) -> str:
    """The hex SHA-256 of a body, for ``x-amz-content-sha256``."""
    return hashlib.sha256(body).hexdigest() if len(body) else EMPTY_SHA256


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The key that signs a day's requests to one region and service (cached)."""
    cache_key = (secret, date, region, service)
    key = _SIGNING_KEYS.get(cache_key)
    if key is None:
        key = _hmac(("AWS4" + secret).encode(), date)
        for part in (region, service, "aws4_request"):
            key = _hmac(key, part)
        if len(_SIGNING_KEYS) >= _SIGNING_KEYS_MAX:
            _SIGNING_KEYS.clear()
        _SIGNING_KEYS[cache_key] = key
    return key


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.digest(key, text.encode(), "sha256")


def authorization(
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    access_key: str,
    secret_key: str,
    region: str,
    service: str = "s3",
) -> str:
    """The ``Authorization`` header of a request.

    ``path`` is the URI path as sent (``uri_path``), ``query`` the canonical query
    (``canonical_query``; '' for none). ``headers`` are every header the request sends, with
    lower-case names: ``host``, ``x-amz-date`` and ``x-amz-content-sha256`` included (and
    ``x-amz-security-token`` for temporary credentials)."""
    amz_date = headers["x-amz-date"]
    date = amz_date[:8]
    names = sorted(headers)
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in names)
    signed_headers = ";".join(names)
    canonical_request = "\n".join(
        (
            method,
            path,
            query,
            canonical_headers,
            signed_headers,
            headers["x-amz-content-sha256"],
        )
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        (ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest())
    )
    signature = hmac.new(
        signing_key(secret_key, date, region, service), string_to_sign.encode(), hashlib.sha256
    ).hexdigest()
    return (
        f"{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={signed_headers}, "
        f"Signature={signature}"
    )
