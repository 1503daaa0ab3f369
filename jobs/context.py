"""A running job's context: its lakehouse, its settings, its Spark, and its stages.

Rules:
- Spark is made on first use (``JobContext.spark``): a job with nothing to do, or whose
  lakehouse is refused, starts no JVM.
- A stage (``JobContext.stage``) is a Spark job group and description (the Spark UI says what
  runs), a timing in the report, and on a terminal a progress line (``jobs.progress``). What a
  signal during a stage that changes storage bit by bit leaves behind is the stage's to say
  (``if_interrupted``).
- Everything works on a classic session and on a Spark Connect one alike.
- A caller's session (a test's, the demo's) is given back as it came: the settings the job
  tuned are restored (``release``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from jobs.command_line import JobOptions
from jobs.progress import StageProgress
from jobs.session import (
    CACHE_COMPRESSED,
    SESSION_START_GRACE_SECONDS,
    SHUFFLE_PARTITIONS,
    SPARK_DEFAULT_CACHE_COMPRESSED,
    SPARK_DEFAULT_SHUFFLE_PARTITIONS,
    is_connect,
    is_local_master,
    made_beside_the_main_thread,
    spark_session,
    stop_python_workers,
)
from lakecore.contract.job_report import JobReport
from lakecore.core.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


class JobContext:
    """The open lakehouse's storage, Spark (created on first use) and stage timing.

    Everything here works on a classic session and on a Spark Connect one alike: stages are
    tagged with ``addTag`` (Connect's job groups) and the Spark UI's description is set where a
    SparkContext exists; the parallelism comes from the SparkContext or, through Connect, from
    how the endpoint splits a range (its default parallelism)."""

    def __init__(
        self,
        job: str,
        options: JobOptions,
        report: JobReport,
        spark: SparkSession | None = None,
    ) -> None:
        self.job = job
        self.options = options
        self.report = report
        # The stage that began and has not ended, and what an interruption there leaves behind
        # (``stage``'s ``if_interrupted``); the interrupted job's line says it.
        self.unfinished_stage: tuple[str, str | None] | None = None
        self.storage = Storage(options.lakehouse, options.storage_options)
        self.settings = options.settings
        self.remote = options.remote
        # The result the run is filling (``track``): rendered even when the run stops part-way.
        self.tracked: object | None = None
        self._spark = spark
        # True once this job starts making its own SparkSession: one interrupted while it starts
        # (the JVM launching, a Connect client retrying an endpoint) is this job's to abandon.
        self.owns_spark = False
        self._group = f"lakecore-{job}-{uuid.uuid4().hex[:8]}"
        self._default_parallelism: int | None = None
        self._session_tuned = False
        self._borrowed_settings: dict[str, str] = {}  # to restore on a caller's session

    @property
    def spark(self) -> SparkSession:
        """The job's session (a Spark Connect client's has the same interface)."""
        if self._spark is None:
            self.owns_spark = True
            self._spark = made_beside_the_main_thread(
                lambda: spark_session(f"lakecore {self.job}", self.options.master, self.remote),
                grace_seconds=0 if self.remote else SESSION_START_GRACE_SECONDS,
            )
        if not self._session_tuned:
            self._session_tuned = True
            if self._tune(
                SHUFFLE_PARTITIONS, SPARK_DEFAULT_SHUFFLE_PARTITIONS, str(self.default_parallelism)
            ):
                self.report.details["shuffle_partitions"] = self.default_parallelism
            if self._tune(CACHE_COMPRESSED, SPARK_DEFAULT_CACHE_COMPRESSED, "false"):
                self.report.details["cache_compressed"] = False
        return self._spark

    def _tune(self, key: str, spark_default: str, value: str) -> bool:
        """Set ``key`` to ``value`` if it holds Spark's default; True when set."""
        assert self._spark is not None
        if self._spark.conf.get(key) != spark_default:
            return False
        if not self.owns_spark:
            self._borrowed_settings[key] = spark_default
        self._spark.conf.set(key, value)
        return True

    def release(self) -> None:
        """Give a caller's session back as it came (the settings this job replaced)."""
        if self._spark is not None:
            for key, value in self._borrowed_settings.items():
                self._spark.conf.set(key, value)
        self._borrowed_settings.clear()

    def track(self, result: T) -> T:
        """Hand the run's result to the context as the run begins filling it, and return it:
        ``run_job`` renders it when the run stops part-way (an interruption, a refusal), so
        that the report keeps what the run had found and done."""
        self.tracked = result
        return result

    @property
    def connect(self) -> bool:
        return is_connect(self.spark)

    @property
    def default_parallelism(self) -> int:
        """The session's default parallelism (its executors' cores)."""
        if self._default_parallelism is None:
            if not self.connect:
                self._default_parallelism = max(1, int(self.spark.sparkContext.defaultParallelism))
            else:
                from pyspark.sql import functions as F

                # A range without a partition count is split by the default parallelism.
                ids = self.spark.range(0, 1 << 16).select(F.spark_partition_id().alias("partition"))
                self._default_parallelism = max(1, int(ids.distinct().count()))
        return self._default_parallelism

    @property
    def parallelism(self) -> int:
        if self.options.parallelism:
            return self.options.parallelism
        return max(1, self.default_parallelism * self.settings.subtree_tasks_per_core)

    @contextlib.contextmanager
    def stage(
        self, name: str, description: str, *, if_interrupted: str | None = None
    ) -> Iterator[None]:
        """A named stage: a Spark job tag and description for the UI, a timing, and on a
        terminal a one-line progress display (``StageProgress``). ``if_interrupted`` says what
        a signal during the stage leaves behind, for a stage that changes storage bit by bit
        (deletes, copies): the job's line then says it instead of "run the job again"."""
        text = f"lakecore {self.job}: {description}"
        sc = None if self.connect else self.spark.sparkContext
        if sc is not None:
            sc.setJobGroup(self._group, text, interruptOnCancel=True)
            sc.setJobDescription(text)
        self.spark.addTag(self._group)
        started = time.monotonic()
        progress = StageProgress(self.job, name, description, sc, self._group)
        enclosing, self.unfinished_stage = self.unfinished_stage, (name, if_interrupted)
        try:
            with progress:
                yield
            self.unfinished_stage = enclosing  # a stage inside another (export's copy) ends first
        finally:
            with contextlib.suppress(Exception):
                self.spark.removeTag(self._group)
            self.report.durations_seconds[name] = round(
                self.report.durations_seconds.get(name, 0.0) + time.monotonic() - started, 3
            )

    @contextlib.contextmanager
    def driver_step(self, name: str) -> Iterator[None]:
        """A step on the driver alone, timed in the report like a stage, without starting Spark
        (repair needs none)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.report.durations_seconds[name] = round(
                self.report.durations_seconds.get(name, 0.0) + time.monotonic() - started, 3
            )

    def cancel(self) -> None:
        """Stop this job's Spark work (an interruption): its tag through Connect, its job group
        on a classic session."""
        if self._spark is None:
            return
        with contextlib.suppress(Exception):
            if self.connect:
                self._spark.interruptTag(self._group)
            else:
                self.stop_classic_work()

    def stop_classic_work(self) -> None:
        """Cancel this job's group on a classic session (nothing through Connect). On a session
        of its own with a local master the Python workers are stopped before and after the
        cancel (``stop_python_workers``): they are this host's."""
        if self._spark is None or is_connect(self._spark):
            return
        sc = self._spark.sparkContext
        jvm_pid = None
        if self.owns_spark:
            # The tasks the cancel kills (or whose workers are stopped), and the cache blocks
            # they leave unfinished, are the job's own doing: no log line for each between the
            # command line and the job's one line. A caller's session keeps its logging.
            jvm: Any = sc._jvm  # py4j's view of the JVM: untyped
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                "org.apache.spark", jvm.org.apache.logging.log4j.Level.OFF
            )
            if is_local_master(sc.master or ""):
                jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        if jvm_pid is not None:
            stop_python_workers(jvm_pid)
        sc.cancelJobGroup(self._group)
        if jvm_pid is not None:  # any task that started a worker meanwhile
            stop_python_workers(jvm_pid)

    # How long an interrupted job waits for the tasks its cancel kills.
    CANCELLED_TASKS_WAIT_SECONDS = 5.0

    def wait_for_cancelled_tasks(
        self, timeout_seconds: float = CANCELLED_TASKS_WAIT_SECONDS
    ) -> None:
        """Wait (a moment, at most ``timeout_seconds``) until the tasks of this job's cancelled
        Spark jobs have ended on a classic session, so that the JVM, which ends with this
        process, is not torn down while it is still killing them."""
        if self._spark is None or is_connect(self._spark):
            return
        deadline = time.monotonic() + timeout_seconds
        with contextlib.suppress(Exception):
            tracker = self._spark.sparkContext.statusTracker()
            while time.monotonic() < deadline:
                running = 0
                for job_id in tracker.getJobIdsForGroup(self._group):
                    job = tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job is not None else ():
                        stage = tracker.getStageInfo(stage_id)
                        running += stage.numActiveTasks if stage is not None else 0
                if not running:
                    return
                time.sleep(0.05)
