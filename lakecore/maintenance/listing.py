"""Listing a lakehouse root for maintenance: what is there, and what lakecore may delete.

Only the top level and the 4,096 hash directories are listed: lakecore writes nowhere else. A
lakehouse is listed with the fewest requests that cover it: a small one (at most
``gc_flat_listing_max_files`` files) in one flat paged listing of the root (a request per 1,000
files on S3), whose files outside the hash directories are dropped; a large one split into
the 16, 256 or 4,096 directories at or above the hash directories (``listing_levels``: just
enough for the requests in flight), each listed recursively and paged, fanned out over tasks
with several requests in flight each (``list_directories``). ``list_small_root`` tries the
flat listing and gives up as soon as the lakehouse turns out larger: after more than
``max_files`` files, or earlier, after a page whose place in the hash directories says the
whole holds more than 1.25 times that (``estimated_files``: the files spread uniformly over
them). The fanned-out listing comes as columns (``ListedColumns``) and, on a local file
system, without a stat per file: only the files gc may delete need their time, and
``stat_listed`` reads it for them after the join. ``listing_way`` makes that choice, and the
choice of how workers share the listing, before any of it runs.

A listed file is classified by its *name* (``locations.classify_path``): lakecore's own kinds,
or ``foreign`` (reported, never touched). Only node files, namespace, table and lakehouse
definitions and ``.lakecore-tmp-*`` leftovers are deletable; root files and the hint never are
(expiring versions is version compaction's job).

A listing failure travels in the stream as a record whose path starts with ``ERROR_KEY`` (a
control character no stored path can hold), so that a distributed listing can report it to the
driver, which then refuses to delete anything."""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeVar

from lakecore.core.locations import (
    HASH_DIRECTORY_LEVELS,
    FileKind,
    classify_path,
    hash_directory_prefixes,
    kind_value,
    kind_values,
)
from lakecore.core.storage import FileInfo, PathListing, Storage, request_pool
from lakecore.errors import (
    ExitCode,
    InvalidArgumentError,
    LakecoreError,
    NotFoundError,
)

DELETABLE_KINDS: Final = frozenset(
    {
        FileKind.NODE,
        FileKind.NAMESPACE_DEF,
        FileKind.TABLE_DEF,
        FileKind.VIEW_DEF,
        FileKind.LAKEHOUSE_DEF,
        FileKind.TEMP,
    }
)
FOREIGN: Final = "foreign"
# Starts an error record in a stream of (path, size) records or a listing. Control characters
# never occur in a stored path (check_relative_path refuses them): it cannot be a real file.
ERROR_KEY: Final = "\x00error: "
UNKNOWN_SIZE: Final = -1
_DELETABLE_NAMES: Final = frozenset(kind.value for kind in DELETABLE_KINDS)
DELETABLE_KIND_NAMES: Final = tuple(sorted(_DELETABLE_NAMES))
# A path inside one of the 4,096 hash directories (``locations.hash_directories``).
_IN_HASH_DIRECTORY: Final = re.compile(r"[01]{4}/[01]{4}/[01]{4}/")


class GcRefusedError(LakecoreError):
    """gc cannot prove what is live (a retained root or node is missing or unreadable, the
    listing failed, ...); nothing was deleted. Repair the named file (or restore it) first."""

    exit_code = 4

    def __init__(
        self, reason: str, *, over_retained: bool = False, damage_marked: bool = False
    ) -> None:
        super().__init__(f"{reason}; nothing was deleted")
        # A refusal over what a retained version reaches (its tree's top, a subtree, a hash
        # directory, an orphan's stat) may be damage, which gc tells where the refusal leaves
        # the run (``gc.explained_refusal``): by a walk of the retained versions, made when the
        # cause, or a listing or walk record marked as damage (``damage_marked``), says it may
        # be. Any other refusal stands as it is.
        self.over_retained = over_retained
        self.damage_marked = damage_marked


class GcDamagedError(GcRefusedError):
    """gc refused because a retained version's files are damaged (their bytes, not a failed
    read): a rerun cannot help, so exit 6; the message names the versions and the repair."""

    exit_code = ExitCode.DAMAGED


# ---------------------------------------------------------------------------------------------
# Listing


class ListedFile(NamedTuple):
    """One listed file and what its name says it is (a FileKind value, FOREIGN, or ERROR_KEY
    for a directory that could not be listed, with the reason as ``path``)."""

    path: str
    size: int
    mtime_millis: int
    kind: str


def kind_of(path: str) -> str:
    return kind_value(path) or FOREIGN


