"""Warehouses and prefixes: which catalog a request reaches, live or at a past version.

Rules:

* ``GET /v1/config?warehouse=W`` names the catalog a client will use. ``W`` absent or empty, or
  one of the server's names for its warehouse (the catalog's name, the lakehouse URI, the
  warehouse location; ``Warehouses.names``), is the live catalog: no ``prefix`` override, and
  its routes are ``/v1/namespaces/...``. Anything else is 404 ``NoSuchWarehouseException``.
* ``W@version=V`` and ``W@as-of=TIME`` (``W`` may be empty; ``TIME`` is ISO-8601, UTC when it
  has no zone, or epoch milliseconds) are the catalog as it was at lakehouse version ``V`` (the
  newest version created at or before ``TIME``). The answer overrides ``prefix`` with
  ``version-V``; every route under ``/v1/version-V/...`` reads that version, and every write
  there is 403 ``ForbiddenException``. An ``as-of`` is resolved to its version once, when the
  configuration is asked for, so a client sees one fixed version however long it runs.
* Time travel needs a catalog that can open itself at a version: a ``LakecoreCatalog`` (any
  other catalog answers 404 for a time-travel warehouse). A version that does not exist or was
  expired is 404 ``NoSuchWarehouseException`` too, on every server alike: each request under a
  version prefix first asks the store whether the version's root file still exists (one
  request), so a version that version compaction expired is 404 at once, also on a server that
  had it open, and a read that the expiry overtakes is 404 as well. The read-only catalogs are
  kept for the ``CACHED_VERSIONS`` most recently used versions.
* A version outside the format's range, or an ``as-of`` time before 1970 or past year 9999, is
  400 ``BadRequestException``: it can name no version.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ValidationError

from lakecore.core.locations import MAX_VERSION, root_node_file_name
from lakecore.errors import InvalidArgumentError, LakecoreError, NotFoundError, VersionExpiredError
from lakecore.iceberg.catalog import LakecoreCatalog
from lakecore.iceberg.path_rules import normalize_location
from lakecore.rest.errors import BAD_REQUEST, RestError

NO_SUCH_WAREHOUSE: Final = "NoSuchWarehouseException"
VERSION_PREFIX: Final = "version-"
CACHED_VERSIONS: Final = 16


@dataclass(frozen=True)
class Target:
    """The catalog a prefix reaches; ``version`` is set for a time-travel (read-only) one."""

    catalog: Catalog
    version: int | None


# The as-of times a lakehouse version can have: from the epoch to the end of year 9999.
_LATEST_MILLIS: Final = 253_402_300_799_999


def _parse_time_millis(text: str) -> int:
    value = text.strip()
    if value.lstrip("-").isascii() and value.lstrip("-").isdigit() and len(value) <= 20:
        millis = int(value)
    else:
        try:
            when = dt.datetime.fromisoformat(value)
        except ValueError:
            raise RestError(
                400,
                BAD_REQUEST,
                f"as-of {text[:100]!r} is neither an ISO-8601 time (2026-11-01T00:00:00Z) nor "
                "epoch milliseconds",
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        millis = int(when.timestamp() * 1000)
    if not 0 <= millis <= _LATEST_MILLIS:
        raise RestError(
            400,
            BAD_REQUEST,
            f"as-of {text[:100]!r} is outside the times a version can have (1970 to 9999)",
        )
    return millis


class Warehouses:
    """Resolves warehouse names and path prefixes to catalogs (see the module docstring)."""

    def __init__(self, catalog: Catalog, extra_names: Iterable[str] = ()) -> None:
        self.live = Target(catalog, None)
        names = {catalog.name, *extra_names}
        if isinstance(catalog, LakecoreCatalog):
            names |= {catalog.lakehouse.storage.root_uri, catalog.warehouse}
        self.names = {self._normal(n) for n in names if n}
        self._versions: OrderedDict[int, Target] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _normal(name: str) -> str:
        return normalize_location(name) if ("://" in name or name.startswith("/")) else name

    @property
    def time_travel(self) -> bool:
        return isinstance(self.live.catalog, LakecoreCatalog)

    def prefix_for(self, warehouse: str | None) -> str | None:
        """The prefix override for ``GET /v1/config?warehouse=...``; None for the live catalog.

        Raises:
            RestError: 404 for an unknown warehouse or version, 400 for a malformed one.
        """
        if not warehouse:
            return None
        base, at, spec = warehouse.partition("@")
        if base and self._normal(base) not in self.names:
            raise RestError(
                404,
                NO_SUCH_WAREHOUSE,
                f"warehouse {base!r} is not served here; this server's warehouse is any of "
                f"{', '.join(sorted(self.names))} (or leave it empty)",
            )
        if not at:
            return None
        key, _, value = spec.partition("=")
        if key == "version" and value.isascii() and value.isdigit():
            version = int(value)
            if version > MAX_VERSION:
                raise RestError(
                    400, BAD_REQUEST, f"version {value[:30]} is outside 0..{MAX_VERSION}"
                )
        elif key == "as-of" and value:
            version = self._version_as_of(_parse_time_millis(value))
        else:
            raise RestError(
                400,
                BAD_REQUEST,
                f"warehouse {warehouse[:200]!r}: after '@' give version=V or as-of=TIME "
                "(such as lake@version=42 or lake@as-of=2026-11-01T00:00:00Z)",
            )
        self.target(f"{VERSION_PREFIX}{version}")  # 404 now, not at the first table
        return f"{VERSION_PREFIX}{version}"

    def _version_as_of(self, millis: int) -> int:
        catalog = self._lakecore()
        try:
            return catalog.lakehouse.as_of(millis).version
        except NotFoundError as exc:
            raise RestError(404, NO_SUCH_WAREHOUSE, exc.one_line()) from exc

    def _lakecore(self) -> LakecoreCatalog:
        catalog = self.live.catalog
        if not isinstance(catalog, LakecoreCatalog):
            raise RestError(
                404,
                NO_SUCH_WAREHOUSE,
                f"time travel needs a lakehouse catalog; this server's catalog is a {type(catalog).__name__}",
            )
        return catalog

    @staticmethod
    def version_of_prefix(prefix: str | None) -> int | None:
        """The lakehouse version a prefix names (None for the live catalog), without IO.

        Raises:
            RestError: 404 for a prefix this server never hands out.
        """
        if not prefix:
            return None
        number = prefix[len(VERSION_PREFIX) :] if prefix.startswith(VERSION_PREFIX) else ""
        if not (number.isascii() and number.isdigit() and len(number) <= 10) or (
            int(number) > MAX_VERSION
        ):
            raise RestError(
                404,
                NO_SUCH_WAREHOUSE,
                f"unknown prefix {prefix[:100]!r}: use the prefix GET /v1/config returns "
                "(none for the live catalog, version-V for time travel)",
            )
        return int(number)

    def target(self, prefix: str | None) -> Target:
        """The catalog a request under ``/v1/{prefix}/`` reaches. For a version, the store is
        asked first whether its root file still exists (it may have been expired since).

        Raises:
            RestError: 404 for a prefix this server never hands out, or a version it cannot
                open or that no longer exists.
        """
        version = self.version_of_prefix(prefix)
        if version is None:
            return self.live
        with self._lock:
            cached = self._versions.get(version)
            if cached is not None:
                self._versions.move_to_end(version)
        if cached is not None:
            self._require_root(version)
            return cached
        target = Target(self._open_at(version), version)
        with self._lock:
            self._versions[version] = target
            while len(self._versions) > CACHED_VERSIONS:
                self._versions.popitem(last=False)
        return target

    def _require_root(self, version: int) -> None:
        """404 when version ``version``'s root file is gone (expired); it is forgotten then."""
        storage = self._lakecore().lakehouse.storage
        if storage.exists(root_node_file_name(version)):
            return
        with self._lock:
            self._versions.pop(version, None)
        raise RestError(
            404,
            NO_SUCH_WAREHOUSE,
            f"version {version} no longer exists (expired by version compaction); ask "
            "GET /v1/config for a retained version, or read the live catalog",
        )

    def _open_at(self, version: int) -> LakecoreCatalog:
        live = self._lakecore()
        properties = {k: v for k, v in live.properties.items() if k not in ("version", "as_of")}
        try:
            return LakecoreCatalog(
                live.name,
                **properties,
                version=str(version),
                storage_options=live.lakehouse.storage.storage_options,
            )
        except InvalidArgumentError as exc:
            raise RestError(404, NO_SUCH_WAREHOUSE, exc.one_line()) from exc
        except LakecoreError as exc:
            if isinstance(exc, NotFoundError):
                raise RestError(404, NO_SUCH_WAREHOUSE, exc.one_line()) from exc
            raise  # the store or a damaged file: the server's trouble (503)
        except ValidationError as exc:  # pyiceberg's ValidationError wraps a bad version
            raise RestError(404, NO_SUCH_WAREHOUSE, " ".join(str(exc).split())) from exc


def expired_under(target: Target, exc: BaseException) -> RestError | None:
    """The 404 for a read of a time-travel target that version compaction overtook (its root
    or a file it reaches was deleted while it was read); None for any other failure."""
    if target.version is None:
        return None
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            break
        if isinstance(current, VersionExpiredError):
            return RestError(
                404,
                NO_SUCH_WAREHOUSE,
                f"version {target.version} was expired by version compaction while it was read; "
                "ask GET /v1/config for a retained version, or read the live catalog",
            )
        current = current.__cause__
    return None


__all__ = [
    "CACHED_VERSIONS",
    "NO_SUCH_WAREHOUSE",
    "VERSION_PREFIX",
    "Target",
    "Warehouses",
    "expired_under",
]
