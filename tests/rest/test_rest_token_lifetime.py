"""An issued token's absolute lifetime: a token exchange never extends it (issue 44, finding 7),
and a Java client with ``credential=`` still works past the hour. Time is the authenticator's
injected clock: no test sleeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import requests

from lakecore.rest.app import app
from lakecore.rest.auth import ISSUED_TOKEN_SECONDS, Authenticator
from tests.rest.auth_helpers import (
    READER_SECRET,
    WRITER_SECRET,
    bearer,
    claims_of,
    client_credentials,
    exchange,
    issued_token,
    status_of,
)
from tests.rest.conftest import Served

T0 = 1_900_000_000.0


@dataclass
class Clocked:
    url: str
    now: list[float]

    def at(self, offset: float) -> None:
        self.now[0] = T0 + offset


@pytest.fixture
def clocked(rest: Served, serve_app: Callable[..., str]) -> Clocked:
    now = [T0]
    authenticator = Authenticator(
        [("etl", "read-write", WRITER_SECRET), ("dashboards", "read-only", READER_SECRET)],
        clock=lambda: now[0],
    )
    return Clocked(serve_app(app(rest.catalog, authenticator=authenticator)), now)


def test_an_exchange_never_outlives_the_grant_that_started_it(clocked: Clocked) -> None:
    """Finding 7: an exchanged token lived a fresh hour, so a token renewed itself for ever."""
    first = issued_token(clocked.url, "etl", WRITER_SECRET)
    clocked.at(100)
    second = exchange(clocked.url, first)
    assert second.status_code == 200, second.text
    assert second.json()["expires_in"] == ISSUED_TOKEN_SECONDS - 100
    clocked.at(3000)
    third = exchange(clocked.url, second.json()["access_token"])
    assert third.status_code == 200 and third.json()["expires_in"] == ISSUED_TOKEN_SECONDS - 3000
    chain = [first, second.json()["access_token"], third.json()["access_token"]]
    clocked.at(ISSUED_TOKEN_SECONDS - 1)
    assert [status_of(clocked.url, token) for token in chain] == [200, 200, 200]
    clocked.at(ISSUED_TOKEN_SECONDS)
    assert [status_of(clocked.url, token) for token in chain] == [401, 401, 401]
    assert exchange(clocked.url, chain[-1]).json()["error"] == "invalid_grant"


def test_renewing_early_and_often_ends_at_the_same_hour(clocked: Clocked) -> None:
    token = issued_token(clocked.url, "dashboards", READER_SECRET)
    offset = 0
    while True:
        offset += 60
        clocked.at(offset)
        answer = exchange(clocked.url, token)
        if answer.status_code != 200:
            break
        token = answer.json()["access_token"]
        assert claims_of(token)["exp"] == T0 + ISSUED_TOKEN_SECONDS
        assert claims_of(token)["auth_time"] == T0
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
    assert "get a new token with the client credentials" in answer.json()["error_description"]
    # Refused in the last tenth of the lifetime: the client has 6 minutes to use its credential.
    assert (
        ISSUED_TOKEN_SECONDS - offset
        < ISSUED_TOKEN_SECONDS / 10
        <= ISSUED_TOKEN_SECONDS - offset + 60
    )
    clocked.at(ISSUED_TOKEN_SECONDS)
    assert status_of(clocked.url, token) == 401


def test_an_exchange_with_the_clients_credential_starts_a_new_lifetime(clocked: Clocked) -> None:
    """What Java's ``refreshExpiredToken`` sends: the (possibly expired) token as subject, the
    credential as ``Authorization: Basic``."""
    first = issued_token(clocked.url, "etl", WRITER_SECRET)
    clocked.at(3300)
    assert exchange(clocked.url, first).status_code == 400
    fresh = exchange(clocked.url, first, auth=("etl", WRITER_SECRET))
    assert fresh.status_code == 200, fresh.text
    assert fresh.json()["expires_in"] == ISSUED_TOKEN_SECONDS
    assert claims_of(fresh.json()["access_token"])["exp"] == T0 + 3300 + ISSUED_TOKEN_SECONDS
    clocked.at(ISSUED_TOKEN_SECONDS + 500)  # the subject expired: the credential still works
    assert status_of(clocked.url, first) == 401
    again = exchange(clocked.url, first, auth=("etl", WRITER_SECRET))
    assert again.status_code == 200 and status_of(clocked.url, again.json()["access_token"]) == 200
    # The credential must be the subject's own, and right.
    other = exchange(clocked.url, first, auth=("dashboards", READER_SECRET))
    assert other.status_code == 400 and other.json()["error"] == "invalid_grant"
    wrong = exchange(clocked.url, first, auth=("etl", READER_SECRET))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    # A subject it cannot verify (a token of the old lk1 format, after an upgrade) does not
    # stand in the way of the credential; another principal's verifiable token does.
    for unverifiable in (first[:-4] + "AAAA", "lk1.eyJzdWIiOiJldGwifQ.x", "junk"):
        assert exchange(clocked.url, unverifiable, auth=("etl", WRITER_SECRET)).ok
    theirs = issued_token(clocked.url, "dashboards", READER_SECRET)
    for subject in (theirs, READER_SECRET):
        refused = exchange(clocked.url, subject, auth=("etl", WRITER_SECRET))
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    # A secret is a credential: exchanging it is a grant of a full lifetime.
    assert exchange(clocked.url, WRITER_SECRET).json()["expires_in"] == ISSUED_TOKEN_SECONDS


def test_a_java_client_with_a_credential_keeps_working_for_hours(clocked: Clocked) -> None:
    """Replays apache/iceberg ``OAuth2Util.AuthSession``'s refresh schedule against the server:
    refresh ``min(expires_in / 10, 300 s)`` before the expiry by token exchange with the token
    as bearer; a failure is retried 5 times with back-off (100 ms doubling), then
    ``refreshExpiredToken`` exchanges again with the credential as Basic. The client's token
    must never be expired when it makes a request, for three hours."""
    elapsed = 0.0
    first = client_credentials(clocked.url, "etl", WRITER_SECRET).json()
    token, expires_at = first["access_token"], float(claims_of(first["access_token"])["exp"])
    next_refresh = expires_at - min((expires_at - T0) / 10, 300)
    refused = fallbacks = 0
    while elapsed < 3 * 3600:
        while elapsed + 120 < next_refresh - T0:  # requests between refreshes
            elapsed += 120
            clocked.at(elapsed)
            assert status_of(clocked.url, token) == 200, elapsed
        elapsed = next_refresh - T0
        clocked.at(elapsed)
        assert status_of(clocked.url, token) == 200, elapsed  # a request just before
        started = elapsed
        answer = None
        for attempt in range(6):
            response = exchange(clocked.url, token, headers=bearer(token))
            if response.status_code == 200:
                answer = response.json()
                break
            refused += 1
            elapsed += 0.1 * 2**attempt if attempt < 5 else 0
            clocked.at(elapsed)
        if answer is None:
            fallbacks += 1
            response = exchange(clocked.url, token, auth=("etl", WRITER_SECRET))
            assert response.status_code == 200, response.text
            answer = response.json()
        token = answer["access_token"]
        assert status_of(clocked.url, token) == 200, elapsed
        expires_in = float(answer["expires_in"])
        window = min(expires_in / 10, 300)
        next_refresh = T0 + started + expires_in - window
    assert fallbacks >= 3 and refused == 6 * fallbacks


def test_pyiceberg_with_a_credential_fetches_a_new_token_after_the_hour(
    clocked: Clocked,
) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    client = RestCatalog(
        "rest",
        uri=clocked.url,
        credential=f"etl:{WRITER_SECRET}",
        **{"oauth2-server-uri": f"{clocked.url}/v1/oauth/tokens"},
    )
    client.create_namespace("before")
    clocked.at(ISSUED_TOKEN_SECONDS + 10)
    client.create_namespace("after")  # a 401, a new client-credentials grant, the retry
    assert ("after",) in client.list_namespaces()
    assert requests.get(f"{clocked.url}/healthz").ok
