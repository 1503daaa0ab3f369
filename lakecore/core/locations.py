"""Locations: root URIs, stored paths, path optimization and every lakecore file name.

Layout of a lakehouse root (docs/format.md#layout)::

    <root>/_lakehouse_def_<uuid4>.binpb                 lakehouse definition, not optimized
    <root>/_<32 bits of v, reversed>.arrow              root node of version v, not optimized
    <root>/_latest_hint.txt                             decimal latest version, best effort
    <root>/bbbb/bbbb/bbbb/bbbbbbbb-node-<uuid4>.arrow   non-root node, optimized
    <root>/bbbb/bbbb/bbbb/bbbbbbbb-namespace-<ns>-<uuid4>.binpb
    <root>/bbbb/bbbb/bbbb/bbbbbbbb-table-<table>-<ns>-<uuid4>.binpb
    <root>/bbbb/bbbb/bbbb/bbbbbbbb-view-<view>-<ns>-<uuid4>.binpb

Path optimization: ``name`` = original path with ``/`` replaced by ``-``; ``h`` = MurmurHash3
x86 32-bit, seed 0, of the UTF-8 bytes of ``name``, unsigned; ``b`` = the low 20 bits of ``h``
as 20 binary digits, most significant first; optimized = ``b[0:4]/b[4:8]/b[8:12]/b[12:20]-name``.

Stored locations are paths relative to the root. The root URI itself is never stored, so a
lakehouse can be copied to another bucket and still read. A stored value that leads out of the
root (``escaping_value``: ``../x``, ``/abs``, a full URI outside an export's source) is forged or
damaged: the maintenance jobs refuse it rather than follow it.
"""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

import mmh3

from lakecore.errors import InvalidLocationError

ROOT_VERSION_BITS = 32
MAX_VERSION = (1 << ROOT_VERSION_BITS) - 1
# 20 bits give 2^20 prefixes spread over 4096 three-level directories: enough to spread S3
# request load and to keep any one local directory listing small.
OPTIMIZED_PREFIX_BITS = 20
HASH_DIRECTORY_LEVELS = 3

LATEST_HINT_FILE_NAME = "_latest_hint.txt"
LAKEHOUSE_DEF_PREFIX = "_lakehouse_def_"
NODE_FILE_SUFFIX = ".arrow"
DEF_FILE_SUFFIX = ".binpb"
# Temporary files of an exclusive create on a local file system; a crash can leave one behind,
# and gc may remove it after its grace period like any other orphan.
TEMP_FILE_PREFIX = ".lakecore-tmp-"

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_ROOT_NAME_RE = re.compile(r"^_([01]{32})\.arrow$")
_LAKEHOUSE_DEF_RE = re.compile(rf"^_lakehouse_def_{_UUID}\.binpb$")
# A file in a hash directory, the bulk of any listing: its head, ``bbbb/bbbb/bbbb/bbbbbbbb-``
# then ``node`` (group 1), ``namespace-`` (2), ``table-`` (3) or ``view-`` (4), and its tail, ``-UUID.arrow``
# or ``-UUID.binpb``, the last _HASHED_TAIL_LENGTH characters. Two short matches, not one
# pattern with ``.+`` before the UUID: that one backtracked over every name (0.87 against
# 0.63 us a path), and gc classifies every file of the lakehouse.
_HASHED_HEAD_RE = re.compile(
    r"[01]{4}/[01]{4}/[01]{4}/[01]{8}-(?:(node)|(namespace-)|(table-)|(view-))"
)
_HASHED_TAIL_RE = re.compile(rf"-{_UUID}\.(?:arrow|binpb)")
_HASHED_TAIL_LENGTH = 43
_HASHED_NAME_START = 24
# The same shape as one RE2 pattern, for a whole column at once (``kind_values``). In RE2, '$'
# is the end of the text only, and ``[^\n]`` is what Python's '.' matches.
_HASHED_FILE_RE2 = (
    rf"^[01]{{4}}/[01]{{4}}/[01]{{4}}/[01]{{8}}-"
    rf"(?:node-{_UUID}\.arrow|(?:namespace|table|view)-[^\n]+-{_UUID}\.binpb)$"
)
_PREFIX_MASK = (1 << OPTIMIZED_PREFIX_BITS) - 1
_TEMP_RE = re.compile(rf"^(?:[01]{{4}}/[01]{{4}}/[01]{{4}}/)?\.lakecore-tmp-{_UUID}$")
# Checked on every stored path a reader follows: one regex instead of a Python loop per character.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
# The shape of every optimized path: four segments, none empty, '.' or '..', the last a name
# with no '/', '\\' or control character. A path of this shape passes every rule of
# ``check_relative_path``, so it is accepted in one match; gc checks about a million stored
# paths per million tables, and the full rules cost 6 µs each.
_PLAIN_OPTIMIZED_RE = re.compile(r"[01]{4}/[01]{4}/[01]{4}/[01]{8}-[^/\\\x00-\x1f\x7f]+")
# The same shape for a whole column at once (``not_plain_optimized``), as RE2 anchors it.
_PLAIN_OPTIMIZED_RE2 = r"^[01]{4}/[01]{4}/[01]{4}/[01]{8}-[^/\\\x00-\x1f\x7f]+$"


