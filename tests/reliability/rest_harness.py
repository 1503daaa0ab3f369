"""What the REST load and crash suites share: ``lakecore serve`` processes, client processes
(``tests/reliability/rest_client.py``), lakehouses on local disk or on moto behind the latency
proxy, and the check of a lakehouse against what its clients were answered.

``check_served_lake`` reads the lakehouse as it is on storage, with fresh caches and no server
(on S3 straight from moto, not through the proxy), and collects problems rather than raising:

* **The chain.** The retained root files are one gap-free run to the latest version, and every
  version asked for passes ``check_version`` deep (``lakecore fsck --deep``).
* **Pointers.** In every version asked for, every table's metadata pointer names a metadata
  file that exists and parses.
* **No snapshot lost.** Along the versions asked for, in order, a table's snapshots only grow;
  at the latest, every snapshot is an ancestor of the current one (appends only: a snapshot
  off the main line is an update another replaced).
* **Acknowledged means present.** Every append answered 200 is the snapshot its client was
  given, an ancestor of its table's current snapshot, named by its client and sequence number.
* **Refused means absent; unknown means all or nothing.** An append answered 409 or another
  error has no snapshot; one answered ``CommitStateUnknownException`` or no answer at all may
  have one. No append has two snapshots.
* **The rows.** A scan of each table (at the latest version) holds exactly the rows of the
  appends present, once each: a snapshot that landed brought all its rows, one that did not
  brought none.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import resource
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from pyiceberg.exceptions import NoSuchIcebergTableError
from pyiceberg.io import load_file_io

from lakecore.core.storage import Storage
from lakecore.core.versions import latest_version
from lakecore.iceberg import LakecoreCatalog
from lakecore.iceberg.pointer import read_metadata, require_iceberg
from lakecore.lakehouse import Lakehouse
from tests.reliability.faulty_storage import check_chain, clear_caches
from tests.reliability.rest_client import (
    CLIENT_PROPERTY,
    ID_SPACE,
    SEQ_PROPERTY,
    ClientSpec,
    ids_of,
    read_ledger,
    spec_argument,
)

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "load"
SERVER_START_SECONDS = 60.0
# What pyiceberg's append retries on 409 (table properties): enough for a writer that shares
# its table with another, through two servers, on a slow machine.
RETRY_PROPERTIES = {
    "commit.retry.num-retries": "50",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "200",
}
# Outcomes that may have landed (all or nothing), and those that must not have.
MAY_HAVE_LANDED = frozenset({"unknown", "no-answer"})
MUST_BE_ABSENT = frozenset({"refused", "error"})


def load_latency_proxy() -> ModuleType:
    """bench/latency_proxy.py as a module (bench/ is not a package)."""
    name = "bench_latency_proxy"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "latency_proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- lakehouses ------------------------------------------------------------------------------


@dataclass
class ServedLake:
    """A lakehouse, how a server reaches it and how a client and the checker do."""

    uri: str
    storage_options: dict[str, Any] | None = None
    serve_args: list[str] = field(default_factory=list)  # serve's --property, --warehouse
    storage_args: list[str] = field(default_factory=list)  # lakecore's --storage-option
    check_storage_args: list[str] = field(default_factory=list)  # the same, for the checker
    client_properties: dict[str, str] = field(default_factory=dict)  # RestCatalog's FileIO
    check_properties: dict[str, str] = field(default_factory=dict)  # the checker's catalog
    kind: str = "local"

    def storage(self) -> Storage:
        return Storage(self.uri, self.storage_options)

    def latest(self) -> int:
        return latest_version(self.storage())

    def catalog(self) -> LakecoreCatalog:
        """A catalog on the lakehouse as it is now (fresh caches), for checks."""
        clear_caches()
        return LakecoreCatalog(
            "check", uri=self.uri, storage_options=self.storage_options, **self.check_properties
        )


def local_served_lake(tmp_path: Path) -> ServedLake:
    uri = str(tmp_path / "lake")
    Lakehouse.create(uri)
    return ServedLake(uri)


def s3_served_lake(s3: Any, proxy_endpoint: str) -> ServedLake:
    """A lakehouse on moto's S3 (``s3``: the session's ``S3TestServer``) whose server and
    clients reach it through the latency proxy at ``proxy_endpoint``; the warehouse beside the
    lakehouse root. The checker reads moto directly."""
    base = f"s3://{s3.bucket}/{uuid.uuid4()}"
    direct = s3.storage_options()
    Lakehouse.create(f"{base}/lake", storage_options=direct)
    key, secret = direct["key"], direct["secret"]

    def file_io(endpoint: str) -> dict[str, str]:
        return {
            "s3.endpoint": endpoint,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
        }

    serve_args = [f"--warehouse={base}/warehouse"]
    for name, value in file_io(proxy_endpoint).items():
        serve_args.append(f"--property={name}={value}")
    return ServedLake(
        f"{base}/lake",
        direct,
        serve_args,
        [
            f"--storage-option=endpoint_url={proxy_endpoint}",
            f"--storage-option=key={key}",
            f"--storage-option=secret={secret}",
        ],
        check_storage_args=s3.job_args(),
        client_properties=file_io(proxy_endpoint),
        check_properties={"warehouse": f"{base}/warehouse", **file_io(s3.endpoint)},
        kind="s3",
    )


# -- server processes -------------------------------------------------------------------------


class ServeProcess:
    """``lakecore -l URI serve --allow-anonymous`` as a process of its own; its stderr (the
    access log) goes to ``log``. ``start`` waits for its "listening on" line; a restart listens
    on the port the first start got."""

    def __init__(
        self,
        lake: ServedLake,
        log: Path,
        extra: Sequence[str] = (),
        module: str = "lakecore.cli",
    ) -> None:
        self.lake = lake
        self.log = log
        self.extra = list(extra)
        self.module = module  # run as ``python -m MODULE`` (the command's, or a test's shim)
        self.port = 0
        self.url = ""
        self.process: subprocess.Popen[str] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            self.module,
            "-l",
            self.lake.uri,
            *self.lake.storage_args,
            "serve",
            "--allow-anonymous",
            "--port",
            str(self.port),
            *self.lake.serve_args,
            *self.extra,
        ]

    def start(self) -> str:
        """Start and wait until it listens; its URL."""
        self.launch()
        return self.wait_listening()

    def launch(self) -> None:
        """Start the process (``wait_listening`` waits for it to listen)."""
        with open(self.log, "a", encoding="utf-8") as err:
            err.write(f"=== start {self.starts}\n")
            err.flush()
            self.process = subprocess.Popen(
                self.command(),
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.starts += 1

    def wait_listening(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        line = _read_line(self.process.stdout, SERVER_START_SECONDS)
        if not line.startswith("lakecore serve: listening on "):
            self.kill()
            raise AssertionError(
                f"lakecore serve did not start: {line!r}; log {self.log}:\n{self.log_tail()}"
            )
        self.url = line.split()[4]
        self.port = int(self.url.rsplit(":", 1)[1])
        return self.url

    def kill(self) -> None:
        """SIGKILL (the process this object started, by its id), and reap it."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
        if process.stdout is not None:
            process.stdout.close()
        self.process = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not stop."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(20)
        self.kill()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def metrics(self) -> dict[str, float]:
        """The server's commit counters (``/metrics``), name{labels} -> value."""
        import requests

        text = requests.get(f"{self.url}/metrics", timeout=10).text
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("lakecore_rest_commit") or line.startswith(
                "lakecore_rest_root_conflicts"
            ):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out


