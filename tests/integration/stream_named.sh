#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The stream checks streams-spec.md names (stream_named.py): R7 (a
# persistent and a transient message both stored, across a clean
# restart and a kill -9), R11 (seeks by offset over segments and blocks,
# and by time), B1 (credit exactly the prefetch on a burst), B14
# (filtering exact, not counted as delivered). When a reference RabbitMQ
# answers on 127.0.0.1:${REF_AMQP_PORT:-5699} (../shared/tools/rabbitmq-ref),
# the R cases run against it too. Prints "stream_named: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_named "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
ref_amqp=${REF_AMQP_PORT:-5699}
if (exec 3<>"/dev/tcp/127.0.0.1/$ref_amqp") 2>/dev/null; then
    run_checks "the reference RabbitMQ: R7, R11" $py "$here/stream_named.py" \
        --port "$ref_amqp" --reference
else
    echo "stream_named: no reference RabbitMQ on 127.0.0.1:$ref_amqp; its pass skipped"
fi
opts=(-s management.tcp.port=0)
if start "$tmp/data" "$tmp/log" "${opts[@]}"; then
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$tmp/log")
    run_checks "stream_named.py" $py "$here/stream_named.py" --port "$port" \
        --http "$http"
    run_checks "R7 before a clean restart" $py "$here/stream_named.py" \
        --port "$port" --phase publish
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
    if start "$tmp/data" "$tmp/log2" "${opts[@]}"; then
        run_checks "R7 after a clean restart" $py "$here/stream_named.py" \
            --port "$port" --phase verify
        run_checks "R7 before kill -9" $py "$here/stream_named.py" \
            --port "$port" --phase publish
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        pid=
        if start "$tmp/data" "$tmp/log3" "${opts[@]}"; then
            run_checks "R7 after kill -9" $py "$here/stream_named.py" \
                --port "$port" --phase verify
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
echo "stream_named: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