class FileKind(Enum):
    """What a file under the root is, judged by its name alone."""

    ROOT_NODE = "root_node"
    LATEST_HINT = "latest_hint"
    LAKEHOUSE_DEF = "lakehouse_def"
    NODE = "node"
    NAMESPACE_DEF = "namespace_def"
    TABLE_DEF = "table_def"
    VIEW_DEF = "view_def"
    TEMP = "temp"


# ---------------------------------------------------------------------------------------------
# URIs and relative paths


def _is_qualified_posix(path: str) -> bool:
    """True when POSIX normalisation leaves ``path`` unchanged (no ., .., or empty segments)."""
    if path == "":
        return True
    trimmed = path[:-1] if path.endswith("/") else path
    if trimmed == "":
        return path == "/"
    return posixpath.normpath(trimmed) == trimmed


def normalize_root_uri(uri: str) -> str:
    """Qualify a root URI and return it ending in ``/``.

    A bare path means the local file system; it is made absolute and turned into ``file://``.
    Any URI whose POSIX normalisation differs from itself (``s3://b/../x``, ``s3://b//x``) is
    refused, because an object store would read those segments literally.
    """
    if not isinstance(uri, str) or uri.strip() == "":
        raise InvalidLocationError(
            f"empty lakehouse URI {uri!r}: pass a path or a URI such as s3://bucket/lake"
        )
    if uri != uri.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        raise InvalidLocationError(
            f"lakehouse URI {uri!r} contains white space or control characters"
        )
    match = _SCHEME_RE.match(uri)
    if match is None:
        if "://" in uri or (re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri) and not os.path.isabs(uri)):
            raise InvalidLocationError(
                f"lakehouse URI {uri!r} has a malformed scheme: write it as scheme://path"
            )
        local = uri[2:] if uri.startswith("./") else uri
        if not _is_qualified_posix(local.rstrip("/") if local != "/" else local):
            raise InvalidLocationError(
                f"lakehouse path {uri!r} is not qualified: remove '.', '..' and empty segments"
            )
        absolute = os.path.abspath(local)
        return "file://" + absolute.rstrip("/") + "/"
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "s3a" or scheme == "s3n":
        scheme = "s3"
    if scheme == "local":  # fsspec's other name for this machine's file system
        scheme = "file"
    if scheme == "file":
        if not rest.startswith("/"):
            raise InvalidLocationError(
                f"lakehouse URI {uri!r}: a file:// URI needs an absolute path (file:///abs/path)"
            )
        body = rest
    else:
        if rest == "" or rest.startswith("/"):
            raise InvalidLocationError(
                f"lakehouse URI {uri!r} names no bucket or container: write {scheme}://bucket/prefix"
            )
        body = rest
    if not _is_qualified_posix(body):
        raise InvalidLocationError(
            f"lakehouse URI {uri!r} is not qualified: its POSIX normalisation differs "
            "(remove '.', '..' and empty segments)"
        )
    return f"{scheme}://{body.rstrip('/')}/"


