"""Table maintenance over many Iceberg tables: the Spark job against the same work done table by
table in one process with pyiceberg.

    .venv/bin/python bench/bench_table_maintenance.py > tm.json                # 10,000 tables
    .venv/bin/python bench/bench_table_maintenance.py --tables 1000 --baseline-tables 200 --quick

Per size (``--tables``, default 10,000; each table 20 snapshots):

* **The job**: ``python -m jobs.table_maintenance --master local[2]`` in a process of its own
  (as spark-submit.sh runs it in local mode), with a ``--now`` a month after the snapshots were
  written and ``--i-understand-grace-risk`` (no grace period: everything expired goes). Every
  table keeps one snapshot (Iceberg's default ``min-snapshots-to-keep``), so each loses 19
  snapshots and the 19 manifest lists, 19 manifests and 19 data files only they name. Wall
  time, the report's stage times, tables/s and files deleted/s, and the driver's peak memory
  (the Python driver's ``VmHWM`` and the driver JVM's, sampled every 0.2 s).
* **pyiceberg, table by table** (the baseline): for each table, ``load_table``, pyiceberg 0.12's
  ``table.maintenance.expire_snapshots().older_than(...)`` committed through the same
  ``LakecoreCatalog`` (a lakehouse commit per table), then what only the expired snapshots
  reached, read with pyiceberg's own manifest readers (``Snapshot.manifests``,
  ``ManifestFile.fetch_manifest_entry``), deleted with its FileIO. Measured on
  ``--baseline-tables`` tables of their own (the same shape) and scaled per table to
  ``--tables``: the loop is linear in the tables, and at 10,000 it would take the better part of
  an hour. Also **pyiceberg's metadata-only loop** (the expiry commits alone).
* **On S3** (``--s3-tables``, default 300; 0 skips it): the same job on moto's S3 server behind
  ``bench/latency_proxy.py`` (20 ms first byte): deletes go out in DeleteObjects requests of
  up to ``gc_delete_batch_size`` keys (1,000 in ``--env prod``); files/s against S3's published
  rate of 3,500 DELETE requests per second per prefix; and pyiceberg's loop over
  ``--s3-baseline-tables`` tables (default 30) through the same proxy, one DELETE per file.

The fixture is written directly, not by 200,000 pyiceberg commits: one template table (20
snapshots, each an overwrite replacing the table's one data file) is written with pyiceberg's
own writers (``write_manifest``, ``write_manifest_list``, ``ToOutputFile.table_metadata``;
Avro uncompressed), and every table is a copy of its files with the table's location and UUID
substituted (both fixed-width, so every Avro string keeps its length and every file stays
valid). The tables go into the lakehouse in one transaction, at default locations
(``<warehouse>/<ns>/<table>-<uuid>``: no registry entry), with the registry marked complete and
the warehouse claimed, as the catalog would have left them.

Driver peak memory is reported, not asserted; the goals (10x the baseline at 10,000 tables,
linear growth to 100,000) are in the JSON's ``goals``. ``--project 100000`` fits wall time,
each stage's time and the driver's peak memory to ``a + b * tables`` over the measured sizes
(least squares) and projects them to the given sizes, marked ``"projected": true`` in the JSON:
for when the fixture of the bigger size would take longer to build and delete than the machine
has (6.1 million files at 100,000 tables).

The job runs once per size (its fixture is consumed: the files are deleted); the baseline's
per-table times are reported as a median and percentiles.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from _common import (
    cpu_calibration,
    environment,
    goal,
    log,
    parse_int_list,
    print_json,
    print_table,
    ratio,
    summarize,
    temp_dir,
)

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SNAPSHOTS = 20
DAY = 86_400_000
# The template's placeholders: a location and a UUID of the widths every table's have.
TEMPLATE_UUID = "00000000-0000-4000-8000-000000000000"
TABLE_HEX = "0" * 32


def table_names(count: int) -> list[tuple[str, str]]:
    """(namespace, table) of ``count`` tables, 1,000 per namespace, fixed-width names."""
    return [(f"ns{i // 1000:04d}", f"t{i % 1000:04d}") for i in range(count)]


def build_template(work: Path, width: int) -> tuple[str, dict[str, bytes], list[int]]:
    """One table of ``SNAPSHOTS`` overwrites, written with pyiceberg's writers under a local
    location ``width`` characters long (that of the tables it stands for): (its location, its
    files by path relative to it, its snapshot ids)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import (
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        write_manifest,
        write_manifest_list,
    )
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.serializers import ToOutputFile
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, SnapshotLogEntry, Summary
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField

    prefix = f"file://{work}/t"
    if len(prefix) > width:
        raise ValueError(f"the scratch folder's path is longer than a table location ({width})")
    location = prefix + "p" * (width - len(prefix))
    io = PyArrowFileIO()
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    metadata = new_table_metadata(
        schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {}
    )
    metadata = metadata.model_copy(update={"table_uuid": uuid.UUID(TEMPLATE_UUID)})
    start = int(time.time() * 1000) - SNAPSHOTS * 60_000
    snapshots, log_entries = [], []
    parent = None
    for k in range(1, SNAPSHOTS + 1):
        snapshot_id = 1_000_000 + k
        data_path = f"{location}/data/{k:05d}-data.parquet"
        local = Path(data_path.removeprefix("file://"))
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(b"PAR1" + bytes(16) + b"PAR1")
        manifest_path = f"{location}/metadata/{k:05d}-m0.avro"
        with write_manifest(
            2,
            UNPARTITIONED_PARTITION_SPEC,
            schema,
            io.new_output(manifest_path),
            snapshot_id,
            "null",
        ) as writer:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=snapshot_id,
                    sequence_number=k,
                    file_sequence_number=k,
                    data_file=DataFile.from_args(
                        content=DataFileContent.DATA,
                        file_path=data_path,
                        file_format=FileFormat.PARQUET,
                        partition=Record(),
                        record_count=1,
                        file_size_in_bytes=24,
                    ),
                )
            )
        manifest = writer.to_manifest_file()
        list_path = f"{location}/metadata/snap-{snapshot_id}-0-{k:05d}.avro"
        with write_manifest_list(
            2, io.new_output(list_path), snapshot_id, parent, k, "null"
        ) as lister:
            lister.add_manifests([manifest])
        timestamp = start + k * 60_000
        snapshots.append(
            Snapshot(
                snapshot_id=snapshot_id,
                parent_snapshot_id=parent,
                sequence_number=k,
                timestamp_ms=timestamp,
                manifest_list=list_path,
                summary=Summary(operation=Operation.OVERWRITE),
                schema_id=0,
            )
        )
        log_entries.append(SnapshotLogEntry(snapshot_id=snapshot_id, timestamp_ms=timestamp))
        parent = snapshot_id
    assert parent is not None
    metadata = metadata.model_copy(
        update={
            "snapshots": snapshots,
            "snapshot_log": log_entries,
            "current_snapshot_id": parent,
            "last_sequence_number": SNAPSHOTS,
            "last_updated_ms": start + SNAPSHOTS * 60_000,
            "refs": {
                "main": SnapshotRef(snapshot_id=parent, snapshot_ref_type=SnapshotRefType.BRANCH)
            },
        }
    )
    metadata_rel = "metadata/00000-" + TEMPLATE_UUID + ".metadata.json"
    ToOutputFile.table_metadata(metadata, io.new_output(f"{location}/{metadata_rel}"))
    root = Path(location.removeprefix("file://"))
    files = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    shutil.rmtree(work)
    return location, files, [s.snapshot_id for s in snapshots]


