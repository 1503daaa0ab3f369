"""``side_by_side``: every item once, each producer's in its order; a producer's exception
reaches the consumer; a consumer that stops early stops the producers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from lakecore.maintenance.side_by_side import side_by_side


def _slow(name: str, count: int, pause: float) -> Iterator[str]:
    for i in range(count):
        time.sleep(pause)
        yield f"{name}{i}"


def test_every_item_once_each_producer_in_order_and_running_at_once() -> None:
    # Each of a and b waits, mid-way, for the other to have started: run one after the other,
    # the first would wait in vain.
    started = {"a": threading.Event(), "b": threading.Event()}

    def meeting(name: str, other: str) -> Iterator[str]:
        started[name].set()
        for i in range(10):
            if i == 5 and not started[other].wait(10):
                raise AssertionError(f"{other} never ran while {name} did")
            yield f"{name}{i}"

    items = list(side_by_side([meeting("a", "b"), meeting("b", "a"), iter(["c0", "c1"])]))
    assert sorted(items) == sorted(
        [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)] + ["c0", "c1"]
    )
    for name in "abc":
        mine = [item for item in items if item[0] == name]
        assert mine == sorted(mine, key=lambda item: int(item[1:]))


def test_one_producer_or_none_needs_no_thread() -> None:
    before = threading.active_count()
    assert list(side_by_side([iter([1, 2])])) == [1, 2]
    assert list(side_by_side([])) == []
    assert threading.active_count() == before


def test_a_producers_exception_reaches_the_consumer_after_its_items() -> None:
    def failing() -> Iterator[str]:
        yield "x0"
        raise ValueError("listing broke")

    seen: list[str] = []
    with pytest.raises(ValueError, match="listing broke"):
        for item in side_by_side([failing(), _slow("b", 3, 0.01)]):
            seen.append(item)
    assert "x0" in seen


def test_a_consumer_that_stops_early_stops_and_closes_the_producers() -> None:
    closed = threading.Event()
    produced: list[int] = []

    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                produced.append(i)
                yield i
                i += 1
        finally:
            closed.set()

    before = threading.active_count()
    together = side_by_side([endless(), endless()], buffered=2)
    assert next(together) == 0
    together.close()
    assert closed.wait(5)
    assert threading.active_count() == before  # the producers' threads are gone
    assert len(produced) < 100  # held back by the buffer, not run on
