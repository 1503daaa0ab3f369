"""The catalog API and the operations on a whole lakehouse (tier 2).

- ``lakehouse``: ``Lakehouse`` (open, create, versions, settings, exports, rollback);
- ``transaction``: ``Transaction`` (isolation levels, the commit of staged changes);
- ``export``: snapshot export, its three modes;
- ``repair``: rebuild the hint, roll forward past damage, drop damaged versions;
- ``history``: what each version did, derived from its parent;
- ``describe``, ``treeinfo``, ``report/``: one lakehouse at a glance, its tree, their pages;
- ``fsck``: the invariant checker of one version;
- ``demo``: the sample lakehouse of ``make demo``.

``lakecore.maintenance`` never imports this package: it reads versions through
``lakecore.core.view``.
"""

from lakecore.core.export_records import ExportInfo
from lakecore.core.view import (
    LakehouseView,
    VersionInfo,
    list_versions,
    open_version,
    read_lakehouse_def,
)
from lakecore.lakehouse.lakehouse import Lakehouse, SettingsChange
from lakecore.lakehouse.transaction import Transaction

__all__ = [
    "ExportInfo",
    "Lakehouse",
    "LakehouseView",
    "SettingsChange",
    "Transaction",
    "VersionInfo",
    "list_versions",
    "open_version",
    "read_lakehouse_def",
]
