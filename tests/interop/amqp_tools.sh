#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The rabbitmq-c command-line tools (Debian amqp-tools) against a broker on
# 127.0.0.1:PORT: amqp-declare-queue, amqp-publish, amqp-get, amqp-consume
# (with -c count and -p prefetch), amqp-delete-queue; the outputs, exit
# codes and error texts must be those they give against RabbitMQ.
# Usage: amqp_tools.sh PORT
set -u
port=${1:?usage: amqp_tools.sh PORT}
case $port in *[!0-9]*|'') echo "usage: amqp_tools.sh PORT" >&2; exit 2 ;; esac
for t in amqp-declare-queue amqp-publish amqp-get amqp-consume amqp-delete-queue; do
    command -v $t >/dev/null || { echo "FAIL: $t not installed (amqp-tools)"; exit 1; }
done
conn=(--server 127.0.0.1 --port "$port" --username guest --password guest)
pfx="interop.amqp-tools.$$.$(date +%s)"
q="$pfx.q"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
# expect NAME WANT GOT: compare two strings, show both on mismatch
expect() {
    if [ "$2" = "$3" ]; then return 0; fi
    fail "$1:"
    printf '    expected: %s\n    got:      %s\n' "$2" "$3"
    return 1
}
# run CMD...: sets out, err and rc; bounded in time
run() {
    timeout 20 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

# amqp-declare-queue prints the queue's name, given or server-chosen.
run amqp-declare-queue "${conn[@]}" -q "$q"
if [ $rc != 0 ] && [ -z "$out" ]; then
    echo "FAIL: amqp-declare-queue: exit $rc: $err"
    exit 1
fi
expect "declare-queue output" "$q" "$out" && expect "declare-queue exit code" 0 "$rc" &&
    ok "amqp-declare-queue -q $q"
run amqp-declare-queue "${conn[@]}" -q ''
if [ $rc = 0 ] && [[ $out == amq.gen-* ]]; then
    ok "amqp-declare-queue -q '' gives a server-named queue ($out)"
else
    fail "amqp-declare-queue -q '': rc $rc, output '$out', stderr '$err'"
fi

# amqp-publish to the default exchange, with -b and with -l (one message
# a line), then amqp-get for the first and amqp-consume -c for the rest.
n=30
for i in $(seq 1 $n); do
    amqp-publish "${conn[@]}" -r "$q" -b "msg-$i" || fail "amqp-publish msg-$i: rc $?"
done
seq 1 5 | sed 's/^/line-/' | amqp-publish "${conn[@]}" -r "$q" -l ||
    fail "amqp-publish -l: rc $?"
run amqp-get "${conn[@]}" -q "$q"
expect "amqp-get output" "msg-1" "$out" && expect "amqp-get exit code" 0 "$rc" &&
    ok "amqp-get returns the first message"
# Each message is piped to its own `cat`; bodies have no newline, so add one.
# (popt would take a -c after the command as its own: hence the --)
run amqp-consume "${conn[@]}" -q "$q" -c $((n - 1 + 5)) -p 7 -- sh -c 'cat; echo'
# With -l each message keeps its newline, and `echo` adds another.
want=$( (seq 2 $n | sed 's/^/msg-/'; for i in 1 2 3 4 5; do printf 'line-%s\n\n' $i; done) )
expect "amqp-consume -c $((n + 4)) -p 7 exit code" 0 "$rc"
if expect "amqp-consume -c $((n + 4)) -p 7 output" "$want" "$out"; then
    ok "amqp-consume -c $((n + 4)) -p 7: every message once and in order"
fi
run amqp-get "${conn[@]}" -q "$q"
expect "amqp-get on an empty queue: output" "" "$out" &&
    expect "amqp-get on an empty queue: exit code" 2 "$rc" &&
    ok "amqp-get on an empty queue exits 2 with nothing printed"

# amqp-consume -e -r declares a server-named auto-delete queue and binds
# it: start it, publish probes to the exchange until one reaches it (so the
# binding is there), then the messages; every message is appended to a file.
amqp-consume "${conn[@]}" -e amq.topic -r "$pfx.#" -c 1000 -- \
    sh -c "cat >>'$tmp/bound'; echo >>'$tmp/bound'" 2>"$tmp/bound.err" &
cpid=$!
: >"$tmp/bound"
tries=0
while [ ! -s "$tmp/bound" ] && kill -0 $cpid 2>/dev/null && [ $tries -lt 200 ]; do
    amqp-publish "${conn[@]}" -e amq.topic -r "$pfx.probe" -b probe
    tries=$((tries + 1))
done
if [ -s "$tmp/bound" ]; then
    for i in $(seq 1 10); do
        amqp-publish "${conn[@]}" -e amq.topic -r "$pfx.a.$i" -b "t-$i"
        amqp-publish "${conn[@]}" -e amq.topic -r "other.$pfx.$i" -b "no-$i"
    done
    amqp-publish "${conn[@]}" -e amq.topic -r "$pfx.end" -b end
    deadline=$((SECONDS + 10))
    while ! grep -qx end "$tmp/bound" && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    # Leftover probes come first; then t-1..t-10 and end, once and in order.
    if expect "topic messages to amqp-consume -e amq.topic -r '$pfx.#'" \
            "$( (seq 1 10 | sed 's/^/t-/'; echo end) )" \
            "$(grep -vx probe "$tmp/bound")"; then
        ok "amqp-consume -e amq.topic -r: topic routing, once and in order"
    fi
else
    fail "amqp-consume -e amq.topic -r '$pfx.#' got nothing in $tries publishes: $(cat "$tmp/bound.err")"
fi
kill $cpid 2>/dev/null
wait $cpid 2>/dev/null
bq="$pfx.bound"
run amqp-declare-queue "${conn[@]}" -q "$bq"
expect "declare-queue $bq" "$bq" "$out"

# amqp-delete-queue prints the number of messages deleted.
for i in 1 2 3; do amqp-publish "${conn[@]}" -r "$bq" -b "d-$i"; done
run amqp-delete-queue "${conn[@]}" -q "$bq" -e
expect "delete-queue --if-empty of a queue with 3 messages: exit code" 1 "$rc"
expect "delete-queue --if-empty error" \
    "queue.delete: server channel error 406, message: PRECONDITION_FAILED - queue '$bq' in vhost '/' not empty" \
    "$err" && ok "amqp-delete-queue --if-empty refuses with RabbitMQ's 406 text"
run amqp-delete-queue "${conn[@]}" -q "$bq"
expect "delete-queue output" 3 "$out" && expect "delete-queue exit code" 0 "$rc" &&
    ok "amqp-delete-queue prints the 3 messages deleted"

# Error paths print the server's reply code and text, as with RabbitMQ.
run amqp-get "${conn[@]}" -q "$pfx.missing"
expect "amqp-get of a missing queue: exit code" 1 "$rc"
expect "amqp-get of a missing queue: error" \
    "basic.get: server channel error 404, message: NOT_FOUND - no queue '$pfx.missing' in vhost '/'" \
    "$err" && ok "amqp-get of a missing queue: 404 with RabbitMQ's text"
run amqp-consume "${conn[@]}" -q "$pfx.missing" -c 1 -- cat
expect "amqp-consume of a missing queue: exit code" 1 "$rc"
expect "amqp-consume of a missing queue: error" \
    "basic.consume: server channel error 404, message: NOT_FOUND - no queue '$pfx.missing' in vhost '/'" \
    "$err" && ok "amqp-consume of a missing queue: 404 with RabbitMQ's text"
run amqp-publish "${conn[@]}" -e "$pfx.nox" -r x -b y
expect "amqp-publish to a missing exchange: exit code" 1 "$rc"
expect "amqp-publish to a missing exchange: error" \
    "closing channel: server channel error 404, message: NOT_FOUND - no exchange '$pfx.nox' in vhost '/'" \
    "$err" && ok "amqp-publish to a missing exchange: 404 with RabbitMQ's text"
run amqp-declare-queue "${conn[@]}" -q "amq.$pfx"
expect "declare-queue amq.*: exit code" 1 "$rc"
expect "declare-queue amq.*: error" \
    "queue.declare: server channel error 403, message: ACCESS_REFUSED - queue name 'amq.$pfx' contains reserved prefix 'amq.*'" \
    "$err" && ok "amqp-declare-queue of an amq.* name: 403 with RabbitMQ's text"
run amqp-declare-queue "${conn[@]}" -q "$q" -d
expect "redeclare durable: exit code" 1 "$rc"
expect "redeclare durable: error" \
    "queue.declare: server channel error 406, message: PRECONDITION_FAILED - inequivalent arg 'durable' for queue '$q' in vhost '/': received 'true' but current is 'false'" \
    "$err" && ok "redeclaring with other durability: 406 with RabbitMQ's text"

run amqp-delete-queue "${conn[@]}" -q "$q"
expect "delete-queue of the emptied queue: output" 0 "$out"

if [ $failures != 0 ]; then
    echo "amqp-tools: $failures problem(s)"
    exit 1
fi
echo "amqp-tools: all checks passed"
