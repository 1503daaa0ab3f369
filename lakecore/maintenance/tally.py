"""The anti-joins of maintenance, judged one path at a time.

``tally`` (gc) judges each path from its listing entries and its reach records (a cogroup in
Spark, dicts in one process): listed and deletable but not reached is an orphan; reached but not
listed is missing; listed under a foreign name is left alone. Orphans are then selected by age
(``select_by_age``): only those older than the grace period may go.

``difference`` (version expiry) judges each path from what the expired versions and what the
retained versions and exports reach: a deletable file only the expired side reaches is a
candidate to delete."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lakecore.maintenance.listing import (
    ERROR_KEY,
    FOREIGN,
    ListedFile,
    error_reason,
    is_deletable,
    is_error,
    kind_of,
)
from lakecore.maintenance.samples import SAMPLE_LIMIT

# ---------------------------------------------------------------------------------------------
# The anti-join: listed files against reachable paths, one key at a time


@dataclass
class Tally:
    """What the anti-join saw; one per partition, merged on the driver (``merge``)."""

    listed_by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [files, bytes]
    reachable: int = 0
    orphans: list[ListedFile] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # a sample
    missing: int = 0
    missing_sample: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a sample
    error_count: int = 0
    sample_limit: int = SAMPLE_LIMIT

    @property
    def files_listed(self) -> int:
        return sum(n for n, _ in self.listed_by_kind.values())

    @property
    def bytes_listed(self) -> int:
        return sum(b for _, b in self.listed_by_kind.values())

    def count(self, kind: str) -> int:
        return self.listed_by_kind.get(kind, [0, 0])[0]

    def merge(self, other: Tally) -> Tally:
        for kind, (n, b) in other.listed_by_kind.items():
            entry = self.listed_by_kind.setdefault(kind, [0, 0])
            entry[0] += n
            entry[1] += b
        self.reachable += other.reachable
        self.orphans.extend(other.orphans)
        self.foreign = sorted(self.foreign + other.foreign)[: self.sample_limit]
        self.missing += other.missing
        self.missing_sample = sorted(self.missing_sample + other.missing_sample)[
            : self.sample_limit
        ]
        self.errors = (self.errors + other.errors)[: self.sample_limit]
        self.error_count += other.error_count
        return self


def tally(
    groups: Iterable[tuple[str, tuple[Iterable[ListedFile], Iterable[int]]]],
    sample_limit: int = SAMPLE_LIMIT,
) -> Tally:
    """Judge each path from its listing entries and its reach records (a cogroup's output):
    a listed deletable file that nothing reaches is an orphan; a reached path that is not
    listed is *missing* (a dangling definition: reported, never a reason to delete);
    listing and walk errors are collected so that the caller refuses to delete."""
    out = Tally(sample_limit=sample_limit)
    for path, (listed_iter, reached_iter) in groups:
        listed = list(listed_iter)
        reached = any(True for _ in reached_iter)
        if is_error(path) or any(f.kind == ERROR_KEY for f in listed):
            out.error_count += 1
            if len(out.errors) < sample_limit:
                out.errors.append(error_reason(path) if is_error(path) else path)
            continue
        if reached:
            out.reachable += 1
            if not listed:
                out.missing += 1
                if len(out.missing_sample) < sample_limit:
                    out.missing_sample.append(path)
        for f in listed[:1]:  # a path is listed once; tolerate a double listing
            entry = out.listed_by_kind.setdefault(f.kind, [0, 0])
            entry[0] += 1
            entry[1] += f.size
            if f.kind == FOREIGN and len(out.foreign) < sample_limit:
                out.foreign.append(f.path)
            elif not reached and is_deletable(f.kind):
                out.orphans.append(f)
    out.foreign.sort()
    out.missing_sample.sort()
    return out


def tally_in_memory(
    listing: Iterable[ListedFile],
    reach: Iterable[tuple[str, int]],
    sample_limit: int = SAMPLE_LIMIT,
) -> Tally:
    """``tally`` over in-memory collections (what a cogroup does, with dicts)."""
    listed: dict[str, list[ListedFile]] = {}
    for f in listing:
        listed.setdefault(f.path, []).append(f)
    reached: dict[str, list[int]] = {}
    for path, size in reach:
        reached.setdefault(path, []).append(size)
    keys = sorted(listed.keys() | reached.keys())
    return tally(((k, (listed.get(k, []), reached.get(k, []))) for k in keys), sample_limit)


# ---------------------------------------------------------------------------------------------
# Version expiry's difference: reach(expired) minus reach(retained + exports)


@dataclass
class ExpiryTally:
    """One partition's judgement (merged on the driver)."""

    candidates: list[tuple[str, int]] = field(default_factory=list)  # (path, size or UNKNOWN_SIZE)
    expired_reach: int = 0
    shared: int = 0  # reached by both sides: kept
    retained_errors: list[str] = field(default_factory=list)
    expired_errors: list[str] = field(default_factory=list)
    sample_limit: int = SAMPLE_LIMIT

    def merge(self, other: ExpiryTally) -> ExpiryTally:
        self.candidates.extend(other.candidates)
        self.expired_reach += other.expired_reach
        self.shared += other.shared
        self.retained_errors = (self.retained_errors + other.retained_errors)[: self.sample_limit]
        self.expired_errors = (self.expired_errors + other.expired_errors)[: self.sample_limit]
        return self


def difference(
    groups: Iterable[tuple[str, tuple[Iterable[int], Iterable[int]]]],
    sample_limit: int = SAMPLE_LIMIT,
) -> ExpiryTally:
    """Judge each path from its expired-side and retained-side reach records (a cogroup's
    output, expired first): a deletable file that only the expired side reaches is a
    candidate. Root files are left to step 2, and everything not named by lakecore's rules is
    never a candidate."""
    out = ExpiryTally(sample_limit=sample_limit)
    for path, (gone_iter, kept_iter) in groups:
        gone = list(gone_iter)
        kept = any(True for _ in kept_iter)
        if is_error(path):
            bucket = out.retained_errors if kept else out.expired_errors
            if len(bucket) < sample_limit:
                bucket.append(error_reason(path))
            continue
        if not gone:
            continue
        out.expired_reach += 1
        if kept:
            out.shared += 1
        elif is_deletable(kind_of(path)):
            out.candidates.append((path, max(gone)))
    return out


def difference_in_memory(
    gone: Iterable[tuple[str, int]],
    kept: Iterable[tuple[str, int]],
    sample_limit: int = SAMPLE_LIMIT,
) -> ExpiryTally:
    by_path: dict[str, tuple[list[int], list[int]]] = {}
    for path, size in gone:
        by_path.setdefault(path, ([], []))[0].append(size)
    for path, size in kept:
        by_path.setdefault(path, ([], []))[1].append(size)
    return difference(sorted(by_path.items()), sample_limit)


# ---------------------------------------------------------------------------------------------
# Selecting and deleting


@dataclass
class AgeSelection:
    old: list[ListedFile] = field(default_factory=list)
    too_young: list[ListedFile] = field(default_factory=list)


def select_by_age(orphans: Iterable[ListedFile], cutoff_millis: int) -> AgeSelection:
    """Orphans modified strictly before ``cutoff_millis`` are old enough to delete."""
    out = AgeSelection()
    for f in sorted(orphans, key=lambda f: f.path):
        (out.old if f.mtime_millis < cutoff_millis else out.too_young).append(f)
    return out
