"""What ``spark-submit.sh`` and a job's driver tell each other through the environment.

The wrapper runs every job twice: first in plain Python to check its command line before the
JVM starts (``LAKECORE_PARSE_ONLY=1``: ``run_job`` stops once the arguments are read), then
under spark-submit. For the second run it names three files:

    LAKECORE_JOB_BEGAN_FILE   the driver creates it once the job has begun (its signal handlers
                              are in place): the wrapper's traps then leave a Ctrl-C or SIGTERM
                              to the driver, even when the driver has ended by the time they look
    LAKECORE_ERROR_LINE_FILE  the job's one error line, which the wrapper prints on its stderr
                              once Spark has ended (Spark's PythonRunner relays the driver's
                              stderr on stdout)
    LAKECORE_SPARK_LOG        where Spark's own output went (its log4j lines, its Python
                              workers' stderr), for the report and the error line

Outside the wrapper none is set, and the driver prints on its own stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Final

from lakecore.core.display import escape_for_display

PARSE_ONLY_VARIABLE: Final = "LAKECORE_PARSE_ONLY"
JOB_BEGAN_VARIABLE: Final = "LAKECORE_JOB_BEGAN_FILE"
ERROR_LINE_VARIABLE: Final = "LAKECORE_ERROR_LINE_FILE"
SPARK_LOG_VARIABLE: Final = "LAKECORE_SPARK_LOG"


def parse_only() -> bool:
    """True in the wrapper's check of the command line, before the JVM starts."""
    return os.environ.get(PARSE_ONLY_VARIABLE) == "1"


def under_the_wrapper() -> bool:
    """True when spark-submit.sh started this process (its check or its run)."""
    return parse_only() or bool(os.environ.get(JOB_BEGAN_VARIABLE))


def spark_log() -> str | None:
    """The wrapper's file for Spark's own output, or None (it goes to the terminal)."""
    return os.environ.get(SPARK_LOG_VARIABLE) or None


def say_the_job_began() -> None:
    """Create the file ``JOB_BEGAN_VARIABLE`` names, if any (the wrapper's, in its temp dir)."""
    marker = os.environ.get(JOB_BEGAN_VARIABLE)
    if marker and not parse_only():
        with contextlib.suppress(OSError):
            Path(marker).touch()


def say_the_error(line: str) -> None:
    """The job's one error line, on stderr; under the wrapper into the file it names
    (``ERROR_LINE_VARIABLE``), which it prints on its stderr. The check before the JVM starts
    runs in the terminal, where stderr is stderr."""
    relay = os.environ.get(ERROR_LINE_VARIABLE)
    if relay and not parse_only():
        try:
            Path(relay).write_text(escape_for_display(line) + "\n")
            return
        except OSError:
            pass  # then where Spark puts it
    print(escape_for_display(line), file=sys.stderr)


__all__ = [
    "ERROR_LINE_VARIABLE",
    "JOB_BEGAN_VARIABLE",
    "PARSE_ONLY_VARIABLE",
    "SPARK_LOG_VARIABLE",
    "parse_only",
    "say_the_error",
    "say_the_job_began",
    "spark_log",
    "under_the_wrapper",
]
