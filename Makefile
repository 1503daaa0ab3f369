# The README's commands. `make demo` and `make test` each set up everything they need on a
# machine with only Python 3.11 and Java 17.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_LAKE ?= $(CURDIR)/demo-lakehouse

export PYSPARK_PYTHON := $(CURDIR)/$(VENV_PY)
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VENV_PY)
export SPARK_LOCAL_IP := 127.0.0.1

# Airflow gets its own venv: Airflow 3 and the Spark provider pull in pyspark-client, which
# installs into the same pyspark/ package folder as pyspark and would break .venv. The DAGs
# never import lakecore or pyspark; the tasks run the jobs with .venv's spark-submit.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_PY := $(AIRFLOW_VENV)/bin/python
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
# DuckDB, the REST server's DuckDB client in tests/rest/test_rest_duckdb.py, gets a venv of its
# own too: its pinned version and extension wheels stay out of .venv. The extensions come from
# the package index and are loaded from their wheel paths (no download at run time). About 10 s.
DUCKDB_VENV := .venv-duckdb
DUCKDB_PY := $(DUCKDB_VENV)/bin/python
DUCKDB_STAMP := $(DUCKDB_VENV)/.installed
DUCKDB_SPEC := "duckdb==1.5.5" "duckdb-extension-iceberg==1.5.5" "duckdb-extension-httpfs==1.5.5" "duckdb-extension-avro==1.5.5"
# Spark SQL and Trino, clients of the REST server in tests/engines/. Spark gets its own venv:
# Iceberg's Spark runtime exists for Spark 4.1, not for .venv's pyspark 4.3. Their jars and
# Trino's server come from Maven Central through Maven's own client, checked against pinned
# sha512s, into build/engines/ (tests/engines/artifacts.py; Maven's local repository is the
# cache between runs). About 50 s and 520 MB for the venv, 30 s and 510 MB for build/engines
# when Maven has the files already.
SPARK_VENV := .venv-spark
SPARK_PY := $(SPARK_VENV)/bin/python
SPARK_STAMP := $(SPARK_VENV)/.installed
SPARK_SPEC := "pyspark==4.1.4"
ENGINES_STAMP := build/engines/.fetched
AIRFLOW_SPEC := "apache-airflow>=3.3,<3.4" "apache-airflow-providers-apache-spark>=6.3,<7" "pytest>=8,<10" "pytest-timeout>=2.3" "pytest-xdist>=3.5,<4"

.PHONY: setup demo test test-quick test-setup test-airflow test-engines lint proto bench clean browser jvm-archive engines

# The test tiers (docs/testing.md says what each leaves out and what it costs). make test is
# what CI runs: everything not marked slow, on PYTEST_WORKERS workers (pytest-xdist; the tests
# of the session's cluster and Connect server stay on one worker each). make test-quick is the
# inner loop: the library, the CLI and the catalog, nothing that starts a JVM or a server.
# Three on two cores: the suite waits on JVMs, subprocesses and the latency proxy (a
# fresh-clone run used 57% of two cores with two workers), so a third worker fills the gaps.
PYTEST_WORKERS ?= 3
QUICK_MARKERS := not spark and not s3 and not cluster and not connect and not engines and not airflow and not reliability and not slow

# pyiceberg's own catalog behaviour suite (tests/iceberg/behaviours/) runs from the sdist of the
# pinned pyiceberg, fetched from the package index once and kept in build/. The module asks the
# index pip is configured with for the file and checks its sha256; it builds nothing.
PYICEBERG_SUITE := build/pyiceberg-0.12.0/tests/catalog/test_catalog_behaviors.py

setup: $(STAMP) jvm-archive

# The driver JVM's class archive (jobs/driver_jvm.py): about a minute once per JDK and Spark, then
# about 3 s less start for every job this machine runs. A no-op when it is up to date; a failure
# is a note, not an error (the jobs then start without it).
jvm-archive: $(STAMP)
	@$(VENV_PY) -m jobs.driver_jvm --build

# One pip command for everything: moto[server] must be resolved together with s3fs, or pip
# breaks aiobotocore's pin on botocore.
# Reinstalled only when pyproject.toml or this file changed; pip's cache makes a reinstall
# cheap (it downloads nothing it has).
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(VENV_PY) -m pip install --quiet -e ".[dev,s3,spark,iceberg,server,report,completion]"
	$(VENV_PY) -m pip install --quiet --only-binary atheris -e ".[dev,s3,spark,iceberg,server,report,completion,fuzz]" \
	  || echo "note: atheris has no wheel for this machine; its fuzz test will be skipped"
	touch $(STAMP)

# Airflow's own constraint files live on GitHub, which is not reachable from every build
# machine, so the ranges above (the versions the DAG tests ran with) are the pins and pip
# resolves them from the package index alone. About 1.5 minutes, 660 MB.
$(AIRFLOW_STAMP): Makefile
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(AIRFLOW_PY) -m pip install --quiet $(AIRFLOW_SPEC)
	touch $(AIRFLOW_STAMP)

$(DUCKDB_STAMP): Makefile
	$(PYTHON) -m venv $(DUCKDB_VENV)
	$(DUCKDB_PY) -m pip install --quiet $(DUCKDB_SPEC)
	touch $(DUCKDB_STAMP)

$(SPARK_STAMP): Makefile
	$(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_PY) -m pip install --quiet $(SPARK_SPEC)
	touch $(SPARK_STAMP)

