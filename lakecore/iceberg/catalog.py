"""``LakecoreCatalog``: a pyiceberg catalog whose namespaces and tables live in a lakehouse.

Load it like any pyiceberg catalog::

    load_catalog("prod", **{"py-catalog-impl": "lakecore.iceberg.LakecoreCatalog",
                            "uri": "s3://bucket/lake", "warehouse": "s3://bucket/warehouse",
                            "s3.endpoint": ..., "s3.access-key-id": ..., "s3.secret-access-key": ...})

Rules:

* **One lakehouse object per Iceberg object.** An Iceberg namespace is a lakecore namespace (its
  properties are the namespace definition's properties); an Iceberg table is a lakecore table
  with ``table_format = ICEBERG`` whose ``format_properties["metadata_location"]`` is the full
  URI of its current metadata file (``previous_metadata_location`` the one before). Its columns
  mirror the Iceberg schema (``lakecore.iceberg.columns``). Namespaces nest to any depth:
  ``("a", "b")`` is the lakecore namespace ``a.b`` (``lakecore.core.namespaces``); creating one
  creates its missing parents, ``list_namespaces(parent)`` gives the direct children, and a
  namespace with children or tables cannot be dropped.
* **Commits are optimistic.** ``commit_table`` applies the requirements and updates to the
  current metadata, writes a new metadata file, then commits a lakecore transaction that
  replaces the table's definition. Snapshot isolation makes that commit fail if any other
  commit changed the table's key since the current metadata was read, so a concurrent change is
  never a lost update: the commit is redone once on the latest version (as a catalog that reads
  the latest state first would have done), and a second loss is ``CommitFailedException``
  (pyiceberg refreshes and retries). An
  ambiguous root write (or any storage failure during the lakecore commit) is
  ``CommitStateUnknownException``: pyiceberg then keeps every file it wrote. The losing writer's
  metadata file is never referenced; it is left for an Iceberg orphan-file cleanup.
  ``commit_tables`` commits changes to several tables as one lakehouse version, all or none
  (the REST server's multi-table transactions).
* **Locations.** Every table location, every metadata file and every write path a table's
  properties set (``write.data.path``, ``write.metadata.path``, ...) lies strictly inside the
  warehouse (``ValidationError`` otherwise), and so does a namespace's ``location`` property
  (checked when it is set, since it is where that namespace's tables go by default). A warehouse
  inside the lakehouse root must be a directory of its own whose first path segment is not a
  lakecore name (no leading ``_`` or ``.``, not a 4-binary-digit hash directory): lakecore's gc
  lists only the root's top level and its hash directories and deletes only files with
  lakecore's names, so Iceberg files are then never listed, let alone deleted. A table's
  default location is
  ``<warehouse or namespace location>/<namespace>/<table>-<uuid>``: unique, so a table created
  after a rename or a drop never shares a directory (and an orphan cleanup) with the old one.
* **One warehouse per lakehouse, one lakehouse per warehouse** (``lakecore.iceberg.warehouse``).
  The first change a catalog makes records its warehouse in the lakehouse definition and
  claims the folder with a marker file, ``<warehouse>/.lakecore-warehouse.json``. From then on
  a catalog given another ``warehouse`` is refused when it opens (without the property it takes
  the recorded one; before the record it is ``<uri>/warehouse``), a second lakehouse cannot
  claim the folder or a folder inside it (its first change is refused), and no table or
  namespace folder is placed inside another lakehouse's warehouse (a warehouse that holds
  another's can be claimed, since finding the other would take a listing of all of it, but its
  tables keep out of the one inside).
* **No two tables share a folder** (``lakecore.iceberg.table_folders`` has the details). A table's
  location and write paths (its *roots*) may not equal or contain the warehouse, a namespace's
  folder (``<warehouse>/<namespace levels>`` or its ``location``) or a root of another live
  table, nor lie inside another table's root; and a namespace's folder may not equal or lie
  inside a table's root. Checked at ``create_table`` (and a create transaction, before any
  file is written), ``register_table``, ``rename_table``, ``create_namespace``, every
  namespace ``location`` change and every commit that changes a root. The tables a path could
  overlap are found without a scan: a default location names its table, and every other root
  is kept in a registry in the lakehouse definition, written in the same commit.
* **References.** A table's metadata may name files outside its roots (``add_files``). Each
  commit reads what it added (its manifest list and its new manifests: two small reads for an
  append) and records, in the registry, the folders inside the warehouse but outside the
  table's roots where it names files (``lakecore.iceberg.references``); only a folder not yet
  recorded changes the definition. ``register_table`` reads every manifest once to the same
  end. The lakehouse API refuses to set ``metadata_location`` (or any ``lakecore.*`` format
  property) itself: a table pointed at Iceberg metadata around the catalog would escape the
  registry.
* **Storage options** for lakecore's own files: ``storage_options`` (a mapping, when the catalog
  is built in Python), else ``lakecore.storage-options`` (a JSON object), else derived from
  pyiceberg's ``s3.*``/``client.*`` properties (endpoint, keys, session token, region). Iceberg
  data and metadata files go through pyiceberg's FileIO with the catalog's properties as usual.
* **Purge** drops the table and records a purge mark in the same commit; it deletes nothing
  itself (``lakecore.iceberg.purge``). Table maintenance deletes the files once no retained
  lakehouse version holds the table: only files under the table's own location and write
  paths, never what its metadata merely names elsewhere (another table's files, lakecore's),
  and never a file that retained metadata of any table names. Until then ``undrop_table``
  brings the table back (``lakecore.iceberg.undrop``); so does it a table dropped without purge,
  whose files are never deleted. On this machine's disk a path is judged by where it leads
  (``physical_location``: ``file:////w/t``, ``file:///w//t``, ``file:///w/./t`` and a link to
  ``/w/t`` are one file), in the references a commit records and in the location rule (a root
  that is a link into another table's folder overlaps it); maintenance deletes nothing through
  a link. A registered (``EXTERNAL``) table is refused (``register_table`` with ``overwrite``
  makes the table ``EXTERNAL`` too): ``drop_table`` forgets it and leaves its files. A table
  without Iceberg metadata is dropped: it has none.
* **What is not guaranteed.** The guarantee covers what this release's catalog wrote, and what
  the registry's one scan read when it was built (the first change on a lakehouse from before
  it). A client of an older lakecore that writes after that records nothing. Part of what it
  writes shows, by property lookups alone: a table it placed at a folder of its choosing (that
  folder is neither of the table's name's shape nor in the registry), and a table it changed
  after this catalog did (the definition's ``CHECKED_PROPERTY`` stamp names another metadata
  file). Such a table's purge is refused, and its next commit here records it whole (its
  folders, and the references of every file it names). What does not show: files it made a
  table name that lie in another table's folders (``add_files``, ``register_table``), which
  that other table's purge then deletes. Once every client runs this release,
  ``rebuild_location_registry()`` reads every table once and makes the registry whole again.
  Not covered either: a lakehouse that shared its warehouse with another before the claim
  existed, and files that a table of another catalog or lakehouse names (its own purge is not
  this catalog's).
* **Time travel.** ``version=V`` or ``as_of=`` (epoch milliseconds or an ISO-8601 time; UTC when
  no zone is given) make a read-only catalog of that lakehouse version: every table loads at the
  metadata it had then, and every change raises ``ReadOnlyCatalogError``. A catalog over an
  exported copy is read-only the same way. A read-only catalog's tables refuse a write before
  pyiceberg writes any data file for it.
* **Errors** are pyiceberg's types carrying lakecore's message: not found is
  ``NoSuchNamespaceError``/``NoSuchTableError`` (an empty namespace identifier, or a table
  identifier without one, is ``NoSuchNamespaceError``, as pyiceberg's catalogs say), already
  exists is ``NamespaceAlreadyExistsError``/``TableAlreadyExistsError``, a bad name or location
  is ``ValidationError``, a lost race ``CommitFailedException``. Where pyiceberg's own suite
  asserts a wording (``Table does not exist: ns.t``, ``Namespace ns is not empty``), the
  message starts with it and lakecore's detail follows. Storage failures and damaged files
  outside a commit stay lakecore errors (``StorageError``, ``CorruptFileError``): pyiceberg has
  no type for them. Views: ``NoSuchViewError``/``ViewAlreadyExistsError`` (a view named like a
  table is ``ViewAlreadyExistsError`` too).
* **Views** (``lakecore.iceberg.views``): pyiceberg's view calls (``create_view``,
  ``load_view``, ``list_views``, ``view_exists``, ``drop_view``, ``register_view``), and
  ``rename_view`` and ``commit_view`` for the REST server. A view is a lakehouse view object
  pointing at its Iceberg view metadata file; tables and views share a namespace's names; a
  view's files lie in the warehouse, outside every table's folder; time travel shows each view
  as it was.

The catalog is assembled from one module per part, each opening with the rules it implements:
``base`` (opening, the version reads see, the read-only rule, retried changes, identifiers),
``properties`` (the catalog's own properties), ``errors`` (lakecore's errors as pyiceberg's),
``pointer`` (what a table definition holds of its Iceberg table), ``locations`` (where one path
may lie), ``placement`` (no two tables share a folder; the registry), ``namespaces``,
``tables`` (reads, create, register, drop, rename), ``commits`` (``commit_table``,
``commit_tables``), ``purge``, ``undrop``, ``purge_marks`` (the marks' later commits) and
``views``; ``roots``, ``references``, ``warehouse`` and ``columns`` hold
the rules' data and arithmetic. This module is their union, ``LakecoreCatalog``.
"""

