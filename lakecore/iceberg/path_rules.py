"""Where one Iceberg path may lie: the rules checked of every location, metadata file and write
path on its own (``lakecore.maintenance.tables.table_folders`` has the rules between tables).

Rules:

* **One canonical form, before any IO** (``canonical_location``). Every location a client
  names (a table or namespace location, a ``write.*.path``, register's metadata file, and every
  path a commit names: manifest lists, the manifests in them, statistics files) is parsed once:
  an absolute URI ``scheme://authority/path`` or an absolute path (read as ``file://``), with
  no query (``?``), fragment (``#``), percent-escape (``%``), backslash, control or Unicode
  format character (category Cc or Cf, line and paragraph separators), no ``.``, ``..`` or
  empty segment, at most ``MAX_LOCATION_CHARS`` characters; a local file as ``file:///path`` or
  ``file:/path`` (Hadoop's spelling, which Java engines write), never with a host.
  Anything else is refused (``InvalidLocationError``, a 400 at the REST server) before the
  location is stored, read or written: pyiceberg's FileIO drops what follows ``?`` (one path
  for every file of a table), and a client that decodes ``%2e%2e`` writes above the folder the
  text seems to name.
* **Comparable text.** Locations are compared as ``normalize_location`` writes them: ``s3a`` and
  ``s3n`` read as ``s3``, a bare path as ``file://``, no trailing ``/``.
* **Where it leads.** Two names of one file are one file: ``physical_location`` gives where a
  location leads (on this machine's disk the real path, links resolved, as pyiceberg's FileIO
  opens it; on an object store the key with ``.``, ``..`` and empty segments removed, as a
  client may remove them). References, the rule between tables and purge judge that.
* **Qualified.** No ``.``, ``..`` or empty segment: a ``..`` would lead out of a folder the path
  textually starts with.
* **Inside the warehouse, strictly.** Every table location, metadata file and write path, and
  every namespace ``location``, lies under the warehouse and is not the warehouse itself
  (``LakecoreCatalog.check_location``).
* **Out of lakecore's own directories.** Inside the lakehouse root, a path may not be the lakehouse
  root itself nor lie in a first segment that is a lakecore name (a leading ``_`` or ``.``, or a
  4-binary-digit hash directory): lakecore's gc lists only the lakehouse root's top level and its
  hash directories and deletes only files with lakecore's names, so Iceberg files kept elsewhere are
  never listed, let alone deleted.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from typing import Final
from urllib.parse import urlparse

from lakecore.core.locations import normalize_root_uri
from lakecore.errors import InvalidLocationError

_HASH_SEGMENT_RE: Final = re.compile(r"^[01]{4}$")
_SCHEME_RE: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# A location longer than this is refused: no store takes keys much longer (S3: 1,024 bytes).
MAX_LOCATION_CHARS: Final = 4096
# Characters with a meaning in a URI that a FileIO may act on (``?`` starts a query pyiceberg's
# FileIO drops, ``#`` a fragment, ``%`` an escape some clients decode), and the backslash that
# some file systems read as a separator.
_URI_SPECIAL: Final = {
    "?": "a query",
    "#": "a fragment",
    "%": "a percent-escape",
    "\\": "a backslash",
}
_AUTHORITY_RE: Final = re.compile(r"^[A-Za-z0-9._-]+$")


# The characters every common location is made of: text of only these needs no closer look.
_PLAIN_LOCATION_RE: Final = re.compile(r"[A-Za-z0-9/:._\-+=,~@!$&'()*;\[\] ]*")


def _forbidden_character(text: str) -> str | None:
    """Why ``text`` may not be a location because of one of its characters; None if none."""
    if _PLAIN_LOCATION_RE.fullmatch(text):
        return None
    for char in text:
        special = _URI_SPECIAL.get(char)
        if special is not None:
            return f"{special} ({char!r})"
        if char in " " or char.isalnum() or char in "/:._-+=,~@!$&'()*;[]":
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (
            category == "Zs" and char != " "
        ):
            return f"the character U+{ord(char):04X} ({unicodedata.name(char, category)})"
    return None


def canonical_location(location: object, what: str) -> str:
    """The canonical form of a location a client names (see the module docstring): the scheme
    in lower case (``s3a``/``s3n`` as ``s3``), a bare absolute path as ``file://``, no trailing
    ``/``.

    Raises:
        InvalidLocationError: the location is not a string of that form; the message names what
            is wrong and ``what`` it was.
    """
    if not isinstance(location, str) or not location.strip():
        raise InvalidLocationError(f"{what} {location!r} is not a location (an empty text)")
    shown = ascii(location) if len(location) <= 200 else ascii(location[:200]) + "..."
    if len(location) > MAX_LOCATION_CHARS:
        raise InvalidLocationError(
            f"{what} {shown} is {len(location)} characters long; at most {MAX_LOCATION_CHARS}"
        )
    if location != location.strip():
        raise InvalidLocationError(f"{what} {shown} starts or ends with white space")
    problem = _forbidden_character(location)
    if problem is not None:
        raise InvalidLocationError(
            f"{what} {shown} holds {problem}; a location is a plain path or URI without "
            "queries, fragments, escapes or control characters"
        )
    if re.match(r"^[Ff][Ii][Ll][Ee]:/(?!/)", location):
        # Hadoop's (Java engines') spelling of a local path: file:/abs is file:///abs.
        location = "file://" + location[len("file:") :]
    match = _SCHEME_RE.match(location)
    if match is None:
        if location.lower().startswith("file:"):
            raise InvalidLocationError(
                f"{what} {shown} is a file: URI of a relative path: write file:///absolute/path"
            )
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", location) and not location.startswith("/"):
            raise InvalidLocationError(
                f"{what} {shown} has a malformed scheme: write scheme://path"
            )
        if not location.startswith("/"):
            raise InvalidLocationError(
                f"{what} {shown} is a relative path; give an absolute path or a URI"
            )
        scheme, authority, path = "file", "", location
    else:
        scheme = match.group(1).lower()
        scheme = "s3" if scheme in ("s3a", "s3n") else scheme
        authority, slash, rest = location[match.end() :].partition("/")
        path = slash + rest
        if scheme == "file":
            if authority:
                raise InvalidLocationError(
                    f"{what} {shown} names a host ({authority!r}); a file URI is file:///absolute/path"
                )
        elif not authority or not _AUTHORITY_RE.match(authority):
            raise InvalidLocationError(
                f"{what} {shown} has no valid bucket or container after {scheme}:// "
                "(letters, digits, '.', '_' and '-' only)"
            )
    trimmed = path.rstrip("/")
    segments = trimmed.split("/")[1:] if trimmed else []
    if any(s in ("", ".", "..") for s in segments):
        raise InvalidLocationError(
            f"{what} {shown} is not qualified: remove '.', '..' and empty segments"
        )
    return f"{scheme}://{authority}{trimmed}"


def normalize_location(location: str) -> str:
    """A location as comparable text: ``s3a``/``s3n`` read as ``s3``, a bare path as
    ``file://``, no trailing ``/``."""
    if _SCHEME_RE.match(location) is None:
        return normalize_root_uri(location).rstrip("/")
    scheme, rest = location.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    return f"{scheme}://{rest}".rstrip("/")


