#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How long a /metrics scrape holds roostd's event loop with many queues
# (issue 12, point 3): roostd (BUILD/broker/roostd; default build-opt)
# with N queues (default 100,000, declared by declare_queues.py, 3
# messages in each of the first 1,000), scraped R times (default 5) at
# /metrics, /metrics/per-object (at the default bound), and both
# with prometheus.max_series=0 (no bound: every queue), while a pika
# client times AMQP round trips (queue.declare passive) on a second
# connection. Prints each scrape's size and time, roostd's own longest
# slice (roost_prometheus_slice_max_seconds) and the longest AMQP round
# trip seen during the scrapes.
# Usage: bench/prom-stall.sh [BUILD_DIR] [N] [R]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build-opt}
n=${2:-100000}
rounds=${3:-5}
py="env -u PYTHONHOME -u PYTHONPATH /usr/bin/python3"
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

run() {
    local bound=$1
    mkdir -p "$tmp/d$bound"
    "$build/broker/roostd" --port 0 --data-dir "$tmp/d$bound" \
        --log-file "$tmp/log$bound" --set management.tcp.port=0 \
        --set prometheus.tcp.port=0 --set prometheus.max_series="$bound" &
    pid=$!
    for _ in $(seq 1 100); do
        grep -q "ready for connections" "$tmp/log$bound" 2>/dev/null && break
        sleep 0.1
    done
    local amqp prom
    amqp=$(sed -n 's/.*ready for connections on port \([0-9]*\).*/\1/p' "$tmp/log$bound")
    prom=$(sed -n 's/.*Prometheus metrics on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/log$bound")
    $py "$here/../tests/integration/declare_queues.py" "$amqp" "$n" --messages 3
    cat > "$tmp/probe.py" <<'PY'
import sys, time, pika
c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(sys.argv[1])))
ch = c.channel()
stop = sys.argv[2]
worst = 0.0
count = 0
import os
while not os.path.exists(stop):
    t = time.monotonic()
    ch.queue_declare("bench-q-0", passive=True)
    worst = max(worst, time.monotonic() - t)
    count += 1
print("AMQP round trips during the scrapes: %d, longest %.1f ms" % (count, worst * 1000))
c.close()
PY
    # the same probe for 3 s without scrapes: what this machine's load
    # alone makes of a round trip
    $py "$tmp/probe.py" "$amqp" "$tmp/base$bound" > "$tmp/probe$bound" &
    local probe=$!
    sleep 3
    touch "$tmp/base$bound"
    wait "$probe"
    sed 's/during the scrapes/without scrapes (3 s)/' "$tmp/probe$bound"
    $py "$tmp/probe.py" "$amqp" "$tmp/stop$bound" > "$tmp/probe$bound" &
    probe=$!
    sleep 0.5
    for path in /metrics /metrics/per-object; do
        for _ in $(seq 1 "$rounds"); do
            curl -s -o "$tmp/out" -w "max_series=$bound $path: %{size_download} bytes in %{time_total} s\n" \
                "http://127.0.0.1:$prom$path"
        done
    done
    touch "$tmp/stop$bound"
    wait "$probe"
    cat "$tmp/probe$bound"
    curl -s "http://127.0.0.1:$prom/metrics" | grep '^roost_prometheus_slice_max'
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

echo "roostd: $build/broker/roostd; $n queues"
[ -n "${ONLY:-}" ] || run 100000
run 0
