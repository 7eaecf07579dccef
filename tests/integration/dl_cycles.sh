#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Dead-letter cycles as RabbitMQ 3.10 judges them (dl_cycles.py, pika):
# a replayed dead letter that fails again is back in the dead-letter
# queue, an expiry loop ends, rejection and retry loops go on, and every
# drop is counted and logged once per interval. dl_cycles.py
# --reference --port 5699 runs the same against RabbitMQ. Prints
# "dl_cycles: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need dl_cycles "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
if start "$tmp/data" "$tmp/log" -s management.tcp.port=0; then
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$tmp/log")
    run_checks "dl_cycles.py" $py "$here/dl_cycles.py" --port "$port" \
        --http "$http" --log "$tmp/log"
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "dl_cycles: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
