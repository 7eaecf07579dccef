#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every page of the web page in headless Chromium (web_pages.py), at 1280
# and 420 px, against what this script made over AMQP first.
#
# roostd starts with a TLS listener. pika
# makes: a queue bound to an exchange under a max-length policy; a queue
# that rejects 3 messages into its dead-letter queue; a queue to delete
# from the page; a queue with a long name; a plain connection with a
# given name and a channel with prefetch 7, and a TLS one, both held
# open. Once the broker has a first sample it publishes a burst, and
# waits for the sample that counts it; what it made goes to a JSON file
# for web_pages.py, which checks each page's layout, takes screenshots
# ($WEB_OUT, by default tests/integration/web_pages.out) and reads the
# charts back.
# Prints "web_pages: N passed, M failed"; exit 77 (skipped) only when
# chromium or pika is missing.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

chromium=$(find_chromium)
need web_pages chromium chromium test -n "$chromium"
need web_pages "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
out=${WEB_OUT:-$PWD/tests/integration/web_pages.out}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

certs=$tmp/certs
"$here/tls-certs.sh" "$certs" >/dev/null ||
    { echo "web_pages: cannot make certificates"; exit 1; }
log=$tmp/roostd.log
# Statistics at RabbitMQ's default interval (5 s): the finest ring then
# covers the page's 10 minutes, so the sample before the burst is drawn.
if ! start "$tmp/data" "$log" -s management.tcp.port=0 \
    -s listeners.ssl.default=0 -s ssl_options.cacertfile="$certs/ca.pem" \
    -s ssl_options.certfile="$certs/server.pem" \
    -s ssl_options.keyfile="$certs/server.key"; then
    echo "web_pages: roostd did not start"; cat "$log"; exit 1
