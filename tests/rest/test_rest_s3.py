"""The REST server over a lakehouse and warehouse on S3 (moto), as teams deploy it: one storage
configuration for everything the server touches, clients told how to reach the warehouse, and
credentials vended per table so that clients hold no keys of their own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ValidationError

from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from lakecore.rest.credentials import CredentialVendor, VendingOptions, session_policy
from tests.conftest import S3_TEST_REGION, S3TestServer
from tests.rest.asgi import call

pytestmark = pytest.mark.s3

ROLE = "arn:aws:iam::123456789012:role/lakecore-tables"
AWS_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
SECRETS = {"etl": "etl-secret-0123456789abcdef", "viewer": "viewer-secret-0123456789abc"}


class RecordingSTS:
    """A real STS client (moto's) that keeps every AssumeRole request it makes."""

    def __init__(self, endpoint: str) -> None:
        import botocore.session

        self.client = botocore.session.get_session().create_client(
            "sts", region_name=S3_TEST_REGION, endpoint_url=endpoint
        )
        self.requests: list[dict[str, Any]] = []

    def assume_role(self, **kwargs: Any) -> Any:
        self.requests.append(kwargs)
        return self.client.assume_role(**kwargs)


@dataclass
class OnS3:
    base: str
    catalog: LakecoreCatalog
    url: str
    sts: RecordingSTS

    @property
    def warehouse(self) -> str:
        return f"{self.base}/warehouse"


@pytest.fixture
def on_s3(s3_server: S3TestServer, serve_app: Any) -> Iterator[OnS3]:
    """A lakehouse and warehouse on moto, served with tokens and vended credentials; the
    catalog given lakecore's storage options only (as ``--storage-option`` gives them)."""
    base = f"s3://{s3_server.bucket}/{uuid.uuid4()}"
    options = s3_server.storage_options()
    Lakehouse.create(f"{base}/lake", storage_options=options)
    catalog = LakecoreCatalog(
        "lakecore", uri=f"{base}/lake", storage_options=options, warehouse=f"{base}/warehouse"
    )
    sts = RecordingSTS(s3_server.endpoint)
    vendor = CredentialVendor(
        VendingOptions(role_arn=ROLE, duration_seconds=900, refresh_seconds=300),
        {},
        sts=sts,
    )
    authenticator = Authenticator(
        [("etl", "read-write", SECRETS["etl"]), ("viewer", "read-only", SECRETS["viewer"])]
    )
    url = serve_app(app(catalog, authenticator=authenticator, vendor=vendor))
    yield OnS3(base, catalog, url, sts)


def keyless(on: OnS3, who: str = "etl", **properties: Any) -> RestCatalog:
    """A pyiceberg client with no S3 settings and no storage keys of its own."""
    return RestCatalog("client", uri=on.url, token=SECRETS[who], **properties)


@pytest.fixture
def no_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*AWS_CREDENTIALS, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)


def test_one_storage_configuration_reaches_the_table_files(s3_server: S3TestServer) -> None:
    """Storage options alone (the README's way) reach pyiceberg's FileIO: the finding was a
    metadata write to AWS's own endpoint, unsigned."""
    base = f"s3://{s3_server.bucket}/{uuid.uuid4()}"
    Lakehouse.create(f"{base}/lake", storage_options=s3_server.storage_options())
    catalog = LakecoreCatalog("x", uri=f"{base}/lake", storage_options=s3_server.storage_options())
    assert catalog.properties["s3.endpoint"] == s3_server.endpoint
    assert catalog.properties["s3.access-key-id"] == "lakecore-test"
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    assert catalog.load_table("db.t").scan().to_arrow().num_rows == 2
    with pytest.raises(ValidationError, match="given twice"):
        LakecoreCatalog(
            "x",
            uri=f"{base}/lake",
            storage_options=s3_server.storage_options(),
            **{"s3.endpoint": "http://127.0.0.1:1"},
        )


def test_clients_are_told_how_to_reach_the_warehouse(on_s3: OnS3) -> None:
    config = requests.get(
        f"{on_s3.url}/v1/config", headers={"Authorization": f"Bearer {SECRETS['etl']}"}
    ).json()
    defaults = config["defaults"]
    assert defaults["s3.endpoint"] == on_s3.catalog.storage_settings.endpoint
    assert defaults["s3.region"] == S3_TEST_REGION
    assert defaults["s3.path-style-access"] == "true"
    assert not any("key" in k or "secret" in k or "token" in k for k in defaults)


