"""An argparse parser whose errors are typed, one-line lakecore errors (exit code 2).

argparse's own ``error`` prints the usage block and a message on two or more lines and calls
``sys.exit(2)`` from deep inside ``parse_args``. The command line and the jobs instead want every
bad input to be one ``LakecoreError`` that the entrypoint prints as one line, like a bad name or
a bad URI. Subparsers inherit the class (argparse makes them with ``type(parent)``).
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from lakecore.errors import InvalidArgumentError


class ArgumentError(InvalidArgumentError):
    """Bad command-line arguments (exit code 2)."""


class OneLineArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ArgumentError(f"{self.prog}: {message} (see '{self.prog} --help')")
