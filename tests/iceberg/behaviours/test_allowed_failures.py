"""The allowed-failure list stays short: at most 11 entries per backend (issue 38), each with
its reason.

The "rest" backend (pyiceberg's RestCatalog through lakecore's REST server, issue 41) may fail
what the direct "lakecore" catalog may, with the same reasons, and besides only tests that no
REST server can pass because RestCatalog decides them on the client side: each such entry cites
the line of the installed ``pyiceberg/catalog/rest/__init__.py`` that decides it, as
``pyiceberg/catalog/rest/__init__.py:LINE `code```, and that line must hold that code; or a
server answer that other clients need (issue 48, the engines): such an entry names the test
that shows it, as ``server-side by design, tests/PATH::TEST:``, and that test must exist."""

from __future__ import annotations

import re
from pathlib import Path

import pyiceberg.catalog.rest

from tests.iceberg.behaviours.backends import BACKENDS
from tests.iceberg.behaviours.conftest import allowed_failures

MAX_ENTRIES = 11


def test_the_allowed_failures_are_few_and_explained() -> None:
    allowed = allowed_failures()
    assert set(allowed) <= set(BACKENDS), (
        f"entries for unknown backends: {set(allowed) - set(BACKENDS)}"
    )
    for backend, entries in allowed.items():
        inherited = allowed["lakecore"] if backend == "rest" else {}
        extra = [k for k in entries if k not in inherited]
        assert len(extra) <= MAX_ENTRIES, f"{backend}: {len(extra)} allowed failures"
        assert all(reason.strip() for reason in entries.values())


CITATION = re.compile(r"^client-side, pyiceberg/catalog/rest/__init__\.py:(\d+) `([^`]+)`")
BY_DESIGN = re.compile(r"^server-side by design, (tests/[\w/]+\.py)::(test_\w+):")
REPO = Path(__file__).resolve().parents[3]


def test_rest_fails_only_what_the_direct_catalog_does_or_the_client_decides() -> None:
    allowed = allowed_failures()
    direct, rest = allowed["lakecore"], allowed["rest"]
    assert {k: rest.get(k) for k in direct} == direct, "rest must allow what lakecore allows"
    client_side = {k: v for k, v in rest.items() if k not in direct}
    assert len(client_side) <= MAX_ENTRIES
    source = Path(pyiceberg.catalog.rest.__file__).read_text().splitlines()
    for test, reason in client_side.items():
        shown = BY_DESIGN.match(reason)
        if shown:
            path, name = REPO / shown.group(1), shown.group(2)
            assert path.is_file() and f"def {name}(" in path.read_text(), f"{test}: no {name}"
            continue
        cited = CITATION.match(reason)
        assert cited, f"{test}: the reason must cite the deciding line: {reason}"
        line, code = int(cited.group(1)), cited.group(2)
        assert code in source[line - 1], f"{test}: line {line} is {source[line - 1].strip()!r}"
