"""bench/latency_proxy.py: the loopback proxy that gives moto's S3 server a latency and a
bandwidth, its request counters, and the indexed listing the benchmarks install in moto."""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import random
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from lakecore.core.storage import Storage

pytestmark = pytest.mark.s3

LATENCY_MS = 50.0
LATENCY_S = LATENCY_MS / 1e3


def _load() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "bench" / "latency_proxy.py"
    spec = importlib.util.spec_from_file_location("bench_latency_proxy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lp = _load()


@pytest.fixture
def proxy(s3_server: Any) -> Iterator[Any]:
    with lp.LatencyProxy(s3_server.endpoint, latency_ms=LATENCY_MS, bandwidth_mbps=100) as running:
        yield running


def _client(endpoint: str, pool: int = 10) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(max_pool_connections=pool, retries={"max_attempts": 1}),
    )


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def test_boto3_round_trip_waits_the_latency_and_is_counted(s3_server: Any, proxy: Any) -> None:
    client = _client(proxy.endpoint)
    prefix = f"proxy-{uuid.uuid4()}/"
    _, put_s = _timed(client.put_object, Bucket=s3_server.bucket, Key=prefix + "a", Body=b"hello")
    got, get_s = _timed(client.get_object, Bucket=s3_server.bucket, Key=prefix + "a")
    assert got["Body"].read() == b"hello"
    listed, list_s = _timed(client.list_objects_v2, Bucket=s3_server.bucket, Prefix=prefix)
    assert [o["Key"] for o in listed["Contents"]] == [prefix + "a"]
    _, head_s = _timed(client.head_object, Bucket=s3_server.bucket, Key=prefix + "a")
    _, delete_s = _timed(
        client.delete_objects, Bucket=s3_server.bucket, Delete={"Objects": [{"Key": prefix + "a"}]}
    )
    for seconds in (put_s, get_s, list_s, head_s, delete_s):
        assert seconds >= LATENCY_S
    assert proxy.requests_by_kind() == {
        "put": 1,
        "get": 1,
        "list": 1,
        "head": 1,
        "delete_objects": 1,
    }
    stats = proxy.reset()
    assert stats["requests"] == 5 and stats["by_method"] == {
        "GET": 2,
        "HEAD": 1,
        "POST": 1,
        "PUT": 1,
    }
    assert stats["bytes_in"] >= 5 and stats["bytes_out"] >= 5 and stats["proxy_errors"] == 0
    assert proxy.requests_by_kind() == {}  # reset zeroed them


def test_lakecore_storage_through_the_proxy(s3_server: Any, proxy: Any) -> None:
    """s3fs (aiobotocore: Expect: 100-continue, ranged GETs, If-None-Match) works through it."""
    options = {**s3_server.storage_options(), "client_kwargs": {"endpoint_url": proxy.endpoint}}
    storage = Storage(f"s3://{s3_server.bucket}/{uuid.uuid4()}/", options)
    storage.write("0001/x.binpb", b"x" * 5000)
    storage.create_exclusive("root.binpb", b"root")
    with pytest.raises(Exception, match="exist"):
        storage.create_exclusive("root.binpb", b"someone else")
    assert storage.read("0001/x.binpb") == b"x" * 5000
    assert sorted(f.path for f in storage.list("")) == ["0001/x.binpb", "root.binpb"]
    kinds = proxy.requests_by_kind()
    assert kinds["put"] == 3 and kinds["list"] >= 1 and kinds["get"] >= 2
    assert proxy.stats()["by_status"].get("412") == 1


def test_concurrent_requests_overlap(s3_server: Any, proxy: Any) -> None:
    client = _client(proxy.endpoint, pool=8)
    key = f"proxy-{uuid.uuid4()}"
    client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"x")

    def eight_heads() -> float:
        with cf.ThreadPoolExecutor(8) as pool:
            start = time.perf_counter()
            list(pool.map(lambda _: client.head_object(Bucket=s3_server.bucket, Key=key), range(8)))
            return time.perf_counter() - start

    eight_heads()  # opens the 8 connections
    proxy.reset()
    elapsed = eight_heads()
    stats = proxy.stats()
    assert stats["by_kind"] == {"head": 8}
    assert elapsed >= LATENCY_S
    assert elapsed < 4 * LATENCY_S, (
        f"8 concurrent requests took {elapsed:.3f}s: they were serialised"
    )
    assert stats["max_in_flight"] >= 2


