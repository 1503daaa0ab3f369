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

.PHONY: setup demo test test-fast lint proto bench clean

setup: $(STAMP)

# One pip command for everything: moto[server] must be resolved together with s3fs, or pip
# breaks aiobotocore's pin on botocore.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(VENV_PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV_PY) -m lakecore.demo --lakehouse "$(DEMO_LAKE)"

test: $(STAMP)
	$(VENV_PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check lakecore jobs tests bench airflow_dags
	$(VENV)/bin/mypy

proto: $(STAMP)
	$(VENV_PY) -m grpc_tools.protoc -I lakecore/defs --python_out=lakecore/defs --pyi_out=lakecore/defs lakecore/defs/lakecore.proto

bench: $(STAMP)
	$(VENV_PY) bench/run_all.py

clean:
	rm -rf $(VENV) $(DEMO_LAKE) .pytest_cache .mypy_cache .ruff_cache
