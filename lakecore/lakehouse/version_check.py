"""Single-process checks of whole versions: the invariant checker plus catalog rules.

``check_version`` runs the tree checker (docs/format.md#node-files and #the-tree) over one version
and, with
``deep``, the catalog rules: every key parses under the lakehouse's limits, every definition file
exists, decodes and carries the name its key says, and every table's namespace exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakecore.core.locations import root_node_file_name
from lakecore.core.tree.store import NodeStore
from lakecore.maintenance.tree_check import (
    UNREADABLE_ROOT,
    CheckReport,
    TreeChecker,
    VersionCheck,
    Violation,
)

if TYPE_CHECKING:
    from lakecore.core.view import LakehouseView


def check_version(view: LakehouseView, *, deep: bool = False) -> VersionCheck:
    # A check reads from storage, not from the process-wide node cache: a file deleted since it
    # was cached must show up as missing.
    store = NodeStore(
        view.storage, view.lakehouse_def.order, cache=None, external_roots=view.store.external_roots
    )
    checker = TreeChecker(store, view.shape, check_values=True)
    report = checker.check_root(view.root, view.root_info.path, view.root_info.size)
    result = VersionCheck(view.version, report)
    if deep and report.ok:
        result.catalog_violations = check_catalog(view)
    return result


def unreadable_version(version: int, error: str) -> VersionCheck:
    """The check result of a version whose root file (or definition) cannot be read."""
    report = CheckReport()
    report.violations.append(Violation(root_node_file_name(version), UNREADABLE_ROOT, error))
    return VersionCheck(version, report)


def check_catalog(view: LakehouseView) -> list[Violation]:
    """The catalog rules over a version's whole resolved map (the same per-key checks the
    validate job runs on executors)."""
    from lakecore.maintenance.catalog_check import catalog_violations

    return catalog_violations(view.items(), view.lakehouse_def, view.read_location)
