"""The Airflow DAG tests: run only in the Airflow venv (``make test-airflow``).

    .venv-airflow/bin/python -m pytest tests/airflow

The project venv has no Airflow (and must not get it: Airflow 3 and the Spark provider pull in
pyspark-client, which shares pyspark's package folder), so there this folder is not collected.

Airflow reads AIRFLOW_HOME when it is first imported: it points at a fresh temporary folder
here, before any test module imports airflow, so no test touches ~/airflow.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = REPO_ROOT / "airflow_dags"

if (
    importlib.util.find_spec("airflow") is None
    or importlib.util.find_spec("airflow.providers.apache.spark") is None
):
    collect_ignore_glob = ["*"]
else:
    _home = tempfile.mkdtemp(prefix="lakecore-airflow-home-")
    atexit.register(shutil.rmtree, _home, ignore_errors=True)
    os.environ["AIRFLOW_HOME"] = _home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS_FOLDER)
    for _name in list(os.environ):  # the developer's own Variables must not leak into the tests
        if _name.startswith(("AIRFLOW_VAR_LAKECORE_", "AIRFLOW_CONN_LAKECORE_")):
            del os.environ[_name]


# The same import, as source for a script run in a process of its own.
IMPORT_DAGBAG_SOURCE = (
    "try:\n"
    "    from airflow.dag_processing.dagbag import DagBag\n"
    "except ImportError:  # Airflow before 3.1\n"
    "    from airflow.models.dagbag import DagBag\n"
)


@pytest.fixture(scope="session")
def dagbag():
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow before 3.1
        from airflow.models.dagbag import DagBag
    import inspect

    kwargs = (
        {"include_examples": False}
        if "include_examples" in inspect.signature(DagBag).parameters
        else {}
    )
    return DagBag(dag_folder=str(DAGS_FOLDER), **kwargs)