def physical_location(location: str) -> str:
    """Where a location leads, as comparable text: ``normalize_location``, and on this
    machine's disk (``file://`` or a bare path) the real path as the file system reads it, every
    link resolved and ``.``, ``..`` and repeated ``/`` gone (pyiceberg opens ``file:////w/a``,
    ``file:///w//a`` and ``file:///w/./a`` as ``/w/a``, and a bare path as ``abspath`` reads
    it). Two names of one local file give one answer. On an object store a name is its key, with
    '.' and '..' segments removed as a client may remove them."""
    # Parsed as pyiceberg's FileIO parses it (PyArrowFileIO.parse_location): ``file:/w/x``
    # (one slash) is a local path there too, and a URI's path goes to the file system as it is.
    parsed = urlparse(location)
    if not parsed.scheme:  # pyiceberg reads a bare path as abspath does: '..' lexically
        return "file://" + os.path.realpath(os.path.abspath(location))
    if parsed.scheme == "file":
        return "file://" + os.path.realpath(f"{parsed.netloc}{parsed.path}" or "/")
    if _SCHEME_RE.match(location) is None:
        return location  # another scheme without '//': no local file, nothing to resolve
    # An object store's client may remove '.' and '..' segments (pyarrow's S3 reads
    # s3://b/w/./t/x as s3://b/w/t/x): judged as the name they may lead to, which only ever
    # keeps more (a purge deletes no such path itself: it is not qualified).
    scheme, _, rest = normalize_location(location).partition("://")
    bucket, _, key = rest.partition("/")
    if key and any(s in ("", ".", "..") for s in key.split("/")):
        key = posixpath.normpath(key).lstrip("/")
        key = "" if key == "." else key
    return f"{scheme}://{bucket}/{key}".rstrip("/")


