"""Running producers side by side: several iterators drained on threads of their own, their
items handed to one consumer as they come.

Why: on an object store a listing and a tree walk each spend most of their time waiting for
responses. One task that runs both at once waits for the slower one, not for the sum of the
two (gc's listing and walk in one task: ``jobs.gc_job``).

Rules:

- Items of one producer keep their order; items of different producers interleave in the order
  they were produced.
- At most ``buffered`` items wait per producer, so a slow consumer holds back the producers
  rather than filling memory.
- The first exception a producer raises is raised to the consumer, once the items the producer
  yielded before it have been consumed; the other producers are then stopped.
- A consumer that stops early (closes the iterator, or is stopped by an exception of its own)
  stops the producers: each closes its iterator at its next item, so that what it holds open
  (a window of requests in flight) winds down.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Final, TypeVar

Item = TypeVar("Item")

BUFFERED_ITEMS: Final = 4
# How long a producer waits for room in the queue before it looks at the stop flag again.
_POLL_SECONDS: Final = 0.1


class _Done:
    """What a producer puts last: nothing more from it, and the exception it ended with."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def side_by_side(
    producers: Sequence[Iterator[Item]], buffered: int = BUFFERED_ITEMS
) -> Iterator[Item]:
    """Every item of every producer, each producer drained on a thread of its own."""
    if len(producers) <= 1:  # nothing to overlap: no thread
        for producer in producers:
            yield from producer
        return
    handed: queue.Queue[Item | _Done] = queue.Queue(maxsize=buffered * len(producers))
    stop = threading.Event()

    def offer(entry: Item | _Done) -> bool:
        """Put ``entry`` once there is room; False when the consumer has stopped meanwhile."""
        while not stop.is_set():
            try:
                handed.put(entry, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def drain(producer: Iterator[Item]) -> None:
        error: BaseException | None = None
        try:
            for item in producer:
                if not offer(item):
                    break
        except BaseException as exc:  # handed to the consumer, which raises it
            error = exc
        finally:
            close = getattr(producer, "close", None)
            if close is not None:
                close()
        offer(_Done(error))

    threads = [
        threading.Thread(target=drain, args=(producer,), name=f"side-by-side-{i}", daemon=True)
        for i, producer in enumerate(producers)
    ]
    for thread in threads:
        thread.start()
    running = len(threads)
    try:
        while running:
            entry = handed.get()
            if isinstance(entry, _Done):
                running -= 1
                if entry.error is not None:
                    raise entry.error
                continue
            yield entry
    finally:
        stop.set()
        for thread in threads:
            thread.join()
