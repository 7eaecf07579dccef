#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Declaring a stream as RabbitMQ 3.10.8 answers it (stream_declare.py,
# pika): properties, server-named streams, every stream argument's
# grammar and refusal and the order they are checked in, and the stream
# keys on classic and quorum queues, and the stream keys of a policy.
# stream_declare.py --reference --port 5699 --http 15699 runs the same against RabbitMQ. Prints
# "stream_declare: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_declare "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
if start "$tmp/data" "$tmp/log" -s management.tcp.port=0; then
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$tmp/log")
    run_checks "stream_declare.py" $py "$here/stream_declare.py" --port "$port" \
        --http "$http"
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "stream_declare: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
