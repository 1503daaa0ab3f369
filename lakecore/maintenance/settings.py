"""Maintenance settings per environment: ``conf/maintenance-<env>.json``, typed and checked.

Every key has a type and a default here, and every key is in the shipped ``conf`` files, so
that a setting is looked up in one place. An unknown key is refused with the known ones named:
a mistyped key would otherwise be silently ignored and its default used.

    description               free text
    subtree_tasks_per_core    subtree tasks to aim for per executor core
    commit_timeout_seconds    the longest a commit may take; gc's grace period must exceed it
                              and one hour (lakecore's own writers give up at 600 s,
                              DEFAULT_COMMIT_TIMEOUT_SECONDS)
    gc_older_than             gc's default grace period (a duration: 90s, 15m, 6h, 3d)
    gc_delete_batch_size      files per delete request (S3 takes at most S3_MAX_DELETE_BATCH)
    gc_list_threads_per_task  concurrent listing requests per listing task
    gc_flat_listing_max_files a lakehouse with at most this many files is listed in one flat
                              paged listing (a request per 1,000 files on S3) instead of one
                              request per hash directory (4,096)
    flush_fill                threshold flush: flush buffers fuller than this (0..1)
    flush_max_redos           flush redoes its work this often after a conflicting commit
    validate_ge_enabled       run the great-expectations suite in validate
    table_max_snapshot_age    table-maintenance: the snapshot age Iceberg tables expire at when
                              they set no ``history.expire.max-snapshot-age-ms`` (Iceberg's
                              default: 5d)
    table_min_snapshots_to_keep
                              table-maintenance: the ancestors of a branch kept whatever their
                              age when a table sets no ``history.expire.min-snapshots-to-keep``
                              (Iceberg's default: 1)
    table_max_ref_age         table-maintenance: how old a branch's or tag's snapshot may be
                              before the ref itself is removed, when a table sets no
                              ``history.expire.max-ref-age-ms`` (``never``, Iceberg's default)
    table_orphan_older_than   table-maintenance's default grace period for orphan files (a
                              duration; under one hour needs ``--i-understand-grace-risk``)
    table_commit_batch_tables table-maintenance: tables whose expirations one lakehouse commit
                              holds
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from lakecore.core.commit import DEFAULT_COMMIT_TIMEOUT_SECONDS
from lakecore.core.storage import S3_MAX_DELETE_BATCH
from lakecore.core.units import parse_duration_millis
from lakecore.errors import InvalidArgumentError

# ``table_max_ref_age``: refs never expire by age (Iceberg's default, Long.MAX_VALUE).
NEVER: Final = "never"

# The project's configuration folder: the checkout's conf/, or $LAKECORE_CONF_DIR (spark-submit.sh
# points it at the copy it ships to a cluster).
CONF_DIR = Path(os.environ.get("LAKECORE_CONF_DIR", Path(__file__).resolve().parents[2] / "conf"))


@dataclass(frozen=True)
class MaintenanceSettings:
    description: str = ""
    subtree_tasks_per_core: int = 4
    commit_timeout_seconds: float = DEFAULT_COMMIT_TIMEOUT_SECONDS
    gc_older_than: str = "3d"
    gc_delete_batch_size: int = S3_MAX_DELETE_BATCH
    gc_list_threads_per_task: int = 8
    gc_flat_listing_max_files: int = 10000
    flush_fill: float = 0.5
    flush_max_redos: int = 3
    validate_ge_enabled: bool = True
    table_max_snapshot_age: str = "5d"
    table_min_snapshots_to_keep: int = 1
    table_max_ref_age: str = NEVER
    table_orphan_older_than: str = "3d"
    table_commit_batch_tables: int = 500

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "settings") -> MaintenanceSettings:
        """Settings from a mapping; raises InvalidArgumentError naming the bad key."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(f"{source} must be a JSON object of settings")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise InvalidArgumentError(
                f"{source}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                f"(known: {', '.join(sorted(fields))})"
            )
        values: dict[str, Any] = {}
        for name, value in data.items():
            values[name] = _typed(name, value, type(getattr(cls(), name)), source)
        settings = cls(**values)
        settings._check(source)
        return settings

    @classmethod
    def load(cls, path: Path) -> MaintenanceSettings:
        """Settings from a JSON file; raises InvalidArgumentError (missing, bad JSON, bad key)."""
        if not path.exists():
            raise InvalidArgumentError(f"no maintenance settings at {path}")
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidArgumentError(f"{path} is not valid JSON: {exc}") from None
        return cls.from_mapping(data, str(path))

    def _check(self, source: str) -> None:
        problems = []
        if self.subtree_tasks_per_core < 1:
            problems.append("subtree_tasks_per_core must be at least 1")
        if self.commit_timeout_seconds < 0:
            problems.append("commit_timeout_seconds must not be negative")
        if not 1 <= self.gc_delete_batch_size <= S3_MAX_DELETE_BATCH:
            problems.append(
                f"gc_delete_batch_size must be 1..{S3_MAX_DELETE_BATCH} (S3 deletes at most "
                f"{S3_MAX_DELETE_BATCH:,} keys a request)"
            )
        if self.gc_list_threads_per_task < 1:
            problems.append("gc_list_threads_per_task must be at least 1")
        if self.gc_flat_listing_max_files < 0:
            problems.append("gc_flat_listing_max_files must not be negative (0 always fans out)")
        if not 0.0 <= self.flush_fill <= 1.0:
            problems.append("flush_fill must be between 0 and 1")
        if self.flush_max_redos < 0:
            problems.append("flush_max_redos must not be negative")
        for name in ("gc_older_than", "table_max_snapshot_age", "table_orphan_older_than"):
            try:
                parse_duration_millis(getattr(self, name))
            except InvalidArgumentError as exc:
                problems.append(f"{name}: {exc}")
        if self.table_max_ref_age != NEVER:
            try:
                parse_duration_millis(self.table_max_ref_age)
            except InvalidArgumentError as exc:
                problems.append(f"table_max_ref_age: {exc} (or {NEVER!r})")
        if self.table_min_snapshots_to_keep < 1:
            problems.append("table_min_snapshots_to_keep must be at least 1 (as Iceberg's)")
        if self.table_commit_batch_tables < 1:
            problems.append("table_commit_batch_tables must be at least 1")
        if problems:
            raise InvalidArgumentError(f"{source}: {'; '.join(problems)}")


# Every default in one place: the signatures and help texts that name a default read it here.
DEFAULT_SETTINGS: Final = MaintenanceSettings()


def load_settings(env: str) -> MaintenanceSettings:
    """The settings of environment ``env``: ``CONF_DIR/maintenance-<env>.json``."""
    path = CONF_DIR / f"maintenance-{env}.json"
    if not path.exists():
        raise InvalidArgumentError(
            f"no maintenance settings for environment {env!r} (expected {path})"
        )
    return MaintenanceSettings.load(path)


def _typed(name: str, value: Any, kind: type, source: str) -> Any:
    """``value`` as ``kind`` (ints are accepted where floats are wanted), else an error."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise InvalidArgumentError(f"{source}: setting {name} must be a {kind.__name__}, not {value!r}")


__all__ = ["CONF_DIR", "DEFAULT_SETTINGS", "NEVER", "MaintenanceSettings", "load_settings"]
