"""``s3://`` roots (``s3a``/``s3n`` are normalised to ``s3``): reads, HEADs and PUTs by the
direct request path (``lakecore.core.storage.s3_requests``), everything else by s3fs, with the S3
API called directly for listing and deletion, so that every request is explicit about its
``Prefix``, batch size and precondition.

Rules:

- **The simple requests go direct.** GetObject (whole or a range), HeadObject and PutObject
  (conditional too) take ``s3_requests``, at a fifth of botocore's client CPU or less, unless
  the configuration asks for something it does not do (a proxy, requester pays, encryption
  settings, ...: ``s3_requests`` says what): then, as with ``lakecore_s3_requests=false``,
  every request goes through s3fs. Both paths raise the same exceptions for the same answers,
  so what follows holds for either. The direct client is built on first use, once per client.

- **Exclusive create is one conditional PUT.** A single ``PutObject`` with
  ``If-None-Match: *`` is both exclusive and atomic in content (S3 answers 412 when the key
  exists). Because botocore and s3fs retry a PUT whose response was lost, a 412 can mean "your
  own earlier attempt landed": when the existing object holds exactly our bytes the create
  counts as ours. (The direct path never sends a conditional PUT again once it may have
  reached the store: its failure says the outcome is unknown, and the commit reads back.)
  Root files carry their creation time and fresh file names, so two different
  writers never produce identical root bytes. A 409 (another conditional write to the key in
  flight) is retried a few times, as AWS documents.
- **A delete is batched by ``S3_MAX_DELETE_BATCH``**, S3's limit for DeleteObjects; a key S3
  refuses is named, and the keys it took are still reported as deleted.
- **Nothing hangs.** Every call carries the overall deadline (``options.TIMEOUT_OPTION``),
  counted from the start of the call: the direct client's build on first use is inside it.
- **A listing costs its bytes, not its timestamps.** botocore parses every timestamp of a
  response with dateutil, about 160 us each: 85% of the client's CPU for a page of 1,000 keys
  (186 ms a page, 27 ms without), which made a listing of 100k objects take 18 CPU-seconds in
  one process, and 0.2 ms of each GET's 3.8 (its Last-Modified header). Each S3 client gets a
  session of its own whose responses parse S3's two forms (``2026-11-27T22:09:38.000Z``,
  ``Fri, 27 Nov 2026 22:09:38 GMT``) with the standard library (``parse_s3_timestamp``); any
  other form still goes to botocore's parser.
- **One client per process, a wide pool.** Every synchronous s3fs client runs its requests as
  coroutines on fsspec's one IO thread per process, whichever thread calls it, so a client per
  thread bought no concurrency and cost 0.1-0.2 CPU-s each to build (16 root-reading threads:
  16 clients). All threads of a process share one (``lakecore.core.storage.clients``), and its
  connection pool is widened to ``S3_MAX_POOL_CONNECTIONS`` (botocore's default of 10 would
  queue the request pool's and the prefetches' requests) unless
  ``config_kwargs.max_pool_connections`` says otherwise.
- **A wrong endpoint fails at once.** An explicit endpoint (``endpoint_url``,
  ``AWS_ENDPOINT_URL``) gets one TCP connect before its client is built, once per process:
  where nothing listens (refused, a name that does not resolve, no route) that is a
  ``StorageError`` naming the endpoint, not 20-34 s of botocore's and s3fs's retries ending in
  the same verdict. Skipped where a proxy carries the requests; a probe that times out decides
  nothing. The cost: a server restarting at that moment fails the job (exit 4, which the DAGs
  retry) instead of being waited for.
- **The store's clock** (``clock_millis``) is the Date of a one-key listing of the root.
"""

from __future__ import annotations

import copy
import errno
import os
import re
import socket
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from lakecore.core.storage.backend import (
    Backend,
    DeleteFailures,
    FileInfo,
    ListedPage,
    PathListing,
    columns_of,
    file_info_or_none,
    to_millis,
)
from lakecore.core.storage.options import (
    s3_requests_enabled,
    timeout_seconds,
    without_lakecore_options,
)
from lakecore.core.storage.s3_requests import SINGLE_PUT_MAX_BYTES, LazyS3Requests, S3Requests
from lakecore.core.storage.translate import find_client_error
from lakecore.errors import InvalidArgumentError, StorageError