class IdleConnection:
    """One keep-alive HTTP connection to a server: a request, then idle for ``idle_seconds``,
    then another request on it (in a thread of its own, whatever the test does meanwhile), as a
    client's pooled connection between loading a table and committing to it."""

    def __init__(self, url: str, idle_seconds: float) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(
            parsed.hostname or "127.0.0.1", parsed.port, timeout=30
        )
        self.idle_seconds = idle_seconds
        self.first = self._get()
        self.closed_by_server: bool | None = None
        self.reused = ""
        self.thread = threading.Thread(target=self._reuse, name="idle-connection", daemon=True)
        self.thread.start()

    def _get(self) -> str:
        """A request on the connection: "200", or what broke."""
        try:
            self.connection.request("GET", "/v1/config")
            response = self.connection.getresponse()
            response.read()
            return str(response.status)
        except (OSError, http.client.HTTPException) as exc:
            return f"{type(exc).__name__}: {exc}"

    def _reuse(self) -> None:
        time.sleep(self.idle_seconds)
        sock = self.connection.sock
        # The server's end readable with nothing to read: it closed the connection (EOF).
        self.closed_by_server = sock is None or bool(select.select([sock], [], [], 0)[0])
        self.reused = self._get()
        self.connection.close()

    def outcome(self) -> str:
        """ "200" if the connection, idle for ``idle_seconds``, answered; else what happened."""
        self.thread.join(self.idle_seconds + 60)
        if self.closed_by_server:
            return f"closed by the server ({self.reused})"
        return self.reused or "no second request"


