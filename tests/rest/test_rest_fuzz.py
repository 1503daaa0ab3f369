"""Property-based fuzzing of every route of the REST server (issue 44, "Tests").

Every route of ``lakecore.rest.routes.OPERATIONS``, ``/v1/config``, ``/v1/oauth/tokens``,
``/healthz``, ``/metrics`` and paths no route serves get hostile requests from hypothesis:
valid-shaped JSON with wrong types, huge numbers (``1e999``, 5,000-digit integers), deep
nesting, unknown update actions and requirement types, locations holding every odd character
(and real files: other tables' manifest lists, a FIFO, ``/etc/passwd``), partition specs with
bad transforms, schemas with bad ids, odd names; path segments with percent-escapes (``%00``,
``%0A``, ``%2F``), raw and escaped Unicode and ``..``; query values (``pageToken``,
``pageSize``, ``snapshots``, ``purgeRequested``, ``parent``, ``warehouse``); junk
``Authorization`` values, lying ``Content-Length`` headers and tokens; on a server with a token
file and on an anonymous one, two catalogs over one lakehouse as two server processes would be.

Properties, checked on every answer:

* **No 5xx**, except a *genuine* ``CommitStateUnknownException``: a 500 of that type, on a
  commit route (``updateTable``, ``commitTransaction``), during which the root write of the
  lakehouse commit failed (``RootWrites`` counts the failures of ``Storage.create_exclusive``).
  The fuzzed lakehouse is on a healthy local disk, so no root write fails and every
  ``CommitStateUnknownException`` here is a finding: the server said "unknown" about a commit
  whose outcome it knew. ``test_the_judge_of_genuine_unknowns`` shows the judge accepts the
  genuine one.
* **The spec's error model**: every error of the catalog API and ``/v1/config`` is
  ``{"error": {"message", "type", "code"}}`` with ``code`` the status and a one-line message;
  the token endpoint's are RFC 6749's ``{"error", "error_description"}``; HEAD answers have no
  body.
* **Nothing written outside the lakehouse**: the lakehouse lies five folders deep in a sandbox,
  with a folder beside it that hostile locations aim at (``..`` chains, absolute paths); the
  working directory is the sandbox too. After every request the sandbox outside the lakehouse
  root holds exactly what it held before.

The requests go to the app in-process (``tests/rest/asgi.py``): no socket, about 2 ms for a
refusal and 50 ms for a commit; the strategies are in ``tests/rest/hostile_requests.py``.
``make test`` runs ``DEFAULT_EXAMPLES`` requests per server (the file: 16 s of test time on the
shared 2-core machine under load); ``pytest -m slow tests/rest/test_rest_fuzz.py`` runs
``SLOW_EXAMPLES`` per server (about 7 minutes). Failing examples are kept in the repository's
``.hypothesis/`` (ignored by git) and tried first next time. What the fuzzing found is at the
end, each as a focused regression test, and in ``FINDINGS``, which the property always sends
first.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from lakecore.core.storage.facade import Storage
from lakecore.core.versions import latest_version
from lakecore.errors import StorageError, StorageTimeoutError
from lakecore.iceberg import LakecoreCatalog
from lakecore.lakehouse import Lakehouse
from lakecore.rest.app import app
from lakecore.rest.auth import Authenticator
from lakecore.rest.routes import OPERATIONS
from tests.rest.asgi import Answer, call
from tests.rest.auth_helpers import READER_SECRET, WRITER_SECRET
from tests.rest.hostile_requests import (
    SCHEMA,
    VIEW_SCHEMA,
    VIEW_VERSION,
    Request,
    encode_body,
    requests_for,
    resolve,
)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_EXAMPLES = 150
SLOW_EXAMPLES = 3000
# A request that takes this long in-process is a finding in itself (a freeze).
DEADLINE = timedelta(seconds=10)
COMMIT_ROUTES = frozenset(op.name for op in OPERATIONS if op.commit)
OAUTH_ERRORS = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
    }
)
ARROW = pa.schema([("id", pa.int64()), ("day", pa.date32())])


# -- the root writes, for judging "unknown" -----------------------------------------------------


class RootWrites:
    """Counts the root writes (``Storage.create_exclusive``) that failed, process-wide; with
    ``fail`` set every one fails as an ambiguous timeout would."""

    def __init__(self) -> None:
        self.failures = 0
        self.fail = False
        self.lock = threading.Lock()
        self.original = Storage.create_exclusive

    def install(self) -> None:
        watch = self

        def create_exclusive(storage: Storage, path: str, data: bytes) -> None:
            try:
                if watch.fail:
                    raise StorageTimeoutError(f"injected: writing {path} timed out")
                watch.original(storage, path, data)
            except StorageError:
                with watch.lock:
                    watch.failures += 1
                raise

        Storage.create_exclusive = create_exclusive  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        Storage.create_exclusive = self.original  # type: ignore[method-assign]


# -- the sandbox --------------------------------------------------------------------------------


@dataclass
class Sandbox:
    """A lakehouse deep in a folder of its own, two apps over it, and what the placeholders of
    the strategies stand for."""

    root: Path
    lake: Path
    outside: Path
    catalog: LakecoreCatalog
    apps: dict[str, Any]
    root_writes: RootWrites
    values: dict[str, Any] = field(default_factory=dict)
    outside_files: set[str] = field(default_factory=set)
    version: int = -1


def files_outside(sandbox: Path, lake: Path) -> set[str]:
    """Every file and folder under ``sandbox`` but not under ``lake``."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(sandbox):
        if Path(folder) == lake.parent:
            dirs[:] = [d for d in dirs if d != lake.name]
        found.update(os.path.join(folder, n) for n in (*dirs, *files))
    return found


