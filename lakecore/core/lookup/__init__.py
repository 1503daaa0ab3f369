"""Sorted lookup files, byte-compatible with Apache Paimon's sort lookup store.

A lookup file is a write-once, sorted map from byte-string keys to byte-string values, read by
point lookups (``get``, ``get_many``) and ordered scans (``items``). The byte layout is
docs/lookup-format.md; each module documents the part of it that it owns:

- ``varint.py``: LEB128 lengths and offsets
- ``block.py``: entries, aligned/unaligned tails, the CRC trailer, searching a block
- ``compression.py``: codec ids 0-3 (none/zstd/lz4/lzo), the 12.5% rule, and how much raw data
  a compressed block may declare
- ``murmur.py``: Paimon's MurmurHash3 variant (seed 42)
- ``bloom.py``: filter sizing, bitset, probes
- ``handle.py``: block handles, the values of the index block
- ``footer.py``: the 36-byte footer
- ``blockcache.py``: the decoded-block cache shared by the readers of a process
- ``corruption.py``: how a broken rule is reported (file and byte offset)
- ``writer.py`` / ``reader.py``: ``LookupWriter`` / ``LookupReader`` (``stats()`` returns a
  ``reader.LookupStats``)
"""

from lakecore.core.lookup.reader import LookupReader
from lakecore.core.lookup.writer import LookupWriter

__all__ = ["LookupReader", "LookupWriter"]
