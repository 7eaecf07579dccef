#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Poison messages: x-delivery-limit on classic queues with the semantics
# of RabbitMQ's quorum queues (poison.py, pika): a limit of 2 allows three
# deliveries, each with x-delivery-count (0, 1, 2) and every other header
# as sent; then dead-lettered with reason delivery_limit, or dropped
# without a DLX; a consumer gone with the message counts; a negative
# limit lets no return through; and the count of a persistent message in
# a durable queue survives a restart. Retry back-off (x-requeue-delay,
# Roost's own): a nack waits, doubling up to x-requeue-delay-max, and the
# wait of a persistent message survives the restart. poison.py
# --reference runs the same against RabbitMQ's quorum queues (without
# the back-off). Prints "poison: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "poison: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi

run() {
    run_checks "$1: poison.py" $py "$here/poison.py" --port "$port" "$1"
}

for phase in before after; do
    if start "$tmp/data" "$tmp/log-$phase"; then
        run $phase
        stop || bad "$phase: clean stop" "$(tail -3 "$tmp/log-$phase")"
    else
        bad "$phase: start" "$(tail -3 "$tmp/log-$phase")"
    fi
done

echo "poison: $pass passed, $fail failed"
[ $fail -eq 0 ]
