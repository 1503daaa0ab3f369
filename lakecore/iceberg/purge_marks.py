"""The commits of a purge mark's life after the drop (``lakecore.maintenance.tables.marks``):
``start_purges`` (``waiting`` -> ``purging``, before table maintenance deletes a file) and
``finish_purges`` (the mark removed, after its files are gone).

Rules:

* Both are lakehouse definition changes, so they conflict with any other definition change
  made meanwhile (an undrop taking the mark back, another run) and are redone on the latest
  version, where each mark is judged again as it is there: one already gone (undropped,
  finished by another run) is left out.
* ``start_purges`` commits only while the latest version is the one the caller checked
  (``expected_latest``): a version committed since (a rollback) may hold the table again, so
  the caller must look again; it then answers None and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakecore.iceberg.commit_path import CommitPath
from lakecore.lakehouse import Transaction
from lakecore.maintenance.tables.marks import PURGING, PurgeMark, parse_mark


class _LatestMoved(Exception):
    """A version was committed after the one the caller checked."""


def start_purges(
    path: CommitPath, marks: Sequence[PurgeMark], expected_latest: int
) -> list[PurgeMark] | None:
    """Mark these purges ``purging``, in one commit, if the latest version is still
    ``expected_latest``; returns the marks that are ``purging`` now (None: the latest moved)."""

    def start(tx: Transaction) -> list[PurgeMark]:
        if tx.base.version != expected_latest:
            raise _LatestMoved
        started = []
        for mark in marks:
            value = tx.definition_property(mark.key)
            if value is None:
                continue  # undropped, or finished by another run
            current = parse_mark(mark.key, value)
            if current.state != PURGING:
                tx.set_definition_properties({mark.key: current.with_state(PURGING).value()})
            started.append(current.with_state(PURGING))
        return started

    try:
        return path.change("start_purges", start)
    except _LatestMoved:
        return None


def finish_purges(path: CommitPath, marks: Sequence[PurgeMark]) -> int | None:
    """Remove these marks (their files are gone), in one commit; the version it made, or
    None when none of them was left to remove."""

    def finish(tx: Transaction) -> bool:
        removed = False
        for mark in marks:
            if tx.definition_property(mark.key) is not None:
                tx.set_definition_properties({mark.key: None})
                removed = True
        return removed

    removed = path.change("finish_purges", finish)
    return path.lakehouse.version if removed else None


__all__ = ["finish_purges", "start_purges"]
