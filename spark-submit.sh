#!/usr/bin/env bash
# Run one of lakecore's maintenance jobs through spark-submit.
#
#   ./spark-submit.sh [--cluster] <job> --lakehouse URI [job options]
#   ./spark-submit.sh <job> --lakehouse URI --remote sc://HOST:PORT [job options]
#
#   <job>: flush | gc | compact-versions | table-maintenance | validate | export | repair   (jobs/<job>.py, '-' -> '_')
#
# With --remote sc://HOST:PORT (or --remote=sc://...) among the job's options, or $SPARK_REMOTE
# set and no --master among them, the job is a Spark Connect client: no JVM and no spark-submit
# here, the work runs on that endpoint. The wrapper runs `.venv/bin/python -m jobs.<job>` with
# the repo on PYTHONPATH; SPARK_MASTER, LAKECORE_SPARK_ARGS and the deploy settings do not
# apply (the endpoint's own configuration does), and --cluster with a remote is refused (exit
# 2). The endpoint's Python workers must import lakecore and its dependencies themselves.
#
# Without --cluster the driver runs here on this repo's .venv and the executors run
# .venv/bin/python too (PYTHONPATH names the repo), so nothing is shipped: local mode, or a
# cluster whose nodes have this checkout and its .venv at the same path. The master is
# $SPARK_MASTER when set (e.g. spark://host:7077), else local[*] (conf/spark-defaults.conf).
#
# --cluster runs on $SPARK_MASTER (required) with the executors on a packed virtualenv shipped
# with --archives ...#environment, so the nodes need only Spark and the same Python (version and
# path: a virtualenv does not carry the interpreter's standard library). The deploy mode is the
# one the cluster manager supports for Python applications: client on a standalone master
# (spark://; the driver runs here on .venv), cluster on YARN and Kubernetes (the driver runs in
# the archive too). LAKECORE_DEPLOY_MODE=client|cluster overrides it where the manager allows.
#
# The archive, build/lakecore-venv-<hash>.tar.gz, holds lakecore, the jobs, conf/ and their
# dependencies, but no pyspark: executors and cluster-mode drivers use the cluster's own Spark
# (pyspark.zip), which must be the same Spark version as .venv's. <hash> is a content hash of
# what goes in (lakecore/, jobs/, conf/maintenance-*.json, pyproject.toml, the Python version),
# so it is packed once per change (LAKECORE_REBUILD_VENV=1 forces it) and a changed archive has
# a new name, which the clusters' file caches never mistake for an old one. Set
# LAKECORE_VENV_URI to a directory every node can read (hdfs:///apps/lakecore, s3a://bucket/x)
# holding the same file name to ship that copy instead of uploading the local one each time.
#
# Environment: SPARK_MASTER, SPARK_SUBMIT (the spark-submit to use; default
# .venv/bin/spark-submit, else the one on PATH), LAKECORE_SPARK_ARGS (extra spark-submit
# arguments, split on whitespace: credentials for executors, event logs, ...),
# LAKECORE_DEPLOY_MODE, LAKECORE_REBUILD_VENV, LAKECORE_VENV_URI, SPARK_LOCAL_IP (the driver's
# address: 127.0.0.1 by default in local mode only).
#
# Exit codes are the job's (lakecore.errors.ExitCode, the README's table: 0 ok, 1 violations,
# 2 bad input, 3 conflict, 4 failure, 5 not found, 6 damaged, 130 interrupted). Bad arguments to
# this script (an unknown job, --cluster without a cluster master, an unsupported deploy mode,
# --cluster with a remote, a remote that is not sc://...) exit 2 before anything starts; a
# missing spark-submit or .venv, an archive that cannot be packed, or a standalone master
# (spark://) that accepts no connection, exits 4. An endpoint that
# does not answer is the job's exit 4 (SparkUnavailableError), one line on stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROG="spark-submit.sh"
JOBS="flush gc compact-versions table-maintenance validate export repair"
# Bump when the archive's recipe changes, so the content hash (and the archive) changes too.
PACK_RECIPE=3

