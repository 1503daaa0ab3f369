"""Run every benchmark and keep its JSON under bench/results/ (``make bench``).

``--quick`` runs the small variants (about a minute each); the default runs the full ones.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = [
    "bench_tree.py",
    "bench_commit.py",
    "bench_lookup.py",
    "bench_iceberg.py",
    "bench_rest.py",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=BENCHMARKS, action="append")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent
    results = here / "results"
    results.mkdir(exist_ok=True)
    failures = 0
    for name in args.only or BENCHMARKS:
        extra = ["--quick"] if args.quick and name != "bench_lookup.py" else []
        if args.quick and name == "bench_lookup.py":
            extra = ["--keys", "100000"]
        out = results / f"{Path(name).stem}-{time.strftime('%Y%m%dT%H%M%S')}.json"
        print(f"== {name} {' '.join(extra)} -> {out}", flush=True)
        with out.open("w") as stdout:
            code = subprocess.call([sys.executable, str(here / name), *extra], stdout=stdout)
        if code != 0:
            print(f"   {name} exited {code}", flush=True)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
