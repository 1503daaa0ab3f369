"""Who may call the REST server: tokens from a file, the OAuth2 exchange, anonymous on loopback.

Authentication comes before anything a request carries is parsed, and every failure of it is a
401 with one line (issue 44, finding 4)."""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import jwt
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

from lakecore.errors import ExitCode, InvalidArgumentError
from lakecore.rest.app import app
from lakecore.rest.auth import ISSUED_TOKEN_SECONDS, Authenticator, Principal
from lakecore.rest.errors import RestError
from lakecore.rest.serve import ServeOptions, authenticator_for
from lakecore.rest.tokenfile import read_token_file
from lakecore.rest.tokens import key_id, signing_key
from tests.rest.auth_helpers import (
    READER_SECRET,
    WRITER_SECRET,
    b64,
    bearer,
    client_credentials,
    exchange,
    hostile_header_values,
    issued_token,
    may_write,
    standard_lines,
    status_of,
    write_token_file,
)
from tests.rest.conftest import Served


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return write_token_file(tmp_path / "tokens", standard_lines())


@pytest.fixture
def secured(rest: Served, token_file: Path, serve_app: Any) -> Served:
    authenticator = authenticator_for(ServeOptions(str(rest.root), token_file=str(token_file)))
    rest.url = serve_app(app(rest.catalog, authenticator=authenticator))
    rest.catalog.create_namespace("db")
    return rest


def test_no_token_and_a_wrong_token_are_401(secured: Served) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer not-a-known-token-at-all"},
        {"Authorization": "Basic x"},
    ):
        response = requests.get(f"{secured.url}/v1/namespaces", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "NotAuthorizedException"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert requests.get(f"{secured.url}/v1/config").status_code == 401
    with pytest.raises(UnauthorizedError, match="NotAuthorizedException"):
        RestCatalog("rest", uri=secured.url)
    with pytest.raises(UnauthorizedError):
        RestCatalog("rest", uri=secured.url, token="wrong-token-of-some-length")
    # Health and metrics stay open for probes and scrapers.
    assert requests.get(f"{secured.url}/healthz").status_code == 200
    assert requests.get(f"{secured.url}/metrics").status_code == 200


def test_a_read_only_token_reads_and_is_refused_writes(secured: Served) -> None:
    reader = RestCatalog("rest", uri=secured.url, token=READER_SECRET)
    writer = RestCatalog("rest", uri=secured.url, token=WRITER_SECRET)
    writer.create_table("db.t", schema=_schema())
    assert reader.list_tables("db") == [("db", "t")]
    assert reader.load_table("db.t").metadata.table_uuid
    with pytest.raises(ForbiddenError, match="'dashboards' is read-only"):
        reader.create_namespace("other")
    with pytest.raises(ForbiddenError, match="read-only"):
        reader.drop_table("db.t")
    with (
        pytest.raises(ForbiddenError, match="read-only"),
        reader.load_table("db.t").transaction() as tx,
    ):
        tx.set_properties(k="v")
    assert writer.table_exists("db.t") and not writer.namespace_exists("other")


def test_oauth2_client_credentials_and_token_exchange(secured: Served) -> None:
    via_credential = oauth_client(secured, f"etl:{WRITER_SECRET}")
    via_credential.create_namespace("made_by_oauth")
    assert secured.catalog.namespace_exists("made_by_oauth")
    secret_only = oauth_client(secured, READER_SECRET)
    with pytest.raises(ForbiddenError):
        secret_only.create_namespace("nope")
    with pytest.raises(OAuthError, match="invalid_client"):
        oauth_client(secured, f"etl:{READER_SECRET}")

    issued = client_credentials(secured.url, "etl", WRITER_SECRET)
    assert issued.status_code == 200 and issued.headers["Cache-Control"] == "no-store"
    body = issued.json()
    assert body["token_type"] == "bearer" and body["expires_in"] == ISSUED_TOKEN_SECONDS
    assert status_of(secured.url, body["access_token"]) == 200
    basic = requests.post(
        f"{secured.url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials"},
        auth=("dashboards", READER_SECRET),
    )
    assert basic.status_code == 200
    renewed = exchange(secured.url, body["access_token"], headers=bearer(body["access_token"]))
    assert renewed.status_code == 200, renewed.text
    assert status_of(secured.url, renewed.json()["access_token"]) == 200
    unsupported = requests.post(f"{secured.url}/v1/oauth/tokens", data={"grant_type": "password"})
    assert unsupported.json()["error"] == "unsupported_grant_type"
    for broken in (
        body["access_token"][:-2] + ("AA" if not body["access_token"].endswith("AA") else "BB"),
        body["access_token"] + "x",
        body["access_token"].replace(".", "..", 1),
    ):
        assert status_of(secured.url, broken) == 401
        assert exchange(secured.url, broken).json()["error"] == "invalid_grant"


