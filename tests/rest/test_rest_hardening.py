"""The REST server tried as an attacker and an unlucky operator would: each finding of the trial
that made it unsafe to expose, with a variant or two of its class.

Locations that destroy a table or escape the warehouse, files a commit names that freeze the
server or probe its disk, reads that wait for a commit's IO, client mistakes answered 500, logs
and metrics a client could shape, names that look like other names, page tokens that work on
other listings, time travel to an expired version, a vanished lakehouse. The requests go to the
app in-process (``tests/rest/asgi.py``) unless the HTTP layer itself is part of the finding.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests

from lakecore.errors import InvalidLocationError
from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app
from lakecore.rest.serve import ServeOptions, catalog_for
from tests.rest.asgi import Answer, call
from tests.rest.conftest import Served

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "day", "type": "date", "required": False},
    ],
}


def body(document: Any) -> bytes:
    return json.dumps(document).encode()


def create(a: Any, name: str, **fields: Any) -> Answer:
    return call(
        a, "POST", "/v1/namespaces/db/tables", body=body({"name": name, "schema": SCHEMA, **fields})
    )


def is_client_error(answer: Answer, status: int = 400) -> bool:
    """The spec's JSON error model with ``status``."""
    error = answer.json()["error"]
    return answer.status == status and error["code"] == status and bool(error["message"])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, LakecoreCatalog, Path]]:
    root = tmp_path / "lake"
    Lakehouse.create(str(root))
    catalog = LakecoreCatalog("lakecore", uri=str(root))
    a = app(catalog)
    assert call(a, "POST", "/v1/namespaces", body=body({"namespace": ["db"]})).status == 200
    assert catalog.settle()  # the hint follows the answer: the tests count files from here
    yield a, catalog, root


def files_under(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*")} if folder.exists() else set()


# -- 1, 2: locations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "suffix, problem",
    [
        ("db/q?x", "a query"),
        ("db/q#x", "a fragment"),
        ("db/%2e%2e/%2e%2e/%2e%2e/%2e%2e/x", "a percent-escape"),
        ("db/a\\..\\..\\x", "a backslash"),
        ("db/a\u202eb", "U+202E"),
        ("db/a\nb", "U+000A"),
        ("db/../../x", "not qualified"),
        ("db/./x", "not qualified"),
        ("db//x", "not qualified"),
    ],
)
@pytest.mark.parametrize("stage", [False, True])
def test_a_location_that_is_not_canonical_is_400_before_any_file_is_written(
    served: tuple[Any, LakecoreCatalog, Path],
    tmp_path: Path,
    suffix: str,
    problem: str,
    stage: bool,
) -> None:
    a, catalog, _root = served
    before = files_under(tmp_path)
    answer = create(a, "t", location=f"{catalog.warehouse}/{suffix}", **{"stage-create": stage})
    assert is_client_error(answer), answer.body
    assert problem in answer.json()["error"]["message"]
    assert files_under(tmp_path) == before  # no folder made four levels up, no metadata file


def test_the_query_location_no_longer_destroys_a_table(served: tuple[Any, Any, Path]) -> None:
    """The finding: ``WH/db/q?x`` was accepted, and pyiceberg's FileIO, dropping the query,
    wrote every file of the first append over one path. Refused now; a plain location works."""
    a, catalog, _ = served
    assert create(a, "q", location=f"{catalog.warehouse}/db/q?x").status == 400
    assert create(a, "q", location=f"{catalog.warehouse}/db/q").status == 200
    table = catalog.load_table(("db", "q"))
    table.append(pa.table({"id": [1, 2], "day": pa.array([None, None], pa.date32())}))
    assert catalog.load_table(("db", "q")).scan().to_arrow().num_rows == 2


@pytest.mark.parametrize(
    "location",
    [
        "s3://other-bucket/x",
        "/etc",
        "file:///tmp",
        "file://host/w/db/t",
        "relative/path",
        "file:/w",
    ],
)
def test_a_location_outside_the_warehouse_or_malformed_is_400(
    served: tuple[Any, Any, Path], location: str
) -> None:
    a, _, _ = served
    answer = create(a, "t", location=location)
    assert is_client_error(answer), answer.body


