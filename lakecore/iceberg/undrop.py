"""``undrop_table``: an Iceberg table dropped (with or without purge) back as it was in the last
retained lakehouse version that held it.

Rules (``lakecore.lakehouse.undrop`` finds the version; this module adds what an Iceberg
table needs):

* **Its folders are still its own.** The table comes back with the folders it had; the location rule
  is checked again in the undrop's commit (``PlacementRules.check_folders``): a table created since
  in one of its folders makes the undrop refused (``ValidationError``), naming that table.
* **Its registry entries come back**: its folders (the rule's check writes them) and the
  reference folders that version's definition recorded for it.
* **Its files must still be there.** Its metadata file is read first: a table whose files were
  purged already is refused (``NoSuchTableError``, "already purged").
* **A purge mark is taken back in the same commit.** A mark table maintenance has begun to act
  on (``purging``) refuses the undrop: its files are being deleted. Both change the lakehouse
  definition, so an undrop and the job's ``purging`` commit never both land.
* A table without Iceberg metadata comes back as the lakehouse API made it
  (``lakecore.lakehouse.undrop.undrop_plain``); the catalog's call then answers None.
"""

from __future__ import annotations

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError

from lakecore.errors import (
    AlreadyExistsError,
    CorruptFileError,
    InvalidArgumentError,
    NotFoundError,
)
from lakecore.iceberg.commit_path import CommitPath
from lakecore.iceberg.errors import translated
from lakecore.iceberg.metadata_files import MetadataFiles
from lakecore.iceberg.placement import PlacementRules
from lakecore.iceberg.pointer import METADATA_LOCATION_PROPERTY, read_metadata
from lakecore.lakehouse import Transaction
from lakecore.lakehouse.undrop import find_dropped, undrop_plain
from lakecore.maintenance.tables.marks import PURGING, marks_for, parse_mark
from lakecore.maintenance.tables.table_folders import refs_key


def undrop_table(
    path: CommitPath,
    files: MetadataFiles,
    placement: PlacementRules,
    ns: str,
    name: str,
    version: int | None = None,
) -> bool:
    """Bring dropped table ``ns.name`` back as the newest retained lakehouse version (or
    ``version``) held it; whether it came back as an Iceberg table (False: a table without
    Iceberg metadata, brought back as the lakehouse API made it).

    Raises:
        TableAlreadyExistsError: a table of that name exists now.
        NoSuchTableError: no retained version holds it (or ``version`` is not retained or
            does not hold it), or its files were purged already.
        NoSuchNamespaceError: its namespace does not exist now.
        ValidationError: a table has taken one of its folders since, or table
            maintenance is deleting its files.
    """
    # A Lakehouse object of its own: only the group committer's thread moves the catalog's.
    with translated(wording=f"Table does not exist: {ns}.{name}"):
        found = find_dropped(path.scratch_lakehouse(), ns, name, version)
    definition = found.definition
    metadata_location = definition.format_properties.get(METADATA_LOCATION_PROPERTY)
    if definition.table_format != "ICEBERG" or not metadata_location:
        # Committed as another writer would (the group committer rebases on it).
        with translated(not_found=NoSuchNamespaceError):
            undrop_plain(path.scratch_lakehouse(), found)
        return False
    io = files.file_io(str(metadata_location))
    try:
        metadata = read_metadata(io, f"{ns}.{name}", str(metadata_location))
    except CorruptFileError as exc:
        raise NoSuchTableError(
            f"table {ns}.{name} cannot be undropped: its files were purged already (its metadata "
            f"file {metadata_location} cannot be read: {exc.rule})"
        ) from exc
    references = found.lakehouse_def.properties.get(refs_key(ns, name))
    table_uuid = str(metadata.table_uuid)

    def undrop(tx: Transaction) -> None:
        if tx.table_exists(ns, name):
            raise AlreadyExistsError(
                f"table {ns}.{name} exists: the name is taken now; drop or rename that table first"
            )
        if not tx.namespace_exists(ns):
            raise NotFoundError(f"namespace {ns!r} does not exist: create it first, then undrop")
        properties = dict(tx.lakehouse_def.properties)
        properties.update({k: v for k, v in tx.definition_changes.items() if v is not None})
        for mark in marks_for(properties, ns, name):
            if mark.table_uuid != table_uuid:
                continue
            current = parse_mark(mark.key, str(tx.definition_property(mark.key)))
            if current.state == PURGING:
                raise InvalidArgumentError(
                    f"table {ns}.{name} cannot be undropped: table maintenance is deleting its files "
                    "(its purge mark is 'purging')"
                )
            tx.set_definition_properties({mark.key: None})
        tx.create_table(
            ns,
            name,
            columns=list(definition.schema.columns),
            table_format="ICEBERG",
            table_type=definition.table_type or "MANAGED",
            properties=dict(definition.properties),
            format_properties=dict(definition.format_properties),
            distribution_keys=definition.distribution_keys,
            primary_key=definition.primary_key,
            sort_keys=definition.sort_keys,
            unique_columns=definition.unique_columns,
            checked_by_catalog=True,
        )
        placement.check_folders(tx, ns, name, metadata)
        if references is not None:
            tx.set_definition_properties({refs_key(ns, name): references})

    path.change(
        "undrop_table",
        undrop,
        not_found=NoSuchNamespaceError,
        invalid=ValidationError,
    )
    return True


__all__ = ["undrop_table"]
