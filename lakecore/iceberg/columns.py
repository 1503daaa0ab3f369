"""The Iceberg schema mirrored into a lakecore table definition's columns.

The Iceberg metadata file is the source of truth for an Iceberg table's schema; the mirror only
lets lakecore's own tools (``lakecore table show``, the validate job, engines that read the
lakecore catalog but not Iceberg) see the columns without reading Iceberg metadata.

Rules:

* A column's id is the Iceberg field id (both are 32-bit and unique within a schema), its name
  and nullability are the field's (``nullable`` = not ``required``).
* Each Iceberg type maps to the nearest lakecore ``DataType``; the exact Iceberg type string is
  kept in the column property ``iceberg.type`` (``decimal(10, 2)``, ``fixed[16]``,
  ``timestamp_ns``, ``uuid``, ...), so nothing is lost where the lakecore enum is coarser.
* A type lakecore has no name for (``unknown``, ``geometry``, a type added by a later Iceberg
  version) maps to ``BINARY``; its ``iceberg.type`` property says what it really is.
"""

from __future__ import annotations

from typing import Final

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from lakecore.core.defs import pb

ICEBERG_TYPE_PROPERTY: Final = "iceberg.type"

_PRIMITIVES: Final[tuple[tuple[type[IcebergType], str], ...]] = (
    (BooleanType, "BOOLEAN"),
    (IntegerType, "INT4"),
    (LongType, "INT8"),
    (FloatType, "FLOAT4"),
    (DoubleType, "FLOAT8"),
    (DecimalType, "DECIMAL"),
    (DateType, "DATE"),
    (TimeType, "TIME"),
    (TimestampType, "TIMESTAMP"),
    (TimestampNanoType, "TIMESTAMP"),
    (TimestamptzType, "TIMESTAMPTZ"),
    (TimestamptzNanoType, "TIMESTAMPTZ"),
    (StringType, "VARCHAR"),
    (UUIDType, "FIXED"),
    (FixedType, "FIXED"),
    (BinaryType, "BINARY"),
)


def _data_type(field_type: IcebergType) -> str:
    if isinstance(field_type, StructType):
        return "STRUCT"
    if isinstance(field_type, ListType):
        return "LIST"
    if isinstance(field_type, MapType):
        return "MAP"
    for iceberg_type, name in _PRIMITIVES:
        if isinstance(field_type, iceberg_type):
            return name
    return "BINARY"


def _column(column_id: int, name: str, field_type: IcebergType, required: bool) -> pb.Column:
    column = pb.Column(id=column_id, name=name, type=_data_type(field_type), nullable=not required)
    if isinstance(field_type, StructType):
        column.struct_fields.extend(column_of(child) for child in field_type.fields)
    elif isinstance(field_type, ListType):
        column.list_element.CopyFrom(column_of(field_type.element_field))
    elif isinstance(field_type, MapType):
        column.map_key.CopyFrom(column_of(field_type.key_field))
        column.map_value.CopyFrom(column_of(field_type.value_field))
    else:
        column.properties[ICEBERG_TYPE_PROPERTY] = str(field_type)
    return column


def column_of(field: NestedField) -> pb.Column:
    """The lakecore column of one Iceberg field (nested types recursively)."""
    return _column(field.field_id, field.name, field.field_type, field.required)


def columns_of(schema: Schema) -> list[pb.Column]:
    """The lakecore columns of an Iceberg schema's top-level fields, in schema order."""
    return [column_of(field) for field in schema.fields]


__all__ = ["ICEBERG_TYPE_PROPERTY", "column_of", "columns_of"]
