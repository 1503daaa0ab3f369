"""An argparse parser whose errors are typed, one-line lakecore errors (exit code 2).

argparse's own ``error`` prints the usage block and a message on two or more lines and calls
``sys.exit(2)`` from deep inside ``parse_args``. The command line and the jobs instead want every
bad input to be one ``LakecoreError`` that the entrypoint prints as one line, like a bad name or
a bad URI. Subparsers inherit the class (argparse makes them with ``type(parent)``).

A mistyped option (``--lakehose``) leaves a required one missing, and argparse reports the
missing one first: the error then names the option it did not know, and the nearest it does.
A value that starts with '-' (``--older-than -5m``) reads as an option, and argparse says only
"expected one argument": the error then names the value and the ``--option=VALUE`` form. A
mistyped command (``lakecore fsk``) is named with the nearest one.

Options are never abbreviated (argparse's ``allow_abbrev`` is off): ``--i`` was taken for
``--i-understand-expiry-risk`` and ``--y`` for ``--yes``, so a stray keystroke overrode a
safety refusal. An abbreviation is an unknown option, named with the option it would have been.

The types that check one value as it is read (an output file, a whole number, a time, a
duration) are ``lakecore.contract.option_types``.

A rule between options (``--fill`` means something only with ``--mode threshold``) is a check
added with ``add_check``: it runs as the command line is read, like a ``type``, so that a job's
parse-only run (spark-submit.sh, before the JVM starts) refuses it too.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

from lakecore.errors import InvalidArgumentError

# Other tools' words for a command of ours, suggested before what spelling alone finds near
# ("create" was met with "did you mean tree?"); used only where the target is a choice.
COMMAND_SYNONYMS: Final = {
    "create": "init",
    "new": "init",
    "check": "fsck",
    "verify": "fsck",
    "log": "versions",
    "status": "describe",
    "info": "describe",
}


class ArgumentError(InvalidArgumentError):
    """Bad command-line arguments (exit code 2)."""


class OneLineArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # see the module doc
        super().__init__(*args, **kwargs)
        self._arguments_read: list[str] = []
        self._checks: list[Callable[[argparse.Namespace], str | None]] = []
        self._has_commands = False
        self._used = False  # this parser read arguments in this run (see ``_command_used``)

    def add_subparsers(self, **kwargs: Any) -> Any:
        self._has_commands = True  # its commands' options are theirs: see ``error``
        return super().add_subparsers(**kwargs)

    def add_check(self, check: Callable[[argparse.Namespace], str | None]) -> None:
        """Run ``check`` on the parsed options; a message it returns is the parse error."""
        self._checks.append(check)

    def parse_known_args(  # type: ignore[override]  # typeshed overloads it on the namespace type
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        self._arguments_read = list(sys.argv[1:] if args is None else args)
        self._used = True
        parsed, extras = super().parse_known_args(args, namespace)
        for check in self._checks:
            message = check(parsed)
            if message is not None:
                self.error(message)
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        prog = self.prog
        if message.startswith("unrecognized arguments") and self._has_commands:
            # The command's own parser left the extras to this one, which knows none of the
            # command's options: the command's parser names the unknown one and its nearest.
            command = self._command_used()
            unknown = command._unknown_option() if command is not self else None
            if unknown is not None:
                raise ArgumentError(f"{unknown} (see '{command.prog} --help')")
            # Else the unknown option came before the command's name ('--jsn versions'): it is
            # one of the words this parser read before the command's own.
            ahead = len(self._arguments_read) - len(command._arguments_read)
            unknown = self._unknown_option(self._arguments_read[:ahead])
            if unknown is not None:
                raise ArgumentError(f"{unknown} (see '{prog} --help')")
        if message.startswith("the following arguments are required") or (
            message.startswith("unrecognized arguments") and not self._has_commands
        ):
            # Either way the first unknown option is the likely cause: name it and its nearest.
            # (Extras left by a command's own parser reach its parent, which knows none of the
            # command's options to name instead.)
            unknown = self._unknown_option()
            if unknown is not None:
                message = unknown
            elif message.startswith("the following arguments are required"):
                # Which words go where: 'table show sales.orders' left 'table' missing, and the
                # usage line shows the namespace and the table are two words.
                usage = " ".join(self.format_usage().split()).removeprefix("usage: ")
                message = f"{message} (usage: {usage})"
        elif message.endswith(": expected one argument"):
            message = self._value_like_an_option(message)
        elif ": invalid choice: " in message:
            message = self._nearest_choice(message)
        # No "PROG:" in front: the entrypoint's line names the command already ("lakecore gc:"),
        # and the hint names the exact invocation.
        raise ArgumentError(f"{message} (see '{prog} --help')")

    def _command_used(self) -> OneLineArgumentParser:
        """The deepest command parser that read this run's arguments ('lakecore namespace
        create' for ``lakecore namespace create x --prop``), or this parser."""
        for action in self._actions:
            if isinstance(action.choices, dict):
                for parser in action.choices.values():
                    if isinstance(parser, OneLineArgumentParser) and parser._used:
                        return parser._command_used()
        return self

    def _nearest_choice(self, message: str) -> str:
        """argparse's 'argument X: invalid choice: ...' as 'invalid choice 'fsk' (did you mean
        fsck?); choose from ...', the nearest choice named as an unknown job or option is."""
        argument, rest = message.split(": invalid choice: ", 1)
        given = rest.split(" (choose from", 1)[0].strip("'\"")
        offered = rest.split(" (choose from", 1)[-1]
        for action in self._actions:
            choices = [str(choice) for choice in action.choices or ()]
            if choices and all(repr(choice) in offered or choice in offered for choice in choices):
                synonym = COMMAND_SYNONYMS.get(given)
                nearest = (
                    [synonym]
                    if synonym in choices
                    else difflib.get_close_matches(given, choices, n=1)
                )
                hint = f" (did you mean {nearest[0]}?)" if nearest else ""
                # An option is named ('argument --mode'); a command's own name is the invocation.
                named = f"{argument}: " if action.option_strings else ""
                return f"{named}invalid choice {given!r}{hint}; choose from {', '.join(choices)}"
        return message

    def _unknown_option(self, arguments: Sequence[str] | None = None) -> str | None:
        """'unrecognized option --X (did you mean --Y?)' for the first option given that is not
        one of this parser's (an abbreviation included: --Y is then the option it begins); None
        if none."""
        known = [
            option
            for action in self._actions
            for option in action.option_strings
            if option.startswith("--")
        ]
        for argument in self._arguments_read if arguments is None else arguments:
            if argument == "--":
                break
            name = argument.split("=", 1)[0]
            if not name.startswith("--") or name in known:
                continue
            begun = sorted(option for option in known if option.startswith(name))
            if begun:
                return (
                    f"unrecognized option {name} (did you mean {' or '.join(begun[:3])}? "
                    "options are written in full)"
                )
            nearest = difflib.get_close_matches(name, known, n=1)
            return f"unrecognized option {name}" + (
                f" (did you mean {nearest[0]}?)" if nearest else ""
            )
        return None

    def _value_like_an_option(self, message: str) -> str:
        """argparse's 'argument --X: expected one argument', plus the value given after --X when
        it starts with '-' (argparse took it for an option) and how to pass it anyway."""
        options = (
            message.removeprefix("argument ").removesuffix(": expected one argument").split("/")
        )
        for here, argument in enumerate(self._arguments_read[:-1]):
            if argument == "--":
                break
            following = self._arguments_read[here + 1]
            if argument in options and following.startswith("-") and following != "--":
                return (
                    f"{message}, and {following!r} after it reads as an option; "
                    f"write {argument}={following} to give a value that starts with '-'"
                )
        return message


__all__ = ["COMMAND_SYNONYMS", "ArgumentError", "OneLineArgumentParser"]