def test_a_keyless_pyiceberg_client_writes_with_vended_credentials(
    on_s3: OnS3, no_keys_in_the_environment: None
) -> None:
    client = keyless(on_s3)
    client.create_namespace("db")
    client.create_table("db.t", pa.schema([("id", pa.int64())]))
    table = client.load_table("db.t")
    assert table.io.properties["s3.access-key-id"].startswith("ASIA")  # STS's, not ours
    table.append(pa.table({"id": [1, 2, 3]}))
    assert sorted(client.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    policy = json.loads(on_s3.sts.requests[-1]["Policy"])
    location = on_s3.catalog.load_table(("db", "t")).location()
    assert policy == session_policy([location], write=True)
    objects = policy["Statement"][0]
    key = location.split("/", 3)[3]
    assert objects["Resource"] == [f"arn:aws:s3:::{location.split('/')[2]}/{key}/*"]
    assert "s3:PutObject" in objects["Action"]
    assert on_s3.sts.requests[-1]["RoleSessionName"] == "lakecore-etl"


def test_a_read_only_principal_and_time_travel_get_read_credentials(on_s3: OnS3) -> None:
    writer = keyless(on_s3)
    writer.create_namespace("db")
    writer.create_table("db.t", pa.schema([("id", pa.int64())]))
    version = on_s3.catalog.lakehouse.refresh().version
    headers = {"X-Iceberg-Access-Delegation": "vended-credentials"}
    for who, prefix in (("viewer", ""), ("etl", f"version-{version}/")):
        answer = requests.get(
            f"{on_s3.url}/v1/{prefix}namespaces/db/tables/t",
            headers={**headers, "Authorization": f"Bearer {SECRETS[who]}"},
        )
        assert answer.status_code == 200, answer.text
        (credential,) = answer.json()["storage-credentials"]
        assert credential["config"]["s3.session-token"]
        policy = json.loads(on_s3.sts.requests[-1]["Policy"])
        actions = {a for s in policy["Statement"] for a in s["Action"]}
        assert "s3:PutObject" not in actions and "s3:GetObject" in actions, (who, actions)
        assert answer.headers["Cache-Control"] == "no-store"


def test_credentials_are_kept_and_asked_for_only_when_wanted(on_s3: OnS3) -> None:
    writer = keyless(on_s3)
    writer.create_namespace("db")
    writer.create_table("db.t", pa.schema([("id", pa.int64())]))
    asked_before = len(on_s3.sts.requests)
    token = {"Authorization": f"Bearer {SECRETS['etl']}"}
    plain = requests.get(f"{on_s3.url}/v1/namespaces/db/tables/t", headers=token).json()
    assert plain["storage-credentials"] == []  # not asked for
    route = f"{on_s3.url}/v1/namespaces/db/tables/t/credentials"
    first = requests.get(route, headers=token).json()["storage-credentials"]
    second = requests.get(route, headers=token).json()["storage-credentials"]
    assert first == second and len(on_s3.sts.requests) - asked_before <= 1  # kept
    assert first[0]["prefix"] == on_s3.catalog.load_table(("db", "t")).location()


def test_client_properties_refuse_credentials(on_s3: OnS3) -> None:
    from lakecore.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="is a credential"):
        app(on_s3.catalog, client_properties={"s3.secret-access-key": "x"})
    served = app(on_s3.catalog, client_properties={"s3.endpoint": "", "x.custom": "1"})
    defaults = call(served, "GET", "/v1/config").json()["defaults"]
    assert "s3.endpoint" not in defaults and defaults["x.custom"] == "1"


def test_an_unreachable_store_is_503_naming_the_bucket(s3_server: S3TestServer) -> None:
    """The finding: a store the server could not reach was 500 "unexpected OSError ... Could
    not resolve host", after 6.8 s. Now it is a storage error, 503, naming the bucket."""
    from tests.reliability.flaky_endpoint import FlakyEndpoint

    base = f"s3://{s3_server.bucket}/{uuid.uuid4()}"
    with FlakyEndpoint(int(s3_server.endpoint.rsplit(":", 1)[1])) as flaky:
        options = {
            **s3_server.storage_options(),
            "client_kwargs": {"endpoint_url": flaky.endpoint},
            # Long enough for the first request's S3 client build on a loaded machine (it
            # counts inside the deadline: 3 s timed out in a fresh-clone run), short enough for
            # the refused requests' retries.
            "lakecore_timeout_seconds": 8,
        }
        Lakehouse.create(f"{base}/lake", storage_options=options)
        catalog = LakecoreCatalog("x", uri=f"{base}/lake", storage_options=options)
        catalog.create_namespace("db")
        served = app(catalog)
        flaky.refuse_for(60)
        body = json.dumps(
            {"name": "u", "schema": {"type": "struct", "schema-id": 0, "fields": []}}
        ).encode()
        for method, path, payload in (
            ("POST", "/v1/namespaces/db/tables", body),
            ("GET", "/v1/namespaces/db/tables/u", b""),
        ):
            answer = call(served, method, path, body=payload)
            assert answer.status == 503, answer.body
            assert s3_server.bucket in answer.json()["error"]["message"]


def test_serve_help_lists_storage_options_and_merges_both_places(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lakecore.cli.dispatch import build_parser, main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = capsys.readouterr().out
    assert "--storage-option" in help_text and "--client-property" in help_text
    assert "--vended-credentials-role" in help_text
    args = build_parser().parse_args(
        [
            "--storage-option",
            "endpoint_url=http://a",
            "-l",
            "s3://b/l",
            "serve",
            "--storage-option",
            "key=k",
        ]
    )
    from lakecore.cli.shared_options import storage_options_of

    assert storage_options_of(args) == {"endpoint_url": "http://a", "key": "k"}
