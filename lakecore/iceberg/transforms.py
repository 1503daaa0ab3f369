"""Which partition specs and sort orders a table may get: every transform known and applicable.

Rules (Iceberg's spec, "Partition Transforms"):

* A transform is one the spec defines (``identity``, ``bucket[N]``, ``truncate[W]``, ``year``,
  ``month``, ``day``, ``hour``, ``void``); pyiceberg reads any other text as an unknown
  transform, which no engine can evaluate: a table partitioned by ``bogus[3]`` could be
  created but never written.
* ``bucket[N]`` needs N >= 1 and ``truncate[W]`` W >= 1 (bucket 0 divides by zero).
* Each field's source column exists in the table's schema and the transform applies to its
  type (``day`` of a ``long`` column is refused: the spec defines it for dates and timestamps).
* Checked for the specs and sort orders a change adds (a create's, a commit's
  ``add-spec``/``add-sort-order``), not for those a table already had: a table from before the
  rule keeps working.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.exceptions import ValidationError
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import BucketTransform, Transform, TruncateTransform, UnknownTransform


def _why_not(transform: Transform[Any, Any], source_id: int, schema: Schema) -> str | None:
    """Why ``transform`` of column ``source_id`` is refused; None if it is fine."""
    if isinstance(transform, UnknownTransform):
        return (
            "its transform is not one Iceberg defines (identity, bucket[N], truncate[W], year, "
            "month, day, hour, void)"
        )
    if isinstance(transform, BucketTransform) and transform.num_buckets < 1:
        return f"{transform} needs at least 1 bucket"
    if isinstance(transform, TruncateTransform) and transform.width < 1:
        return f"{transform} needs a width of at least 1"
    try:
        field = schema.find_field(source_id)
    except ValueError:
        return f"its source column {source_id} is not in the schema"
    if not transform.can_transform(field.field_type):
        return f"transform {transform} does not apply to column {field.name} of type {field.field_type}"
    return None


def check_new_transforms(metadata: TableMetadata, base: TableMetadata | None) -> None:
    """Refuse a partition spec or sort order that ``metadata`` adds to ``base`` (None: a new
    table) with an unknown or inapplicable transform.

    Raises:
        ValidationError: naming the spec or order, the field and why.
    """
    schemas = {s.schema_id: s for s in metadata.schemas}
    current = schemas.get(metadata.current_schema_id) or metadata.schema()
    known_specs = set() if base is None else {s.spec_id for s in base.partition_specs}
    for spec in metadata.partition_specs:
        if spec.spec_id in known_specs:
            continue
        for field in spec.fields:
            why = _why_not(field.transform, field.source_id, current)
            if why is not None:
                raise ValidationError(f"partition spec {spec.spec_id}, field {field.name!r}: {why}")
    known_orders = set() if base is None else {o.order_id for o in base.sort_orders}
    for order in metadata.sort_orders:
        if order.order_id in known_orders:
            continue
        for sort_field in order.fields:
            why = _why_not(sort_field.transform, sort_field.source_id, current)
            if why is not None:
                raise ValidationError(f"sort order {order.order_id}: {why}")


__all__ = ["check_new_transforms"]
