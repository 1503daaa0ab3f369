"""``LatestVersion``: the latest version of one lakehouse for many concurrent readers, at the
cost of one request per check, shared by every reader that arrives while it waits.

A server answers most reads from a version it already knows, since nothing it read (root,
nodes, definitions) ever changes. What it must learn per read is whether a newer version
exists. The chain of roots has no gap above the latest (every root is created exclusively,
``v+1`` only after ``v``), so the absence of root ``v+1`` says that ``v`` is still the latest:
one ``exists`` request (a HEAD on S3).

Rules:

* **Fresh for every reader.** ``view()`` answers from a check that *started after it was
  called*: a reader never gets an answer older than its own request, so a commit another
  server acknowledged before the read began is seen. Readers that arrive while a check runs
  wait for the next one and share it: one request for all of them, however many.
* **A full look, now and then.** Root ``v+1`` can be missing while ``v`` is not the latest
  only after a gap appeared above ``v``: version compaction expired ``v+1`` while ``v`` is
  pinned (an export, an age override) or was younger than its maximum age allows, or repair
  dropped a damaged ``v+1``. So every ``FULL_CHECK_SECONDS`` a check reads the hint too, which
  compaction points at a retained version before it deletes a root
  (docs/format.md#latest-version): two requests; without a readable hint, the format's whole
  discovery, which lists the roots (and finds that the lakehouse vanished). So do the first check and any after
  ``suspect()``. A read is stale by at most that period in those rare cases, never otherwise.
  A commit of this process reads the hint anyway (before it creates its root): that read
  counts as the full look's (``hint_seen``), so a server that commits makes no extra request.
* **Commits of this process** are known without asking: ``installed()`` takes the root a
  commit just created, before the commit is acknowledged.
* A check that fails (the store does not answer, the lakehouse vanished) raises to every
  reader that shared it, and the next reader starts a new one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import root_node_file_name
from lakecore.core.storage import Storage
from lakecore.core.versions import RootInfo, probe_up, read_hint
from lakecore.core.view import LakehouseView, read_root_and_def, store_for

# A gap above the known version needs an export's pin and version compaction both; a read is
# stale by at most this long then. Commits' own hint reads count as full looks (``hint_seen``).
FULL_CHECK_SECONDS: Final = 60.0


class _Check:
    """One shared check: its outcome, once done."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.view: LakehouseView | None = None
        self.error: BaseException | None = None


class LatestVersion:
    """The latest version of the lakehouse at ``storage`` (see the module docstring)."""

    def __init__(
        self,
        storage: Storage,
        *,
        full_check_seconds: float = FULL_CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.storage = storage
        self.full_check_seconds = full_check_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._known: LakehouseView | None = None
        self._full_at = float("-inf")  # when a full discovery last ran
        self._running: _Check | None = None
        self._next: _Check | None = None
        self.checks = 0
        self.full_checks = 0

    @property
    def known(self) -> LakehouseView | None:
        """The latest version known now, without asking the store (None before the first)."""
        return self._known

    def view(self) -> LakehouseView:
        """The latest version, from a check that started after this call (see the rules).

        Raises:
            LakecoreError: the store failed, or there is no lakehouse.
        """
        with self._lock:
            if self._next is None:
                self._next = _Check()
            check = self._next
        while True:
            with self._lock:
                if check.done.is_set():
                    break
                running = self._running
                if running is None:
                    self._running, self._next = check, None
            if running is not None:
                running.done.wait()
                continue
            self._run(check)
            break
        if check.error is not None:
            raise check.error
        assert check.view is not None
        return check.view

    def _run(self, check: _Check) -> None:
        try:
            check.view = self._look()
        except BaseException as exc:
            check.error = exc
        finally:
            with self._lock:
                self._running = None
            check.done.set()

    def _look(self) -> LakehouseView:
        known = self._known
        self.checks += 1
        if known is None or self._clock() - self._full_at >= self.full_check_seconds:
            return self._full_look()
        if not self.storage.exists(root_node_file_name(known.version + 1)):
            return known
        latest = probe_up(self.storage, known.version + 1)
        root, lakehouse_def = read_root_and_def(self.storage, latest)
        return self._adopt(root, lakehouse_def)

    def _full_look(self) -> LakehouseView:
        """The hint first (version compaction points it at a retained version before it
        deletes a root, so it steps over a gap), then the root above the newer of it and the
        known version; without a readable hint, the whole discovery (which lists the roots,
        and finds a lakehouse that vanished)."""
        self.full_checks += 1
        started = self._clock()
        known = self._known
        hint = read_hint(self.storage)
        if known is None or hint is None:
            root, lakehouse_def = read_root_and_def(self.storage, None)
            view = self._adopt(root, lakehouse_def)
        else:
            start = max(known.version, hint)
            if start == known.version and not self.storage.exists(root_node_file_name(start + 1)):
                view = known
            else:
                root, lakehouse_def = read_root_and_def(self.storage, probe_up(self.storage, start))
                view = self._adopt(root, lakehouse_def)
        self._full_at = started
        return view

    def _adopt(self, root: RootInfo, lakehouse_def: LakehouseDef) -> LakehouseView:
        """Make ``root`` the known latest unless a newer one is known already. The latest
        version never goes back (no root that was the latest is ever deleted), so an older
        answer only means the look raced a commit of this process, which installed a newer
        root meanwhile."""
        with self._lock:
            known = self._known
            if known is not None and known.version >= root.version:
                return known
            view = LakehouseView(
                self.storage, root, lakehouse_def, store_for(self.storage, lakehouse_def)
            )
            self._known = view
            return view

    def installed(self, root: RootInfo, lakehouse_def: LakehouseDef) -> None:
        """A commit of this process created ``root``: it is the latest (if no newer one is
        known), with no request."""
        self._adopt(root, lakehouse_def)

    def now(self) -> float:
        """This object's clock (monotonic seconds), to date a hint read (``hint_seen``)."""
        return self._clock()

    def hint_seen(self, hint: int | None, started: float) -> None:
        """A read of the hint that started at ``started`` (``now()``) found ``hint``: another
        path's read (a commit reads the hint before it creates its root) serves as the full
        look's. A hint at or below the known version is what a full look would have found (the
        next check's request covers the version above); a hint above it, or none, makes the
        next check a full look."""
        with self._lock:
            known = self._known
            if hint is not None and known is not None and hint <= known.version:
                self._full_at = max(self._full_at, started)
            else:
                self._full_at = float("-inf")

    def suspect(self) -> None:
        """The known version may be gone (a read found one of its files missing): the next
        check is a full discovery."""
        with self._lock:
            self._full_at = float("-inf")


__all__ = ["FULL_CHECK_SECONDS", "LatestVersion"]