def test_hadoop_file_spelling_is_the_same_local_location(served: tuple[Any, Any, Path]) -> None:
    """Java engines write ``file:/abs`` (Hadoop's spelling); it is ``file:///abs``, stored so."""
    a, catalog, _ = served
    path = catalog.warehouse.removeprefix("file://")
    answer = create(a, "h", location=f"file:{path}/db/h")
    assert answer.status == 200, answer.body
    assert answer.json()["metadata"]["location"] == f"file://{path}/db/h"
    assert create(a, "h2", location="file:relative/db/h2").status == 400


def test_removing_a_property_the_table_lacks_is_no_500(served: tuple[Any, Any, Path]) -> None:
    """The fuzzer's find: ``remove-properties`` of an absent key was a KeyError, a 500. As in
    Iceberg's Java catalog, it removes nothing; the keys that are there still go."""
    a, _, _ = served
    assert create(a, "p", properties={"keep": "1", "drop": "2"}).status == 200
    answer = call(
        a,
        "POST",
        "/v1/namespaces/db/tables/p",
        body=body(
            {
                "requirements": [],
                "updates": [{"action": "remove-properties", "removals": ["", "drop"]}],
            }
        ),
    )
    assert answer.status == 200, answer.body
    assert answer.json()["metadata"]["properties"].get("drop") is None
    assert answer.json()["metadata"]["properties"]["keep"] == "1"


def test_write_paths_and_namespace_locations_follow_the_same_rule(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    a, catalog, _ = served
    wh = catalog.warehouse
    answer = create(a, "t", properties={"write.data.path": f"{wh}/db/t/data?x"})
    assert is_client_error(answer) and "write.data.path" in answer.json()["error"]["message"]
    answer = call(
        a,
        "POST",
        "/v1/namespaces",
        body=body({"namespace": ["n2"], "properties": {"location": f"{wh}/n%2e2"}}),
    )
    assert is_client_error(answer), answer.body
    # A commit that moves the table there is refused too.
    assert create(a, "t").status == 200
    update = {
        "requirements": [],
        "updates": [{"action": "set-location", "location": f"{wh}/db/t2?x"}],
    }
    answer = call(a, "POST", "/v1/namespaces/db/tables/t", body=body(update))
    assert is_client_error(answer), answer.body


# -- 3: files a commit names, and reads that wait ---------------------------------------------


def snapshot_commit(manifest_list: str, snapshot_id: int = 7) -> dict[str, Any]:
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
        "updates": [
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": snapshot_id,
                    "timestamp-ms": int(time.time() * 1000),
                    "manifest-list": manifest_list,
                    "summary": {"operation": "append"},
                    "schema-id": 0,
                    "sequence-number": 1,
                },
            },
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": snapshot_id,
            },
        ],
    }


def test_a_manifest_list_outside_the_warehouse_is_400_without_reading_it(
    served: tuple[Any, LakecoreCatalog, Path], tmp_path: Path
) -> None:
    """The finding: the server read any file or URL a commit named as its manifest list, and
    its answers probed the disk: 400 "does not exist", 500 "is a directory", 500 for
    /etc/shadow. Now every such path is one answer, before any read."""
    a, _, _ = served
    assert create(a, "t").status == 200
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/nonexistent", "/root", "/etc/shadow", "s3://bucket/x", f"file://{fifo}"):
        started = time.monotonic()
        answer = call(a, "POST", "/v1/namespaces/db/tables/t", body=body(snapshot_commit(path)))
        assert is_client_error(answer), (path, answer.body)
        assert "outside the warehouse" in answer.json()["error"]["message"], path
        assert time.monotonic() - started < 5, f"{path} took long: was it read?"


def test_a_fifo_a_folder_or_a_non_avro_file_inside_the_warehouse_is_400(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    a, catalog, _ = served
    assert create(a, "t").status == 200
    folder = Path(catalog.load_table(("db", "t")).metadata.location.removeprefix("file://"))
    (folder / "metadata").mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / "metadata" / "fifo.avro")
    (folder / "metadata" / "dir.avro").mkdir()
    (folder / "metadata" / "text.avro").write_text("root:x:0:0:root:/root:/bin/bash\n")
    for name, words in (
        ("fifo.avro", "a FIFO"),
        ("dir.avro", "a directory"),
        ("text.avro", "not a readable manifest list"),
        ("missing.avro", "does not exist"),
    ):
        path = f"file://{folder}/metadata/{name}"
        answer = call(a, "POST", "/v1/namespaces/db/tables/t", body=body(snapshot_commit(path)))
        assert is_client_error(answer), (name, answer.body)
        assert words in answer.json()["error"]["message"], (name, answer.body)
    assert catalog.load_table(("db", "t")).metadata.snapshots == []


