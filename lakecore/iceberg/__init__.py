"""Iceberg tables in a lakehouse: ``LakecoreCatalog``, a pyiceberg catalog backed by lakecore.

Needs the ``iceberg`` extra (``pip install '.[iceberg]'`` in the checkout; ``make setup`` installs it). The rules (what a table
definition holds, how commits stay safe, where files may live, time travel, error types) are in
``lakecore.iceberg.catalog``'s docstring, each part's also in the module of the collaborator
that holds it, and in docs/format.md#iceberg-tables. Engine-neutral: nothing here imports pyspark or ``jobs``;
it uses the public ``Lakehouse``/``Transaction`` API only.
"""

from __future__ import annotations

try:
    import pyiceberg  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "lakecore.iceberg needs pyiceberg: pip install '.[iceberg]' in the lakecore checkout (make setup installs it)"
    ) from exc

from lakecore.iceberg.catalog import LakecoreCatalog, ReadOnlyTable
from lakecore.iceberg.columns import ICEBERG_TYPE_PROPERTY, columns_of
from lakecore.iceberg.errors import ReadOnlyCatalogError
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.pointer import (
    CHECKED_PROPERTY,
    METADATA_LOCATION_PROPERTY,
    PREVIOUS_METADATA_LOCATION_PROPERTY,
)

__all__ = [
    "CHECKED_PROPERTY",
    "ICEBERG_TYPE_PROPERTY",
    "METADATA_LOCATION_PROPERTY",
    "PREVIOUS_METADATA_LOCATION_PROPERTY",
    "LakecoreCatalog",
    "ReadOnlyCatalogError",
    "ReadOnlyTable",
    "columns_of",
    "normalize_location",
]
