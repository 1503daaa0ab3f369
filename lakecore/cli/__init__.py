"""The ``lakecore`` command: the top of tier 2, over the job contract, catalog and maintenance.

- ``main`` (here): the command's entry point;
- ``dispatch``: the parser, assembled from the command modules, and dispatch (errors to exit
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

The command's entry point is ``main`` here, and this module imports nothing heavy: the
commands' modules take about a third of a second to import, and a Ctrl-C in that time must be
one line and an exit code, as a Ctrl-C later is (``dispatch`` handles those), not a traceback.
(The entry point is not in a module named ``main``: importing a submodule binds its name on
the package, and ``lakecore.cli.main`` would then be that module, not this function.)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lakecore.errors import ExitCode

# What a Ctrl-C while the command starts leaves behind: nothing, no command has run yet.
INTERRUPTED_WHILE_STARTING = "lakecore: interrupted while starting; nothing was done"


def main(argv: Sequence[str] | None = None) -> int:
    """The ``lakecore`` command (``dispatch.main``), imported here so that an interruption
    during the import is one line and ``ExitCode.INTERRUPTED``."""
    try:
        from lakecore.cli.dispatch import main as run
    except KeyboardInterrupt:
        print(INTERRUPTED_WHILE_STARTING, file=sys.stderr)
        return ExitCode.INTERRUPTED
    return run(argv)


__all__ = ["INTERRUPTED_WHILE_STARTING", "main"]
