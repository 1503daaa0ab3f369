"""pyiceberg FileIO properties from lakecore's storage options: one set of credentials and one
endpoint for the lakehouse's files and its tables' files.

A job is given lakecore's storage options (``--storage-option endpoint_url=...``, ``key=``,
``secret=``, ``token=``, ``region=``, ``profile=``, ``anon=``); table maintenance reads Iceberg
metadata, manifest lists and manifests through pyiceberg's FileIO, and the catalog it commits
through writes new metadata files with it. These are the same settings spelt as pyiceberg's
``s3.*`` properties. Unset ones are left out, so pyiceberg's own defaults (the AWS chain) apply;
the endpoint falls back to ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` as lakecore's does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def file_io_properties(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """pyiceberg's ``s3.*`` properties for lakecore storage options (see the module doc)."""
    options = dict(storage_options or {})
    client_kwargs = dict(options.get("client_kwargs") or {})
    endpoint = (
        client_kwargs.get("endpoint_url")
        or options.get("endpoint_url")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    found = {
        "s3.endpoint": endpoint,
        "s3.region": options.get("region") or client_kwargs.get("region_name"),
        "s3.access-key-id": options.get("key"),
        "s3.secret-access-key": options.get("secret"),
        "s3.session-token": options.get("token"),
        "s3.profile-name": options.get("profile"),
        "s3.anonymous": "true" if options.get("anon") in (True, "true", "True") else None,
    }
    return {key: str(value) for key, value in found.items() if value}


__all__ = ["file_io_properties"]
