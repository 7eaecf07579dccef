#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interop tests: real client libraries against a real roostd.
#
# Starts one roostd ($ROOSTD) on a free port with a temporary data dir,
# runs every client script against it, stops roostd with SIGTERM and checks
# that it exits 0. Prints one line per script, "PASS name" or "FAIL name"
# (with the script's output after a FAIL), then "interop: N passed, M
# failed"; exits non-zero if anything failed or nothing ran. A script whose
# client library is missing fails: tests/interop/deps.sh installs them, and
# this script calls it first when something is missing.
#
#   ROOSTD=build/broker/roostd srcdir=. tests/interop/run.sh [NAME...]
#   tests/interop/run.sh --port 5699 [NAME...]   against a running broker
#                                                (e.g. RabbitMQ), no roostd
# NAME picks scripts: pika-blocking pika-select kombu amqplib bunny
# amqp-tools php-amqplib, and the job-queue scripts (issue 5): celery
# jobs-pika jobs-kombu jobs-amqplib jobs-bunny jobs-php, and the queue
# semantics of issue 11: semantics-pika semantics-amqplib. INTEROP_TIMEOUT
# (default 60; celery 240) bounds each script. Each script gets the port as
# its first argument and ROOSTD_LOG (roostd's log file, when run.sh started
# roostd) in its environment.
set -u
srcdir=${srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
here=$srcdir/tests/interop
per_script_timeout=${INTEROP_TIMEOUT:-60}

port=""
if [ "${1:-}" = "--port" ]; then
    port=${2:?--port needs a number}
    shift 2
fi

all_names=(pika-blocking pika-select kombu amqplib bunny amqp-tools php-amqplib
           celery jobs-pika jobs-kombu jobs-amqplib jobs-bunny jobs-php
           semantics-pika semantics-amqplib)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all_names[@]}")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/roost-interop.XXXXXX")
roost_pid=""
cleanup() {
    if [ -n "$roost_pid" ] && kill -0 "$roost_pid" 2>/dev/null; then
        kill -KILL "$roost_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
failure() {
    echo "FAIL $1${2:+ ($2)}"
    failed=$((failed + 1))
    if [ -n "${3:-}" ] && [ -s "$3" ]; then
        sed 's/^/    /' "$3" | tail -n 60
    fi
}

# Where node's amqplib lives: beside the scripts, or in the build tree
# when the source tree is read-only (make distcheck).
node_dir=$here
if [ ! -d "$here/node_modules/amqplib" ] && [ ! -w "$here" ]; then
    node_dir=$PWD/tests/interop-node
fi

# --- dependencies -------------------------------------------------------
# has_client NAME: is the client library that script NAME uses installed?
has_client() {
    case $1 in
    pika-blocking|pika-select|jobs-pika|semantics-pika)
        /usr/bin/python3 -c 'import pika' 2>/dev/null ;;
    kombu|jobs-kombu)
        /usr/bin/python3 -c 'import kombu, amqp' 2>/dev/null ;;
    celery)
        /usr/bin/python3 -c 'import celery, kombu, amqp' 2>/dev/null ;;
    amqplib|jobs-amqplib|semantics-amqplib)
        command -v node >/dev/null &&
            NODE_PATH=$node_dir/node_modules node -e 'require("amqplib")' \
                2>/dev/null ;;
    bunny|jobs-bunny)
        [ -x /usr/bin/ruby ] && /usr/bin/ruby -e 'require "bunny"' 2>/dev/null ;;
    amqp-tools)
        command -v amqp-declare-queue >/dev/null &&
            command -v amqp-publish >/dev/null &&
            command -v amqp-get >/dev/null &&
            command -v amqp-consume >/dev/null &&
            command -v amqp-delete-queue >/dev/null ;;
    php-amqplib|jobs-php)
        [ -x /usr/bin/php ] && [ -f /usr/share/php/PhpAmqpLib/autoload.php ] ;;
    *) return 1 ;;
    esac
}

missing=0
for n in "${names[@]}"; do has_client "$n" || missing=1; done
if [ $missing = 1 ]; then
    echo "interop: some client libraries are missing; running tests/interop/deps.sh"
    NODE_DIR=$node_dir "$here/deps.sh" >"$tmp/deps.log" 2>&1 ||
        { echo "interop: deps.sh failed:"; tail -n 20 "$tmp/deps.log" | sed 's/^/    /'; }
fi

