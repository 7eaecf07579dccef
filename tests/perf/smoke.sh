#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Smoke run of roost-perf against roostd: start roostd on a free port, run
# one producer and one consumer (manual acks, prefetch 100) at a modest
# fixed rate for 10 s, and check from the --json report that every message
# arrived exactly once and in order. It asserts integrity, not speed.
#
# Environment (make check sets the first and third):
#   ROOSTD              the broker binary (required)
#   ROOST_PERF          roost-perf (default $top_builddir/tools/roost-perf)
#   top_builddir        build directory (default .)
#   PERF_SMOKE_DURATION seconds (default 10)
#   PERF_SMOKE_RATE     messages per second (default 2000)
#
# Prints "perf-smoke: 1 passed, 0 failed" (exit 0) or
# "perf-smoke: 0 passed, 1 failed" (exit 1), with the reasons above it.
set -u

ROOST_PERF=${ROOST_PERF:-${top_builddir:-.}/tools/roost-perf}
DURATION=${PERF_SMOKE_DURATION:-10}
RATE=${PERF_SMOKE_RATE:-2000}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf-smoke.XXXXXX") || exit 1
roostd_pid=
failures=()

finish() {
    if [ -n "$roostd_pid" ] && kill -0 "$roostd_pid" 2>/dev/null; then
        kill -KILL "$roostd_pid" 2>/dev/null
        wait "$roostd_pid" 2>/dev/null
    fi
    if [ ${#failures[@]} -eq 0 ]; then
        rm -rf "$tmp"
        echo "perf-smoke: 1 passed, 0 failed"
        exit 0
    fi
    for f in "${failures[@]}"; do echo "perf-smoke: FAIL: $f"; done
    kept=
    for f in "$tmp/roostd.log" "$tmp/perf.err"; do
        [ -s "$f" ] && { echo "--- last lines of $f"; tail -20 "$f"; kept=1; }
    done
    if [ -n "$kept" ]; then echo "(files kept in $tmp)"; else rm -rf "$tmp"; fi
    echo "perf-smoke: 0 passed, 1 failed"
    exit 1
}

check_fail() { failures+=("$1"); }

if [ -z "${ROOSTD:-}" ] || [ ! -x "$ROOSTD" ]; then
    check_fail "ROOSTD is not set to an executable roostd ('${ROOSTD:-}')"
    finish
fi
if [ ! -x "$ROOST_PERF" ]; then
    check_fail "roost-perf not found at $ROOST_PERF (set ROOST_PERF)"
    finish
fi

"$ROOSTD" --port 0 --data-dir "$tmp/data" --log-file "$tmp/roostd.log" \
    > "$tmp/roostd.out" 2>&1 &
roostd_pid=$!

# Poll the log for the port roostd picked.
port=
for _ in $(seq 1 200); do
    port=$(sed -n 's/.*ready for connections on port \([0-9][0-9]*\).*/\1/p' \
        "$tmp/roostd.log" 2>/dev/null | head -1)
    [ -n "$port" ] && break
    kill -0 "$roostd_pid" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$port" ]; then
    check_fail "roostd did not report 'ready for connections' within 10 s"
    cat "$tmp/roostd.out" >> "$tmp/roostd.log" 2>/dev/null
    finish
fi

"$ROOST_PERF" --port "$port" --producers 1 --consumers 1 \
    --duration "$DURATION" --rate "$RATE" --prefetch 100 --size 1024 \
    --queue-prefix perf-smoke- --json --quiet --fail-on-loss \
    > "$tmp/out.json" 2> "$tmp/perf.err"
rc=$?
[ $rc -eq 0 ] || check_fail "roost-perf exited with status $rc"

# Top-level fields are one per line: '  "name": value,'
field() { sed -n "s/^  \"$1\": \([0-9.]*\),\{0,1\}$/\1/p" "$tmp/out.json" | head -1; }
published=$(field published)
consumed=$(field consumed)
lost=$(field lost)
dups=$(field duplicated)
reordered=$(field reordered)

if [ -z "$published" ] || [ -z "$consumed" ] || [ -z "$lost" ]; then
    check_fail "no report from roost-perf (see $tmp/out.json)"
else
    [ "$published" -gt 0 ] || check_fail "nothing was published"
    [ "$consumed" -eq "$published" ] ||
        check_fail "published $published but consumed $consumed"
    [ "$lost" -eq 0 ] || check_fail "$lost message(s) lost"
    [ "$dups" -eq 0 ] || check_fail "$dups message(s) duplicated"
    [ "$reordered" -eq 0 ] || check_fail "$reordered message(s) reordered"
    echo "perf-smoke: published $published, consumed $consumed, lost $lost," \
        "duplicated $dups, reordered $reordered" \
        "(p99 latency $(sed -n 's/.*"latency_us".*"p99": \([0-9.]*\).*/\1/p' \
        "$tmp/out.json") us)"
fi

# Stop roostd the way an operator would and expect a clean exit.
kill -TERM "$roostd_pid"
status=
for _ in $(seq 1 200); do
    if ! kill -0 "$roostd_pid" 2>/dev/null; then
        wait "$roostd_pid"
        status=$?
        break
    fi
    sleep 0.05
done
if [ -z "$status" ]; then
    check_fail "roostd did not exit within 10 s of SIGTERM"
else
    roostd_pid=
    [ "$status" -eq 0 ] || check_fail "roostd exited with status $status after SIGTERM"
fi
finish
