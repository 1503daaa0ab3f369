"""The stage progress line's task counts (``jobs.progress.StageProgress``)."""

from __future__ import annotations

import contextlib
import io
import time
import uuid
from typing import Any

import pytest

from jobs.progress import StageProgress
from jobs.signals import JobInterrupted

pytestmark = pytest.mark.spark


def test_a_stage_counts_only_the_tasks_it_runs(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job group is the whole job's, and a query run again skips the stage whose output
    Spark kept: a new-user trial saw '25/99 tasks done' and, in a later stage, '18/80 tasks'."""
    monkeypatch.setenv("LAKECORE_PROGRESS", "1")
    sc = spark.sparkContext
    group = f"progress-{uuid.uuid4()}"
    sc.setJobGroup(group, "progress test")
    try:
        shuffled = spark.range(0, 1000, 1, 5).repartition(3, "id")
        with StageProgress(
            "gc", "first", "five map tasks, three reduce tasks", sc, group, io.StringIO()
        ) as first:
            assert shuffled.groupBy().count().collect()[0][0] == 1000
            assert first.tasks() == (
                5 + 3 + 1,
                5 + 3 + 1,
            )  # the map, the repartition's reduce, the count's final
            # Counted the old way, every stage of every job in the group: the map stage again in
            # each later job of the query (adaptive execution runs it as its own job first, and the
            # next job lists it, skipped).
            tracker = sc.statusTracker()
            every_stage = sum(
                tracker.getStageInfo(stage_id).numTasks
                for job_id in tracker.getJobIdsForGroup(group)
                for stage_id in tracker.getJobInfo(job_id).stageIds
                if tracker.getStageInfo(stage_id) is not None
            )
            assert every_stage > 5 + 3 + 1
        stream = io.StringIO()
        with StageProgress("gc", "second", "two tasks, then one", sc, group, stream) as second:
            assert spark.range(0, 10, 1, 2).count() == 10
            # Not the first stage's nine tasks as well. Under load adaptive execution may list
            # one more stage it then skips (a fresh-clone run on three workers saw (3, 5)).
            done, total = second.tasks()
            assert done == 2 + 1 and 2 + 1 <= total < 5 + 3 + 1
        assert stream.getvalue().endswith("\n") and "3/3 tasks  done in" in stream.getvalue()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.parametrize(
    ("raised", "ended"),
    [
        (None, "done in"),
        (JobInterrupted("SIGINT"), "interrupted after"),
        (ValueError("boom"), "failed after"),
    ],
)
def test_the_last_line_says_how_the_stage_ended_and_its_exact_time(
    raised: BaseException | None, ended: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new-user trial read "[reach-diff] ... done in 2.8s" and then "interrupted by SIGINT
    during reach-diff"; and every driver stage "done in 0ms" (the live line's tenth of a
    second), where the summary said "plan 45ms"."""
    monkeypatch.setenv("LAKECORE_PROGRESS", "1")
    stream = io.StringIO()
    with (
        contextlib.suppress(type(raised) if raised is not None else ()),
        StageProgress("gc", "plan", "a driver stage", stream=stream),
    ):
        time.sleep(0.06)
        if raised is not None:
            raise raised
    last = stream.getvalue().rstrip("\n").split("\r")[-1]
    assert last.startswith("lakecore gc [plan] a driver stage  " + ended + " "), last
    millis = last.rsplit(" ", 1)[1]
    assert millis.endswith("ms") and 60 <= int(millis[:-2]) < 1000, last
