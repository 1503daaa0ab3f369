"""
### lakecore maintenance

Keeps every lakehouse of the list healthy, once a day. Per lakehouse (one mapped task group,
``maintain``, per entry of the list; the lakehouses are independent of each other):

    validate_before -> flush (threshold 0.5) -> compact_versions -> table_maintenance -> gc
        -> validate_after

Each step is one lakecore Spark job (``jobs/<job>.py``) run with spark-submit the way
``spark-submit.sh`` runs it. A step that fails stops that lakehouse's run: in particular a
validation that finds violations (exit 1) fails its task at once, without retries, and nothing
after it runs, so nothing is flushed, compacted or collected on a damaged lakehouse. Use the
``lakecore_repair`` DAG then.

* **Lakehouses**: the Variable ``lakecore_lakehouses`` (JSON), else ``conf/lakehouses.json`` of
  the checkout; read by the ``lakehouses`` task when the run starts, never while parsing.
* **Cut-offs**: ``compact-versions``, ``table-maintenance`` and ``gc`` get
  ``--now {{ data_interval_end }}``, so a retry computes the same cut-off as the first try.
  ``table_maintenance`` runs after ``compact_versions``: the versions that leave retention there
  no longer keep the files their Iceberg tables named.
* **Reports**: every job's JSON report is its task's XCom (``return_value``; ``report`` when the
  job failed) and a file under ``lakecore_reports_dir/<dag>/<run>/<lakehouse>/<step>.json``.
* **Concurrency**: one run at a time; the Spark tasks share the pool ``lakecore_maintenance``
  (its size is how many jobs run at once, over all lakehouses and the repair DAG).

See ``airflow_dags/README.md`` for the connection, the pool and the Variables.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from typing import Any

from airflow.sdk import DAG, chain, task, task_group

if (
    os.path.dirname(os.path.abspath(__file__)) not in sys.path
):  # the shared module sits next to this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _lakecore_common import (
    DEFAULT_ARGS,
    LAKEHOUSES_TEMPLATE,
    NOW_TEMPLATE,
    ROOT_TEMPLATE,
    TAGS,
    LakecoreJobOperator,
    load_lakehouses,
    resolve_root,
)

with DAG(
    dag_id="lakecore_maintenance",
    description="validate, flush, compact-versions, table-maintenance, gc and validate every "
    "lakehouse of the list",
    schedule="@daily",
    start_date=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=[*TAGS, "maintenance"],
    doc_md=__doc__,
) as dag:

    @task(
        doc_md="""
        #### lakehouses
        Reads the lakehouse list -- the Variable `lakecore_lakehouses` (JSON) when it is set,
        else `conf/lakehouses.json` of the checkout -- and returns the enabled entries,
        normalized. Each becomes one mapped `maintain` task group. A malformed list fails
        this task (no retry) and nothing else runs.
        """,
        retries=0,
    )
    def lakehouses(config: str, root: str) -> list[dict[str, Any]]:
        return load_lakehouses(config, resolve_root(root))

    @task_group(group_id="maintain")
    def maintain(lakehouse: Any) -> None:
        """The maintenance steps of one lakehouse, in order."""
        validate_before = LakecoreJobOperator(
            task_id="validate_before",
            job="validate",
            lakehouse=lakehouse,
            doc_md="""
            #### validate (before)
            `validate` on the latest version: the tree invariants and the expectation suite.
            Violations (exit 1) fail this task without retries and stop this lakehouse's run:
            nothing is flushed, compacted or collected on a damaged lakehouse.
            """,
        )
        flush = LakecoreJobOperator(
            task_id="flush",
            job="flush",
            lakehouse=lakehouse,
            job_args=["--mode", "threshold", "--fill", "0.5"],
            doc_md="""
            #### flush
            `flush --mode threshold --fill 0.5`: empties the write buffers fuller than half,
            executors flushing subtrees, and commits a new version. The report says how many
            node files were written and how the root buffer shrank.
            """,
        )
        compact_versions = LakecoreJobOperator(
            task_id="compact_versions",
            job="compact-versions",
            lakehouse=lakehouse,
            job_args=["--now", NOW_TEMPLATE],
            doc_md="""
            #### compact-versions
            `compact-versions --now {{ data_interval_end }}`: expires the versions older than
            the lakehouse's retention at the run's cut-off (the same on every retry).
            """,
        )
        table_maintenance = LakecoreJobOperator(
            task_id="table_maintenance",
            job="table-maintenance",
            lakehouse=lakehouse,
            job_args=["--now", NOW_TEMPLATE],
            doc_md="""
            #### table-maintenance
            `table-maintenance --now {{ data_interval_end }}`: expires the snapshots of every
            Iceberg table by its own `history.expire.*` properties (the environment's
            `table_*` settings where a table sets none), deletes what no retained version of
            any table names (expired files, orphans older than `table_orphan_older_than`,
            3 days by default) and the files of purged tables once no retained version holds
            them. An unreadable manifest fails the task (exit 6, no retry) after the deletes
            that stayed safe; its report names the file.
            """,
        )
        gc = LakecoreJobOperator(
            task_id="gc",
            job="gc",
            lakehouse=lakehouse,
            job_args=["--now", NOW_TEMPLATE],
            doc_md="""
            #### gc
            `gc --now {{ data_interval_end }}`: deletes the orphan files no retained version
            or export reaches, older than the grace period (`gc_older_than` of the
            environment's settings, 3 days by default; per lakehouse via `job_args.gc`). The
            report (this task's XCom) lists what was deleted.
            """,
        )
        validate_after = LakecoreJobOperator(
            task_id="validate_after",
            job="validate",
            lakehouse=lakehouse,
            doc_md="""
            #### validate (after)
            `validate` again on the version the maintenance left (add `--deep` per lakehouse
            via `job_args.validate_after`). Violations (exit 1) fail the task without retries.
            """,
        )
        chain(validate_before, flush, compact_versions, table_maintenance, gc, validate_after)

    maintain.expand(lakehouse=lakehouses(config=LAKEHOUSES_TEMPLATE, root=ROOT_TEMPLATE))