def build_lake(
    base: Path,
    count: int,
    *,
    uri: str | None = None,
    warehouse: str | None = None,
    storage_options: dict[str, Any] | None = None,
    put_files: Any = None,
) -> dict[str, Any]:
    """A lakehouse of ``count`` tables (``SNAPSHOTS`` each): at ``uri`` (default ``base/lake``)
    with its warehouse at ``warehouse`` (default ``base/warehouse``); the warehouse's files go
    through ``put_files(list of (URI, bytes))`` (default: written to local disk)."""
    from lakecore.iceberg.pointer import pointer_properties
    from lakecore.iceberg.warehouse import claim_warehouse
    from lakecore.lakehouse import Lakehouse
    from lakecore.maintenance.tables.table_folders import (
        REGISTRY_FORMAT,
        REGISTRY_MARKER_PROPERTY,
        WAREHOUSE_PROPERTY,
    )

    uri = uri or str(base / "lake")
    warehouse = warehouse or f"file://{base}/warehouse"
    lh = Lakehouse.create(
        uri,
        storage_options=storage_options,
        minimum_versions_to_keep=1,
        maximum_version_age_millis=0,
    )
    width = len(f"{warehouse}/ns0000/t0000-{TABLE_HEX}")
    template_location, files, snapshot_ids = build_template(base / "template", width)

    def write_local(items: list[tuple[str, bytes]]) -> None:
        for target, data in items:
            path = Path(target.removeprefix("file://"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    put = put_files or write_local
    started = time.perf_counter()
    definitions = []
    pending: list[tuple[str, bytes]] = []
    for i, (ns, table) in enumerate(table_names(count)):
        table_uuid = str(uuid.UUID(int=i + 1, version=4))
        location = f"{warehouse}/{ns}/{table}-{i:032x}"
        assert len(location) == len(template_location)
        for rel, data in files.items():
            data = data.replace(template_location.encode(), location.encode())
            data = data.replace(TEMPLATE_UUID.encode(), table_uuid.encode())
            pending.append((f"{location}/{rel.replace(TEMPLATE_UUID, table_uuid)}", data))
        definitions.append((ns, table, f"{location}/metadata/00000-{table_uuid}.metadata.json"))
        if len(pending) >= 20_000:
            put(pending)
            pending = []
    put(pending)
    written = time.perf_counter() - started
    claim_warehouse(warehouse, lh.storage.root_uri.rstrip("/"), storage_options)
    started = time.perf_counter()
    with lh.transaction() as tx:
        for ns in sorted({ns for ns, _, _ in definitions}):
            tx.create_namespace(ns)
        for ns, table, metadata in definitions:
            tx.create_table(
                ns, table, format_properties=pointer_properties(metadata), checked_by_catalog=True
            )
        tx.set_definition_properties(
            {REGISTRY_MARKER_PROPERTY: REGISTRY_FORMAT, WAREHOUSE_PROPERTY: warehouse}
        )
    committed = time.perf_counter() - started
    return {
        "uri": uri,
        "warehouse": warehouse,
        "tables": len(definitions),
        "files": len(definitions) * len(files),
        "snapshot_ids": snapshot_ids,
        "write_seconds": round(written, 2),
        "commit_seconds": round(committed, 2),
    }


def files_under(path: Path) -> int:
    return sum(len(found) for _, _, found in os.walk(path))


# -- the job ----------------------------------------------------------------------------------------


def _status_kib(pid: int, name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _children(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = [int(c) for c in found]
    for child in list(out):
        out += _children(child)
    return out


def run_job(
    lake: dict[str, Any], work: Path, extra: list[str], env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The job in a process of its own; its report, wall time and the driver's peak memory."""
    report = work / f"report-{uuid.uuid4().hex[:8]}.json"
    now = str(int(time.time() * 1000) + 30 * DAY)
    command = [
        PYTHON,
        "-m",
        "jobs.table_maintenance",
        "--lakehouse",
        lake["uri"],
        "--master",
        "local[2]",
        "--now",
        now,
        "--i-understand-grace-risk",
        "--report",
        str(report),
        *extra,
    ]
    environ = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYSPARK_PYTHON": PYTHON,
        "PYSPARK_DRIVER_PYTHON": PYTHON,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "LAKECORE_PROGRESS": "0",
        "LAKECORE_LOG_DIR": str(work / "logs"),
        **(env or {}),
    }
    peaks = {"python_kib": 0, "jvm_kib": 0}
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peaks["python_kib"] = max(peaks["python_kib"], _status_kib(process.pid, "VmHWM"))
            for child in _children(process.pid):
                if "java" in Path(f"/proc/{child}/comm").read_text(errors="replace"):
                    peaks["jvm_kib"] = max(peaks["jvm_kib"], _status_kib(child, "VmHWM"))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _out, err = process.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    data = json.loads(report.read_text()) if report.exists() else {}
    if process.returncode != 0:
        log(err[-3000:])
    return {
        "exit_code": process.returncode,
        "wall_seconds": round(wall, 2),
        "report": {
            k: data.get(k) for k in ("status", "counts", "bytes", "durations_seconds", "error")
        },
        "driver_peak_python_mib": round(peaks["python_kib"] / 1024, 1),
        "driver_peak_jvm_mib": round(peaks["jvm_kib"] / 1024, 1),
    }


# -- the baseline -------------------------------------------------------------------------------------


def pyiceberg_loop(
    lake: dict[str, Any],
    names: list[tuple[str, str]],
    delete: bool,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Table by table in this process: pyiceberg's expire_snapshots committed through the
    catalog, then (``delete``) what only the expired snapshots reached, read with pyiceberg's
    manifest readers and deleted with its FileIO (one request per file on S3)."""
    import datetime as dt

    from lakecore.core.storage import Storage
    from lakecore.iceberg.expiry import maintenance_catalog

    catalog = maintenance_catalog(Storage(lake["uri"], storage_options))
    cutoff = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    deleted = 0
    per_table: list[float] = []
    started = time.perf_counter()
    for ns, name in names:
        one = time.perf_counter()
        table = catalog.load_table((ns, name))
        before = {s.snapshot_id: s for s in table.metadata.snapshots}
        table.maintenance.expire_snapshots().older_than(cutoff).commit()
        if not delete:
            per_table.append(time.perf_counter() - one)
            continue
        table = catalog.load_table((ns, name))
        kept = {s.snapshot_id for s in table.metadata.snapshots}
        io = table.io

        def named(snapshot: Any, io: Any = io) -> set[str]:
            out = {snapshot.manifest_list}
            for manifest in snapshot.manifests(io):
                out.add(manifest.manifest_path)
                out.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(io))
            return out

        reached = set().union(*(named(before[s]) for s in kept))
        gone = set().union(*(named(s) for i, s in before.items() if i not in kept)) - reached
        for path in gone:
            io.delete(path)
        deleted += len(gone)
        per_table.append(time.perf_counter() - one)
    seconds = time.perf_counter() - started
    return {
        "tables": len(names),
        "seconds": round(seconds, 2),
        "tables_per_second": round(len(names) / seconds, 2),
        "files_deleted": deleted,
        "files_deleted_per_second": round(deleted / seconds, 1) if delete else None,
        "per_table_ms": summarize(per_table, scale=1000.0, digits=2),
    }


def project(measured: list[dict[str, Any]], sizes: list[int]) -> list[dict[str, Any]]:
    """Least-squares ``a + b * tables`` over the measured sizes, for wall time, each stage and
    the driver's peak memory, evaluated at ``sizes``."""

    def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
        n = len(points)
        mx = sum(x for x, _ in points) / n
        my = sum(y for _, y in points) / n
        sxx = sum((x - mx) ** 2 for x, _ in points)
        b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
        return my - b * mx, b

    def series(get: Any) -> tuple[float, float]:
        return fit([(e["tables"], float(get(e) or 0.0)) for e in measured])

    stages = sorted(
        {s for e in measured for s in (e["job"]["report"].get("durations_seconds") or {})}
    )
    fits = {
        "wall_seconds": series(lambda e: e["job"]["wall_seconds"]),
        "driver_peak_python_mib": series(lambda e: e["job"]["driver_peak_python_mib"]),
        "driver_peak_jvm_mib": series(lambda e: e["job"]["driver_peak_jvm_mib"]),
        **{
            f"stage_{s}_seconds": series(
                lambda e, s=s: (e["job"]["report"].get("durations_seconds") or {}).get(s)
            )
            for s in stages
        },
    }
    out = []
    for size in sizes:
        entry: dict[str, Any] = {
            "tables": size,
            "projected": True,
            "from_sizes": [e["tables"] for e in measured],
        }
        for key, (a, b) in fits.items():
            entry[key] = round(a + b * size, 1)
            entry[key + "_per_1000_tables"] = round(b * 1000, 3)
        entry["tables_per_second"] = round(size / entry["wall_seconds"], 2)
        out.append(entry)
    return out


# -- S3 -----------------------------------------------------------------------------------------------


def s3_run(count: int, baseline: int, work: Path, latency_ms: float) -> dict[str, Any]:
    """The job on moto behind the latency proxy: the fixture written straight into moto, the
    job's deletes counted by request; then pyiceberg's loop over ``baseline`` tables of another
    lakehouse in the same bucket, through the same proxy."""
    sys.path.insert(0, str(Path(__file__).parent))
    from latency_proxy import LatencyProxy, MotoS3

    bucket = "bench-tables"
    with MotoS3() as moto, LatencyProxy(moto.endpoint, latency_ms=latency_ms) as proxy:
        moto.create_bucket(bucket)
        direct = {"client_kwargs": {"endpoint_url": moto.endpoint}, "key": "x", "secret": "x"}

        def put(items: list[tuple[str, bytes]]) -> None:
            moto.put_objects(bucket, [(t.removeprefix(f"s3://{bucket}/"), d) for t, d in items])

        lake = build_lake(
            work / "s3",
            count,
            uri=f"s3://{bucket}/lake",
            warehouse=f"s3://{bucket}/warehouse",
            storage_options=direct,
            put_files=put,
        )
        proxy.reset()
        result = run_job(
            lake,
            work,
            [
                "--env",
                "prod",
                "--storage-option",
                f"endpoint_url={proxy.endpoint}",
                "--storage-option",
                "key=x",
                "--storage-option",
                "secret=x",
                "--storage-option",
                "region=us-east-1",
            ],
        )
        requests = proxy.requests_by_kind()
        pyiceberg = None
        if baseline:
            base_lake = build_lake(
                work / "s3-baseline",
                baseline,
                uri=f"s3://{bucket}/baseline-lake",
                warehouse=f"s3://{bucket}/baseline-warehouse",
                storage_options=direct,
                put_files=put,
            )
            proxy.reset()
            via_proxy = {
                "client_kwargs": {"endpoint_url": proxy.endpoint},
                "key": "x",
                "secret": "x",
                "region": "us-east-1",
            }
            pyiceberg = pyiceberg_loop(
                base_lake, table_names(baseline), delete=True, storage_options=via_proxy
            )
            pyiceberg["requests_by_kind"] = proxy.requests_by_kind()
    deleted = (result["report"].get("counts") or {}).get("files_deleted", 0)
    delete_seconds = (result["report"].get("durations_seconds") or {}).get("delete", 0.0)
    batches = requests.get("delete_objects", 0)
    return {
        "tables": count,
        "latency_ms": latency_ms,
        "job": result,
        "delete_requests": batches,
        "keys_per_delete_request": round(deleted / batches, 1) if batches else None,
        "files_deleted_per_second": round(deleted / delete_seconds, 1) if delete_seconds else None,
        "s3_published_delete_requests_per_second_per_prefix": 3500,
        "requests_by_kind": requests,
        "pyiceberg_table_by_table": pyiceberg,
        "speedup_vs_pyiceberg": ratio(
            count / pyiceberg["tables_per_second"], result["wall_seconds"]
        )
        if pyiceberg
        else None,
    }


# -- main -------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="10000", help="table counts, comma-separated")
    parser.add_argument("--baseline-tables", type=int, default=500)
    parser.add_argument("--s3-tables", type=int, default=300)
    parser.add_argument("--s3-baseline-tables", type=int, default=30)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--scratch", default=None, help="where the fixtures go (default: /tmp)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--project", default="", help="table counts to project to from the measured sizes"
    )
    args = parser.parse_args()
    sizes = parse_int_list(args.tables)
    if args.quick:
        sizes, args.baseline_tables, args.s3_tables, args.s3_baseline_tables = [200], 50, 30, 5
    doc: dict[str, Any] = {
        "benchmark": "table_maintenance",
        "environment": environment(),
        "cpu": cpu_calibration(),
        "snapshots_per_table": SNAPSHOTS,
        "sizes": [],
        "goals": [],
    }
    with temp_dir("lakecore-bench-tm-", base=args.scratch) as scratch:
        work = Path(scratch)
        baseline_lake = build_lake(work / "baseline", args.baseline_tables)
        names = table_names(args.baseline_tables)
        full = pyiceberg_loop(baseline_lake, names, delete=True)
        shutil.rmtree(work / "baseline")
        meta_lake = build_lake(work / "metadata-only", args.baseline_tables)
        metadata_only = pyiceberg_loop(meta_lake, names, delete=False)
        shutil.rmtree(work / "metadata-only")
        doc["pyiceberg_table_by_table"] = full
        doc["pyiceberg_metadata_only"] = metadata_only
        log(
            f"pyiceberg: {full['tables_per_second']} tables/s with deletes, {metadata_only['tables_per_second']} metadata only"
        )
        rows = []
        for size in sizes:
            log(f"building {size} tables ...")
            lake = build_lake(work / f"lake-{size}", size)
            log(f"  written in {lake['write_seconds']} s, committed in {lake['commit_seconds']} s")
            job = run_job(lake, work, [])
            counts = job["report"].get("counts") or {}
            seconds = job["wall_seconds"]
            deleted = counts.get("files_deleted", 0)
            projected_baseline = size / full["tables_per_second"]
            entry = {
                "tables": size,
                "fixture": {k: v for k, v in lake.items() if k not in ("snapshot_ids",)},
                "job": job,
                "tables_per_second": round(size / seconds, 2),
                "files_deleted_per_second": round(deleted / seconds, 1),
                "baseline_seconds_projected": round(projected_baseline, 1),
                "speedup_vs_pyiceberg": ratio(projected_baseline, seconds),
                "speedup_vs_pyiceberg_metadata_only": ratio(
                    size / metadata_only["tables_per_second"], seconds
                ),
            }
            doc["sizes"].append(entry)
            rows.append(
                [
                    size,
                    seconds,
                    entry["tables_per_second"],
                    entry["files_deleted_per_second"],
                    projected_baseline,
                    entry["speedup_vs_pyiceberg"],
                    job["driver_peak_python_mib"],
                    job["driver_peak_jvm_mib"],
                ]
            )
            shutil.rmtree(work / f"lake-{size}")
        print_table(
            "table-maintenance job vs pyiceberg table by table",
            [
                "tables",
                "job s",
                "tables/s",
                "deleted/s",
                "pyiceberg s",
                "speedup",
                "py MiB",
                "jvm MiB",
            ],
            rows,
        )
        if args.s3_tables:
            log(f"S3: {args.s3_tables} tables behind {args.latency_ms} ms ...")
            doc["s3"] = s3_run(args.s3_tables, args.s3_baseline_tables, work, args.latency_ms)
    targets = parse_int_list(args.project) if args.project else []
    if targets and len(doc["sizes"]) >= 2:
        doc["projected"] = project(doc["sizes"], targets)
        base = doc["sizes"][-1]
        for entry in doc["projected"]:
            entry["wall_ratio_vs_largest_measured"] = ratio(
                entry["wall_seconds"], base["job"]["wall_seconds"]
            )
        log(f"projected: {doc['projected']}")
    ten = next((e for e in doc["sizes"] if e["tables"] == 10_000), None)
    if ten is not None:
        doc["goals"].append(
            goal(
                "10x pyiceberg at 10,000 tables",
                ">= 10",
                ten["speedup_vs_pyiceberg"],
                (ten["speedup_vs_pyiceberg"] or 0) >= 10,
            )
        )
    print_json(doc)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
