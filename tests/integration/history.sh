#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Rate and depth history (issue 23, point 7; history.py, pika): with a
# stats tick of 1 s, a burst of publishes, gets, acks and drops shows in
# the samples of /api/queues/VHOST/NAME and /api/overview
# (?lengths_age=&lengths_incr=, ?msg_rates_age=&msg_rates_incr=),
# in RabbitMQ's shape, at each ring's resolution, survives nothing
# (history is not stored) and is shown only to monitors in the overview.
# Prints "history: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need history "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
if start "$tmp/data" "$tmp/log" -s management.tcp.port=0 \
    -s prometheus.tcp.port=-1 -s collect_statistics_interval=1000; then
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$tmp/log" | tail -1)
    run_checks "history.py" $py "$here/history.py" --port "$port" \
        --http "$http"
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "history: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
