"""Fanning work out over executors with DataFrames: no SparkContext, no RDD.

Every job runs on a classic session and through Spark Connect alike, so the only way work
reaches executors is a DataFrame:

    tasks       ``spark.range(n, numPartitions=k)``: partition i gets a contiguous slice of
                task indexes (the callers sort their tasks so that neighbours share a node
                cache); the task objects travel in the work function's closure, pickled once
                with it.
    work        ``mapInArrow``: the partition's indexes in, Arrow batches of results out. The
                work function is called once per partition with that partition's tasks (one
                cache, one client per partition, as ``mapPartitions`` gave).
    results     typed rows (``Columns``: paths, sizes, kinds) that the JVM joins, filters and
                aggregates, so that big sets never reach the driver; or one pickled object per
                result (``PAYLOAD``) where the driver assembles the results itself (flush's
                subtrees, the checker's reports), which are small by construction.

Driver-side rows (the top of a tree, the top-level listing) become DataFrames through
``driver_rows`` and join the executors' rows with ``unionByName``.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Task = TypeVar("Task")

# Rows per Arrow batch a task emits: big enough to amortise the batch, small enough that a
# partition's output streams.
BATCH_ROWS: Final = 8192
_ARROW_TYPES: Final = ("string", "bigint", "int", "binary", "boolean", "double")


@dataclass(frozen=True)
class Columns:
    """A result schema: (name, Spark SQL type) pairs, one definition for both Spark's DDL and
    the Arrow batches the executors build."""

    fields: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        for name, kind in self.fields:
            if kind not in _ARROW_TYPES:
                raise ValueError(
                    f"column {name}: type {kind} is not one of {', '.join(_ARROW_TYPES)}"
                )

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.fields]

    @property
    def ddl(self) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self.fields)

    def arrow_schema(self) -> Any:
        import pyarrow as pa

        types = {
            "string": pa.string(),
            "bigint": pa.int64(),
            "int": pa.int32(),
            "binary": pa.binary(),
            "boolean": pa.bool_(),
            "double": pa.float64(),
        }
        return pa.schema([pa.field(name, types[kind]) for name, kind in self.fields])

    def batches(self, rows: Iterable[Sequence[Any]]) -> Iterator[Any]:
        """Arrow record batches of ``rows`` (tuples in column order), ``BATCH_ROWS`` at a time."""
        import pyarrow as pa

        schema = self.arrow_schema()
        pending = iter(rows)
        while True:
            chunk = list(itertools.islice(pending, BATCH_ROWS))
            if not chunk:
                return
            # zip(*chunk) turns rows into columns in C: a Python loop over every cell cost as
            # much as the listing it converted.
            columns = zip(*chunk, strict=True)
            yield pa.RecordBatch.from_arrays(
                [pa.array(column, type=f.type) for column, f in zip(columns, schema, strict=True)],
                schema=schema,
            )

    def batch_of(self, columns: Sequence[Sequence[Any] | None]) -> Any:
        """One Arrow record batch of ``columns`` (equal lengths, in column order); a column
        given as None is all nulls (a value the producer did not read)."""
        import pyarrow as pa

        schema = self.arrow_schema()
        lengths = {len(column) for column in columns if column is not None}
        if len(lengths) != 1:
            raise ValueError(
                f"columns of lengths {sorted(lengths)}: need one length and at least one column"
            )
        rows = lengths.pop()
        return pa.RecordBatch.from_arrays(
            [
                pa.nulls(rows, type=f.type) if column is None else pa.array(column, type=f.type)
                for column, f in zip(columns, schema, strict=True)
            ],
            schema=schema,
        )


PAYLOAD: Final = Columns((("payload", "binary"),))


def slices_for(tasks: int, parallelism: int) -> int:
    """Partitions for ``tasks`` tasks: one per task up to the parallelism asked for."""
    return max(1, min(tasks, parallelism))


def fan_out(
    spark: SparkSession,
    tasks: Sequence[Task],
    work: Callable[[list[Task]], Iterable[Sequence[Any]]],
    columns: Columns,
    parallelism: int,
) -> DataFrame:
    """A DataFrame of what ``work`` yields for every partition's tasks (rows in ``columns``'
    order). Lazy, like any DataFrame: nothing runs until it is collected, counted or joined."""

    def batches(items: list[Task]) -> Iterator[Any]:
        return columns.batches(work(items))

    return _fan_out_batches(spark, tasks, batches, columns, parallelism)


def fan_out_columns(
    spark: SparkSession,
    tasks: Sequence[Task],
    work: Callable[[list[Task]], Iterable[Sequence[Sequence[Any] | None]]],
    columns: Columns,
    parallelism: int,
) -> DataFrame:
    """``fan_out`` for work that yields its results as columns (``Columns.batch_of``): a
    million results cost about a second less than as rows, which must be turned back into
    columns for Arrow."""

    def batches(items: list[Task]) -> Iterator[Any]:
        for chunk in work(items):
            batch = columns.batch_of(chunk)
            if batch.num_rows:
                yield batch

    return _fan_out_batches(spark, tasks, batches, columns, parallelism)


def _fan_out_batches(
    spark: SparkSession,
    tasks: Sequence[Task],
    batches: Callable[[list[Task]], Iterator[Any]],
    columns: Columns,
    parallelism: int,
) -> DataFrame:
    task_list = list(tasks)

    def run(index_batches: Iterator[Any]) -> Iterator[Any]:
        indexes: list[int] = []
        for batch in index_batches:
            indexes.extend(batch.column(0).to_pylist())
        if not indexes:
            return
        yield from batches([task_list[i] for i in indexes])

    slices = slices_for(len(task_list), parallelism)
    if not task_list:
        return driver_rows(spark, [], columns)
    return spark.range(0, len(task_list), 1, slices).mapInArrow(run, columns.ddl)


def fan_out_objects(
    spark: SparkSession,
    tasks: Sequence[Task],
    work: Callable[[list[Task]], Iterable[Any]],
    parallelism: int,
) -> DataFrame:
    """``fan_out`` for results the driver assembles: every object ``work`` yields, pickled
    into one ``payload`` row (``collect_objects`` brings them back)."""

    def pickled(items: list[Task]) -> Iterator[tuple[bytes]]:
        for result in work(items):
            yield (pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL),)

    return fan_out(spark, tasks, pickled, PAYLOAD, parallelism)


def collect_objects(frame: DataFrame) -> list[Any]:
    """The objects of a ``PAYLOAD`` DataFrame, unpickled on the driver."""
    return [pickle.loads(row[0]) for row in frame.select("payload").collect()]


def driver_rows(spark: SparkSession, rows: Sequence[Sequence[Any]], columns: Columns) -> DataFrame:
    """A DataFrame of rows the driver holds (the top of a tree, the top-level listing)."""
    return spark.createDataFrame([tuple(row) for row in rows], schema=columns.ddl)
