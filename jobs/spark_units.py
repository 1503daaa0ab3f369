"""Spark forms of the engine-neutral maintenance units that more than one job uses.

gc and compact-versions both walk retained trees in subtrees, ask the re-check's membership
questions against a persisted reach, and delete on executors; the units themselves
(``lakecore.maintenance.reach``, ``delete``) know nothing of Spark. Everything here is a
DataFrame (``jobs.frames``), so it runs through Spark Connect as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from jobs.context import JobContext
from jobs.frames import PAYLOAD, Columns, collect_objects, driver_rows, fan_out_columns
from lakecore.core.storage import Storage
from lakecore.maintenance.delete import DeleteOutcome, chunks, delete_files
from lakecore.maintenance.listing import ERROR_KEY, is_deletable, kind_of
from lakecore.maintenance.reach import ReachPlan, ReachTask, reach_task_columns
from lakecore.maintenance.samples import SAMPLE_LIMIT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REACH: Final = Columns((("path", "string"), ("size", "bigint")))
# A membership question this long is joined against the reach; a shorter one is a filter.
_JOIN_QUESTIONS_OVER: Final = 2000


def reach_frame(job: JobContext, storage: Storage, plan: ReachPlan) -> DataFrame:
    """DataFrame of (path, size) reached: executors' subtree walks plus the driver's own paths.
    A subtree that cannot be walked is a row whose path starts with ``ERROR_KEY``."""
    tasks: list[ReachTask] = plan.tasks
    driver = driver_reach(job, plan)
    if not tasks:
        return driver

    def walk(items: list[ReachTask]) -> Iterator[tuple[list[str], list[int]]]:
        return reach_task_columns(storage, items)

    return fan_out_columns(job.spark, tasks, walk, REACH, job.parallelism).unionByName(driver)


def driver_reach(job: JobContext, plan: ReachPlan) -> DataFrame:
    """DataFrame of (path, size) the driver reached itself: the retained roots, their
    definitions and the top of each tree."""
    return driver_rows(job.spark, sorted(plan.driver_paths.items()), REACH)


def reach_errors(reach: DataFrame) -> DataFrame:
    """The error rows of a reach frame, as one ``reason`` column."""
    from pyspark.sql import functions as F

    return reach.where(F.col("path").startswith(ERROR_KEY)).select(
        F.expr(f"substring(path, {len(ERROR_KEY) + 1})").alias("reason")
    )


def unreached_only(frame: DataFrame, reach: DataFrame) -> DataFrame:
    """The rows of ``frame`` (a ``path`` column) whose path ``reach`` does not reach (its error
    rows left out), by a left anti join on a 64-bit hash of the path, as gc's join is: the reach
    crosses the shuffle and fills the join's hash table as longs, not as path strings (200k
    tables: 2.0 MiB of shuffle, not 12.7). A collision of two paths' hashes can only make an
    unreached file look reached, and so kept: a file the reach holds is never returned."""
    from pyspark.sql import functions as F

    reached = reach.where(~F.col("path").startswith(ERROR_KEY)).select(
        F.xxhash64("path").alias("path_hash")
    )
    return (
        frame.withColumn("path_hash", F.xxhash64("path"))
        .join(reached.hint("shuffle_hash"), "path_hash", "left_anti")
        .drop("path_hash")
    )


def sample_paths(frame: DataFrame) -> list[str]:
    """The first ``SAMPLE_LIMIT`` paths of a DataFrame with a ``path`` column, in order (the
    report's capped samples: only these reach the driver)."""
    return [row[0] for row in frame.select("path").orderBy("path").limit(SAMPLE_LIMIT).collect()]


def membership_in(job: JobContext, reach: DataFrame) -> Callable[[set[str]], set[str]]:
    """A batch membership test against a (persisted) reach frame, for the re-check: one Spark
    job per question (a frontier of node paths)."""
    from pyspark.sql import functions as F

    paths = reach.select("path")

    def known(asked: set[str]) -> set[str]:
        if not asked:
            return set()
        if len(asked) > _JOIN_QUESTIONS_OVER:
            question = job.spark.createDataFrame(
                [(p,) for p in sorted(asked)], schema="path string"
            )
            found = paths.join(question, "path", "left_semi")
        else:
            found = paths.where(F.col("path").isin(sorted(asked)))
        return {row[0] for row in found.distinct().collect()}

    return known


def delete_frame(
    job: JobContext, storage: Storage, files: DataFrame, batch_size: int
) -> DeleteOutcome:
    """Delete the files of a (path, size) DataFrame on executors, ``delete_files`` a batch at a
    time. Only counts, capped samples and errors come back to the driver."""

    def run(batches: Any) -> Any:
        import pickle

        items: list[tuple[str, int]] = []
        for batch in batches:
            items.extend(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True))
        if not items:
            return
        outcome = DeleteOutcome()
        for chunk in chunks(items, batch_size):
            outcome.add(delete_files(storage, chunk, batch_size))
        outcome.deleted_paths = sorted(outcome.deleted_paths)[:SAMPLE_LIMIT]
        yield from PAYLOAD.batches([(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL),)])

    frame = (
        files.select("path", "size")
        .repartition(max(1, job.parallelism))
        .mapInArrow(run, PAYLOAD.ddl)
    )
    total = DeleteOutcome()
    for part in collect_objects(frame):
        total.add(part)
    total.deleted_paths = sorted(total.deleted_paths)[:SAMPLE_LIMIT]
    return total


def deletable_only(frame: DataFrame) -> DataFrame:
    """The rows of a (path, size) DataFrame whose names lakecore may delete (node files,
    definitions, temp files; ``listing.is_deletable``), classified on the executors."""

    def keep(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            mask = [is_deletable(kind_of(path)) for path in batch.column(0).to_pylist()]
            yield batch.filter(pa.array(mask, type=pa.bool_()))

    return frame.select("path", "size").mapInArrow(keep, REACH.ddl)
