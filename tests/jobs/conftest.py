"""The job tests' fixtures are the session's: ``spark`` and ``run_job`` (tests/conftest.py)."""
