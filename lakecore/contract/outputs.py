"""Files a command writes on the operator's machine: JSON reports, HTML pages, Parquet lists.

Two rules keep an output from landing on something that is not the command's own:

- **Never inside a lakehouse.** Every output path a command or job accepts (``--report``,
  ``--html``, the Parquet full list and the page beside a report, ``--cache-dir``, Spark's log
  file) is checked before any work with ``check_outputs``: its real path (every link resolved,
  the missing tail of a path that does not exist yet included) may not be a lakehouse root the
  command names (the lakehouse, an export's target), lie inside one, or, for a folder, hold one.
  Nor may it lie in any other lakehouse on this disk: a folder above it that holds ``_latest_hint.txt``
  or version 0's root file is a lakehouse root. A report written over the latest root file once
  turned a lakehouse into ``DamagedLakehouseError`` from a dry run. Outputs are local files (a
  URI is refused as the command line is read, ``option_types.output_file``), so a lakehouse on an
  object store cannot hold one.
- **One file, one output.** Two outputs of one command may not be the same file (``--report
  x.html`` is also validate's own page), nor one inside the other.
- **Only onto what a command wrote.** An existing target is replaced only when it is empty or
  is what a lakecore command writes there: a JSON report of a job (an object with ``job``,
  ``lakehouse``, ``status`` and ``exit_code``), a lakecore HTML page (the ``generator`` meta of
  ``GENERATOR_META``, or this project's stylesheet for pages written before that meta), a
  Parquet dataset folder holding only what Spark's writer leaves. Anything else, a symbolic link
  as the last component, or a file that is not a regular file (``/dev/null``: replacing it would
  replace the device node) is refused, exit 2. ``write_text_atomically`` checks the target
  again just before it replaces it, for a file that appeared while the command ran.

Writing:

- **Atomic, and safe to race.** The text goes to a temporary file with a unique name in the
  target's folder, then ``os.replace`` puts it in place: a reader sees the old file or the new
  one, never a torn one, and two runs given the same path (a job started twice at once) each
  publish a whole file of their own; the last one wins. A fixed temporary name (``PATH.tmp``)
  let one run rename the other's half-written file, or fail because it was gone.
- The target's folder is made when missing (the command line checked that it can be).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import stat
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lakecore.core.locations import normalize_root_uri, real_root_uri
from lakecore.errors import InvalidArgumentError
from lakecore.lakehouse.report.html import GENERATOR_META, LEGACY_PAGE_MARK

# A page's head, and so its mark, lies within its first bytes; a report is read whole up to this.
_PAGE_HEAD_BYTES: Final = 16 * 1024
_REPORT_MAX_BYTES: Final = 64 * 1024 * 1024
_REPORT_KEYS: Final = frozenset({"job", "lakehouse", "status", "exit_code"})
# What Spark's Parquet writer leaves in a dataset folder: part files and their checksums, the
# committers' markers. Regular files only: a folder or a link among them is not Spark's. (A
# ``_temporary`` folder is a write that did not finish: refused, for a person to look at.)
_DATASET_FILE: Final = re.compile(
    r"\.?part-[0-9]+-[0-9a-f-]+(?:-c[0-9]+)?\.[a-z0-9.]*parquet(?:\.crc)?"
    r"|\._SUCCESS\.crc|_SUCCESS|_committed_[0-9]+|_started_[0-9]+"
)


class OutputKind(enum.Enum):
    """What an output path holds, and so what an existing file there must be to be replaced."""

    JSON_REPORT = "JSON report"
    HTML_PAGE = "HTML page"
    PARQUET_DATASET = "Parquet dataset folder"
    CACHE_FOLDER = "cache folder"
    LOG_FILE = "log file"  # always a new name (spark-submit.sh's): never replaces anything


@dataclass(frozen=True)
class Output:
    """One output of a command: the option that named it (for the message), its path, its kind."""

    option: str
    path: str
    kind: OutputKind
    # For a file the command names itself (validate's page beside the report): where it goes.
    beside: str | None = None


def check_outputs(
    outputs: Iterable[Output], *lakehouses: str | None, target: str | None = None
) -> None:
    """Refuse (``InvalidArgumentError``, exit 2) any of ``outputs`` that lies inside one of
    ``lakehouses`` (root URIs or paths the command names; None for none), inside an export's
    ``target`` (the lakehouse the export makes) or any other lakehouse, that is another output's
    file, or that would replace something a lakecore command did not write. See the module
    doc."""
    places = [(given, "the lakehouse root") for given in lakehouses] + [
        (target, "the export target (--target)")
    ]
    lakehouse_roots = [
        (local, what)
        for local, what in ((_local_lakehouse_root(g), w) for g, w in places if g)
        if local
    ]
    seen: dict[str, Output] = {}
    for output in outputs:
        real = output_real_path(output.path)
        for lakehouse_root, what in lakehouse_roots:
            if _overlaps(real, lakehouse_root, output.kind):
                holds = real != lakehouse_root and lakehouse_root.startswith(real + "/")
                where = "holds" if holds else "is inside"
                raise InvalidArgumentError(
                    f"{output.option} {output.path} {where} {what} {lakehouse_root} (as {real}): "
                    "a command never writes into a lakehouse; give a path outside it"
                )
        other = _lakehouse_holding(real)
        if other is not None:
            raise InvalidArgumentError(
                f"{output.option} {output.path} is inside the lakehouse at {other} (as {real}): a "
                "command never writes into a lakehouse; give a path outside it"
            )
        for earlier_real, earlier in seen.items():
            if (
                real == earlier_real
                or real.startswith(earlier_real + "/")
                or (earlier_real.startswith(real + "/"))
            ):
                named, given = (earlier, output) if earlier.beside else (output, earlier)
                if named.beside:
                    raise InvalidArgumentError(
                        f"{given.option} {given.path} is where {named.option} goes "
                        f"({named.beside}); give {given.option} another path"
                    )
                raise InvalidArgumentError(
                    f"{output.option} {output.path} and {earlier.option} {earlier.path} are the "
                    "same file (or one holds the other): the command writes both; give each its "
                    "own path"
                )
        seen[real] = output
        refuse_foreign_target(output)


def output_real_path(path: str) -> str:
    """Where an output path lands: ``~`` expanded (as the writer expands it), made absolute,
    every link resolved (the missing tail of a path that does not exist yet kept)."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def refuse_foreign_target(output: Output) -> None:
    """Refuse ``output`` when something is at its path that a lakecore command did not write
    there (see the module doc); nothing there, or an empty file, is fine."""
    path = os.path.abspath(os.path.expanduser(output.path))
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there to replace (a path under a file: the writer says so itself)
    except OSError as exc:
        raise InvalidArgumentError(
            f"{output.option} {output.path} cannot be checked: {exc.strerror or exc}"
        ) from None
    where = f"{output.option} {output.path}"
    if output.kind is OutputKind.CACHE_FOLDER:
        # The cache writes and evicts only names of its own inside (lakecore.core.lookup.cache), and
        # never through a link below it: a link to a folder, checked where it leads, is fine.
        if not os.path.isdir(path):
            raise InvalidArgumentError(f"{where} is not a folder; name a folder for the cache")
        return
    if output.kind is OutputKind.LOG_FILE:
        raise InvalidArgumentError(f"{where} exists already; a log file is always a new one")
    if stat.S_ISLNK(info.st_mode):
        raise InvalidArgumentError(
            f"{where} is a symbolic link (to {os.readlink(path)}); name the file itself"
        )
    if output.kind is OutputKind.PARQUET_DATASET:
        if not stat.S_ISDIR(info.st_mode):
            raise InvalidArgumentError(
                f"{where} exists and is not a Parquet dataset folder; move it or name a new report"
            )
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not (entry.is_file(follow_symlinks=False) and _DATASET_FILE.fullmatch(entry.name)):
                what = "a folder" if entry.is_dir(follow_symlinks=False) else "a file"
                raise InvalidArgumentError(
                    f"{where} holds {what} a Parquet list of lakecore's does not ({entry.name!r}); "
                    "writing the list would delete it: move it or name a new report"
                )
        return
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InvalidArgumentError(f"{where} is {kind}; name a file")
    if info.st_size == 0 or _written_by_lakecore(path, output.kind):
        return
    raise InvalidArgumentError(
        f"{where} exists and is not a lakecore {output.kind.value}: it would be replaced; "
        "move it or name a new file"
    )


