"""export: copy one version of a lakehouse to another root as a lakehouse of its own.

    ./spark-submit.sh export --lakehouse URI --name NAME --mode full|partial|minimal \\
        --target URI [--version V] [--target-storage-option KEY=VALUE] [--batch-size N]

A ``full`` export copies every file the version reaches, in parallel: the driver cuts the tree
(``lakecore.maintenance.partition.cut_tree``), executors list what each subtree reaches
(``reachable_from_subtree``), and executors copy the files in batches with their own Storage
handles. The paths stay in a Spark DataFrame: the checks (a node reached by two walks, a path
outside the source) are JVM aggregates, and the driver gets counts and a capped sample. Only when every file is there does the driver write the target's lakehouse definition
and root (version 0, exclusive create) and then record the export in the source's definition
(``exported_snapshots[NAME]``, FORMAT.md section 5), which pins the exported version against
expiry. ``partial`` and ``minimal`` exports copy at most the internal nodes and run on the driver
(``Lakehouse.export_snapshot``).

Nothing is written when the name is taken, the version does not exist, or the target already
holds a lakehouse or files lakecore did not name (``lakecore.lakehouse.export.refuse_foreign_files``). A copy that fails part-way leaves files but no root at the target: it is not
a lakehouse, and rerunning the export on the same target overwrites those files.
"""

from __future__ import annotations

if __package__ in (
    None,
    "",
):  # run as a file (spark-submit jobs/export.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

if __name__ == "__main__":  # a Ctrl-C during the imports below: one line, not a traceback
    from jobs.startup import quiet_until_the_job_begins

    quiet_until_the_job_begins("export")

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Final

from jobs.arguments import base_parser, storage_options
from jobs.context import JobContext
from jobs.frames import Columns, driver_rows, fan_out
from jobs.run import run_untyped_job
from jobs.spark_units import sample_paths
from lakecore.cli.argparsing import ArgumentError, whole_number
from lakecore.errors import (
    LakecoreError,
    TreeStructureError,
)
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.export import CopyFiles
from lakecore.locations import is_full_uri
from lakecore.maintenance.partition import SubtreeTask, cut_tree
from lakecore.maintenance.reachable import Reachable
from lakecore.node import Node
from lakecore.storage import Storage
from lakecore.tree import NodeStore, TreeShape
from lakecore.units import format_bytes, plural
from lakecore.versions import RootInfo, read_version

# Files copied per executor task: large enough to amortise task overhead, small enough that a
# lakehouse of a few thousand files still spreads over every core.
DEFAULT_BATCH_SIZE = 64


def _parser() -> Any:
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
    ctx: JobContext,
    source: Storage,
    order: int,
    external: tuple[str, ...],
    tasks: list[SubtreeTask],
    top: Reachable,
) -> Any:
    """The reach DataFrame: the subtrees walked on executors, the top from the driver."""

    def walk(items: list[SubtreeTask]) -> Iterator[tuple[str, bool, bool]]:
        from lakecore.maintenance.reachable import reachable_from_subtree
        from lakecore.tree import NodeStore

        store = NodeStore(source, order, external_roots=external)
        for task in items:
            yield from _reach_rows(reachable_from_subtree(store, task.location, task.depth))

    driver = driver_rows(ctx.spark, list(_reach_rows(top)), EXPORT_REACH)
    if not tasks:
        return driver
    return fan_out(ctx.spark, tasks, walk, EXPORT_REACH, ctx.parallelism).unionByName(driver)


def _copy(
    ctx: JobContext, source: Storage, target: Storage, files: Any, batches: int
) -> tuple[int, int]:
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


