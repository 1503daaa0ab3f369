"""``purge_table``: what a purge deletes, what it keeps, and which tables it refuses.

Rules:

* **Only the table's own folders.** A purge deletes only files under the table's location and
  its own write paths (``write.data.path``, ...), each inside the warehouse and out of
  lakecore's directories (``_purgeable_roots``), never what its metadata merely names
  elsewhere (another table's files, lakecore's): a metadata file can name any path, and
  pyiceberg's own purge deletes whatever it names. Other paths are left and logged.
* **Never a file another live table names.** The tables whose roots overlap the purged table's
  (none when every table was made under the rule; in a lakehouse from before it, those the
  registry and the names find), and the tables the registry says name files in them, are read
  (``lakecore.iceberg.roots``), and every file their current metadata names is kept.
* **Refused:** a registered (``EXTERNAL``) table, whose files were not written for it
  (``drop_table`` forgets it and leaves its files); and a table other code (a client of an
  older lakecore) wrote around the registry, which may name files no registry entry records
  (``rebuild_location_registry`` makes it purgeable again). A table without Iceberg metadata
  is dropped: it has no files.
* The table is dropped first, in one commit with its registry entries; the files are deleted
  after. Older lakehouse versions that still name the table can no longer be scanned.

Its log records go to the catalog's logger, ``lakecore.iceberg.catalog``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyiceberg.catalog import MANIFEST, MANIFEST_LIST, METADATA, PREVIOUS_METADATA, delete_files
from pyiceberg.exceptions import NoSuchTableError, ValidationError
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Identifier

from lakecore.errors import InvalidArgumentError
from lakecore.iceberg.errors import translated
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.placement import PlacementRules, drop_with_entries
from lakecore.iceberg.pointer import METADATA_LOCATION_PROPERTY, identifier_of
from lakecore.iceberg.roots import WRITE_PATH_PROPERTIES, Registry
from lakecore.lakehouse import Transaction

# The catalog's logger: a purge's notes (what it left, and why) are the catalog's.
_LOG = logging.getLogger("lakecore.iceberg.catalog")


class PurgeOps(PlacementRules):
    """``purge_table`` (see the module docstring)."""

    def purge_table(self, identifier: str | Identifier) -> None:
        """Drop the table, then delete its data and metadata files.

        Only files this catalog placed for the table: those under the table's location or its
        own write paths (``write.data.path``, ...), inside the warehouse and outside lakecore's
        directories. A metadata file can name any path (its ``metadata-log``, its manifests),
        and pyiceberg's purge deletes whatever it names: a crafted or registered file could have
        taken another table's files, or the lakehouse's own root files, with it. Other paths are
        left and logged. Of those, a file that another live table's current metadata names is
        kept too: the tables whose folders overlap the purged table's, or that name files in
        them (the registry's references), are read (``lakecore.iceberg.roots``).

        Refused: a table registered with ``register_table`` (``EXTERNAL``), whose files were not
        written for it and may be another table's (``drop_table`` forgets it and leaves them);
        and a table that other code (a client of an older lakecore) wrote around the location
        registry (placed at a folder the registry does not know, or changed after this catalog
        checked it), which may name files no registry entry records. A table without
        Iceberg metadata (made through the lakehouse API) is dropped: it has no files. Older
        lakehouse versions that still name the table can no longer be scanned.

        Raises:
            NoSuchTableError: no such table.
            ValidationError: the table is EXTERNAL, or was written around the registry.
        """
        self._refuse_read_only("purge_table")
        ns, name = self._table(identifier)
        with translated(invalid=NoSuchTableError, wording=f"Table does not exist: {ns}.{name}"):
            before = self._latest_view()
            definition = before.load_table(ns, name)
        if definition.table_type == "EXTERNAL":
            raise ValidationError(
                f"table {ns}.{name} was registered (EXTERNAL): its files were not written for it and may belong "
                "to another table, so purge_table does not delete them; drop_table removes it from the lakehouse "
                "and leaves its files"
            )
        if not definition.format_properties.get(METADATA_LOCATION_PROPERTY):
            self.drop_table(identifier_of(ns, name))
            _LOG.info(
                "purge_table %s.%s: it had no Iceberg metadata, so no file to delete", ns, name
            )
            return
        table = self._table_from(identifier_of(ns, name), definition, cached=False)
        if self._written_around_registry(
            ns, name, definition, table.metadata, before.lakehouse_def.properties.get
        ):
            raise ValidationError(
                f"table {ns}.{name} was written by other code (a client of an older lakecore) around the "
                "location registry, which may then not know its folders, the files it names, or other tables "
                "that code made: purge_table deletes nothing; once every client runs this release, "
                "rebuild_location_registry() reads every table once and makes it purgeable, or drop_table "
                "removes it and leaves its files"
            )
        roots = self._purgeable_roots(table.metadata)

        def drop(tx: Transaction) -> None:
            self._ensure_registry(tx)  # a lakehouse from before the rule: find its overlaps
            drop_with_entries(tx, ns, name)

        self._change("purge_table", drop, invalid=NoSuchTableError)
        # The files any other table's current metadata names stay, whoever placed them; only
        # the tables whose roots overlap this one's, or that the registry says name files in
        # them, can name a file under them (lakecore.iceberg.roots), so only those are read.
        view = self._latest_view()
        registry = Registry.of(view.lakehouse_def.properties)
        neighbours: set[tuple[str, str]] = set()
        # Where the roots and each file lead is asked of the file system once each (realpath
        # per name), not again for every file against every root.
        leads_to = self._leads_to()
        root_forms = sorted({form for root in roots for form in self._physical_forms(root)})
        for form in root_forms:
            neighbours.update(self._tables_overlapping(view, registry, form))
            neighbours.update(
                other for other in registry.tables_referencing(form) if view.table_exists(*other)
            )
        protected: set[str] = set()
        for other_ns, other_name in sorted(neighbours):
            protected |= self._files_named_by(
                self._table_from(
                    identifier_of(other_ns, other_name),
                    view.load_table(other_ns, other_name),
                    cached=False,
                )
            )
        io = table.io
        metadata = table.metadata
        manifests = [m for snapshot in metadata.snapshots for m in snapshot.manifests(io)]
        data_files = {
            entry.data_file.file_path
            for manifest in manifests
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
        }
        skipped: list[str] = []
        shared: list[str] = []

        def ours(paths: set[str]) -> set[str]:
            kept = set()
            for path in paths:
                leads = self._may_purge(path, roots, root_forms, leads_to)
                if leads is None:
                    skipped.append(path)
                elif leads in protected:
                    shared.append(path)
                else:
                    kept.add(path)
            return kept

        delete_files(io, ours(data_files), "data")
        delete_files(io, ours({m.manifest_path for m in manifests}), MANIFEST)
        delete_files(io, ours({s.manifest_list for s in metadata.snapshots}), MANIFEST_LIST)
        delete_files(
            io, ours({log.metadata_file for log in metadata.metadata_log}), PREVIOUS_METADATA
        )
        delete_files(io, ours({table.metadata_location}), METADATA)
        if skipped:
            _LOG.warning(
                "purge_table %s.%s left %d file(s) outside the table's own locations %s: %s",
                ns,
                name,
                len(skipped),
                roots,
                ", ".join(sorted(skipped)[:5]) + (" ..." if len(skipped) > 5 else ""),
            )
        if shared:
            _LOG.warning(
                "purge_table %s.%s left %d file(s) that table(s) %s still name: %s",
                ns,
                name,
                len(shared),
                ", ".join(f"{a}.{b}" for a, b in sorted(neighbours)),
                ", ".join(sorted(shared)[:5]) + (" ..." if len(shared) > 5 else ""),
            )

    def _files_named_by(self, table: Table) -> set[str]:
        """Every file a table's current metadata names, normalized."""
        io = table.io
        metadata = table.metadata
        manifests = [m for snapshot in metadata.snapshots for m in snapshot.manifests(io)]
        named = {table.metadata_location}
        named.update(log.metadata_file for log in metadata.metadata_log)
        named.update(s.manifest_list for s in metadata.snapshots)
        named.update(m.manifest_path for m in manifests)
        named.update(
            entry.data_file.file_path
            for manifest in manifests
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
        )
        leads_to = self._leads_to()
        return {leads_to(p) for p in named}

    def _purgeable_roots(self, metadata: TableMetadata) -> list[str]:
        """Where a purge may delete: the table's location and its own write paths (each checked
        as ``_check_metadata`` checks them; one that fails is left out)."""
        locations = (
            metadata.location,
            *(metadata.properties.get(n) for n in WRITE_PATH_PROPERTIES),
        )
        return [
            normalize_location(str(loc))
            for loc in locations
            if loc and self._location_allowed(str(loc))
        ]

    def _may_purge(
        self,
        path: str,
        roots: list[str],
        root_forms: list[str],
        leads_to: Callable[[str], str],
    ) -> str | None:
        """Where ``path`` leads (``leads_to``) when a purge may delete it, else None: it lies
        under one of ``roots`` as written, passes its own check (a '..' segment would lead out
        of a root it textually starts with), and leads under one of ``root_forms`` (a link
        under a root may take it into another table's folder)."""
        try:
            normalized = normalize_location(path)
        except InvalidArgumentError:  # a bare path with '..' or '//': not one this catalog wrote
            return None
        if not (
            any(normalized.startswith(root + "/") for root in roots)
            and self._location_allowed(path)
        ):
            return None
        leads = leads_to(path)
        return leads if any(leads.startswith(form + "/") for form in root_forms) else None


__all__ = ["PurgeOps"]