def check_qualified(location: str, what: str) -> None:
    body = location.split("://", 1)[-1]
    segments = body.split("/")[1:] if "://" in location else body.split("/")
    if any(s in ("", ".", "..") for s in segments[:-1]) or segments[-1] in (".", ".."):
        raise InvalidLocationError(
            f"{what} {location!r} is not qualified ('.', '..' or empty segments)"
        )


def refuse_lakecore_directory(location: str, root_uri: str, what: str) -> None:
    """Refuse a location inside the lakehouse root that is, or is inside, a place where
    lakecore keeps (and its gc lists) its own files."""
    lakehouse_root = root_uri.rstrip("/")
    if location == lakehouse_root:
        raise InvalidLocationError(
            f"{what} {location} is the lakehouse root itself; use a directory of its own such as {lakehouse_root}/warehouse"
        )
    if not location.startswith(lakehouse_root + "/"):
        return
    first = location[len(lakehouse_root) + 1 :].split("/", 1)[0]
    if first.startswith(("_", ".")) or _HASH_SEGMENT_RE.match(first):
        raise InvalidLocationError(
            f"{what} {location} lies in {lakehouse_root}/{first}, a name lakecore uses for its own files "
            f"(leading '_' or '.', or a 4-binary-digit hash directory); use a directory such as {lakehouse_root}/warehouse"
        )


def check_warehouse_location(
    location: str, what: str, warehouse: str, lakehouse_root: str, *, strict: bool = True
) -> None:
    """Refuse a location outside the warehouse, the warehouse itself, or one inside lakecore's
    own directories. ``strict`` (a location a client names) also requires the canonical form
    (``canonical_location``); without it (a file a table's metadata names, judged for a purge)
    the path only has to be qualified: a data file's name may hold a percent-escape of a
    partition value, which is harmless for a delete of that literal path.

    Raises:
        InvalidLocationError: with the reason.
    """
    if strict:
        normalized = canonical_location(location, what)
    else:
        normalized = normalize_location(location)
        check_qualified(normalized, what)
    if normalized == warehouse:
        raise InvalidLocationError(
            f"{what} {location} is the warehouse itself; a table's files go in a folder of "
            "their own inside it"
        )
    if not normalized.startswith(warehouse + "/"):
        raise InvalidLocationError(
            f"{what} {location} is outside the warehouse {warehouse}; tables of this catalog "
            "keep their files under it"
        )
    refuse_lakecore_directory(normalized, lakehouse_root, what)


__all__ = [
    "MAX_LOCATION_CHARS",
    "canonical_location",
    "check_qualified",
    "check_warehouse_location",
    "normalize_location",
    "physical_location",
    "refuse_lakecore_directory",
]