def ensure_state(box: Sandbox) -> None:
    """Namespaces ``db`` and ``other``, tables ``db.t`` and ``db.u`` with a snapshot each, view
    ``db.v``: what
    the fuzzed requests name most often, made again when a request dropped them. Then the
    placeholders' values as they are now (read again only when the lakehouse changed)."""
    catalog = box.catalog
    version = latest_version(catalog.lakehouse.storage)
    if version == box.version:
        return
    for ns in ("db", "other"):
        if not catalog.namespace_exists((ns,)):
            catalog.create_namespace((ns,))
    for name in ("t", "u"):
        identifier = ("db", name)
        table = catalog.load_table(identifier) if catalog.table_exists(identifier) else None
        if table is None:
            table = catalog.create_table(identifier, ARROW)
        if table.current_snapshot() is None:
            table.append(pa.table({"id": [1, 2], "day": pa.array([None, None], pa.date32())}))
            table = catalog.load_table(identifier)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        data = next(iter(table.inspect.files().column("file_path").to_pylist()), "")
        prefix = name.upper()
        box.values.update(
            {
                f"${prefix}LOC": table.metadata.location,
                f"${prefix}META": table.metadata_location,
                f"${prefix}ML": snapshot.manifest_list,
                f"${prefix}DATA": data,
                f"${prefix}UUID": str(table.metadata.table_uuid),
                f"${prefix}SNAP": snapshot.snapshot_id,
            }
        )
    if not catalog.view_exists(("db", "v")):
        catalog.create_view(("db", "v"), VIEW_SCHEMA, VIEW_VERSION)
    view, view_location = catalog.load_view_metadata(("db", "v"))
    box.values.update({"$VLOC": view.location, "$VMETA": view_location, "$VUUID": view.view_uuid})
    box.version = latest_version(catalog.lakehouse.storage)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    root = tmp_path_factory.mktemp("fuzz")
    lake = root / "a" / "b" / "c" / "d" / "lake"
    lake.parent.mkdir(parents=True)
    Lakehouse.create(str(lake))
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the server's to read\n")
    os.mkfifo(outside / "fifo")
    catalog = LakecoreCatalog("lakecore", uri=str(lake))
    tokens = Authenticator(
        [("etl", "read-write", WRITER_SECRET), ("dashboards", "read-only", READER_SECRET)]
    )
    apps = {
        "tokens": app(catalog, authenticator=tokens),
        # Another catalog object: a second server process on the same lakehouse.
        "anonymous": app(LakecoreCatalog("lakecore", uri=str(lake))),
    }
    jwt = tokens.token_response(
        {"grant_type": "client_credentials", "client_id": "etl", "client_secret": WRITER_SECRET},
        None,
    ).body["access_token"]
    warehouse = catalog.warehouse
    box = Sandbox(root, lake, outside, catalog, apps, RootWrites())
    ensure_state(box)
    fifo = Path(warehouse.removeprefix("file://")) / "db" / "fifo.avro"
    os.mkfifo(fifo)
    catalog.create_namespace(("db", "sub"))
    paged = call(
        apps["tokens"],
        "GET",
        "/v1/namespaces",
        query="pageToken=&pageSize=1",
        headers={"Authorization": f"Bearer {WRITER_SECRET}"},
    ).json()
    box.values.update(
        {
            "$WH": warehouse,
            "$WHP": warehouse.removeprefix("file://"),
            "$LAKE": catalog.lakehouse.storage.root_uri.rstrip("/"),
            "$OUT": f"file://{outside}",
            "$OUTP": str(outside),
            "$FIFO": f"file://{fifo}",
            "$OUTFIFO": f"file://{outside / 'fifo'}",
            "$WRITER": WRITER_SECRET,
            "$READER": READER_SECRET,
            "$JWT": jwt,
            "$PAGETOKEN": paged["next-page-token"],
        }
    )
    box.outside_files = files_outside(root, lake)
    cwd = os.getcwd()
    os.chdir(root)  # a relative path, if anything wrote one, lands in the sandbox
    box.root_writes.install()
    try:
        yield box
    finally:
        box.root_writes.uninstall()
        os.chdir(cwd)


