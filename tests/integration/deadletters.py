# SPDX-License-Identifier: Apache-2.0
"""Roost's dead-letter tools (deadletters.sh): browse, search, the
dead-letters listing, replays, their bad input, and roostctl's
list_dead_letters and replay_dead_letters, against a roostd with a small
paging.window (so that most of the dead-letter queue is paged) and
ROOST_TEST_READ_DELAY_US (so that a browse of paged messages visibly
waits for the pager while AMQP goes on). One PASS/FAIL line per check
(checks.py)."""
import argparse
import base64
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request

import pika

from checks import Api, check, done, q, wait_replay

ap = argparse.ArgumentParser()
ap.add_argument("--amqp", type=int, required=True)
ap.add_argument("--http", type=int, required=True)
ap.add_argument("--roostctl", required=True)
ap.add_argument("--read-delay-ms", type=int, default=0)
ap.add_argument("--pid", type=int, default=0,
                help="roostd's: stopped at the end, a replay running and "
                "a browse waiting for the disk")
args = ap.parse_args()
api = Api(args.http)
N = 200


def channel():
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", args.amqp, heartbeat=0))
    return c, c.channel()


def ready(ch, name):
    return ch.queue_declare(name, passive=True).method.message_count


def browse(queue, query="", kind="browse"):
    return api.call("GET", "queues/%%2F/%s/%s%s" % (q(queue), kind, query))


