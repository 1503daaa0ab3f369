"""export: copy one version of a lakehouse to another root as a lakehouse of its own.

    ./spark-submit.sh export --lakehouse URI --name NAME --mode full|partial|minimal \\
        --target URI [--version V] [--target-storage-option KEY=VALUE] [--batch-size N]

A ``full`` export copies every file the version reaches, in parallel: the driver cuts the tree
(``lakecore.maintenance.partition.cut_tree``), executors list what each subtree reaches
(``reachable_from_subtree``), and executors copy the files in batches with their own Storage
handles. The paths stay in a Spark DataFrame: the checks (a node reached by two walks, a path
outside the source) are JVM aggregates, and the driver gets counts and a capped sample. Only when every file is there does the driver write the target's lakehouse definition
and root (version 0, exclusive create) and then record the export in the source's definition
(``exported_snapshots[NAME]``, docs/format.md#recording-an-export), which pins the exported
version against expiry. ``partial`` and ``minimal`` exports copy at most the internal nodes and run
on the driver (``Lakehouse.export_snapshot``).

Nothing is written when the name is taken, the version does not exist, or the target already
holds a lakehouse or files lakecore did not name (``lakecore.lakehouse.export.refuse_foreign_files``). A copy that fails part-way leaves files but no root at the target: it is not
a lakehouse, and rerunning the export on the same target overwrites those files.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from jobs.command_line import JobOptions, base_parser
from jobs.context import JobContext
from jobs.frames import Columns, driver_rows, fan_out
from jobs.persisted import Persisted
from jobs.run import run_job
from jobs.spark_units import sample_paths
from lakecore.contract.job_report import JobReport
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.contract.option_types import whole_number
from lakecore.core.locations import is_full_uri
from lakecore.core.node import Node
from lakecore.core.storage import Storage, parse_storage_options
from lakecore.core.tree import NodeStore, TreeShape
from lakecore.core.units import format_bytes, plural
from lakecore.core.versions import read_version
from lakecore.errors import LakecoreError, TreeStructureError
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.export import CopyFiles, ExportResult
from lakecore.maintenance.partition import SubtreeTask, cut_tree
from lakecore.maintenance.tree_files import Reachable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecore.lakehouse.lakehouse import ExportMode

# Files copied per executor task: large enough to amortise task overhead, small enough that a
# lakehouse of a few thousand files still spreads over every core.
DEFAULT_BATCH_SIZE = 64


def _parser() -> OneLineArgumentParser:
    parser = base_parser("export", __doc__.splitlines()[0])
    parser.add_argument(
        "--name", required=True, help="the export's name, recorded in the source's definition"
    )
    parser.add_argument(
        "--mode",
        choices=["full", "partial", "minimal"],
        required=True,
        help="full: every reachable file; partial: root and internal nodes; minimal: the root only",
    )
    parser.add_argument(
        "--target",
        required=True,
        help="root URI of the copy: a new or empty folder (or one a failed copy left)",
    )
    parser.add_argument(
        "--version",
        type=whole_number(0),
        default=None,
        help="version to export (default: the latest)",
    )
    parser.add_argument(
        "--target-storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option for the target (default: the source's options)",
    )
    parser.add_argument(
        "--batch-size",
        type=whole_number(1),
        default=DEFAULT_BATCH_SIZE,
        help=f"full mode: files copied per executor task (default {DEFAULT_BATCH_SIZE})",
    )
    return parser


@dataclass(frozen=True)
class ExportOptions:
    name: str
    mode: ExportMode
    target: str
    version: int | None  # None: the latest
    target_storage_options: dict[str, Any] | None  # None: the source's
    batch_size: int  # full mode: files copied per executor task


def export_options(args: argparse.Namespace, _common: JobOptions) -> ExportOptions:
    return ExportOptions(
        name=args.name,
        mode=cast("ExportMode", args.mode),  # argparse's choices
        target=args.target,
        version=args.version,
        target_storage_options=(
            parse_storage_options(args.target_storage_option)
            if args.target_storage_option
            else None
        ),
        batch_size=args.batch_size,
    )


# What a version reaches: one row per file and walk (each subtree's walk, and the top the driver
# walked, yield a file at most once), so a node met by two walks is a path with two rows.
EXPORT_REACH: Final = Columns((("path", "string"), ("node", "boolean"), ("foreign", "boolean")))
COPIED: Final = Columns((("copied", "bigint"), ("bytes", "bigint")))


def _reach_rows(part: Reachable) -> Iterator[tuple[str, bool, bool]]:
    for path in sorted(part.nodes):
        yield path, True, is_full_uri(path)
    for path in sorted(part.values - part.nodes):
        yield path, False, is_full_uri(path)


def _reach(
    job: JobContext,
    source: Storage,
    order: int,
    external: tuple[str, ...],
    tasks: list[SubtreeTask],
    top: Reachable,
) -> DataFrame:
    """The reach DataFrame: the subtrees walked on executors, the top from the driver."""

    def walk(items: list[SubtreeTask]) -> Iterator[tuple[str, bool, bool]]:
        from lakecore.core.tree import NodeStore
        from lakecore.maintenance.tree_files import reachable_from_subtree

        store = NodeStore(source, order, external_roots=external)
        for task in items:
            yield from _reach_rows(reachable_from_subtree(store, task.location, task.depth))

    driver = driver_rows(job.spark, list(_reach_rows(top)), EXPORT_REACH)
    if not tasks:
        return driver
    return fan_out(job.spark, tasks, walk, EXPORT_REACH, job.parallelism).unionByName(driver)


def _copy(source: Storage, target: Storage, files: DataFrame, batches: int) -> tuple[int, int]:
    """Copy the files of a ``path`` DataFrame, a partition per batch; (files, bytes) copied."""
    from pyspark.sql import functions as F

    def copy(batches_in: Iterator[Any]) -> Iterator[Any]:
        copied = size = 0
        for batch in batches_in:
            for path in batch.column(0).to_pylist():
                data = source.read(path)
                target.write(path, data)
                copied += 1
                size += len(data)
        yield from COPIED.batches([(copied, size)])

    # A partition per batch: the batch size is the operator's unit of work per task.
    totals = (
        files.select("path")
        .repartition(batches)
        .mapInArrow(copy, COPIED.ddl)
        .agg(F.sum("copied"), F.sum("bytes"))
        .collect()[0]
    )
    return int(totals[0] or 0), int(totals[1] or 0)


def _distributed_copy(job: JobContext, result: ExportResult, batch_size: int) -> CopyFiles:
    """A ``lakecore.lakehouse.export.CopyFiles`` that lists and copies on executors. The paths stay in
    Spark: the driver gets the counts, one offending path when there is one, and a sample."""
    from pyspark.sql import functions as F

    def copy_files(source: Storage, target: Storage, store: NodeStore, root: Node) -> None:
        exported = result.exported_root
        with job.stage("cut", "cut the exported tree into subtrees (driver)"):
            cut = cut_tree(
                store, root, exported, job.parallelism, TreeShape(store.order, 1).max_depth
            )
        top = Reachable()
        for location, node, _depth in cut.top:
            if location != exported:  # the root itself is written afresh at the target
                top.nodes.add(location)
            top.values.update(node.values)
            top.values.update(v for v in node.buffer.values() if v is not None)
        result.subtree_tasks = len(cut.subtrees)
        # One row per file: how many walks met it. Every check and count is then one query.
        with Persisted() as persist:
            files = persist(
                _reach(job, source, store.order, store.external_roots, cut.subtrees, top)
                .groupBy("path")
                .agg(
                    F.count(F.lit(1)).alias("walks"),
                    F.max("node").alias("node"),
                    F.max("foreign").alias("foreign"),
                )
            )
            with job.stage("reachable", f"list the files {len(cut.subtrees)} subtrees reach"):
                shared_node = F.col("node") & (F.col("walks") > 1)
                facts = files.agg(
                    F.min(F.when(shared_node, F.col("path"))),
                    F.min(F.when(F.col("foreign"), F.col("path"))),
                    F.count(F.when(F.col("node"), True)),
                    F.count(F.when(~F.col("node"), True)),
                ).collect()[0]
            shared, foreign, nodes, definitions = facts[0], facts[1], int(facts[2]), int(facts[3])
            if shared is not None:
                raise TreeStructureError(shared, "node is reached from two subtrees of one version")
            if foreign is not None:
                raise LakecoreError(
                    f"version {result.exported_version} points outside {source.root_uri} "
                    f"(e.g. {foreign}): it is itself an export; make a full export from its source instead"
                )
            total = nodes + definitions
            result.reachable_node_files, result.reachable_definition_files = nodes, definitions
            batches = -(-total // batch_size)
            result.copy_tasks = batches
            with job.stage(
                "copy",
                f"copy {total} files in {batches} batches to {target.root_uri}",
                if_interrupted=f"the copy at {target.root_uri} is partial (no root file yet: nothing reads "
                "it as a lakehouse), and the export's record in the source, made before the copy, was taken "
                "back; run the export again, which overwrites what is there",
            ):
                copied, size = _copy(source, target, files, batches) if batches else (0, 0)
            result.files_copied, result.bytes_copied = copied, size
            if copied != total:
                raise LakecoreError(f"copied {copied} of {total} files; rerun the export")
            result.copied_sample = sample_paths(files)

    return copy_files


def run_export(options: ExportOptions, job: JobContext) -> ExportResult:
    """``Lakehouse.export_snapshot`` (the export's checks, its record, partial and minimal
    copies), with a full export's files listed and copied on executors."""
    lh = Lakehouse.open(job.storage.root_uri, storage_options=job.storage.storage_options)
    exported = (
        lh.root_info
        if options.version is None
        else read_version(lh.storage, options.version, lh.lakehouse_def.order)
    )
    result = job.track(
        ExportResult(
            name=options.name,
            mode=options.mode,
            target=options.target,
            source_version=lh.version,
            exported_version=exported.version,
            exported_root=exported.path,
        )
    )
    # The export's own checks (read-only copy, name, target) and its record are the library's;
    # the job only brings a copy of a full export's files that runs on executors.
    copy_files = (
        _distributed_copy(job, result, options.batch_size) if options.mode == "full" else None
    )
    with job.stage("export", f"{options.mode} export of version {exported.version}"):
        result.recorded_version = lh.export_snapshot(
            options.name,
            options.mode,
            target=options.target,
            target_storage_options=options.target_storage_options,
            version=exported.version,
            copy_files=copy_files,
        )
    recorded = {export.name: export for export in lh.list_exports()}.get(options.name)
    result.recorded_target = (
        recorded.target if recorded is not None and recorded.target else options.target
    )
    return result