# S3's DeleteObjects accepts at most 1000 keys per request: the one definition of that limit
# (the settings' gc_delete_batch_size and Storage.delete's default read it).
S3_MAX_DELETE_BATCH = 1000
# S3 answers 409 ConditionalRequestConflict when another conditional write to the same key is
# in flight; AWS documents that the request should be retried. A few quick tries suffice: the
# retry then gets a definite 412 or 200.
_CONFLICT_RETRIES = 5
_CONFLICT_BACKOFF_SECONDS = 0.05
# Connections one process's S3 client may hold open: above the requests a process puts in
# flight at once (a listing's threads, root reads, a walk's prefetches), below what would
# exhaust file descriptors.
S3_MAX_POOL_CONNECTIONS: Final = 64


def open_s3(root_uri: str, root_path: str, options: Mapping[str, Any]) -> Backend:
    """A backend for the S3 root ``root_uri`` (``root_path`` = bucket/prefix/)."""
    import fsspec

    client_options = s3_client_options(options)
    endpoint = s3_endpoint(options)
    if endpoint is not None:
        _refuse_an_endpoint_without_scheme(root_uri, endpoint)
        _refuse_an_endpoint_nothing_answers(root_uri, endpoint, client_options["config_kwargs"])
    # The direct path is configured from the same arguments as s3fs, before the session.
    direct_options = dict(client_options) if s3_requests_enabled(options, root_uri) else None
    # s3fs makes a session from the options it does not know (``profile``) unless given one.
    client_options["session"] = _s3_session(client_options.pop("profile", None))
    fs = fsspec.filesystem("s3", **client_options)
    bucket, _, key_prefix = root_path.partition("/")
    return S3Backend(fs, bucket, key_prefix, timeout_seconds(options, root_uri), direct_options)


def s3_endpoint(options: Mapping[str, Any]) -> str | None:
    """The endpoint the options name, else the standard variables', else None (AWS's own)."""
    client_kwargs = options.get("client_kwargs") or {}
    endpoint = client_kwargs.get("endpoint_url") or options.get("endpoint_url")
    if endpoint:
        return str(endpoint)
    # The standard variables, read in the process that uses the client (an executor's
    # environment may differ from the driver's).
    env = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return env or None