def raw_get(path, user="guest", password="guest"):
    """(status, headers, body text) of a GET."""
    req = urllib.request.Request("http://127.0.0.1:%d/api/%s" %
                                 (args.http, path))
    req.add_header("Authorization", "Basic " + base64.b64encode(
        ("%s:%s" % (user, password)).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def drain(ch, queue):
    """Every message of 'queue', consumed and acked: [(props, body)]."""
    out = []
    while True:
        m, p, b = ch.basic_get(queue)
        if m is None:
            return out
        ch.basic_ack(m.delivery_tag)
        out.append((p, b))


conn, ch = channel()
ch.queue_declare("dlq", durable=True)
ch.queue_declare("work", durable=True, arguments={
    "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
for i in range(N):
    ch.basic_publish("", "work", b"m%d" % i, pika.BasicProperties(
        message_id="id-%d" % i, correlation_id="c-%d" % (i % 10),
        delivery_mode=2, headers={"k": "v%d" % (i % 7), "num": i}))
for i in range(N):
    m, p, b = ch.basic_get("work")
    ch.basic_reject(m.delivery_tag, requeue=False)
# One that is not dead-lettered, and one whose body is not UTF-8.
ch.basic_publish("", "dlq", b"plain", pika.BasicProperties(
    message_id="plain", delivery_mode=2))
ch.basic_publish("", "dlq", b"\xff\xfe\x00bin", pika.BasicProperties(
    message_id="bin", delivery_mode=2))
end = time.time() + 5
while ready(ch, "dlq") < N + 2 and time.time() < end:
    time.sleep(0.02)
check("dead-lettered", ready(ch, "dlq") == N + 2, ready(ch, "dlq"))
time.sleep(0.5)     # their batches synced: beyond the window they page

# ---- browse ----
s, b = browse("dlq", "?count=10")
check("browse 200", s == 200 and isinstance(b, list) and len(b) == 10,
      (s, b))
if s == 200 and b:
    e = b[0]
    check("browse position", [x["position"] for x in b] == list(range(10)),
          [x["position"] for x in b])
    check("browse fields", e["exchange"] == "" and e["routing_key"] == "dlq"
          and e["redelivered"] is False and e["delivery_count"] == 0 and
          e["payload"] == "m0" and e["payload_bytes"] == 2 and
          e["payload_encoding"] == "string", e)
    pr = e["properties"]
    check("browse properties", pr.get("message_id") == "id-0" and
          pr.get("correlation_id") == "c-0" and pr.get("delivery_mode") == 2
          and pr["headers"]["num"] == 0 and pr["headers"]["k"] == "v0" and
          pr["headers"]["x-death"][0]["reason"] == "rejected", pr)
s, b = browse("dlq", "?offset=195&count=10")
check("browse offset near the end", s == 200 and
      [x["position"] for x in b] == list(range(195, 202)) and
      b[0]["payload"] == "m195" and b[5]["payload"] == "plain", (s, b))
s, b = browse("dlq", "?offset=100000")
check("browse offset past the end", s == 200 and b == [], (s, b))
s, b = browse("dlq", "?offset=150&count=20")
check("browse paged messages", s == 200 and
      [x["payload"] for x in b] == ["m%d" % i for i in range(150, 170)],
      (s, b if s != 200 else [x["payload"] for x in b]))
check("ready unchanged by browsing", ready(ch, "dlq") == N + 2,
      ready(ch, "dlq"))

# A browse that waits for the pager does not hold up AMQP.
if args.read_delay_ms:
    res = {}

    def slow():
        t = time.time()
        res["answer"] = browse("dlq", "?offset=120&count=30")
        res["took"] = time.time() - t
    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.02)
    t0 = time.time()
    ch.queue_declare("other")
    ch.basic_publish("", "other", b"x")
    ch.basic_get("other", auto_ack=True)
    amqp_took = time.time() - t0
    t.join()
    s, b = res["answer"]
    check("slow paged browse answered", s == 200 and
          [x["payload"] for x in b] == ["m%d" % i for i in range(120, 150)],
          (s, res))
    check("AMQP goes on while a browse waits for the disk",
          amqp_took < args.read_delay_ms / 1000.0 < res["took"] + 0.05,
          (amqp_took, res["took"]))

# Nothing is touched: a plain queue and a quorum queue after browsing.
ch.queue_declare("plain")
ch.queue_declare("qq", durable=True, arguments={"x-queue-type": "quorum"})
ch.queue_declare("qq-control", durable=True,
                 arguments={"x-queue-type": "quorum"})
for qn in ("plain", "qq", "qq-control"):
    for i in range(3):
        ch.basic_publish("", qn, b"p%d" % i)
for _ in range(3):
    browse("plain")
    browse("qq")
m, p, body = ch.basic_get("plain", auto_ack=True)
check("basic.get after browse: not redelivered", m is not None and
      not m.redelivered and body == b"p0" and m.message_count == 2,
      (m, body))
m1, p1, _ = ch.basic_get("qq", auto_ack=True)
m2, p2, _ = ch.basic_get("qq-control", auto_ack=True)
check("quorum queue: x-delivery-count as if never browsed",
      not m1.redelivered and (p1.headers or {}).get("x-delivery-count") ==
      (p2.headers or {}).get("x-delivery-count"), (p1.headers, p2.headers))
s, b = browse("qq")
check("quorum queue browse: delivery_count 0, ready 2", s == 200 and
      len(b) == 2 and all(x["delivery_count"] == 0 for x in b), (s, b))

# ---- search ----
s, b = browse("dlq", "?message_id=id-77")
check("search message_id", s == 200 and [x["position"] for x in b] == [77],
      (s, b))
s, b = browse("dlq", "?correlation_id=c-3&count=100")
check("search correlation_id", s == 200 and
      [x["position"] for x in b] == list(range(3, N, 10)), (s, b))
s, b = browse("dlq", "?header=k&value=v2&count=1000")
check("search header string", s == 200 and
      [x["position"] for x in b] == list(range(2, N, 7)), (s, b))
s, b = browse("dlq", "?header=num&value=142")
check("search header integer (paged)", s == 200 and
      [x["payload"] for x in b] == ["m142"], (s, b))
s, b = browse("dlq", "?message_id=id-5&offset=6")
check("search from offset", s == 200 and b == [], (s, b))
s, h, t = raw_get("queues/%2F/dlq/browse?message_id=nope")
check("search says how far it looked", s == 200 and
      h.get("X-Roost-Scanned") == str(N + 2) and
      h.get("X-Roost-Scan-Limit") == "10000", (s, dict(h)))

# ---- encodings ----
s, b = browse("dlq", "?offset=%d&count=1" % (N + 1))
check("binary payload as base64", s == 200 and
      b[0]["payload_encoding"] == "base64" and
      base64.b64decode(b[0]["payload"]) == b"\xff\xfe\x00bin", (s, b))
s, b = browse("dlq", "?count=1&encoding=base64")
check("encoding=base64", s == 200 and
      base64.b64decode(b[0]["payload"]) == b"m0", (s, b))
s, b = browse("dlq", "?offset=10&count=1&truncate=1")
check("truncate", s == 200 and b[0]["payload"] == "m" and
      b[0]["payload_bytes"] == 3, (s, b))

# ---- dead-letters ----
s, b = browse("dlq", "?offset=198&count=10", "dead-letters")
check("dead-letters: only those with x-death", s == 200 and
      [x["position"] for x in b] == [198, 199], (s, b))
if s == 200 and b:
    e = b[0]
    check("dead-letters fields", e["reason"] == "rejected" and
          e["original_exchange"] == "" and
          e["original_routing_key"] == "work" and
          e["original_queue"] == "work" and e["death_count"] == 1 and
          e["payload"] == "m198", e)

# ---- bad input ----
for query, name in [("?count=0", "count 0"), ("?count=1001", "count 1001"),
                    ("?count=x", "count x"), ("?offset=-1", "offset -1"),
                    ("?offset=99999999999999999999", "huge offset"),
                    ("?encoding=hex", "encoding"), ("?truncate=-2", "truncate"),
                    ("?header=k", "header without value"),
                    ("?value=v", "value without header")]:
    s, b = browse("dlq", query)
    check("browse 400: " + name, s == 400 and "bad_request" in b, (s, b))
for kind in ("browse", "dead-letters"):
    s, b = browse("nosuch", "", kind)
    check(kind + " unknown queue 404", s == 404 and "Not Found" in b, (s, b))
    s, b = api.call("GET", "queues/nosuch/dlq/" + kind)
    check(kind + " unknown vhost 404", s == 404, (s, b))
    s, b = api.call("PUT", "queues/%2F/dlq/" + kind, {})
    check(kind + " PUT 405", s == 405, (s, b))
    s, h, t = raw_get("queues/%2F/dlq/" + kind, password="wrong")
    check(kind + " bad credentials 401", s == 401, (s, t))
s, b = api.call("PUT", "users/nobody", {"password": "pw", "tags": "management"})
s, h, t = raw_get("queues/%2F/dlq/browse", "nobody", "pw")
check("browse without permissions in the vhost 401", s == 401, (s, t))
api.call("PUT", "permissions/%2F/nobody",
         {"configure": "", "write": "", "read": "^other$"})
s, h, t = raw_get("queues/%2F/dlq/browse", "nobody", "pw")
check("browse without read permission on the queue 401", s == 401, (s, t))
s, h, t = raw_get("replays", "nobody", "pw")
check("replays listed to a user of the vhost", s == 200, (s, t))

R = "queues/%2F/dlq/replay"
for body, name in [(b"{", "bad JSON"), (b"[1]", "not an object"),
                   (b'{"rate": -1}', "negative rate"),
                   (b'{"rate": "x"}', "string rate"),
                   (b'{"rate": 1.5}', "fractional rate"),
                   (b'{"rate": 10000001}', "huge rate"),
                   (b'{"count": 0}', "count 0"),
                   (b'{"count": -3}', "negative count"),
                   (b'{"count": 1e30}', "huge count"),
                   (b'{"exchange": 3}', "exchange not a string"),
                   (b'{"exchange": "nosuch"}', "unknown exchange"),
                   (b'{"routing_key": ["a"]}', "routing_key not a string")]:
    s, b = api.call("POST", R, raw=body)
    check("replay 400: " + name, s == 400, (s, b))
s, b = api.call("POST", "queues/%2F/nosuch/replay", {})
check("replay unknown queue 404", s == 404, (s, b))
s, b = api.call("POST", "queues/nosuch/dlq/replay", {})
check("replay unknown vhost 404", s == 404, (s, b))
s, b = api.call("GET", R)
check("replay GET 405", s == 405, (s, b))


def post_status(path, content_type, auth):
    req = urllib.request.Request("http://127.0.0.1:%d/api/%s" %
                                 (args.http, path), data=b"{}", method="POST")
    if auth:
        req.add_header("Authorization", api.auth)
    req.add_header("Content-Type", content_type)
    try:
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


st = post_status(R, "text/plain", True)
check("replay without a JSON body type 415", st == 415, st)
st = post_status(R, "application/json", False)
check("replay without credentials 401", st == 401, st)
s, b = api.call("POST", R, raw=b'{"count": 1}')
check("replay of one 201", s == 201, (s, b))
s, b = api.call("GET", "replays/0123456789abcdef")
check("unknown replay 404", s == 404, (s, b))
s, b = api.call("DELETE", "replays/0123456789abcdef")
check("cancel unknown replay 404", s == 404, (s, b))
s, b = api.call("PUT", "replays/0123456789abcdef", {})
check("replay PUT 405", s == 405, (s, b))
s, b = api.call("POST", "replays", {})
check("replays POST 405", s == 405, (s, b))

# The {"count": 1} replay above moved m0 back to work.
time.sleep(0.3)
got = drain(ch, "work")
check("replay count 1", [b for _, b in got] == [b"m0"], got)

# ---- replay to the original exchange and key, at a rate ----
t = time.time()
s, r = api.call("POST", R, {"rate": 100, "count": 50})
check("replay 201", s == 201 and r["state"] == "running" and
      r["total"] == 50 and r["rate"] == 100 and r["exchange"] is None and
      len(r["id"]) == 16, (s, r))
s2, again = api.call("POST", R, {})
check("a second replay of the queue 409", s2 == 409, (s2, again))
r = wait_replay(api, r["id"])
took = time.time() - t
check("replay done", r["state"] == "done" and r["moved"] == 50 and
      r["skipped"] == 0, r)
check("rate limited: 50 at 100/s take 0.4 s or more", took >= 0.4, took)
got = drain(ch, "work")
check("replayed in order to the original queue",
      [b for _, b in got] == [b"m%d" % i for i in range(1, 51)],
      [b for _, b in got][:5])
check("replayed with x-death kept", got and
      got[0][0].headers["x-death"][0]["queue"] == "work" and
      got[0][0].message_id == "id-1", got[:1])
s, lst = api.call("GET", "replays")
check("replays listed", s == 200 and r["id"] in [x["id"] for x in lst],
      (s, lst))

# All of the rest: the paged ones come back too; "plain" and "bin" have
# no x-death and no target was chosen: skipped, left in place.
s, r = api.call("POST", R, {"rate": 0})
r = wait_replay(api, r["id"])
check("replay all: paged ones moved, two skipped", r["state"] == "done" and
      r["moved"] == N - 51 and r["skipped"] == 2, r)
got = drain(ch, "work")
check("replay all in order", [b for _, b in got] ==
      [b"m%d" % i for i in range(51, N)], len(got))
s, b = browse("dlq")
check("skipped ones left in place", s == 200 and
      [x["properties"]["message_id"] for x in b] == ["plain", "bin"], b)

# ---- to a chosen exchange and key ----
ch.exchange_declare("alt", "direct")
ch.queue_declare("altq")
ch.queue_bind("altq", "alt", "k")
s, r = api.call("POST", R, {"rate": 0, "exchange": "alt",
                            "routing_key": "k"})
r = wait_replay(api, r["id"])
check("replay to a chosen exchange", r["state"] == "done" and
      r["moved"] == 2 and r["exchange"] == "alt" and r["routing_key"] == "k",
      r)
m, p, body = ch.basic_get("altq", auto_ack=True)
check("chosen exchange: routed there", m and m.exchange == "alt" and
      m.routing_key == "k" and body == b"plain", (m, body))
drain(ch, "altq")

# ---- a priority queue: delivery order is the highest level first ----
ch.queue_declare("pq", arguments={"x-max-priority": 5})
ch.queue_declare("pq-target")
for i, prio in enumerate([0, 5, 2, 5, 0]):
    ch.basic_publish("", "pq", b"p%d" % i, pika.BasicProperties(priority=prio))
s, b = browse("pq")
want = [b"p1", b"p3", b"p2", b"p0", b"p4"]
check("priority queue browsed in delivery order", s == 200 and
      [x["payload"].encode() for x in b] == want and
      [x["position"] for x in b] == list(range(5)), (s, b))
s, b = browse("pq", "?offset=2&count=2")
check("priority queue offset", s == 200 and
      [x["payload"] for x in b] == ["p2", "p0"], (s, b))
s, r = api.call("POST", "queues/%2F/pq/replay",
                {"rate": 0, "exchange": "", "routing_key": "pq-target"})
r = wait_replay(api, r["id"])
check("priority queue replayed in delivery order", r["moved"] == 5 and
      [b for _, b in drain(ch, "pq-target")] == want, r)

# ---- cancel, and a deleted queue cancels ----
ch.queue_declare("slow", durable=True)
for i in range(20):
    ch.basic_publish("", "slow", b"s%d" % i)
s, r = api.call("POST", "queues/%2F/slow/replay",
                {"rate": 2, "exchange": "", "routing_key": "altq"})
time.sleep(0.3)
s, b = api.call("DELETE", "replays/" + r["id"])
r = wait_replay(api, r["id"])
check("cancelled", s == 204 and r["state"] == "cancelled" and
      r["moved"] < 20, (s, r))
s, r = api.call("POST", "queues/%2F/slow/replay",
                {"rate": 2, "exchange": "amq.default", "routing_key": "altq"})
time.sleep(0.2)
ch.queue_delete("slow")
r = wait_replay(api, r["id"])
check("deleting the queue cancels", r["state"] == "cancelled" and
      "deleted" in r.get("error", ""), r)
drain(ch, "altq")

# ---- roostctl ----
for i in range(3):
    ch.basic_publish("", "work", b"again%d" % i, pika.BasicProperties(
        message_id="again-%d" % i, delivery_mode=2))
for i in range(3):
    m, p, b = ch.basic_get("work")
    ch.basic_reject(m.delivery_tag, requeue=False)
time.sleep(0.2)
ctl = [args.roostctl, "--port", str(args.http)]
out = subprocess.run(ctl + ["list_dead_letters", "dlq"],
                     capture_output=True, text=True)
lines = out.stdout.splitlines()
check("roostctl list_dead_letters", out.returncode == 0 and
      lines[1].split("\t") == ["position", "reason", "original_exchange",
                               "original_routing_key", "message_id",
                               "payload_bytes"] and
      lines[2].split("\t") == ["0", "rejected", "", "work", "again-0", "6"],
      (out.returncode, out.stdout, out.stderr))
out = subprocess.run(ctl + ["list_dead_letters", "dlq", "--offset", "1",
                            "--count", "1", "-s"],
                     capture_output=True, text=True)
check("roostctl list_dead_letters --offset --count", out.returncode == 0
      and out.stdout.splitlines() == ["1\trejected\t\twork\tagain-1\t6"],
      (out.returncode, out.stdout, out.stderr))
out = subprocess.run(ctl + ["list_dead_letters", "nosuch"],
                     capture_output=True, text=True)
check("roostctl list_dead_letters unknown queue", out.returncode == 65,
      (out.returncode, out.stderr))
out = subprocess.run(ctl + ["list_dead_letters", "dlq", "--count", "x"],
                     capture_output=True, text=True)
check("roostctl list_dead_letters bad count", out.returncode == 64,
      (out.returncode, out.stderr))
out = subprocess.run(ctl + ["replay_dead_letters", "dlq", "--rate", "20"],
                     capture_output=True, text=True)
check("roostctl replay_dead_letters", out.returncode == 0 and
      "done: 3 moved, 0 skipped" in out.stdout and
      "replay " in out.stderr, (out.returncode, out.stdout, out.stderr))
check("roostctl replayed", [b for _, b in drain(ch, "work")] ==
      [b"again0", b"again1", b"again2"])
out = subprocess.run(ctl + ["replay_dead_letters", "dlq", "--exchange",
                            "nosuch"], capture_output=True, text=True)
check("roostctl replay_dead_letters unknown exchange", out.returncode == 69
      and "nosuch" in out.stderr, (out.returncode, out.stderr))
out = subprocess.run(ctl + ["replay_dead_letters", "dlq", "--rate", "-1"],
                     capture_output=True, text=True)
check("roostctl replay_dead_letters bad rate", out.returncode == 64,
      (out.returncode, out.stderr))
# The bounds: 16 replays running at once, the last 100 finished kept.
ids = []
for i in range(16):
    ch.queue_declare("many-%d" % i)
    for _ in range(3):
        ch.basic_publish("", "many-%d" % i, b"x")
    s, r = api.call("POST", "queues/%%2F/many-%d/replay" % i,
                    {"rate": 1, "exchange": "", "routing_key": "altq"})
    ids.append(r["id"] if s == 201 else None)
ch.queue_declare("many-16")
s, b = api.call("POST", "queues/%2F/many-16/replay", {})
check("at most 16 replays running: 409", s == 409 and
      "too many" in b, (s, b))
for rid in ids:
    if rid:
        api.call("DELETE", "replays/" + rid)
drain(ch, "altq")
for i in range(101):
    s, r = api.call("POST", "queues/%2F/many-16/replay", {"rate": 0})
    wait_replay(api, r["id"])
s, lst = api.call("GET", "replays")
check("the last 100 finished replays kept", s == 200 and len(lst) == 100
      and lst[-1]["id"] == r["id"] and all(x["state"] != "running"
                                           for x in lst), (s, len(lst)))

# On a terminal, replay_dead_letters draws a progress bar.
for i in range(3):
    ch.basic_publish("", "dlq", b"tty%d" % i)
out = subprocess.run(["script", "-qec", " ".join(
    ctl + ["replay_dead_letters", "dlq", "--rate", "10", "--exchange",
           "''", "--routing-key", "altq"]), "/dev/null"],
    capture_output=True)
check("replay_dead_letters progress bar on a terminal", out.returncode == 0
      and b"\r[" in out.stdout and b"#" * 40 in out.stdout and
      b"100% 3 moved" in out.stdout, (out.returncode, out.stdout[-300:]))
drain(ch, "altq")

# Stopping with a replay running and a browse waiting for the disk: the
# browse gets 503 (or the connection closes), nothing leaks (the shell
# checks the exit status, which ASan's leak check would change).
if args.pid and args.read_delay_ms:
    ch.queue_declare("long", durable=True)
    for i in range(100):
        ch.basic_publish("", "long", b"l%d" % i, pika.BasicProperties(
            delivery_mode=2))
    s, r = api.call("POST", "queues/%2F/long/replay",
                    {"rate": 1, "exchange": "", "routing_key": "altq"})
    check("a replay left running", s == 201 and r["state"] == "running",
          (s, r))
    time.sleep(0.5)     # synced: beyond the window they page
    res = {}

    def pending():
        try:
            res["answer"] = browse("long", "?offset=50&count=40")
        except Exception as e:      # the connection closed under it
            res["answer"] = (0, repr(e))
    t = threading.Thread(target=pending)
    t.start()
    time.sleep(0.1)
    os.kill(args.pid, signal.SIGTERM)
    t.join()
    check("a browse waiting at shutdown: 503 or closed",
          res["answer"][0] in (0, 503), res)
else:
    conn.close()
done()
