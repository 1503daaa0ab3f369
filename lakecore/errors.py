"""The one error hierarchy of lakecore.

Every error a user can see is a ``LakecoreError``. Each subclass names what was wrong and,
where there is one, what to do about it, so that a command line or a job can print
``str(error)`` as a single actionable line. ``exit_code`` is the process exit code that the CLI
and the Spark jobs use for the error (see the README's table of exit codes).
"""

from __future__ import annotations


class LakecoreError(Exception):
    """Root of every error lakecore raises on purpose."""

    exit_code: int = 4

    def one_line(self) -> str:
        """The message folded onto a single line, prefixed by the error's kind."""
        text = " ".join(str(self).split())
        return f"{type(self).__name__}: {text}"


class InvalidArgumentError(LakecoreError):
    """An option or argument is malformed or unsafe."""

    exit_code = 2


class UnsafeOptionError(InvalidArgumentError):
    """An option would put data at risk (for example a GC grace period shorter than a commit)."""


class InvalidNameError(InvalidArgumentError):
    """An object name breaks the key-encoding rules (bytes 0x00-0x20, 0x7F, or too long)."""


class InvalidLocationError(InvalidArgumentError):
    """A URI or stored path is not qualified, or escapes the lakehouse root."""


class InvalidLakehouseDefError(InvalidArgumentError):
    """A lakehouse definition breaks a rule of the format (for example the node-size rule)."""


class UnsupportedFormatVersionError(LakecoreError):
    """A file names a format major version this reader does not understand."""

    exit_code = 2


class CorruptFileError(LakecoreError):
    """A file exists but its bytes do not follow the format."""

    def __init__(self, location: str, rule: str) -> None:
        super().__init__(f"{location}: {rule}")
        self.location = location
        self.rule = rule


class CorruptNodeFileError(CorruptFileError):
    """A node file breaks a rule of FORMAT.md section 3."""


class CorruptDefinitionError(CorruptFileError):
    """An object definition (.binpb) cannot be decoded."""


class CorruptLookupFileError(CorruptFileError):
    """A sorted lookup file breaks LOOKUP-FORMAT.md (bad checksum, footer, magic, ...)."""


class TreeStructureError(LakecoreError):
    """The tree's shape is impossible: a cycle, a tree deeper than its order allows, ...

    Readers stop at the first such node instead of following the pointer."""

    def __init__(self, location: str, rule: str) -> None:
        super().__init__(f"{location}: {rule}")
        self.location = location
        self.rule = rule


class NotFoundError(LakecoreError):
    """A lakehouse, version, namespace, table or file does not exist."""


class VersionExpiredError(NotFoundError):
    """A version that time travel asked for has been expired by version compaction."""


class AlreadyExistsError(LakecoreError):
    """An object or file that must be new already exists."""

    exit_code = 2


class NamespaceNotEmptyError(LakecoreError):
    """A namespace that still holds tables cannot be dropped."""


class CommitConflictError(LakecoreError):
    """A commit lost every race it was allowed to retry, or its reads were invalidated."""

    exit_code = 3


class CommitStateUnknownError(LakecoreError):
    """The root write failed ambiguously and the outcome could not be established.

    Nothing was deleted; reopen the lakehouse and check whether the change is there."""


class StorageError(LakecoreError):
    """The storage layer failed (network, permissions, timeouts)."""


class StorageTimeoutError(StorageError):
    """A storage operation timed out; it may or may not have taken effect."""
