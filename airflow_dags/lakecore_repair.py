"""
### lakecore repair

Manual only: trigger it with params when `lakecore_maintenance` stopped on a failed validation
(or whenever a lakehouse needs a hand). One action on one lakehouse:

| action | job |
|---|---|
| `rebuild-hint` | `repair rebuild-hint`: rewrite `_latest_hint.txt` from the real latest version |
| `rollback-to-version` | `repair rollback --to-version V`: a new version with version V's content |
| `rollback-to-last-valid` | `repair rollback --to-last-valid`: roll forward to the newest clean version |
| `drop-damaged` | `repair drop-damaged`: delete the root files of retained versions that cannot be read (what gc and compact-versions ask for when a damaged version blocks them) |
| `gc-dry-run` | `gc --dry-run`: list the orphan files gc would delete; deletes nothing |

Without `confirm` the repair only prints its plan (the report's `details.plan`, this run's
XCom) and writes nothing; trigger again with `confirm: true` to carry it out (`--yes`).
`lakehouse` is a name from the lakehouse list (the Variable `lakecore_lakehouses` or
`conf/lakehouses.json`) or a URI; `env` picks the maintenance settings for a URI.

The job runs in the pool `lakecore_maintenance`, like the maintenance jobs, and is not retried.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from typing import Any

from airflow.sdk import DAG, Param, task

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
    AirflowFailException,
    LakecoreJobOperator,
    find_lakehouse,
    load_lakehouses,
    resolve_root,
)

ACTIONS = [
    "rebuild-hint",
    "rollback-to-version",
    "rollback-to-last-valid",
    "drop-damaged",
    "gc-dry-run",
]


def repair_command(
    action: str, version: int | None, confirm: bool, now: str
) -> tuple[str, list[str]]:
    """The job and its options for an action (``--yes`` only when confirmed)."""
    if action == "gc-dry-run":
        return "gc", ["--dry-run", "--now", now]
    if action == "rebuild-hint":
        args = ["rebuild-hint"]
    elif action == "rollback-to-version":
        if version is None:
            raise ValueError("action rollback-to-version needs the param version")
        args = ["rollback", "--to-version", str(int(version))]
    elif action == "rollback-to-last-valid":
        args = ["rollback", "--to-last-valid"]
    elif action == "drop-damaged":
        args = ["drop-damaged"]
    else:
        raise ValueError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
    return "repair", [*args, "--yes"] if confirm else args


with DAG(
    dag_id="lakecore_repair",
    description="manual repairs of one lakehouse: rebuild the hint, roll back, drop damaged versions, gc dry run",
    schedule=None,
    start_date=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args={**DEFAULT_ARGS, "retries": 0},
    tags=[*TAGS, "repair"],
    doc_md=__doc__,
    params={
        "lakehouse": Param(
            type="string",
            minLength=1,
            title="Lakehouse",
            description="a name from the lakehouse list, or a URI (path, file://, s3://...)",
        ),
        "action": Param(
            "rebuild-hint",
            type="string",
            enum=ACTIONS,
            title="Action",
            description="what to do; see the DAG's docs",
        ),
        "version": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Version",
            description="rollback-to-version: the version whose content to restore",
        ),
        "confirm": Param(
            False,
            type="boolean",
            title="Confirm",
            description="carry the repair out (--yes); without it the job only prints its plan",
        ),
        "env": Param(
            None,
            type=["null", "string"],
            title="Settings environment",
            description="conf/maintenance-<env>.json for the job (default: the list's, else local)",
        ),
    },
) as dag:

    @task(
        multiple_outputs=True,
        doc_md="""
        #### plan
        Checks the params and resolves the lakehouse (a name from the list, else a URI);
        returns the job (`repair` or `gc`), the lakehouse entry and the job's options. Bad
        params fail here, before anything runs.
        """,
    )
    def plan(
        config: str, root: str, now: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        params = params or {}
        resolved_root = resolve_root(root)
        lakehouse = find_lakehouse(
            str(params.get("lakehouse") or ""),
            load_lakehouses(config, resolved_root),
            resolved_root,
            params.get("env"),
        )
        try:
            job, job_args = repair_command(
                str(params.get("action")), params.get("version"), bool(params.get("confirm")), now
            )
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from None
        return {"job": job, "lakehouse": lakehouse, "job_args": job_args}

    planned = plan(config=LAKEHOUSES_TEMPLATE, root=ROOT_TEMPLATE, now=NOW_TEMPLATE)
    repair = LakecoreJobOperator(
        task_id="repair",
        job=planned["job"],
        lakehouse=planned["lakehouse"],
        job_args=planned["job_args"],
        when_planned="this was the plan only; nothing was written. To carry it out, trigger lakecore_repair "
        'again with the same conf and "confirm": true',
        doc_md="""
        #### repair
        Runs the planned job (`repair ...` or `gc --dry-run`) with spark-submit. Its JSON
        report is this task's XCom: the plan (`details.plan`), what was done, the versions
        found damaged. Without `confirm` nothing is written.
        """,
    )