# -- sending and judging ---------------------------------------------------------------------------


def send(box: Sandbox, server: str, request: Request) -> tuple[Answer, bytes, int]:
    """The answer, the body sent, and how many root writes failed meanwhile."""
    values = box.values
    body = encode_body(request.body, values)
    headers: list[tuple[bytes, bytes]] = []
    for key, value in request.headers:
        if isinstance(value, str) and value.startswith("$LEN"):
            value = str(max(0, len(body) + int(value.removeprefix("$LEN"))))
        if isinstance(value, str):
            value = str(resolve(value, values)).encode("latin-1", "replace")
        headers.append((key.encode(), value))
    if body and not any(k == b"content-length" for k, _ in headers):
        headers.append((b"content-length", str(len(body)).encode()))
    query = request.query
    if b"%24" in query or b"$" in query:
        query = str(resolve(query.decode("latin-1"), values)).encode("latin-1", "replace")
    before = box.root_writes.failures
    answer = call(
        box.apps[server], request.method, request.path, body=body, headers=headers, query=query
    )
    return answer, body, box.root_writes.failures - before


def problems_of(request: Request, answer: Answer, root_write_failures: int) -> list[str]:
    """What is wrong with ``answer`` (see the module docstring); empty when nothing is."""
    problems: list[str] = []
    status = answer.status
    error: Any = None
    if status >= 400 and request.method != "HEAD" and answer.body:
        try:
            error = answer.json()
        except ValueError:
            error = None
    if status >= 500:
        genuine = (
            status == 500
            and isinstance(error, dict)
            and error.get("error", {}).get("type") == "CommitStateUnknownException"
            and request.operation in COMMIT_ROUTES
            and root_write_failures > 0
        )
        if not genuine:
            problems.append(f"{status} (not a genuine CommitStateUnknownException)")
    if status < 400:
        return problems
    if request.method == "HEAD":
        if answer.body:
            problems.append("a HEAD answer with a body")
        return problems
    if request.operation == "oauthTokens" and request.method == "POST" and status in (400, 401):
        if not (
            isinstance(error, dict)
            and error.get("error") in OAUTH_ERRORS
            and isinstance(error.get("error_description"), str)
        ):
            problems.append(f"not an RFC 6749 error: {answer.body[:200]!r}")
        return problems
    model = error.get("error") if isinstance(error, dict) else None
    if not (
        isinstance(model, dict)
        and set(model) == {"message", "type", "code"}
        and model["code"] == status
        and isinstance(model["type"], str)
        and model["type"]
        and isinstance(model["message"], str)
        and model["message"].strip()
        and "\n" not in model["message"]
    ):
        problems.append(f"not the spec's error model: {answer.body[:300]!r}")
    if answer.headers.get("content-type") != "application/json":
        problems.append(f"content-type {answer.headers.get('content-type')!r}")
    return problems


def check(box: Sandbox, server: str, request: Request) -> Answer:
    ensure_state(box)
    answer, body, failures = send(box, server, request)
    problems = problems_of(request, answer, failures)
    outside = files_outside(box.root, box.lake)
    if outside != box.outside_files:
        problems.append(
            f"files written outside the lakehouse: {sorted(outside - box.outside_files)}"
        )
    assert not problems, (
        f"{request.method} {request.path!r}?{request.query!r} ({request.operation}) "
        f"headers={request.headers!r} body={body[:600]!r}\n-> {answer.status} "
        f"{answer.body[:600]!r}\n" + "\n".join(problems)
    )
    return answer


