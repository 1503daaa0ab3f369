"""Stage progress on a terminal: one line on stderr per stage, redrawn in place.

The line names the job, the stage and its elapsed time and, while Spark runs it, its tasks done
of all (from the status tracker of the job's group). When stderr is not a terminal nothing is
printed, so that logs and Airflow stay clean (``LAKECORE_PROGRESS=1`` forces the lines, ``=0``
stops them).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

from jobs.signals import JobInterrupted

if TYPE_CHECKING:
    from pyspark import SparkContext


def progress_enabled(stream: Any = None) -> bool:
    """Progress lines only on a terminal (``LAKECORE_PROGRESS=1`` forces them, ``=0`` stops them)."""
    setting = os.environ.get("LAKECORE_PROGRESS")
    if setting is not None:
        return setting not in ("0", "false", "no", "")
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class StageProgress:
    """One line on stderr per stage, redrawn in place: the stage, its elapsed time and, while
    Spark runs it, its tasks done of all (from the status tracker of the stage's job group).
    When stderr is not a terminal it prints nothing (logs and Airflow stay clean)."""

    INTERVAL_SECONDS = 0.5

    def __init__(
        self,
        job: str,
        name: str,
        description: str,
        sc: SparkContext | None = None,
        group: str | None = None,
        stream: Any = None,
    ) -> None:
        self.job, self.name, self.description = job, name, description
        self.sc, self.group = sc, group
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(self.stream)
        self._started = time.monotonic()
        self._stop: Any = None
        self._thread: Any = None
        self._width = 0
        self._earlier_jobs: set[int] = set()

    def tasks(self) -> tuple[int, int] | None:
        """(tasks done, tasks in all) of the Spark jobs this stage started so far, or None.
        The job group is the whole job's: the jobs of earlier stages are left out, and so is a
        finished job's stage that ran no task (Spark skipped it: its output was already there),
        which the trial saw as '25/99 tasks done'."""
        if self.sc is None or self.group is None:
            return None
        try:
            tracker = self.sc.statusTracker()
            done = total = 0
            for job_id in set(tracker.getJobIdsForGroup(self.group)) - self._earlier_jobs:
                info = tracker.getJobInfo(job_id)
                if info is None:
                    continue
                finished = str(info.status) in ("SUCCEEDED", "FAILED")
                for stage_id in info.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is None or (finished and stage.numCompletedTasks == 0):
                        continue
                    done += stage.numCompletedTasks
                    total += stage.numTasks
            return (done, total) if total else None
        except Exception:
            return None

    def _jobs_so_far(self) -> set[int]:
        if self.sc is None or self.group is None:
            return set()
        try:
            return set(self.sc.statusTracker().getJobIdsForGroup(self.group))
        except Exception:
            return set()

    def line(self, ended: str | None = None) -> str:
        """The stage's line; ``ended`` (``done in``, ``interrupted after``, ``failed after``)
        once it is over, with the exact time, which the live line rounds to a tenth of a second
        (a driver stage of 45 ms read "done in 0ms")."""
        from lakecore.core.units import format_seconds

        elapsed = time.monotonic() - self._started
        text = f"lakecore {self.job} [{self.name}] {self.description}"
        if len(text) > 90:
            text = text[:89] + "…"
        counts = self.tasks()
        if counts is not None:
            text += f"  {counts[0]}/{counts[1]} tasks"
        if ended is None:
            return f"{text}  {format_seconds(round(elapsed, 1))}"
        return f"{text}  {ended} {format_seconds(round(elapsed, 3))}"

    def _draw(self, ended: str | None = None) -> None:
        final = ended is not None
        text = self.line(ended)
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad + ("\n" if final else ""))
        self.stream.flush()

    def __enter__(self) -> StageProgress:
        if not self.enabled:
            return self
        import threading

        self._earlier_jobs = self._jobs_so_far()
        self._stop = threading.Event()

        def run() -> None:
            while not self._stop.wait(self.INTERVAL_SECONDS):
                self._draw()

        self._draw()
        self._thread = threading.Thread(
            target=run, name=f"lakecore-progress-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if not self.enabled or self._stop is None:
            return
        self._stop.set()
        self._thread.join(timeout=2)
        # A stage a signal or an error ended is not "done": the job's own line says what it left.
        if exc_type is None:
            self._draw("done in")
        elif issubclass(exc_type, JobInterrupted):
            self._draw("interrupted after")
        else:
            self._draw("failed after")