def test_bandwidth_cap_slows_big_bodies(s3_server: Any, proxy: Any) -> None:
    client = _client(proxy.endpoint)
    key = f"proxy-{uuid.uuid4()}"
    body = random.randbytes(300_000)
    proxy.bandwidth_mbps = 1.0  # 1 MB/s: 0.3 s for the body each way
    _, put_s = _timed(client.put_object, Bucket=s3_server.bucket, Key=key, Body=body)
    got, get_s = _timed(lambda: client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read())
    assert got == body
    assert put_s >= 0.3 + LATENCY_S and get_s >= 0.3 + LATENCY_S, (put_s, get_s)
    proxy.bandwidth_mbps = 0  # unlimited
    _, fast_s = _timed(lambda: client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read())
    assert fast_s < 0.3, fast_s
    assert proxy.stats()["bytes_out"] == 2 * len(body)


def _page_names(page: Iterable[Any]) -> list[str]:
    return [e if isinstance(e, str) else e.name for e in page]


def _all_pages(
    list_v2: Any,
    backend: Any,
    bucket: Any,
    prefix: str | None,
    delimiter: str | None,
    max_keys: int,
    start_after: str | None = None,
) -> list[tuple[list[str], bool]]:
    pages, token = [], None
    while True:
        page, truncated, token = list_v2(
            backend,
            bucket,
            prefix,
            delimiter,
            token,
            start_after if token is None else None,
            max_keys,
        )
        pages.append((_page_names(page), truncated))
        if not truncated:
            return pages


def test_indexed_listing_answers_as_moto_does(s3_server: Any) -> None:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3.models import S3Backend, s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    name = f"index-{uuid.uuid4().hex[:12]}"
    backend.create_bucket(name, "us-east-1")
    rng = random.Random(5)
    keys = {
        f"lake/{rng.choice('ab')}/{rng.choice(['x', 'y/z', 'y-'])}{rng.randrange(40)}"
        for _ in range(150)
    }
    keys |= {"lake/top", "lake-2/other", "zz"}
    for key in keys:
        backend.put_object(name, key, b"k")
    with lp.indexed_listing():
        original = lp._installed["list_objects_v2"]
        assert S3Backend.list_objects_v2 is not original
        for round_no in range(2):
            bucket = backend.get_bucket(name)
            for prefix in (None, "", "lake/", "lake/a/", "lake/a/y", "lake", "nothing/"):
                for delimiter in (None, "/"):
                    for max_keys in (1, 7, 1000):
                        for start_after in (None, "lake/a/y"):
                            args = (bucket, prefix, delimiter, max_keys, start_after)
                            assert _all_pages(
                                S3Backend.list_objects_v2, backend, *args
                            ) == _all_pages(original, backend, *args), args
            if round_no == 0:  # the index follows puts and deletes
                backend.put_object(name, "lake/a/new", b"n")
                backend.delete_object(name, sorted(keys)[3])
    page, truncated, _ = S3Backend.list_objects_v2(
        backend, backend.get_bucket(name), "lake/a/", None, None, None, 1000
    )
    assert "lake/a/new" in _page_names(page) and not truncated  # moto's own again


def test_moto_s3_backdates_and_loads_objects_directly() -> None:
    bucket = f"direct-{uuid.uuid4().hex[:12]}"
    with lp.MotoS3() as moto, lp.LatencyProxy(moto.endpoint, latency_ms=1) as proxy:
        moto.create_bucket(bucket)
        assert moto.put_objects(bucket, [("a/1", b"one"), ("a/2", b"two")]) == 2
        moto.set_last_modified(bucket, "a/1", time.time() - 10 * 86400)
        listed = _client(proxy.endpoint).list_objects_v2(Bucket=bucket, Prefix="a/")["Contents"]
        ages = {o["Key"]: time.time() - o["LastModified"].timestamp() for o in listed}
        assert 9.9 * 86400 < ages["a/1"] < 10.1 * 86400 and ages["a/2"] < 3600
        assert moto.keys(bucket, "a/") == ["a/1", "a/2"]
        assert moto.delete_objects(bucket, ["a/1"]) == 1 and moto.keys(bucket) == ["a/2"]
        assert proxy.requests_by_kind() == {"list": 1}


