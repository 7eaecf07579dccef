#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The management API's queues, exchanges, bindings, consumers,
# connections, channels, nodes and health checks (issue 12, point 8):
# api.py runs a pika scenario and reads every endpoint, first against
# the reference RabbitMQ (AMQP 5699, HTTP 15699; skipped when it does not
# answer) with --reference, writing each answer's key structure, then
# against roostd, where every key RabbitMQ has must be there too (but an
# allow-list of Erlang's own, docs/compatibility.md) and the values,
# refusals and bad input are checked. Then RabbitMQ's own rabbitmqadmin,
# unmodified, lists, declares, publishes, gets, purges, deletes and
# closes through roostd. Prints "api: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "api: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi
admin=
for a in "${RABBITMQADMIN:-}" /usr/bin/rabbitmqadmin \
         "$here/../interop/.rabbitmqadmin/rabbitmqadmin"; do
    [ -n "$a" ] && [ -x "$a" ] && { admin=$a; break; }
done
ref_amqp=${REF_AMQP_PORT:-5699} ref_http=${REF_HTTP_PORT:-15699}
shapes=$tmp/shapes.json

# The reference pass: RabbitMQ's own answers, its shapes into $shapes.
if curl -sf -m 3 -u guest:guest "http://127.0.0.1:$ref_http/api/overview" \
    >/dev/null 2>&1; then
    $py "$here/api.py" --amqp "$ref_amqp" --http "$ref_http" \
        --shapes "$shapes" --reference > "$tmp/ref.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok "the reference RabbitMQ passes api.py" ||
        bad "the reference RabbitMQ passes api.py" \
            "exit $rc: $(grep -v '^PASS' "$tmp/ref.out" | head -5)"
else
    echo "api: no reference RabbitMQ on 127.0.0.1:$ref_http; the comparison with its shapes skipped"
fi

http_port() {
    sed -n 's|.*management API listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log" | tail -n1
}

# ra NAME WANT ARGS...: rabbitmqadmin ARGS must exit 0 and print WANT
# (a glob) somewhere.
ra() {
    local name=$1 want=$2 out rc
    shift 2
    out=$($py "$admin" -P "$http" "$@" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [[ $out == $want ]] && ok "rabbitmqadmin $name" ||
        bad "rabbitmqadmin $name" "exit $rc: $out"
}

with_rabbitmqadmin() {
    if [ -z "$admin" ]; then
        echo "api: rabbitmqadmin not found; its checks skipped"
        return
    fi
    # a connection to list, and to close
    $py - "$port" > "$tmp/holder.out" 2>&1 <<'EOF' &
import sys, time, pika
c = pika.BlockingConnection(pika.ConnectionParameters(
    "127.0.0.1", int(sys.argv[1]), heartbeat=0,
    client_properties={"connection_name": "ra-holder"}))
ch = c.channel()
ch.queue_declare("ra-held")
ch.basic_consume("ra-held", lambda *a: None, consumer_tag="ra-ctag")
try:
    end = time.time() + 30
    while time.time() < end:
        c.process_data_events(time_limit=0.2)
    print("not closed")
except pika.exceptions.ConnectionClosedByBroker as e:
    print("closed %d %s" % (e.reply_code, e.reply_text))
EOF
    local holder=$!
    for _ in $(seq 1 100); do
        curl -s -u guest:guest "http://127.0.0.1:$http/api/consumers" |
            grep -q ra-ctag && break
        sleep 0.1
    done
    ra "declare queue" "queue declared" declare queue name=ra-q durable=true
    ra "declare exchange" "exchange declared" \
        declare exchange name=ra-x type=topic
    ra "declare binding" "binding declared" \
        declare binding source=ra-x destination=ra-q routing_key='ra.#'
    ra "list queues" "*ra-q*" list queues
    ra "list queues (tsv, the columns)" $'*ra-q\t0*' -f tsv list queues name messages
    ra "list exchanges" "*ra-x*topic*" list exchanges
    ra "list bindings" "*ra-x*ra-q*ra.#*" list bindings
    ra "list connections" "*guest*" list connections
    ra "list channels" "*guest*" list channels
    ra "list consumers" "*ra-ctag*" list consumers
    ra "list nodes" "*disc*" list nodes
    ra "show overview" "*3.10.8*" show overview
    ra "publish" "Message published" \
        publish exchange=ra-x routing_key=ra.one payload=hello-ra
    ra "publish, unrouted" "Message published but NOT routed" \
        publish exchange=ra-x routing_key=nowhere payload=x
    ra "list queues: the message" $'*ra-q\t1*' -f tsv list queues name messages
    ra "get ackmode=ack_requeue_false: the payload in the table" \
        "*hello-ra*" get queue=ra-q ackmode=ack_requeue_false
    ra "get of what is left: No items" "No items" get queue=ra-q ackmode=ack_requeue_false
    ra "publish again" "Message published" \
        publish exchange=ra-x routing_key=ra.two payload=again
    ra "purge queue" "queue purged" purge queue name=ra-q
    ra "the queue is empty" $'*ra-q\t0*' -f tsv list queues name messages
    ra "delete binding" "binding deleted" delete binding source=ra-x \
        destination_type=queue destination=ra-q properties_key='ra.#'
    $py "$admin" -P "$http" -f tsv list bindings source destination \
        routing_key 2>&1 | grep -q '^ra-x' &&
        bad "rabbitmqadmin: no binding left" "ra-x is still bound" ||
        ok "rabbitmqadmin: no binding left"
    ra "delete queue" "queue deleted" delete queue name=ra-q
    ra "delete exchange" "exchange deleted" delete exchange name=ra-x
    local cname
    cname=$(curl -s -u guest:guest "http://127.0.0.1:$http/api/connections" |
        $py -c 'import json,sys; print([c["name"] for c in json.load(sys.stdin) if c["client_properties"].get("connection_name")=="ra-holder"][0])' 2>/dev/null)
    ra "close connection" "connection closed" close connection name="$cname"
    wait "$holder"
    grep -q "^closed 320 CONNECTION_FORCED" "$tmp/holder.out" &&
        ok "rabbitmqadmin close connection: the client gets 320" ||
        bad "rabbitmqadmin close connection: the client gets 320" \
            "$(cat "$tmp/holder.out")"
    $py "$admin" -P "$http" delete queue name=ra-q >/dev/null 2>&1 &&
        bad "rabbitmqadmin delete of a missing queue fails" "exit 0" ||
        ok "rabbitmqadmin delete of a missing queue fails"
    $py "$admin" -P "$http" delete queue name=ra-held >/dev/null 2>&1
}

log=$tmp/roostd.log
if start "$tmp/data" "$log" --set management.tcp.port=0 \
    --set collect_statistics_interval=1000; then
    http=$(http_port)
    if [ -z "$http" ]; then
        bad "management API" "no port in the log"
    else
        [ -s "$shapes" ] || echo "api: no reference shapes; only roostd's values are checked"
        run_checks "api.py" $py "$here/api.py" --amqp "$port" --http "$http" \
            --shapes "$shapes"
        with_rabbitmqadmin
        curl -sf -u guest:guest "http://127.0.0.1:$http/api/overview" \
            >/dev/null && ok "roostd still serves HTTP at the end" ||
            bad "roostd still serves HTTP at the end" "no answer"
    fi
    stop || bad "clean stop" "$(tail -3 "$log")"
else
    bad "start" "$(tail -3 "$log")"
fi

echo "api: $pass passed, $fail failed"
[ $fail -eq 0 ]
