#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Vhosts, limits and permissions changed at run time through the
# management API, as AMQP clients see them (vhosts.py, pika): a vhost
# made, its creator's permissions, a revoked permission applied to an
# open channel, max-queues and max-connections, a user without
# permissions refused, the vhost deleted with its connections closed
# (320) and, after a restart, still gone with its durable queue and
# messages. vhosts.py --reference runs the same against RabbitMQ.
# Prints "vhosts: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "vhosts: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi

# run PHASE: vhosts.py against the running roostd; its lines count.
run() {
    local http
    http=$(sed -n 's|.*management API listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log" | tail -n1)
    if [ -z "$http" ]; then
        bad "$1: management API" "no port in the log"
        return
    fi
    run_checks "$1: vhosts.py" $py "$here/vhosts.py" --amqp "$port" \
        --http "$http" "$1"
}

for phase in before after; do
    log=$tmp/log-$phase
    if start "$tmp/data" "$log" --set management.tcp.port=0; then
        run $phase
        stop || bad "$phase: clean stop" "$(tail -3 "$log")"
    else
        bad "$phase: start" "$(tail -3 "$log")"
    fi
done
# The data directory holds nothing of the deleted vhost.
out=$("$roostd" --check-data "$tmp/data" 2>&1)
[[ $out != *rt-v1* ]] && ok "check-data: nothing of the deleted vhost" ||
    bad "check-data: nothing of the deleted vhost" "$out"

echo "vhosts: $pass passed, $fail failed"
[ $fail -eq 0 ]
