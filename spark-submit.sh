#!/usr/bin/env bash
# Run one of lakecore's maintenance jobs through spark-submit.
#
#   ./spark-submit.sh [--cluster] <job> --lakehouse URI [job options]
#
#   <job>: flush | gc | compact-versions | validate | export | repair   (jobs/<job>.py, '-' -> '_')
#
# Local mode (the default) runs on this repo's .venv: the driver and the executors use
# .venv/bin/python and import lakecore and jobs from the repo (PYTHONPATH), so nothing is shipped.
#
# --cluster submits in cluster deploy mode to $SPARK_MASTER (required). pyarrow, mmh3 and
# protobuf are native code that --py-files cannot carry, so the script packs a virtualenv with
# the project installed (non-editable) into build/lakecore-venv.tar.gz -- with venv-pack when
# pip can install it, else as a tar.gz of a `python -m venv --copies` -- and ships it with
# --archives ...#environment. It is rebuilt when lakecore/, jobs/ or pyproject.toml change
# (or with LAKECORE_REBUILD_VENV=1). The cluster's nodes must have the same Python (version and
# path) as this machine: a virtualenv does not carry the interpreter's standard library.
#
# Environment: SPARK_MASTER (cluster: required; local: optional --master), SPARK_SUBMIT (the
# spark-submit to use; default .venv/bin/spark-submit, else the one on PATH),
# LAKECORE_SPARK_ARGS (extra spark-submit arguments, split on whitespace).
#
# Exit codes are the job's (lakecore.errors.ExitCode, the README's table: 0 ok, 1 violations,
# 2 bad input, 3 conflict, 4 failure, 5 not found, 6 damaged, 130 interrupted); an unknown job
# or a missing SPARK_MASTER in cluster mode exits 2 before anything starts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROG="spark-submit.sh"
JOBS="flush gc compact-versions validate export repair"

usage() {
    cat <<EOF
usage: ./$PROG [--cluster] <job> --lakehouse URI [options]
  <job>: ${JOBS// / | }
  ./$PROG <job> --help    the job's options
  --cluster               cluster deploy mode on \$SPARK_MASTER with a packed virtualenv
EOF
}

die() {  # one line on stderr, exit 2 (bad arguments)
    echo "$PROG: $*" >&2
    exit 2
}

cluster=0
if [[ "${1:-}" == "--cluster" ]]; then
    cluster=1
    shift
fi
job="${1:-}"
case "$job" in
    flush | gc | compact-versions | validate | export | repair) shift ;;
    -h | --help) usage; exit 0 ;;
    "") usage >&2; exit 2 ;;
    *) echo "$PROG: unknown job '$job'" >&2; usage >&2; exit 2 ;;
esac
script="jobs/${job//-/_}.py"
[[ -f "$ROOT/$script" ]] || die "$script does not exist in $ROOT"

if [[ -n "${SPARK_SUBMIT:-}" ]]; then
    submit="$SPARK_SUBMIT"
elif [[ -x "$ROOT/.venv/bin/spark-submit" ]]; then
    submit="$ROOT/.venv/bin/spark-submit"
elif command -v spark-submit >/dev/null 2>&1; then
    submit="$(command -v spark-submit)"
else
    echo "$PROG: no spark-submit found: run 'make setup' (it installs pyspark into .venv) or set SPARK_SUBMIT" >&2
    exit 4
fi

# --help and argument errors answer before the JVM starts (about 4 s): the job's own parser runs
# in plain Python first (LAKECORE_PARSE_ONLY=1 makes run_job stop right after parsing). Skipped
# when this machine has no .venv (a cluster submit from elsewhere).
preflight_py="$ROOT/.venv/bin/python"
if [[ -x "$preflight_py" ]]; then
    for arg in "$@"; do
        if [[ "$arg" == "-h" || "$arg" == "--help" ]]; then
            PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$preflight_py" "$ROOT/$script" "$@"
        fi
    done
    status=0
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" LAKECORE_PARSE_ONLY=1 "$preflight_py" "$ROOT/$script" "$@" || status=$?
    [[ "$status" == 0 ]] || exit "$status"
