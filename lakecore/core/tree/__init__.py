"""The B-epsilon search tree map over node files (docs/format.md#the-tree).

``read`` resolves keys and ranges (merge-on-read), ``write`` applies messages copy-on-write
with flushes, splits and merges, ``bulk`` builds a balanced tree from sorted items, and
``store`` reads and writes node files through a process-wide cache.
"""

from lakecore.core.tree.bulk import bulk_build
from lakecore.core.tree.read import get, items, prefix_upper_bound, scan, scan_prefix
from lakecore.core.tree.shape import TreeShape
from lakecore.core.tree.store import SHARED_CACHE, IOStats, NodeCache, NodeStore
from lakecore.core.tree.write import (
    FlushMode,
    FlushPolicy,
    SubtreeFlushResult,
    TreeWriter,
    flush_subtree,
)

__all__ = [
    "SHARED_CACHE",
    "FlushMode",
    "FlushPolicy",
    "IOStats",
    "NodeCache",
    "NodeStore",
    "SubtreeFlushResult",
    "TreeShape",
    "TreeWriter",
    "bulk_build",
    "flush_subtree",
    "get",
    "items",
    "prefix_upper_bound",
    "scan",
    "scan_prefix",
]