def split_root_uri(root_uri: str) -> tuple[str, str]:
    """Split a normalised root URI into (scheme, path-without-scheme, ending in '/')."""
    match = _SCHEME_RE.match(root_uri)
    if match is None:
        raise InvalidLocationError(f"{root_uri!r} is not a normalised root URI")
    return match.group(1), match.group(2)


def check_relative_path(path: str) -> str:
    """Refuse a stored path that is absolute, has a scheme, or escapes the root; return it."""
    if isinstance(path, str) and _PLAIN_OPTIMIZED_RE.fullmatch(path):
        return path
    if not isinstance(path, str) or path == "":
        raise InvalidLocationError(f"empty stored path {path!r}")
    if _SCHEME_RE.match(path) or path.startswith("/") or "\\" in path:
        raise InvalidLocationError(
            f"stored path {path!r} is not relative to the lakehouse root; refusing to follow it"
        )
    if _CONTROL_RE.search(path):
        raise InvalidLocationError(f"stored path {path!r} contains control characters")
    # normpath leaves a leading '..' alone ('../x' normalises to itself), so segments are
    # checked explicitly as well.
    segments = path.split("/")
    if path.endswith("/") or not _is_qualified_posix(path) or ".." in segments or "." in segments:
        raise InvalidLocationError(
            f"stored path {path!r} is not qualified ('.', '..' or empty segments); it could escape the root"
        )
    return path


