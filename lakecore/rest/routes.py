"""The Iceberg REST catalog's routes over any pyiceberg ``Catalog``.

Rules:

* Every route of ``OPERATIONS`` is served under ``/v1/{prefix}/...`` and, for the live catalog
  (no prefix), ``/v1/...``; ``ENDPOINTS`` lists them for ``GET /v1/config`` exactly as served
  (``POST /v1/{prefix}/transactions/commit`` only for a catalog with ``commit_tables``, such as
  ``LakecoreCatalog``; the view routes only for a catalog with ``commit_view``, which
  ``LakecoreCatalog`` has). Scan planning and remote signing are not served and not listed.
* Views: ``listViews``, ``createView``, ``loadView``, ``replaceView`` (a ``CommitViewRequest``:
  ``assert-view-uuid`` and the view spec's updates, ``lakecore.iceberg.views``), ``dropView``,
  ``viewExists``, ``renameView`` and ``registerView``; answers are ``LoadViewResult``
  (``metadata-location``, ``metadata``, ``config``). The spec's multi-table transactions hold
  tables only, so a view never commits with tables over REST.
* Paths are matched on the raw (still percent-encoded) path, segment by segment, and each
  segment is decoded on its own: a table name holding ``/`` (sent as ``%2F``) stays one name. A
  namespace segment is split on the unit separator ``0x1F`` (``%1F``), the spec's default
  ``namespace-separator``; so is ``parent``.
* Lists are paged only when the request carries ``pageToken`` (empty for the first page), as
  the spec says; ``lakecore.rest.paging`` has the rules.
* ``loadTable``: ``snapshots=all`` (the default) or ``refs`` (only snapshots that a branch or
  tag references). Answers carry an ``ETag`` (of the metadata location and the snapshots
  mode) and a matching ``If-None-Match`` gets 304.
* ``updateTable`` loads the table's current metadata and hands it with the request's
  requirements and updates to ``Catalog.commit_table``, which checks the requirements against
  it: a writer that lost a race fails its ``assert-ref-snapshot-id`` (409
  ``CommitFailedException``) and retries on fresh metadata, so no commit is lost. A request
  with ``assert-create`` commits a staged create (``createTable`` with ``stage-create``).
* Answers are pyiceberg's REST models (``TableResponse``, ``CommitTableResponse``,
  ``NamespaceResponse``, ``ListTablesResponse``, ...); ``GET /v1/config``'s answer is plain
  JSON, as pyiceberg's ``ConfigResponse`` would write its endpoints as objects, not the spec's
  ``"METHOD /path"`` strings.
* ``loadNamespaceMetadata`` of a ``LakecoreCatalog`` names the namespace's ``location`` (where
  its tables go by default) when the namespace has none of its own, as Iceberg's own catalogs
  do; Trino creates tables staged, at a location of its own inside it, only when it has one.
* A staged ``createTable`` answers the metadata the table would start with (one schema, spec
  and sort order), not pyiceberg's create transaction's, which lists each of them twice.
* A route is a *write* when it changes the catalog; writes need a read-write principal and a
  live prefix (403 otherwise).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

import numpy as np
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.catalog import LOCATION, Catalog
from pyiceberg.catalog.rest import (
    ListNamespaceResponse,
    ListTableResponseEntry,
    ListTablesResponse,
    ListViewResponseEntry,
    ListViewsResponse,
    NamespaceResponse,
    UpdateNamespacePropertiesResponse,
)
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import IcebergBaseModel, Identifier
from pyiceberg.view.metadata import ViewMetadata

from lakecore.core.sized_lru import SizedLRU
from lakecore.iceberg.catalog import LakecoreCatalog
from lakecore.iceberg.storage_settings import is_s3
from lakecore.maintenance.tables.table_folders import table_folders
from lakecore.rest.auth import Principal
from lakecore.rest.credentials import CredentialVendor
from lakecore.rest.defaults import MAX_JSON_DEPTH
from lakecore.rest.errors import RestError, bad_request
from lakecore.rest.models import (
    CommitTableBody,
    CommitTransactionBody,
    CommitViewBody,
    CreateNamespaceBody,
    CreateTableBody,
    CreateViewBody,
    RegisterTableBody,
    RegisterViewBody,
    RenameTableBody,
    ReportMetricsBody,
    UpdateNamespacePropertiesBody,
)
from lakecore.rest.paging import Listings
from lakecore.rest.warehouses import Target

NAMESPACE_SEPARATOR: Final = "\x1f"
PREFIX: Final = "{prefix}"


@dataclass
class Call:
    """One request, as a route handler sees it. ``scope`` names the catalog it reaches (the
    prefix), for page tokens that are valid there only."""

    target: Target
    principal: Principal
    params: dict[str, str]
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes
    listings: Listings
    scope: str = ""
    answers: SizedLRU[tuple[str, str], bytes] = field(
        default_factory=lambda: SizedLRU[tuple[str, str], bytes](0)
    )
    access: TableAccess = field(default_factory=lambda: TableAccess({}, None))


@dataclass(frozen=True)
class TableAccess:
    """What a table's answers tell a client about reaching its files: the client properties
    (``config``), and the credential vendor (``lakecore.rest.credentials``) when the server has
    one and the client asked for vended credentials."""

    client_properties: dict[str, str]
    vendor: CredentialVendor | None
    delegated: bool = False

    def credentials(
        self, call: Call, metadata: TableMetadata, *, asked: bool
    ) -> list[dict[str, Any]]:
        """The ``storage-credentials`` of a table's answer: none unless asked for (the
        ``X-Iceberg-Access-Delegation`` header, or the credentials route) and vendable (a
        vendor, a table on S3). Read access for a read-only principal or a time-travel
        prefix."""
        if self.vendor is None or not asked:
            return []
        folders = table_folders(metadata.location, metadata.properties)
        if not all(is_s3(folder) for folder in folders):
            return []
        write = call.principal.may_write and call.target.version is None
        vended = self.vendor.credentials_for(folders, write=write, principal=call.principal.name)
        return [{"prefix": vended.prefix, "config": vended.config}]


def asks_for_vended_credentials(headers: Mapping[str, str]) -> bool:
    """Whether ``X-Iceberg-Access-Delegation`` (a comma-separated list) names them."""
    value = headers.get("x-iceberg-access-delegation") or ""
    return "vended-credentials" in {part.strip().lower() for part in value.split(",")}


def listing_scope(prefix: str | None) -> str:
    """What a page token records of the catalog it lists: the prefix (live or a version)."""
    return prefix or ""


@dataclass
class Reply:
    status: int
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Operation:
    """A route of the spec: its ``operationId``, method, path template and handler."""

    name: str
    method: str
    path: str
    handler: Handler
    write: bool = False
    commit: bool = False

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.path.strip("/").split("/"))

    @property
    def endpoint(self) -> str:
        return f"{self.method} {self.path}"


# -- helpers ------------------------------------------------------------------------------------


def json_reply(
    payload: Any, status: int = 200, headers: dict[str, str] | None = None, keep_nulls: bool = False
) -> Reply:
    """``payload`` (a pyiceberg model, or plain JSON data) as the body. pyiceberg's models leave
    out null fields; ``keep_nulls`` keeps them (a last page's ``next-page-token`` is null)."""
    if isinstance(payload, IcebergBaseModel):
        data = payload.model_dump_json(exclude_none=not keep_nulls)
    elif isinstance(payload, BaseModel):
        data = payload.model_dump_json(by_alias=True, exclude_none=not keep_nulls)
    else:
        data = json.dumps(payload)
    return Reply(status, data.encode("utf-8"), headers or {})


def parse_body(call: Call, model: type[Any]) -> Any:
    """The body as ``model``. Raises RestError 400 for malformed JSON or a wrong shape."""
    if not call.body:
        raise bad_request("the request needs a JSON body")
    refuse_deep_json(call.body)
    try:
        document = json.loads(call.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"malformed JSON body: {exc}") from None
    except RecursionError:
        raise bad_request(f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    try:
        return model.model_validate(document)
    except RecursionError:
        raise bad_request(f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(_one_line(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise bad_request(
            f"invalid {model.__name__.removesuffix('Body')} request: {problems}"
        ) from None
    except (LookupError, TypeError, AttributeError, OverflowError) as exc:
        # pyiceberg's own validators index the document unchecked ({"action": "set-statistics"}
        # without "statistics" raised KeyError, a 500), or take its numbers as lengths (a
        # "fixed[99999999999999999999]" field's default, OverflowError): the document is at
        # fault, nothing else.
        raise bad_request(
            f"invalid {model.__name__.removesuffix('Body')} request: {type(exc).__name__} {exc}"
        ) from None


def _one_line(part: object) -> str:
    """A part of a JSON path as a message names it: a key the client chose may hold a line
    break or a control character, which the one-line message must not (shown escaped)."""
    text = str(part)
    return text if text.isprintable() else ascii(text)


_JSON_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def refuse_deep_json(body: bytes) -> None:
    """400 for a body nested deeper than ``MAX_JSON_DEPTH``: parsers recurse per level (a
    thousand ``[`` exhausted Python's stack, a 500). Counting brackets costs two passes in C;
    only a body with more brackets than the limit has its real depth measured, strings
    removed, in C and numpy too (a 16 MiB body of brackets takes tens of milliseconds)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    codes = np.frombuffer(brackets, dtype=np.uint8)
    # '[' and '{' have bit 1 set, ']' and '}' do not: +1 and -1, summed as they come.
    steps = ((codes >> 1) & 1).astype(np.int32) * 2 - 1
    if steps.size and int(np.cumsum(steps, dtype=np.int32).max()) > MAX_JSON_DEPTH:
        raise bad_request(f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels")


def namespace_of(text: str) -> Identifier:
    parts = tuple(text.split(NAMESPACE_SEPARATOR))
    if any(not p for p in parts):
        raise bad_request(f"namespace {text!r} has an empty level")
    return parts


def table_of(call: Call) -> Identifier:
    return (*namespace_of(call.params["namespace"]), call.params["table"])


def etag_of(metadata_location: str | None, mode: str) -> str:
    digest = hashlib.sha256(f"{metadata_location}\0{mode}".encode()).hexdigest()[:32]
    return f'"{digest}"'


def only_referenced_snapshots(metadata: TableMetadata) -> TableMetadata:
    referenced = {ref.snapshot_id for ref in metadata.refs.values()}
    return metadata.model_copy(
        update={"snapshots": [s for s in metadata.snapshots if s.snapshot_id in referenced]}
    )


def metadata_json(call: Call, metadata: TableMetadata, location: str | None, mode: str) -> bytes:
    """The metadata as a ``TableResponse`` writes it (``snapshots=refs``: only the snapshots a
    ref names). A metadata file never changes, so the text of one is kept
    (``Call.answers``, by location and mode): a load of a table that did not change
    serialises nothing."""
    key = (location or "", mode)
    cached = call.answers.get(key) if location is not None else None
    if cached is not None:
        return cached[0]
    if mode == "refs":
        metadata = only_referenced_snapshots(metadata)
    text = metadata.model_dump_json(exclude_none=True).encode("utf-8")
    if location is not None:
        call.answers.put(key, text, len(text))
    return text


def table_reply(
    call: Call, metadata: TableMetadata, metadata_location: str | None, mode: str = "all"
) -> Reply:
    """A ``TableResponse`` (``metadata-location``, ``metadata``, ``config``,
    ``storage-credentials``), its metadata from ``metadata_json``, with an ETag."""
    etag = etag_of(metadata_location, mode)
    if metadata_location is not None and call.headers.get("if-none-match") == etag:
        return Reply(304, None, {"ETag": etag})
    head = {} if metadata_location is None else {"metadata-location": metadata_location}
    credentials = call.access.credentials(
        call, metadata, asked=asks_for_vended_credentials(call.headers)
    )
    tail = {"config": call.access.client_properties, "storage-credentials": credentials}
    body = b"".join(
        (
            json.dumps(head).encode("utf-8")[:-1],
            b", " if head else b"",
            b'"metadata": ',
            metadata_json(call, metadata, metadata_location, mode),
            b", ",
            json.dumps(tail).encode("utf-8")[1:],
        )
    )
    headers = {"ETag": etag}
    if credentials:  # never kept by a cache between client and server
        headers["Cache-Control"] = "no-store"
    return Reply(200, body, headers)


def load_credentials(call: Call) -> Reply:
    """``GET .../tables/{table}/credentials``: the table's vended credentials (none when the
    server vends none)."""
    table = call.target.catalog.load_table(table_of(call))
    credentials = call.access.credentials(call, table.metadata, asked=True)
    headers = {"Cache-Control": "no-store"} if credentials else {}
    return json_reply({"storage-credentials": credentials}, headers=headers)


# -- namespaces ---------------------------------------------------------------------------------


def list_namespaces(call: Call) -> Reply:
    parent_text = call.query.get("parent", "")
    parent: Identifier = namespace_of(parent_text) if parent_text else ()

    def listed() -> list[str]:
        found = call.target.catalog.list_namespaces(parent)
        return [NAMESPACE_SEPARATOR.join(ns) for ns in found]

    names, token = call.listings.page(
        listed, call.query, f"namespaces\0{call.scope}\0{parent_text}"
    )
    response = ListNamespaceResponse(
        namespaces=[tuple(n.split(NAMESPACE_SEPARATOR)) for n in names],
        next_page_token=token,  # type: ignore[call-arg]  # by field name, as pyiceberg does
    )
    return json_reply(response, keep_nulls=True)


def create_namespace(call: Call) -> Reply:
    body: CreateNamespaceBody = parse_body(call, CreateNamespaceBody)
    # An empty name or level is the catalog's to refuse, with its own error (LakecoreCatalog:
    # NoSuchNamespaceError, 404 NoSuchNamespaceException), as a direct caller would get it.
    call.target.catalog.create_namespace(tuple(body.namespace), body.properties)
    return json_reply(
        NamespaceResponse(namespace=tuple(body.namespace), properties=body.properties)
    )


def load_namespace(call: Call) -> Reply:
    namespace = namespace_of(call.params["namespace"])
    catalog = call.target.catalog
    properties = dict(catalog.load_namespace_properties(namespace))
    if LOCATION not in properties and isinstance(catalog, LakecoreCatalog):
        # Where the namespace's tables go by default, as Iceberg's own catalogs say. Trino
        # needs it: without a namespace location it creates a table outright, not staged, and
        # then refuses it because its location is not empty (the new metadata file is there).
        properties[LOCATION] = catalog.namespace_location(namespace)
    return json_reply(NamespaceResponse(namespace=namespace, properties=properties))


def namespace_exists(call: Call) -> Reply:
    namespace = namespace_of(call.params["namespace"])
    if call.target.catalog.namespace_exists(namespace):
        return Reply(204)
    return Reply(404)


def drop_namespace(call: Call) -> Reply:
    call.target.catalog.drop_namespace(namespace_of(call.params["namespace"]))
    return Reply(204)


def update_namespace_properties(call: Call) -> Reply:
    body: UpdateNamespacePropertiesBody = parse_body(call, UpdateNamespacePropertiesBody)
    overlap = set(body.removals) & set(body.updates)
    if overlap:
        raise RestError(
            422,
            "UnprocessableEntityException",
            f"properties {', '.join(sorted(overlap))} are both removed and updated",
        )
    summary = call.target.catalog.update_namespace_properties(
        namespace_of(call.params["namespace"]), set(body.removals), body.updates
    )
    response = UpdateNamespacePropertiesResponse(
        updated=summary.updated, removed=summary.removed, missing=summary.missing or []
    )
    return json_reply(response)


# -- tables -------------------------------------------------------------------------------------


def names_page(
    call: Call,
    kind: str,
    namespace: Identifier,
    list_in: Callable[[Identifier], list[Identifier]],
) -> tuple[list[str], str | None]:
    """One page of the names of ``namespace``'s tables or views (``kind``) and the next page's
    token; the listing's scope is the kind, the warehouse and the namespace as the path gave
    it, so a token of one listing never pages another."""
    return call.listings.page(
        lambda: [identifier[-1] for identifier in list_in(namespace)],
        call.query,
        f"{kind}\0{call.scope}\0{call.params['namespace']}",
    )


def list_tables(call: Call) -> Reply:
    namespace = namespace_of(call.params["namespace"])
    chunk, token = names_page(call, "tables", namespace, call.target.catalog.list_tables)
    response = ListTablesResponse(
        identifiers=[ListTableResponseEntry(namespace=namespace, name=n) for n in chunk],
        next_page_token=token,  # type: ignore[call-arg]  # by field name, as pyiceberg does
    )
    return json_reply(response, keep_nulls=True)


def create_table(call: Call) -> Reply:
    body: CreateTableBody = parse_body(call, CreateTableBody)
    identifier = (*namespace_of(call.params["namespace"]), body.name)
    catalog = call.target.catalog
    arguments: dict[str, Any] = {
        "schema": body.table_schema,
        "location": body.location or None,
        "partition_spec": body.partition_spec or UNPARTITIONED_PARTITION_SPEC,
        "sort_order": body.write_order or UNSORTED_SORT_ORDER,
        "properties": body.properties,
    }
    if body.stage_create:
        # Nothing is written: the metadata the table would start with; the client commits it
        # (with assert-create) through updateTable. Not the transaction's table_metadata: that
        # is the start plus the transaction's own first changes (AddSchema, AddSpec, ...), so
        # it lists schema 0, spec 0 and sort order 0 twice, which Java clients refuse ("Multiple
        # entries with same key": Trino's CREATE TABLE, Spark's CREATE TABLE AS SELECT).
        staged = catalog.create_table_transaction(identifier, **arguments)
        first = staged.table_metadata
        start = new_table_metadata(
            schema=first.schema(),
            partition_spec=first.spec(),
            sort_order=first.sort_order_by_id(first.default_sort_order_id) or UNSORTED_SORT_ORDER,
            location=first.location,
            properties={**first.properties, "format-version": str(first.format_version)},
            table_uuid=first.table_uuid,
        )
        make_local_metadata_folder(start.location)
        return table_reply(call, start, None)
    table = catalog.create_table(identifier, **arguments)
    return table_reply(call, table.metadata, table.metadata_location)


def make_local_metadata_folder(location: str) -> None:
    """Make ``<location>/metadata`` of a staged table on a local file system. DuckDB (1.5)
    writes a staged table's first manifest there without making the folder, which does not
    exist until the create is committed, so ``BEGIN; CREATE TABLE; INSERT; COMMIT`` failed on
    a local warehouse. Object stores have no folders: nothing to do there."""
    # The location passed the catalog's canonical rule (no escapes, no '..'): its path is the
    # folder's name as it is, never decoded.
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") and parsed.path:
        Path(parsed.path, "metadata").mkdir(parents=True, exist_ok=True)


def load_table(call: Call) -> Reply:
    mode = call.query.get("snapshots") or "all"
    if mode not in ("all", "refs"):
        raise bad_request(f"snapshots={mode!r}: use all or refs")
    table = call.target.catalog.load_table(table_of(call))
    return table_reply(call, table.metadata, table.metadata_location, mode)


def table_exists(call: Call) -> Reply:
    return Reply(204 if call.target.catalog.table_exists(table_of(call)) else 404)


def placeholder_table(catalog: Catalog, identifier: Identifier) -> Table:
    """What ``commit_table`` is handed for a staged create: a table named ``identifier`` that
    does not exist yet (catalogs then build its metadata from the updates alone)."""
    metadata = new_table_metadata(
        Schema(), UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location="", properties={}
    )
    return Table(identifier, metadata, "", load_file_io(dict(catalog.properties)), catalog)


def commit_one(
    catalog: Catalog, identifier: Identifier, change: CommitTableBody
) -> CommitTableResponse:
    """Commit one table's change. A catalog with ``commit_changes`` (``LakecoreCatalog``)
    takes it by identifier and reads the current metadata itself, in its group committer's
    turn; any other gets ``commit_table`` with the table loaded first."""
    commit_changes = getattr(catalog, "commit_changes", None)
    if commit_changes is not None:
        response: CommitTableResponse = commit_changes(
            identifier, change.requirements, change.updates
        )
        return response
    if any(isinstance(r, AssertCreate) for r in change.requirements):
        table = placeholder_table(catalog, identifier)
    else:
        table = catalog.load_table(identifier)
    return catalog.commit_table(table, change.requirements, change.updates)


def update_table(call: Call) -> Reply:
    body: CommitTableBody = parse_body(call, CommitTableBody)
    identifier = table_of(call)
    if body.identifier is not None and (
        (*body.identifier.namespace.root, body.identifier.name) != identifier
    ):
        named = ".".join((*body.identifier.namespace.root, body.identifier.name))
        raise bad_request(
            f"the body's identifier {named!r} is not the table of the path, "
            f"{'.'.join(identifier)!r}"
        )
    response = commit_one(call.target.catalog, identifier, body)
    headers = {"ETag": etag_of(response.metadata_location, "all")}
    written = getattr(call.target.catalog, "written_metadata_json", None)
    text = None if written is None else written(response.metadata_location)
    if text is None:
        return json_reply(response, headers=headers)
    # The metadata as the catalog just wrote it to its file: the same JSON, not rendered twice.
    location = json.dumps(response.metadata_location).encode("utf-8")
    return Reply(200, b'{"metadata-location":' + location + b',"metadata":' + text + b"}", headers)


def drop_table(call: Call) -> Reply:
    purge = call.query.get("purgeRequested", "false").lower()
    if purge not in ("true", "false"):
        raise bad_request(f"purgeRequested={purge!r}: use true or false")
    if purge == "true":
        call.target.catalog.purge_table(table_of(call))
    else:
        call.target.catalog.drop_table(table_of(call))
    return Reply(204)


def register_table(call: Call) -> Reply:
    body: RegisterTableBody = parse_body(call, RegisterTableBody)
    identifier = (*namespace_of(call.params["namespace"]), body.name)
    table = call.target.catalog.register_table(
        identifier, body.metadata_location, overwrite=body.overwrite
    )
    return table_reply(call, table.metadata, table.metadata_location)


def rename_table(call: Call) -> Reply:
    body: RenameTableBody = parse_body(call, RenameTableBody)
    source = (*body.source.namespace.root, body.source.name)
    destination = (*body.destination.namespace.root, body.destination.name)
    call.target.catalog.rename_table(source, destination)
    return Reply(204)


def report_metrics(call: Call) -> Reply:
    parse_body(call, ReportMetricsBody)
    identifier = table_of(call)
    if not call.target.catalog.table_exists(identifier):
        raise NoSuchTableError(f"Table does not exist: {'.'.join(identifier)}")
    return Reply(204)


def commit_transaction(call: Call) -> Reply:
    body: CommitTransactionBody = parse_body(call, CommitTransactionBody)
    commit_tables = getattr(call.target.catalog, "commit_tables", None)
    if commit_tables is None:
        raise RestError(
            406,
            "UnsupportedOperationException",
            f"multi-table transactions need a catalog that commits several tables atomically; "
            f"this server's catalog is a {type(call.target.catalog).__name__}",
        )
    changes = []
    for change in body.table_changes:
        assert change.identifier is not None  # CommitTransactionBody checked it
        identifier = (*change.identifier.namespace.root, change.identifier.name)
        changes.append((identifier, change.requirements, change.updates))
    commit_tables(changes)
    return Reply(204)


# -- views --------------------------------------------------------------------------------------


def view_of(call: Call) -> Identifier:
    return (*namespace_of(call.params["namespace"]), call.params["view"])


def view_catalog(call: Call) -> LakecoreCatalog:
    """The catalog, when it serves views (its ``commit_view`` and ``load_view_metadata``)."""
    catalog = call.target.catalog
    if not isinstance(catalog, LakecoreCatalog):
        raise RestError(
            406,
            "UnsupportedOperationException",
            f"views need a catalog that stores them; this server's catalog is a "
            f"{type(catalog).__name__}",
        )
    return catalog


def view_reply(call: Call, metadata: ViewMetadata, metadata_location: str) -> Reply:
    """A ``LoadViewResult``: ``metadata-location``, ``metadata``, ``config``."""
    body = b"".join(
        (
            json.dumps({"metadata-location": metadata_location}).encode("utf-8")[:-1],
            b', "metadata": ',
            metadata.model_dump_json().encode("utf-8"),
            b", ",
            json.dumps({"config": call.access.client_properties}).encode("utf-8")[1:],
        )
    )
    return Reply(200, body, {"ETag": etag_of(metadata_location, "view")})


def list_views(call: Call) -> Reply:
    namespace = namespace_of(call.params["namespace"])
    catalog = view_catalog(call)
    chunk, token = names_page(call, "views", namespace, catalog.list_views)
    response = ListViewsResponse(
        identifiers=[ListViewResponseEntry(namespace=namespace, name=n) for n in chunk],
        next_page_token=token,  # type: ignore[call-arg]  # by field name, as pyiceberg does
    )
    return json_reply(response, keep_nulls=True)


def create_view(call: Call) -> Reply:
    body: CreateViewBody = parse_body(call, CreateViewBody)
    identifier = (*namespace_of(call.params["namespace"]), body.name)
    catalog = view_catalog(call)
    catalog.create_view(
        identifier,
        body.view_schema,
        body.view_version,
        location=body.location or None,
        properties=body.properties,
    )
    return view_reply(call, *catalog.load_view_metadata(identifier))


def load_view(call: Call) -> Reply:
    return view_reply(call, *view_catalog(call).load_view_metadata(view_of(call)))


def view_exists(call: Call) -> Reply:
    return Reply(204 if view_catalog(call).view_exists(view_of(call)) else 404)


def replace_view(call: Call) -> Reply:
    body: CommitViewBody = parse_body(call, CommitViewBody)
    identifier = view_of(call)
    if body.identifier is not None and (
        (*body.identifier.namespace.root, body.identifier.name) != identifier
    ):
        named = ".".join((*body.identifier.namespace.root, body.identifier.name))
        raise bad_request(
            f"the body's identifier {named!r} is not the view of the path, {'.'.join(identifier)!r}"
        )
    metadata, location = view_catalog(call).commit_view(identifier, body.requirements, body.updates)
    return view_reply(call, metadata, location)


def drop_view(call: Call) -> Reply:
    view_catalog(call).drop_view(view_of(call))
    return Reply(204)


def rename_view(call: Call) -> Reply:
    body: RenameTableBody = parse_body(call, RenameTableBody)
    source = (*body.source.namespace.root, body.source.name)
    destination = (*body.destination.namespace.root, body.destination.name)
    view_catalog(call).rename_view(source, destination)
    return Reply(204)


def register_view(call: Call) -> Reply:
    body: RegisterViewBody = parse_body(call, RegisterViewBody)
    identifier = (*namespace_of(call.params["namespace"]), body.name)
    catalog = view_catalog(call)
    catalog.register_view(identifier, body.metadata_location)
    return view_reply(call, *catalog.load_view_metadata(identifier))


# -- the table of routes ------------------------------------------------------------------------

NS: Final = "/v1/{prefix}/namespaces"
TABLE: Final = NS + "/{namespace}/tables/{table}"
VIEW: Final = NS + "/{namespace}/views/{view}"
OPERATIONS: Final[tuple[Operation, ...]] = (
    Operation("listNamespaces", "GET", NS, list_namespaces),
    Operation("createNamespace", "POST", NS, create_namespace, write=True),
    Operation("loadNamespaceMetadata", "GET", NS + "/{namespace}", load_namespace),
    Operation("namespaceExists", "HEAD", NS + "/{namespace}", namespace_exists),
    Operation("dropNamespace", "DELETE", NS + "/{namespace}", drop_namespace, write=True),
    Operation(
        "updateProperties",
        "POST",
        NS + "/{namespace}/properties",
        update_namespace_properties,
        write=True,
    ),
    Operation("listTables", "GET", NS + "/{namespace}/tables", list_tables),
    Operation("createTable", "POST", NS + "/{namespace}/tables", create_table, write=True),
    Operation("loadTable", "GET", TABLE, load_table),
    Operation("tableExists", "HEAD", TABLE, table_exists),
    Operation("updateTable", "POST", TABLE, update_table, write=True, commit=True),
    Operation("dropTable", "DELETE", TABLE, drop_table, write=True),
    Operation("registerTable", "POST", NS + "/{namespace}/register", register_table, write=True),
    Operation("reportMetrics", "POST", TABLE + "/metrics", report_metrics),
    Operation("loadCredentials", "GET", TABLE + "/credentials", load_credentials),
    Operation("renameTable", "POST", "/v1/{prefix}/tables/rename", rename_table, write=True),
    Operation(
        "commitTransaction",
        "POST",
        "/v1/{prefix}/transactions/commit",
        commit_transaction,
        write=True,
        commit=True,
    ),
    Operation("listViews", "GET", NS + "/{namespace}/views", list_views),
    Operation("createView", "POST", NS + "/{namespace}/views", create_view, write=True),
    Operation("loadView", "GET", VIEW, load_view),
    Operation("viewExists", "HEAD", VIEW, view_exists),
    Operation("replaceView", "POST", VIEW, replace_view, write=True, commit=True),
    Operation("dropView", "DELETE", VIEW, drop_view, write=True),
    Operation("renameView", "POST", "/v1/{prefix}/views/rename", rename_view, write=True),
    Operation("registerView", "POST", NS + "/{namespace}/register-view", register_view, write=True),
)
VIEW_OPERATIONS: Final = frozenset(
    {
        "listViews",
        "createView",
        "loadView",
        "viewExists",
        "replaceView",
        "dropView",
        "renameView",
        "registerView",
    }
)


def endpoints(catalog: Catalog) -> list[str]:
    """The ``endpoints`` of ``GET /v1/config``: exactly what this catalog is served with."""
    return [
        op.endpoint
        for op in OPERATIONS
        if (op.name != "commitTransaction" or hasattr(catalog, "commit_tables"))
        and (op.name not in VIEW_OPERATIONS or hasattr(catalog, "commit_view"))
    ]


@dataclass(frozen=True)
class Match:
    operation: Operation
    prefix: str | None
    params: dict[str, str]


class Router:
    """Matches raw paths to operations (see the module docstring)."""

    def __init__(self, operations: Sequence[Operation] = OPERATIONS) -> None:
        # Unprefixed forms first: /v1/namespaces/x is namespace x, never prefix "namespaces".
        self._patterns: list[tuple[tuple[str, ...], Operation, bool]] = []
        for op in operations:
            segments = op.segments
            self._patterns.append((tuple(s for s in segments if s != PREFIX), op, False))
        for op in operations:
            self._patterns.append((op.segments, op, True))

    def match(self, raw_path: str, method: str) -> Match | None:
        """The operation for ``method`` at ``raw_path``.

        Raises:
            RestError: 405 when the path exists for other methods only.
        """
        segments = raw_path.strip("/").split("/")
        allowed: list[str] = []
        for pattern, op, prefixed in self._patterns:
            if len(pattern) != len(segments):
                continue
            params: dict[str, str] = {}
            for want, got in zip(pattern, segments, strict=True):
                if want.startswith("{"):
                    if not got:
                        break
                    params[want[1:-1]] = unquote(got)
                elif want != got:
                    break
            else:
                if op.method != method:
                    allowed.append(op.method)
                    continue
                prefix = params.pop("prefix", None) if prefixed else None
                return Match(op, prefix, params)
        if allowed:
            raise RestError(
                405,
                "MethodNotAllowedException",
                f"{method} is not served at {raw_path}; allowed: {', '.join(sorted(set(allowed)))}",
                {"Allow": ", ".join(sorted(set(allowed)))},
            )
        return None


__all__ = [
    "NAMESPACE_SEPARATOR",
    "OPERATIONS",
    "Call",
    "Handler",
    "Match",
    "Operation",
    "Reply",
    "Router",
    "TableAccess",
    "endpoints",
    "etag_of",
    "json_reply",
]
