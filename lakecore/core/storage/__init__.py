"""Storage for one lakehouse root: the only package that knows about file systems and S3.

``Storage`` (``facade``) is the one door: every path is checked to stay inside the root, the
backend is chosen by scheme, every failure leaves as a lakecore error. One concept per module:

- ``facade``: ``Storage`` and the table from scheme to backend;
- ``backend``: what a backend offers (``Backend``), ``FileInfo`` and the listing types;
- ``local``: ``file://`` through ``os`` (temp file, fsync, link: atomic exclusive create);
- ``s3``: ``s3://`` through s3fs and the S3 API (conditional PUT, batched deletes, the
  timestamp parser, the endpoint probe);
- ``s3_requests``: the direct path for S3's GET, HEAD and PUT of one object, at a fraction of
  botocore's CPU, configured as s3fs's client is;
- ``sigv4``: AWS Signature Version 4 for those requests;
- ``generic``: any other fsspec scheme (``memory://`` with a lock-based exclusive create);
- ``options``: the storage options each scheme accepts, and the one command-line parser;
- ``translate``: backend failures as lakecore errors;
- ``clients``: the client cache across forks and threads, and the request pool.
"""

from lakecore.core.storage.backend import UNKNOWN_MTIME_MILLIS, FileInfo, ListedPage, PathListing
from lakecore.core.storage.clients import request_pool
from lakecore.core.storage.facade import Storage
from lakecore.core.storage.options import (
    DEFAULT_S3_TIMEOUT_SECONDS,
    S3_REQUESTS_OPTION,
    TIMEOUT_OPTION,
    accepted_storage_options,
    parse_storage_options,
)
from lakecore.core.storage.s3 import (
    S3_MAX_DELETE_BATCH,
    S3_MAX_POOL_CONNECTIONS,
    parse_s3_timestamp,
)

__all__ = [
    "DEFAULT_S3_TIMEOUT_SECONDS",
    "S3_MAX_DELETE_BATCH",
    "S3_MAX_POOL_CONNECTIONS",
    "S3_REQUESTS_OPTION",
    "TIMEOUT_OPTION",
    "UNKNOWN_MTIME_MILLIS",
    "FileInfo",
    "ListedPage",
    "PathListing",
    "Storage",
    "accepted_storage_options",
    "parse_s3_timestamp",
    "parse_storage_options",
    "request_pool",
]