usage() {
    cat <<EOF
usage: ./$PROG [--cluster] <job> --lakehouse URI [options]
  <job>: ${JOBS// / | }
  ./$PROG <job> --help    the job's options
  --cluster               run on \$SPARK_MASTER with a packed virtualenv for the executors
                          (client deploy mode on spark://, cluster deploy mode on YARN and k8s)
  <job> ... --remote sc://HOST:PORT   (or \$SPARK_REMOTE) run through Spark Connect: no local JVM
EOF
}

die() {  # one line on stderr, exit 2 (bad arguments)
    echo "$PROG: $*" >&2
    exit 2
}

fail() {  # one line on stderr, exit 4 (failure)
    echo "$PROG: $*" >&2
    exit 4
}

# Running the driver here (local mode, client deploy mode). Ctrl-C reaches the whole terminal
# group. The JVM starts with SIGINT ignored and so leaves it ignored; the driver (its Python
# child) installs its own handler, stops, writes its report and its one line, and the JVM exits
# with the driver's code. A JVM stopping on the same Ctrl-C killed the driver first: no report,
# py4j tracebacks. But until the JVM has started the driver nobody would act on a Ctrl-C, and
# the job ran to its end: this shell stays to stop the JVM then (nothing was done yet). A
# SIGTERM for this shell goes on to the driver, or to the JVM before the driver handles it.
submit_pid=""
exit_code_when_stopped=""
submit_children() {  # the pids of spark-submit's children (all its threads'); none without /proc
    cat /proc/"$submit_pid"/task/*/children 2>/dev/null || true
}
driver_pid() {  # the JVM's Python child that runs the job file, once it has started (not
    # Spark's Python workers, children of the JVM too; not spark-class's Java launcher, whose
    # command line names the job file as well)
    local child
    for child in $(submit_children); do
        if [[ "$(cat /proc/"$child"/comm 2>/dev/null)" == python* ]] \
            && [[ "$(tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null)" == *"$ROOT/$script"* ]]; then
            echo "$child"
            return 0
        fi
    done
    return 1
}
catches() {  # $1: a pid, $2: a signal number; true once the process has a handler for it
    local name value mask=""
    while read -r name value; do
        if [[ "$name" == SigCgt: ]]; then mask="$value"; fi
    done 2>/dev/null <"/proc/$1/status"
    [[ -n "$mask" ]] && (( (16#$mask >> ($2 - 1)) & 1 ))
}
job_began() {  # true once the driver's job has begun: its own handlers have the signals
    [[ -n "${job_began_file:-}" && -e "$job_began_file" ]]
}
pass_on_to_driver() {  # $1: the driver's pid, $2: a signal number; true when passed on
    # The driver starts with SIGINT and SIGTERM ignored, as the JVM, until its job's handler
    # is in place (its imports, under a second): wait for that, then send the signal. The
    # driver may have had it from the terminal already, or not (it arrived a moment before
    # the handler): the job acts on the first and ignores the rest, so always send it.
    local tries=0
    while kill -0 "$1" 2>/dev/null && ! catches "$1" "$2" && (( tries++ < 300 )); do
        sleep 0.05
    done
    catches "$1" "$2" && kill -"$2" "$1" 2>/dev/null
}
interrupted_while_starting() {  # the INT trap until the job ends
    if [[ -n "$submit_pid" ]]; then
        local driver
        if driver="$(driver_pid)"; then
            pass_on_to_driver "$driver" 2 || true
            return 0
        fi
        # No driver now, but its job had begun: it has ended on this Ctrl-C (its line is the
        # line) and the JVM ends with its code.
        job_began && return 0
        if [[ ! -r /proc/"$submit_pid"/status ]]; then
            return 0  # no /proc: the children cannot be told; leave Ctrl-C to the driver
        fi
        stop_spark_submit
    fi
    echo "$PROG: interrupted by SIGINT while Spark was starting, before the job began; nothing was done" >&2
    exit 130
}
terminated() {  # SIGTERM (a scheduler stopping the job): to the driver, so that it writes its
    # report and its one line; before the driver exists, to the JVM
    local driver
    sigterm_received=1
    if driver="$(driver_pid)" && pass_on_to_driver "$driver" 15; then
        return 0
    elif job_began; then
        return 0  # the driver has ended meanwhile; the JVM ends with its code
    else
        echo "$PROG: stopped by SIGTERM while Spark was starting, before the job began; nothing was done" >&2
        exit_code_when_stopped=130  # the JVM's own exit code is no exit code of ours
        stop_spark_submit
    fi
}
stop_spark_submit() {
    # SIGHUP: the JVM ignores SIGINT and SIGTERM (see run_driver_here) but still shuts down in
    # order (its shutdown hooks remove Spark's temporary folders) on a hang-up.
    local child
    for child in $(submit_children); do  # spark-class's launcher
        kill -HUP "$child" 2>/dev/null || true
    done
    kill -HUP "$submit_pid" 2>/dev/null || true
    wait "$submit_pid" 2>/dev/null || true
}
ignoring_ctrl_c() {  # "$@": a short step before the JVM (a second or less); a Ctrl-C meanwhile
    # waits for it, then this shell's trap says so in one line: no KeyboardInterrupt traceback
    (trap '' INT; exec "$@")
}
# Spark's own output (the JVM's log, its Python workers' stderr) goes to a log file per run, not
# to the terminal: a failed task printed 84 to 178 lines of Java and Python traces over the job's
# one line. The job's summary (stdout) and its one error line stay on the terminal, and the
# error line names the log when the failure was not one of lakecore's own. LAKECORE_LOG_DIR
# picks the folder (default $XDG_STATE_HOME/lakecore/logs, i.e. ~/.local/state/lakecore/logs);
# LAKECORE_LOG_DIR=- keeps Spark's output on the terminal. The newest SPARK_LOGS_KEPT logs stay.
SPARK_LOGS_KEPT=100
spark_log=""
spark_log_dir=""
plan_spark_log() {  # names the log (spark_log, LAKECORE_SPARK_LOG) before the job's argument
    # check, which refuses one inside the lakehouse like any output of the job's
    spark_log_dir="${LAKECORE_LOG_DIR:-${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/lakecore/logs}"
    if [[ "$spark_log_dir" == - ]]; then return 0; fi
    spark_log="$spark_log_dir/lakecore-$job-$(date -u +%Y%m%dT%H%M%SZ)-$$.log"
    export LAKECORE_SPARK_LOG="$spark_log"
}
open_spark_log() {  # makes the planned log (spark_log empty: Spark's output stays on the terminal)
    local dir="$spark_log_dir"
    if [[ -z "$spark_log" ]]; then return 0; fi
    if ! mkdir -p "$dir" 2>/dev/null || [[ ! -w "$dir" ]]; then
        echo "$PROG: note: cannot write Spark's log in $dir (LAKECORE_LOG_DIR); it stays on the terminal" >&2
        spark_log=""
        unset LAKECORE_SPARK_LOG
        return 0
    fi
    : >"$spark_log"
    # Only names of this form are ours to remove.
    find "$dir" -maxdepth 1 -type f -name 'lakecore-*-*Z-*.log' -printf '%T@ %p\n' 2>/dev/null \
        | sort -rn | tail -n +$((SPARK_LOGS_KEPT + 1)) | cut -d' ' -f2- | xargs -r rm -f --
}
run_driver_here() {  # "$@": the spark-submit command line; exits with its code
    # Two files the driver writes (removed on exit): that its job has begun (see
    # interrupted_while_starting), and its one error line, which Spark's PythonRunner would
    # print on stdout (it merges the driver's stderr into its stdout): this prints it on stderr.
    local stale
    for stale in "${TMPDIR:-/tmp}"/lakecore-job-began.* "${TMPDIR:-/tmp}"/lakecore-job-error.*; do
        # A wrapper killed outright (SIGKILL) could not remove its own: the ones whose wrapper
        # is gone go now (a live one's pid answers kill -0).
        if [[ -e "$stale" ]] && ! kill -0 "${stale##*.}" 2>/dev/null; then rm -f "$stale"; fi
    done
    job_began_file="${TMPDIR:-/tmp}/lakecore-job-began.$$"
    error_line_file="${TMPDIR:-/tmp}/lakecore-job-error.$$"
    rm -f "$job_began_file" "$error_line_file"
    trap 'rm -f "$job_began_file" "$error_line_file"' EXIT
    export LAKECORE_JOB_BEGAN_FILE="$job_began_file" LAKECORE_ERROR_LINE_FILE="$error_line_file"
    # The driver writes through the JVM, which relays it to this terminal but is no terminal
    # itself: the driver would think it writes to a pipe and draw no progress. On a terminal
    # (both streams: the relay arrives on stdout), say so, unless LAKECORE_PROGRESS is set.
    if [[ -z "${LAKECORE_PROGRESS+set}" && -t 1 && -t 2 ]]; then
        export LAKECORE_PROGRESS=1
    fi
    # The JVM starts with SIGINT and SIGTERM ignored (HotSpot then installs no handler for
    # them): a Ctrl-C, or a scheduler's SIGTERM to the whole process group, is the driver's to
    # act on, which stops the job, writes its report and its line, and the JVM, which relays
    # the driver's output, ends with the driver's code. Before, a group SIGTERM killed the JVM
    # with it (exit 143) and the driver's line was lost with the JVM that relays it.
    trap "" INT TERM
    open_spark_log
    if [[ -n "$spark_log" ]]; then
        "$@" <&0 2>>"$spark_log" &
    else
        "$@" <&0 &
    fi
    submit_pid=$!
    trap interrupted_while_starting INT
    trap terminated TERM
    local code
    while true; do
        code=0
        wait "$submit_pid" || code=$?
        # wait also returns when a trapped signal arrives; then the JVM still runs
        if ! kill -0 "$submit_pid" 2>/dev/null; then
            # Should a JVM handle SIGTERM after all (a handler of Spark's own), it dies of a
            # group SIGTERM with 143, no exit code of ours: the job was stopped by it, 130.
            if [[ "$code" == 143 && "${sigterm_received:-0}" == 1 ]]; then code=130; fi
            if [[ -s "$error_line_file" ]]; then
                cat "$error_line_file" >&2
            elif [[ "$code" != 0 && -z "$exit_code_when_stopped" && -n "$spark_log" ]]; then
                # The job said nothing (the JVM or spark-submit failed before or around it):
                # what Spark said last is the only clue, and it is in the log, not here.
                echo "$PROG: $job ended with exit code $code without a line of its own; the end of Spark's log ($spark_log):" >&2
                tail -n 5 "$spark_log" >&2 || true
            fi
            exit "${exit_code_when_stopped:-$code}"
        fi
    done
}

cluster=0
if [[ "${1:-}" == "--cluster" ]]; then
    cluster=1
    shift
fi
nearest_job() {  # $1: a mistyped job; " (did you mean JOB?)" for a job that begins with it or
    # that it begins with, else for the closest by difflib's ratio (at least 0.6); else nothing
    local candidate
    for candidate in $JOBS; do
        if [[ "$candidate" == "$1"* || "$1" == "$candidate"* ]]; then
            echo " (did you mean $candidate?)"
            return
        fi
    done
    command -v python3 > /dev/null || return 0
    # shellcheck disable=SC2086  # the job names are words
    python3 -c 'import difflib, sys
close = difflib.get_close_matches(sys.argv[1], sys.argv[2:], n=1)
print(f" (did you mean {close[0]}?)" if close else "")' "$1" $JOBS 2> /dev/null || true
}

job="${1:-}"
case "$job" in
    flush | gc | compact-versions | table-maintenance | validate | export | repair) shift ;;
    -h | --help) usage; exit 0 ;;
    "") usage >&2; exit 2 ;;
    *) echo "$PROG: unknown job '$job'$(nearest_job "$job"); the jobs: ${JOBS// /, } (./$PROG --help)" >&2; exit 2 ;;
esac
script="jobs/${job//-/_}.py"
[[ -f "$ROOT/$script" ]] || die "$script does not exist in $ROOT"
trap interrupted_while_starting INT

venv_py="$ROOT/.venv/bin/python"

# --- --remote sc://HOST:PORT or $SPARK_REMOTE: a Spark Connect client, no JVM here ------------------
names_option() {  # $1: an argument, $2: an option; true for --option and --option=... (the
    # jobs take no abbreviation: lakecore/contract/one_line_parser.py)
    [[ "${1%%=*}" == "$2" ]]
}
remote=""
remote_given=0      # --remote among the job's options (its value may be missing: the job says so)
master_given=0      # --master among them: it wins over $SPARK_REMOTE, as in the job itself
job_master=""       # ... and its value
expect_remote=0
expect_master=0
for arg in "$@"; do
    if [[ "$expect_remote" == 1 ]]; then
        remote="$arg"
        expect_remote=0
    elif [[ "$expect_master" == 1 ]]; then
        job_master="$arg"
        expect_master=0
    elif names_option "$arg" --remote; then
        remote_given=1
        if [[ "$arg" == *=* ]]; then remote="${arg#*=}"; else expect_remote=1; fi
    elif names_option "$arg" --master; then
        master_given=1
        if [[ "$arg" == *=* ]]; then job_master="${arg#*=}"; else expect_master=1; fi
    fi
done
remote_source="--remote"
if [[ "$remote_given" == 0 && "$master_given" == 0 && -n "${SPARK_REMOTE:-}" ]]; then
    remote="$SPARK_REMOTE"
    remote_source="SPARK_REMOTE"
fi
if [[ "$remote_given" == 1 || "$remote_source" == SPARK_REMOTE ]]; then
    [[ "$cluster" == 0 ]] \
        || die "--cluster submits to \$SPARK_MASTER, $remote_source '$remote' runs through Spark Connect: use one or the other"
    if [[ -n "$remote" && "$remote" != sc://* ]]; then
        die "$remote_source '$remote' is not a Spark Connect address (sc://HOST:PORT)"
    fi
    [[ -x "$venv_py" ]] || fail "$venv_py is missing: run 'make setup' first"
    # The job's own parser answers --help and argument errors (one line on stderr, exit 2) and
    # it alone talks to the endpoint: nothing to check before it, no JVM to spare.
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    exec "$venv_py" -m "jobs.${job//-/_}" "$@"
fi
# Classic Spark from here on: an endpoint left in the environment would turn pyspark's session
# into a Connect client behind the job's back (the job's --master wins over it).
unset SPARK_REMOTE

master="${SPARK_MASTER:-}"
is_local=0
deploy_mode=""
if [[ -z "$master" || "$master" == local* ]]; then
    is_local=1
fi

case "$master" in
    "" | local | local\[*\] | local-cluster\[*\] | spark://* | yarn | k8s://*) ;;
    # spark-submit would say so itself, but with exit 1, which reads as "violations".
    *) die "SPARK_MASTER '$master' is not a Spark master URL (local[N], spark://host:7077, yarn, k8s://https://host:443)" ;;
esac

if [[ "$cluster" == 1 ]]; then
    [[ -n "$master" ]] || die "--cluster needs SPARK_MASTER (e.g. yarn, k8s://https://host:443, spark://host:7077)"
    [[ "$is_local" == 0 ]] || die "--cluster needs a cluster master, not '$master': run without --cluster for local mode"
    case "$master" in
        spark://*) deploy_mode="client" ;;   # standalone runs Python drivers in client mode only
        yarn | k8s://*) deploy_mode="cluster" ;;
        *) die "--cluster does not know the master '$master' (spark://..., yarn, k8s://...); set LAKECORE_DEPLOY_MODE=client|cluster" ;;
    esac
    deploy_mode="${LAKECORE_DEPLOY_MODE:-$deploy_mode}"
    case "$deploy_mode" in
        client) ;;
        cluster) [[ "$master" != spark://* ]] \
            || die "a standalone master (spark://) cannot run Python applications in cluster deploy mode: use LAKECORE_DEPLOY_MODE=client (the default)" ;;
        *) die "LAKECORE_DEPLOY_MODE must be client or cluster, not '$deploy_mode'" ;;
    esac
    # What spark-submit would refuse only after the archive is packed, and with exit 1, which
    # reads as "violations": refuse it here, at once, with exit 2.
    if [[ "$master" == yarn && -z "${HADOOP_CONF_DIR:-}${YARN_CONF_DIR:-}" ]]; then
        die "SPARK_MASTER=yarn needs HADOOP_CONF_DIR or YARN_CONF_DIR (the cluster's client configuration)"
    fi
    if [[ "$master" == k8s://* && "$deploy_mode" == cluster && "${LAKECORE_SPARK_ARGS:-}" != *spark.kubernetes.file.upload.path* ]]; then
        die "Kubernetes cluster deploy mode uploads the job file and the archive: add '--conf spark.kubernetes.file.upload.path=s3a://bucket/path' to LAKECORE_SPARK_ARGS"
    fi
fi

# The driver needs .venv in every mode but cluster deploy mode, where it runs from the archive.
if [[ "$cluster" == 0 || "$deploy_mode" == client ]]; then
    [[ -x "$venv_py" ]] || fail "$venv_py is missing: run 'make setup' first"
fi

if [[ -n "${SPARK_SUBMIT:-}" ]]; then
    submit="$SPARK_SUBMIT"
elif [[ -x "$ROOT/.venv/bin/spark-submit" ]]; then
    submit="$ROOT/.venv/bin/spark-submit"
    # pyspark's spark-submit finds SPARK_HOME by running a Python that must import pyspark
    # (PYSPARK_DRIVER_PYTHON, else python3 on PATH): name it here, so it never depends on that.
    if [[ -z "${SPARK_HOME:-}" ]]; then
        SPARK_HOME="$(ignoring_ctrl_c "$venv_py" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" \
            || fail "cannot find pyspark in $venv_py: run 'make setup' or set SPARK_HOME"
        export SPARK_HOME
    fi
elif command -v spark-submit >/dev/null 2>&1; then
    submit="$(command -v spark-submit)"
else
    fail "no spark-submit found: run 'make setup' (it installs pyspark into .venv) or set SPARK_SUBMIT"
fi

# --help and argument errors answer before the JVM starts (about 4 s): the job's own parser runs
# in plain Python first (LAKECORE_PARSE_ONLY=1 makes run_job stop right after parsing). Skipped
# when this machine has no .venv (a cluster submit from elsewhere).
plan_spark_log
preflight_py="$ROOT/.venv/bin/python"
if [[ -x "$preflight_py" ]]; then
    for arg in "$@"; do
        if [[ "$arg" == "-h" || "$arg" == "--help" ]]; then
            PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$preflight_py" "$ROOT/$script" "$@"
        fi
    done
    status=0
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" LAKECORE_PARSE_ONLY=1 ignoring_ctrl_c "$preflight_py" "$ROOT/$script" "$@" \
        || status=$?
    [[ "$status" == 0 ]] || exit "$status"
fi

# A standalone master that does not answer: one line now. spark-submit would try to register
# for a minute and print about 130 lines of Java stack traces, then a misleading last line.
standalone_master_answers() {  # $1: spark://HOST:PORT[,HOST:PORT...] (a list for HA masters)
    local hostport host port
    local -a masters
    command -v timeout > /dev/null || return 0
    IFS=',' read -r -a masters <<<"${1#spark://}"
    for hostport in "${masters[@]}"; do
        host="${hostport%:*}"
        port="${hostport##*:}"
        if [[ "$host" == "$hostport" ]]; then port=7077; fi
        if [[ "$host" == \[* || ! "$port" =~ ^[0-9]+$ ]]; then return 0; fi  # IPv6 or odd: Spark judges
        if timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2> /dev/null; then return 0; fi
    done
    return 1
}
effective_master="${job_master:-$master}"
if [[ "$effective_master" == spark://* ]] && ! standalone_master_answers "$effective_master"; then
    fail "the Spark master $effective_master does not answer (nothing accepts connections there): check that it is running, and SPARK_MASTER or --master"
fi

extra=()
if [[ -n "${LAKECORE_SPARK_ARGS:-}" ]]; then
    read -r -a extra <<<"$LAKECORE_SPARK_ARGS"
fi

log4j="$ROOT/conf/log4j2.properties"
args=(--properties-file "$ROOT/conf/spark-defaults.conf")

# The options of a driver JVM started here: the log4j settings, then jobs/driver_jvm.py's (the quick
# JIT, and the class archive `make setup` wrote for this JVM and Spark: together 5 to 9 s less per
# demo-sized job on 2 cores). LAKECORE_JVM_JIT=full and LAKECORE_JVM_ARCHIVE=0 turn them off.
local_driver_java_options() {
    local jvm_options=""
    jvm_options="$(PYTHONPATH="$ROOT" ignoring_ctrl_c "$venv_py" -m jobs.driver_jvm --java-options 2>/dev/null)" || jvm_options=""
    echo "-Dlog4j2.configurationFile=file:$log4j${jvm_options:+ $jvm_options}"
}
if [[ -n "$master" ]]; then
    args+=(--master "$master")
fi
if [[ "$is_local" == 1 ]]; then
    # Loopback is right for local mode only: executors on other hosts must reach the driver.
    export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
fi

# --- without --cluster: the driver and the executors on .venv -------------------------------------
if [[ "$cluster" == 0 ]]; then
    export PYSPARK_PYTHON="$venv_py"
    export PYSPARK_DRIVER_PYTHON="$venv_py"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    args+=(
        --conf "spark.pyspark.python=$venv_py"
        --conf "spark.pyspark.driver.python=$venv_py"
        --driver-java-options "$(local_driver_java_options)"
    )
    if [[ "$is_local" == 0 ]]; then
        args+=(--conf "spark.executorEnv.PYTHONPATH=$ROOT")
    fi
    run_driver_here "$submit" "${args[@]}" "${extra[@]}" "$ROOT/$script" "$@"
fi

# --- --cluster: the packed virtualenv ------------------------------------------------------------
build="$ROOT/build"
mkdir -p "$build"
base_py="$("$venv_py" -c 'import sys; print(sys._base_executable)' 2>/dev/null || command -v python3.11 || command -v python3)"

# What the archive is for: in client deploy mode only the executors run it, and they need
# lakecore's storage and tree code, not the driver's great-expectations suite (with scipy, pandas
# and altair about 300 MB unpacked); in cluster deploy mode the driver runs from it too.
if [[ "$deploy_mode" == client ]]; then
    flavor="executors"
    leave_out="pyspark great-expectations pandas"
else
    flavor="driver"
    leave_out="pyspark"
fi

inputs_hash() {  # what goes into the archive, hashed; names relative to ROOT, so checkouts agree
    (
        cd "$ROOT"
        echo "recipe $PACK_RECIPE flavor $flavor"
        "$base_py" -c 'import sys; print(sys.version)'
        find lakecore jobs -type f \( -name '*.py' -o -name '*.pyi' -o -name '*.proto' -o -name py.typed \) \
            -not -path '*/__pycache__/*' -print | LC_ALL=C sort | xargs sha256sum
        sha256sum pyproject.toml conf/maintenance-*.json conf/log4j2.properties
    ) | sha256sum | cut -c1-16
}

build_venv() {  # $1: the archive to write
    local target="$1" env="$build/pack-venv-$flavor" deps
    echo "$PROG: packing the $flavor virtualenv into $target (once per change of the code; 1-2 minutes) ..." >&2
    rm -rf "$env" "$target.tmp"
    "$base_py" -m venv --copies "$env"
    "$env/bin/python" -m pip install --quiet --upgrade pip
    # The dependencies but those left out: the cluster's Spark provides pyspark (a second copy
    # was 490 MB per executor), executors never run the expectation suite. Then lakecore and
    # the jobs themselves, non-editable (the code itself, not a link back to this checkout).
    deps="$("$env/bin/python" - "$ROOT/pyproject.toml" "$leave_out" "$flavor" <<'PY'
import re, sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
# The format library, S3 for the executors, and the Spark extra's other packages for a driver.
extras = ["s3"] + (["spark"] if sys.argv[3] == "driver" else [])
deps = project["dependencies"] + [d for e in extras for d in project["optional-dependencies"][e]]
leave_out = set(sys.argv[2].split())
print("\n".join(d for d in deps if re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() not in leave_out))
PY
)"
    mapfile -t dep_list <<<"$deps"
    "$env/bin/python" -m pip install --quiet "${dep_list[@]}" venv-pack
    "$env/bin/python" -m pip install --quiet --no-deps "$ROOT"
    rm -rf "$build/lib" "$build"/bdist.*  # setuptools' in-tree build of that install
    for name in $leave_out; do  # in case another package pulled one in
        "$env/bin/python" -m pip uninstall --quiet --yes "$name" >/dev/null 2>&1 || true
    done
    # The settings travel with the code: a cluster-mode driver has no checkout to read them from.
    mkdir -p "$env/lakecore-conf"
    cp "$ROOT"/conf/maintenance-*.json "$ROOT/conf/log4j2.properties" "$env/lakecore-conf/"
    # Nothing on the cluster installs packages: leave pip and setuptools out too.
    "$env/bin/python" -m pip uninstall --quiet --yes pip setuptools wheel >/dev/null 2>&1 || true
    # venv-pack writes through a temporary file of its own, which it leaves behind when
    # interrupted: keep it in the packing folder, which the interrupt trap removes.
    rm -rf "$build/pack-tmp-$flavor" && mkdir -p "$build/pack-tmp-$flavor"
    TMPDIR="$build/pack-tmp-$flavor" "$env/bin/venv-pack" --quiet --prefix "$env" --output "$target.tmp" --format tar.gz
    rm -rf "$build/pack-tmp-$flavor"
    mv "$target.tmp" "$target"
    rm -rf "$env"
}

interrupted_while_packing() {  # $1: the signal's name
    rm -rf "$build/pack-venv-$flavor" "$build/pack-tmp-$flavor" "$archive.tmp" "$build/lib" "$build"/bdist.*
    echo "$PROG: interrupted by $1 while packing the virtualenv, before the job began; nothing was done" >&2
    exit 130
}

hash="$(inputs_hash)"
archive_name="lakecore-venv-$flavor-$hash.tar.gz"
archive="$build/$archive_name"
# One packer at a time (two submissions at once would both pack); flock is util-linux.
exec 9>"$build/.pack.lock"
flock 9 2>/dev/null || true
if [[ "${LAKECORE_REBUILD_VENV:-0}" == 1 || ! -f "$archive" ]]; then
    # A Ctrl-C reaches pip (the foreground group) and then this trap: no half-built virtualenv
    # or archive is left in build/.
    trap 'interrupted_while_packing SIGINT' INT
    trap 'interrupted_while_packing SIGTERM' TERM
    build_venv "$archive" || fail "could not pack the virtualenv into $archive (see the pip output above)"
    trap interrupted_while_starting INT
    trap - TERM
    # Older archives of this flavor are for other versions of the code: keep the two newest.
    find "$build" -maxdepth 1 -name "lakecore-venv-$flavor-*.tar.gz" ! -name "$archive_name" -printf '%T@ %p\n' \
        | sort -rn | tail -n +3 | cut -d' ' -f2- | xargs -r rm -f --
fi
flock -u 9 2>/dev/null || true

ship="$archive"
if [[ -n "${LAKECORE_VENV_URI:-}" ]]; then
    ship="${LAKECORE_VENV_URI%/}/$archive_name"
fi

unset PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON  # spark.pyspark.* below say which Python runs where
args+=(
    --deploy-mode "$deploy_mode"
    --archives "$ship#environment"
    --conf spark.pyspark.python=./environment/bin/python
)
if [[ "$deploy_mode" == client ]]; then
    # The driver runs here, on .venv and the checkout (the same code as the archive: same hash).
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    args+=(
        --conf "spark.pyspark.driver.python=$venv_py"
        --driver-java-options "$(local_driver_java_options)"
    )
else
    # The driver runs on the cluster, from the archive; its settings come from the archive too.
    args+=(
        --conf spark.pyspark.driver.python=./environment/bin/python
        --conf spark.yarn.appMasterEnv.LAKECORE_CONF_DIR=./environment/lakecore-conf
        --conf spark.kubernetes.driverEnv.LAKECORE_CONF_DIR=./environment/lakecore-conf
        --files "$log4j"
        --driver-java-options "-Dlog4j2.configurationFile=log4j2.properties"
        --conf "spark.executor.extraJavaOptions=-Dlog4j2.configurationFile=log4j2.properties"
    )
fi
if [[ "$deploy_mode" == "client" ]]; then
    run_driver_here "$submit" "${args[@]}" "${extra[@]}" "$ROOT/$script" "$@"
fi
exec "$submit" "${args[@]}" "${extra[@]}" "$ROOT/$script" "$@"
