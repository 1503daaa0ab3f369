"""Single-process checks of whole versions: the invariant checker plus catalog rules.

``check_version`` runs the tree checker (FORMAT.md sections 3 and 4) over one version and, with
``deep``, the catalog rules: every key parses under the lakehouse's limits, every definition file
exists, decodes and carries the name its key says, and every table's namespace exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakecore import keys as K
from lakecore.defs import decode_namespace_def, decode_table_def
from lakecore.errors import LakecoreError
from lakecore.maintenance.check import CheckReport, TreeChecker, Violation
from lakecore.tree.store import NodeStore

if TYPE_CHECKING:
    from lakecore.lakehouse import LakehouseView


@dataclass
class VersionCheck:
    version: int
    report: CheckReport
    catalog_violations: list[Violation] = field(default_factory=list)

    @property
    def violations(self) -> list[Violation]:
        return self.report.violations + self.catalog_violations

    @property
    def ok(self) -> bool:
        return not self.violations


def check_version(view: LakehouseView, *, deep: bool = False) -> VersionCheck:
    # A check reads from storage, not from the process-wide node cache: a file deleted since it
    # was cached must show up as missing.
    store = NodeStore(view.storage, view.lakehouse_def.order, cache=None, external_roots=view.store.external_roots)
    checker = TreeChecker(store, view.shape, check_values=True)
    report = checker.check_root(view.root, view.root_info.path, view.root_info.size)
    result = VersionCheck(view.version, report)
    if deep and report.ok:
        result.catalog_violations = check_catalog(view)
    return result


def check_catalog(view: LakehouseView) -> list[Violation]:
    out: list[Violation] = []
    namespaces: set[str] = set()
    tables: list[tuple[str, str, str]] = []
    for key, location in view.items():
        try:
            parsed = K.parse_key(key, view.lakehouse_def)
        except LakecoreError as exc:
            out.append(Violation(key, "key-shape", str(exc)))
            continue
        try:
            data = view.read_location(location)
        except LakecoreError as exc:
            out.append(Violation(location, "definition-missing", f"key {key.rstrip()!r}: {exc}"))
            continue
        try:
            if parsed.table is None:
                name = decode_namespace_def(data, location).name
                namespaces.add(parsed.namespace)
                expected = parsed.namespace
            else:
                name = decode_table_def(data, location).name
                tables.append((parsed.namespace, parsed.table, location))
                expected = parsed.table
        except LakecoreError as exc:
            out.append(Violation(location, "definition-corrupt", str(exc)))
            continue
        if name != expected:
            out.append(Violation(location, "definition-name", f"key names {expected!r} but the definition says {name!r}"))
    for ns, table, location in tables:
        if ns not in namespaces:
            out.append(Violation(location, "table-namespace", f"table {ns}.{table} has no namespace {ns!r}"))
    return out
