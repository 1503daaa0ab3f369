"""The catalog's own properties: storage options, time travel, creating a missing lakehouse.

Rules:

* **Storage options** for lakecore's own files: ``storage_options`` (a mapping, when the catalog
  is built in Python), else ``lakecore.storage-options`` (a JSON object), else, for a lakehouse
  on S3, derived from pyiceberg's ``s3.*``/``client.*`` properties (endpoint, keys, session
  token, region). Iceberg
  data and metadata files go through pyiceberg's FileIO with the catalog's properties as usual.
* **A misspelt property is refused**, not ignored: pyiceberg ignores a key it does not know,
  and with ``verison=5`` a caller meaning to read version 5 would get the latest version,
  writable. Any ``lakecore.*`` key not in ``OWN_PROPERTIES``, and any key that nearly spells
  one of ours or one of pyiceberg's ``s3.*``/``client.*`` keys, is ``ValidationError``.
* **Time travel** is ``version`` (ASCII digits or an int, nothing ``int()`` would also take)
  or ``as_of`` (epoch milliseconds, a datetime or an ISO-8601 time; UTC when no zone is given).
* ``lakecore.create=true`` creates the lakehouse at ``uri`` when there is none.
* **The latest version** (``lakecore.lakehouse.latest``): ``lakecore.latest.full-check-seconds``
  is how often a read's check of the latest version does the whole discovery rather than one
  request (from 0.01 to 3600; default ``FULL_CHECK_SECONDS``): the longest a read can be stale
  after a gap appeared above the known version, or the lakehouse vanished.
* **Group commit** (``lakecore.lakehouse.group_commit``): ``lakecore.group-commit.max-batch`` (the
  most changes one lakehouse version holds, an integer from 1; 1 commits one change per
  version), ``lakecore.group-commit.max-wait-ms`` (how long a batch waits to fill, 0 and
  up, milliseconds) and ``lakecore.group-commit.linger-ms`` (how long a batch waits for the
  callers the last batch answered to send their next change, 0 and up, milliseconds; 0 never).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any, Final

from pyiceberg.catalog import WAREHOUSE_LOCATION
from pyiceberg.exceptions import ValidationError

from lakecore.errors import InvalidArgumentError
from lakecore.lakehouse.group_commit import (
    DEFAULT_LINGER_SECONDS,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_WAIT_SECONDS,
    MAX_BATCH_LIMIT,
    MAX_WAIT_MILLIS_LIMIT,
)
from lakecore.lakehouse.latest import FULL_CHECK_SECONDS

STORAGE_OPTIONS_PROPERTY: Final = "lakecore.storage-options"
CREATE_PROPERTY: Final = "lakecore.create"
VERSION_PROPERTY: Final = "version"
AS_OF_PROPERTY: Final = "as_of"
MAX_BATCH_PROPERTY: Final = "lakecore.group-commit.max-batch"
MAX_WAIT_PROPERTY: Final = "lakecore.group-commit.max-wait-ms"
LINGER_PROPERTY: Final = "lakecore.group-commit.linger-ms"
FULL_CHECK_PROPERTY: Final = "lakecore.latest.full-check-seconds"


def _number(
    properties: Mapping[str, Any], key: str, default: float, low: float, high: float
) -> float:
    """The property ``key`` as a number from ``low`` to ``high`` (``default`` when absent).

    Raises:
        InvalidArgumentError: not a number in that range.
    """
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = float("nan")
    if not (low <= value <= high):
        raise InvalidArgumentError(f"{key}={raw!r}: give a number from {low:g} to {high:g}")
    return value


def full_check_seconds(properties: Mapping[str, Any]) -> float:
    """``lakecore.latest.full-check-seconds`` (see the module docstring)."""
    return _number(properties, FULL_CHECK_PROPERTY, FULL_CHECK_SECONDS, 0.01, 3600)


def group_commit_policy(properties: Mapping[str, Any]) -> tuple[int, float, float]:
    """(max batch, max wait in seconds, linger in seconds) of the group committer, from the
    catalog properties.

    Raises:
        InvalidArgumentError: a value that is not a number in its range.
    """

    max_batch = _number(properties, MAX_BATCH_PROPERTY, DEFAULT_MAX_BATCH, 1, MAX_BATCH_LIMIT)
    if max_batch != int(max_batch):
        raise InvalidArgumentError(f"{MAX_BATCH_PROPERTY}={max_batch!r}: give a whole number")
    wait_ms = _number(
        properties, MAX_WAIT_PROPERTY, DEFAULT_MAX_WAIT_SECONDS * 1000, 0, MAX_WAIT_MILLIS_LIMIT
    )
    linger_ms = _number(
        properties, LINGER_PROPERTY, DEFAULT_LINGER_SECONDS * 1000, 0, MAX_WAIT_MILLIS_LIMIT
    )
    return int(max_batch), wait_ms / 1000, linger_ms / 1000


def storage_options_of(properties: Mapping[str, Any]) -> dict[str, Any] | None:
    """The storage options the catalog was given for lakecore's own files: ``storage_options``
    (a mapping, in Python), else ``lakecore.storage-options`` (a JSON object), else None. What
    they and pyiceberg's ``s3.*`` properties say together is ``lakecore.iceberg.
    storage_settings``."""
    explicit = properties.get("storage_options")
    if explicit is not None:
        if not isinstance(explicit, Mapping):
            raise InvalidArgumentError(
                f"storage_options must be a mapping, got {type(explicit).__name__}"
            )
        return dict(explicit)
    text = properties.get(STORAGE_OPTIONS_PROPERTY)
    if text is not None:
        try:
            parsed = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{STORAGE_OPTIONS_PROPERTY} must be a JSON object: {exc}"
            ) from None
        if not isinstance(parsed, dict):
            raise InvalidArgumentError(
                f"{STORAGE_OPTIONS_PROPERTY} must be a JSON object, got {text!r}"
            )
        return parsed
    return None


# The properties this catalog reads itself; the rest are pyiceberg's (FileIO, ...).
OWN_PROPERTIES: Final = (
    "uri",
    WAREHOUSE_LOCATION,
    VERSION_PROPERTY,
    AS_OF_PROPERTY,
    CREATE_PROPERTY,
    STORAGE_OPTIONS_PROPERTY,
    MAX_BATCH_PROPERTY,
    MAX_WAIT_PROPERTY,
    LINGER_PROPERTY,
    FULL_CHECK_PROPERTY,
)


def refuse_misspelt_properties(properties: Mapping[str, Any]) -> None:
    """A misspelt property is ignored by pyiceberg, and some are dangerous to ignore: with
    ``verison=5`` a caller meaning to read version 5 got the latest version, writable. Refuse
    any ``lakecore.*`` key not ours, and any key that is not a known property but nearly spells
    one of ours or one of pyiceberg's ``s3.*``/``client.*`` keys."""
    import difflib

    import pyiceberg.io

    known_io = sorted(
        {
            v
            for v in vars(pyiceberg.io).values()
            if isinstance(v, str) and v.startswith(("s3.", "client."))
        }
    )
    for key in properties:
        if key in OWN_PROPERTIES or key in known_io:
            continue
        candidates = list(OWN_PROPERTIES) + (known_io if key.startswith(("s3.", "client.")) else [])
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.8)
        if key.startswith("lakecore.") or close:
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else f"this catalog's own are {', '.join(OWN_PROPERTIES)}"
            )
            raise ValidationError(
                f"unknown catalog property {key!r}: {hint} (a misspelt property would be ignored)"
            )