def write_text_atomically(path: str | Path, text: str, kind: OutputKind | None = None) -> str:
    """Write ``text`` (UTF-8) to ``path`` as described above; returns the path written. With
    ``kind``, an existing target is checked once more first (``refuse_foreign_target``).
    OSError as the file system raises it."""
    target = Path(os.path.expanduser(path))  # as check_outputs read it
    if kind is not None:
        refuse_foreign_target(Output("the output", str(target), kind))
    target.parent.mkdir(parents=True, exist_ok=True)
    # A fresh name opened exclusively: the file gets the umask's mode like any other the
    # command writes (mkstemp's 0600 would hide a report from its readers).
    temp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temp, "x", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return str(target)


def _local_lakehouse_root(lakehouse: str) -> str | None:
    """The real path of a lakehouse root on this machine's disk, or None for any other store
    (or a URI that does not parse: the command refuses it itself, naming it better)."""
    try:
        uri = real_root_uri(normalize_root_uri(lakehouse))
    except InvalidArgumentError:
        return None
    if not uri.startswith("file://"):
        return None
    return uri.removeprefix("file://").rstrip("/") or "/"


# Files every lakecore lakehouse root holds, one or the other: the hint (written at creation and
# by every commit) and the first version's root file (gone only once compaction expired it).
_LAKEHOUSE_MARKS: Final = ("_latest_hint.txt", "_" + "0" * 32 + ".arrow")


def _lakehouse_holding(real: str) -> str | None:
    """The lakehouse root on this disk that ``real`` (a path) lies in or is, if any: the
    nearest folder at or above it holding one of ``_LAKEHOUSE_MARKS``. A stat per level."""
    folder = real if os.path.isdir(real) else os.path.dirname(real)
    while True:
        if any(os.path.isfile(os.path.join(folder, mark)) for mark in _LAKEHOUSE_MARKS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _overlaps(real: str, lakehouse_root: str, kind: OutputKind) -> bool:
    inside = real == lakehouse_root or real.startswith(lakehouse_root.rstrip("/") + "/")
    # A folder output holding the lakehouse root would hold the lakehouse: a dataset written
    # with Spark's overwrite deletes the folder first.
    holds = kind is OutputKind.PARQUET_DATASET and lakehouse_root.startswith(real.rstrip("/") + "/")
    return inside or holds


def _written_by_lakecore(path: str, kind: OutputKind) -> bool:
    try:
        with open(path, "rb") as existing:
            if kind is OutputKind.HTML_PAGE:
                head = existing.read(_PAGE_HEAD_BYTES).decode("utf-8", errors="replace")
                return GENERATOR_META in head or LEGACY_PAGE_MARK in head
            data = existing.read(_REPORT_MAX_BYTES + 1)
    except OSError:
        return False
    if len(data) > _REPORT_MAX_BYTES:
        return False
    try:
        report = json.loads(data)
    except ValueError:
        return False
    return isinstance(report, dict) and report.keys() >= _REPORT_KEYS
