"""lakecore's errors as pyiceberg's types: what a caller of a pyiceberg catalog catches.

Rules:

* Not found is ``NoSuchNamespaceError``/``NoSuchTableError``, already exists
  ``NamespaceAlreadyExistsError``/``TableAlreadyExistsError``, a bad name or location
  ``ValidationError``, a namespace with children or tables ``NamespaceNotEmptyError``, a lost
  race ``CommitFailedException``, a change asked of a read-only catalog
  ``ReadOnlyCatalogError``. The message is lakecore's; the lakecore error stays chained as
  ``__cause__``. Where pyiceberg's own suite asserts a wording (``Table does not exist:
  ns.t``), the message starts with it and lakecore's detail follows.
* A storage failure inside a lakecore commit (``in_commit``: the root write and what surrounds
  it), or any failure there that is not one of lakecore's or pyiceberg's own, is
  ``CommitStateUnknownException``: it may follow a root write whose outcome is unknown, and
  pyiceberg deletes the files it wrote only after ``CommitFailedException``, so only "unknown"
  is safe. Everything a commit checks before it writes runs outside ``in_commit``: a client's
  mistake found there is never "unknown". Outside a commit, storage failures and
  damaged files stay lakecore errors (``StorageError``, ``CorruptFileError``): pyiceberg has no
  type for them. So do a lakehouse that is gone (``NoLakehouseError``) and a version expired
  while it was read (``VersionExpiredError``): they are never "no such table".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
    ValidationException,
)
from pyiceberg.exceptions import NamespaceNotEmptyError as IcebergNamespaceNotEmptyError

from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    InvalidArgumentError,
    NamespaceNotEmptyError,
    NoLakehouseError,
    NotFoundError,
    ReadOnlyLakehouseError,
    StorageError,
    VersionExpiredError,
)


class ReadOnlyCatalogError(ValidationError, ValidationException):
    """A change was asked of a catalog opened at a past version (``version=``/``as_of=``) or
    over an exported copy. Also pyiceberg's ``ValidationException``: pyiceberg writes an
    append's data files and manifests before it asks the catalog to commit, and deletes them
    again only after that exception (or ``CommitFailedException``), so a refused append leaves
    no file behind."""


@contextmanager
def translated(
    *,
    not_found: type[Exception] = NoSuchTableError,
    exists: type[Exception] = TableAlreadyExistsError,
    invalid: type[Exception] = ValidationError,
    in_commit: bool = False,
    wording: str | None = None,
    not_empty_wording: str | None = None,
) -> Iterator[None]:
    """Re-raise lakecore errors as pyiceberg's types with lakecore's message (the lakecore
    error stays chained as ``__cause__``). ``wording`` is pyiceberg's own text for a not-found
    or not-empty error (``Table does not exist: ns.t``): lakecore's detail follows it."""

    def text(exc: Exception) -> str:
        return str(exc) if wording is None else f"{wording}: {exc}"

    try:
        yield
    except CommitStateUnknownError as exc:
        raise CommitStateUnknownException(str(exc)) from exc
    except CommitConflictError as exc:
        raise CommitFailedException(str(exc)) from exc
    except NamespaceNotEmptyError as exc:
        raise IcebergNamespaceNotEmptyError(
            str(exc) if not_empty_wording is None else f"{not_empty_wording}: {exc}"
        ) from exc
    except (NoLakehouseError, VersionExpiredError):
        # The lakehouse itself is gone, or the version read was expired meanwhile: never
        # "no such table" (a client's IF EXISTS would take the wrong branch).
        raise
    except NotFoundError as exc:
        raise not_found(text(exc)) from exc
    except AlreadyExistsError as exc:
        raise exists(str(exc)) from exc
    except ReadOnlyLakehouseError as exc:
        raise ReadOnlyCatalogError(str(exc)) from exc
    except InvalidArgumentError as exc:
        raise invalid(
            text(exc) if invalid in (NoSuchTableError, NoSuchNamespaceError) else str(exc)
        ) from exc
    except StorageError as exc:
        if not in_commit:
            raise
        # A failure inside the lakecore commit may follow a root write whose outcome is
        # unknown; pyiceberg deletes its new files only after CommitFailedException, so only
        # "unknown" is safe here.
        raise CommitStateUnknownException(
            f"the lakehouse commit failed ({exc.one_line()}); it may or may not have landed: "
            "reload the table before retrying"
        ) from exc
    except Exception as exc:
        if not in_commit or isinstance(exc, _KNOWN_OUTCOME):
            raise
        # Not foreseen, around the root write: whether it landed is not known.
        raise CommitStateUnknownException(
            f"the lakehouse commit failed unexpectedly ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]}); it may or may not have landed: reload the "
            "table before retrying"
        ) from exc


# pyiceberg's own outcomes: a commit that raised one of these did not land (or is unknown).
_KNOWN_OUTCOME = (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
    ValidationException,
    ReadOnlyCatalogError,
)


__all__ = ["ReadOnlyCatalogError", "translated"]
