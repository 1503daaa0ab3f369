"""Who may call the REST server: tokens from a file, the OAuth2 exchange, anonymous on loopback."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

from lakecore.errors import InvalidArgumentError
from lakecore.rest.app import app
from lakecore.rest.auth import ISSUED_TOKEN_SECONDS, Authenticator, read_token_file
from lakecore.rest.serve import ServeOptions, authenticator_for
from tests.rest.conftest import Served

WRITER_SECRET = "w" * 8 + "0123456789abcdef"
READER_SECRET = "r" * 8 + "fedcba9876543210"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(
        "# name role secret\n"
        f"etl read-write {WRITER_SECRET}\n"
        "\n"
        f"dashboards read-only {READER_SECRET}\n"
    )
    return path


@pytest.fixture
def secured(rest: Served, token_file: Path, serve_app: Any) -> Served:
    authenticator = Authenticator(read_token_file(token_file))
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

    tokens = f"{secured.url}/v1/oauth/tokens"
    issued = requests.post(
        tokens,
        data={
            "grant_type": "client_credentials",
            "client_id": "etl",
            "client_secret": WRITER_SECRET,
        },
    )
    assert issued.status_code == 200 and issued.headers["Cache-Control"] == "no-store"
    body = issued.json()
    assert body["token_type"] == "bearer" and body["expires_in"] == ISSUED_TOKEN_SECONDS
    bearer = {"Authorization": f"Bearer {body['access_token']}"}
    assert requests.get(f"{secured.url}/v1/namespaces", headers=bearer).status_code == 200
    basic = requests.post(
        tokens, data={"grant_type": "client_credentials"}, auth=("dashboards", READER_SECRET)
    )
    assert basic.status_code == 200
    renewed = requests.post(
        tokens,
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": body["access_token"],
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
        },
        headers=bearer,
    )
    assert renewed.status_code == 200
    assert (
        requests.get(
            f"{secured.url}/v1/namespaces",
            headers={"Authorization": f"Bearer {renewed.json()['access_token']}"},
        ).status_code
        == 200
    )
    assert requests.post(tokens, data={"grant_type": "password"}).json()["error"] == (
        "unsupported_grant_type"
    )
    tampered = body["access_token"][:-2] + (
        "AA" if not body["access_token"].endswith("AA") else "BB"
    )
    assert (
        requests.get(
            f"{secured.url}/v1/namespaces", headers={"Authorization": f"Bearer {tampered}"}
        ).status_code
        == 401
    )


def test_issued_tokens_expire_and_die_with_their_secret() -> None:
    now = [1_000_000.0]
    entries = [("etl", "read-write", WRITER_SECRET)]
    authenticator = Authenticator(entries, clock=lambda: now[0])  # type: ignore[arg-type]
    token = authenticator.token_response(
        {"grant_type": "client_credentials", "client_id": "etl", "client_secret": WRITER_SECRET},
        None,
    )["access_token"]
    assert isinstance(token, str)
    assert authenticator.principal_of_token(token) is not None
    now[0] += ISSUED_TOKEN_SECONDS + 1
    assert authenticator.principal_of_token(token) is None
    now[0] -= ISSUED_TOKEN_SECONDS + 1
    rotated = Authenticator([("etl", "read-write", "another-secret-of-16+")], clock=lambda: now[0])
    assert rotated.principal_of_token(token) is None
    demoted = Authenticator([("etl", "read-only", WRITER_SECRET)], clock=lambda: now[0])
    assert demoted.principal_of_token(token) is None


def test_tokens_never_reach_the_logs(secured: Served, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        client = oauth_client(secured, f"etl:{WRITER_SECRET}")
        client.list_namespaces()
        requests.get(
            f"{secured.url}/v1/namespaces", headers={"Authorization": f"Bearer {READER_SECRET}x"}
        )
        requests.get(
            f"{secured.url}/v1/namespaces", headers={"Authorization": f"Bearer {READER_SECRET}"}
        )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "principal=etl" in text and "principal=dashboards" in text
    assert WRITER_SECRET not in text and READER_SECRET not in text and "lk1." not in text


def test_anonymous_only_on_loopback_and_token_file_errors(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    for host in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"):
        authenticator_for(ServeOptions(lake, host=host, allow_anonymous=True))
    for host in ("0.0.0.0", "10.0.0.5", "example.org", "::"):
        with pytest.raises(InvalidArgumentError, match="only for a loopback --host"):
            authenticator_for(ServeOptions(lake, host=host, allow_anonymous=True))
    with pytest.raises(InvalidArgumentError, match="needs --token-file"):
        authenticator_for(ServeOptions(lake))
    bad = tmp_path / "bad"
    for text, message in (
        ("etl read-write short\n", "shorter than 16"),
        (f"etl admin {WRITER_SECRET}\n", "read-only or read-write"),
        (f"etl read-write {WRITER_SECRET} extra\n", "3 fields"),
        (f"etl read-write {WRITER_SECRET}\netl read-only {READER_SECRET}\n", "named twice"),
        ("# nothing\n", "names no principal"),
    ):
        bad.write_text(text)
        with pytest.raises(InvalidArgumentError, match=message) as caught:
            read_token_file(bad)
        assert WRITER_SECRET not in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="cannot read the token file"):
        read_token_file(tmp_path / "missing")


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