def render_export(result: ExportResult, report: JobReport) -> None:
    """``result`` into ``report``: the only place export's report keys are written."""
    report.base_version = result.source_version
    report.details.update(
        {
            "name": result.name,
            "mode": result.mode,
            "target": result.recorded_target or result.target,
            "exported_version": result.exported_version,
            "exported_root": result.exported_root,
        }
    )
    if result.subtree_tasks is not None:
        report.counts["subtree_tasks"] = result.subtree_tasks
    if result.reachable_node_files is not None and result.reachable_definition_files is not None:
        report.counts["reachable_node_files"] = result.reachable_node_files
        report.counts["reachable_definition_files"] = result.reachable_definition_files
    if result.copy_tasks is not None:
        report.counts["copy_tasks"] = result.copy_tasks
    if result.files_copied is not None:
        report.counts["files_copied"] = result.files_copied
        report.bytes["bytes_copied"] = result.bytes_copied
    if result.copied_sample is not None:
        report.sample("copied_files", result.copied_sample)
    if result.recorded_version is None:
        return
    report.new_version = result.recorded_version
    if result.mode == "full":
        report.summary.append(
            f"full export {result.name!r} of version {result.exported_version}: "
            f"{plural(result.files_copied or 0, 'file')} ({format_bytes(result.bytes_copied)}) "
            f"copied to {report.details['target']}; recorded in version {result.recorded_version}"
        )
    else:
        report.summary.append(
            f"{result.mode} export {result.name!r} of version {result.exported_version} to "
            f"{result.target}; recorded in version {result.recorded_version}"
        )


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    return run_job(
        "export",
        parser=_parser(),
        options=export_options,
        run=run_export,
        render=render_export,
        argv=argv,
        spark=spark,
    )
