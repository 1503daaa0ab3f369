"""The format core: the TrinityLake format on storage, and nothing above it.

Tier 1 of three (docs/architecture.md): keys and object names (``keys``, ``namespaces``), file
names and path optimization (``locations``), the node file codec (``node``, ``ipc_probe``),
object definitions (``defs``), storage by scheme (``storage``), the B-epsilon tree (``tree``),
the commit protocol (``commit``), versions and the hint (``versions``), the read-only view of a
version (``view``), export bookkeeping (``export_records``), the sorted lookup file (``lookup``),
and the small conventions they share (``units``, ``display``, ``sized_lru``).

Rules: a module here imports only this folder and ``lakecore.errors`` (the one error hierarchy
every tier shares); nothing here knows of Iceberg, the REST server, the command line or Spark.
"""
