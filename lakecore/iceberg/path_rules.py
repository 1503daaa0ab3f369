"""Where one Iceberg path may lie: the rules checked of every location, metadata file and write
path on its own (``lakecore.iceberg.roots`` has the rules between tables).

Rules:

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
* **Out of lakecore's own directories.** Inside the lakehouse root, a path may not be the root
  itself nor lie in a first segment that is a lakecore name (a leading ``_`` or ``.``, or a
  4-binary-digit hash directory): lakecore's gc lists only the root's top level and its hash
  directories and deletes only files with lakecore's names, so Iceberg files kept elsewhere are
  never listed, let alone deleted.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Final
from urllib.parse import urlparse

from lakecore.errors import InvalidLocationError
from lakecore.locations import normalize_root_uri

_HASH_SEGMENT_RE: Final = re.compile(r"^[01]{4}$")
_SCHEME_RE: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


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
    root = root_uri.rstrip("/")
    if location == root:
        raise InvalidLocationError(
            f"{what} {location} is the lakehouse root itself; use a directory of its own such as {root}/warehouse"
        )
    if not location.startswith(root + "/"):
        return
    first = location[len(root) + 1 :].split("/", 1)[0]
    if first.startswith(("_", ".")) or _HASH_SEGMENT_RE.match(first):
        raise InvalidLocationError(
            f"{what} {location} lies in {root}/{first}, a name lakecore uses for its own files "
            f"(leading '_' or '.', or a 4-binary-digit hash directory); use a directory such as {root}/warehouse"
        )


def check_warehouse_location(location: str, what: str, warehouse: str, lakehouse_root: str) -> None:
    """Refuse a location outside the warehouse, the warehouse itself, or one inside lakecore's
    own directories.

    Raises:
        InvalidLocationError: with the reason.
    """
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
    "check_qualified",
    "check_warehouse_location",
    "normalize_location",
    "physical_location",
    "refuse_lakecore_directory",
]
