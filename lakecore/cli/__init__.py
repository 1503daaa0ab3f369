"""The ``lakecore`` command: the top of tier 2, over the job contract, catalog and maintenance.

- ``main``: the parser, assembled from the command modules, and dispatch (errors to exit
  codes);
- ``objects``: ``init``, ``namespace`` and ``table``;
- ``reading``: ``versions``, ``history``, ``describe``, ``get`` and ``tree``;
- ``snapshots``: ``rollback`` and ``export``;
- ``recovery``: ``fsck`` and ``repair``;
- ``settings``: ``settings show|set``;
- ``lookup``: the lookup-file and diff commands;
- ``maintenance``: ``gc``, ``compact-versions`` and ``table-maintenance`` in one process (a
  small lakehouse), over the job contract the Spark jobs read too (``lakecore.contract``: the
  jobs' options, checks and report, the one-line parser, the output-file checks);
- ``shared_options``: the options every command shares and what they name (the lakehouse, its
  storage options, a version);
- ``printing``: how a command prints (a summary, or JSON with ``--json``; names escaped);
- ``progress``: the one-line progress display on a terminal.
"""

from lakecore.cli.main import main

__all__ = ["main"]
