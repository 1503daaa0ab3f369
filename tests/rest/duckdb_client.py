"""Run SQL in DuckDB against an Iceberg REST catalog; for ``.venv-duckdb``'s Python.

``python duckdb_client.py '<json>'`` with ``{"endpoint": URL, "secret": {...} | null,
"statements": [SQL, ...]}``: loads the iceberg, httpfs and avro extensions from their wheels
(duckdb-extension-*, installed next to duckdb; auto-install and auto-load off, so nothing is
fetched from the network), creates the secret if given (``CREATE SECRET lake_secret (TYPE
iceberg, ...)``), attaches the catalog as ``lake`` and runs the statements. Prints one JSON
document: the rows of each statement (values as text). Standard library and duckdb only: this
file runs outside lakecore's venv.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb

EXTENSIONS = ("httpfs", "avro", "iceberg")


def extension_path(name: str) -> Path:
    module = __import__(f"duckdb_extension_{name}")
    found = sorted(Path(module.__file__).parent.glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        raise SystemExit(f"no {name}.duckdb_extension in the duckdb-extension-{name} wheel")
    return found[-1]


def main(spec: dict[str, object]) -> list[list[list[str]]]:
    con = duckdb.connect(
        config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    for name in EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    secret = spec.get("secret")
    options = [f"ENDPOINT '{spec['endpoint']}'"]
    if isinstance(secret, dict):
        fields = ", ".join(f"{k} '{v}'" for k, v in secret.items())
        con.execute(f"CREATE SECRET lake_secret (TYPE iceberg, {fields})")
        options.append("SECRET lake_secret")
    else:
        options.append("AUTHORIZATION_TYPE 'none'")
    con.execute(
        f"ATTACH '{spec.get('warehouse', '')}' AS lake (TYPE iceberg, {', '.join(options)})"
    )
    results = []
    for statement in spec["statements"]:  # type: ignore[attr-defined]
        rows = con.execute(statement).fetchall()
        results.append([[str(v) for v in row] for row in rows])
    return results


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
