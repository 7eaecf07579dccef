#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Roost's dead-letter tools (deadletters.py, pika and the management
# API): browse without touching a queue (redelivered, delivery counts and
# ready counts unchanged, a quorum queue's x-delivery-count too), offset
# and count, paged messages (paging.window=32) read while AMQP goes on
# (ROOST_TEST_READ_DELAY_US), search by message-id, correlation-id and a
# header, encodings, the dead-letters listing, replays to the original
# exchange and key and to a chosen one, in order, at a rate, cancelled,
# cancelled by deleting the queue; bad input to every endpoint; roostctl
# list_dead_letters and replay_dead_letters. Prints "deadletters: N
# passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "deadletters: pika for /usr/bin/python3 is missing; skipped"
    exit 77
fi
ctl_bin=${ROOSTCTL_BIN:-$(dirname "$roostd")/../tools/roostctl/roostctl}
delay_ms=300
log=$tmp/log
if ROOST_TEST_READ_DELAY_US=$((delay_ms * 1000)) start "$tmp/data" "$log" \
        --set management.tcp.port=0 --set paging.window=32; then
    http=$(sed -n 's|.*management API listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log" | tail -n1)
    run_checks "deadletters.py" \
        $py "$here/deadletters.py" --amqp "$port" --http "$http" \
        --roostctl "$ctl_bin" --read-delay-ms $delay_ms --pid "$pid"
    # deadletters.py sent SIGTERM with a replay running and a browse
    # waiting: roostd stops cleanly (and ASan finds no leak). Not a
    # second SIGTERM: one that comes after the signal events are freed,
    # late in the teardown, would end roostd with the default action.
    wait "$pid"
    rc=$?
    pid=
    [ $rc -eq 0 ] && ok "clean stop" ||
        bad "clean stop" "exit $rc: $(tail -3 "$log"; head -30 "$tmp/stderr")"
    grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/stderr" &&
        bad "sanitizers" "$(head -20 "$tmp/stderr")"
else
    bad "start" "$(tail -3 "$log")"
fi
echo "deadletters: $pass passed, $fail failed"
[ $fail -eq 0 ]
