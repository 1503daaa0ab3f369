"""Prometheus metrics of the REST catalog server, served at ``GET /metrics``.

Rules:

* Each ``app()`` has its own registry (several servers in one process, as in the tests, do not
  share counters), so the process-wide default registry is never touched.
* Label values are bounded: ``operation`` is the spec's ``operationId`` (``loadTable``, ...) or
  one of ``config``, ``oauthTokens``, ``healthz``, ``metrics``, ``unmatched``; never a path, a
  namespace or a table name, so a catalog of a million tables does not make a million series.
* Label values are bounded: ``method`` is one of ``KNOWN_METHODS`` or ``other`` (a client
  may send any token as its method: 5,000 made-up methods grew ``/metrics`` from 39 KB to
  1 MB), ``status`` is a three-digit code the server answered with.
* ``lakecore_rest_requests_total{operation,method,status}``: every answered request.
* ``lakecore_rest_request_seconds{operation}``: a latency histogram, buckets from 1 ms to 10 s.
* ``lakecore_rest_commit_conflicts_total{operation}``: commits answered 409 (a lost race or a
  failed requirement; the client retries).
* ``lakecore_rest_requests_in_flight``: requests being handled now.
* ``lakecore_rest_token_file_reloads_total{outcome}``: reads of the token file after the first
  (on SIGHUP or a change), ``outcome`` ``reloaded`` or ``failed`` (the old principals kept);
  only on a server with a token file (``watch_token_file``).
* For a catalog with a group committer (``watch_commits``, ``lakecore.lakehouse.group_commit``):
  ``lakecore_rest_commit_batches_total`` (lakehouse versions the committer tried to make),
  ``lakecore_rest_commit_units_total{outcome}`` (changes ``committed``, ``refused`` on their
  own checks, ``unknown``), ``lakecore_rest_commit_linger_misses_total`` (batches that waited
  for the last batch's writers in vain), ``lakecore_rest_commit_restagings_total`` (batches
  staged again because another writer changed one of their tables),
  ``lakecore_rest_root_conflicts_total``
  (root writes that lost to another writer and were rebased: the conflicts the server resolved
  itself, which no client sees), and ``lakecore_rest_commit_batch_size`` (a summary of the
  last 4,096 batches' sizes: quantiles 0.5 and 0.99).
* For a server that vends credentials (``watch_vendor``): ``lakecore_rest_credentials_vended_total``
  (credentials handed out) and ``lakecore_rest_sts_calls_total`` (AssumeRole calls; the rest came
  from the kept ones).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, SummaryMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.samples import Sample

KNOWN_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE: Final = CONTENT_TYPE_LATEST


class ReloadCounts(Protocol):
    """What counts the reads of a token file (``lakecore.rest.tokenfile.TokenFile``)."""

    reloads: int
    reload_failures: int


class TokenFileReloads:
    """A collector that reads the counts of a token file when ``/metrics`` is scraped."""

    def __init__(self, counts: ReloadCounts) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Any]:
        family = CounterMetricFamily(
            "lakecore_rest_token_file_reloads",
            "Reads of the token file after the first, by outcome (failed: old principals kept)",
            labels=("outcome",),
        )
        family.add_metric(("reloaded",), self.counts.reloads)
        family.add_metric(("failed",), self.counts.reload_failures)
        yield family


class CommitCounts(Protocol):
    """What a group committer counts (``lakecore.lakehouse.group_commit.CommitStats``)."""

    batches: int
    units_committed: int
    units_refused: int
    restagings: int
    root_conflicts: int
    unknown: int
    linger_misses: int
    batch_sizes: Any


class GroupCommits:
    """A collector that reads a group committer's counts when ``/metrics`` is scraped."""

    def __init__(self, counts: CommitCounts) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Any]:
        c = self.counts
        yield CounterMetricFamily(
            "lakecore_rest_commit_batches", "Lakehouse versions the committer made", value=c.batches
        )
        units = CounterMetricFamily(
            "lakecore_rest_commit_units",
            "Changes the committer answered, by outcome",
            labels=("outcome",),
        )
        units.add_metric(("committed",), c.units_committed)
        units.add_metric(("refused",), c.units_refused)
        units.add_metric(("unknown",), c.unknown)
        yield units
        yield CounterMetricFamily(
            "lakecore_rest_commit_restagings",
            "Batches staged again: another writer changed one of their tables",
            value=c.restagings,
        )
        yield CounterMetricFamily(
            "lakecore_rest_commit_linger_misses",
            "Batches that waited for the last batch's writers in vain (no waiting for a while)",
            value=c.linger_misses,
        )
        yield CounterMetricFamily(
            "lakecore_rest_root_conflicts",
            "Root writes that lost to another writer and were rebased by the server",
            value=c.root_conflicts,
        )
        sizes = sorted(c.batch_sizes)
        summary = SummaryMetricFamily(
            "lakecore_rest_commit_batch_size",
            "Changes per lakehouse version, over the last 4,096 batches",
            count_value=len(sizes),
            sum_value=sum(sizes),
        )
        for quantile in (0.5, 0.99) if sizes else ():
            value = sizes[min(len(sizes) - 1, int(quantile * len(sizes)))]
            summary.samples.append(
                Sample("lakecore_rest_commit_batch_size", {"quantile": str(quantile)}, value)
            )
        yield summary


class VendCounts(Protocol):
    """What a credential vendor counts (``lakecore.rest.credentials.CredentialVendor``)."""

    vended: int
    sts_calls: int


class Vending:
    """A collector that reads a credential vendor's counts when ``/metrics`` is scraped."""

    def __init__(self, counts: VendCounts) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Any]:
        yield CounterMetricFamily(
            "lakecore_rest_credentials_vended",
            "Vended credentials handed to clients",
            value=self.counts.vended,
        )
        yield CounterMetricFamily(
            "lakecore_rest_sts_calls", "STS AssumeRole calls made", value=self.counts.sts_calls
        )


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "lakecore_rest_requests",
            "Requests answered, by operation, method and status",
            ("operation", "method", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "lakecore_rest_request_seconds",
            "Time to answer a request, by operation",
            ("operation",),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.commit_conflicts = Counter(
            "lakecore_rest_commit_conflicts",
            "Commits answered 409 (lost race or failed requirement), by operation",
            ("operation",),
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "lakecore_rest_requests_in_flight",
            "Requests being handled now",
            registry=self.registry,
        )

    def observe(
        self, operation: str, method: str, status: int, seconds: float, commit: bool
    ) -> None:
        method = method if method in KNOWN_METHODS else "other"
        self.requests.labels(operation, method, str(status)).inc()
        self.latency.labels(operation).observe(seconds)
        if commit and status == 409:
            self.commit_conflicts.labels(operation).inc()

    def watch_token_file(self, counts: ReloadCounts) -> None:
        self.registry.register(TokenFileReloads(counts))

    def watch_commits(self, counts: CommitCounts) -> None:
        self.registry.register(GroupCommits(counts))

    def watch_vendor(self, counts: VendCounts) -> None:
        self.registry.register(Vending(counts))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


__all__ = [
    "CONTENT_TYPE",
    "KNOWN_METHODS",
    "CommitCounts",
    "GroupCommits",
    "ReloadCounts",
    "ServerMetrics",
    "TokenFileReloads",
    "VendCounts",
    "Vending",
]
