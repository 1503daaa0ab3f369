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
  ``NoSuchNamespaceError``                404   ``NoSuchNamespaceException``
  ``NoSuchTableError``, bad identifier    404   ``NoSuchTableException``
  ``NamespaceAlreadyExistsError``,        409   ``AlreadyExistsException``
  ``TableAlreadyExistsError``
  ``NamespaceNotEmptyError``              409   ``NamespaceNotEmptyException``
  ``CommitFailedException``               409   ``CommitFailedException``
  ``CommitStateUnknownException``         500   ``CommitStateUnknownException``
  ``ValidationError``, ``ValueError``     400   ``IllegalArgumentException``
  ``NotImplementedError``                 406   ``UnsupportedOperationException``
  lakecore ``StorageError``               503   ``ServiceUnavailableException``
  anything else                           500   ``InternalServerError``
  ======================================  ====  ================================

* On a commit route (``updateTable``, ``commitTransaction``) an unexpected failure is
  ``CommitStateUnknownException`` (500): the client cannot know whether the commit landed, and
  Java clients treat every 500 there as unknown anyway, so they keep their files.
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
    TableAlreadyExistsError,
    ValidationError,
    ValidationException,
)

from lakecore.errors import NotFoundError, StorageError
from lakecore.iceberg.errors import ReadOnlyCatalogError

BAD_REQUEST: Final = "BadRequestException"
NOT_AUTHORIZED: Final = "NotAuthorizedException"
FORBIDDEN: Final = "ForbiddenException"
UNSUPPORTED: Final = "UnsupportedOperationException"
COMMIT_STATE_UNKNOWN: Final = "CommitStateUnknownException"
INTERNAL: Final = "InternalServerError"
RETRY_AFTER_SECONDS: Final = 1


@dataclass
class RestError(Exception):
    """A failure the server answers with ``code`` and ``type`` (see the module docstring)."""

    code: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}


# (exception class, code, type); order matters: subclasses first.
_MAPPING: Final[tuple[tuple[type[BaseException], int, str], ...]] = (
    (ReadOnlyCatalogError, 403, FORBIDDEN),
    (NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    (NoSuchTableError, 404, "NoSuchTableException"),
    (NoSuchIdentifierError, 404, "NoSuchTableException"),
    (NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
    (TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (CommitFailedException, 409, "CommitFailedException"),
    (CommitStateUnknownException, 500, COMMIT_STATE_UNKNOWN),
    (ValidationError, 400, "IllegalArgumentException"),
    (ValidationException, 400, "IllegalArgumentException"),
    (NotImplementedError, 406, UNSUPPORTED),
    (StorageError, 503, "ServiceUnavailableException"),
    (NotFoundError, 404, "NotFoundException"),
    (ValueError, 400, "IllegalArgumentException"),
)


def one_line(text: str) -> str:
    return " ".join(text.split())


def rest_error_of(exc: BaseException, *, commit: bool = False, read: bool = True) -> RestError:
    """The response for ``exc`` on a route; ``commit`` for the commit routes, ``read`` for
    GET/HEAD (only those get ``Retry-After`` with a 503)."""
    if isinstance(exc, RestError):
        return exc
    message = one_line(str(exc)) or type(exc).__name__
    for cls, code, kind in _MAPPING:
        if isinstance(exc, cls):
            if code == 503 and commit:
                # Java clients read a 503 on a commit route as "state unknown"; say so.
                return RestError(500, COMMIT_STATE_UNKNOWN, message)
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if code == 503 and read else {}
            return RestError(code, kind, message, headers)
    if commit:
        return RestError(
            500,
            COMMIT_STATE_UNKNOWN,
            f"the commit failed with an unexpected {type(exc).__name__} ({message}); it may or "
            "may not have landed: reload the table before retrying",
        )
    return RestError(500, INTERNAL, f"unexpected {type(exc).__name__}: {message}")


def bad_request(message: str) -> RestError:
    return RestError(400, BAD_REQUEST, message)


__all__ = [
    "BAD_REQUEST",
    "COMMIT_STATE_UNKNOWN",
    "FORBIDDEN",
    "INTERNAL",
    "NOT_AUTHORIZED",
    "UNSUPPORTED",
    "RestError",
    "bad_request",
    "one_line",
    "rest_error_of",
]
