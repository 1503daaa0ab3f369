"""An argparse parser whose errors are typed, one-line lakecore errors (exit code 2).

argparse's own ``error`` prints the usage block and a message on two or more lines and calls
``sys.exit(2)`` from deep inside ``parse_args``. The command line and the jobs instead want every
bad input to be one ``LakecoreError`` that the entrypoint prints as one line, like a bad name or
a bad URI. Subparsers inherit the class (argparse makes them with ``type(parent)``).

A mistyped option (``--lakehose``) leaves a required one missing, and argparse reports the
missing one first: the error then names the option it did not know, and the nearest it does.
A value that starts with '-' (``--older-than -5m``) reads as an option, and argparse says only
"expected one argument": the error then names the value and the ``--option=VALUE`` form.

A rule between options (``--fill`` means something only with ``--mode threshold``) is a check
added with ``add_check``: it runs as the command line is read, like a ``type``, so that a job's
parse-only run (spark-submit.sh, before the JVM starts) refuses it too.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from lakecore.errors import InvalidArgumentError


class ArgumentError(InvalidArgumentError):
    """Bad command-line arguments (exit code 2)."""


class OneLineArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arguments_read: list[str] = []
        self._checks: list[Callable[[argparse.Namespace], str | None]] = []

    def add_check(self, check: Callable[[argparse.Namespace], str | None]) -> None:
        """Run ``check`` on the parsed options; a message it returns is the parse error."""
        self._checks.append(check)

    def parse_known_args(  # type: ignore[override]  # typeshed overloads it on the namespace type
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        self._arguments_read = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        for check in self._checks:
            message = check(parsed)
            if message is not None:
                self.error(message)
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required"):
            message = self._unknown_option() or message
        elif message.endswith(": expected one argument"):
            message = self._value_like_an_option(message)
        raise ArgumentError(f"{self.prog}: {message} (see '{self.prog} --help')")

    def _unknown_option(self) -> str | None:
        """'unrecognized option --X (did you mean --Y?)' for the first option given that is
        neither one of this parser's nor an abbreviation argparse would accept; None if none."""
        known = [option for action in self._actions for option in action.option_strings if option.startswith("--")]
        for argument in self._arguments_read:
            if argument == "--":
                break
            name = argument.split("=", 1)[0]
            if not name.startswith("--") or any(option.startswith(name) for option in known):
                continue
            nearest = difflib.get_close_matches(name, known, n=1)
            return f"unrecognized option {name}" + (f" (did you mean {nearest[0]}?)" if nearest else "")
        return None

    def _value_like_an_option(self, message: str) -> str:
        """argparse's 'argument --X: expected one argument', plus the value given after --X when
        it starts with '-' (argparse took it for an option) and how to pass it anyway."""
        options = message.removeprefix("argument ").removesuffix(": expected one argument").split("/")
        for here, argument in enumerate(self._arguments_read[:-1]):
            if argument == "--":
                break
            following = self._arguments_read[here + 1]
            if argument in options and following.startswith("-") and following != "--":
                return (f"{message}, and {following!r} after it reads as an option; "
                        f"write {argument}={following} to give a value that starts with '-'")
        return message
