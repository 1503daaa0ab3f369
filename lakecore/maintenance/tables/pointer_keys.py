"""The ``format_properties`` keys of an Iceberg table's definition that table maintenance reads
(docs/format.md#iceberg-tables): one definition, which the catalog's pointer
(``lakecore.iceberg.pointer``, the rules of what they hold) imports from here.
"""

from __future__ import annotations

from typing import Final

#: format_properties key: full URI of the table's current Iceberg metadata file (pyiceberg's
#: ``METADATA_LOCATION``).
METADATA_LOCATION_PROPERTY: Final = "metadata_location"
#: format_properties key: the metadata location the catalog checked and recorded in the
#: folder registry when it wrote the definition; another value means that other code changed
#: the table since (see ``lakecore.iceberg.catalog``'s docstring, "What is not guaranteed").
CHECKED_PROPERTY: Final = "lakecore.checked-metadata-location"

__all__ = ["CHECKED_PROPERTY", "METADATA_LOCATION_PROPERTY"]
