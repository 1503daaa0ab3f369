"""Spark forms of the engine-neutral maintenance units that more than one job uses.

gc and compact-versions both walk retained trees in subtrees, ask the re-check's membership
questions against a persisted reach, and delete in batches on executors; the units themselves
(``lakecore.maintenance.reach``, ``delete``) know nothing of Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from jobs.common import JobContext
from lakecore.maintenance.delete import DeleteOutcome, chunks, delete_files
from lakecore.maintenance.reach import ReachPlan, ReachTask, run_reach_tasks
from lakecore.storage import Storage


def reach_rdd(ctx: JobContext, storage: Storage, plan: ReachPlan) -> Any:
    """RDD of (path, size) reached: executors' subtree walks plus the driver's own paths."""
    tasks: list[ReachTask] = plan.tasks

    def walk(items: Iterable[ReachTask]) -> Iterator[tuple[str, int]]:
        return run_reach_tasks(storage, items)

    driver = ctx.sc.parallelize(sorted(plan.driver_paths.items()), 1)
    if not tasks:
        return driver
    walked = ctx.sc.parallelize(tasks, min(len(tasks), max(1, ctx.parallelism))).mapPartitions(walk)
    return walked.union(driver)


def shuffle_partitions(ctx: JobContext) -> int:
    """Partitions of the one shuffle (the cogroup of listing and reach)."""
    return max(1, int(ctx.sc.defaultParallelism))


def membership_in(reach: Any) -> Any:
    """A batch membership test against a (persisted) reach RDD, for the recheck: one Spark
    job per question, the question shipped with the tasks (a frontier of node paths)."""

    def known(paths: set[str]) -> set[str]:
        wanted = frozenset(paths)
        found: list[str] = reach.keys().filter(lambda p: p in wanted).collect()
        return set(found)

    return known


def delete_in_batches(ctx: JobContext, storage: Storage, files: list[tuple[str, int]], batch_size: int) -> DeleteOutcome:
    """Delete ``(path, size)`` files on executors, one ``delete_files`` call per batch."""
    batches = chunks(files, batch_size)
    outcome = DeleteOutcome()
    if not batches:
        return outcome
    rdd = ctx.sc.parallelize(batches, min(len(batches), max(1, ctx.parallelism)))
    for part in rdd.map(lambda batch: delete_files(storage, batch, batch_size)).collect():
        outcome.add(part)
    return outcome
