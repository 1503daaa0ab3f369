"""gc as a program: ``spark-submit jobs/gc.py`` (so ``spark-submit.sh`` and the Airflow
DAGs run it) or ``python -m jobs.gc``; the job itself is ``jobs.gc_job``.

A job file only makes the repo importable and hands over (``jobs.startup.run_as_program``);
importing it does nothing.
"""

if __package__ in (None, ""):  # run as a file: sys.path has jobs/, not the repo root
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if __name__ == "__main__":
    from jobs.startup import run_as_program

    run_as_program("gc")