def test_issued_tokens_are_jwts_keyed_by_a_fingerprint_of_the_secret(secured: Served) -> None:
    token = issued_token(secured.url, "etl", WRITER_SECRET)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "HS256" and header["typ"] == "JWT"
    assert header["kid"] == key_id(WRITER_SECRET.encode())
    claims = jwt.decode(
        token,
        signing_key(WRITER_SECRET.encode()),
        algorithms=["HS256"],
        issuer="lakecore-rest",
        options={"require": ["exp", "iat", "sub", "iss"]},
    )
    assert claims["sub"] == "etl" and claims["exp"] - claims["iat"] == ISSUED_TOKEN_SECONDS
    assert claims["auth_time"] == claims["iat"] and "role" not in claims
    assert WRITER_SECRET not in token and WRITER_SECRET not in base64.b64decode(
        token.split(".")[0] + "==", altchars=b"-_"
    ).decode("utf-8", "replace")
    # Two tokens of one second differ (jti): one leaked token names no other.
    assert issued_token(secured.url, "etl", WRITER_SECRET) != token


def test_hostile_tokens_are_401_on_every_route_and_leave_no_traceback(
    rest: Served, token_file: Path, serve_app: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 44, finding 4: ``Bearer lk1.<{"exp":1e999}>.x`` was 500 OverflowError and 1,000
    nested ``[`` 500 RecursionError, on anonymous servers too, and on the commit routes 500
    CommitStateUnknownException, each with a traceback in the log."""
    rest.catalog.create_namespace("db")
    servers = {
        "tokens": app(
            rest.catalog,
            authenticator=authenticator_for(
                ServeOptions(str(rest.root), token_file=str(token_file))
            ),
        ),
        "anonymous": app(rest.catalog),
    }
    routes: list[tuple[str, str, Any]] = [
        ("GET", "/v1/namespaces", None),
        ("GET", "/v1/config", None),
        ("POST", "/v1/transactions/commit", {"table-changes": []}),
        ("POST", "/v1/namespaces/db/tables/t", {"requirements": [], "updates": []}),
        ("HEAD", "/v1/namespaces/db", None),
    ]
    seen = 0
    with caplog.at_level(logging.DEBUG):
        for kind, served in servers.items():
            url = serve_app(served)
            for value in hostile_header_values():
                for method, path, body in routes:
                    response = requests.request(
                        method, f"{url}{path}", json=body, headers={"Authorization": value}
                    )
                    where = f"{kind} {method} {path} {str(value)[:60]!r}"
                    assert response.status_code == 401, f"{where}: {response.text[:300]}"
                    if method != "HEAD":
                        error = response.json()["error"]
                        assert error["type"] == "NotAuthorizedException", where
                        assert "\n" not in error["message"] and len(error["message"]) < 300
                    seen += 1
    assert seen == 2 * len(hostile_header_values()) * len(routes)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")  # the forgeries'
def test_algorithms_claims_and_keys_other_than_ours_are_refused(secured: Served) -> None:
    """Only HS256 with the key the ``kid`` names, with every required claim, is accepted: a
    positive control first, then each variant that must not pass."""
    key, kid = signing_key(WRITER_SECRET.encode()), key_id(WRITER_SECRET.encode())
    now = int(time.time())
    good = {"iss": "lakecore-rest", "sub": "etl", "iat": now, "exp": now + 600}

    def token(claims: dict[str, Any], *, algorithm: str = "HS256", **header: Any) -> str:
        return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid, **header})

    def unsigned(header: dict[str, Any], claims: dict[str, Any], signature: str = "") -> str:
        return ".".join(
            [b64(json.dumps(header).encode()), b64(json.dumps(claims).encode()), signature]
        )

    assert status_of(secured.url, token(good)) == 200
    mac = token(good).split(".")[2]
    refused = {
        "alg none": unsigned({"alg": "none", "kid": kid, "typ": "JWT"}, good),
        "alg None": unsigned({"alg": "None", "kid": kid}, good),
        "alg RS256, an HMAC": unsigned({"alg": "RS256", "kid": kid}, good, mac),
        "alg hs256": unsigned({"alg": "hs256", "kid": kid}, good, mac),
        "HS512 with the right key": token(good, algorithm="HS512"),
        "HS384 with the right key": token(good, algorithm="HS384"),
        "no kid": jwt.encode(good, key, algorithm="HS256"),
        "another's kid": jwt.encode(
            good, key, algorithm="HS256", headers={"kid": key_id(READER_SECRET.encode())}
        ),
        "the secret as key": jwt.encode(
            good, WRITER_SECRET, algorithm="HS256", headers={"kid": kid}
        ),
        "expired": token({**good, "exp": now - 1}),
        "issued in the future": token({**good, "iat": now + 3600, "exp": now + 7200}),
        "no exp": token({k: v for k, v in good.items() if k != "exp"}),
        "no iat": token({k: v for k, v in good.items() if k != "iat"}),
        "no sub": token({k: v for k, v in good.items() if k != "sub"}),
        "no iss": token({k: v for k, v in good.items() if k != "iss"}),
        "another issuer": token({**good, "iss": "someone-else"}),
        "sub of another principal": token({**good, "sub": "dashboards"}),
        "exp a string": token({**good, "exp": str(now + 600)}),
        "exp a float": token({**good, "exp": now + 600.5}),
        "exp true": token({**good, "exp": True}),
        "an audience": token({**good, "aud": "elsewhere"}),
        "a header over the cap": token(good, pad="x" * 300),
        "a critical extension": token(good, crit=["exp"]),
    }
    for what, value in refused.items():
        assert status_of(secured.url, value) == 401, what
        assert status_of(secured.url, value, "/v1/config") == 401, what


def test_a_java_clients_unencoded_basic_credentials_are_accepted(
    rest: Served, tmp_path: Path, serve_app: Callable[..., str]
) -> None:
    """Iceberg's Java client sends ``Basic base64(id:secret)`` without the form encoding RFC 6749
    asks for (``OAuth2Util.basicAuthHeaders``): a secret holding ``+`` or ``%`` must still
    match; the encoded form too."""
    secret = "a+b%41c:d" + "0123456789abcdef"
    path = write_token_file(tmp_path / "tokens", f"spark read-write {secret}\n")
    url = serve_app(
        app(
            rest.catalog,
            authenticator=authenticator_for(ServeOptions(str(rest.root), token_file=str(path))),
        )
    )
    for raw in (f"spark:{secret}", f"spark:{quote_plus(secret)}"):
        header = "Basic " + base64.b64encode(raw.encode()).decode()
        response = requests.post(
            f"{url}/v1/oauth/tokens",
            data={"grant_type": "client_credentials"},
            headers={"Authorization": header},
        )
        assert response.status_code == 200, (raw, response.text)
    wrong = "Basic " + base64.b64encode(b"spark:" + b"x" * 20).decode()
    refused = requests.post(
        f"{url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials"},
        headers={"Authorization": wrong},
    )
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"


def test_tokens_never_reach_the_logs(secured: Served, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        client = oauth_client(secured, f"etl:{WRITER_SECRET}")
        client.list_namespaces()
        token = issued_token(secured.url, "dashboards", READER_SECRET)
        renewed = exchange(secured.url, token).json()["access_token"]
        for value in (READER_SECRET + "x", READER_SECRET, token, renewed, token[:-3], "a.b.c"):
            requests.get(f"{secured.url}/v1/namespaces", headers=bearer(value))
        requests.post(
            f"{secured.url}/v1/oauth/tokens",
            data={
                "grant_type": "client_credentials",
                "client_id": "etl",
                "client_secret": "no" * 9,
            },
        )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "principal=etl" in text and "principal=dashboards" in text
    assert "operation=oauthTokens" in text
    for secret in (WRITER_SECRET, READER_SECRET, token, renewed, token.split(".")[2], "no" * 9):
        assert secret not in text
    assert "eyJ" not in text  # no JWT segment at all


def test_anonymous_only_on_loopback_and_never_beside_a_token_file(
    tmp_path: Path, token_file: Path
) -> None:
    """Issue 44, finding 8: ``--allow-anonymous`` with ``--token-file`` was accepted, so a
    read-only principal could drop its token and write as anonymous."""
    lake = str(tmp_path / "lake")
    for host in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"):
        authenticator_for(ServeOptions(lake, host=host, allow_anonymous=True))
    for host in ("0.0.0.0", "10.0.0.5", "example.org", "::"):
        with pytest.raises(InvalidArgumentError, match="only for a loopback --host"):
            authenticator_for(ServeOptions(lake, host=host, allow_anonymous=True))
    with pytest.raises(InvalidArgumentError, match="needs --token-file"):
        authenticator_for(ServeOptions(lake))
    with pytest.raises(InvalidArgumentError) as both:
        authenticator_for(ServeOptions(lake, token_file=str(token_file), allow_anonymous=True))
    assert both.value.exit_code == ExitCode.BAD_INPUT
    assert str(both.value).startswith("--allow-anonymous and --token-file exclude each other")
    assert "\n" not in str(both.value)


def test_an_anonymous_server_refuses_wrong_tokens(rest: Served) -> None:
    """No token is anonymous; a wrong one is still 401 (a client sending a token means to be
    someone, and should hear that it is not)."""
    rest.catalog.create_namespace("db")
    assert status_of(rest.url, None) == 200
    assert requests.get(f"{rest.url}/v1/namespaces", headers={"Authorization": "Bearer None"}).ok
    assert status_of(rest.url, WRITER_SECRET) == 401
    assert may_write(rest.url, "a.b.c", "x") == 401
    assert client_credentials(rest.url, "etl", WRITER_SECRET).status_code == 401


def test_token_file_lines_are_checked_one_line_each(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    for text, message in (
        ("etl read-write short\n", "line 1: the secret of 'etl' is shorter than 16"),
        (f"etl admin {WRITER_SECRET}\n", "line 1: role 'admin' must be read-only or read-write"),
        (f"etl read-write {WRITER_SECRET} extra\n", "line 1: expected 'NAME ROLE SECRET'"),
        (
            f"etl read-write {WRITER_SECRET}\n#\netl read-only {READER_SECRET}\n",
            "lines 1 and 3: 'etl' is named twice",
        ),
        (f"etl read-write {'x' * 600}\n", "longer than 512"),
        (f"etl read-write {WRITER_SECRET}\u00e9\n", "outside printable ASCII"),
        ("# nothing\n", "names no principal"),
    ):
        write_token_file(bad, text)
        with pytest.raises(InvalidArgumentError, match=message) as caught:
            read_token_file(bad)
        assert WRITER_SECRET not in str(caught.value) and "\n" not in str(caught.value)
        assert str(bad) in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="cannot read the token file"):
        read_token_file(tmp_path / "missing")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidArgumentError, match="is not a regular file"):
        read_token_file(fifo)  # refused at once, not blocked waiting for a writer


def test_fixed_entries_are_checked_as_the_file_is() -> None:
    with pytest.raises(InvalidArgumentError, match="have the same secret"):
        Authenticator([("a", "read-write", WRITER_SECRET), ("b", "read-only", WRITER_SECRET)])
    with pytest.raises(InvalidArgumentError, match="exclude each other"):
        Authenticator([("a", "read-write", WRITER_SECRET)], allow_anonymous=True)
    with pytest.raises(InvalidArgumentError, match="lifetime must be 60 to 86400"):
        Authenticator([("a", "read-write", WRITER_SECRET)], token_seconds=10)


def test_a_further_verifier_is_asked_last_and_its_failures_are_401() -> None:
    """The room left for an identity provider's tokens (``BearerVerifier``)."""

    class Provider:
        def principal_of(self, token: str, now: float) -> Principal | None:
            if token == "boom":
                raise RecursionError("a broken verifier")
            if token == "idp-token-of-alice":
                return Principal("alice", "read-only")
            if token == "idp-token-with-a-bad-role":
                return Principal("mallory", "admin")  # type: ignore[arg-type]
            return None

    authenticator = Authenticator([("etl", "read-write", WRITER_SECRET)], verifiers=[Provider()])
    assert authenticator.principal_of("Bearer idp-token-of-alice") == Principal(
        "alice", "read-only"
    )
    assert authenticator.principal_of(f"Bearer {WRITER_SECRET}").name == "etl"
    for token in ("boom", "idp-token-with-a-bad-role", "unknown"):
        with pytest.raises(RestError) as caught:
            authenticator.principal_of(f"Bearer {token}")
        assert caught.value.code == 401


def oauth_client(served: Served, credential: str) -> RestCatalog:
    """pyiceberg with ``credential=``; the token endpoint named, as the README advises."""
    return RestCatalog(
        "rest",
        uri=served.url,
        credential=credential,
        **{"oauth2-server-uri": f"{served.url}/v1/oauth/tokens"},
    )


def _schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    return Schema(NestedField(1, "id", LongType(), required=False))
