"""The one error hierarchy of lakecore.

Every error a user can see is a ``LakecoreError``. Each subclass names what was wrong and,
where there is one, what to do about it, so that a command line or a job can print
``str(error)`` as a single actionable line. ``exit_code`` is the process exit code that the CLI,
the Spark jobs and the Airflow DAGs use for the error.

``ExitCode`` is the one table of exit codes (the README prints it). A scheduler retries only
the codes that a second run can change: ``FAILURE`` (storage, network, anything unforeseen),
``CONFLICT`` and ``INTERRUPTED``. The others come out the same on a retry.
"""

from __future__ import annotations

import enum
from collections.abc import Callable


class ExitCode(enum.IntEnum):
    """Process exit codes of ``lakecore``, ``spark-submit.sh`` jobs and the DAG tasks."""

    OK = 0
    VIOLATIONS = 1  # a check found violations in the lakehouse
    BAD_INPUT = 2  # bad arguments, names, URIs or options; unsafe options; already exists
    CONFLICT = 3  # commit conflict: retries exhausted, or the plan went stale; run again
    FAILURE = 4  # storage or any other failure; retrying may help
    NOT_FOUND = 5  # the lakehouse, version, namespace, table, export or key does not exist
    DAMAGED = 6  # a file of the lakehouse is unreadable: run `repair rollback --to-last-valid`
    INTERRUPTED = 130  # SIGINT or SIGTERM: stopped cleanly, nothing half-committed

    @property
    def meaning(self) -> str:
        return EXIT_CODE_MEANINGS[self]

    @classmethod
    def describe(cls, code: int | None) -> str:
        """A short meaning for any integer, including codes outside the table."""
        if code is None:
            return "no exit code"
        try:
            return cls(code).meaning
        except ValueError:
            return f"unknown exit code {code}"


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "ok",
    ExitCode.VIOLATIONS: "a check found violations",
    ExitCode.BAD_INPUT: "bad arguments, input or unsafe options",
    ExitCode.CONFLICT: "commit conflict; run again",
    ExitCode.FAILURE: "storage or other failure; retrying may help",
    ExitCode.NOT_FOUND: "not found",
    ExitCode.DAMAGED: "a lakehouse file is damaged; run repair",
    ExitCode.INTERRUPTED: "interrupted (SIGINT/SIGTERM); nothing half-committed",
}


def exit_code_help() -> str:
    """The exit-code table as a ``--help`` epilog."""
    rows = "\n".join(f"  {int(code):>3}  {code.meaning}" for code in ExitCode)
    return f"exit codes:\n{rows}"


# Codes a scheduler should not retry: a second run gives the same answer.
NO_RETRY_EXIT_CODES: frozenset[int] = frozenset(
    {ExitCode.VIOLATIONS, ExitCode.BAD_INPUT, ExitCode.NOT_FOUND, ExitCode.DAMAGED}
)


class LakecoreError(Exception):
    """Root of every error lakecore raises on purpose."""

    exit_code: int = ExitCode.FAILURE

    def one_line(self) -> str:
        """The message folded onto a single line, prefixed by the error's kind."""
        text = " ".join(str(self).split())
        return f"{type(self).__name__}: {text}"


class InvalidArgumentError(LakecoreError):
    """An option or argument is malformed or unsafe."""

    exit_code = ExitCode.BAD_INPUT


class UnsafeOptionError(InvalidArgumentError):
    """An option would put data at risk (for example a GC grace period shorter than a commit)."""


class InvalidNameError(InvalidArgumentError):
    """An object name breaks the key-encoding rules (bytes 0x00-0x20, 0x7F, or too long)."""


class InvalidLocationError(InvalidArgumentError):
    """A URI or stored path is not qualified, or escapes the lakehouse root."""


class InvalidLakehouseDefError(InvalidArgumentError):
    """A lakehouse definition breaks a rule of the format (for example the node-size rule)."""


class ReadOnlyLakehouseError(InvalidArgumentError):
    """A change was asked of a lakehouse that must not change: an exported copy
    (``lakecore export --target``) is a read-only snapshot of its source."""


class UnsupportedFormatVersionError(LakecoreError):
    """A file names a format major version this reader does not understand."""

    exit_code = ExitCode.BAD_INPUT


class CorruptFileError(LakecoreError):
    """A file exists but its bytes do not follow the format."""

    exit_code = ExitCode.DAMAGED

    def __init__(self, location: str, rule: str) -> None:
        super().__init__(f"{location}: {rule}")
        self.location = location
        self.rule = rule


class CorruptNodeFileError(CorruptFileError):
    """A node file breaks a rule of docs/format.md#node-files."""