# -- the properties ------------------------------------------------------------------------------

FUZZ_SETTINGS = settings(
    deadline=DEADLINE,
    database=DirectoryBasedExampleDatabase(str(REPO / ".hypothesis" / "examples")),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
WRITER = (("authorization", "Bearer $WRITER"),)
# What the fuzzing found (each a 500 before its fix), sent first whatever hypothesis draws.
FINDINGS = [
    # A set-statistics update without its statistics: pyiceberg's validator raised KeyError.
    Request(
        "updateTable",
        "POST",
        b"/v1/namespaces/db/tables/t",
        headers=WRITER,
        body={"requirements": [], "updates": [{"action": "set-statistics"}]},
    ),
    # A create transaction that adds no schema: pyiceberg raised StopIteration.
    Request(
        "updateTable",
        "POST",
        b"/v1/namespaces/db/tables/new",
        headers=WRITER,
        body={"requirements": [{"type": "assert-create"}], "updates": []},
    ),
    # A query byte that is not UTF-8 on a path Starlette would redirect (/v1 to /v1/): its
    # URL decoded the query as UTF-8, UnicodeDecodeError, a plain-text 500.
    Request("unmatched", "GET", b"/v1", query=b"\x80", headers=WRITER),
    Request(
        "commitTransaction",
        "POST",
        b"/v1/transactions/commit",
        headers=WRITER,
        body={
            "table-changes": [
                {
                    "identifier": {"namespace": ["db"], "name": "new"},
                    "requirements": [{"type": "assert-create"}],
                    "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
                }
            ]
        },
    ),
    # A fixed type longer than an index can be, with a default: pyiceberg's validator
    # compared the default's length with it, OverflowError, a 500.
    Request(
        "createTable",
        "POST",
        b"/v1/namespaces/db/tables",
        headers=WRITER,
        body={
            "name": "t",
            "schema": {
                "type": "struct",
                "schema-id": 0,
                "fields": [
                    {
                        "id": 0,
                        "name": "t",
                        "type": "fixed[99999999999999999999]",
                        "required": False,
                        "initial-default": [],
                    }
                ],
            },
        },
    ),
    # A struct default pyiceberg cannot read, in a struct with a field named "a\nb": the
    # validator's TypeError, quoted in the 400, named the type on two lines.
    Request(
        "createTable",
        "POST",
        b"/v1/namespaces/db/tables",
        headers=WRITER,
        body={
            "name": "t",
            "schema": {
                "type": "struct",
                "schema-id": 0,
                "fields": [
                    {
                        "id": 0,
                        "name": "t",
                        "type": {
                            "type": "struct",
                            "fields": [
                                {"id": 0, "name": "a\nb", "type": "boolean", "required": False}
                            ],
                        },
                        "required": False,
                        "initial-default": [],
                    }
                ],
            },
        },
    ),
    # A view version whose summary has a key with a line break and a value that is no
    # string: the 400's message named the key as it was, on two lines.
    Request(
        "createView",
        "POST",
        b"/v1/namespaces/db/views",
        headers=WRITER,
        body={
            "name": "t",
            "schema": SCHEMA,
            "view-version": {
                "version-id": 0,
                "schema-id": 0,
                "timestamp-ms": 0,
                "summary": {"\n": 0},
                "representations": [],
                "default-namespace": [],
            },
        },
    ),
]


@pytest.mark.parametrize("server", ["tokens", "anonymous"])
@settings(FUZZ_SETTINGS, max_examples=DEFAULT_EXAMPLES)
@given(data=st.data())
@example(data=None)
def test_every_route_answers_hostile_requests_with_a_4xx_and_writes_nothing_outside(
    sandbox: Sandbox, server: str, data: st.DataObject | None
) -> None:
    if data is None:  # the findings first, whatever hypothesis draws
        for request in FINDINGS:
            headers = request.headers if server == "tokens" else ()
            check(sandbox, server, replace(request, headers=headers))
        return
    request = data.draw(requests_for(server), label="request")
    answer = check(sandbox, server, request)
    event(f"{request.operation} {answer.status}")


@pytest.mark.slow
@pytest.mark.parametrize("server", ["tokens", "anonymous"])
@settings(FUZZ_SETTINGS, max_examples=SLOW_EXAMPLES)
@given(data=st.data())
def test_every_route_under_many_more_hostile_requests(
    sandbox: Sandbox, server: str, data: st.DataObject
) -> None:
    check(sandbox, server, data.draw(requests_for(server), label="request"))


def test_the_judge_of_genuine_unknowns(sandbox: Sandbox) -> None:
    """The property above would accept any 500 CommitStateUnknownException if the judge did
    not look: a commit whose root write fails is unknown and genuine, the same answer with no
    failed root write is not, and a 500 that is not CommitStateUnknownException never is."""
    ensure_state(sandbox)
    commit = Request(
        "updateTable",
        "POST",
        b"/v1/namespaces/db/tables/t",
        headers=(("authorization", "Bearer $WRITER"),),
        body={
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"k": "v1"}}],
        },
    )
    sandbox.root_writes.fail = True
    try:
        answer, _, failures = send(sandbox, "tokens", commit)
    finally:
        sandbox.root_writes.fail = False
    assert (answer.status, answer.error_type) == (500, "CommitStateUnknownException")
    assert failures > 0 and problems_of(commit, answer, failures) == []
    assert problems_of(commit, answer, 0) != []
    load = Request("loadTable", "GET", b"/v1/namespaces/db/tables/t")
    assert problems_of(load, answer, failures) != []
    internal = Answer(
        500,
        {"content-type": "application/json"},
        json.dumps(
            {
                "error": {
                    "message": "unexpected KeyError",
                    "type": "InternalServerError",
                    "code": 500,
                }
            }
        ).encode(),
    )
    assert problems_of(commit, internal, failures) != []