def shown_path(path: str) -> str:
    """``path`` as the listing hands it on. A local file system may hold a name that is not
    UTF-8: os.scandir gives it with surrogate escapes, which neither Arrow nor a JSON report
    can hold, so it is shown with its bytes as ``\\xNN``. lakecore's names are UTF-8, so such a
    file is foreign (``kind_value``), and gc never deletes a foreign file: the shown name is
    only ever reported."""
    if path.isascii():
        return path
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return path


def _listed(path: str, size: int, mtime_millis: int) -> ListedFile:
    return ListedFile(shown_path(path), size, mtime_millis, kind_of(path))


def is_deletable(kind: str) -> bool:
    return kind in _DELETABLE_NAMES


def listing_levels(concurrency: int) -> int:
    """How deep to split the listing (``locations.hash_directory_prefixes``): the fewest
    directories, 16, 256 or 4,096, that still give each of ``concurrency`` requests in flight
    one of its own. Each directory is listed recursively, a request per 1,000 files, so the
    requests are about ``directories + files / 1000``: a 20k-file lakehouse on 8 requests in
    flight is 16 directories and 36 requests, where the 4,096 hash directories took 4,096
    (17 s at 20 ms a request)."""
    levels = 1
    while levels < HASH_DIRECTORY_LEVELS and (1 << (4 * levels)) < concurrency:
        levels += 1
    return levels


def _above_hash_directories(directory: str) -> bool:
    return directory.count("/") < HASH_DIRECTORY_LEVELS - 1


def list_directory(storage: Storage, directory: str) -> list[ListedFile]:
    """Every file in the hash directories under ``directory`` (a hash directory or one above
    it; an executor unit). A failure comes back as one ERROR_KEY record instead of an
    exception, so the driver can name it in one line."""
    try:
        infos = storage.list(directory)
    except LakecoreError as exc:
        return [ListedFile(f"listing {directory}/: {exc.one_line()}", 0, 0, ERROR_KEY)]
    if _above_hash_directories(directory):
        infos = [i for i in infos if _IN_HASH_DIRECTORY.match(i.path)]
    return [_listed(i.path, i.size, i.mtime_millis) for i in infos]


def list_directories(
    storage: Storage, directories: Iterable[str], threads: int = 1
) -> Iterator[ListedFile]:
    """``list_directory`` over many directories (an executor unit, one call per partition),
    ``threads`` requests in flight: on an object store a listing waits on the network, and
    most hash directories of a small lakehouse are empty. A local file system is listed in
    this thread alone: there the listing is CPU-bound, and threads only contend for the
    interpreter (twice as slow at 200k files)."""
    for listed in _in_order(storage, directories, threads, list_directory):
        yield from listed


class ListedColumns:
    """Listed files as columns, in ``ListedFile`` order (path, size, mtime_millis, kind): the
    form a distributed listing hands to Arrow. Size and time are None where the storage's
    listing did not read them (``Storage.list_paths``: a local file system); ``stat_listed``
    reads them for the files that need them."""

    __slots__ = ("kinds", "mtimes_millis", "paths", "sizes")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.sizes: list[int | None] = []
        self.mtimes_millis: list[int | None] = []
        self.kinds: list[str] = []

    def __len__(self) -> int:
        return len(self.paths)

    def add(self, listing: PathListing) -> None:
        count = len(listing.paths)
        # One check for the whole listing: its names are nearly always ASCII.
        self.paths.extend(
            listing.paths if "".join(listing.paths).isascii() else map(shown_path, listing.paths)
        )
        self.kinds.extend(kind or FOREIGN for kind in kind_values(listing.paths))
        self.sizes.extend(itertools.repeat(None, count) if listing.sizes is None else listing.sizes)
        self.mtimes_millis.extend(
            itertools.repeat(None, count)
            if listing.mtimes_millis is None
            else listing.mtimes_millis
        )

    def extend(self, other: ListedColumns) -> None:
        self.paths.extend(other.paths)
        self.sizes.extend(other.sizes)
        self.mtimes_millis.extend(other.mtimes_millis)
        self.kinds.extend(other.kinds)

    def add_error(self, reason: str) -> None:
        self.paths.append(reason)
        self.sizes.append(0)
        self.mtimes_millis.append(0)
        self.kinds.append(ERROR_KEY)

    def columns(self) -> tuple[list[str], list[int | None], list[int | None], list[str]]:
        return self.paths, self.sizes, self.mtimes_millis, self.kinds


def list_directory_columns(storage: Storage, directory: str) -> ListedColumns:
    """``list_directory`` as columns, without a call per file (``Storage.list_paths``)."""
    listed = ListedColumns()
    try:
        found = storage.list_paths(directory)
    except LakecoreError as exc:
        listed.add_error(f"listing {directory}/: {exc.one_line()}")
        return listed
    if _above_hash_directories(directory):
        found = _in_hash_directories(found)
    listed.add(found)
    return listed


