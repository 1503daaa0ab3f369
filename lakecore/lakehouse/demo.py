"""``make demo``: build a sample lakehouse under the repo and show what it holds.

Creates (or recreates) a local lakehouse with a few namespaces and tables over many small
commits, so that the root buffer overflows and the tree flushes, then prints the version log,
the tree structure and the files on disk. Unless ``--no-pipeline`` is given (and when the Spark
jobs are available) it then runs the maintenance jobs on it, see ``jobs/pipeline.py``.

The demo recreates only what it made itself. ``--lakehouse`` may name a folder that does not
exist, an empty folder, or a lakehouse an earlier demo run made (its definition carries the
property ``lakecore.demo = true``) that holds nothing but lakehouse files. Anything else is
refused (exit 2) and left untouched. Recreating deletes the lakehouse's own files one by one
and then its empty folders: never a whole folder tree.
"""

from __future__ import annotations

import os
from collections import Counter

from lakecore.core import keys
from lakecore.core.locations import FileKind, classify_path
from lakecore.core.units import plural
from lakecore.errors import InvalidArgumentError, LakecoreError
from lakecore.lakehouse import Lakehouse

# Set on every demo lakehouse: the mark that lets a later demo run recreate it.
DEMO_PROPERTY = "lakecore.demo"


def build_sample(uri: str, *, namespaces: int = 4, tables_per_namespace: int = 60) -> Lakehouse:
    # Small nodes so that a demo-sized catalog shows flushes and a multi-level tree.
    lh = Lakehouse.create(
        uri,
        name="demo",
        properties={DEMO_PROPERTY: "true"},
        order=8,
        node_file_max_size_bytes=16 * 1024,
        namespace_name_max_size_bytes=32,
        table_name_max_size_bytes=48,
        file_name_max_size_bytes=128,
        minimum_versions_to_keep=5,
    )
    for n in range(namespaces):
        ns = f"sales_{n}"
        with lh.transaction() as tx:
            tx.create_namespace(ns, properties={"owner": f"team-{n}"})
        for t in range(tables_per_namespace):
            with lh.transaction() as tx:
                tx.create_table(
                    ns,
                    f"orders_{t:03d}",
                    columns=[
                        {"id": 1, "name": "order_id", "type": "INT8", "nullable": False},
                        {"id": 2, "name": "amount", "type": "DECIMAL"},
                    ],
                    properties={"created_by": "demo"},
                )
    with lh.transaction() as tx:
        for t in range(0, tables_per_namespace, 7):
            tx.drop_table("sales_0", f"orders_{t:03d}")
    leave_crashed_commit(lh)
    return lh


def leave_crashed_commit(lh: Lakehouse) -> None:
    """What a writer that died before its commit point leaves behind: its definition file and
    its new nodes, which no root will ever reach. gc finds and deletes them."""
    from lakecore.core.defs import encode_def, table_def
    from lakecore.core.locations import new_table_def_path
    from lakecore.core.tree import TreeShape, TreeWriter

    ghost = new_table_def_path("sales_1", "ghost")
    lh.storage.write(ghost, encode_def(table_def("ghost")))
    writer = TreeWriter(lh.store, TreeShape.of(lh.lakehouse_def), lh.root)
    for i in range(200):
        writer.put(keys.table_key("sales_1", f"ghost_{i:03d}", lh.lakehouse_def), ghost)
    writer.finish()  # writes the changed nodes; the root is never created


def describe(lh: Lakehouse) -> str:
    from lakecore.lakehouse.treeinfo import describe_tree

    lines = [f"lakehouse {lh.lakehouse_def.name!r} at {lh.uri}, latest version {lh.version}"]
    versions = lh.versions()
    lines.append(
        f"retained versions: {len(versions)} (newest {versions[0].version}, oldest {versions[-1].version})"
    )
    summary = describe_tree(lh)
    lines.append(
        f"tree: depth {summary['depth']}, {plural(summary['nodes'], 'node')}, "
        f"{plural(summary['keys'], 'key')} in key tables, {plural(summary['messages'], 'buffered message')}"
    )
    kinds: Counter[str] = Counter()
    total = 0
    for info in lh.storage.list():
        classified = classify_path(info.path)
        kinds[classified.kind.value if classified else "foreign"] += 1
        total += info.size
    lines.append(
        "files: "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        + f" ({total / 1024:.0f} KiB)"
    )
    sample = sorted(
        i.path
        for i in lh.storage.list()
        if (c := classify_path(i.path)) and c.kind is FileKind.NODE
    )[:3]
    lines.extend(f"  e.g. {p}" for p in sample)
    lines.append(
        f"namespaces: {', '.join(lh.list_namespaces())}; tables in sales_0: {len(lh.list_tables('sales_0'))}"
    )
    return "\n".join(lines)


def clear_demo_lakehouse(path: str) -> None:
    """Make ``path`` ready for a new sample: absent or empty, or a demo lakehouse whose own
    files are then deleted. Raises InvalidArgumentError, touching nothing, for anything else."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        raise InvalidArgumentError(
            f"{path} is not a folder; give --lakehouse a new or empty folder"
        )
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                filenames.append(name)  # a link is never ours: report it as foreign
        files.extend(
            os.path.relpath(os.path.join(dirpath, name), path).replace(os.sep, "/")
            for name in filenames
        )
    if not files:
        return
    foreign = sorted(f for f in files if classify_path(f) is None)
    if foreign:
        raise InvalidArgumentError(
            f"{path} holds files the demo did not make (e.g. {foreign[0]}); give --lakehouse a new or "
            "empty folder (nothing was touched)"
        )
    if not _is_demo_lakehouse(path):
        raise InvalidArgumentError(
            f"{path} is a lakehouse the demo did not make (no {DEMO_PROPERTY} property); give "
            "--lakehouse a new or empty folder (nothing was touched)"
        )
    for rel in files:
        os.unlink(os.path.join(path, rel))
    for dirpath, _dirnames, _filenames in sorted(os.walk(path), key=lambda entry: -len(entry[0])):
        if dirpath != path:
            os.rmdir(dirpath)  # empty by now: only lakehouse files were in it


def _is_demo_lakehouse(path: str) -> bool:
    """True when the definition of the lakehouse's latest version carries the demo's mark. An
    operator who unset the mark took the lakehouse over: an older definition that still carries
    it does not count. A lakehouse whose latest version cannot be read is not the demo's either:
    nothing is deleted that cannot be told apart."""
    try:
        latest = Lakehouse.open(path)
    except LakecoreError:
        return False
    return latest.lakehouse_def.properties.get(DEMO_PROPERTY) == "true"
