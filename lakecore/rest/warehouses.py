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
  expired is 404 ``NoSuchWarehouseException`` too. The read-only catalogs are kept for the
  ``CACHED_VERSIONS`` most recently used versions.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from pyiceberg.catalog import Catalog

from lakecore.errors import LakecoreError
from lakecore.iceberg.catalog import LakecoreCatalog
from lakecore.iceberg.path_rules import normalize_location
from lakecore.rest.errors import RestError

NO_SUCH_WAREHOUSE: Final = "NoSuchWarehouseException"
VERSION_PREFIX: Final = "version-"
CACHED_VERSIONS: Final = 16


@dataclass(frozen=True)
class Target:
    """The catalog a prefix reaches; ``version`` is set for a time-travel (read-only) one."""

    catalog: Catalog
    version: int | None


def _parse_time_millis(text: str) -> int:
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise RestError(
            400,
            "BadRequestException",
            f"as-of {text!r} is neither an ISO-8601 time (2026-11-01T00:00:00Z) nor epoch milliseconds",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


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
        elif key == "as-of" and value:
            version = self._version_as_of(_parse_time_millis(value))
        else:
            raise RestError(
                400,
                "BadRequestException",
                f"warehouse {warehouse!r}: after '@' give version=V or as-of=TIME "
                "(such as lake@version=42 or lake@as-of=2026-11-01T00:00:00Z)",
            )
        self.target(f"{VERSION_PREFIX}{version}")  # 404 now, not at the first table
        return f"{VERSION_PREFIX}{version}"

    def _version_as_of(self, millis: int) -> int:
        catalog = self._lakecore()
        try:
            return catalog.lakehouse.as_of(millis).version
        except LakecoreError as exc:
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

    def target(self, prefix: str | None) -> Target:
        """The catalog a request under ``/v1/{prefix}/`` reaches.

        Raises:
            RestError: 404 for a prefix this server never hands out or a version it cannot open.
        """
        if not prefix:
            return self.live
        number = prefix[len(VERSION_PREFIX) :] if prefix.startswith(VERSION_PREFIX) else ""
        if not (number.isascii() and number.isdigit()):
            raise RestError(
                404,
                NO_SUCH_WAREHOUSE,
                f"unknown prefix {prefix!r}: use the prefix GET /v1/config returns "
                "(none for the live catalog, version-V for time travel)",
            )
        version = int(number)
        with self._lock:
            cached = self._versions.get(version)
            if cached is not None:
                self._versions.move_to_end(version)
                return cached
        target = Target(self._open_at(version), version)
        with self._lock:
            self._versions[version] = target
            while len(self._versions) > CACHED_VERSIONS:
                self._versions.popitem(last=False)
        return target

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
        except LakecoreError as exc:
            raise RestError(404, NO_SUCH_WAREHOUSE, exc.one_line()) from exc
        except Exception as exc:  # pyiceberg's ValidationError wraps a bad version
            raise RestError(404, NO_SUCH_WAREHOUSE, " ".join(str(exc).split())) from exc


__all__ = ["CACHED_VERSIONS", "NO_SUCH_WAREHOUSE", "VERSION_PREFIX", "Target", "Warehouses"]