def _in_hash_directories(listing: PathListing) -> PathListing:
    keep = [i for i, path in enumerate(listing.paths) if _IN_HASH_DIRECTORY.match(path)]
    if len(keep) == len(listing.paths):
        return listing

    def kept(column: list[int] | None) -> list[int] | None:
        return None if column is None else [column[i] for i in keep]

    return PathListing(
        [listing.paths[i] for i in keep], kept(listing.sizes), kept(listing.mtimes_millis)
    )


def list_directories_columns(
    storage: Storage, directories: Iterable[str], threads: int = 1, rows: int = 8192
) -> Iterator[ListedColumns]:
    """``list_directories`` as columns, in chunks of at least ``rows`` files (the last one
    may be shorter): a million listed files cost about 8 µs less each than as rows, most of it
    the stat a local listing no longer makes."""
    chunk = ListedColumns()
    for listed in _in_order(storage, directories, threads, list_directory_columns):
        chunk.extend(listed)
        if len(chunk) >= rows:
            yield chunk
            chunk = ListedColumns()
    if len(chunk):
        yield chunk


def stat_listed(storage: Storage, files: Iterable[tuple[str, str]]) -> Iterator[ListedFile]:
    """The size and modification time of listed files, given as (path, kind), whose listing
    did not carry them (an executor unit). A file deleted since the listing is left out (gone,
    so nothing to judge); a file that cannot be statted is an ERROR_KEY record."""
    for path, kind in files:
        try:
            info = storage.info(path)
        except NotFoundError:
            continue
        except LakecoreError as exc:
            yield ListedFile(f"statting {storage.uri(path)}: {exc.one_line()}", 0, 0, ERROR_KEY)
            continue
        yield ListedFile(path, info.size, info.mtime_millis, kind)


Listed = TypeVar("Listed")


def _in_order(
    storage: Storage,
    directories: Iterable[str],
    threads: int,
    unit: Callable[[Storage, str], Listed],
) -> Iterator[Listed]:
    """``unit(storage, directory)`` for every directory, in order, ``threads`` in flight when
    the storage waits on the network (one after another otherwise)."""
    directories = list(directories)
    if threads <= 1 or len(directories) <= 1 or not storage.waits_on_network:
        for directory in directories:
            yield unit(storage, directory)
        return
    pool = request_pool(threads)
    # A sliding window of ``threads`` requests, answered in order: no more in flight than asked
    # for even when the shared pool is larger, and a consumer that stops early leaves at most
    # the window running.
    pending = iter(directories)
    in_flight: deque[Future[Listed]] = deque(
        pool.submit(unit, storage, d) for d in itertools.islice(pending, threads)
    )
    while in_flight:
        listed = in_flight.popleft().result()
        following = next(pending, None)
        if following is not None:
            in_flight.append(pool.submit(unit, storage, following))
        yield listed


def list_small_root(storage: Storage, max_files: int) -> list[ListedFile] | None:
    """Every file in the hash directories through one flat paged listing of the root, or None
    when the root holds more than ``max_files`` files (list the hash directories one by one
    then). The top level is not included (``list_top`` lists it); files in other folders are
    left out, as the per-directory listing leaves them out."""
    if max_files <= 0:
        return None
    listed = 0
    in_hash_directories: list[FileInfo] = []  # each page's files matched once, as it comes
    try:
        for page in storage.list_pages("", limit=max_files):
            listed += len(page.files)
            if listed > max_files:
                return None
            in_hash_directories.extend(i for i in page.files if _IN_HASH_DIRECTORY.match(i.path))
            if page.more and estimated_files(in_hash_directories) > ESTIMATE_MARGIN * max_files:
                return None  # before the next request: the pages so far say it is large
    except InvalidArgumentError:
        raise  # a bad setting (an unknown AWS profile, a missing file system): exit 2, not a retry
    except LakecoreError as exc:
        raise GcRefusedError(f"could not list {storage.root_uri}: {exc.one_line()}") from exc
    return [_listed(i.path, i.size, i.mtime_millis) for i in in_hash_directories]


# How far over ``max_files`` the estimate must be before the flat listing gives up early. The
# estimate from one page of 1,000 files is good to about 3% (one standard deviation; 20k files
# on moto: 19,645 after the first page, 19,185-20,039 after the next nine), so a lakehouse
# at the limit is not fanned out on a chance high count.
ESTIMATE_MARGIN: Final = 1.25