fi

extra=()
if [[ -n "${LAKECORE_SPARK_ARGS:-}" ]]; then
    read -r -a extra <<<"$LAKECORE_SPARK_ARGS"
fi

# --- local mode ----------------------------------------------------------------------------------
if [[ "$cluster" == 0 ]]; then
    venv_py="$ROOT/.venv/bin/python"
    [[ -x "$venv_py" ]] || { echo "$PROG: $venv_py is missing: run 'make setup' first" >&2; exit 4; }
    export PYSPARK_PYTHON="$venv_py"
    export PYSPARK_DRIVER_PYTHON="$venv_py"
    export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    args=(
        --properties-file "$ROOT/conf/spark-defaults.conf"
        --driver-java-options "-Dlog4j2.configurationFile=file:$ROOT/conf/log4j2.properties"
    )
    if [[ -n "${SPARK_MASTER:-}" ]]; then
        args+=(--master "$SPARK_MASTER")
    fi
    exec "$submit" "${args[@]}" "${extra[@]}" "$ROOT/$script" "$@"
fi

# --- cluster mode --------------------------------------------------------------------------------
[[ -n "${SPARK_MASTER:-}" ]] || die "--cluster needs SPARK_MASTER (e.g. yarn, k8s://https://host:443, spark://host:7077)"

build="$ROOT/build"
archive="$build/lakecore-venv.tar.gz"

needs_build() {
    [[ "${LAKECORE_REBUILD_VENV:-0}" == 1 || ! -f "$archive" ]] && return 0
    [[ -n "$(find "$ROOT/lakecore" "$ROOT/jobs" "$ROOT/pyproject.toml" -newer "$archive" -print -quit)" ]]
}

build_venv() {
    local base env
    base="$(command -v python3.11 || command -v python3)"
    env="$build/pack-venv"
    echo "$PROG: packing a virtualenv with lakecore into $archive (once) ..." >&2
    rm -rf "$env" "$archive.tmp"
    mkdir -p "$build"
    "$base" -m venv --copies "$env"
    "$env/bin/python" -m pip install --quiet --upgrade pip setuptools wheel
    # Non-editable: the archive must hold the code itself, not a link back to this checkout.
    "$env/bin/python" -m pip install --quiet "$ROOT"
    if "$env/bin/python" -m pip install --quiet venv-pack; then
        "$env/bin/venv-pack" --quiet --prefix "$env" --output "$archive.tmp" --format tar.gz
    else
        echo "$PROG: venv-pack is not installable; packing the --copies virtualenv with tar" >&2
        tar -czf "$archive.tmp" -C "$env" .
    fi
    mv "$archive.tmp" "$archive"
}

if needs_build; then
    build_venv
fi

# The local defaults pin spark.master to local[*] and bind the driver to 127.0.0.1: neither
# holds on a cluster, so cluster runs get a copy of the defaults without those two lines.
cluster_defaults="$build/spark-defaults-cluster.conf"
grep -Ev '^[[:space:]]*spark\.(master|driver\.bindAddress)[[:space:]]' "$ROOT/conf/spark-defaults.conf" >"$cluster_defaults"

unset PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON
exec "$submit" \
    --master "$SPARK_MASTER" \
    --deploy-mode cluster \
    --properties-file "$cluster_defaults" \
    --archives "$archive#environment" \
    --conf spark.pyspark.python=./environment/bin/python \
    --conf spark.pyspark.driver.python=./environment/bin/python \
    --files "$ROOT/conf/log4j2.properties" \
    --driver-java-options "-Dlog4j2.configurationFile=log4j2.properties" \
    --conf "spark.executor.extraJavaOptions=-Dlog4j2.configurationFile=log4j2.properties" \
    "${extra[@]}" \
    "$ROOT/$script" "$@"