def _distributed_copy(ctx: JobContext, exported_root: RootInfo, batch_size: int) -> CopyFiles:
    """A ``lakecore.lakehouse.export.CopyFiles`` that lists and copies on executors. The paths stay in
    Spark: the driver gets the counts, one offending path when there is one, and a sample."""
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    report = ctx.report

    def copy_files(source: Storage, target: Storage, store: NodeStore, root: Node) -> None:
        exported = exported_root.path
        with ctx.stage("cut", "cut the exported tree into subtrees (driver)"):
            cut = cut_tree(
                store, root, exported, ctx.parallelism, TreeShape(store.order, 1).max_depth
            )
        top = Reachable()
        for location, node, _depth in cut.top:
            if location != exported:  # the root itself is written afresh at the target
                top.nodes.add(location)
            top.values.update(node.values)
            top.values.update(v for v in node.buffer.values() if v is not None)
        report.counts["subtree_tasks"] = len(cut.subtrees)
        # One row per file: how many walks met it. Every check and count is then one query.
        files = (
            _reach(ctx, source, store.order, store.external_roots, cut.subtrees, top)
            .groupBy("path")
            .agg(
                F.count(F.lit(1)).alias("walks"),
                F.max("node").alias("node"),
                F.max("foreign").alias("foreign"),
            )
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        try:
            with ctx.stage("reachable", f"list the files {len(cut.subtrees)} subtrees reach"):
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
                    f"version {exported_root.version} points outside {source.root_uri} "
                    f"(e.g. {foreign}): it is itself an export; make a full export from its source instead"
                )
            total = nodes + definitions
            report.counts["reachable_node_files"] = nodes
            report.counts["reachable_definition_files"] = definitions
            batches = -(-total // batch_size)
            report.counts["copy_tasks"] = batches
            with ctx.stage(
                "copy",
                f"copy {total} files in {batches} batches to {target.root_uri}",
                if_interrupted=f"the copy at {target.root_uri} is partial (no root file yet: nothing reads "
                "it as a lakehouse), and the export's record in the source, made before the copy, was taken "
                "back; run the export again, which overwrites what is there",
            ):
                copied, size = _copy(ctx, source, target, files, batches) if batches else (0, 0)
            report.counts["files_copied"] = copied
            report.bytes["bytes_copied"] = size
            if copied != total:
                raise LakecoreError(f"copied {copied} of {total} files; rerun the export")
            report.sample("copied_files", sample_paths(files))
        finally:
            files.unpersist()

    return copy_files


def _body(ctx: JobContext) -> None:
    args = ctx.args
    report = ctx.report
    if args.batch_size < 1:
        raise ArgumentError(f"--batch-size {args.batch_size} must be at least 1")
    target_options = (
        storage_options(argparse.Namespace(storage_option=args.target_storage_option))
        if args.target_storage_option
        else None
    )
    lh = Lakehouse.open(ctx.storage.root_uri, storage_options=ctx.storage.storage_options)
    report.base_version = lh.version
    exported = (
        lh.root_info
        if args.version is None
        else read_version(lh.storage, args.version, lh.lakehouse_def.order)
    )
    report.details.update(
        {
            "name": args.name,
            "mode": args.mode,
            "target": args.target,
            "exported_version": exported.version,
            "exported_root": exported.path,
        }
    )
    # The export's own checks (read-only copy, name, target) and its record are the library's;
    # the job only brings a copy of a full export's files that runs on executors.
    copy_files = _distributed_copy(ctx, exported, args.batch_size) if args.mode == "full" else None
    with ctx.stage("export", f"{args.mode} export of version {exported.version}"):
        report.new_version = lh.export_snapshot(
            args.name,
            args.mode,
            target=args.target,
            target_storage_options=target_options,
            version=exported.version,
            copy_files=copy_files,
        )
    recorded = {export.name: export for export in lh.list_exports()}.get(args.name)
    report.details["target"] = (
        recorded.target if recorded is not None and recorded.target else args.target
    )
    if args.mode == "full":
        report.summary.append(
            f"full export {args.name!r} of version {exported.version}: {plural(report.counts['files_copied'], 'file')} "
            f"({format_bytes(report.bytes['bytes_copied'])}) copied to {report.details['target']}; recorded in version "
            f"{report.new_version}"
        )
    else:
        report.summary.append(
            f"{args.mode} export {args.name!r} of version {exported.version} to {args.target}; "
            f"recorded in version {report.new_version}"
        )


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_untyped_job("export", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
