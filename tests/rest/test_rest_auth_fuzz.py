"""Property: whatever a client puts in ``Authorization`` (bytes, lengths, schemes, dots, base64
junk, JSON of any shape in JWT or ``lk1`` dress, a real token mangled), the authenticator answers
a valid principal or raises the 401 ``RestError``, never anything else; and the token endpoint
answers a grant or an ``OAuthError``. In-process: no server, no file reads per example."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lakecore.rest.auth import Authenticator, OAuthError, Principal, TokenGrant
from lakecore.rest.errors import RestError
from lakecore.rest.tokens import key_id, signing_key
from tests.rest.auth_helpers import READER_SECRET, WRITER_SECRET, b64

NOW = time.time()
ENTRIES: list[Any] = [
    ("etl", "read-write", WRITER_SECRET),
    ("dashboards", "read-only", READER_SECRET),
]
PRINCIPALS = {Principal("etl", "read-write"), Principal("dashboards", "read-only")}
TOKEN_SERVER = Authenticator(ENTRIES, clock=lambda: NOW)
ANONYMOUS = Authenticator(allow_anonymous=True, clock=lambda: NOW)
REAL_TOKEN = str(
    TOKEN_SERVER.token_response(
        {"grant_type": "client_credentials", "client_id": "etl", "client_secret": WRITER_SECRET},
        None,
    ).body["access_token"]
)
KID = key_id(WRITER_SECRET.encode())

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["etl", "lakecore-rest", "HS256", "none", KID]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
numbers = st.one_of(
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),  # json.dumps writes Infinity and NaN
    st.sampled_from([NOW, NOW + 3600, 2**64, float("inf"), float("-inf"), 1e308, True, "1"]),
)
payloads = st.one_of(
    st.fixed_dictionaries({"sub": json_values, "role": json_values, "exp": numbers}),
    st.fixed_dictionaries(
        {"iss": json_values, "sub": json_values, "iat": numbers, "exp": numbers},
        optional={"auth_time": numbers, "aud": json_values, "nbf": numbers},
    ),
    json_values,
).map(lambda v: json.dumps(v).encode())
jose_headers = st.fixed_dictionaries(
    {"alg": st.sampled_from(["HS256", "none", "RS256", "HS512", "hs256", ""]) | json_values},
    optional={"kid": st.just(KID) | json_values, "typ": json_values, "crit": json_values},
).map(lambda v: json.dumps(v).encode())
raw_json = st.sampled_from(
    [b"[" * 1000, b"{" * 50, b"1e999", b"-1e999", b"9" * 5000, b'{"exp":1e999}', b"", b"null"]
)
encoded = st.one_of(payloads, raw_json).map(b64)
junk = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.", max_size=80
)
lk1_tokens = st.builds(lambda p, m: f"lk1.{p}.{m}", encoded, junk)
jwt_shaped = st.builds(lambda h, p, m: f"{b64(h)}.{p}.{m}", jose_headers | raw_json, encoded, junk)
tokens = st.one_of(
    lk1_tokens,
    lk1_tokens,
    jwt_shaped,
    jwt_shaped,
    st.lists(encoded | junk | st.binary(max_size=120).map(b64), min_size=1, max_size=5).map(
        ".".join
    ),
    st.text(max_size=200),
    st.integers(0, 10_000).map(lambda n: "." * n),
    st.integers(0, 10_000).map(lambda n: "A" * n),
)


def _mangle(text: str, position: int, replacement: str) -> str:
    position %= len(text) + 1
    return text[:position] + replacement + text[position + 1 :]


mangled = st.builds(
    _mangle,
    st.sampled_from([REAL_TOKEN, WRITER_SECRET, READER_SECRET]),
    st.integers(0, 400),
    st.text(max_size=3),
)
schemes = st.sampled_from(["Bearer", "bearer", "BEARER", "Basic", "Token", "", "Bearer\t"])
bearer_headers = st.builds(lambda t: f"Bearer {t}", st.one_of(tokens, tokens, tokens, mangled))
headers = st.one_of(
    bearer_headers,  # thrice: most of the examples reach the token checks
    bearer_headers,
    bearer_headers,
    st.none(),
    st.builds(lambda s, t: f"{s} {t}", schemes, tokens | mangled),
    st.binary(max_size=600).map(lambda b: b.decode("latin-1")),  # what an ASGI server passes on
    st.text(max_size=300),
)
# The two tokens of issue 44, finding 4, run first whatever hypothesis draws.
OVERFLOW = b'{"sub":"x","role":"r","exp":1e999}'
FINDING_4 = [f"Bearer lk1.{b64(OVERFLOW)}.x", f"Bearer lk1.{b64(b'[' * 1000)}.x"]


def _check(authenticator: Authenticator, value: str | None, anonymous: bool) -> None:
    try:
        principal = authenticator.principal_of(value)
    except RestError as exc:
        assert exc.code == 401 and exc.type == "NotAuthorizedException"
        assert "\n" not in exc.message and WRITER_SECRET not in exc.message
        return
    if anonymous:
        assert principal == Principal("anonymous", "read-write")
        assert value is None or value.strip() in ("", "Bearer None")
    else:
        assert principal in PRINCIPALS


@pytest.mark.parametrize("anonymous", [False, True], ids=["tokens", "anonymous"])
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(value=headers)
@example(value=FINDING_4[0])
@example(value=FINDING_4[1])
def test_any_authorization_header_is_a_principal_or_a_401(
    value: str | None, anonymous: bool
) -> None:
    _check(ANONYMOUS if anonymous else TOKEN_SERVER, value, anonymous)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    form=st.dictionaries(
        st.sampled_from(
            [
                "grant_type",
                "client_id",
                "client_secret",
                "subject_token",
                "subject_token_type",
                "scope",
            ]
        ),
        st.one_of(
            st.sampled_from(
                [
                    "client_credentials",
                    "urn:ietf:params:oauth:grant-type:token-exchange",
                    "etl",
                    WRITER_SECRET,
                    REAL_TOKEN,
                ]
            ),
            tokens,
            mangled,
            st.text(max_size=50),
        ),
    ),
    authorization=headers,
)
def test_any_token_request_is_a_grant_or_an_oauth_error(
    form: dict[str, str], authorization: str | None
) -> None:
    try:
        grant = TOKEN_SERVER.token_response(form, authorization)
    except OAuthError as exc:
        assert exc.status in (400, 401) and "\n" not in exc.description
        return
    assert isinstance(grant, TokenGrant) and grant.principal in ("etl", "dashboards")
    assert TOKEN_SERVER.principal_of(f"Bearer {grant.body['access_token']}").name == grant.principal


def test_the_strategies_reach_the_accepting_paths() -> None:
    """The properties above would hold vacuously if nothing ever got in: the real values do."""
    assert TOKEN_SERVER.principal_of(f"Bearer {REAL_TOKEN}") == Principal("etl", "read-write")
    assert TOKEN_SERVER.principal_of(f"bearer  {READER_SECRET} ").name == "dashboards"
    assert ANONYMOUS.principal_of("Bearer None").name == "anonymous"
    forged = f"{b64(json.dumps({'alg': 'HS256', 'kid': KID}).encode())}.e30."
    with pytest.raises(RestError):
        TOKEN_SERVER.principal_of(f"Bearer {forged}")
    assert signing_key(WRITER_SECRET.encode()) != WRITER_SECRET.encode()
