"""A job's first step as a program: the job file hands over here, and a Ctrl-C or SIGTERM while
the job imports says so in one line.

Rules:
- A job's program is its job file, ``jobs/JOB.py`` (``JOB`` with ``-`` as ``_``): spark-submit
  runs that file by its path (``spark-submit.sh``, the Airflow DAGs), and ``python -m jobs.JOB``
  runs it as a module. Run by its path, Python puts ``jobs/`` on ``sys.path``, not the repo root,
  so nothing of ``jobs`` can be imported until the file has put the root there: that path fix
  is the only code a job file holds, then it calls ``run_as_program`` (as ``__main__`` only).
  Every job file is the same but for the job's name; importing one does nothing.
- The job's code is its own module, ``jobs.JOB_job`` (``main``, the run, the report);
  ``run_as_program`` imports it only after the quiet handlers below are in place.
- Run as ``python -m jobs.JOB`` (local Spark, ``--remote``), a job spends about 0.4 s importing
  pyspark, pyarrow and lakecore before ``run_job`` installs the handler that stops a job
  cleanly (``jobs.signals``). Until now a Ctrl-C there printed a KeyboardInterrupt traceback
  through the import machinery, and a SIGTERM ended the process with 143 and no word.
- ``quiet_until_the_job_begins`` is called by ``run_as_program``, before the job's imports. From then on SIGINT and SIGTERM end the process at once
  with one line (nothing has been read or written yet) and ``ExitCode.INTERRUPTED``.
- ``run_job`` installs its own handlers over these, then takes the dispositions they replaced
  (``take_dispositions_before_startup``) to put back after the job, so that a signal then is
  handled as before, not as "starting".
- Only when SIGINT has Python's default disposition, and only signals that have theirs: under
  ``spark-submit.sh`` the driver starts with SIGINT ignored (the JVM ignores it), and the
  wrapper forwards a Ctrl-C or a SIGTERM only once ``run_job``'s handler is in place, so that
  the driver writes its report; an embedding program chose its own.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any, NoReturn

from lakecore.errors import ExitCode

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFAULTS: dict[signal.Signals, Any] = {
    signal.SIGINT: signal.default_int_handler,
    signal.SIGTERM: signal.SIG_DFL,
}
_installed: dict[signal.Signals, Any] = {}


def run_as_program(job: str) -> NoReturn:
    """Run ``job`` (``gc``, ``compact-versions``, ...) as this process's program: quiet until it
    begins, then import its module (``jobs.JOB_job``) and exit with what its ``main()`` returns."""
    quiet_until_the_job_begins(job)
    module = importlib.import_module(f"jobs.{job.replace('-', '_')}_job")
    sys.exit(module.main())


def quiet_until_the_job_begins(job: str) -> None:
    """Until the job begins (``run_job``): SIGINT or SIGTERM prints ``lakecore JOB: interrupted by SIG...
    while starting ...; nothing was done`` and exits with ``ExitCode.INTERRUPTED``."""

    def handler(signum: int, _frame: Any) -> None:
        # os.write and os._exit: the signal can land anywhere in an import, where raising (or
        # running exit hooks of half-imported modules) would print the traceback this avoids.
        name = signal.Signals(signum).name
        os.write(
            2,
            f"lakecore {job}: interrupted by {name} while starting, before the job began; "
            "nothing was done\n".encode(),
        )
        os._exit(ExitCode.INTERRUPTED)

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return  # spark-submit's JVM started this driver with SIGINT ignored: its wrapper handles both
    for sig in _SIGNALS:
        if signal.getsignal(sig) is _DEFAULTS[sig]:
            _installed[sig] = signal.signal(sig, handler)


def take_dispositions_before_startup() -> dict[signal.Signals, Any]:
    """The dispositions ``quiet_until_the_job_begins`` replaced (none: empty), forgotten here.
    The caller has just installed its own handlers (no moment without one) and puts these
    back when the job is done."""
    taken = dict(_installed)
    _installed.clear()
    return taken