# Written only when every file is there and checked; without mvn (or a Java 24+ for Trino) the
# module says so and the engine tests are skipped (they fail under CI).
$(ENGINES_STAMP): tests/engines/artifacts.py | $(STAMP)
	$(VENV_PY) -m tests.engines.artifacts
	@if $(VENV_PY) -c 'import sys; from tests.engines import artifacts as a; sys.exit(not (a.spark_ready() and a.trino_ready()))'; then touch $@; fi

engines: $(SPARK_STAMP) $(ENGINES_STAMP)

demo: $(STAMP) jvm-archive
	$(VENV_PY) -m jobs.demo --lakehouse "$(DEMO_LAKE)"

# Headless Chromium for tests/jobs/test_pages.py (screenshots of the HTML pages). Installed
# quietly where apt-get is available and we are root; anywhere else the test skips its browser part.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium >/dev/null 2>&1) \
	    || echo "note: could not install chromium; the browser checks in tests/jobs/test_pages.py will be skipped"; \
	else echo "note: no apt-get (or not root): the browser checks in tests/jobs/test_pages.py will be skipped"; fi

$(PYICEBERG_SUITE): tests/iceberg/behaviours/pyiceberg_sdist.py | $(STAMP)
	$(VENV_PY) -m tests.iceberg.behaviours.pyiceberg_sdist
	touch $@

# The venvs, the browser, the class archive and pyiceberg's suite do not depend on each other
# (but on .venv): built side by side, they take the time of the longest, not of the sum.
test-setup: $(STAMP) $(AIRFLOW_STAMP) $(DUCKDB_STAMP) $(SPARK_STAMP) $(ENGINES_STAMP) browser jvm-archive $(PYICEBERG_SUITE)

# tests/airflow runs in .venv-airflow beside the main suite, not after it: niced, it takes the
# CPU the main suite's workers leave idle (they wait on JVMs and subprocesses: about 0.8 of the 2
# cores on average), where it used to add about 110 s. It is the longer of the two, so it starts
# as soon as what it uses is built (the two venvs and the class archive), while the rest of the
# setup (the engines, DuckDB, the browser, pyiceberg's suite) is still being built. Its output
# is kept in build/ and printed after the main suite's; make test fails if either fails. Two
# workers by file: the DAG checks (about 90 s) beside the end-to-end run, not after it.
AIRFLOW_LOG := build/test-airflow.log
test:
	@$(MAKE) --no-print-directory -j4 $(STAMP) $(AIRFLOW_STAMP) jvm-archive
	@mkdir -p build; \
	LAKECORE_TEST_TIMES=build/test-times-airflow.json nice -n 10 \
	  $(AIRFLOW_PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile tests/airflow > $(AIRFLOW_LOG) 2>&1 & airflow=$$!; \
	$(MAKE) --no-print-directory -j4 test-setup || { kill $$airflow; wait $$airflow; exit 2; }; \
	echo "$(VENV_PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup   (tests/airflow beside it: $(AIRFLOW_LOG))"; \
	$(VENV_PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup; main=$$?; \
	wait $$airflow; beside=$$?; \
	echo; echo "==== tests/airflow in .venv-airflow (ran beside the main suite; $(AIRFLOW_LOG)) ===="; \
	cat $(AIRFLOW_LOG); \
	test $$main -eq 0 -a $$beside -eq 0

test-quick: $(STAMP) $(PYICEBERG_SUITE)
	$(VENV_PY) -m pytest -q -n $(PYTEST_WORKERS) -m "$(QUICK_MARKERS)"

test-airflow: $(STAMP) $(AIRFLOW_STAMP)
	$(AIRFLOW_PY) -m pytest -q tests/airflow

test-engines: $(STAMP) $(DUCKDB_STAMP) engines
	$(VENV_PY) -m pytest -q -m engines tests/engines

lint: $(STAMP)
	$(VENV)/bin/ruff format --check lakecore jobs tests bench airflow_dags
	$(VENV)/bin/ruff check lakecore jobs tests bench airflow_dags
	$(VENV)/bin/mypy

proto: $(STAMP)
	$(VENV_PY) -m grpc_tools.protoc -I lakecore/core/defs --python_out=lakecore/core/defs --pyi_out=lakecore/core/defs lakecore/core/defs/lakecore.proto

bench: $(STAMP)
	$(VENV_PY) bench/run_all.py

# `make clean` never deletes what make or the demo did not make: the demo lakehouse and the
# demo's reports go through the demo's own remover (DEMO_LAKE may name a folder that holds other
# files; only reports lakecore wrote are removed), and of build/ only what the targets above
# write (anything else there, and build/ itself then, stays).
BUILT := build/jvm build/engines build/test-airflow.log build/pyiceberg-0.12.0 build/pyiceberg-0.12.0.tar.gz build/lakecore-venv-*.tar.gz \
	build/pack-venv-* build/pack-tmp-* build/.pack.lock build/lib build/bdist.* build/test-times*.json
clean:
	if [ -x $(VENV_PY) ]; then $(VENV_PY) -m jobs.demo --remove --lakehouse "$(DEMO_LAKE)"; fi
	rm -rf $(VENV) $(AIRFLOW_VENV) $(DUCKDB_VENV) $(SPARK_VENV) $(BUILT) .pytest_cache .mypy_cache .ruff_cache
	rmdir build 2>/dev/null || true
