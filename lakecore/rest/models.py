"""Request bodies of the REST catalog, as the OpenAPI spec defines them.

Rules:

* The fields, their JSON names and which are required are the spec's (``CreateTableRequest``
  needs ``name`` and ``schema``; ``location``, ``partition-spec``, ``write-order``,
  ``stage-create`` and ``properties`` are optional, and so on). pyiceberg's own client models
  (``pyiceberg.catalog.rest``) are stricter than the spec in places (its ``CreateTableRequest``
  requires ``location``, its ``RegisterTableRequest`` requires ``overwrite``), so a body from a
  Java client would fail them: these models say what a server must accept, and reuse
  pyiceberg's types for every part (``Schema``, ``PartitionSpec``, ``SortOrder``,
  ``TableIdentifier``, ``TableRequirement``, ``TableUpdate``, ``ViewVersion``); a view's
  requirements and updates, which pyiceberg has no models for, are
  ``lakecore.iceberg.views``'s.
* Unknown update actions and requirement types fail validation (the spec requires a 400 for
  them); unknown top-level fields are ignored, as pyiceberg's models ignore them.
* Responses use pyiceberg's models where they exist (``TableResponse``, ``ConfigResponse``,
  ``CommitTableResponse``, ...); ``lakecore.rest.routes`` builds them.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableIdentifier
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.types import transform_dict_value_to_str
from pyiceberg.view.metadata import ViewVersion

from lakecore.iceberg.views import ViewRequirement, ViewUpdate


class CreateNamespaceBody(IcebergBaseModel):
    namespace: list[str]
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return {} if value is None else value


class UpdateNamespacePropertiesBody(IcebergBaseModel):
    removals: list[str] = Field(default_factory=list)
    updates: dict[str, str] = Field(default_factory=dict)

    @field_validator("removals", mode="before")
    @classmethod
    def _no_removals(cls, value: object) -> object:
        return [] if value is None else value

    @field_validator("updates", mode="before")
    @classmethod
    def _no_updates(cls, value: object) -> object:
        return {} if value is None else value


class CreateTableBody(IcebergBaseModel):
    name: str
    table_schema: Schema = Field(alias="schema")
    location: str | None = None
    partition_spec: PartitionSpec | None = Field(alias="partition-spec", default=None)
    write_order: SortOrder | None = Field(alias="write-order", default=None)
    stage_create: bool = Field(alias="stage-create", default=False)
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _properties_as_text(cls, value: object) -> object:
        if value is None:
            return {}
        if isinstance(value, dict):
            return transform_dict_value_to_str(value)
        return value


class RegisterTableBody(IcebergBaseModel):
    name: str
    metadata_location: str = Field(alias="metadata-location")
    overwrite: bool = False


class RenameTableBody(IcebergBaseModel):
    source: TableIdentifier
    destination: TableIdentifier


class CommitTableBody(IcebergBaseModel):
    """``CommitTableRequest``: ``identifier`` is optional on the table route and required in a
    transaction (``CommitTransactionBody`` checks that)."""

    identifier: TableIdentifier | None = None
    requirements: tuple[TableRequirement, ...]
    updates: tuple[TableUpdate, ...]


class CommitTransactionBody(IcebergBaseModel):
    table_changes: list[CommitTableBody] = Field(alias="table-changes")

    @field_validator("table_changes")
    @classmethod
    def _every_change_names_its_table(cls, changes: list[CommitTableBody]) -> list[CommitTableBody]:
        for index, change in enumerate(changes):
            if change.identifier is None:
                raise ValueError(f"table-changes[{index}] has no identifier")
        return changes


def _properties_as_text(value: object) -> object:
    if value is None:
        return {}
    if isinstance(value, dict):
        return transform_dict_value_to_str(value)
    return value


class CreateViewBody(IcebergBaseModel):
    """``CreateViewRequest``: ``name``, ``schema`` and ``view-version`` are required."""

    name: str
    view_schema: Schema = Field(alias="schema")
    view_version: ViewVersion = Field(alias="view-version")
    location: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _properties_as_text(cls, value: object) -> object:
        return _properties_as_text(value)


class CommitViewBody(IcebergBaseModel):
    """``CommitViewRequest`` (``replaceView``): ``identifier`` is optional."""

    identifier: TableIdentifier | None = None
    requirements: tuple[ViewRequirement, ...] = ()
    updates: tuple[ViewUpdate, ...]


class RegisterViewBody(IcebergBaseModel):
    name: str
    metadata_location: str = Field(alias="metadata-location")


class ReportMetricsBody(IcebergBaseModel):
    """Only ``report-type`` is required; the report itself is accepted and not kept."""

    report_type: str = Field(alias="report-type")


__all__ = [
    "CommitTableBody",
    "CommitTransactionBody",
    "CommitViewBody",
    "CreateNamespaceBody",
    "CreateTableBody",
    "CreateViewBody",
    "RegisterTableBody",
    "RegisterViewBody",
    "RenameTableBody",
    "ReportMetricsBody",
    "UpdateNamespacePropertiesBody",
]
