"""pyiceberg 0.12.0's own catalog behaviour suite (``tests/catalog/test_catalog_behaviors.py``
of its sdist) run against every backend in ``backends.py``.

Contract (how to add a backend, where the list lives):

* **A backend** is a factory in ``backends.BACKENDS`` (name -> generator; see that module). The
  ``catalog`` and ``catalog_with_warehouse`` fixtures are parametrised by those names, so every
  test of the suite runs once per backend, e.g. ``test_create_table[lakecore-...]``.
* **The allowed failures** are in ``allowed_failures.json``: ``{backend: {test: reason}}``,
  where ``test`` is a test function's name (every parameter of it) or an item's full name
  (``test_x[lakecore-...]``). Each entry needs a reason. A backend missing from the file may
  fail nothing.
* **Enforced both ways, here** (``pytest_collection_modifyitems``): a listed test is a strict
  xfail, so a listed test that passes fails the run (remove it from the list), and an unlisted
  failure fails it as usual; an entry that names no collected test is an error.
* The suite's files come from the sdist in ``build/`` (``pyiceberg_sdist.py`` fetches it once);
  the fixtures the suite needs besides the catalogs are imported from the sdist's own
  ``tests/conftest.py``, not copied.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyiceberg.catalog import Catalog

from tests.iceberg.behaviours.backends import BACKENDS
from tests.iceberg.behaviours.pyiceberg_sdist import BEHAVIOURS, CONFTEST, ensure_suite

ALLOWED_FAILURES_FILE = Path(__file__).with_name("allowed_failures.json")
SUITE_MODULE = "pyiceberg_suite_catalog_behaviors"
CATALOG_FIXTURES = ("catalog", "catalog_with_warehouse")
# The suite's name for its catalogs (its tests build identifiers from it).
CATALOG_NAME = "test_catalog"


def load_suite_module(name: str, path: Path) -> ModuleType:
    """Import one file of the sdist under a name of its own (its ``tests`` package would
    clash with ours)."""
    if name in sys.modules:
        return sys.modules[name]
    ensure_suite()
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def allowed_failures() -> dict[str, dict[str, str]]:
    loaded: dict[str, dict[str, str]] = json.loads(ALLOWED_FAILURES_FILE.read_text())
    return loaded


_pyiceberg_conftest = load_suite_module("pyiceberg_suite_conftest", CONFTEST)

# The suite's own fixtures, taken from its conftest as they are (pytest registers the fixture
# functions it finds in this module).
table_schema_simple = _pyiceberg_conftest.table_schema_simple
table_schema_nested = _pyiceberg_conftest.table_schema_nested
pyarrow_schema_simple_without_ids = _pyiceberg_conftest.pyarrow_schema_simple_without_ids
pyarrow_schema_nested_without_ids = _pyiceberg_conftest.pyarrow_schema_nested_without_ids
iceberg_schema_simple_no_ids = _pyiceberg_conftest.iceberg_schema_simple_no_ids
iceberg_schema_nested_no_ids = _pyiceberg_conftest.iceberg_schema_nested_no_ids
metadata_location = _pyiceberg_conftest.metadata_location
warehouse = _pyiceberg_conftest.warehouse
table_name = _pyiceberg_conftest.table_name
database_name = _pyiceberg_conftest.database_name
hierarchical_namespace_name = _pyiceberg_conftest.hierarchical_namespace_name
fixture_random_table_identifier = _pyiceberg_conftest.fixture_random_table_identifier
fixture_another_random_table_identifier = (
    _pyiceberg_conftest.fixture_another_random_table_identifier
)
fixture_random_hierarchical_identifier = _pyiceberg_conftest.fixture_random_hierarchical_identifier
fixture_another_random_hierarchical_identifier = (
    _pyiceberg_conftest.fixture_another_random_hierarchical_identifier
)
fixed_test_table_identifier = _pyiceberg_conftest.fixed_test_table_identifier
another_fixed_test_table_identifier = _pyiceberg_conftest.another_fixed_test_table_identifier
fixed_test_table_namespace = _pyiceberg_conftest.fixed_test_table_namespace
test_table_identifier = _pyiceberg_conftest.test_table_identifier
another_table_identifier = _pyiceberg_conftest.another_table_identifier
test_namespace = _pyiceberg_conftest.test_namespace
test_table_properties = _pyiceberg_conftest.test_table_properties
pa_schema = _pyiceberg_conftest.pa_schema
arrow_table_with_null = _pyiceberg_conftest.arrow_table_with_null


def _catalog(request: pytest.FixtureRequest, warehouse_dir: Path) -> Iterator[Catalog]:
    yield from BACKENDS[request.param](request, CATALOG_NAME, warehouse_dir)


@pytest.fixture(params=list(BACKENDS))
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    """A fresh catalog per test whose warehouse is the test's ``tmp_path`` (as pyiceberg's)."""
    yield from _catalog(request, tmp_path)


@pytest.fixture(params=list(BACKENDS))
def catalog_with_warehouse(request: pytest.FixtureRequest, warehouse: Path) -> Iterator[Catalog]:
    """A fresh catalog per test whose warehouse is the session's ``warehouse`` folder."""
    yield from _catalog(request, warehouse)


def _backend_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for name in CATALOG_FIXTURES:
        if name in callspec.params:
            backend: str = callspec.params[name]
            return backend
    return None


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect: a stale entry is found on any run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    suite_items = [i for i in items if Path(str(i.path)).parent == here]
    if not suite_items:
        return
    allowed = allowed_failures()
    used: set[tuple[str, str]] = set()
    for item in suite_items:
        backend = _backend_of(item)
        if backend is None:
            continue
        entries = allowed.get(backend, {})
        function = getattr(item, "originalname", item.name)
        for key in (item.name, function):
            if key in entries:
                used.add((backend, key))
                item.add_marker(
                    pytest.mark.xfail(
                        strict=True,
                        reason=f"allowed to fail on {backend} ({ALLOWED_FAILURES_FILE.name}): {entries[key]}",
                    )
                )
                break
    stale = [
        f"{backend}: {key}"
        for backend, entries in allowed.items()
        for key in entries
        if (backend, key) not in used
    ]
    missing_reasons = [
        f"{backend}: {key}"
        for backend, entries in allowed.items()
        for key, reason in entries.items()
        if not str(reason).strip()
    ]
    if missing_reasons:
        raise pytest.UsageError(
            f"{ALLOWED_FAILURES_FILE}: every allowed failure needs a reason: {', '.join(missing_reasons)}"
        )
    if stale and not any("::" in str(arg) for arg in config.args):  # not a run of a few
        raise pytest.UsageError(
            f"{ALLOWED_FAILURES_FILE} names tests the suite does not have: {', '.join(stale)}; "
            "remove them"
        )


def suite_functions() -> dict[str, Any]:
    """The suite's test functions, for the test module to take in."""
    module = load_suite_module(SUITE_MODULE, BEHAVIOURS)
    return {name: value for name, value in vars(module).items() if name.startswith("test_")}