from __future__ import annotations

from typing import Final

from lakecore.iceberg.base import ReadOnlyTable
from lakecore.iceberg.commits import CommitOps
from lakecore.iceberg.errors import ReadOnlyCatalogError
from lakecore.iceberg.namespaces import NamespaceOps
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.pointer import (
    CHECKED_PROPERTY,
    METADATA_LOCATION_PROPERTY,
    PREVIOUS_METADATA_LOCATION_PROPERTY,
)
from lakecore.iceberg.purge import PurgeOps
from lakecore.iceberg.purge_marks import PurgeMarkOps
from lakecore.iceberg.tables import TableOps
from lakecore.iceberg.undrop import UndropOps
from lakecore.iceberg.views import ViewOps


class LakecoreCatalog(
    CommitOps, TableOps, NamespaceOps, PurgeOps, UndropOps, PurgeMarkOps, ViewOps
):
    """A pyiceberg catalog backed by a lakecore lakehouse (see the module docstring)."""

    #: Every commit failure whose outcome is unknown is raised as CommitStateUnknownException
    #: (``lakecore.iceberg.errors.translated``): any other failure of a commit means it did not
    #: land. The REST server relies on it (``lakecore.rest.errors``).
    reports_unknown_commits: Final = True


__all__ = [
    "CHECKED_PROPERTY",
    "METADATA_LOCATION_PROPERTY",
    "PREVIOUS_METADATA_LOCATION_PROPERTY",
    "LakecoreCatalog",
    "ReadOnlyCatalogError",
    "ReadOnlyTable",
    "normalize_location",
]
