"""A REST client process of the load and crash suites: appends to one table with pyiceberg's
``RestCatalog`` and writes down what each append was answered.

Run as ``python -m tests.reliability.rest_client SPEC_JSON`` (a process of its own, so that N
clients are N interpreters, as N engines are). ``ClientSpec`` says which server, which table,
how many appends (or until the stop file appears) and where the ledger goes. A client imports
what it needs, says it is ready, and waits for the go file, which lists the servers' URLs (the
test starts clients and servers side by side).

Every append ``seq`` of client ``name`` adds the rows ``ids_of(base, seq, rows)`` and names
itself in its snapshot's summary (``CLIENT_PROPERTY``, ``SEQ_PROPERTY``), so that a checker can
find it, or its absence, in the table afterwards whatever the client was answered. Each append
is one line of the ledger (JSON, written once the answer, or the lack of one, is known):

    outcome     what the client saw
    ok          200: the commit is acknowledged (``snapshot`` is its id)
    unknown     CommitStateUnknownException (500, 502, 504): it may or may not have landed
    no-answer   the connection broke, before the answer or in the middle of it (a killed
                server): it may or may not have landed
    refused     CommitFailedException after pyiceberg's retries (409): it did not land
    error       anything else (``error`` says what): it did not land

pyiceberg retries a 409 itself (``commit.retry.*`` table properties): it reloads the table and
commits again, the same snapshot id each time. A load that finds no server (a killed one being
restarted) is tried again for up to ``reconnect_seconds``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CLIENT_PROPERTY = "lc.client"
SEQ_PROPERTY = "lc.seq"
# Rows of one client never overlap another's: client i owns ids from i * ID_SPACE.
ID_SPACE = 10_000_000


@dataclass
class ClientSpec:
    name: str
    server: int  # which of the servers the go file lists
    table: str  # "ns.table"
    base: int  # the first id this client owns
    ledger: str
    ready: str  # written once the client has imported what it needs
    go: str  # the client waits for this file (a JSON list of server URLs), then connects
    commits: int | None = None  # None: until ``stop`` appears
    stop: str | None = None
    rows: int = 3
    properties: dict[str, str] = field(default_factory=dict)  # RestCatalog's (s3.*)
    reconnect_seconds: float = 90.0
    pause_seconds: float = 0.0  # between appends


def ids_of(base: int, seq: int, rows: int) -> list[int]:
    return [base + seq * rows + k for k in range(rows)]


def _wait_for(path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.005)


def run(spec: ClientSpec) -> None:
    import pyarrow as pa
    import requests
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import (
        CommitFailedException,
        CommitStateUnknownException,
        ServiceUnavailableError,
    )

    schema = pa.schema([("id", pa.int64()), ("client", pa.string())])
    # Ready once imported: the test starts the clients while the servers start, and releases
    # them once the servers listen and the tables exist.
    Path(spec.ready).touch()
    _wait_for(spec.go, 300)
    url = json.loads(Path(spec.go).read_text(encoding="utf-8"))[spec.server]
    catalog = RestCatalog(spec.name, uri=url, **spec.properties)

    def load() -> Any:
        """The table, waiting out a server that does not answer (killed, restarting)."""
        deadline = time.monotonic() + spec.reconnect_seconds
        while True:
            try:
                return catalog.load_table(spec.table)
            except (requests.ConnectionError, ServiceUnavailableError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    with open(spec.ledger, "a", encoding="utf-8") as out:
        seq = 0
        while spec.commits is None or seq < spec.commits:
            if spec.stop is not None and os.path.exists(spec.stop):
                break
            ids = ids_of(spec.base, seq, spec.rows)
            record: dict[str, Any] = {"client": spec.name, "table": spec.table, "seq": seq}
            record["at"] = round(time.time(), 3)
            started = time.monotonic()
            try:
                table = load()
                table.append(
                    pa.table({"id": ids, "client": [spec.name] * len(ids)}, schema=schema),
                    snapshot_properties={CLIENT_PROPERTY: spec.name, SEQ_PROPERTY: str(seq)},
                )
            except CommitStateUnknownException as exc:
                record.update(outcome="unknown", error=str(exc)[:300])
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                record.update(outcome="no-answer", error=f"{type(exc).__name__}: {exc}"[:300])
            except CommitFailedException as exc:
                record.update(outcome="refused", error=str(exc)[:300])
            except Exception as exc:  # written down: the checker says it must be absent
                record.update(outcome="error", error=f"{type(exc).__name__}: {exc}"[:300])
            else:
                snapshot = table.current_snapshot()
                record.update(
                    outcome="ok",
                    snapshot=None if snapshot is None else snapshot.snapshot_id,
                    summary_seq=None
                    if snapshot is None or snapshot.summary is None
                    else snapshot.summary.additional_properties.get(SEQ_PROPERTY),
                )
            record["seconds"] = round(time.monotonic() - started, 4)
            out.write(json.dumps(record, sort_keys=True) + "\n")
            out.flush()
            seq += 1
            if spec.pause_seconds:
                time.sleep(spec.pause_seconds)


def read_ledger(path: str | Path) -> list[dict[str, Any]]:
    """A ledger's records; a last line cut short (a client still writing it) is left out."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def spec_argument(spec: ClientSpec) -> str:
    return json.dumps(asdict(spec))


if __name__ == "__main__":
    run(ClientSpec(**json.loads(sys.argv[1])))
