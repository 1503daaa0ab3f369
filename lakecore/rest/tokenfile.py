"""The token file of ``lakecore serve --token-file PATH``: who may call, read again when it changes.

The file has one principal a line, ``#`` comments and blank lines ignored, UTF-8::

    # name      role        secret
    etl         read-write  4f1c9e0b7a2d48e5b6c3...
    dashboards  read-only   9b8a7c6d5e4f3a2b1c0d...

Rules of the file (each refusal is one line naming the file and the line, never a secret):

* ``NAME ROLE SECRET``, separated by blanks. The role is ``read-only`` or ``read-write``. The
  secret is ``MIN_SECRET_CHARS`` to ``MAX_SECRET_CHARS`` printable ASCII characters (an HTTP
  header carries ASCII only); make one with ``python3 -c 'import secrets;
  print(secrets.token_hex(24))'``.
* No name twice, and no secret twice: a secret names exactly one principal (two principals
  with one secret would make the secret act as whichever came last).
* The file must be a regular file (a FIFO would block the server), UTF-8, and name at least one
  principal. A file its group or others can read or write is used, with a warning line: a
  token file should be ``chmod 600`` and owned by the server's user.

Rules of reloading (``TokenFile``):

* The file is read in full at start; an unusable file stops the start (``InvalidArgumentError``,
  exit 2).
* Afterwards it is read again when it changes: ``entries()``, which the server calls for each
  request, compares the file's ``stat`` (device, inode, size, modification and change times;
  links followed, so a Kubernetes Secret's swapped ``..data`` link counts) with the last one at
  most once every ``check_seconds`` (1 s), and reads the file only when it differs. ``reload()``
  reads it unconditionally (``lakecore serve`` calls it on SIGHUP).
* A read that finds the file missing, unreadable or invalid keeps the principals read before,
  logs one error line naming the file and the line, and is counted (``reload_failures``); it is
  not tried again until the file changes again or the next ``reload()``. A good read replaces
  every principal at once and is counted (``reloads``).
* The new principals take effect on the next request: a removed or changed secret is refused
  at once, with every token issued for it (``lakecore.rest.tokens`` keys tokens by the secret),
  and a changed role applies at once to the principal's secret and tokens alike.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from lakecore.errors import InvalidArgumentError

Role = Literal["read-only", "read-write"]
ROLES: Final[tuple[Role, ...]] = ("read-only", "read-write")
MIN_SECRET_CHARS: Final = 16
MAX_SECRET_CHARS: Final = 512
CHECK_SECONDS: Final = 1.0
# Mode bits that let the group or others read or write the file.
SHARED_MODE_BITS: Final = 0o066
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a name from the token file (or ``anonymous``) and its role."""

    name: str
    role: Role

    @property
    def may_write(self) -> bool:
        return self.role == "read-write"


@dataclass(frozen=True)
class TokenFileEntry:
    """One principal line: its name, role and secret, and where it was (for messages)."""

    name: str
    role: Role
    secret: str
    line: int = 0

    @property
    def principal(self) -> Principal:
        return Principal(self.name, self.role)


Entries = tuple[TokenFileEntry, ...]


def check_entries(entries: Iterable[TokenFileEntry], where: str = "the token file") -> Entries:
    """The entries, checked as the file's lines are (names, roles, secrets, no duplicates).

    Raises:
        InvalidArgumentError: a bad line, named by its number and never by its secret.
    """
    checked: list[TokenFileEntry] = []
    names: dict[str, int] = {}
    secrets: dict[str, TokenFileEntry] = {}
    for entry in entries:
        at = f"{where} line {entry.line}" if entry.line else where
        if entry.role not in ROLES:
            raise InvalidArgumentError(f"{at}: role {entry.role!r} must be read-only or read-write")
        if len(entry.secret) < MIN_SECRET_CHARS:
            raise InvalidArgumentError(
                f"{at}: the secret of {entry.name!r} is shorter than {MIN_SECRET_CHARS} "
                "characters; make one with: python3 -c 'import secrets; "
                "print(secrets.token_hex(24))'"
            )
        if len(entry.secret) > MAX_SECRET_CHARS:
            raise InvalidArgumentError(
                f"{at}: the secret of {entry.name!r} is longer than {MAX_SECRET_CHARS} characters"
            )
        if not all(33 <= ord(c) <= 126 for c in entry.secret):
            raise InvalidArgumentError(
                f"{at}: the secret of {entry.name!r} has a character outside printable ASCII "
                "(HTTP headers carry ASCII only)"
            )
        if entry.name in names:
            raise InvalidArgumentError(
                f"{where} lines {names[entry.name]} and {entry.line}: {entry.name!r} is named "
                "twice; keep one line per principal"
            )
        first = secrets.get(entry.secret)
        if first is not None:
            raise InvalidArgumentError(
                f"{where} lines {first.line} and {entry.line}: {first.name!r} and "
                f"{entry.name!r} have the same secret; give each principal its own"
            )
        names[entry.name] = entry.line
        secrets[entry.secret] = entry
        checked.append(entry)
    return tuple(checked)


