"""``make demo``: build a sample lakehouse, show what it holds, run the maintenance jobs on it.

The sample and its rules (what the demo may recreate or remove) are
``lakecore.lakehouse.demo``'s; this entry adds the jobs (``jobs.pipeline``), unless
``--no-pipeline``. ``--remove`` removes an earlier demo's lakehouse and nothing else (what
``make clean`` runs).
"""

from __future__ import annotations

import os
import sys

from jobs.pipeline import remove_demo_reports, reports_dir, run_pipeline
from lakecore.contract.one_line_parser import OneLineArgumentParser
from lakecore.errors import InvalidArgumentError, LakecoreError
from lakecore.lakehouse.demo import build_sample, clear_demo_lakehouse, describe


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog="python -m jobs.demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lakehouse",
        default=os.path.abspath("demo-lakehouse"),
        help="a new or empty folder, or an earlier demo's lakehouse (default ./demo-lakehouse)",
    )
    parser.add_argument(
        "--no-pipeline", action="store_true", help="only build and describe the sample"
    )
    parser.add_argument(
        "--remove",
        action="store_true",
        help="only remove an earlier demo's lakehouse (what `make clean` runs)",
    )
    try:
        args = parser.parse_args(argv)
        path = args.lakehouse.removeprefix("file://")
        if "://" in path:
            raise InvalidArgumentError(f"--lakehouse {args.lakehouse} must be a local folder")
        path = os.path.abspath(path)
        reports = str(reports_dir(path))
        if path == reports or path.startswith(reports + "/") or reports.startswith(path + "/"):
            raise InvalidArgumentError(
                f"--lakehouse {path} and the demo's reports folder {reports} would overlap; give "
                "the lakehouse a folder of its own"
            )
        existed = os.path.isdir(path) and bool(os.listdir(path))
        clear_demo_lakehouse(path)
        if args.remove:
            if os.path.isdir(path):
                os.rmdir(path)  # empty now
            print(
                f"removed the demo lakehouse at {path}"
                if existed
                else f"no demo lakehouse at {path}",
                flush=True,
            )
            removed = remove_demo_reports()
            if removed:
                print(f"removed {len(removed)} demo report(s) from {reports}", flush=True)
            return 0
    except LakecoreError as exc:
        print(f"lakecore demo: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    print(f"building a sample lakehouse at {path} ...", flush=True)
    lh = build_sample(path)
    print(describe(lh), flush=True)
    if args.no_pipeline:
        return 0
    return int(run_pipeline(path))


if __name__ == "__main__":
    sys.exit(main())