def s3_client_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The s3fs arguments: the endpoint filled in, the pool widened, no instance cache."""
    client_options = without_lakecore_options(options)
    endpoint = s3_endpoint(options)
    if endpoint is not None and "endpoint_url" not in client_options:
        client_options["client_kwargs"] = {
            **(client_options.get("client_kwargs") or {}),
            "endpoint_url": endpoint,
        }
    # Key and secret, when not in the options, come from botocore's usual chain
    # (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles, instance roles).
    client_options["skip_instance_cache"] = True
    # A deep copy: botocore rewrites the retries entry in place, which changed the Storage's
    # own options (and so the key of its cached client) after the first request.
    client_options["config_kwargs"] = {
        "max_pool_connections": S3_MAX_POOL_CONNECTIONS,
        **copy.deepcopy(client_options.get("config_kwargs") or {}),
    }
    return client_options


class S3Backend:
    """``s3://`` roots through the direct request path, s3fs and direct S3 API calls."""

    def __init__(
        self,
        fs: Any,
        bucket: str,
        key_prefix: str,
        timeout: float,
        direct_options: dict[str, Any] | None = None,
    ) -> None:
        self.pid = os.getpid()
        self._fs = fs
        # Passed to every call: fsspec cancels the request after this many seconds. botocore's
        # read timeout does not cover a PUT waiting for "100 Continue", which can hang forever.
        self._timeout = timeout
        self._bucket = bucket
        self._key_prefix = key_prefix  # '' or ends in '/'
        # The direct path's client, built from s3fs's arguments on first use (None: off).
        self._direct_client = (
            None if direct_options is None else LazyS3Requests(direct_options, bucket, timeout)
        )

    def _direct(self) -> tuple[S3Requests | None, float]:
        """The direct request client, or None where s3fs serves every request (see the module
        doc), and the deadline of the request about to be made: building the client on first
        use (credentials by botocore's chain included) counts against it. A failure to build
        (a missing profile) is raised, and the next request tries again."""
        deadline = time.monotonic() + self._timeout
        if self._direct_client is None:
            return None, deadline
        return self._direct_client.client(deadline), deadline

    @staticmethod
    def _left(deadline: float) -> float:
        """What is left of ``deadline`` for an s3fs call (a moment at least: fsspec reads 0 as
        no timeout at all)."""
        return max(0.001, deadline - time.monotonic())

    def _key(self, rel: str) -> str:
        return self._key_prefix + rel

    def _fs_path(self, rel: str) -> str:
        return f"{self._bucket}/{self._key(rel)}"

    def read(self, rel: str) -> bytes:
        direct, deadline = self._direct()
        if direct is not None:
            # The whole object, no range: one GET whose full checksum can be checked.
            return direct.get(self._key(rel), deadline=deadline)
        # "bytes=0-" rather than no range: without one, s3fs first HEADs the object to decide
        # whether to fetch it in concurrent chunks, a second round trip (and, for large
        # objects, several GETs that could straddle an overwrite).
        return self._read_range(rel, 0, None, None, deadline)

    def read_range(self, rel: str, start: int, end: int | None) -> bytes:
        return self._read_range(rel, start, end, *self._direct())

    def _read_range(
        self,
        rel: str,
        start: int,
        end: int | None,
        direct: S3Requests | None,
        deadline: float,
    ) -> bytes:
        try:
            if direct is not None:
                return direct.get(self._key(rel), start, end, deadline=deadline)
            data: bytes = self._fs.cat_file(
                self._fs_path(rel), start=start, end=end, timeout=self._left(deadline)
            )
        except Exception as exc:
            # 416: start is at or past the end of an existing (possibly empty) object.
            if find_client_error(exc, codes=("InvalidRange",), statuses=(416,)):
                return b""
            raise
        return data

    def _head(self, rel: str) -> tuple[int, Any]:
        """(size, modification time as ``to_millis`` reads it)."""
        direct, deadline = self._direct()
        if direct is not None:
            head = direct.head(self._key(rel), deadline=deadline)
            return head.size, _http_date_or_none(head.last_modified)
        answer: dict[str, Any] = self._fs.call_s3(
            "head_object", Bucket=self._bucket, Key=self._key(rel), timeout=self._left(deadline)
        )
        return int(answer["ContentLength"]), answer.get("LastModified")

    def size(self, rel: str) -> int:
        return self._head(rel)[0]

    def info(self, rel: str) -> FileInfo:
        size, modified = self._head(rel)
        return FileInfo(rel, size, to_millis(modified))

    def exists(self, rel: str) -> bool:
        try:
            self._head(rel)
        except FileNotFoundError:
            return False
        return True

    def write(self, rel: str, data: bytes, durable: bool = True) -> None:
        # A single PUT (multipart above 100 MiB) is atomic on S3: readers see old or new, and
        # durable once acknowledged.
        direct, deadline = self._direct()
        if direct is not None and len(data) < SINGLE_PUT_MAX_BYTES:
            direct.put(self._key(rel), data, deadline=deadline)
            return
        self._fs.pipe_file(self._fs_path(rel), data, timeout=self._left(deadline))

    def _create(self, rel: str, data: bytes) -> None:
        """One conditional PUT (``If-None-Match: *``; multipart above 100 MiB)."""
        direct, deadline = self._direct()
        if direct is not None and len(data) < SINGLE_PUT_MAX_BYTES:
            direct.put(self._key(rel), data, if_none_match=True, deadline=deadline)
            return
        self._fs.pipe_file(self._fs_path(rel), data, mode="create", timeout=self._left(deadline))

    def sync(self) -> None:
        pass

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._create(rel, data)
                return True
            except Exception as exc:
                if isinstance(exc, FileExistsError) or find_client_error(
                    exc, codes=("PreconditionFailed",), statuses=(412,)
                ):
                    return self._holds_exactly(rel, data)
                conflict = find_client_error(
                    exc, codes=("ConditionalRequestConflict",), statuses=(409,)
                )
                if conflict and attempt + 1 < _CONFLICT_RETRIES:
                    time.sleep(_CONFLICT_BACKOFF_SECONDS * (attempt + 1))
                    continue
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _holds_exactly(self, rel: str, data: bytes) -> bool:
        """After a 412: True if the existing object is byte-for-byte ours (a retried PUT whose
        first attempt landed), False if someone else created it."""
        try:
            return bool(self.read(rel) == data)
        except FileNotFoundError:
            # Deleted between the 412 and now: it did exist, and it was not ours to claim.
            return False

    def _object_pages(self, prefix: str, delimiter: str | None) -> Iterator[ListedPage]:
        """``list_objects_v2`` a request at a time, each response as it comes (key order)."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
            if delimiter is not None:
                kwargs["Delimiter"] = delimiter
            if token is not None:
                kwargs["ContinuationToken"] = token
            page: dict[str, Any] = self._fs.call_s3(
                "list_objects_v2", timeout=self._timeout, **kwargs
            )
            files: list[FileInfo] = []
            for obj in page.get("Contents", []):
                key: str = obj["Key"]
                if not key.startswith(self._key_prefix):
                    continue  # cannot happen with a Prefix request; never trust it blindly
                rel = key[len(self._key_prefix) :]
                info = file_info_or_none(rel, int(obj.get("Size", 0)), obj.get("LastModified"))
                if info is not None:
                    files.append(info)
            token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
            yield ListedPage(files, more=token is not None)
            if token is None:
                return

    def _list_objects(
        self, prefix: str, delimiter: str | None, limit: int | None = None
    ) -> list[FileInfo]:
        out: list[FileInfo] = []
        for page in self._object_pages(prefix, delimiter):
            out.extend(page.files)
            if limit is not None and len(out) > limit:
                break
        return out

    def list_pages(self, dir_prefix: str, limit: int) -> Iterator[ListedPage]:
        found = 0
        for page in self._object_pages(self._key_prefix + dir_prefix, None):
            found += len(page.files)
            yield page
            if found > limit:
                return

    def list_under(self, dir_prefix: str, limit: int | None = None) -> list[FileInfo]:
        return self._list_objects(self._key_prefix + dir_prefix, delimiter=None, limit=limit)

    def list_paths(self, dir_prefix: str) -> PathListing:
        return columns_of(self.list_under(dir_prefix))

    def list_top(self) -> list[FileInfo]:
        return self._list_objects(self._key_prefix, delimiter="/")

    def first_files(self, limit: int) -> list[str]:
        page: dict[str, Any] = self._fs.call_s3(
            "list_objects_v2",
            timeout=self._timeout,
            Bucket=self._bucket,
            Prefix=self._key_prefix,
            MaxKeys=limit,
        )
        return [obj["Key"][len(self._key_prefix) :] for obj in page.get("Contents", [])][:limit]

    def clock_millis(self) -> int | None:
        # The Date of a response is the clock that dates the objects (Last-Modified), with the
        # fraction of its second dropped: rounded up again, or a file stored in the same second
        # as the answer would look younger than the answer (a grace of 0s kept it). A listing,
        # not a HEAD of the bucket: a policy may allow listing only under the root's prefix.
        page: dict[str, Any] = self._fs.call_s3(
            "list_objects_v2",
            timeout=self._timeout,
            Bucket=self._bucket,
            Prefix=self._key_prefix,
            MaxKeys=1,
        )
        date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        if not isinstance(date, str) or not _HTTP_DATE.fullmatch(date):
            return None
        try:
            return to_millis(parse_s3_timestamp(date)) + 1000
        except (ValueError, OverflowError):  # the form of a date, not a date (31 Feb, hour 25)
            return None

    def delete(self, rels: list[str], batch_size: int) -> list[str]:
        # S3 reports a missing key as deleted, so these are the keys S3 acknowledged.
        size = min(batch_size, S3_MAX_DELETE_BATCH)
        deleted: list[str] = []
        failures: list[str] = []
        for i in range(0, len(rels), size):
            batch = rels[i : i + size]
            response: dict[str, Any] = self._fs.call_s3(
                "delete_objects",
                timeout=self._timeout,
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": self._key(r)} for r in batch], "Quiet": True},
            )
            errors = response.get("Errors", [])
            failures.extend(f"{e.get('Key')} ({e.get('Code')}: {e.get('Message')})" for e in errors)
            refused = {str(e.get("Key")) for e in errors}
            deleted.extend(r for r in batch if self._key(r) not in refused)
        if failures:
            raise DeleteFailures(deleted, failures)
        return deleted


# S3's timestamps: in XML bodies UTC ISO 8601, whole seconds or a fraction; in headers
# (Last-Modified, Date) the HTTP date of RFC 9110 (what the fast paths parse).
_S3_ISO_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")
_HTTP_DATE: Final = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d{2}:\d{2}:\d{2} GMT"
)


def parse_s3_timestamp(value: Any) -> datetime:
    """A timestamp of an S3 response as botocore's parser gives it (an aware datetime in
    UTC): S3's ISO 8601 form by ``datetime.fromisoformat`` and an HTTP date by the standard
    library's ``parsedate_to_datetime`` (1-5 us, where dateutil takes 100-160), anything else
    (epoch seconds, other forms) by botocore's own parser."""
    if isinstance(value, str):
        if _S3_ISO_TIMESTAMP.fullmatch(value):
            return datetime.fromisoformat(value)
        if _HTTP_DATE.fullmatch(value):
            from email.utils import parsedate_to_datetime

            return parsedate_to_datetime(value)
    from botocore.utils import parse_timestamp

    parsed: datetime = parse_timestamp(value)
    return parsed


