"""Child-process bodies of the Iceberg concurrency tests: each builds its own catalog object,
as a separate engine process would."""

from __future__ import annotations

import json
from typing import Any

from pyiceberg.catalog import load_catalog

from tests.iceberg.conftest import CATALOG_IMPL, rows


def appender(
    uri: str,
    properties: dict[str, str],
    identifier: str,
    writer: str,
    appends: int,
    rows_per_append: int,
    report_path: str,
) -> None:
    """Append ``appends`` batches to ``identifier`` through a catalog of its own; ids are
    ``writer_index * 10**6 + append * rows_per_append + row``, so every row says which append
    wrote it. Writes a JSON report: the snapshot id of each append."""
    catalog = load_catalog(writer, **{"py-catalog-impl": CATALOG_IMPL, "uri": uri, **properties})
    index = int(writer.removeprefix("w"))
    snapshots = []
    for i in range(appends):
        table = catalog.load_table(identifier)
        start = index * 10**6 + i * rows_per_append
        table.append(rows(range(start, start + rows_per_append), writer))
        snapshot = table.current_snapshot()
        assert snapshot is not None
        snapshots.append(snapshot.snapshot_id)
    with open(report_path, "w", encoding="utf-8") as out:
        json.dump({"writer": writer, "snapshots": snapshots}, out)


def run_appender(args: tuple[Any, ...]) -> None:
    appender(*args)
