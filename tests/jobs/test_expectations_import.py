"""validate's background import of great_expectations (jobs.expectations).

Each case runs in a fresh interpreter with a stand-in ``great_expectations`` package first on
the path, so that what the import does (succeed slowly, or end the process the way pyspark's
Spark Connect dependency check does) is under the test's control.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent("""
    import threading, time
    from jobs import expectations
    expectations.start_importing_great_expectations()
    expectations.start_importing_great_expectations()  # once per process
    busy = [t for t in threading.enumerate() if t.name == "import-great-expectations"]
    print("threads", len(busy))
    try:
        gx = expectations.import_great_expectations()
    except RuntimeError as exc:
        print("refused", exc)
    else:
        print("imported", gx.MARK)
""")


def _run(tmp_path: Path, package_body: str) -> list[str]:
    package = tmp_path / "stand-in" / "great_expectations"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(package_body))
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "stand-in"), str(REPO)]),
        "IMPORTS_LOG": str(tmp_path / "imports.log"),
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_background_import_is_the_one_the_suite_uses(tmp_path: Path) -> None:
    lines = _run(
        tmp_path,
        """
        import os, time
        with open(os.environ["IMPORTS_LOG"], "a") as log:
            log.write("import\\n")
        time.sleep(0.5)  # slow, like the real one: the suite must wait for it, not start another
        MARK = "ready"
    """,
    )
    assert lines == ["threads 1", "imported ready"]
    assert (tmp_path / "imports.log").read_text() == "import\n"  # imported once


def test_an_import_that_ends_the_process_is_an_error_not_a_silent_exit(tmp_path: Path) -> None:
    lines = _run(
        tmp_path,
        """
        import sys, time
        time.sleep(0.5)
        sys.exit(0)  # what pyspark's connect check does when its dependencies are missing
    """,
    )
    assert lines[0] == "threads 1"
    assert lines[1].startswith(
        "refused importing great_expectations tried to exit the process (code 0)"
    )