def _http_date_or_none(value: str | None) -> datetime | None:
    """A HEAD's Last-Modified as a datetime; None (an unknown age) when it does not parse."""
    if value is None:
        return None
    try:
        return parse_s3_timestamp(value)
    except (ValueError, OverflowError, TypeError):
        return None


def _s3_session(profile: str | None) -> Any:
    """An aiobotocore session for one S3 client (``profile`` as s3fs would give it), its
    responses' timestamps parsed by ``parse_s3_timestamp``."""
    from aiobotocore.session import AioSession

    session = AioSession(profile=profile)
    session.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=parse_s3_timestamp
    )
    return session


ENDPOINT_PROBE_TIMEOUT_SECONDS: Final = 3.0


def _refuse_an_endpoint_without_scheme(root_uri: str, endpoint: str) -> None:
    """botocore refuses ``127.0.0.1:9000`` only as "Invalid endpoint", which came out as a
    storage failure (exit 4, retried by the DAGs): it is a bad option (exit 2)."""
    scheme = endpoint.split("://", 1)[0].lower() if "://" in endpoint else ""
    if scheme not in ("http", "https"):
        raise InvalidArgumentError(
            f"S3 endpoint {endpoint!r} for {root_uri} must start with http:// or https:// (storage option "
            f"endpoint_url, or AWS_ENDPOINT_URL), e.g. http://{endpoint.split('://')[-1]}"
        )