def test_the_strategies_reach_every_route_and_the_catalog(sandbox: Sandbox) -> None:
    """The properties would hold vacuously if every request were refused at the door: plain
    examples of the strategies' own kind get through to the catalog and change it."""
    ensure_state(sandbox)
    writer = (("authorization", "Bearer $WRITER"),)
    location = sandbox.values["$WH"] + "/db/fuzz-reach"
    answers = [
        check(
            sandbox,
            "tokens",
            Request(
                "createNamespace",
                "POST",
                b"/v1/namespaces",
                headers=writer,
                body={"namespace": ["reach"]},
            ),
        ),
        check(
            sandbox,
            "tokens",
            Request(
                "createTable",
                "POST",
                b"/v1/namespaces/reach/tables",
                headers=writer,
                body={"name": "r", "schema": SCHEMA, "location": location},
            ),
        ),
        check(
            sandbox,
            "tokens",
            Request(
                "updateTable",
                "POST",
                b"/v1/namespaces/reach/tables/r",
                headers=writer,
                body={
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
                },
            ),
        ),
        check(sandbox, "anonymous", Request("loadTable", "GET", b"/v1/namespaces/reach/tables/r")),
        check(
            sandbox,
            "anonymous",
            Request(
                "dropTable",
                "DELETE",
                b"/v1/namespaces/reach/tables/r",
                query=b"purgeRequested=true",
            ),
        ),
        check(sandbox, "anonymous", Request("dropNamespace", "DELETE", b"/v1/namespaces/reach")),
    ]
    assert [a.status for a in answers] == [200, 200, 200, 200, 204, 204]
    assert answers[3].json()["metadata"]["properties"]["k"] == "v"
    assert not sandbox.catalog.namespace_exists(("reach",))


# -- what the fuzzing found ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "update",
    [
        {"action": "set-statistics"},
        {"action": "set-statistics", "snapshot-id": 1},
        {"action": "set-statistics", "statistics": None},
    ],
)
def test_an_update_missing_what_its_validator_indexes_is_400(
    sandbox: Sandbox, update: dict[str, Any]
) -> None:
    """Found by the fuzzing: pyiceberg's ``SetStatisticsUpdate`` validator reads
    ``data["statistics"]`` unchecked, so ``{"action": "set-statistics"}`` was 500 ``KeyError``
    (with a traceback in the log). Any exception a validator raises on the client's document is
    the document's fault: 400."""
    ensure_state(sandbox)
    request = Request(
        "updateTable",
        "POST",
        b"/v1/namespaces/db/tables/t",
        headers=WRITER,
        body={"requirements": [], "updates": [update]},
    )
    answer = check(sandbox, "tokens", request)
    assert (answer.status, answer.error_type) == (400, "BadRequestException"), answer.body
    assert "invalid CommitTable request" in answer.json()["error"]["message"]


