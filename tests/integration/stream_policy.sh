#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Policies on streams and queue.delete's flags on a stream
# (stream_policy.py, pika and the management API): which policy applies,
# the policy's value over the argument, retention acting at once when a
# policy is set, changed or cleared, if_empty and if_unused honoured; then
# a clean restart: the policy's max-age still applies, not the deadline
# stored with each message. stream_policy.py --reference --port 5699
# --http 15699 runs the cases RabbitMQ 3.10.8 answers alike against it.
# Prints "stream_policy: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_policy "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
opts=(-s management.tcp.port=0)
http_port() {
    sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$1"
}
if start "$tmp/data" "$tmp/log" "${opts[@]}"; then
    http=$(http_port "$tmp/log")
    run_checks "stream_policy.py" $py "$here/stream_policy.py" \
        --port "$port" --http "$http"
    run_checks "before a restart" $py "$here/stream_policy.py" \
        --port "$port" --http "$http" --phase before-restart
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
    if start "$tmp/data" "$tmp/log2" "${opts[@]}"; then
        run_checks "after a restart" $py "$here/stream_policy.py" \
            --port "$port" --http "$(http_port "$tmp/log2")" \
            --phase after-restart
        stop || bad "clean stop" "$(tail -3 "$tmp/log2")"
    else
        bad "roostd starts again" "$(tail -3 "$tmp/log2")"
    fi
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "stream_policy: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
