"""Paged listings (``listNamespaces``, ``listTables``): page tokens and the listings they page.

Rules (the spec's ``PageToken``):

* A listing is paged only when the request carries ``pageToken`` (empty for the first page);
  without it every name comes in one answer with ``next-page-token`` null. ``pageSize``
  (default ``DEFAULT_PAGE_SIZE``, at most ``MAX_PAGE_SIZE``) is the most names per page; the
  last page's ``next-page-token`` is null.
* Names are sorted. The first page lists them all once and keeps that sorted list for the
  pages after it (``LISTING_SECONDS``; at most ``MAX_LISTINGS`` listings and
  ``MAX_LISTED_NAMES`` names kept): a paged listing of n names costs one catalog listing, not
  one per page, and is one consistent snapshot however the catalog changes while a client
  pages.
* A token is opaque to clients: base64url of ``{"s": scope, "l": listing id, "a": last name
  returned}``. The scope names the listing it pages (what is listed, of which namespace or
  parent, in which catalog: live or a version); a token is refused (400) by any other listing,
  so one listing's names never come back as another's. A token whose listing is gone (expired,
  evicted, or kept by another server process behind the same address) still works: the names
  are listed again and the page starts after ``a``.
* A token longer than ``MAX_TOKEN_CHARS`` or that does not decode is 400, whatever it holds.
"""

from __future__ import annotations

import base64
import bisect
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from lakecore.rest.errors import bad_request

DEFAULT_PAGE_SIZE: Final = 1000
MAX_PAGE_SIZE: Final = 100_000
LISTING_SECONDS: Final = 300.0
MAX_LISTINGS: Final = 64
MAX_LISTED_NAMES: Final = 4_000_000
# A token names a listing id and one name (at most a few hundred bytes), base64url: anything
# much longer was not issued here, and is refused before it is decoded.
MAX_TOKEN_CHARS: Final = 4096


def _encode(scope: str, listing: str, after: str) -> str:
    text = json.dumps({"s": scope, "l": listing, "a": after}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8")).rstrip(b"=").decode("ascii")


def _decode(token: str, scope: str) -> tuple[str, str]:
    """(listing id, last name) of a token issued for ``scope``.

    Raises:
        RestError: 400 for a token not issued here, or issued for another listing.
    """
    shown = token if len(token) <= 64 else token[:64] + "..."
    not_ours = bad_request(f"pageToken {shown!r} was not issued by this server")
    if len(token) > MAX_TOKEN_CHARS:
        raise not_ours
    try:
        fields = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        issued_for, listing, after = fields["s"], fields["l"], fields["a"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise not_ours from None
    if not all(isinstance(v, str) for v in (issued_for, listing, after)):
        raise not_ours
    if issued_for != scope:
        raise bad_request(
            f"pageToken {shown!r} pages another listing; start this one with an empty pageToken"
        )
    return listing, after


class Listings:
    """The sorted names of recent paged listings (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._kept: OrderedDict[str, tuple[float, list[str]]] = OrderedDict()
        self._names = 0
        self._lock = threading.Lock()
        self._clock = clock

    def _keep(self, names: list[str]) -> str:
        listing = secrets.token_urlsafe(9)
        now = self._clock()
        with self._lock:
            self._kept[listing] = (now, names)
            self._names += len(names)
            while self._kept and (
                len(self._kept) > MAX_LISTINGS
                or self._names > MAX_LISTED_NAMES
                or next(iter(self._kept.values()))[0] < now - LISTING_SECONDS
            ):
                _, (_, dropped) = self._kept.popitem(last=False)
                self._names -= len(dropped)
        return listing

    def _kept_names(self, listing: str) -> list[str] | None:
        with self._lock:
            kept = self._kept.get(listing)
        if kept is None or kept[0] < self._clock() - LISTING_SECONDS:
            return None
        return kept[1]

    def page(
        self, list_names: Callable[[], Sequence[str]], query: Mapping[str, str], scope: str
    ) -> tuple[list[str], str | None]:
        """One page of the sorted names ``list_names()`` gives, and the next page's token;
        ``scope`` names the listing (see the module docstring)."""
        if "pageToken" not in query:
            return sorted(list_names()), None
        raw_size = query.get("pageSize") or str(DEFAULT_PAGE_SIZE)
        if (
            not (raw_size.isascii() and raw_size.isdigit())
            or not 1 <= int(raw_size) <= MAX_PAGE_SIZE
        ):
            raise bad_request(f"pageSize {raw_size!r} must be an integer from 1 to {MAX_PAGE_SIZE}")
        size = int(raw_size)
        token = query["pageToken"]
        names: list[str] | None = None
        start = 0
        if token:
            listing, after = _decode(token, scope)
            names = self._kept_names(listing)
            if names is None:
                names = sorted(list_names())
            start = bisect.bisect_right(names, after)
        else:
            names = sorted(list_names())
            listing = self._keep(names) if len(names) > size else ""
        chunk = names[start : start + size]
        more = start + size < len(names)
        return chunk, (_encode(scope, listing, chunk[-1]) if more and chunk else None)


__all__ = ["DEFAULT_PAGE_SIZE", "LISTING_SECONDS", "MAX_PAGE_SIZE", "MAX_TOKEN_CHARS", "Listings"]
