"""The ``lakecore`` command: the top of tier 2, over the catalog and maintenance.

- ``main``: the parser, assembled from the command modules, and dispatch (errors to exit
  codes);
- ``objects``: ``init``, ``namespace`` and ``table``;
- ``reading``: ``versions``, ``history``, ``describe``, ``get`` and ``tree``;
- ``snapshots``: ``rollback`` and ``export``;
- ``recovery``: ``fsck`` and ``repair``;
- ``settings``: ``settings show|set``;
- ``lookup``: the lookup-file and diff commands;
- ``maintenance``: ``gc`` and ``compact-versions`` in one process (a small lakehouse), with
  ``gc`` and ``compact_versions``: their options, checks and report, which the Spark jobs share;
- ``job_report``: a maintenance run's report (JSON and summary), the jobs' and these commands';
- ``args``: what every command shares (the lakehouse it names, how it prints);
- ``argparsing``: an argparse parser whose errors are one-line lakecore errors (the jobs use it
  too);
- ``outputs``: files a command writes (reports, pages) and the rule that keeps them out of the
  lakehouse;
- ``progress``: the one-line progress display on a terminal.
"""

from lakecore.cli.main import main

__all__ = ["main"]