def estimated_files(in_hash_directories: list[FileInfo]) -> float:
    """How many files the hash directories hold, judged from the files of the first pages of
    a listing in key order that are in them. Optimized names spread files uniformly over the
    4,096 hash directories (their bits hash the name), and the listing visits them in order:
    after the first pages, the share of the directories it has passed is the share of the files
    it has seen. Without a file in a hash directory at the end, nothing to judge by: 0."""
    last = in_hash_directories[-1].path if in_hash_directories else ""
    if not _IN_HASH_DIRECTORY.match(last):
        return 0.0
    directory = int(last[0:4] + last[5:9] + last[10:14], 2)
    passed = (directory + 1) / (
        1 << (4 * HASH_DIRECTORY_LEVELS)
    )  # up to the end of the last one: a low guess
    return len(in_hash_directories) / passed


# ---------------------------------------------------------------------------------------------
# How to list

# How a lakehouse was listed (gc's report: ``listing``): ``ListingWay.how``.
FLAT: Final = "flat"
HASH_DIRECTORIES: Final = "hash-directories"
WALKED_ALONGSIDE: Final = "hash-directories, walked alongside"


@dataclass(frozen=True)
class ListingWay:
    """How a lakehouse is listed (``listing_way``), chosen before a worker starts.

    - ``FLAT``, small (what the retained trees reach is at most ``max_flat_files`` paths and
      the listing confirms it): one flat listing, made while choosing (``flat``).
    - ``HASH_DIRECTORIES``, large, on local disk: the directories at or above the hash
      directories, as many as the workers can use (``listing_levels``), listed by workers of
      their own (``tasks``), and the walk by others.
    - ``WALKED_ALONGSIDE``, large, on an object store: a worker per core, each listing its
      share of the directories, with requests enough in flight for its threads, and walking its
      share of the subtrees at the same time (``side_by_side``): both wait on responses, so a
      worker waits for the slower, not for the sum.
    """

    how: str
    flat: list[ListedFile] | None  # FLAT: every file under the root
    directories: list[str]  # otherwise: the directories listed one by one
    tasks: int  # otherwise: the listing's workers

    @property
    def directories_listed(self) -> int | None:
        """gc's report's ``listing_directories``: None for a flat listing."""
        return None if self.flat is not None else len(self.directories)


def listing_way(
    storage: Storage,
    reached_at_least: int,
    *,
    max_flat_files: int,
    parallelism: int,
    cores: Callable[[], int],
    threads_per_task: int,
) -> ListingWay:
    """How to list a lakehouse whose retained versions reach at least ``reached_at_least``
    files: flat, listed here, when that and the listing say it holds at most
    ``max_flat_files``; else in hash directories, by ``parallelism`` workers on local disk or
    one per core (``cores()``, asked only then: on Spark Connect the answer costs a query) with
    ``threads_per_task`` requests in flight each on an object store."""
    small = reached_at_least <= max_flat_files
    flat = list_small_root(storage, max_flat_files) if small else None
    if flat is not None:
        return ListingWay(FLAT, flat, [], 0)
    if not storage.waits_on_network:
        how, tasks, concurrency = HASH_DIRECTORIES, parallelism, parallelism
    else:
        # A worker per core, each with its requests in flight: every worker needs directories
        # enough for its threads, and more workers would only split them thinner.
        tasks = cores()
        how, concurrency = WALKED_ALONGSIDE, tasks * threads_per_task
    return ListingWay(how, None, hash_directory_prefixes(listing_levels(concurrency)), tasks)


def list_top(storage: Storage) -> list[ListedFile]:
    """The files directly under the root (roots, definitions, hint, temp files, foreign)."""
    try:
        infos = storage.list_top_level()
    except NotFoundError:
        raise  # no bucket, no root: nothing to collect, and a rerun will not find one (exit 5)
    except InvalidArgumentError:
        raise  # a bad setting (an unknown AWS profile, a missing file system): exit 2, not a retry
    except LakecoreError as exc:
        raise GcRefusedError(
            f"could not list the top of {storage.root_uri}: {exc.one_line()}"
        ) from exc
    return [_listed(i.path, i.size, i.mtime_millis) for i in infos]


def root_version_of(path: str) -> int | None:
    """The version of a root node file at the top of the root, None for any other path."""
    classified = classify_path(path)
    if classified is None or classified.kind is not FileKind.ROOT_NODE:
        return None
    return classified.version


def is_error(path: str) -> bool:
    """True for the error records of ``run_reach_tasks``."""
    return path.startswith(ERROR_KEY)


def error_reason(path: str) -> str:
    return path[len(ERROR_KEY) :]
