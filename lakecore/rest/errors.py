"""The REST catalog's error model: every failure becomes ``{"error": {"message", "type", "code"}}``.

Rules (Iceberg's OpenAPI spec, ``IcebergErrorResponse``; Java clients decide from the code and,
for some codes, the type, so both follow the spec's examples exactly):

* ``RestError(code, type, message)`` is raised by the server's own checks (a malformed body,
  a missing token, a write under a time-travel prefix) and rendered as is.
* Catalog exceptions map by class, first match wins (a subclass is listed before its base):

  ======================================  ====  ================================
  exception                               code  type
  ======================================  ====  ================================
  ``ReadOnlyCatalogError``                403   ``ForbiddenException``
  lakecore ``StorageRefusedError``        502   ``BadGatewayException``
  (the store refused the server: no
  space, no permission, STS said no)
  lakecore ``NoLakehouseError``,          503   ``ServiceUnavailableException``
  ``VersionExpiredError``, ``StorageError``,
  ``CorruptFileError``, ``TreeStructureError``,
  ``MissingDefinitionError``
  ``NoSuchNamespaceError``                404   ``NoSuchNamespaceException``
  ``NoSuchTableError``, bad identifier    404   ``NoSuchTableException``
  ``NoSuchViewError``                     404   ``NoSuchViewException``
  ``NamespaceAlreadyExistsError``,        409   ``AlreadyExistsException``
  ``TableAlreadyExistsError``,
  ``ViewAlreadyExistsError``
  ``NamespaceNotEmptyError``              409   ``NamespaceNotEmptyException``
  ``CommitFailedException``               409   ``CommitFailedException``
  ``CommitStateUnknownException``         500   ``CommitStateUnknownException``
  ``ValidationError``, ``ValueError``     400   ``IllegalArgumentException``
  ``RecursionError`` (input nested        400   ``BadRequestException``
  too deeply for a parser)
  ``NotImplementedError``                 406   ``UnsupportedOperationException``
  anything else                           500   ``InternalServerError``
  ======================================  ====  ================================

* **503 is the server's own trouble**: the lakehouse root vanished or cannot be read, a file of
  it is damaged, the store does not answer. A client then retries later, or an operator
  repairs; it must never read as "no such table" (404), which sends a client's ``IF EXISTS``
  logic down the wrong branch. Checked before the not-found types, since a vanished lakehouse
  is a lakecore ``NotFoundError`` too.
* **Unknown is unknown, and only then.** A catalog that says which of its commit failures are
  unknown (``reports_unknown_commits``, as ``LakecoreCatalog`` does: every failure around its
  root write is ``CommitStateUnknownException``) gets ``CommitStateUnknownException`` (500)
  only when it raises it; anything that fails before is the client's mistake (4xx) or the
  server's trouble (503), and a failure the server did not foresee is 500
  ``InternalServerError`` (Java clients and pyiceberg treat every 500 on a commit route as
  unknown, and keep their files). For any other catalog the server cannot tell, so on a commit
  route (``commit``) a storage failure or an unforeseen one is ``CommitStateUnknownException``.
* The message is the exception's own text (the catalog's wording, which pyiceberg's tests
  match), on one line. A 503 on a read carries ``Retry-After`` (the spec lets a client retry a
  non-idempotent request only when that header is present, so writes do not get it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchIdentifierError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ValidationError,
    ValidationException,
    ViewAlreadyExistsError,
)

from lakecore.errors import (
    CorruptFileError,
    MissingDefinitionError,
    NoLakehouseError,
    NotFoundError,
    StorageError,
    StorageRefusedError,
    TreeStructureError,
    VersionExpiredError,
)
from lakecore.iceberg.errors import ReadOnlyCatalogError

BAD_REQUEST: Final = "BadRequestException"
NOT_FOUND: Final = "NotFoundException"
UNAVAILABLE: Final = "ServiceUnavailableException"
BAD_GATEWAY: Final = "BadGatewayException"
NOT_AUTHORIZED: Final = "NotAuthorizedException"
FORBIDDEN: Final = "ForbiddenException"
UNSUPPORTED: Final = "UnsupportedOperationException"
COMMIT_STATE_UNKNOWN: Final = "CommitStateUnknownException"
INTERNAL: Final = "InternalServerError"
RETRY_AFTER_SECONDS: Final = 1


def one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class RestError(Exception):
    """A failure the server answers with ``code`` and ``type`` (see the module docstring)."""

    code: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The spec's message is one line, whatever a client's text put in it (a field named
        # "a\nb" in a pyiceberg validator's message was a second line).
        self.message = one_line(self.message)
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}


# (exception class, code, type); order matters: subclasses first.
_MAPPING: Final[tuple[tuple[type[BaseException], int, str], ...]] = (
    (ReadOnlyCatalogError, 403, FORBIDDEN),
    (StorageRefusedError, 502, BAD_GATEWAY),
    (NoLakehouseError, 503, UNAVAILABLE),
    (VersionExpiredError, 503, UNAVAILABLE),
    (StorageError, 503, UNAVAILABLE),
    (CorruptFileError, 503, UNAVAILABLE),
    (TreeStructureError, 503, UNAVAILABLE),
    (MissingDefinitionError, 503, UNAVAILABLE),
    (NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    (NoSuchTableError, 404, "NoSuchTableException"),
    (NoSuchIdentifierError, 404, "NoSuchTableException"),
    (NoSuchViewError, 404, "NoSuchViewException"),
    (NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
    (TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (ViewAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (CommitFailedException, 409, "CommitFailedException"),
    (CommitStateUnknownException, 500, COMMIT_STATE_UNKNOWN),
    (ValidationError, 400, "IllegalArgumentException"),
    (ValidationException, 400, "IllegalArgumentException"),
    (RecursionError, 400, BAD_REQUEST),
    (NotImplementedError, 406, UNSUPPORTED),
    (NotFoundError, 404, NOT_FOUND),
    (ValueError, 400, "IllegalArgumentException"),
)


_UNAVAILABLE: Final = (
    NoLakehouseError,
    VersionExpiredError,
    StorageError,
    CorruptFileError,
    TreeStructureError,
    MissingDefinitionError,
)


def _cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first (a lakecore error that
    the catalog re-raised as pyiceberg's type is judged by what it was)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__
    return chain


def rest_error_of(exc: BaseException, *, commit: bool = False, read: bool = True) -> RestError:
    """The response for ``exc`` on a route; ``read`` for GET/HEAD (only those get
    ``Retry-After`` with a 503); ``commit`` for a commit route of a catalog that does not
    report unknown commits itself (see the module docstring)."""
    if isinstance(exc, RestError):
        return exc
    message = one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, RecursionError):
        message = "the request is nested too deeply to parse"
    if commit and (
        isinstance(exc, StorageError) or not any(isinstance(exc, c) for c, _, _ in _MAPPING)
    ):
        return RestError(
            500,
            COMMIT_STATE_UNKNOWN,
            f"the commit failed with {type(exc).__name__} ({message}); it may or may not have "
            "landed: reload the table before retrying",
        )
    # The server's own trouble, wherever it was re-raised as a client-facing type (a vanished
    # lakehouse re-raised as "no such table" must stay a 503).
    chain = _cause_chain(exc)
    if any(isinstance(c, _UNAVAILABLE) for c in chain) and not isinstance(
        exc, (CommitStateUnknownException, ReadOnlyCatalogError)
    ):
        if any(isinstance(c, StorageRefusedError) for c in chain):
            return RestError(502, BAD_GATEWAY, message)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if read else {}
        return RestError(503, UNAVAILABLE, message, headers)
    for cls, code, kind in _MAPPING:
        if isinstance(exc, cls):
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if code == 503 and read else {}
            return RestError(code, kind, message, headers)
    return RestError(500, INTERNAL, f"unexpected {type(exc).__name__}: {message}")


def bad_request(message: str) -> RestError:
    return RestError(400, BAD_REQUEST, message)


__all__ = [
    "BAD_GATEWAY",
    "BAD_REQUEST",
    "COMMIT_STATE_UNKNOWN",
    "FORBIDDEN",
    "INTERNAL",
    "NOT_AUTHORIZED",
    "NOT_FOUND",
    "UNAVAILABLE",
    "UNSUPPORTED",
    "RestError",
    "bad_request",
    "one_line",
    "rest_error_of",
]
