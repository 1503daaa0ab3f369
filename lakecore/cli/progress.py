"""A small progress bar for long command-line work, on stderr.

Drawn only when stderr is a terminal (or ``LAKECORE_PROGRESS=1``), so logs and pipes stay
clean; ``LAKECORE_PROGRESS=0`` turns it off everywhere.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import TextIO

_WIDTH = 30
_MIN_INTERVAL_SECONDS = 0.1


def _enabled(stream: TextIO) -> bool:
    setting = os.environ.get("LAKECORE_PROGRESS")
    if setting is not None:
        return setting not in ("0", "false", "no", "")
    return stream.isatty()


class Progress:
    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = _enabled(self.stream)
        self._last_draw = 0.0
        self._started = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (
            now - self._last_draw >= _MIN_INTERVAL_SECONDS or self.done == self.total
        ):
            self._draw(now)

    def _draw(self, now: float) -> None:
        self._last_draw = now
        elapsed = now - self._started
        if self.total:
            share = min(1.0, self.done / self.total)
            filled = int(share * _WIDTH)
            bar = "#" * filled + "-" * (_WIDTH - filled)
            text = f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s"
        else:
            text = f"\r{self.label} {self.done} {elapsed:5.1f}s"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
