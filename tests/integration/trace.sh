#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tracing (trace.py, pika): RabbitMQ's firehose switched through the
# management API, its copies held against the reference RabbitMQ's when
# one answers on 5699/15699 (REF_AMQP_PORT, REF_HTTP_PORT; skipped, and
# said, otherwise); roostctl trace_on/trace_off; tracing off after a
# restart, on from a definitions file; traceparent and tracestate through
# delivery, requeue, dead-lettering, a delivery count, BCC, the delayed
# exchange, direct reply-to, paging and recovery; JSON log lines.
# Prints "trace: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "trace: pika for /usr/bin/python3 is missing" \
        "(apt-get install python3-pika); skipped"
    exit 77
fi
roostctl=${ROOSTCTL_BIN:-$(dirname "$roostd")/../tools/roostctl/roostctl}
ref_amqp=${REF_AMQP_PORT:-5699}
ref_http=${REF_HTTP_PORT:-15699}

http_port() {
    sed -n 's|.*management API listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log" | tail -n1
}

# expect NAME WANT COMMAND...: the command's stdout and stderr are WANT.
expect() {
    local name=$1 want=$2 out
    shift 2
    out=$("$@" 2>&1)
    [ "$out" = "$want" ] && ok "$name" || bad "$name" "got: $out"
}

