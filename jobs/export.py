"""export: copy one version of a lakehouse to another root as a lakehouse of its own.

    ./spark-submit.sh export --lakehouse URI --name NAME --mode full|partial|minimal \\
        --target URI [--version V] [--target-storage-option KEY=VALUE] [--batch-size N]

A ``full`` export copies every file the version reaches, in parallel: the driver cuts the tree
(``lakecore.maintenance.partition.cut_tree``), executors list what each subtree reaches
(``reachable_from_subtree``), and executors copy the files in batches with their own Storage
handles. Only when every file is there does the driver write the target's lakehouse definition
and root (version 0, exclusive create) and then record the export in the source's definition
(``exported_snapshots[NAME]``, FORMAT.md section 5), which pins the exported version against
expiry. ``partial`` and ``minimal`` exports copy at most the internal nodes and run on the driver
(``Lakehouse.export_snapshot``).

Nothing is written when the name is taken, the version does not exist, or the target already
holds a lakehouse. A copy that fails part-way leaves files but no root at the target: it is not
a lakehouse, and rerunning the export on the same target overwrites those files.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit jobs/export.py): the repo root must be importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from jobs.common import JobContext, base_parser, run_job, storage_options
from jobs.frames import collect_objects, fan_out_objects
from lakecore.argparsing import ArgumentError
from lakecore.errors import (
    LakecoreError,
    TreeStructureError,
)
from lakecore.export import CopyFiles
from lakecore.humanize import format_bytes
from lakecore.lakehouse import Lakehouse
from lakecore.locations import is_full_uri
from lakecore.maintenance.partition import SubtreeTask, cut_tree
from lakecore.maintenance.reachable import Reachable
from lakecore.node import Node
from lakecore.storage import Storage
from lakecore.tree import NodeStore, TreeShape
from lakecore.versions import RootInfo, read_version

# Files copied per executor task: large enough to amortise task overhead, small enough that a
# lakehouse of a few thousand files still spreads over every core.
DEFAULT_BATCH_SIZE = 64


def _parser() -> Any:
    parser = base_parser("export", __doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the export's name, recorded in the source's definition")
    parser.add_argument("--mode", choices=["full", "partial", "minimal"], required=True,
                        help="full: every reachable file; partial: root and internal nodes; minimal: the root only")
    parser.add_argument("--target", required=True, help="root URI of the copy (must not hold a lakehouse)")
    parser.add_argument("--version", type=int, default=None, help="version to export (default: the latest)")
    parser.add_argument("--target-storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option for the target (default: the source's options)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help=f"full mode: files copied per executor task (default {DEFAULT_BATCH_SIZE})")
    return parser


def _reachable_subtrees(ctx: JobContext, source: Storage, order: int, external: tuple[str, ...],
                        tasks: list[SubtreeTask]) -> list[Reachable]:
    if not tasks:
        return []

    def walk(items: list[SubtreeTask]) -> Iterator[Reachable]:
        from lakecore.maintenance.reachable import reachable_from_subtree
        from lakecore.tree import NodeStore

        store = NodeStore(source, order, external_roots=external)
        for task in items:
            yield reachable_from_subtree(store, task.location, task.depth)

    results: list[Reachable] = collect_objects(fan_out_objects(ctx.spark, tasks, walk, ctx.parallelism))
    return results


def _copy_batches(ctx: JobContext, source: Storage, target: Storage, batches: list[list[str]]) -> list[tuple[int, int]]:
    if not batches:
        return []

    def copy(items: list[list[str]]) -> Iterator[tuple[int, int]]:
        for batch in items:
            copied = size = 0
            for path in batch:
                data = source.read(path)
                target.write(path, data)
                copied += 1
                size += len(data)
            yield copied, size

    # A partition per batch: the batch size is the operator's unit of work per task.
    results: list[tuple[int, int]] = collect_objects(fan_out_objects(ctx.spark, batches, copy, len(batches)))
    return results


def _distributed_copy(ctx: JobContext, exported_root: RootInfo, batch_size: int) -> CopyFiles:
    """A ``lakecore.export.CopyFiles`` that lists and copies on executors."""
    report = ctx.report

    def copy_files(source: Storage, target: Storage, store: NodeStore, root: Node) -> None:
        exported = exported_root.path
        with ctx.stage("cut", "cut the exported tree into subtrees (driver)"):
            cut = cut_tree(store, root, exported, ctx.parallelism, TreeShape(store.order, 1).max_depth)
        top = Reachable()
        for location, node, _depth in cut.top:
            if location != exported:  # the root itself is written afresh at the target
                top.nodes.add(location)
            top.values.update(node.values)
            top.values.update(v for v in node.buffer.values() if v is not None)
        report.counts["subtree_tasks"] = len(cut.subtrees)
        with ctx.stage("reachable", f"list the files {len(cut.subtrees)} subtrees reach"):
            parts = _reachable_subtrees(ctx, source, store.order, store.external_roots, cut.subtrees)
        reach = Reachable()
        reach.update(top)
        for part in parts:
            shared = reach.nodes & part.nodes
            if shared:
                raise TreeStructureError(sorted(shared)[0], "node is reached from two subtrees of one version")
            reach.update(part)
        files = sorted(reach.files)
        foreign = [f for f in files if is_full_uri(f)]
        if foreign:
            raise LakecoreError(
                f"version {exported_root.version} points outside {source.root_uri} "
                f"(e.g. {foreign[0]}): it is itself an export; make a full export from its source instead"
            )
        report.counts["reachable_node_files"] = len(reach.nodes)
        report.counts["reachable_definition_files"] = len(reach.values - reach.nodes)
        batches = [files[i : i + batch_size] for i in range(0, len(files), batch_size)]
        report.counts["copy_tasks"] = len(batches)
        with ctx.stage("copy", f"copy {len(files)} files in {len(batches)} batches to {target.root_uri}"):
            copied = _copy_batches(ctx, source, target, batches)
        report.counts["files_copied"] = sum(n for n, _ in copied)
        report.bytes["bytes_copied"] = sum(b for _, b in copied)
        if report.counts["files_copied"] != len(files):
            raise LakecoreError(f"copied {report.counts['files_copied']} of {len(files)} files; rerun the export")
        report.sample("copied_files", files)

    return copy_files


def _body(ctx: JobContext) -> None:
    args = ctx.args
    report = ctx.report
    if args.batch_size < 1:
        raise ArgumentError(f"--batch-size {args.batch_size} must be at least 1")
    target_options = (storage_options(argparse.Namespace(storage_option=args.target_storage_option))
                      if args.target_storage_option else None)
    lh = Lakehouse.open(ctx.storage.root_uri, storage_options=ctx.storage.storage_options)
    report.base_version = lh.version
    exported = lh.root_info if args.version is None else read_version(lh.storage, args.version, lh.lakehouse_def.order)
    report.details.update({"name": args.name, "mode": args.mode, "target": args.target,
                           "exported_version": exported.version, "exported_root": exported.path})
    # The export's own checks (read-only copy, name, target) and its record are the library's;
    # the job only brings a copy of a full export's files that runs on executors.
    copy_files = _distributed_copy(ctx, exported, args.batch_size) if args.mode == "full" else None
    with ctx.stage("export", f"{args.mode} export of version {exported.version}"):
        report.new_version = lh.export_snapshot(args.name, args.mode, target=args.target,
                                                target_storage_options=target_options, version=exported.version,
                                                copy_files=copy_files)
    recorded = {export.name: export for export in lh.list_exports()}.get(args.name)
    report.details["target"] = recorded.target if recorded is not None and recorded.target else args.target
    if args.mode == "full":
        report.summary.append(
            f"full export {args.name!r} of version {exported.version}: {report.counts['files_copied']} files "
            f"({format_bytes(report.bytes['bytes_copied'])}) copied to {report.details['target']}; recorded in version "
            f"{report.new_version}"
        )
    else:
        report.summary.append(f"{args.mode} export {args.name!r} of version {exported.version} to {args.target}; "
                              f"recorded in version {report.new_version}")


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    return run_job("export", _parser(), _body, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())