fi
mport=$(sed -n 's|.*management API listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" | head -1)
tport=$(sed -n 's/.*listening for AMQP over TLS on .*(port \([0-9]*\)).*/\1/p' "$log" | head -1)
if [ -z "$mport" ] || [ -z "$tport" ]; then
    echo "web_pages: roostd logged no management or TLS port"; cat "$log"
    exit 1
fi
ok "roostd listens for AMQP ($port), AMQP over TLS ($tport) and HTTP ($mport)"

# setup.py PORT TLS_PORT MPORT CERTS STATE STOP: make it all, write
# STATE, hold the two connections until the file STOP exists.
cat > "$tmp/setup.py" <<'PY'
import base64, json, os, ssl, sys, time, urllib.request
import pika

port, tport, mport = (int(a) for a in sys.argv[1:4])
certs, state_file, stop_file = sys.argv[4:7]
auth = "Basic " + base64.b64encode(b"guest:guest").decode()

def api(method, path, body=None):
    req = urllib.request.Request(
        "http://127.0.0.1:%d/api/%s" % (mport, path), method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": auth, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read()
        return json.loads(text) if text else None

def until(what, timeout=90):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = what()
        if v:
            return v
        time.sleep(0.2)
    raise RuntimeError("timed out waiting for " + what.__doc__)

st = {"vhost": "/", "queue": "wp-q", "dlq": "wp-dlq", "source": "wp-src",
      "doomed": "wp-doomed", "exchange": "wp-x", "key": "wp.key",
      "long_queue": "wp-" + "a-rather-long-queue-name-" * 3 + "end",
      "policy": "wp-pol", "tls_name": "wp-tls", "plain_name": "wp-plain",
      "prefetch": 7, "dead": 3, "burst": 40}
api("PUT", "policies/%2F/wp-pol", {"pattern": "^wp-q$", "apply-to": "queues",
                                   "definition": {"max-length": 1000}})
plain = pika.BlockingConnection(pika.ConnectionParameters(
    "127.0.0.1", port, heartbeat=0,
    client_properties={"connection_name": st["plain_name"]}))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
tls = pika.BlockingConnection(pika.ConnectionParameters(
    "127.0.0.1", tport, heartbeat=0,
    ssl_options=pika.SSLOptions(ctx, "localhost"),
    client_properties={"connection_name": st["tls_name"]}))
tls.channel()
ch = plain.channel()
ch.basic_qos(prefetch_count=st["prefetch"])
ch.exchange_declare(st["exchange"], "direct", durable=True)
for name in (st["queue"], st["dlq"], st["doomed"], st["long_queue"]):
    ch.queue_declare(name, durable=True)
ch.queue_declare(st["source"], durable=True, arguments={
    "x-dead-letter-exchange": "", "x-dead-letter-routing-key": st["dlq"]})
ch.queue_bind(st["queue"], st["exchange"], st["key"])
ch.basic_publish("", st["doomed"], b"doomed")

def sampled():
    """the broker's first sample"""
    o = api("GET", "overview?msg_rates_age=600&msg_rates_incr=5")
    s = o.get("message_stats", {}).get("publish_details", {})
    return s.get("samples")
until(sampled)
for i in range(st["burst"]):
    ch.basic_publish(st["exchange"], st["key"], b"burst %d" % i)
for i in range(st["dead"]):
    ch.basic_publish("", st["source"], b"dead %d" % i)
    m, _, _ = ch.basic_get(st["source"])
    ch.basic_reject(m.delivery_tag, requeue=False)
# a stream with a consumer name at 2 (2 of its first 3 acked) and its
# consumer reading at 5 (credit 3: 2, 3, 4 outstanding)
st["stream"] = "wp-stream"
ch.queue_declare(st["stream"], durable=True, arguments={
    "x-queue-type": "stream", "x-max-age": "1D"})
for i in range(10):
    ch.basic_publish("", st["stream"], b"s%d" % i)
sch = plain.channel()
sch.basic_qos(prefetch_count=3)
sgot = []
sch.basic_consume(st["stream"], lambda c_, m, p, b: sgot.append(m),
                  arguments={"x-stream-offset": "first",
                             "x-stream-consumer-name": "wp-name"})
def three():
    """the stream consumer's first three deliveries"""
    plain.process_data_events(time_limit=0.1)
    return len(sgot) >= 3
until(three)
for m in sgot[:2]:
    sch.basic_ack(m.delivery_tag)
o = api("GET", "overview")
st["published"] = o["message_stats"]["publish"]
st["ready_total"] = o["queue_totals"]["messages_ready"]
st["ready"] = st["burst"]
st["version"] = o["roost_version"]

def counted():
    """a sample that counts the burst"""
    o = api("GET", "overview?msg_rates_age=600&msg_rates_incr=5"
            "&lengths_age=600&lengths_incr=5")
    pub = o["message_stats"]["publish_details"]["samples"]
    dl = o["message_stats"].get("dead_letter_details", {}).get("samples", [])
    rd = o["queue_totals"]["messages_ready_details"]["samples"]
    qq = api("GET", "queues/%2F/wp-q?lengths_age=600&lengths_incr=5")
    qr = qq.get("messages_ready_details", {}).get("samples", [])
    return (pub[0]["sample"] == st["published"] and dl and
            dl[0]["sample"] >= st["dead"] and
            rd[0]["sample"] == st["ready_total"] and
            qr and qr[0]["sample"] == st["ready"])
until(counted)
with open(state_file, "w") as f:
    json.dump(st, f)
print("made", json.dumps(st))
sys.stdout.flush()
while not os.path.exists(stop_file):
    plain.sleep(0.2)
tls.close()
plain.close()
PY
rm -f "$tmp/stop"
$py "$tmp/setup.py" "$port" "$tport" "$mport" "$certs" "$tmp/state.json" \
    "$tmp/stop" > "$tmp/setup.out" 2>&1 &
held=$!
for _ in $(seq 1 1000); do
    [ -s "$tmp/state.json" ] && break
    kill -0 "$held" 2>/dev/null || break
    sleep 0.1
done
if [ -s "$tmp/state.json" ]; then
    ok "pika made the queues, the exchange, the policy, the burst and the connections"
    run_checks "the browser test" $py "$here/web_pages.py" "$chromium" \
        "http://127.0.0.1:$mport/" guest guest "$out" "$tmp/state.json"
    grep -v '^PASS \|^FAIL ' "$tmp/checks.out"
else
    bad "pika made the queues, the exchange, the policy, the burst and the connections" \
        "$(tail -5 "$tmp/setup.out")"
fi
touch "$tmp/stop"
wait "$held"
if stop; then ok "roostd exits cleanly"; else bad "roostd exits cleanly" "exit $?"; fi
echo "web_pages: $pass passed, $fail failed"
[ $fail -eq 0 ]