class DamagedLakehouseError(CorruptFileError):
    """The latest version cannot be read: its root file, or the definition it names, is damaged.

    The message names the file and says how to repair (roll forward to the newest readable
    version)."""

    def __init__(self, location: str, rule: str, root_uri: str, version: int) -> None:
        super().__init__(
            location,
            f"{rule}; the latest version {version} cannot be read. Roll forward to the newest "
            f"readable version with `lakecore -l {root_uri} repair rollback --to-last-valid` (or "
            f"`./spark-submit.sh repair --lakehouse {root_uri} rollback --to-last-valid`); "
            "add --yes to carry out the plan it prints",
        )
        self.version = version


class CorruptDefinitionError(CorruptFileError):
    """An object definition (.binpb) cannot be decoded."""


class CorruptLookupFileError(CorruptFileError):
    """A sorted lookup file breaks docs/lookup-format.md (bad checksum, footer, magic, ...)."""


class TreeStructureError(LakecoreError):
    """The tree's shape is impossible: a cycle, a tree deeper than its order allows, ...

    Readers stop at the first such node instead of following the pointer."""

    exit_code = ExitCode.DAMAGED

    def __init__(self, location: str, rule: str) -> None:
        super().__init__(f"{location}: {rule}")
        self.location = location
        self.rule = rule


class MissingDefinitionError(LakecoreError):
    """A version names a namespace or table definition file that does not exist.

    Damage, not "no such table": the key is in the tree, so the file was deleted or lost
    outside lakecore (gc and compact-versions never delete what a retained version reaches).
    The message names the file, the version, how to find every such file and the ways out."""

    exit_code = ExitCode.DAMAGED

    def __init__(
        self,
        what: str,
        location: str,
        version: int,
        root_uri: str,
        drop_command: str,
        drop_condition: str = "",
    ) -> None:
        super().__init__(
            f"{what}: its definition file {location} is missing, though version {version} names it "
            f"(deleted outside lakecore?). `lakecore -l {root_uri} fsck --deep` lists every missing "
            f"definition; restore the file from a backup, or `lakecore -l {root_uri} {drop_command}`{drop_condition}"
        )
        self.location = location
        self.version = version


class NotFoundError(LakecoreError):
    """A lakehouse, version, namespace, table or file does not exist."""

    exit_code = ExitCode.NOT_FOUND


class NoLakehouseError(NotFoundError):
    """The root exists as a place (a folder, a bucket's prefix) but holds no root node file, or
    the local folder does not exist: ``lakecore init`` would make a lakehouse there. A bucket
    that does not exist is a plain ``NotFoundError`` (creating would fail too)."""


class VersionExpiredError(NotFoundError):
    """A version that time travel asked for is not in the log: expired by version compaction,
    dropped by a repair, or (by time) inside a gap that makes the answer unknowable."""


class AlreadyExistsError(LakecoreError):
    """An object or file that must be new already exists."""

    exit_code = ExitCode.BAD_INPUT


class NamespaceNotEmptyError(LakecoreError):
    """A namespace that still holds tables cannot be dropped."""

    exit_code = ExitCode.BAD_INPUT


class CommitConflictError(LakecoreError):
    """A commit lost every race it was allowed to retry, or its reads were invalidated."""

    exit_code = ExitCode.CONFLICT


class CommitTimeoutError(CommitConflictError):
    """A commit outlived its timeout before creating its root, and gave up: nothing was
    committed, and running it again is safe (its files are orphans for gc)."""


class CommitStateUnknownError(LakecoreError):
    """The root write failed ambiguously and the outcome could not be established.

    Nothing was deleted; reopen the lakehouse and check whether the change is there."""


class StorageError(LakecoreError):
    """The storage layer failed (network, permissions, timeouts)."""


class StorageRefusedError(StorageError):
    """The store answered and refused the request: no space left, no permission, a read-only
    file system, access denied. It did not take effect, and the same request fails the same way
    until someone frees space or grants access: a commit gives up at once instead of retrying
    it as a lost race."""


class StorageTimeoutError(StorageError):
    """A storage operation timed out; it may or may not have taken effect."""


def in_cause_chain(exc: BaseException | None, test: Callable[[BaseException], bool]) -> bool:
    """True when ``exc``, or an error it was raised from, passes ``test``."""
    seen = 0
    while exc is not None and seen < 16:  # a cause chain is short; bound it all the same
        if test(exc):
            return True
        exc = exc.__cause__
        seen += 1
    return False


def is_damage(exc: BaseException | None) -> bool:
    """True when ``exc``, or an error it was raised from, is damage (exit code DAMAGED)."""
    return in_cause_chain(
        exc, lambda e: isinstance(e, LakecoreError) and e.exit_code == ExitCode.DAMAGED
    )
