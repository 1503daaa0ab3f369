"""``pip install lakecore`` is the format library, the catalog and the CLI, without Spark: the
README's CLI tour runs with pyspark and great-expectations unimportable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("pyspark", "great_expectations", "py4j")


def test_the_cli_tour_runs_without_pyspark(tmp_path: Path) -> None:
    # A folder first on the path whose packages refuse to import: any `import pyspark` fails.
    blocker = tmp_path / "blocker"
    for name in BLOCKED:
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(
            f"raise ImportError('{name} is blocked by the test')\n"
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])}
    lake = tmp_path / "lake"

    def run(*argv: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "lakecore.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, (argv, proc.stderr)
        return proc.stdout

    probe = subprocess.run(
        [sys.executable, "-c", "import pyspark"], capture_output=True, text=True, env=env
    )
    assert probe.returncode != 0 and "blocked by the test" in probe.stderr
    run("init", str(lake), "--name", "demo")
    l_ = ["-l", str(lake)]
    run(*l_, "namespace", "create", "sales", "--property", "owner=team-a")
    run(
        *l_,
        "table",
        "create",
        "sales",
        "orders",
        "--column",
        "1:id:INT8:required",
        "--column",
        "2:amount:DECIMAL",
    )
    assert run(*l_, "table", "list", "sales").split() == ["orders"]
    assert '"name": "orders"' in run(*l_, "--json", "table", "show", "sales", "orders")
    assert "latest" in run(*l_, "versions")
    run(*l_, "tree")
    run(*l_, "rollback", "--to-version", "1")
    run(*l_, "export", "nightly", "--mode", "full", "--target", str(tmp_path / "copy"))
    run(*l_, "settings", "set", "--maximum-version-age", "7d")
    run(*l_, "repair", "rollback", "--to-last-valid")
    assert "clean" in run(*l_, "fsck", "--all", "--deep")
    # And the engine-neutral maintenance runs in one process.
    code = (
        "import time; from lakecore.core.storage import Storage; "
        "from lakecore.maintenance.expire import expire_in_process; "
        "from lakecore.maintenance.gc import gc_in_process; "
        f"s = Storage({str(lake)!r}); now = int(time.time() * 1000); "
        "expire_in_process(s, now_millis=now); gc_in_process(s, now_millis=now, grace_millis=0, dry_run=True)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