def test_reads_health_and_metrics_never_wait_for_a_commits_io(rest: Served) -> None:
    """A commit held inside its root write (as a slow store holds it) while reads, /healthz and
    /metrics answer: none takes a lock the commit holds. Before, every read waited for the
    catalog-wide lock (a FIFO as manifest list froze them all for 17 s)."""
    client = rest.client()
    client.create_namespace("db")
    client.create_table("db.t", pa.schema([("id", pa.int64())]))
    entered, release = threading.Event(), threading.Event()
    lakehouse_type = type(rest.catalog.lakehouse)
    original = lakehouse_type.commit_plan

    def slow_commit_plan(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(30)
        return original(self, *args, **kwargs)

    errors: list[BaseException] = []

    def writer() -> None:
        try:
            client.load_table("db.t").append(pa.table({"id": [1]}))
        except BaseException as exc:
            errors.append(exc)

    lakehouse_type.commit_plan = slow_commit_plan  # type: ignore[method-assign]
    try:
        thread = threading.Thread(target=writer)
        thread.start()
        assert entered.wait(30), "the commit never reached its root write"
        started = time.monotonic()
        assert requests.get(f"{rest.url}/healthz", timeout=10).status_code == 200
        assert requests.get(f"{rest.url}/metrics", timeout=10).status_code == 200
        assert rest.client().load_table("db.t").metadata.snapshots == []
        assert rest.client().list_namespaces() == [("db",)]
        assert time.monotonic() - started < 10
    finally:
        release.set()
        lakehouse_type.commit_plan = original  # type: ignore[method-assign]
    thread.join(30)
    assert not errors
    assert len(rest.client().load_table("db.t").metadata.snapshots) == 1


# -- 9, 10: client mistakes are 4xx ----------------------------------------------------------


def test_a_commit_to_a_table_dropped_meanwhile_is_404_not_a_create(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    """The finding: a commit racing a drop was 500 ``CommitStateUnknown`` ("coroutine raised
    StopIteration"): the retry took the missing table for a create."""
    a, catalog, _ = served
    assert create(a, "t").status == 200
    stale = catalog.load_table(("db", "t"))
    assert call(a, "DELETE", "/v1/namespaces/db/tables/t").status == 204
    change = {
        "requirements": [
            {"type": "assert-table-uuid", "uuid": str(stale.metadata.table_uuid)},
        ],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    answer = call(a, "POST", "/v1/namespaces/db/tables/t", body=body(change))
    assert (answer.status, answer.error_type) == (404, "NoSuchTableException"), answer.body
    assert not catalog.table_exists(("db", "t"))


def test_a_commit_whose_table_is_dropped_after_it_was_loaded_is_no_create(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    """The race's window, made deterministic: the route loaded the table, then a drop landed,
    then the commit ran. The commit's retry on the latest version found no table and made one
    from the updates alone (a table the client never asked for, or a 500)."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.table.update import SetPropertiesUpdate

    a, catalog, _ = served
    assert create(a, "t").status == 200
    loaded = catalog.load_table(("db", "t"))
    assert call(a, "DELETE", "/v1/namespaces/db/tables/t").status == 204
    with pytest.raises(NoSuchTableError):
        catalog.commit_table(loaded, (), (SetPropertiesUpdate(updates={"k": "v"}),))
    assert not catalog.table_exists(("db", "t"))


def test_commits_racing_drops_are_never_500(rest: Served) -> None:
    """The trial's race: set-properties commits while the table is dropped and created again."""
    client = rest.client()
    client.create_namespace("db")
    schema = pa.schema([("id", pa.int64())])
    statuses: list[int] = []

    def commit(table: Any, go: threading.Barrier) -> None:
        go.wait()
        try:
            with table.transaction() as tx:
                tx.set_properties(k=str(uuid.uuid4()))
            statuses.append(200)
        except Exception as exc:
            statuses.append(_status_of(exc))

    for _ in range(20):
        client.create_table("db.t", schema)
        go = threading.Barrier(2)
        thread = threading.Thread(target=commit, args=(client.load_table("db.t"), go))
        thread.start()
        go.wait()
        client.drop_table("db.t")
        thread.join(30)
    assert statuses and all(s in (200, 404, 409) for s in statuses), statuses


def _status_of(exc: Exception) -> int:
    """The status pyiceberg's exception stands for (it raises a plain RESTError for a 404 on
    a commit, naming the server's error type)."""
    from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

    if isinstance(exc, NoSuchTableError) or "NoSuchTableException" in str(exc):
        return 404
    if isinstance(exc, CommitFailedException):
        return 409
    return 500


@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", "/v1/namespaces"),
        ("POST", "/v1/namespaces/db/tables"),
        ("POST", "/v1/namespaces/db/tables/t"),
        ("POST", "/v1/namespaces/db/register"),
        ("POST", "/v1/tables/rename"),
        ("POST", "/v1/transactions/commit"),
        ("POST", "/v1/namespaces/db/properties"),
    ],
)
@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_a_deeply_nested_body_is_400_on_every_route(
    served: tuple[Any, Any, Path], method: str, path: str, opener: bytes
) -> None:
    a, _, _ = served
    depth = 1000
    closer = b"]" if opener == b"[" else b"}"
    nested = opener * depth + b"1" + closer * depth
    answer = call(a, method, path, body=nested)
    assert is_client_error(answer), answer.body
    assert "nested" in answer.json()["error"]["message"]


def test_bad_page_tokens_are_400(served: tuple[Any, Any, Path]) -> None:
    import base64

    a, _, _ = served
    for token in (
        base64.urlsafe_b64encode(b"[" * 1000).decode(),
        base64.urlsafe_b64encode(b'{"s": 1e999}').decode(),
        "!!!",
        "x" * 10_000,
    ):
        answer = call(a, "GET", "/v1/namespaces/db/tables", query=f"pageToken={token}")
        assert is_client_error(answer), answer.body


def test_registering_a_missing_file_or_a_folder_is_400(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    a, catalog, _ = served
    folder = Path(catalog.warehouse.removeprefix("file://")) / "db" / "reg"
    folder.mkdir(parents=True)
    for where in (
        f"{catalog.warehouse}/db/reg/missing.metadata.json",
        f"{catalog.warehouse}/db/reg",
    ):
        answer = call(
            a,
            "POST",
            "/v1/namespaces/db/register",
            body=body({"name": "r", "metadata-location": where}),
        )
        assert is_client_error(answer), answer.body
        message = answer.json()["error"]["message"]
        assert "cannot be registered" in message or "is a directory" in message, message


# -- 11: time travel --------------------------------------------------------------------------


def test_an_expired_version_is_404_on_the_server_that_had_it_open(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    from lakecore.core.storage import Storage
    from lakecore.maintenance.expire import expire_in_process

    a, catalog, root = served
    assert create(a, "t").status == 200
    old = catalog.lakehouse.refresh().version
    for i in range(3):
        assert call(a, "POST", "/v1/namespaces", body=body({"namespace": [f"n{i}"]})).status == 200
    config = call(a, "GET", "/v1/config", query=f"warehouse=lakecore@version={old}").json()
    prefix = config["overrides"]["prefix"]
    assert call(a, "GET", f"/v1/{prefix}/namespaces/db/tables/t").status == 200
    future = int(time.time() * 1000) + 10**10
    assert old in expire_in_process(Storage(str(root)), now_millis=future).plan.expired
    for path in (f"/v1/{prefix}/namespaces/db/tables/t", f"/v1/{prefix}/namespaces"):
        answer = call(a, "GET", path)
        assert (answer.status, answer.error_type) == (404, "NoSuchWarehouseException"), answer.body
    other_server = app(LakecoreCatalog("lakecore", uri=str(root)))
    assert call(other_server, "GET", f"/v1/{prefix}/namespaces").status == 404


@pytest.mark.parametrize(
    "warehouse",
    [
        "@as-of=-99999999999999999999",
        "@as-of=99999999999999999999999",
        "@as-of=-1",
        "@as-of=10000-01-01T00:00:00",
        "@version=99999999999999999999",
        "@version=4294967296",
        "@version=",
        "@bogus=1",
    ],
)
def test_absurd_versions_and_times_are_4xx(served: tuple[Any, Any, Path], warehouse: str) -> None:
    a, _, _ = served
    answer = call(a, "GET", "/v1/config", query=f"warehouse={warehouse}")
    assert 400 <= answer.status < 500, answer.body
    assert call(a, "GET", "/v1/version-99999999999999999999/namespaces").status == 404


# -- 12: the lakehouse vanished ---------------------------------------------------------------


def test_a_vanished_lakehouse_is_503_on_every_route_and_health_names_no_uri(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    """The finding: a vanished root answered 404 "no such table", so clients' IF EXISTS logic
    took the wrong branch; /healthz told anonymous callers the lakehouse URI. A server notices
    at its next full look at the latest version (``lakecore.latest.full-check-seconds``)."""
    _, _, root = served
    catalog = LakecoreCatalog(
        "lakecore", uri=str(root), **{"lakecore.latest.full-check-seconds": "0.01"}
    )
    a = app(catalog)
    assert create(a, "t").status == 200
    shutil.rmtree(root)
    time.sleep(0.02)
    for method, path, payload in (
        ("GET", "/v1/namespaces/db/tables/t", b""),
        ("HEAD", "/v1/namespaces/db/tables/t", b""),
        ("HEAD", "/v1/namespaces/db", b""),
        ("GET", "/v1/namespaces", b""),
        ("GET", "/v1/namespaces/db/tables", b""),
        ("POST", "/v1/namespaces", body({"namespace": ["x"]})),
        ("DELETE", "/v1/namespaces/db/tables/t", b""),
    ):
        answer = call(a, method, path, body=payload)
        assert answer.status == 503, (method, path, answer.status, answer.body)
        if method == "GET":
            assert answer.headers.get("retry-after") == "1"
    health = call(a, "GET", "/healthz")
    assert health.status == 503
    assert str(root) not in health.body.decode() and "lake" not in health.body.decode()


# -- 13: page tokens --------------------------------------------------------------------------


def test_a_page_token_works_only_on_the_listing_that_issued_it(
    served: tuple[Any, Any, Path],
) -> None:
    a, _, _ = served
    for ns in ("s", "s2"):
        assert call(a, "POST", "/v1/namespaces", body=body({"namespace": [ns]})).status == 200
    for i in range(3):
        assert create(a, f"t{i}").status == 200
    first = call(a, "GET", "/v1/namespaces/db/tables", query="pageToken=&pageSize=1").json()
    token = first["next-page-token"]
    assert token
    for path, query in (
        ("/v1/namespaces/s/tables", f"pageToken={token}"),
        ("/v1/namespaces", f"pageToken={token}"),
        ("/v1/namespaces", f"parent=s&pageToken={token}"),
    ):
        answer = call(a, "GET", path, query=query)
        assert is_client_error(answer), (path, answer.body)
    second = call(a, "GET", "/v1/namespaces/db/tables", query=f"pageToken={token}&pageSize=1")
    assert [i["name"] for i in second.json()["identifiers"]] == ["t1"]


# -- 14: a table without Iceberg metadata -----------------------------------------------------


def test_head_and_get_agree_on_a_table_made_outside_iceberg(
    served: tuple[Any, LakecoreCatalog, Path],
) -> None:
    a, catalog, _ = served
    with catalog.lakehouse.refresh().transaction() as tx:
        tx.create_table("db", "plain", columns=[{"id": 1, "name": "x", "type": "INT8"}])
    assert call(a, "HEAD", "/v1/namespaces/db/tables/plain").status == 404
    assert call(a, "GET", "/v1/namespaces/db/tables/plain").status == 404
    assert not catalog.table_exists(("db", "plain"))


# -- 15: paths Starlette would not route ------------------------------------------------------


def test_unroutable_paths_get_the_json_error_model(rest: Served) -> None:
    import http.client
    from urllib.parse import urlparse

    where = urlparse(rest.url)
    for path in (
        "/v1/namespaces/a%0Ab",
        "//v1/config",
        "/nothing",
        "/v1/namespaces/a%0D%0Ab/tables",
    ):
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        payload = json.loads(response.read())
        assert response.status == 404, path
        assert response.getheader("content-type") == "application/json"
        assert payload["error"]["code"] == 404, path
        connection.close()


# -- 5, 6: logs and metrics -------------------------------------------------------------------


def test_the_access_log_cannot_be_forged_or_coloured(
    served: tuple[Any, Any, Path], caplog: pytest.LogCaptureFixture
) -> None:
    a, _, _ = served
    with caplog.at_level(logging.INFO, logger="lakecore.rest.access"):
        call(a, "GET", b"/v1/namespaces/x%0AGET /v1/forged 200 0.1ms principal=admin")
        call(a, "GET", "/v1/namespaces/%1B[31mred")
        call(a, "GET", b"/v1/namespaces/\xe2\x80\xae")
    lines = [r.getMessage() for r in caplog.records if r.name == "lakecore.rest.access"]
    assert len(lines) == 3
    for line in lines:
        assert "\n" not in line and "\x1b" not in line and "\u202e" not in line, line
        assert all(0x20 <= ord(c) < 0x7F for c in line), line
    assert "%0A" in lines[0] and "%1B" in lines[1] and "\\x" in lines[2]


def test_made_up_methods_do_not_grow_the_metrics(served: tuple[Any, Any, Path]) -> None:
    a, _, _ = served
    before = len(call(a, "GET", "/metrics").body)
    for i in range(500):
        call(a, f"M{i}ETHOD", "/v1/namespaces")
    text = call(a, "GET", "/metrics").body.decode()
    assert "M1ETHOD" not in text and 'method="other"' in text
    assert len(text) < before + 5_000


# -- 16: names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["zw\u200bsp", "rt\u202el", "\ufeffbom", "..", "."])
def test_names_that_look_like_others_are_400_with_the_reason(
    served: tuple[Any, LakecoreCatalog, Path], name: str
) -> None:
    a, catalog, root = served
    before = files_under(root)
    answer = call(a, "POST", "/v1/namespaces", body=body({"namespace": [name]}))
    assert is_client_error(answer), answer.body
    answer = create(a, name)
    assert is_client_error(answer), answer.body
    reason = answer.json()["error"]["message"]
    assert ("U+" in reason) or ("'.'" in reason), reason
    assert create(a, "ok").status == 200
    rename = {
        "source": {"namespace": ["db"], "name": "ok"},
        "destination": {"namespace": ["db"], "name": name},
    }
    assert is_client_error(call(a, "POST", "/v1/tables/rename", body=body(rename)))
    assert catalog.list_tables("db") == [("db", "ok")]
    ok_folder = catalog.load_table(("db", "ok")).metadata.location.removeprefix("file://")
    warehouse = catalog.warehouse.removeprefix("file://")
    written = {f for f in files_under(root) - before if f.startswith(warehouse + "/")}
    assert all(f.startswith(ok_folder) or ok_folder.startswith(f) for f in written), written


# -- 17: the operator's options ---------------------------------------------------------------


def test_an_s3_property_on_a_local_lakehouse_is_for_the_table_files(tmp_path: Path) -> None:
    """The finding: ``serve --property s3.region=...`` on a local lakehouse exited 4 "unknown
    storage option client_kwargs"."""
    Lakehouse.create(str(tmp_path / "lake"))
    catalog = catalog_for(
        ServeOptions(lakehouse=str(tmp_path / "lake"), properties={"s3.region": "eu-west-1"})
    )
    assert catalog.properties["s3.region"] == "eu-west-1"


def test_a_warehouse_other_than_the_recorded_one_is_a_bad_argument(tmp_path: Path) -> None:
    Lakehouse.create(str(tmp_path / "lake"))
    LakecoreCatalog("x", uri=str(tmp_path / "lake")).create_namespace("a")
    with pytest.raises(InvalidLocationError, match="is not this lakehouse's"):
        catalog_for(ServeOptions(lakehouse=str(tmp_path / "lake"), warehouse=str(tmp_path / "w")))


# -- 18: partition transforms -----------------------------------------------------------------


@pytest.mark.parametrize(
    "transform, source",
    [("bogus[3]", 1), ("bucket[0]", 1), ("truncate[0]", 1), ("day", 1), ("identity", 9)],
)
def test_an_unknown_or_inapplicable_transform_is_400(
    served: tuple[Any, LakecoreCatalog, Path], transform: str, source: int
) -> None:
    a, catalog, _ = served
    spec = {
        "spec-id": 0,
        "fields": [{"source-id": source, "field-id": 1000, "name": "p", "transform": transform}],
    }
    answer = create(a, "t", **{"partition-spec": spec})
    assert is_client_error(answer), answer.body
    assert create(a, "t").status == 200
    evolve = {
        "requirements": [],
        "updates": [{"action": "add-spec", "spec": {**spec, "spec-id": 1}}],
    }
    answer = call(a, "POST", "/v1/namespaces/db/tables/t", body=body(evolve))
    assert is_client_error(answer), answer.body
    good = {
        "spec-id": 0,
        "fields": [{"source-id": 2, "field-id": 1000, "name": "d", "transform": "day"}],
    }
    assert create(a, "t2", **{"partition-spec": good}).status == 200
    assert len(catalog.load_table(("db", "t")).metadata.partition_specs) == 1
