"""What a lakehouse definition records of exports (docs/format.md#snapshot-exports): the pins,
their bookkeeping, an exported copy's marker, and the property keys lakecore keeps for itself.

Rules:

- An export is an entry of ``exported_snapshots``: its name and the root file it pins. Its mode
  and target are bookkeeping properties, ``lakecore.exports.<name>.mode`` and ``.target``
  (exports made before lakecore recorded them have neither). A name is taken once.
- A rollback pins its target the same way while it reads it, under a name starting with
  ``ROLLBACK_PIN_PREFIX``, which no export may have.
- An exported copy's definition carries ``lakecore.export.mode`` (and its name, version and
  source): such a lakehouse is a read-only snapshot (``read_only_reason``). ``source_root`` is
  the one root a minimal or partial copy may read through to (``external_roots_of``).
- ``lakecore.export.*``, ``lakecore.exports.*`` and ``lakecore.iceberg.*`` (the Iceberg
  catalog's location registry) are lakecore's own: setting one by hand
  (``check_user_properties``) is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lakecore.core.defs import LakehouseDef
from lakecore.core.locations import is_root_node_file_name, version_from_root_node_file_name
from lakecore.errors import AlreadyExistsError, InvalidArgumentError

# In an exported copy's definition (``lakecore.lakehouse.export``). ``source_root`` is the one root a
# minimal or partial copy may read through to; ``source`` (every mode) only says where the copy
# came from. ``mode`` marks a definition as an exported copy's: such a lakehouse is read-only.
EXPORT_SOURCE_PROPERTY = "lakecore.export.source_root"
EXPORT_MODE_PROPERTY = "lakecore.export.mode"
EXPORT_NAME_PROPERTY = "lakecore.export.name"
EXPORT_VERSION_PROPERTY = "lakecore.export.version"
EXPORT_ORIGIN_PROPERTY = "lakecore.export.source"
# In a source's definition: what an export recorded besides its root (mode, target), per export
# name: ``lakecore.exports.<name>.mode`` and ``lakecore.exports.<name>.target``.
EXPORTS_PROPERTY_PREFIX = "lakecore.exports."
# The Iceberg catalog's location registry (``lakecore.maintenance.tables.table_folders``).
ICEBERG_PROPERTY_PREFIX = "lakecore.iceberg."
# Property keys lakecore writes itself; `init --property` and `settings set` refuse them.
# exported_snapshots entries a rollback records while it reads its target (Lakehouse.rollback):
# a pin like an export's, which version compaction honours, taken back by the rollback's own
# commit (docs/format.md#rollback). No export may be named so.
ROLLBACK_PIN_PREFIX = "rollback:"
RESERVED_PROPERTY_PREFIXES = ("lakecore.export.", EXPORTS_PROPERTY_PREFIX, ICEBERG_PROPERTY_PREFIX)


@dataclass(frozen=True)
class ExportInfo:
    """One entry of ``exported_snapshots``: the export's name, the root it pins (as recorded)
    and that root's version (None if the location is not a root of this lakehouse), and the
    mode and target when the export recorded them (exports made before lakecore recorded them
    show None)."""

    name: str
    root: str
    version: int | None
    mode: str | None
    target: str | None


def export_infos(lakehouse_def: LakehouseDef) -> list[ExportInfo]:
    """The exports a definition records, sorted by name."""
    out = []
    for name, location in sorted(lakehouse_def.exported_snapshots.items()):
        file_name = location.rsplit("/", 1)[-1]
        version = (
            version_from_root_node_file_name(file_name)
            if "://" not in location and is_root_node_file_name(file_name)
            else None
        )
        props = lakehouse_def.properties
        out.append(
            ExportInfo(
                name,
                location,
                version,
                props.get(f"{EXPORTS_PROPERTY_PREFIX}{name}.mode"),
                props.get(f"{EXPORTS_PROPERTY_PREFIX}{name}.target"),
            )
        )
    return out


def check_export_name_free(current: LakehouseDef, name: str) -> None:
    if name in current.exported_snapshots:
        raise AlreadyExistsError(
            f"an export named {name!r} already exists (of {current.exported_snapshots[name]}); choose another "
            "name, or drop it first with `lakecore export drop`"
        )


def with_export_recorded(
    current: LakehouseDef, name: str, root_file: str, mode: str, target: str | None
) -> LakehouseDef:
    """``current`` with export ``name`` pinning ``root_file``; AlreadyExistsError if the name is
    taken (by an export recorded meanwhile, say). The export path of the library and the job."""
    check_export_name_free(current, name)
    properties = dict(current.properties)
    properties[f"{EXPORTS_PROPERTY_PREFIX}{name}.mode"] = mode
    if target is not None:
        properties[f"{EXPORTS_PROPERTY_PREFIX}{name}.target"] = target
    return current.with_changes(
        exported_snapshots={**current.exported_snapshots, name: root_file}, properties=properties
    )


def with_rollback_pin(current: LakehouseDef, name: str, root_file: str) -> LakehouseDef:
    """``current`` with rollback pin ``name`` (``ROLLBACK_PIN_PREFIX``...) on ``root_file``."""
    check_export_name_free(current, name)
    return current.with_changes(exported_snapshots={**current.exported_snapshots, name: root_file})


def without_export(current: LakehouseDef, name: str) -> LakehouseDef:
    """``current`` without export (or rollback pin) ``name`` and its bookkeeping properties."""
    snapshots = {k: v for k, v in current.exported_snapshots.items() if k != name}
    bookkeeping = (
        f"{EXPORTS_PROPERTY_PREFIX}{name}.mode",
        f"{EXPORTS_PROPERTY_PREFIX}{name}.target",
    )
    properties = {k: v for k, v in current.properties.items() if k not in bookkeeping}
    return current.with_changes(exported_snapshots=snapshots, properties=properties)


def read_only_reason(lakehouse_def: LakehouseDef) -> str | None:
    """Why a lakehouse with this definition must not change (it is an exported copy), or None."""
    props = lakehouse_def.properties
    mode = props.get(EXPORT_MODE_PROPERTY)
    if mode is None:
        return None
    source = props.get(EXPORT_ORIGIN_PROPERTY) or props.get(EXPORT_SOURCE_PROPERTY)
    name = props.get(EXPORT_NAME_PROPERTY, "?")
    version = props.get(EXPORT_VERSION_PROPERTY, "?")
    of = f"version {version} of {source}" if source else f"version {version} of another lakehouse"
    return f"a read-only {mode} export {name!r} of {of}"


def external_roots_of(lakehouse_def: LakehouseDef) -> tuple[str, ...]:
    """The source root an exported copy may point into (its ``source_root``); none otherwise."""
    source = lakehouse_def.properties.get(EXPORT_SOURCE_PROPERTY)
    return (source,) if source else ()


def check_user_properties(keys: Iterable[str]) -> None:
    """Refuse property keys that lakecore itself writes (export bookkeeping): setting one by
    hand would turn a lakehouse into a read-only export copy, or fake an export's record."""
    for key in keys:
        if not isinstance(key, str):
            raise InvalidArgumentError(f"lakehouse property keys must be strings; got {key!r}")
        if key.startswith(RESERVED_PROPERTY_PREFIXES):
            raise InvalidArgumentError(
                f"lakehouse property {key!r} is reserved (lakecore writes {' and '.join(p + '*' for p in RESERVED_PROPERTY_PREFIXES)} "
                "itself); use another key"
            )


__all__ = [
    "EXPORTS_PROPERTY_PREFIX",
    "EXPORT_MODE_PROPERTY",
    "EXPORT_NAME_PROPERTY",
    "EXPORT_ORIGIN_PROPERTY",
    "EXPORT_SOURCE_PROPERTY",
    "EXPORT_VERSION_PROPERTY",
    "ICEBERG_PROPERTY_PREFIX",
    "RESERVED_PROPERTY_PREFIXES",
    "ROLLBACK_PIN_PREFIX",
    "ExportInfo",
    "check_export_name_free",
    "check_user_properties",
    "export_infos",
    "external_roots_of",
    "read_only_reason",
    "with_export_recorded",
    "with_rollback_pin",
    "without_export",
]
