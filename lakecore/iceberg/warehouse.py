"""Which lakehouse owns a warehouse folder: the claim marker.

Two lakehouses whose warehouses overlap would each check their tables' folders against their
own tables only, and a purge in one could delete files a table of the other names. So a
warehouse belongs to one lakehouse:

* **The claim.** A lakehouse's first catalog change records its warehouse ``W`` in its
  definition (``lakecore.maintenance.tables.table_folders``) and creates ``W/.lakecore-warehouse.json``
  (exclusively: of two lakehouses racing for ``W`` one wins), a JSON object whose ``lakehouse``
  is the root URI of the lakehouse that owns ``W``. The name holds a ``.``, which no namespace
  level can: it is never a namespace's folder.
* **Refused claims.** A claim is refused when ``W`` or a folder above it (up to the bucket, or
  ``/``) holds the marker of another lakehouse: one read per level. A marker of the same
  lakehouse is its own earlier claim (a change whose commit then failed).
* **Below.** A warehouse that contains another lakehouse's could only be found at its claim by
  listing all of ``W``. Instead every folder a table is explicitly placed in (a location or a
  write path not of the default shape, a namespace's folder) is checked for a marker at each
  level between ``W`` and itself (``claimed_between``): a table never goes inside another
  lakehouse's warehouse, whichever claimed first.
* A marker the store refuses to let this lakehouse read (access scoped to a prefix below it)
  counts as absent.
* A lakehouse that shared its warehouse before the claim existed (an older lakecore) is not
  detected; neither is a file another catalog's table names (``add_files`` across
  lakehouses): purge protects the files of this lakehouse's tables only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from lakecore.core.storage import Storage
from lakecore.errors import (
    AlreadyExistsError,
    CorruptFileError,
    InvalidLocationError,
    NotFoundError,
    StorageRefusedError,
)

MARKER_NAME: Final = ".lakecore-warehouse.json"


@dataclass(frozen=True)
class Claim:
    """The marker found in ``folder``: that folder is the warehouse of ``lakehouse``."""

    folder: str
    lakehouse: str


def _split(folder: str) -> tuple[str, list[str]]:
    """(``scheme://``, the path's segments) of a normalized folder URI."""
    scheme, rest = folder.split("://", 1)
    return f"{scheme}://", rest.split("/")


def _ancestors(folder: str) -> list[str]:
    """The folders above ``folder``, nearest first, up to the bucket (or ``/``)."""
    prefix, segments = _split(folder)
    found = []
    for end in range(len(segments) - 1, 0, -1):
        found.append(prefix + ("/".join(segments[:end]) or "/"))
    return found


def _read_claim(storage: Storage, relative: str, folder: str) -> Claim | None:
    try:
        data = storage.read(f"{relative}/{MARKER_NAME}" if relative else MARKER_NAME)
    except NotFoundError:
        return None
    except InvalidLocationError:  # a segment no stored path may hold: no marker can be there
        return None
    except StorageRefusedError:
        # Access scoped to a prefix (an IAM policy on s3://bucket/team/*) refuses a read
        # above it, and S3 answers 403 for a missing key without s3:ListBucket. Refusing the
        # claim would make the catalog unusable there; the check is then as blind as before.
        return None
    try:
        lakehouse = json.loads(data)["lakehouse"]
        if not isinstance(lakehouse, str):
            raise TypeError(type(lakehouse).__name__)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(
            f"{folder}/{MARKER_NAME}",
            f"not a lakecore warehouse marker ({type(exc).__name__}: {exc}); it claims {folder} "
            "for a lakehouse: remove it only if no lakehouse keeps its Iceberg tables there",
        ) from None
    return Claim(folder, lakehouse)


def claim_at(folder: str, options: Mapping[str, Any] | None) -> Claim | None:
    """The claim on ``folder`` itself, if any."""
    return _read_claim(Storage(folder, options), "", folder)


def _refusal(warehouse: str, claim: Claim) -> InvalidLocationError:
    where = (
        f"the warehouse {warehouse} is"
        if claim.folder == warehouse
        else f"the warehouse {warehouse} lies inside {claim.folder},"
    )
    return InvalidLocationError(
        f"{where} the Iceberg warehouse of the lakehouse at {claim.lakehouse} (its marker "
        f"{claim.folder}/{MARKER_NAME}): two lakehouses never share a warehouse folder (a purge in "
        "one would not see the other's tables); give this catalog a warehouse of its own"
    )


def claim_warehouse(warehouse: str, lakehouse: str, options: Mapping[str, Any] | None) -> None:
    """Claim ``warehouse`` for the lakehouse at ``lakehouse`` (see the module docstring).

    Raises:
        InvalidLocationError: another lakehouse owns it or a folder above it.
        StorageError: the marker could not be read or written.
    """
    for ancestor in _ancestors(warehouse):
        above = claim_at(ancestor, options)
        if above is not None and above.lakehouse != lakehouse:
            raise _refusal(warehouse, above)
    storage = Storage(warehouse, options)
    marker = json.dumps({"lakehouse": lakehouse, "written_by": "lakecore"}, indent=1).encode()
    try:
        storage.create_exclusive(MARKER_NAME, marker)
    except AlreadyExistsError:
        existing = _read_claim(storage, "", warehouse)
        if existing is not None and existing.lakehouse != lakehouse:
            raise _refusal(warehouse, existing) from None


def claimed_between(
    warehouse: str, path: str, lakehouse: str, options: Mapping[str, Any] | None
) -> Claim | None:
    """Another lakehouse's claim on a folder strictly inside ``warehouse`` that ``path``
    equals or lies in; None when there is none. ``path`` lies strictly inside ``warehouse``."""
    levels = path[len(warehouse) + 1 :].split("/")
    storage = Storage(warehouse, options)
    for end in range(1, len(levels) + 1):
        relative = "/".join(levels[:end])
        claim = _read_claim(storage, relative, f"{warehouse}/{relative}")
        if claim is not None and claim.lakehouse != lakehouse:
            return claim
    return None


__all__ = ["MARKER_NAME", "Claim", "claim_at", "claim_warehouse", "claimed_between"]
