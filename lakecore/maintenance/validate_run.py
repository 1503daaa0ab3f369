"""A validation's result, and the whole of a validation in one process.

The Spark ``validate`` job (``jobs/validate.py``) and ``validate_in_process`` run the steps of
``lakecore.maintenance.validate`` (plan, subtrees, combine): the job over many versions with the
subtrees on executors, ``validate_in_process`` over one version here. Both return a
``ValidateResult``: every checked version's verdict (``VersionResult``, fsck's) and the
violations as a report lists them (``Violations``: the total, the counts by rule and the first
``VIOLATIONS_LIMIT``, newest version first, then by location, rule and detail).

``validate_in_process`` and ``validate_view`` are test oracles: the tests compare them with
fsck (``lakecore.lakehouse.version_check.check_version``) and with the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from lakecore.core.defs import LakehouseDef
from lakecore.core.node import Node
from lakecore.core.storage import Storage
from lakecore.maintenance.tree_check import Violation, add_counts
from lakecore.maintenance.validate import (
    VersionResult,
    combine_version,
    fresh_store,
    merge_work,
    plan_version,
    run_subtree_work,
)

if TYPE_CHECKING:
    from lakecore.core.view import LakehouseView

# Violations a report lists; beyond, only their counts (and a full list, where asked for).
VIOLATIONS_LIMIT: Final = 200


@dataclass
class Violations:
    """Every checked version's violations, as the report gives them: the total, the counts by
    rule, and the first ``VIOLATIONS_LIMIT`` in order (version, newest first; then location,
    rule and detail)."""

    total: int
    by_rule: dict[str, int]
    listed: list[tuple[int, Violation]]


def violations_of(
    checked: Sequence[VersionResult],
    more: Iterable[tuple[int, Violation]] = (),
    *,
    limit: int = VIOLATIONS_LIMIT,
) -> Violations:
    """The violations of ``checked`` (in the order checked): their counts by rule, and the
    first ``limit`` of those they list and ``more`` (a sample of violations found elsewhere:
    the Spark job's subtree tasks keep theirs)."""
    by_rule: dict[str, int] = {}
    for result in checked:
        add_counts(by_rule, result.violations_by_rule())
    position = {result.version: i for i, result in enumerate(checked)}
    found = [(r.version, v) for r in checked for v in r.violations] + list(more)
    found.sort(key=lambda item: (position[item[0]], item[1].location, item[1].rule, item[1].detail))
    return Violations(sum(by_rule.values()), by_rule, found[:limit])


@dataclass
class ValidateResult:
    """What a validation saw, filled step by step: ``violations`` is None until the versions'
    verdicts are combined, so that a run stopped part-way reports what it had found."""

    latest: int
    deep: bool
    expectations_enabled: bool
    versions: list[VersionResult] = field(default_factory=list)  # in the order checked
    subtree_tasks: int | None = None
    cut_fallbacks: dict[int, str] = field(
        default_factory=dict
    )  # version -> why, when the cut fell back
    skipped: list[str] = field(default_factory=list)  # versions that expired while it ran
    violations: Violations | None = None
    violations_dataset: str | None = None  # the Spark job's --full-list
    expectations: dict[str, Any] | None = None  # the Spark job's great-expectations suite

    @property
    def bad_versions(self) -> list[int]:
        return [r.version for r in self.versions if not r.ok]


def validate_in_process(
    storage: Storage,
    version: int,
    root: Node,
    root_location: str,
    root_size: int | None,
    lakehouse_def: LakehouseDef,
    *,
    external_roots: Sequence[str] = (),
    target: int = 4,
    deep: bool = False,
) -> ValidateResult:
    """Plan, run every subtree and combine one version, in this process: a test oracle of the
    job, which the tests also compare with fsck."""
    store = fresh_store(storage, lakehouse_def.order, external_roots)
    plan = plan_version(
        storage, version, root, root_location, root_size, lakehouse_def, store, target, deep=deep
    )
    works = merge_work([plan], deep=deep, rows=False)
    checked = combine_version(
        plan, [run_subtree_work(storage, work, store) for work in works], deep=deep
    )
    result = ValidateResult(version, deep, expectations_enabled=False, versions=[checked])
    result.subtree_tasks = len(works)
    if plan.cut_fallback:
        result.cut_fallbacks[version] = plan.cut_fallback
    result.violations = violations_of(result.versions)
    return result


def validate_view(view: LakehouseView, *, target: int = 4, deep: bool = False) -> VersionResult:
    """The verdict of ``validate_in_process`` for an opened version (compare:
    ``lakecore.lakehouse.version_check.check_version``). A test oracle."""
    return validate_in_process(
        view.storage,
        view.version,
        view.root,
        view.root_info.path,
        view.root_info.size,
        view.lakehouse_def,
        external_roots=view.store.external_roots,
        target=target,
        deep=deep,
    ).versions[0]


__all__ = [
    "VIOLATIONS_LIMIT",
    "ValidateResult",
    "Violations",
    "validate_in_process",
    "validate_view",
    "violations_of",
]
