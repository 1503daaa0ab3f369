"""The job contract: what a maintenance job is to whoever runs it (tier 2, under the command line).

A job (the Spark jobs in ``jobs/``, and ``lakecore gc``, ``compact-versions`` and
``table-maintenance`` in one process) is its arguments, an options dataclass built from them and
the environment's settings, one run that returns a result, and a renderer that writes the result
into the job's report. This package holds all of it but the runs, so that the Spark jobs and the
command line read the same options, refuse the same values and write the same report:

- ``one_line_parser``: the argparse parser whose every error is one typed line (exit 2);
- ``option_types``: the argparse types that check a value as the command line is read (an output
  file, a whole number, a time, a duration);
- ``outputs``: the files a job or command writes on this machine, checked before any work (never
  inside a lakehouse, never onto a file no lakecore command wrote) and written atomically;
- ``job_report``: the report of a run, its JSON and its summary on the terminal;
- ``gc``, ``compact_versions``, ``table_maintenance``: each job's own arguments, the checks
  made as they are read, its options, and its renderer (the only place its report keys are
  written).

Rules:
- It imports the format core, the catalog (``lakecore.lakehouse``) and maintenance
  (``lakecore.maintenance``), never the command line (``lakecore.cli``) nor Spark (``jobs/``):
  ``lakecore.cli`` is a thin shell over this contract, and ``jobs/`` never imports ``lakecore.cli``
  (``tests/test_architecture.py``).
- The results (``GcResult``, ``ExpiryResult``, ``TableMaintenanceResult``) and the runs stay
  beside the work in ``lakecore.maintenance``; this package renders them.
"""
