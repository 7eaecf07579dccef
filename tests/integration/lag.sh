#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lag that never goes blind (issue 23, point 1; lag.py, pika): with a
# paging window of 16, a backlog whose head was paged out and read back,
# and the same queue after a kill -9 and a restart, say their oldest message's true
# age in the management API and Prometheus, and the time-in-queue
# histogram counts whole waits. Prints "lag: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need lag "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
args=(-s management.tcp.port=0 -s prometheus.tcp.port=0 -s paging.window=16)
ports() {
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$1" | tail -1)
    prom=$(sed -n 's|.*Prometheus metrics on http://[^:]*:\([0-9]*\)/.*|\1|p' "$1" | tail -1)
}
since=$(date +%s.%N)
if start "$tmp/data" "$tmp/log" "${args[@]}"; then
    ports "$tmp/log"
    run_checks "lag.py paged" $py "$here/lag.py" --port "$port" \
        --http "$http" --prom "$prom" --part paged
    # A crash, not a clean stop: the times come from the journal.
    kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
if start "$tmp/data" "$tmp/log2" "${args[@]}"; then
    ports "$tmp/log2"
    run_checks "lag.py restarted" $py "$here/lag.py" --port "$port" \
        --http "$http" --prom "$prom" --part restarted --since "$since"
    stop || bad "clean stop" "$(tail -3 "$tmp/log2")"
else
    bad "roostd starts again" "$(tail -3 "$tmp/log2")"
fi
echo "lag: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
