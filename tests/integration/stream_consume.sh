#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Publishing to and consuming from streams (stream_consume.py, pika):
# x-stream-offset in each form, credit, the delivered header, what a
# stream refuses, retention, paged messages read back (the broker runs
# with paging.window=16), then a clean restart and a kill -9: every
# message is back at its offset. stream_consume.py --reference --port
# 5699 runs the cases RabbitMQ 3.10.8 answers alike against it. Prints
# "stream_consume: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_consume "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
opts=(-s management.tcp.port=0 -s paging.window=16)
if start "$tmp/data" "$tmp/log" "${opts[@]}"; then
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$tmp/log")
    run_checks "stream_consume.py" $py "$here/stream_consume.py" --port "$port" \
        --http "$http"
    run_checks "before a clean restart" $py "$here/stream_consume.py" \
        --port "$port" --phase before-restart
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
    if start "$tmp/data" "$tmp/log2" "${opts[@]}"; then
        run_checks "after a clean restart" $py "$here/stream_consume.py" \
            --port "$port" --phase after-restart
        run_checks "before kill -9" $py "$here/stream_consume.py" \
            --port "$port" --phase before-restart
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        pid=
        if start "$tmp/data" "$tmp/log3" "${opts[@]}"; then
            run_checks "after kill -9" $py "$here/stream_consume.py" \
                --port "$port" --phase after-restart
            stop || bad "clean stop" "$(tail -3 "$tmp/log3")"
        else
            bad "roostd starts after kill -9" "$(tail -3 "$tmp/log3")"
        fi
    else
        bad "roostd starts again" "$(tail -3 "$tmp/log2")"
    fi
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "stream_consume: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