# ---- the firehose, the API, roostctl, W3C headers before a restart ----
# A small paging window so that the durable queue's messages go to disk.
log=$tmp/log-1
if start "$tmp/data" "$log" --set management.tcp.port=0 \
        --set paging.window=16; then
    http=$(http_port)
    run_checks "firehose" $py "$here/trace.py" --amqp "$port" \
        --http "$http" --dump "$tmp/roost.json" firehose
    run_checks "w3c before" $py "$here/trace.py" --amqp "$port" \
        --http "$http" w3c-before
    ctl="$roostctl --port $http"
    expect "roostctl trace_on: rabbitmqctl's texts" \
        $'Starting tracing for vhost "rt-trace" ...\nTrace enabled for vhost rt-trace' \
        $ctl trace_on -p rt-trace
    expect "roostctl list_vhosts shows tracing" $'rt-trace\ttrue' \
        sh -c "$ctl -q list_vhosts name tracing | grep '^rt-trace'"
    expect "roostctl trace_off -q: the result line only" \
        'Trace disabled for vhost rt-trace' $ctl -q trace_off -p rt-trace
    node=$(curl -s -u guest:guest "http://127.0.0.1:$http/api/vhosts/%2F" |
        $py -c 'import json,sys
print(next(iter(json.load(sys.stdin)["cluster_state"])))')
    expect "roostctl trace_on --formatter json" \
        '{"node":"'"$node"'","result":"ok","value":"Trace enabled for vhost /"}' \
        $ctl trace_on --formatter json
    expect "roostctl trace_off on vhost / (the default)" \
        $'Stopping tracing for vhost "/" ...\nTrace disabled for vhost /' \
        $ctl trace_off
    expect "roostctl trace_on of a missing vhost: as rabbitmqctl, exit 0" \
        'Trace enabled for vhost nope' $ctl -q trace_on -p nope
    out=$(curl -s -o /dev/null -w '%{http_code}' -u guest:guest \
        "http://127.0.0.1:$http/api/vhosts/nope")
    [ "$out" = 404 ] && ok "... and it is not made" ||
        bad "... and it is not made" "$out"
    $ctl trace_on -p rt-trace >/dev/null
    grep -q "Enabling tracing for vhost 'rt-trace'" "$log" &&
        ok "switching is logged as RabbitMQ logs it" ||
        bad "switching is logged as RabbitMQ logs it" "no line"
    stop || bad "clean stop" "$(tail -3 "$log")"
    n=$(sed -n 's/.* \([0-9]*\) messages paged out.*/\1/p' "$log" | tail -n1)
    [ "${n:-0}" -gt 0 ] && ok "messages were paged out ($n)" ||
        bad "messages were paged out" "${n:-none}"
else
    bad "start" "$(tail -3 "$log")"
fi

# ---- after a restart: tracing off, the messages and their headers ----
log=$tmp/log-2
if start "$tmp/data" "$log" --set management.tcp.port=0 \
        --set paging.window=16; then
    http=$(http_port)
    run_checks "after restart" $py "$here/trace.py" --amqp "$port" \
        --http "$http" off-after-restart
    run_checks "w3c after" $py "$here/trace.py" --amqp "$port" \
        --http "$http" w3c-after
    stop || bad "clean stop after restart" "$(tail -3 "$log")"
else
    bad "restart" "$(tail -3 "$log")"
fi

# ---- tracing on from a definitions file (rabbit_definitions' way) ----
cat > "$tmp/defs.json" <<'EOF'
{"vhosts": [{"name": "/"}, {"name": "rt-defs", "tracing": true}]}
EOF
log=$tmp/log-3
if start "$tmp/data3" "$log" --set management.tcp.port=0 \
        --set load_definitions="$tmp/defs.json"; then
    http=$(http_port)
    out=$(curl -s -u guest:guest "http://127.0.0.1:$http/api/vhosts/rt-defs")
    [[ $out == *'"tracing":true'* ]] &&
        ok "a definitions file's \"tracing\": true switches it on" ||
        bad "a definitions file's \"tracing\": true switches it on" "$out"
    stop || bad "clean stop (definitions)" "$(tail -3 "$log")"
else
    bad "start with definitions" "$(tail -3 "$log")"
fi

# ---- JSON log lines ----
log=$tmp/log-json
if start "$tmp/data4" "$log" --set management.tcp.port=0 \
        --set log.file.formatter=json --set log.level=debug; then
    http=$(http_port)
    run_checks "jsonlog" $py "$here/trace.py" --amqp "$port" \
        --http "$http" --log "$log" jsonlog
    stop || bad "clean stop (JSON log)" "$(tail -3 "$log")"
    $py -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' \
        "$log" && ok "JSON log: the shutdown lines too" ||
        bad "JSON log: the shutdown lines too" "$(tail -2 "$log")"
else
    bad "start with a JSON log" "$(tail -3 "$log")"
fi
# Standard error is the console: log.console.formatter.
"$roostd" --port 0 --data-dir "$tmp/data5" --set management.tcp.port=0 \
    --set log.console.formatter=json 2>"$tmp/console" &
cpid=$!
for _ in $(seq 1 100); do
    grep -q "ready for connections" "$tmp/console" && break
    sleep 0.05
done
kill "$cpid"; wait "$cpid"
out=$(head -1 "$tmp/console")
[[ $out == '{"time":'*'"level":'*'"msg":'* ]] &&
    ok "log.console.formatter = json on standard error" ||
    bad "log.console.formatter = json on standard error" "$out"
out=$("$roostd" -t --set log.file.formatter=xml 2>&1)
[[ $out == *"log.file.formatter: 'xml' is not plaintext or json"* ]] &&
    ok "a formatter other than plaintext or json is refused" ||
    bad "a formatter other than plaintext or json is refused" "$out"

# ---- the same firehose against the reference RabbitMQ ----
if curl -s -o /dev/null -m 2 -u guest:guest \
        "http://127.0.0.1:$ref_http/api/overview"; then
    run_checks "firehose on RabbitMQ" $py "$here/trace.py" --reference \
        --amqp "$ref_amqp" --http "$ref_http" --dump "$tmp/ref.json" firehose
    if [ -s "$tmp/roost.json" ] && [ -s "$tmp/ref.json" ]; then
        run_checks "compare" $py "$here/trace.py" compare \
            "$tmp/roost.json" "$tmp/ref.json"
    fi
else
    echo "trace: no reference RabbitMQ on $ref_amqp/$ref_http;" \
        "the comparison with it skipped"
fi

echo "trace: $pass passed, $fail failed"
[ $fail -eq 0 ]
