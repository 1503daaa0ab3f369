from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOOLEAN: _ClassVar[DataType]
    INT2: _ClassVar[DataType]
    INT4: _ClassVar[DataType]
    INT8: _ClassVar[DataType]
    DECIMAL: _ClassVar[DataType]
    FLOAT4: _ClassVar[DataType]
    FLOAT8: _ClassVar[DataType]
    CHAR: _ClassVar[DataType]
    VARCHAR: _ClassVar[DataType]
    DATE: _ClassVar[DataType]
    TIME: _ClassVar[DataType]
    TIMETZ: _ClassVar[DataType]
    TIMESTAMP: _ClassVar[DataType]
    TIMESTAMPTZ: _ClassVar[DataType]
    FIXED: _ClassVar[DataType]
    BINARY: _ClassVar[DataType]
    STRUCT: _ClassVar[DataType]
    MAP: _ClassVar[DataType]
    LIST: _ClassVar[DataType]
BOOLEAN: DataType
INT2: DataType
INT4: DataType
INT8: DataType
DECIMAL: DataType
FLOAT4: DataType
FLOAT8: DataType
CHAR: DataType
VARCHAR: DataType
DATE: DataType
TIME: DataType
TIMETZ: DataType
TIMESTAMP: DataType
TIMESTAMPTZ: DataType
FIXED: DataType
BINARY: DataType
STRUCT: DataType
MAP: DataType
LIST: DataType

class LakehouseDef(_message.Message):
    __slots__ = ("name", "major_version", "order", "namespace_name_max_size_bytes", "table_name_max_size_bytes", "file_name_max_size_bytes", "node_file_max_size_bytes", "properties", "maximum_version_age_millis", "minimum_versions_to_keep", "maximum_version_age_millis_overrides", "exported_snapshots")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MaximumVersionAgeMillisOverridesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class ExportedSnapshotsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAJOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NODE_FILE_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_VERSION_AGE_MILLIS_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_VERSIONS_TO_KEEP_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_VERSION_AGE_MILLIS_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    major_version: int
    order: int
    namespace_name_max_size_bytes: int
    table_name_max_size_bytes: int
    file_name_max_size_bytes: int
    node_file_max_size_bytes: int
    properties: _containers.ScalarMap[str, str]
    maximum_version_age_millis: int
    minimum_versions_to_keep: int
    maximum_version_age_millis_overrides: _containers.ScalarMap[int, int]
    exported_snapshots: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., major_version: _Optional[int] = ..., order: _Optional[int] = ..., namespace_name_max_size_bytes: _Optional[int] = ..., table_name_max_size_bytes: _Optional[int] = ..., file_name_max_size_bytes: _Optional[int] = ..., node_file_max_size_bytes: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., maximum_version_age_millis: _Optional[int] = ..., minimum_versions_to_keep: _Optional[int] = ..., maximum_version_age_millis_overrides: _Optional[_Mapping[int, int]] = ..., exported_snapshots: _Optional[_Mapping[str, str]] = ...) -> None: ...

class NamespaceDef(_message.Message):
    __slots__ = ("name", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    properties: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TableDef(_message.Message):
    __slots__ = ("name", "schema", "distribution_keys", "primary_key", "sort_keys", "unique_columns", "table_type", "table_format", "format_properties", "properties")
    class FormatPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTION_KEYS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    SORT_KEYS_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    TABLE_TYPE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema: Schema
    distribution_keys: _containers.RepeatedScalarFieldContainer[int]
    primary_key: _containers.RepeatedScalarFieldContainer[int]
    sort_keys: _containers.RepeatedScalarFieldContainer[int]
    unique_columns: _containers.RepeatedScalarFieldContainer[int]
    table_type: str
    table_format: str
    format_properties: _containers.ScalarMap[str, str]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., distribution_keys: _Optional[_Iterable[int]] = ..., primary_key: _Optional[_Iterable[int]] = ..., sort_keys: _Optional[_Iterable[int]] = ..., unique_columns: _Optional[_Iterable[int]] = ..., table_type: _Optional[str] = ..., table_format: _Optional[str] = ..., format_properties: _Optional[_Mapping[str, str]] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ViewDef(_message.Message):
    __slots__ = ("name", "schema", "view_format", "format_properties", "properties")
    class FormatPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    VIEW_FORMAT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema: Schema
    view_format: str
    format_properties: _containers.ScalarMap[str, str]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., view_format: _Optional[str] = ..., format_properties: _Optional[_Mapping[str, str]] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Schema(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    def __init__(self, columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("id", "name", "type", "nullable", "properties", "struct_fields", "map_key", "map_value", "list_element")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NULLABLE_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    STRUCT_FIELDS_FIELD_NUMBER: _ClassVar[int]
    MAP_KEY_FIELD_NUMBER: _ClassVar[int]
    MAP_VALUE_FIELD_NUMBER: _ClassVar[int]
    LIST_ELEMENT_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    type: DataType
    nullable: bool
    properties: _containers.ScalarMap[str, str]
    struct_fields: _containers.RepeatedCompositeFieldContainer[Column]
    map_key: Column
    map_value: Column
    list_element: Column
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., type: _Optional[_Union[DataType, str]] = ..., nullable: _Optional[bool] = ..., properties: _Optional[_Mapping[str, str]] = ..., struct_fields: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., map_key: _Optional[_Union[Column, _Mapping]] = ..., map_value: _Optional[_Union[Column, _Mapping]] = ..., list_element: _Optional[_Union[Column, _Mapping]] = ...) -> None: ...
