#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start-up and log lines that say what happened (issue 23, point 5): a
# new data directory says so (not "recovered ... after an unclean
# stop"); a later start says what it recovered; a refused login names
# the user and the mechanism; a listener whose port another process
# holds names it and the key to change, and stops the start.
. "$(dirname "$0")/lib.sh"

check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name" "$(tail -3 "$log")"; fi; }

log=$tmp/roostd.log
start "$tmp/data" "$log" -s management.tcp.port=0 -s prometheus.tcp.port=-1 ||
    { bad "roostd starts" "$(tail -3 "$log")"; exit 1; }
check "a new data directory says so" grep -q "store: a new data directory, $tmp/data: nothing to recover" "$log"
check "and not that it recovered after an unclean stop" \
    bash -c "! grep -q 'after an unclean stop' '$log'"
$py - "$port" <<'PY' >"$tmp/login.out" 2>&1
import sys, pika
for user, mech in (("guest", "PLAIN"), ("nobody-here", "PLAIN")):
    try:
        pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", int(sys.argv[1]), connection_attempts=1,
            credentials=pika.PlainCredentials(user, "wrong")))
    except pika.exceptions.AMQPError:
        pass
PY
sleep 0.3
check "a refused login names its user and mechanism" \
    grep -q "login refused (user 'guest' - invalid credentials, mechanism PLAIN)" "$log"
check "an unknown user is named too" \
    grep -q "login refused (user 'nobody-here' - invalid credentials, mechanism PLAIN)" "$log"
stop
log2=$tmp/roostd2.log
start "$tmp/data" "$log2" -s management.tcp.port=0 -s prometheus.tcp.port=-1 ||
    { bad "roostd starts again" "$(tail -3 "$log2")"; exit 1; }
check "a later start says what it recovered, after a clean stop" \
    grep -q "store: recovered .* after a clean stop" "$log2"
stop

# A port another process holds (python3, which listens on one for the
# test): the listener the user asked for names the holder and the key
# that chooses another, and the start fails (issue 23, point 4).
$py -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$tmp/held" &
holder=$!
for _ in $(seq 50); do [ -s "$tmp/held" ] && break; sleep 0.1; done
held=$(cat "$tmp/held")
for case in "AMQP listener|--port $held|--port PORT" \
            "management API|--set management.tcp.port=$held|management.tcp.port" \
            "prometheus|--set prometheus.tcp.port=$held|prometheus.tcp.port"; do
    IFS='|' read -r what args key <<<"$case"
    log=$tmp/held.log
    : >"$log"
    # shellcheck disable=SC2086
    timeout 20 "$roostd" --data-dir "$tmp/data-held" --log-file "$log" \
        --bind 127.0.0.1 --port 0 -s management.tcp.port=0 \
        -s prometheus.tcp.port=-1 $args 2>/dev/null
    rc=$?
    check "$what on a held port: the start fails" test "$rc" -ne 0 -a "$rc" -ne 124
    check "$what on a held port names the holder and $key" \
        grep -q "$what: port $held on .* is in use by python3 (pid $holder); choose another with $key" "$log"
done
kill "$holder"

echo "log_lines: $pass passed, $fail failed"
[ $fail -eq 0 ]