def _read_line(stream: IO[str], timeout: float) -> str:
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    try:
        if not selector.select(timeout):
            return f"(nothing within {timeout}s)"
        return stream.readline().strip()
    finally:
        selector.close()


@contextlib.contextmanager
def serving(
    lake: ServedLake, tmp_path: Path, count: int, extra: Sequence[str] = ()
) -> Iterator[list[ServeProcess]]:
    """``count`` server processes on ``lake``, started side by side, stopped at the end."""
    servers = [ServeProcess(lake, tmp_path / f"serve-{i}.log", extra) for i in range(count)]
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_listening()
        yield servers
    finally:
        for server in servers:
            server.stop()


# -- client processes --------------------------------------------------------------------------


@dataclass
class Plan:
    """Who writes where: ``own`` clients each on a table of its own, ``pairs`` pairs of clients
    each sharing one table; clients are dealt to the servers in turn (so a pair's two clients
    are on two servers when there are two)."""

    own: int
    pairs: int

    def tables(self) -> list[str]:
        return [f"own{i}" for i in range(self.own)] + [f"shared{i}" for i in range(self.pairs)]

    def writers(self) -> list[tuple[str, str]]:
        """(client name, table) for every client."""
        out = [(f"c{i}", f"own{i}") for i in range(self.own)]
        for i in range(self.pairs):
            out += [(f"p{i}a", f"shared{i}"), (f"p{i}b", f"shared{i}")]
        return out


def create_tables(url: str, lake: ServedLake, plan: Plan) -> None:
    """The namespace and the plan's tables, through the server at ``url``."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    schema = pa.schema([("id", pa.int64()), ("client", pa.string())])
    catalog = RestCatalog("setup", uri=url, **lake.client_properties)
    catalog.create_namespace(NAMESPACE)
    for table in plan.tables():
        catalog.create_table(f"{NAMESPACE}.{table}", schema, properties=RETRY_PROPERTIES)


class Clients:
    """The client processes of one run: started, released together, stopped, and their
    ledgers read."""

    def __init__(
        self,
        workdir: Path,
        plan: Plan,
        servers: int,
        lake: ServedLake,
        *,
        commits: int | None,
        rows: int = 3,
        pause_seconds: float = 0.0,
    ) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.go = workdir / "go"
        self.stop_file = workdir / "stop"
        self.specs = [
            ClientSpec(
                name=name,
                server=i % servers,
                table=f"{NAMESPACE}.{table}",
                base=i * ID_SPACE,
                ledger=str(workdir / f"{name}.jsonl"),
                ready=str(workdir / f"{name}.ready"),
                go=str(self.go),
                commits=commits,
                stop=str(self.stop_file),
                rows=rows,
                properties=dict(lake.client_properties),
                pause_seconds=pause_seconds,
            )
            for i, (name, table) in enumerate(plan.writers())
        ]
        self.processes: list[subprocess.Popen[bytes]] = []

    def launch(self) -> None:
        """Start every client process (they import, then wait for ``release``)."""
        for spec in self.specs:
            with open(self.workdir / f"{spec.name}.log", "ab") as log:
                self.processes.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "tests.reliability.rest_client",
                            spec_argument(spec),
                        ],
                        cwd=REPO,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until every client has imported what it needs."""
        deadline = time.monotonic() + timeout
        for spec, process in zip(self.specs, self.processes, strict=True):
            while not os.path.exists(spec.ready):
                if process.poll() is not None:
                    raise AssertionError(
                        f"client {spec.name} exited {process.returncode}: " + self.log(spec.name)
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(f"client {spec.name} was not ready in {timeout}s")
                time.sleep(0.02)

    def release(self, urls: Sequence[str]) -> None:
        """Let the clients connect, each to its server among ``urls``."""
        scratch = self.go.with_suffix(".tmp")
        scratch.write_text(json.dumps(list(urls)), encoding="utf-8")
        scratch.rename(self.go)

    def acknowledged(self) -> int:
        return sum(
            1 for spec in self.specs for r in read_ledger(spec.ledger) if r["outcome"] == "ok"
        )

    def wait(self, timeout: float) -> None:
        """Wait for every client to finish its appends (they exit 0)."""
        deadline = time.monotonic() + timeout
        for spec, process in zip(self.specs, self.processes, strict=True):
            try:
                code = process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"client {spec.name} did not finish in {timeout}s") from None
            assert code == 0, f"client {spec.name} exited {code}: " + self.log(spec.name)

    def stop(self, timeout: float = 120.0) -> None:
        """Ask the clients to stop after their current append, and wait for them."""
        self.stop_file.touch()
        self.wait(timeout)

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait(30)

    def records(self) -> list[dict[str, Any]]:
        return [r for spec in self.specs for r in read_ledger(spec.ledger)]

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def appends_summary(
    lake: ServedLake, clients: Clients, records: list[dict[str, Any]]
) -> dict[str, Any]:
    """The summary fields of every run of clients appending through served lakes: the storage,
    the clients, their appends and how many ended in each outcome."""
    outcomes: dict[str, int] = {}
    for record in records:
        outcomes[record["outcome"]] = outcomes.get(record["outcome"], 0) + 1
    return {
        "storage": lake.kind,
        "clients": len(clients.specs),
        "appends": len(records),
        "outcomes": outcomes,
    }