def test_a_request_is_counted_by_the_time_its_answer_is_read(s3_server: Any, proxy: Any) -> None:
    # The proxy counts a request after sending its answer; a snapshot taken right after the
    # client read that answer must still include it (CI once saw a list missing).
    client = _client(proxy.endpoint)
    for i in range(1, 31):
        client.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"nothing-{i}/")
        assert proxy.requests_by_kind().get("list") == i


def test_fast_list_rendering_answers_byte_for_byte_as_moto_does() -> None:
    import urllib.request

    bucket = f"render-{uuid.uuid4().hex[:12]}"
    keys = [f"lake/{i % 7:03b}/{i:05d}-node.arrow" for i in range(40)]
    keys += [
        "lake/a&b<c>d.binpb",
        "lake/\u00e9t\u00e9/\u4e2d.binpb",
        "lake/q\"uote'.x",
        "lake/sp ace+plus%25",
        "zz/top",
    ]
    queries = [
        "",
        "prefix=lake/",
        "prefix=lake/&delimiter=/",
        "prefix=lake/001/&max-keys=3",
        "max-keys=5&start-after=lake/010",
        "prefix=lake/&encoding-type=url",
        "prefix=nothing/",
        "prefix=lake/&max-keys=1",
        "prefix=lake/&fetch-owner=true",
    ]

    def pages(endpoint: str) -> list[bytes]:
        bodies = []
        for query in queries:
            token = None
            while True:
                url = f"{endpoint}/{bucket}?list-type=2" + (f"&{query}" if query else "")
                if token:
                    url += "&continuation-token=" + token
                with urllib.request.urlopen(url) as answer:
                    body = answer.read()
                    assert int(answer.headers["Content-Length"]) == len(body)
                bodies.append(body)
                if b"<NextContinuationToken>" not in body:
                    break
                token = body.split(b"<NextContinuationToken>")[1].split(b"<")[0].decode()
        return bodies

    with lp.MotoS3(indexed=False) as moto:  # moto's own rendering (and listing)
        moto.create_bucket(bucket)
        moto.put_objects(bucket, [(key, key.encode() * (i % 3)) for i, key in enumerate(keys)])
        # Several distinct timestamps, some with microseconds; the odd keys keep the load's, as
        # do entries past the first of a page, which the rendering here writes unchecked.
        for i, key in enumerate(keys[:40:4]):
            moto.set_last_modified(bucket, key, 1_700_000_000 + i * 3600 + (0.25 if i % 2 else 0))
        expected = pages(moto.endpoint)
        before = dict(lp.RENDERED_PAGES)
        with lp.fast_list_rendering():
            assert pages(moto.endpoint) == expected
        fast = lp.RENDERED_PAGES["fast"] - before["fast"]
        by_moto = lp.RENDERED_PAGES["moto"] - before["moto"]
        assert fast >= 6, lp.RENDERED_PAGES  # the rendering here answered most pages
        assert by_moto >= 2, lp.RENDERED_PAGES  # fetch-owner and one-entry pages stay moto's
        assert pages(moto.endpoint) == expected  # and moto's own again once outside
        assert lp.RENDERED_PAGES["fast"] - before["fast"] == fast


def test_routes_send_a_request_to_the_target_of_its_prefix() -> None:
    proxy = lp.LatencyProxy(
        "http://127.0.0.1:1001",
        routes=[("/b/lake/_", "http://127.0.0.1:1002"), ("/b/lake-wh/", "http://127.0.0.1:1003")],
    )
    assert proxy.destinations("put", "/b/lake/_10000.arrow") == [("127.0.0.1", 1002)]
    assert proxy.destinations("get", "/b/lake/0110/def.binpb") == [("127.0.0.1", 1001)]
    assert proxy.destinations("head", "/b/lake-wh/t/metadata.json") == [("127.0.0.1", 1003)]
    # A listing goes to every target whose keys its prefix may hold.
    assert proxy.destinations("list", "/b?list-type=2&prefix=lake-wh/t/") == [("127.0.0.1", 1003)]
    assert proxy.destinations("list", "/b?list-type=2&prefix=lake/") == [
        ("127.0.0.1", 1002),
        ("127.0.0.1", 1001),
    ]
