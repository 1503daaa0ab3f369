"""The numbers that shape a tree: order, node size budget, fill rules and depth bound.

Fill rules (docs/format.md#shape), for order ``N``:

    every node              at most N children, at most N-1 keys
    root                    at least 2 children unless it is a leaf (an empty leaf is allowed)
    other internal nodes    at least ceil(N/2) children
    other leaves            at least 1 key

Size: a node must encode to at most ``node_file_max_size_bytes``. The tree budgets a fixed
reserve for system rows so that the same node fits whether it is written as a root (with
``lakehouse_def``, ``previous_root`` and ``rollback_from_root``) or as a non-root node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from lakecore.core.node import SizeParts

# Room for the system rows of a root: five rows, key names, a lakehouse-def file name, two
# root file names and two decimal numbers, with their offsets and padding.
SYSTEM_ROWS_RESERVE_ROWS: Final = 5
SYSTEM_ROWS_RESERVE_KEY_BYTES: Final = 80
SYSTEM_ROWS_RESERVE_VALUE_BYTES: Final = 320
# 2^48 nodes is beyond any catalog a tree of any order can hold in practice; a walk that goes
# deeper is following a cycle or a forged pointer.
_MAX_NODES_EXPONENT: Final = 48


@dataclass(frozen=True, slots=True)
class TreeShape:
    order: int
    node_file_max_size_bytes: int

    @classmethod
    def of(cls, lakehouse_def: Any) -> TreeShape:
        return cls(int(lakehouse_def.order), int(lakehouse_def.node_file_max_size_bytes))

    @property
    def max_keys(self) -> int:
        return self.order - 1

    @property
    def min_internal_children(self) -> int:
        return math.ceil(self.order / 2)

    @property
    def max_depth(self) -> int:
        """Deepest a valid tree of this order can be (levels, root = 1)."""
        fanout_bits = math.log2(self.min_internal_children)
        return 2 + math.ceil(_MAX_NODES_EXPONENT / fanout_bits)

    def node_size(
        self, key_bytes: int, value_bytes: int, pnode_bytes: int, buffer_rows: int
    ) -> int:
        """Encoded size of a node with these string byte counts, system reserve included.

        ``key_bytes`` and ``value_bytes`` cover the key table and the buffer together."""
        return SizeParts(
            SYSTEM_ROWS_RESERVE_ROWS + self.order + buffer_rows,
            SYSTEM_ROWS_RESERVE_KEY_BYTES + key_bytes,
            SYSTEM_ROWS_RESERVE_VALUE_BYTES + value_bytes,
            pnode_bytes,
        ).total

    def empty_node_size(self) -> int:
        return self.node_size(0, 0, 0, 0)


# Length of an optimized node file path: 20 hash bits with 3 slashes and a dash, "node-",
# a 36-character UUID and ".arrow".
NODE_PATH_BYTES: Final = 24 + 5 + 36 + 6