@pytest.mark.parametrize("route", ["updateTable", "commitTransaction"])
def test_a_create_transaction_without_a_schema_is_400_and_creates_nothing(
    sandbox: Sandbox, route: str
) -> None:
    """Found by the fuzzing: ``{"requirements": [{"type": "assert-create"}], "updates": []}``
    was 500 "updateTable raised StopIteration": pyiceberg builds a created table's metadata
    from the updates and looks up its schema, spec and sort order with ``next()``. Now the
    catalog says what a create must add (400), and no table appears.

    ``db.new`` must not exist first: the fuzzing (sharing this sandbox) may have created it,
    and a create of a name that is taken is a 409 before the updates are read."""
    new = ("db", "new")
    if sandbox.catalog.table_exists(new):
        sandbox.catalog.drop_table(new)
    if sandbox.catalog.view_exists(new):
        sandbox.catalog.drop_view(new)
    ensure_state(sandbox)
    request = next(r for r in FINDINGS[1:] if r.operation == route and r.body)
    answer = check(sandbox, "tokens", request)
    assert (answer.status, answer.error_type) == (400, "IllegalArgumentException"), answer.body
    assert "a create must add a schema" in answer.json()["error"]["message"]
    assert not sandbox.catalog.table_exists(new)


@pytest.mark.parametrize(
    "path, query",
    [(b"/v1", b"\x80"), (b"/healthz/", b"\xff"), (b"/v1", b""), (b"/metrics/", b"")],
)
def test_a_path_starlette_would_redirect_is_a_json_404_whatever_its_query(
    sandbox: Sandbox, path: bytes, query: bytes
) -> None:
    """Found by the fuzzing: ``GET /v1?\\x80`` was a plain-text 500 (``UnicodeDecodeError``):
    Starlette's redirect of ``/v1`` to ``/v1/`` builds a URL that decodes the query as UTF-8.
    uvicorn refuses such a request line itself (400), but the app is documented to run under
    any ASGI server, and ASGI passes the query as bytes. No redirects now: a JSON 404."""
    request = Request("unmatched", "GET", path, query=query, headers=WRITER)
    answer = check(sandbox, "tokens", request)
    assert (answer.status, answer.error_type) == (404, "NotFoundException"), answer.body


def test_a_bad_field_under_a_key_with_a_line_break_is_a_one_line_400(sandbox: Sandbox) -> None:
    """Found by the fuzzing of the view routes: a ``createView`` whose view version's summary
    maps ``"\\n"`` to a number was a 400 whose message named the field by its key as sent,
    a line break in the middle of the spec's one-line message. The key is shown escaped."""
    ensure_state(sandbox)
    request = next(r for r in FINDINGS if r.operation == "createView")
    answer = check(sandbox, "tokens", request)
    assert (answer.status, answer.error_type) == (400, "BadRequestException"), answer.body
    message = answer.json()["error"]["message"]
    assert "\n" not in message and "summary.'\\n'" in message, message
    assert not sandbox.catalog.view_exists(("db", "t"))


def test_a_fixed_type_no_index_can_hold_with_a_default_is_400(sandbox: Sandbox) -> None:
    """Found by the fuzzing (``-m slow``): a ``createTable`` whose field is
    ``fixed[99999999999999999999]`` with an ``initial-default`` was 500 ``OverflowError``:
    pyiceberg's validator compares the default's length with the type's, which no index can
    hold. The document is at fault: 400, and no table."""
    ensure_state(sandbox)
    request = next(r for r in FINDINGS if r.operation == "createTable")
    answer = check(sandbox, "tokens", request)
    assert (answer.status, answer.error_type) == (400, "BadRequestException"), answer.body
    assert "OverflowError" in answer.json()["error"]["message"]


def test_a_validators_message_quoting_a_line_break_is_one_line(sandbox: Sandbox) -> None:
    """Found by the slow fuzzing: a 400 quoting pyiceberg's ``TypeError`` about a struct
    holding a field named ``"a\\nb"`` carried the line break. Every error message is made
    one line where it is made (``RestError``), whatever it quotes."""
    ensure_state(sandbox)
    request = [r for r in FINDINGS if r.operation == "createTable"][1]
    answer = check(sandbox, "tokens", request)
    assert (answer.status, answer.error_type) == (400, "BadRequestException"), answer.body
    message = answer.json()["error"]["message"]
    assert "\n" not in message and "a b" in message, message
