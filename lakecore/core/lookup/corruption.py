"""How a lookup-file problem is reported: a ``CorruptLookupFileError`` naming file and byte.

Every rule the reader enforces ends in :func:`corrupt`, so every message has the same shape,
``<path> at byte <offset>: <rule>``, where the offset is in the stored file (for a problem
inside a decompressed block it is the block's offset, and the rule says where inside it).
"""

from __future__ import annotations

from lakecore.errors import CorruptLookupFileError


def corrupt(path: str, offset: int, rule: str) -> CorruptLookupFileError:
    """The error to raise for a broken ``rule`` at byte ``offset`` of the file at ``path``."""
    return CorruptLookupFileError(f"{path} at byte {offset}", rule)
