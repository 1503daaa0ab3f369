"""The hint written off a commit's path: a committer that answers its callers once the root
exists, and lets the hint follow.

The hint (docs/format.md#latest-version) is best effort: a reader probes upward from it, so a
hint below the latest version costs a reader one existence check per version it lags, never a
wrong answer. A commit's caller therefore need not wait for it. ``BackgroundHint`` takes the
version a commit created and writes it from the process's request pool:

* **Newest wins.** At most one hint write is in flight; versions published meanwhile replace
  each other, and the newest is written when the write in flight ends. Under a stream of
  commits a process writes the hint about once per round trip, not once per commit, and never
  moves it backwards itself.
* **Never raises into a commit.** A failed write is counted (``failed``) and the next publish
  tries again; the next commit's own read of the hint sees at worst an older value, which the
  commit protocol treats as it treats any hint below its target.
* **A clean exit writes it.** The write runs on the request pool, whose threads the interpreter
  joins at exit, so a process that stops cleanly leaves the hint at its newest version; a
  killed one leaves it a round trip behind. ``flush(timeout)`` waits for it explicitly.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from lakecore.core.storage import Storage, request_pool
from lakecore.core.versions import write_hint

# One hint write at a time: the request pool needs one thread for it.
HINT_THREADS: Final = 1


class BackgroundHint:
    """Writes the newest version published to it as the hint of ``storage`` (see above)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._lock = threading.Condition()
        self._newest = -1  # the newest version published
        self._written = -1  # the newest version written (or given up on)
        self._busy = False
        self.writes = 0
        self.failed = 0

    def publish(self, version: int) -> None:
        """Have ``version`` written as the hint, unless a newer one was published already."""
        with self._lock:
            if version <= self._newest:
                return
            self._newest = version
            if self._busy:
                return  # the write in flight takes the newest when it ends
            self._busy = True
        request_pool(HINT_THREADS).submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                version = self._newest
                if version <= self._written:
                    self._busy = False
                    self._lock.notify_all()
                    return
            ok = write_hint(self.storage, version)
            with self._lock:
                self._written = version
                self.writes += 1
                self.failed += 0 if ok else 1

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the newest published version to be written;
        False if a write was still in flight."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True


__all__ = ["HINT_THREADS", "BackgroundHint"]
