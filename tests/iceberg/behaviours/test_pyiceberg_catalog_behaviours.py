"""pyiceberg 0.12.0's ``tests/catalog/test_catalog_behaviors.py``, taken from its sdist in
build/ (see conftest.py): its test functions become this module's, and run once per backend."""

from __future__ import annotations

from tests.iceberg.behaviours.conftest import suite_functions

globals().update(suite_functions())
