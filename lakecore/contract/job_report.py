"""The report of a maintenance run, on the terminal and on disk.

The Spark jobs (``jobs/``) and the ``lakecore gc`` and ``lakecore compact-versions`` commands
end the same way: a short summary on stdout and, with ``--report PATH``, the same JSON report.
Its layout is ``JobReport.as_dict``; a job's renderer (one function per job) is the only place
that job's keys (its counts, bytes, samples and details) are written.

Rules:
- Samples are capped (``lakecore.maintenance.samples``): a report stays small whatever the
  lakehouse's size, and says its cap (``sample_limit``).
- The summary shows sizes, durations and times in units a person reads; the JSON keeps the
  exact numbers. Names are escaped on the terminal (``lakecore.core.display``).
- A report that cannot be written (the path was checked as the command line was read, but disks
  fill and folders go) is the run's failure, exit 4, and its line says what the run had done,
  so that a commit is never hidden behind a missing report.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakecore.contract.outputs import OutputKind, write_text_atomically
from lakecore.core.display import escape_for_display
from lakecore.errors import ExitCode, InvalidArgumentError
from lakecore.maintenance.delete import DeleteOutcome
from lakecore.maintenance.samples import SAMPLE_LIMIT


@dataclass
class JobReport:
    job: str
    lakehouse: str
    status: str = "ok"
    base_version: int | None = None
    new_version: int | None = None
    dry_run: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    durations_seconds: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    exit_code: int = ExitCode.OK
    error: str | None = None
    # Where Spark's own output went (spark-submit.sh's log file), or None: on the terminal.
    spark_log: str | None = None
    # Counts and bytes the JSON holds for its readers (the same keys in every run) that the
    # terminal's summary leaves out: a dry run's zero deletes ("bytes freed 0 B" was read as
    # what the run would free).
    unprinted: set[str] = field(default_factory=set)

    def sample(self, name: str, paths: Iterator[str] | Sequence[str] | set[str]) -> None:
        items = (
            sorted(paths)[:SAMPLE_LIMIT]
            if not isinstance(paths, Iterator)
            else list(paths)[:SAMPLE_LIMIT]
        )
        self.samples[name] = list(items)

    def record_deletes(self, deleted: DeleteOutcome, noun: str) -> None:
        """A delete stage's outcome: ``{noun}_deleted``, ``{noun}_already_gone`` (deleted by a
        run racing this one since the listing: not counted as this run's), ``freed_bytes`` and
        the ``deleted`` sample."""
        self.counts[f"{noun}_deleted"] = deleted.deleted
        self.counts[f"{noun}_already_gone"] = deleted.already_gone
        self.bytes["freed_bytes"] = deleted.bytes_freed
        self.sample("deleted", deleted.deleted_paths)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "lakehouse": self.lakehouse,
            "status": self.status,
            "base_version": self.base_version,
            "new_version": self.new_version,
            "dry_run": self.dry_run,
            "counts": self.counts,
            "bytes": self.bytes,
            "durations_seconds": self.durations_seconds,
            "samples": self.samples,
            "details": self.details,
            "exit_code": self.exit_code,
            "error": self.error,
            "sample_limit": SAMPLE_LIMIT,
            "spark_log": self.spark_log,
            # The lines the terminal showed, for whoever reads only the file (a scheduler's log).
            "summary": self.summary,
        }


def write_report(report: JobReport, path: str) -> None:
    write_text_atomically(
        path,
        json.dumps(report.as_dict(), indent=2, sort_keys=True, default=str),
        OutputKind.JSON_REPORT,
    )


def write_report_or_fail(report: JobReport, path: str) -> None:
    """``write_report``; a failure there is the run's failure (exit 4), and its line says what
    the run had done (see the module doc). A file no lakecore command wrote that appeared at the
    path while the run went on is left alone (exit 2)."""
    try:
        write_report(report, path)
    except (OSError, InvalidArgumentError) as exc:
        done = (
            f"version {report.new_version} was committed"
            if report.new_version is not None and report.new_version != report.base_version
            else "nothing was committed"
        )
        cause = (exc.strerror or exc) if isinstance(exc, OSError) else exc
        failure = (
            f"the report could not be written to {path} ({cause}); {done}, see the summary above"
        )
        report.error = f"{report.error}; {failure}" if report.error else failure
        if report.exit_code == ExitCode.OK:
            report.exit_code = (
                exc.exit_code if isinstance(exc, InvalidArgumentError) else ExitCode.FAILURE
            )


def _say(text: str) -> None:
    """A line of the summary on stdout, names in it escaped (``lakecore.core.display``)."""
    print(escape_for_display(text))


def print_summary(report: JobReport) -> None:
    """The human summary: sizes, durations and times in units a person reads (the JSON report
    keeps the exact numbers)."""
    from lakecore.core.units import format_bytes, format_seconds

    head = f"lakecore {report.job} [{report.status}{' (dry run)' if report.dry_run else ''}] {report.lakehouse}"
    versions = ""
    if report.base_version is not None:
        versions = f" version {report.base_version}"
        if report.new_version is not None and report.new_version != report.base_version:
            versions += f" -> {report.new_version}"
    _say(head + versions)
    for line in report.summary:
        _say(f"  {line}")
    if report.status == "noop" and report.details.get("noop_reason") and not report.summary:
        _say(f"  nothing to do: {report.details['noop_reason']}; nothing committed")
    counts = {k: v for k, v in report.counts.items() if k not in report.unprinted}
    if counts:
        _say("  " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sorted(counts.items())))
    sizes = {k: v for k, v in report.bytes.items() if k not in report.unprinted}
    if sizes:
        _say(
            "  "
            + ", ".join(
                f"{k.replace('_', ' ')} {format_bytes(v)}" for k, v in sorted(sizes.items())
            )
        )
    total = report.durations_seconds.get("total")
    if total is not None:
        stages = [
            f"{k} {format_seconds(v)}" for k, v in report.durations_seconds.items() if k != "total"
        ]
        _say(f"  took {format_seconds(total)}" + (f" ({', '.join(stages)})" if stages else ""))
    sys.stdout.flush()


__all__ = ["JobReport", "print_summary", "write_report", "write_report_or_fail"]