def not_plain_optimized(paths: Iterable[str]) -> list[str]:
    """The paths that are not of the plain optimized shape: every one ``check_relative_path``
    needs to look at closely, and every full URI. The shape is matched as one Arrow column
    (RE2): gc's walk checks about a million stored paths per million tables, a tenth of a
    microsecond each this way, against half a microsecond for a match and a call per path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    listed = list(paths)
    try:
        plain = pc.match_substring_regex(
            pa.array(listed, pa.string()), _PLAIN_OPTIMIZED_RE2
        ).to_pylist()
    except (UnicodeError, pa.ArrowException, TypeError):  # not UTF-8, or not a string at all
        return [
            path
            for path in listed
            if not (isinstance(path, str) and _PLAIN_OPTIMIZED_RE.fullmatch(path))
        ]
    return [path for path, is_plain in zip(listed, plain, strict=True) if not is_plain]


def is_full_uri(location: str) -> bool:
    return _SCHEME_RE.match(location) is not None


def external_root_for(location: str, external_roots: Iterable[str]) -> str | None:
    """The export-source root that the full URI ``location`` lies under, or None: a partial
    export points back into its source, and nowhere else outside its own root."""
    for root in external_roots:
        if location.startswith(root):
            return root
    return None


def is_forged_pointer(location: str, external_roots: tuple[str, ...]) -> bool:
    """A full URI that does not lead into an export's source root. An export source is read,
    never walked or deleted by gc; any other full URI is forged or damaged, and gc must refuse
    rather than skip it, or it would delete what lies below."""
    return is_full_uri(location) and external_root_for(location, external_roots) is None


def escaping_value(values: Iterable[str], external_roots: tuple[str, ...]) -> str | None:
    """A value that points out of the lakehouse root (``../x``, ``/abs``, a full URI
    not in an export's source), or None. gc refuses a version with one: such a pointer is
    forged or damaged, and a version gc cannot fully account for is not one to collect around."""
    # Nearly every value is a plain optimized path, which passes every rule: only the rest are
    # looked at one by one.
    for value in not_plain_optimized(values):
        if is_full_uri(value):
            if is_forged_pointer(value, external_roots):
                return value
            continue
        try:
            check_relative_path(value)
        except InvalidLocationError:
            return value
    return None


# ---------------------------------------------------------------------------------------------
# Path optimization and file names


def optimize_path(original: str) -> str:
    """The optimized storage path of an original file path (docs/format.md#path-optimization)."""
    name = original.replace("/", "-")
    hashed = mmh3.hash(name.encode("utf-8"), 0, signed=False)
    bits = format(hashed & ((1 << OPTIMIZED_PREFIX_BITS) - 1), f"0{OPTIMIZED_PREFIX_BITS}b")
    return f"{bits[0:4]}/{bits[4:8]}/{bits[8:12]}/{bits[12:20]}-{name}"


def real_root_uri(root_uri: str) -> str:
    """``root_uri`` (normalised, ending in ``/``) with every link resolved when it is on this
    machine's disk (``file://``): two names of one folder give one answer. Other schemes have
    no links and come back as they are."""
    if not root_uri.startswith("file://"):
        return root_uri
    real = os.path.realpath(root_uri.removeprefix("file://").rstrip("/") or "/")
    return "file://" + real.rstrip("/") + "/"


def root_contains(outer: str, inner: str) -> bool:
    """True when root URI ``inner`` is root URI ``outer`` or lies inside it, links resolved
    (``real_root_uri``): an export target named through a link to its source is its source."""
    outer_real, inner_real = real_root_uri(outer), real_root_uri(inner)
    return inner_real.startswith(outer_real)


def root_node_file_name(version: int) -> str:
    """``_`` + the 32-bit binary of ``version`` reversed + ``.arrow``."""
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION:
        raise InvalidLocationError(f"version {version!r} is outside 0..{MAX_VERSION}")
    return "_" + format(version, f"0{ROOT_VERSION_BITS}b")[::-1] + NODE_FILE_SUFFIX


def version_from_root_node_file_name(name: str) -> int:
    """Inverse of ``root_node_file_name``; accepts the bare name or a path ending in it."""
    base = name.rsplit("/", 1)[-1]
    match = _ROOT_NAME_RE.match(base)
    if match is None:
        raise InvalidLocationError(
            f"{name!r} is not a root node file name (_<32 binary digits>.arrow)"
        )
    return int(match.group(1)[::-1], 2)


def is_root_node_file_name(name: str) -> bool:
    return _ROOT_NAME_RE.match(name) is not None


def new_node_file_path() -> str:
    return optimize_path(f"node-{uuid.uuid4()}{NODE_FILE_SUFFIX}")


def new_namespace_def_path(ns: str) -> str:
    _check_name_for_path(ns, "namespace")
    return _new_def_path("namespace", ns)


def new_table_def_path(ns: str, table: str) -> str:
    _check_name_for_path(ns, "namespace")
    _check_name_for_path(table, "table")
    return _new_def_path("table", f"{table}-{ns}")


def new_view_def_path(ns: str, view: str) -> str:
    _check_name_for_path(ns, "namespace")
    _check_name_for_path(view, "view")
    return _new_def_path("view", f"{view}-{ns}")


# The longest file name (one path segment) local file systems take: ext4, XFS, APFS.
FILE_NAME_SEGMENT_MAX_BYTES: Final = 255
# What precedes the original name in an optimized file name: the hash bits the directories do
# not take, and a dash ("bbbbbbbb-").
_OPTIMIZED_NAME_HEAD_BYTES: Final = OPTIMIZED_PREFIX_BITS - 4 * HASH_DIRECTORY_LEVELS + 1


def _new_def_path(kind: str, identifier: str) -> str:
    """``{kind}-{identifier}-{uuid}.binpb``, optimized: a definition file path, with two
    write-side liberties (docs/format.md#file-names; readers never parse the identifier):

    - a ``\\`` in a name is written as ``-``: a stored path may not hold one
      (``check_relative_path``), and a name may (docs/format.md#object-names);
    - the identifier is cut, at a character boundary, to keep the file name within
      ``FILE_NAME_SEGMENT_MAX_BYTES``: two names at the default limits (100 bytes each) made a
      259-byte name, which a local file system refuses ("File name too long")."""
    suffix = f"-{uuid.uuid4()}{DEF_FILE_SUFFIX}"
    room = FILE_NAME_SEGMENT_MAX_BYTES - _OPTIMIZED_NAME_HEAD_BYTES - len(kind) - 1 - len(suffix)
    encoded = identifier.replace("\\", "-").encode("utf-8")
    written = encoded[:room].decode("utf-8", errors="ignore")  # a cut character is dropped whole
    return optimize_path(f"{kind}-{written}{suffix}")


def new_lakehouse_def_path() -> str:
    return f"{LAKEHOUSE_DEF_PREFIX}{uuid.uuid4()}{DEF_FILE_SUFFIX}"


def new_temp_path(directory: str) -> str:
    """A temporary file in ``directory`` ('' for the root) for an atomic exclusive create."""
    name = f"{TEMP_FILE_PREFIX}{uuid.uuid4()}"
    return f"{directory}/{name}" if directory else name


def _check_name_for_path(name: str, what: str) -> None:
    from lakecore.errors import InvalidNameError

    if not isinstance(name, str) or name == "":
        raise InvalidNameError(f"{what} name {name!r} is empty")
    bad = [c for c in name if ord(c) <= 0x20 or ord(c) == 0x7F]
    if bad:
        raise InvalidNameError(
            f"{what} name {name!r} contains {bad[0]!r}: control characters, space and DEL are not allowed"
        )


@dataclass(frozen=True)
class ClassifiedPath:
    kind: FileKind
    version: int | None = None


_CLASSIFIED_HASHED: Final = (
    None,
    ClassifiedPath(FileKind.NODE),
    ClassifiedPath(FileKind.NAMESPACE_DEF),
    ClassifiedPath(FileKind.TABLE_DEF),
    ClassifiedPath(FileKind.VIEW_DEF),
)
_CLASSIFIED_HINT: Final = ClassifiedPath(FileKind.LATEST_HINT)
_CLASSIFIED_LAKEHOUSE_DEF: Final = ClassifiedPath(FileKind.LAKEHOUSE_DEF)
_CLASSIFIED_TEMP: Final = ClassifiedPath(FileKind.TEMP)


def _hashed_group(path: str) -> int:
    """1, 2, 3 or 4 for an optimized node, namespace, table or view definition path (the head's
    group), 0 for anything else: another kind of file, or a look-alike.

    An optimized path only counts when its hash prefix is the one its name hashes to, so a
    look-alike file dropped into a hash directory is reported rather than treated as ours."""
    head = _HASHED_HEAD_RE.match(path)
    if head is None:
        return 0
    group = head.lastindex or 0
    tail = len(path) - _HASHED_TAIL_LENGTH
    # A node's name is ``node-UUID.arrow``; a definition's ``namespace-``, ``table-`` or
    # ``view-``, at
    # least one character of its own on one line, then ``-UUID.binpb``.
    if group == 1:
        if tail != head.end() or not path.endswith(NODE_FILE_SUFFIX):
            return 0
    elif (
        tail <= head.end() or not path.endswith(DEF_FILE_SUFFIX) or "\n" in path[head.end() : tail]
    ):
        return 0
    if _HASHED_TAIL_RE.fullmatch(path, tail) is None:
        return 0
    try:
        return group if _prefix_is_the_names(path) else 0
    except UnicodeEncodeError:  # a local name that is not UTF-8 (surrogate-escaped): not ours
        return 0


def _prefix_is_the_names(path: str) -> bool:
    """``optimize_path(name) == path`` for a path of the hashed shape, without building the
    string: a name with '/' (it would have become '-') or a prefix its name does not hash to is
    a look-alike."""
    name = path[_HASHED_NAME_START:]
    return "/" not in name and int(path[0:4] + path[5:9] + path[10:14] + path[15:23], 2) == (
        mmh3.hash(name.encode("utf-8"), 0, signed=False) & _PREFIX_MASK
    )


_HASHED_KIND_VALUES: Final = (
    None,
    FileKind.NODE.value,
    FileKind.NAMESPACE_DEF.value,
    FileKind.TABLE_DEF.value,
    FileKind.VIEW_DEF.value,
)


def classify_path(path: str) -> ClassifiedPath | None:
    """What a path relative to the root is, by lakecore's naming rules; None if foreign.
    Hash-directory files are tried first: gc classifies every file of the lakehouse."""
    group = _hashed_group(path)
    if group:
        return _CLASSIFIED_HASHED[group]
    root_match = _ROOT_NAME_RE.match(path)
    if root_match:
        return ClassifiedPath(FileKind.ROOT_NODE, int(root_match.group(1)[::-1], 2))
    if path == LATEST_HINT_FILE_NAME:
        return _CLASSIFIED_HINT
    if _LAKEHOUSE_DEF_RE.match(path):
        return _CLASSIFIED_LAKEHOUSE_DEF
    if _TEMP_RE.match(path):
        return _CLASSIFIED_TEMP
    return None


# A hash-directory file's kind by the first two characters of its name.
_HASHED_KIND_BY_HEAD: Final = {
    "no": FileKind.NODE.value,
    "na": FileKind.NAMESPACE_DEF.value,
    "ta": FileKind.TABLE_DEF.value,
    "vi": FileKind.VIEW_DEF.value,
}


def kind_values(paths: Sequence[str]) -> list[str | None]:
    """``kind_value`` of every path; for gc's listing, a million at a time. The names' shape is
    matched as one Arrow column (RE2) and only the hash is a call per path: 0.8 us a path, 1.5
    us through ``kind_value``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        shaped = pc.match_substring_regex(
            pa.array(paths, pa.string()), _HASHED_FILE_RE2
        ).to_pylist()
    except (UnicodeError, pa.ArrowException):  # a name that is not UTF-8 (surrogate-escaped)
        return [kind_value(path) for path in paths]
    start = _HASHED_NAME_START
    return [
        (_HASHED_KIND_BY_HEAD[path[start : start + 2]] if _prefix_is_the_names(path) else None)
        if is_shaped
        else kind_value(path)
        for path, is_shaped in zip(paths, shaped, strict=True)
    ]


def kind_value(path: str) -> str | None:
    """``classify_path(path).kind.value``, None if foreign (a name that is not UTF-8 is);
    for a hash-directory file without the objects (an enum's ``value`` alone costs a quarter
    of a microsecond)."""
    group = _hashed_group(path)
    if group:
        return _HASHED_KIND_VALUES[group]
    classified = classify_path(path)
    return None if classified is None else classified.kind.value


def hash_directories() -> list[str]:
    """All 4,096 three-level hash directories ``bbbb/bbbb/bbbb`` in which optimized files live."""
    return hash_directory_prefixes(HASH_DIRECTORY_LEVELS)


def hash_directory_prefixes(levels: int) -> list[str]:
    """The directories ``levels`` segments deep above (or at, for 3) the hash directories, in
    order: 16 (``0000`` .. ``1111``), 256 (``bbbb/bbbb``) or all 4,096. Together they hold
    every optimized file, each exactly once."""
    if not 1 <= levels <= HASH_DIRECTORY_LEVELS:
        raise ValueError(
            f"hash directory levels {levels} is not between 1 and {HASH_DIRECTORY_LEVELS}"
        )
    out = []
    for i in range(1 << (4 * levels)):
        bits = format(i, f"0{4 * levels}b")
        out.append("/".join(bits[j : j + 4] for j in range(0, 4 * levels, 4)))
    return out
