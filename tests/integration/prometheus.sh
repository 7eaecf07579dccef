#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prometheus metrics (broker/mgmt/prom.c): roostd with prometheus.tcp.port
# 0 and a free management port; pika traffic (queues, confirmed
# publishes, gets, acks, a dead-lettered message, a redelivery, a queue
# name with quotes, a backslash and a newline); /metrics and
# /metrics/per-object fetched with curl and checked (values, HELP/TYPE,
# cumulative histogram buckets, the content type, promtool check
# metrics); /metrics/detailed; the series bound (prometheus.max_series
# low: the cut, its comment and gauge, one log line); bad requests (404,
# 405, garbage, oversized headers, half a request, clients that vanish
# mid-answer with 5,000 queues; queues and a vhost deleted while a slow
# client reads) with AMQP still served; Debian's
# prometheus server scraping both endpoints every second, queried through
# its HTTP API; the family names compared with the reference RabbitMQ's
# rabbitmq_prometheus (localhost:15698) when it is up.
# Prints "prometheus: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name" "$*"; fi; }

if ! $py -c 'import pika' 2>/dev/null; then
    echo "prometheus: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi
if ! command -v curl >/dev/null; then
    echo "prometheus: curl is missing; skipped"
    exit 77
fi
helper="$py $here/prometheus.py"
prom_pid=

