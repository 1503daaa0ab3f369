"""table-maintenance as a Spark Connect client (``python -m jobs.table_maintenance --remote``):
the job uses the DataFrame API only, so it runs on the session's Connect server and decides
what the in-process run decides."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from lakecore.core.storage import Storage
from lakecore.maintenance.tables.result import TableMaintenanceOptions
from lakecore.maintenance.tables.run import table_maintenance_in_process
from tests.iceberg_histories import DAY, files_under, history, new_lake
from tests.spark_connect import REPO, ConnectServer, client_env

pytestmark = pytest.mark.connect
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"


# 66 s of CI's test time: the other jobs' Connect path runs in make test
# (test_jobs_through_connect.py, [python]); this job's logic in tests/jobs and tests/maintenance.
@pytest.mark.slow
def test_table_maintenance_through_connect(tmp_path: Path, spark_connect: ConnectServer) -> None:
    from lakecore.iceberg.expiry import CatalogCommitter

    uri, catalog = new_lake(tmp_path / "lake")
    history(catalog, "a", ["append", "overwrite", "append"])
    history(catalog, "b", ["append", "tag:v1", "overwrite"])
    later = int(time.time() * 1000) + 30 * DAY
    options = TableMaintenanceOptions(
        grace_millis=0, now_millis=later, override_grace=True, dry_run=True
    )
    oracle = table_maintenance_in_process(
        Storage(uri), CatalogCommitter(catalog, later, options.defaults), options
    )
    before = files_under(Path(uri) / "warehouse")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            str(PROJECT_PYTHON),
            "-m",
            "jobs.table_maintenance",
            "--lakehouse",
            uri,
            "--now",
            str(later),
            "--older-than",
            "0s",
            "--i-understand-grace-risk",
            "--remote",
            spark_connect.url,
            "--report",
            str(report),
        ],
        env=client_env(LAKECORE_PROGRESS="0"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(report.read_text())["counts"]
    assert counts["files_deleted"] == oracle.to_delete > 0
    assert counts["snapshots_expired"] == oracle.snapshots_expired
    assert before - files_under(Path(uri) / "warehouse") == oracle.chosen
