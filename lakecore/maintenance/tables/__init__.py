"""Iceberg table maintenance over a whole lakehouse: snapshot expiry, orphan files, purges.

Engine-neutral units; ``jobs/table_maintenance.py`` distributes them on Spark and
``run.table_maintenance_in_process`` runs them in one process (``lakecore table-maintenance``,
the tests' oracle). Commits go through a ``Committer`` (``commits``): the catalog,
``lakecore.iceberg.expiry.CatalogCommitter``, which this package does not import.

What is kept (never deleted)
    Every file named by the Iceberg metadata of every table of every *retained* lakehouse
    version (``versions``: what version compaction keeps at the same ``now``), through each
    metadata file's snapshots, manifest lists and manifests (``named``, ``graph``): metadata
    files and their ``metadata-log``, statistics and partition statistics files, manifest lists,
    manifests, and the data and delete files of their live entries. So time travel to any
    retained version reads and scans every table, and a file another table names (``add_files``,
    a register, a shared location) is never deleted: the set is one, over the whole lakehouse.

What expires
    In each table in scope (``--namespace``: one namespace and those inside it), the snapshots
    and refs Iceberg's own rules expire (``policy``: Java's ``RemoveSnapshots``), by the table's
    ``history.expire.*`` properties and the lakehouse-wide defaults of the settings. The metadata
    change is committed in batches of tables, each batch one lakehouse version, before any file
    is deleted (``commits``).

What may be deleted
    * *expired*: files the expired snapshots named (their manifest lists, manifests, data and
      delete files, statistics) that no retained metadata names once the commits have landed;
      and every file a *due* purge mark's table named (``marks``: dropped with purge, no
      retained version holds it any more). While the lakehouse version before the commit is
      retained, it still names the expired snapshots: their files go in a later run, once that
      version has left retention (or, never referenced again, as orphans).
    * *orphans*: files listed under the folders of the tables in scope and of the due marks
      (``listing``) that no retained metadata names and no expiry accounts for, last modified
      before the grace period (default 3 days; under one hour needs
      ``--i-understand-grace-risk``): failed writes, commits that lost a race, files of expired
      snapshots whose last retained reference has gone.
    * and, for both, only what the rules allow (``rules``): inside the owning table's own
      folders, inside the warehouse, out of lakecore's directories, not blocked.

Fail closed
    A metadata file, manifest list or manifest that cannot be read makes the reachable set of
    every table whose retained metadata leads to it unknown. Nothing is then deleted in any
    folder such a table may name files in (its own folders and the registry's reference folders
    for it), by any table's expiry or orphan removal; when those folders cannot be known (its
    metadata file itself is unreadable, it was written around the registry, or the registry is
    incomplete) nothing is deleted at all. The run names each unreadable file and fails (exit 6
    for damage, 4 for a failed read) after doing what stayed safe. A listing that fails deletes
    nothing it did not list.

Tables left alone: ``EXTERNAL`` ones (registered: their files were not written for them),
``gc.enabled=false`` (Iceberg's switch: no expiry, no deletes), a table property that is not a
number. A table dropped without purge is never deleted by maintenance (its folder is no live
table's, so it is not listed); undrop brings it back while a retained version holds it.
"""