def version_number(value: Any) -> int:
    """A lakehouse version from an int or a string of ASCII digits; nothing else (``int()``
    would take True as 1, 1.9 as 1 and "1_0" as 10)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    raise InvalidArgumentError(
        f"{VERSION_PROPERTY} {value!r} is not a lakehouse version number (digits only)"
    )


def as_of_millis(value: Any) -> int:
    """Epoch milliseconds from an int, a digit string, a datetime or an ISO-8601 string."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{AS_OF_PROPERTY} {value!r} is not a time")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    when: dt.datetime
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidArgumentError(
                f"{AS_OF_PROPERTY} {value!r} is neither epoch milliseconds nor an ISO-8601 time"
            ) from None
    else:
        raise InvalidArgumentError(
            f"{AS_OF_PROPERTY} {value!r} is neither epoch milliseconds nor a time"
        )
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


__all__ = [
    "AS_OF_PROPERTY",
    "CREATE_PROPERTY",
    "FULL_CHECK_PROPERTY",
    "LINGER_PROPERTY",
    "MAX_BATCH_PROPERTY",
    "MAX_WAIT_PROPERTY",
    "OWN_PROPERTIES",
    "STORAGE_OPTIONS_PROPERTY",
    "VERSION_PROPERTY",
    "as_of_millis",
    "full_check_seconds",
    "group_commit_policy",
    "refuse_misspelt_properties",
    "storage_options_of",
    "version_number",
]