def parse_token_file(text: str, where: str) -> Entries:
    """The principals of a token file's text; ``where`` names the file in messages.

    Raises:
        InvalidArgumentError: a malformed line, or no principal at all.
    """
    entries: list[TokenFileEntry] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise InvalidArgumentError(
                f"{where} line {number}: expected 'NAME ROLE SECRET' (3 fields), found {len(parts)}"
            )
        name, role, secret = parts
        if role not in ROLES:
            raise InvalidArgumentError(
                f"{where} line {number}: role {role!r} must be read-only or read-write"
            )
        entries.append(TokenFileEntry(name, role, secret, number))
    checked = check_entries(entries, where)
    if not checked:
        raise InvalidArgumentError(f"{where} names no principal")
    return checked


# What identifies one content of the file without reading it.
Signature = tuple[int, int, int, int, int]


def _signature(status: os.stat_result) -> Signature:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


@dataclass(frozen=True)
class TokenFileRead:
    """One read of the file: its principals, its ``stat``, and the mode warning if any."""

    entries: Entries
    signature: Signature
    warning: str | None


def read_token_file_at(path: Path) -> TokenFileRead:
    """Read and check the file once. Raises: InvalidArgumentError (one line, file and line)."""
    where = f"the token file {path}"
    try:
        with open(path, "rb", opener=_nonblocking) as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise InvalidArgumentError(f"{where} is not a regular file")
            data = handle.read()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InvalidArgumentError(
            f"{where} is not UTF-8 text (line {line}, byte {exc.start}); save it as UTF-8"
        ) from None
    entries = parse_token_file(text, where)
    warning = None
    if status.st_mode & SHARED_MODE_BITS:
        warning = (
            f"warning: {where} can be read or written by its group or others (mode "
            f"{stat.S_IMODE(status.st_mode):04o}); chmod 600 {path}"
        )
    return TokenFileRead(entries, _signature(status), warning)


def _nonblocking(path: str, flags: int) -> int:
    # A FIFO opened for reading blocks until a writer comes; O_NONBLOCK lets the regular-file
    # check refuse it instead. Reads of a regular file ignore the flag.
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def read_token_file(path: str | Path) -> list[tuple[str, Role, str]]:
    """The file's ``(name, role, secret)`` lines, checked (a warning logged for a shared file).

    Raises:
        InvalidArgumentError: unusable (see the module docstring).
    """
    read = read_token_file_at(Path(path))
    if read.warning:
        _LOG.warning("%s", read.warning)
    return [(e.name, e.role, e.secret) for e in read.entries]


class TokenFile:
    """The principals of one token file, read again when it changes (see the module docstring).

    ``monotonic`` is the clock of the ``check_seconds`` interval (tests pass their own)."""

    def __init__(
        self,
        path: str | Path,
        *,
        check_seconds: float = CHECK_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.check_seconds = check_seconds
        self._monotonic = monotonic
        first = read_token_file_at(self.path)  # raises: the server does not start
        if first.warning:
            _LOG.warning("%s", first.warning)
        self._entries: Entries = first.entries
        self._signature: Signature | str = first.signature
        self._next_check = monotonic() + check_seconds
        self._lock = threading.Lock()
        self.reloads = 0
        self.reload_failures = 0

    def entries(self) -> Entries:
        """The current principals, after a ``stat`` of the file if ``check_seconds`` passed.

        Never raises: a failed check or read keeps the principals read before."""
        now = self._monotonic()
        if now >= self._next_check and self._lock.acquire(blocking=False):
            try:
                if now >= self._next_check:
                    self._next_check = now + self.check_seconds
                    self._check()
            finally:
                self._lock.release()
        return self._entries

    def reload(self, why: str = "SIGHUP") -> bool:
        """Read the file now, whatever its ``stat``; True if its principals replaced the old."""
        with self._lock:
            self._next_check = self._monotonic() + self.check_seconds
            return self._read(why, self._current_signature())

    def _current_signature(self) -> Signature | str:
        try:
            return _signature(os.stat(self.path))
        except OSError as exc:
            return f"stat failed: {exc.errno}"

    def _check(self) -> None:
        signature = self._current_signature()
        if signature != self._signature:
            self._read("changed", signature)

    def _read(self, why: str, signature: Signature | str) -> bool:
        # The signature is taken before the read: a change during the read is seen next time.
        self._signature = signature
        try:
            read = read_token_file_at(self.path)
        except InvalidArgumentError as exc:
            return self._failed(why, str(exc))
        except Exception as exc:  # never let a reload break a request
            return self._failed(why, f"unexpected {type(exc).__name__}: {exc}")
        if read.warning:
            _LOG.warning("%s", read.warning)
        self._entries = read.entries
        self._signature = read.signature  # of the file read, if it was replaced meanwhile
        self.reloads += 1
        _LOG.info("token file %s reloaded (%s): %d principals", self.path, why, len(read.entries))
        return True

    def _failed(self, why: str, reason: str) -> bool:
        self.reload_failures += 1
        _LOG.error(
            "token file %s not reloaded (%s); keeping the %d principals read before: %s",
            self.path,
            why,
            len(self._entries),
            " ".join(reason.split()),
        )
        return False


__all__ = [
    "CHECK_SECONDS",
    "MAX_SECRET_CHARS",
    "MIN_SECRET_CHARS",
    "ROLES",
    "Entries",
    "Principal",
    "Role",
    "TokenFile",
    "TokenFileEntry",
    "TokenFileRead",
    "check_entries",
    "parse_token_file",
    "read_token_file",
    "read_token_file_at",
]