# --- the broker ---------------------------------------------------------
if [ -z "$port" ]; then
    if [ -z "${ROOSTD:-}" ] || [ ! -x "$ROOSTD" ]; then
        echo "FAIL roostd (ROOSTD='${ROOSTD:-}' is not an executable)"
        echo "interop: 0 passed, 1 failed"
        exit 1
    fi
    mkdir "$tmp/data"
    "$ROOSTD" --port 0 --data-dir "$tmp/data" --log-file "$tmp/roostd.log" \
        >"$tmp/roostd.out" 2>&1 &
    roost_pid=$!
    # Wait for the ready line (up to 20 s), watching that roostd lives.
    deadline=$((SECONDS + 20))
    while :; do
        port=$(sed -n 's/.*ready for connections on port \([0-9][0-9]*\).*/\1/p' \
               "$tmp/roostd.log" 2>/dev/null | head -n1)
        [ -n "$port" ] && break
        if ! kill -0 "$roost_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            echo "FAIL roostd (did not become ready)"
            cat "$tmp/roostd.log" "$tmp/roostd.out" 2>/dev/null | tail -n 30 |
                sed 's/^/    /'
            echo "interop: 0 passed, 1 failed"
            exit 1
        fi
        sleep 0.05
    done
    roostd_log=$tmp/roostd.log
    echo "interop: roostd pid $roost_pid ready on port $port"
else
    echo "interop: using the broker already on 127.0.0.1:$port"
fi

# --- the scripts --------------------------------------------------------
export PYTHONDONTWRITEBYTECODE=1
run_script() {
    local name=$1 log=$tmp/$1.log
    local cmd
    case $name in
    pika-blocking) cmd=(/usr/bin/python3 "$here/pika_blocking.py") ;;
    pika-select)   cmd=(/usr/bin/python3 "$here/pika_select.py") ;;
    kombu)         cmd=(/usr/bin/python3 "$here/kombu_test.py") ;;
    amqplib)       cmd=(node "$here/amqplib_test.js") ;;
    bunny)         cmd=(/usr/bin/ruby "$here/bunny_test.rb") ;;
    amqp-tools)    cmd=(bash "$here/amqp_tools.sh") ;;
    php-amqplib)   cmd=(/usr/bin/php "$here/php_amqplib_test.php") ;;
    celery)        cmd=(/usr/bin/python3 "$here/celery_test.py") ;;
    jobs-pika)     cmd=(/usr/bin/python3 "$here/jobs_pika.py") ;;
    jobs-kombu)    cmd=(/usr/bin/python3 "$here/jobs_kombu.py") ;;
    jobs-amqplib)  cmd=(node "$here/jobs_amqplib.js") ;;
    jobs-bunny)    cmd=(/usr/bin/ruby "$here/jobs_bunny.rb") ;;
    jobs-php)      cmd=(/usr/bin/php "$here/jobs_php.php") ;;
    semantics-pika)    cmd=(/usr/bin/python3 "$here/semantics_pika.py") ;;
    semantics-amqplib) cmd=(node "$here/semantics_amqplib.js") ;;
    *) failure "$name" "no such interop script"; return ;;
    esac
    if ! has_client "$name"; then
        failure "$name" "client library not installed; run tests/interop/deps.sh"
        return
    fi
    local start=$SECONDS rc limit=$per_script_timeout
    [ "$name" = celery ] && limit=${INTEROP_TIMEOUT:-240}
    env -u PYTHONHOME -u PYTHONPATH NODE_PATH="$node_dir/node_modules" \
        ROOSTD_LOG="${roostd_log:-}" TMPDIR="$tmp" \
        timeout -k 5 "$limit" "${cmd[@]}" "$port" >"$log" 2>&1 </dev/null
    rc=$?
    if [ $rc = 0 ]; then
        pass "$name"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then
        failure "$name" "timed out after ${limit}s" "$log"
    else
        failure "$name" "exit $rc, $((SECONDS - start))s" "$log"
    fi
}

for n in "${names[@]}"; do
    run_script "$n"
    # A crashed broker fails everything after it: say so once and stop.
    if [ -n "$roost_pid" ] && ! kill -0 "$roost_pid" 2>/dev/null; then
        echo "interop: roostd died during $n"
        break
    fi
done

# --- stop the broker: SIGTERM, exit status 0 ----------------------------
if [ -n "$roost_pid" ]; then
    kill -TERM "$roost_pid" 2>/dev/null
    deadline=$((SECONDS + 15))
    while kill -0 "$roost_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
        sleep 0.05
    done
    if kill -0 "$roost_pid" 2>/dev/null; then
        kill -KILL "$roost_pid" 2>/dev/null
        wait "$roost_pid" 2>/dev/null
        failure roostd-sigterm "still running 15 s after SIGTERM"
    else
        wait "$roost_pid"
        rc=$?
        if [ $rc = 0 ]; then
            pass roostd-sigterm
        else
            cat "$tmp/roostd.log" "$tmp/roostd.out" | tail -n 60 >"$tmp/roostd.tail"
            failure roostd-sigterm "exit status $rc after SIGTERM" "$tmp/roostd.tail"
        fi
    fi
    roost_pid=""
    # Sanitizer reports go to roostd's stderr.
    if grep -qE 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' \
            "$tmp/roostd.out" 2>/dev/null; then
        failure roostd-sanitizers "reports in roostd's output" "$tmp/roostd.out"
    fi
fi

echo "interop: $passed passed, $failed failed"
[ $failed = 0 ] && [ $passed -gt 0 ]