@contextlib.contextmanager
def running_clients(clients: Clients) -> Iterator[Clients]:
    """Launch the clients; kill whatever is left of them at the end."""
    try:
        clients.launch()
        yield clients
    finally:
        clients.kill()


def cpu_seconds() -> float:
    """CPU time of this process and of its children reaped so far (servers, clients)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


# -- the check --------------------------------------------------------------------------------


@dataclass
class LakeCheck:
    """What ``check_served_lake`` found."""

    latest: int = -1
    versions_checked: int = 0
    acknowledged: int = 0
    landed_without_answer: int = 0  # unknown or no answer, and present
    absent_without_answer: int = 0  # unknown or no answer, and absent
    snapshots: int = 0
    rows: int = 0
    # Every metadata file a pointer of a checked version names.
    referenced: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def check_served_lake(
    lake: ServedLake,
    plan: Plan,
    records: Sequence[dict[str, Any]],
    *,
    rows: int = 3,
    versions: Sequence[int] | None = None,
    scan: bool = True,
) -> LakeCheck:
    """Check the lakehouse against the clients' ledgers (see the module docstring).
    ``rows``: the rows of one append; ``versions``: those to check (default every retained
    one), in increasing order."""
    result = LakeCheck()
    chain = check_chain(lake.uri, lake.storage_options, versions=versions)
    result.latest = chain.latest
    result.versions_checked = chain.versions_checked
    result.problems.extend(chain.problems)
    wanted = list(range(chain.oldest, chain.latest + 1)) if versions is None else list(versions)
    lakehouse = Lakehouse.open(lake.uri, storage_options=lake.storage_options)
    # Pointers, and the snapshots of each table along the versions.
    seen: dict[str, set[int]] = {}
    parsed: dict[str, Any] = {}
    for version in wanted:
        view = lakehouse if version == lakehouse.version else lakehouse.at_version(version)
        for table in plan.tables():
            if not view.table_exists(NAMESPACE, table):
                continue
            try:
                location = require_iceberg((NAMESPACE, table), view.load_table(NAMESPACE, table))
            except NoSuchIcebergTableError as exc:
                result.problems.append(f"v{version} {table}: {exc}")
                continue
            result.referenced.add(location)
            metadata = parsed.get(location)
            if metadata is None:
                try:
                    metadata = read_metadata(
                        load_file_io(lake.check_properties, location), table, location
                    )
                except Exception as exc:
                    result.problems.append(
                        f"v{version} {table}: its pointer names {location}, which cannot be "
                        f"read ({type(exc).__name__}: {exc})"
                    )
                    continue
                parsed[location] = metadata
            ids = {s.snapshot_id for s in metadata.snapshots}
            lost = seen.get(table, set()) - ids
            if lost:
                result.problems.append(
                    f"v{version} {table}: lost snapshots {sorted(lost)} of the version before"
                )
            seen[table] = ids
    # The latest state of every table, against the ledgers.
    catalog = lake.catalog()
    by_append: dict[tuple[str, int], dict[str, Any]] = {(r["client"], r["seq"]): r for r in records}
    landed: dict[tuple[str, int], int] = {}
    client_index = {name: i for i, (name, _t) in enumerate(plan.writers())}
    for table in plan.tables():
        try:
            loaded = catalog.load_table(f"{NAMESPACE}.{table}")
        except Exception as exc:
            result.problems.append(f"{table}: cannot be loaded ({type(exc).__name__}: {exc})")
            continue
        metadata = loaded.metadata
        current = loaded.current_snapshot()
        ancestors: set[int] = set()
        snapshot = current
        while snapshot is not None:
            ancestors.add(snapshot.snapshot_id)
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else metadata.snapshot_by_id(parent)
        result.snapshots += len(metadata.snapshots)
        expected_rows: list[int] = []
        for snap in metadata.snapshots:
            if snap.snapshot_id not in ancestors:
                result.problems.append(
                    f"{table}: snapshot {snap.snapshot_id} is not an ancestor of the current "
                    "one (an append another replaced)"
                )
            props = snap.summary.additional_properties if snap.summary is not None else {}
            client, seq = props.get(CLIENT_PROPERTY), props.get(SEQ_PROPERTY)
            if client is None or seq is None:
                result.problems.append(f"{table}: snapshot {snap.snapshot_id} names no client")
                continue
            key = (client, int(seq))
            if key in landed:
                result.problems.append(
                    f"{table}: append {_name(key)} landed twice ({landed[key]}, {snap.snapshot_id})"
                )
            landed[key] = snap.snapshot_id
            record = by_append.get(key)
            index = client_index.get(client)
            if index is None:
                result.problems.append(f"{table}: snapshot {snap.snapshot_id} of no client")
                continue
            expected_rows += ids_of(index * ID_SPACE, int(seq), rows)
            if record is None:
                continue  # its client has not written its line yet (still in flight)
            if record["outcome"] in MUST_BE_ABSENT:
                result.problems.append(
                    f"{table}: append {_name(key)} was answered {record['outcome']} "
                    f"({record.get('error', '')[:120]}) but landed as {snap.snapshot_id}"
                )
            elif record["outcome"] in MAY_HAVE_LANDED:
                result.landed_without_answer += 1
            elif record["outcome"] == "ok" and record.get("snapshot") != snap.snapshot_id:
                result.problems.append(
                    f"{table}: append {_name(key)} was acknowledged as snapshot {record.get('snapshot')}"
                    f" but landed as {snap.snapshot_id}"
                )
        if scan:
            got = sorted(loaded.scan().to_arrow().column("id").to_pylist())
            result.rows += len(got)
            if got != sorted(expected_rows):
                missing = sorted(set(expected_rows) - set(got))[:10]
                extra = sorted(set(got) - set(expected_rows))[:10]
                doubled = len(got) - len(set(got))
                result.problems.append(
                    f"{table}: the rows are not those of its snapshots: missing {missing}, "
                    f"extra {extra}, {doubled} doubled"
                )
    for key, record in by_append.items():
        if record["outcome"] == "ok":
            result.acknowledged += 1
            if key not in landed:
                result.problems.append(
                    f"acknowledged append {_name(key)} (snapshot {record.get('snapshot')}) is missing"
                )
            if record.get("summary_seq") != str(key[1]):
                result.problems.append(
                    f"append {_name(key)} was answered with a snapshot of seq {record.get('summary_seq')}"
                )
        elif record["outcome"] in MAY_HAVE_LANDED and key not in landed:
            result.absent_without_answer += 1
    return result


def _name(key: tuple[str, int]) -> str:
    return f"{key[0]}#{key[1]}"


def metadata_files(lake: ServedLake, plan: Plan) -> set[str]:
    """Every Iceberg metadata file in the plan's tables' metadata folders, by full location."""
    catalog = lake.catalog()
    out: set[str] = set()
    for table in plan.tables():
        location = catalog.load_table(f"{NAMESPACE}.{table}").location()
        out |= metadata_files_under(lake, location)
    return out


def metadata_files_under(lake: ServedLake, table_location: str) -> set[str]:
    """The metadata files of the table at ``table_location`` (``<location>/metadata/``)."""
    storage = Storage(table_location, lake.storage_options)
    return {
        storage.uri(info.path)
        for info in storage.list("metadata")
        if info.path.endswith(".metadata.json")
    }
