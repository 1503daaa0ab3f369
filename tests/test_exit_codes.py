"""One exit-code table: the README's, the CLI's and the jobs' --help, and the DAGs' retry rule
all come from ``lakecore.errors.ExitCode``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from lakecore.errors import NO_RETRY_EXIT_CODES, ExitCode, exit_code_help

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_table_lists_every_code_and_the_retry_rule() -> None:
    text = (REPO / "README.md").read_text()
    table = text[text.index("### Exit codes") :]
    rows = re.findall(r"^\| `(\d+)` \| (.*?) \|\s*(yes|no)?\s*\|$", table, re.MULTILINE)
    assert {int(code) for code, _meaning, _retried in rows} == {int(c) for c in ExitCode}
    for code, _meaning, retried in rows:
        if int(code) in NO_RETRY_EXIT_CODES:
            assert retried == "no", code
        elif int(code) != ExitCode.OK:
            assert retried == "yes", code


def test_help_prints_the_table() -> None:
    for argv in (["-m", "lakecore.cli", "--help"], [str(REPO / "jobs" / "gc.py"), "--help"]):
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert exit_code_help() in proc.stdout


def test_the_dags_load_the_same_table() -> None:
    import importlib.util

    # The DAG helper loads lakecore/errors.py by path (Airflow's venv has no lakecore); check
    # that the file it loads is this one.
    source = (REPO / "airflow_dags" / "_lakecore_common.py").read_text()
    assert '"lakecore" / "errors.py"' in source
    spec = importlib.util.spec_from_file_location("_errors_copy", REPO / "lakecore" / "errors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert {int(c) for c in module.ExitCode} == {int(c) for c in ExitCode}