def _refuse_an_endpoint_nothing_answers(
    root_uri: str, endpoint: str, config_kwargs: Mapping[str, Any]
) -> None:
    """One TCP connect to an explicit S3 endpoint; StorageError when nothing can answer there.

    Only definite answers count: refused, a host name that does not resolve, no route. A probe
    that times out decides nothing (a slow network; botocore has its own timeouts). Skipped
    when a proxy carries the requests (botocore's ``proxies``, or ``HTTP(S)_PROXY`` not
    bypassed by ``NO_PROXY``): then the endpoint need not be reachable from here."""
    import urllib.parse
    import urllib.request

    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    host = parsed.hostname
    if not host or config_kwargs.get("proxies"):
        return
    if parsed.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:  # a port that is not a number: botocore says so in its own words
        return
    reason: OSError
    try:
        socket.create_connection((host, port), timeout=ENDPOINT_PROBE_TIMEOUT_SECONDS).close()
    except (ConnectionRefusedError, socket.gaierror) as exc:
        reason = exc
    except OSError as exc:
        if exc.errno not in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return  # a timeout, or something botocore may yet get past
        reason = exc
    else:
        return
    raise StorageError(
        f"could not reach {root_uri}: nothing answers at the S3 endpoint {endpoint} ({type(reason).__name__}: "
        f"{reason}); check the endpoint (storage option endpoint_url, or AWS_ENDPOINT_URL) and that the server is up"
    ) from reason