cleanup() {
    [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && cp "$tmp/stderr" /tmp/pt/stderr.last
    rm -rf "$tmp"
}
trap cleanup EXIT

prom_port() {
    sed -n 's/.*Prometheus metrics on http:\/\/[^:]*:\([0-9]*\)\/metrics.*/\1/p' "$1" | tail -1
}

# ---- traffic and the two endpoints ----
mkdir -p "$tmp/d1"
if ! start "$tmp/d1" "$tmp/log1" --set prometheus.tcp.port=0 \
        --set management.tcp.port=0; then
    bad "roostd starts" "$(tail -5 "$tmp/log1")"
    echo "prometheus: $pass passed, $fail failed"
    exit 1
fi
pp=$(prom_port "$tmp/log1")
check "the metrics port is logged" test -n "$pp"
check "loopback by default" grep -q "Prometheus metrics on http://127.0.0.1:$pp/metrics" "$tmp/log1"

$helper traffic "$port" "$tmp/ready" "$tmp/stop" > "$tmp/traffic.out" 2>&1 &
traffic=$!
for _ in $(seq 1 200); do
    [ -e "$tmp/ready" ] && break
    kill -0 "$traffic" 2>/dev/null || break
    sleep 0.05
done
check "traffic ran" test -e "$tmp/ready"

curl -s -D "$tmp/agg.h" -o "$tmp/agg.txt" "http://127.0.0.1:$pp/metrics"
curl -s -o "$tmp/po.txt" "http://127.0.0.1:$pp/metrics/per-object"
curl -s -o "$tmp/det.txt" \
    "http://127.0.0.1:$pp/metrics/detailed?family=queue_coarse_metrics&family=vhost_status&vhost=%2F"
check "content type 0.0.4" \
    grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$tmp/agg.h"
run_checks aggregated $helper aggregated "$tmp/agg.txt"
run_checks per-object $helper per-object "$tmp/po.txt"
check "detailed: queue_coarse_metrics per queue" \
    grep -q '^rabbitmq_detailed_queue_messages_ready{vhost="/",queue="prom.dead"} 1$' "$tmp/det.txt"
check "detailed: only the families asked for" \
    test -z "$(grep '^rabbitmq_detailed_queue_consumers\|^rabbitmq_detailed_channel' "$tmp/det.txt")"
check "detailed: vhost_status" \
    grep -q '^rabbitmq_cluster_vhost_status{vhost="/"} 1$' "$tmp/det.txt"
if command -v promtool >/dev/null; then
    for f in agg po det; do
        check "promtool check metrics ($f)" sh -c "promtool check metrics < '$tmp/$f.txt'"
    done
else
    echo "promtool is missing (apt-get install prometheus): its checks skipped"
fi

# ---- Debian's prometheus server, scraping every second ----
if command -v prometheus >/dev/null; then
    sp=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat > "$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: roost
    static_configs:
      - targets: ["127.0.0.1:$pp"]
  - job_name: roost-per-object
    metrics_path: /metrics/per-object
    static_configs:
      - targets: ["127.0.0.1:$pp"]
EOF
    prometheus --config.file="$tmp/prometheus.yml" \
        --storage.tsdb.path="$tmp/tsdb" \
        --web.listen-address="127.0.0.1:$sp" > "$tmp/prometheus.log" 2>&1 &
    prom_pid=$!
    run_checks "prometheus server" $helper server "http://127.0.0.1:$sp"
    kill "$prom_pid"
    wait "$prom_pid" 2>/dev/null
    prom_pid=
else
    echo "prometheus is missing (apt-get install prometheus): the server's checks skipped"
fi

# ---- the family names against the reference RabbitMQ ----
if curl -s -m 5 -o "$tmp/ref.txt" http://127.0.0.1:15698/metrics &&
        grep -q '^# TYPE rabbitmq_identity_info' "$tmp/ref.txt"; then
    run_checks families $helper families "$tmp/agg.txt" "$tmp/ref.txt"
    grep '^reference families Roost lacks' "$tmp/checks.out"
else
    echo "the reference RabbitMQ's metrics (localhost:15698) are not reachable: the family comparison skipped"
fi

touch "$tmp/stop"
wait "$traffic"
check "traffic ended well" test $? -eq 0
check "roostd stops cleanly" stop

# ---- the bound, and hostile clients with 5,000 queues ----
mkdir -p "$tmp/d2"
start "$tmp/d2" "$tmp/log2" --set prometheus.tcp.port=0 \
    --set management.tcp.port=0 --set prometheus.max_series=200
pp=$(prom_port "$tmp/log2")
$py "$here/declare_queues.py" "$port" 3 bound- > /dev/null
curl -s -o "$tmp/b1.txt" "http://127.0.0.1:$pp/metrics/per-object"
curl -s -o "$tmp/b2.txt" "http://127.0.0.1:$pp/metrics/per-object"
run_checks bound $helper bound "$tmp/b2.txt" 2 1
check "bound: logged once" test "$(grep -c 'per-object metrics cut at 2 queues' "$tmp/log2")" = 1
curl -s -o "$tmp/b3.txt" "http://127.0.0.1:$pp/metrics"
check "bound: the aggregate is not cut" grep -q '^rabbitmq_queues 3$' "$tmp/b3.txt"
check "roostd stops cleanly (bound)" stop

mkdir -p "$tmp/d3"
start "$tmp/d3" "$tmp/log3" --set prometheus.tcp.port=0 \
    --set management.tcp.port=0 --set prometheus.max_series=0
pp=$(prom_port "$tmp/log3")
$py "$here/declare_queues.py" "$port" 5000 many- --messages 2 > /dev/null
run_checks hostile $helper hostile "$pp" "$port"
# queues and a whole vhost deleted while a slow client reads a big
# per-object answer: the scrape holds their references, leaves them out
mp=$(sed -n 's/.*management API listening on http:\/\/[^:]*:\([0-9]*\)\/.*/\1/p' "$tmp/log3")
curl -s -u guest:guest -X PUT "http://127.0.0.1:$mp/api/vhosts/v2" > /dev/null
curl -s -u guest:guest -X PUT -H 'content-type: application/json' \
    -d '{"configure":".*","write":".*","read":".*"}' \
    "http://127.0.0.1:$mp/api/permissions/v2/guest" > /dev/null
$py "$here/declare_queues.py" "$port" 2000 v2- --vhost v2 --messages 1 > /dev/null
curl -s --limit-rate 20M -o "$tmp/slow.txt" "http://127.0.0.1:$pp/metrics/per-object" &
slow=$!
sleep 0.3
$py "$here/declare_queues.py" "$port" 2500 many- --delete > /dev/null
curl -s -u guest:guest -X DELETE "http://127.0.0.1:$mp/api/vhosts/v2" > /dev/null
wait "$slow"
echo "slow answer: $(grep -c "^rabbitmq_queue_messages_ready{" "$tmp/slow.txt") queues in the first family, $(grep -c "^roost_queue_confirm_latency_seconds_count{" "$tmp/slow.txt") in the last"
check "deleted meanwhile: the slow answer is whole" \
    grep -q '^rabbitmq_identity_info{' "$tmp/slow.txt"
if command -v promtool >/dev/null; then
    check "deleted meanwhile: promtool check metrics" sh -c "promtool check metrics < '$tmp/slow.txt'"
fi
curl -s -o "$tmp/after.txt" "http://127.0.0.1:$pp/metrics"
check "deleted meanwhile: 2,500 queues left" grep -q '^rabbitmq_queues 2500$' "$tmp/after.txt"
check "roostd still runs" kill -0 "$pid"
check "roostd stops cleanly (hostile)" stop
# a port set explicitly and taken: the start is refused, naming it
$py -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(30)' > "$tmp/held" &
holder=$!
for _ in $(seq 1 100); do [ -s "$tmp/held" ] && break; sleep 0.05; done
held=$(cat "$tmp/held")
mkdir -p "$tmp/d4"
"$roostd" --port 0 --data-dir "$tmp/d4" --log-file "$tmp/log4" \
    --set management.tcp.port=0 --set prometheus.tcp.port="$held" 2>>"$tmp/stderr"
check "a taken port set explicitly refuses the start" test $? -ne 0
check "... naming it, its holder and the key" grep -q "prometheus: port $held on 127.0.0.1 is in use by .* (pid [0-9]*); choose another with prometheus.tcp.port" "$tmp/log4"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
check "no sanitizer reports" test ! -s "$tmp/stderr" -o -z "$(grep -i 'sanitizer\|runtime error' "$tmp/stderr")"

echo "prometheus: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
