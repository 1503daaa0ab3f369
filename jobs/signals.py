"""SIGINT and SIGTERM stop a job where it is, in one line, with its report written.

Rules:
- The first signal becomes ``JobInterrupted`` in the main thread (a BaseException, so that no
  ``except Exception`` swallows it); later ones are ignored, so that the report still gets
  written. ``run_job`` turns it into status ``interrupted`` and ``ExitCode.INTERRUPTED``.
- Spark work is stopped, not waited for (``Interruption``): a signal during a py4j call lets
  the call finish and raises as it returns, and a thread of its own cancels the job's work.
- A signal inside the import system is delivered again a moment later, outside it.
- Outside the main thread (a test calling ``main``) and in spark-submit.sh's check before the
  JVM starts, signals stay as they are.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from jobs.startup import take_dispositions_before_startup
from jobs.wrapper import parse_only


class JobInterrupted(BaseException):
    """SIGINT or SIGTERM reached the driver. A BaseException, so that no ``except Exception``
    in a job or a library swallows it; ``run_job`` turns it into status ``interrupted``."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def _inside_the_import_system(frame: Any) -> bool:
    """True when ``frame`` or a caller of it runs importlib's own (frozen) code."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class Interruption:
    """What ``stop_on_signals`` knows of a SIGINT or SIGTERM: which came first (``signal_name``,
    None until one does), and whether the job body has ended (a signal after that is too late to
    stop anything, and is ignored).

    Spark work is stopped, not waited for. A signal that lands while the main thread waits in a
    py4j call (a Spark action: seconds, or hours on a big cluster) used to raise there; py4j's
    connection was then left mid-answer, and the next call on it (pyspark's own, as the
    exception left the action) waited for the action to end. Now the handler lets the call
    finish and raises as it returns (``raise_when_it_returns``), and a thread of its own (py4j
    gives it its own connection) calls ``stop_work``: the cancelled action ends the call at
    once, with an error the interruption replaces."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        # Stops the job's Spark work; called once, on a thread of its own.
        self.stop_work: Callable[[], None] | None = None
        self.raised = False
        self.body_ended = False
        self._stopping: threading.Thread | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def note(self, signum: int) -> None:
        """The first signal: remember it, and stop the job's Spark work."""
        import signal

        self.signal_name = signal.Signals(signum).name
        if self.stop_work is not None:
            self._stopping = threading.Thread(
                target=self._stop, name="lakecore-interrupt", daemon=True
            )
            self._stopping.start()

    def _stop(self) -> None:
        if self.stop_work is not None:
            with contextlib.suppress(Exception):
                self.stop_work()

    def finish(self, timeout_seconds: float) -> None:
        """Wait for the stopping thread, if any."""
        if self._stopping is not None:
            self._stopping.join(timeout_seconds)

    def raise_when_it_returns(self, frame: Any) -> None:
        """Raise ``JobInterrupted`` as ``frame`` (the main thread's outermost py4j frame, its
        answer read) returns or unwinds, unless the body has ended by then: the frame's own
        trace function, with this thread's tracing on for it alone."""
        before = sys.gettrace()

        def on_event(traced: Any, event: str, arg: Any) -> Any:
            if event != "return" or traced is not frame:
                return on_event
            sys.settrace(before)
            if not self.body_ended and not self.raised:
                self.raised = True
                raise JobInterrupted(self.signal_name or "SIGINT")
            return None

        frame.f_trace_lines = False
        frame.f_trace = on_event
        # Tracing on for this thread: a new frame's call event asks the previous tracer, if
        # any, and traces nothing new otherwise.
        sys.settrace(before if before is not None else _trace_nothing_new)


def _trace_nothing_new(frame: Any, event: str, arg: Any) -> None:
    return None


def _outermost_py4j_frame(frame: Any) -> Any:
    """The outermost frame of py4j's code (a call into the JVM) among ``frame`` and its
    callers; None when there is none."""
    marker = f"{os.sep}py4j{os.sep}"
    outermost = None
    while frame is not None:
        if marker in frame.f_code.co_filename:
            outermost = frame
        frame = frame.f_back
    return outermost


@contextlib.contextmanager
def stop_on_signals(state: Interruption) -> Iterator[None]:
    """Turn the first SIGINT or SIGTERM into ``JobInterrupted`` in the main thread (in a py4j
    call, as the call returns: ``Interruption``); later ones are ignored, so that the report
    still gets written. Outside the main thread (a test calling ``main``), signals stay as they
    are."""
    import signal

    if threading.current_thread() is not threading.main_thread() or parse_only():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if state.raised or state.body_ended:
            return
        if _inside_the_import_system(frame):
            # Raised there, the exception can land in a callback of the import system's module
            # locks, which prints "Exception ignored" and drops it: the job went on, and once
            # hung on a module lock. Deliver the signal again in a moment, outside the import.
            threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
            return
        first = state.signal_name is None
        if first:
            state.note(signum)
        in_py4j = _outermost_py4j_frame(frame)
        if in_py4j is not None:
            if first:
                state.raise_when_it_returns(in_py4j)
            return
        state.raised = True
        raise JobInterrupted(state.signal_name or signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous.update(take_dispositions_before_startup())  # not the "while starting" ones
    try:
        yield
    finally:
        state.body_ended = True
        for sig, old in previous.items():
            signal.signal(sig, old)
