"""Persisted DataFrames and their release: every ``persist`` in jobs/ goes through ``Persisted``.

Rules:
- A job persists a DataFrame that several queries read (a join read by every count, sample
  and delete after it), so that the listing, the walk or the check behind it runs once.
- ``with Persisted() as persist:`` opens a scope; ``persist(frame)`` persists the frame
  (``MEMORY_AND_DISK``: a lost or evicted block is read back or computed again, never an error)
  and returns the persisted frame. When the scope ends, normally or by an exception (a
  refusal, an interruption), every frame persisted in it is unpersisted, in the order they were
  persisted; frames are not released one by one before that.
- A helper that persists takes the scope (``persist``) and returns its frames: nothing is
  collected through an output list, and the caller's ``with`` says how long they live.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Persisted:
    """A scope of persisted DataFrames, released when it ends (see the module doc)."""

    def __init__(self) -> None:
        self._frames: list[DataFrame] = []

    def __call__(self, frame: DataFrame) -> DataFrame:
        """``frame`` persisted (``MEMORY_AND_DISK``) until the scope ends."""
        from pyspark.storagelevel import StorageLevel

        kept = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self._frames.append(kept)
        return kept

    def __enter__(self) -> Persisted:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        frames, self._frames = self._frames, []
        for frame in frames:
            frame.unpersist()
