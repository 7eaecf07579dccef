# SPDX-License-Identifier: Apache-2.0
"""Named stream consumers (x-stream-consumer-name; streams-spec.md P5,
issue 24 point 8) with pika and the management API: a name resumes at
its committed offset, which is the ack watermark (an unacked or
requeued delivery holds it back, a reject without requeue moves past
it, two consumers of one name hold it at the slower), x-stream-offset
counts only for a new name, LavinMQ's x-stream-automatic-offset-tracking
names a consumer by its tag, bad names get 406, the bound on names, the
API lists, sets and forgets names (409 while attached), and names
survive a clean restart and a kill -9 without skipping a message.

    stream_offsets.py --port PORT --http HTTP_PORT [--phase PHASE]
                      [--prom PROMETHEUS_PORT --ctl ROOSTCTL]

PHASE: main (the default); before-restart, after-restart (exact: the
caller waited for the save); before-kill (acks, then the caller kills
the broker at once), after-kill (resumes at or before the acked, never
past); retention (the broker runs with a short stream.offset_retention);
cleanup (deletes the streams: the caller checks their files went).
Prints "PASS name" / "FAIL name: why".
"""
import argparse
import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pika

from checks import check, done

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--http", type=int, required=True)
ap.add_argument("--phase", default="main")
ap.add_argument("--prom", type=int)
ap.add_argument("--ctl")
args = ap.parse_args()

PF = "PRECONDITION_FAILED - "
S = {"x-queue-type": "stream"}



def connect():
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", args.port, blocked_connection_timeout=30))


def fresh(q, n=0):
    c = connect()
    ch = c.channel()
    ch.queue_delete(q)
    ch.queue_declare(q, durable=True, arguments=S)
    ch.confirm_delivery()
    for i in range(n):
        ch.basic_publish("", q, b"m%d" % i)
    c.close()


def publish(q, n, start):
    c = connect()
    ch = c.channel()
    ch.confirm_delivery()
    for i in range(start, start + n):
        ch.basic_publish("", q, b"m%d" % i)
    c.close()


class Consumer:
    """A consumer of 'q' with basic.consume arguments 'a' that acks only
    what it is told to."""

    def __init__(self, q, a, prefetch=10, tag=""):
        self.c = connect()
        self.ch = self.c.channel()
        self.ch.basic_qos(prefetch_count=prefetch)
        self.got = []           # (offset, delivery tag, redelivered)
        self.tag = self.ch.basic_consume(q, self.on, arguments=a,
                                         consumer_tag=tag or None)

    def on(self, ch, m, p, b):
        self.got.append(((p.headers or {}).get("x-stream-offset"),
                         m.delivery_tag, m.redelivered))

    def wait(self, n, secs=3.0):
        deadline = time.time() + secs
        while len(self.got) < n and time.time() < deadline:
            self.c.process_data_events(time_limit=0.05)
        return [g[0] for g in self.got]

    def tag_of(self, offset):
        return [g[1] for g in self.got if g[0] == offset][-1]

    def ack(self, offsets):
        for o in offsets:
            self.ch.basic_ack(self.tag_of(o))
        self.c.process_data_events(time_limit=0.1)

    def close(self):
        # the connection's close gives back what was not acked (pika's
        # channel close would reject what it buffered, with requeue)
        self.c.close()


def first_offset(q, a, prefetch=1):
    c = Consumer(q, a, prefetch)
    got = c.wait(1)
    c.close()
    return got[0] if got else None


def http(method, path, body=None):
    """(status, JSON or None)."""
    req = urllib.request.Request(
        "http://127.0.0.1:%d/api%s" % (args.http, path), method=method,
        data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"guest:guest").decode())
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            data = r.read()
            return r.status, json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        data = e.read()
        return e.code, json.loads(data) if data else None


def name_of(q, name):
    st, o = http("GET", "/queues/%%2F/%s/offsets/%s" % (q, name))
    return o if st == 200 else st


def named(name, offset=None):
    a = {"x-stream-consumer-name": name}
    if offset is not None:
        a["x-stream-offset"] = offset
    return a


def refusal(fn):
    c = connect()
    ch = c.channel()
    try:
        fn(ch)
        c.process_data_events(time_limit=0.3)
        r = "no error"
    except (pika.exceptions.ChannelClosedByBroker,
            pika.exceptions.ConnectionClosedByBroker) as e:
        r = (e.reply_code, e.reply_text)
    if c.is_open:
        c.close()
    return r


def nothing(ch, m, p, b):
    pass


if args.phase == "before-restart":
    fresh("so-restart", 50)
    c = Consumer("so-restart", named("r", "first"), prefetch=50)
    c.wait(50)
    c.ack(range(20))
    c.close()
    check("before restart: committed 20", name_of("so-restart", "r")
          .get("offset") == 20, name_of("so-restart", "r"))
    done()
if args.phase == "after-restart":
    o = name_of("so-restart", "r")
    check("after a clean restart: the name at 20, lag 30",
          isinstance(o, dict) and (o["offset"], o["lag"]) == (20, 30), o)
    check("after a clean restart: it resumes at 20",
          first_offset("so-restart", named("r", "first")) == 20)
    done()
if args.phase == "before-kill":
    c = Consumer("so-restart", named("r"), prefetch=50)
    c.wait(30)
    c.ack(range(20, 40))
    time.sleep(0.5)             # the save (STREAM_SAVE_MS) is done
    c.ack(range(40, 45))        # these may be lost with the kill
    done()
if args.phase == "after-kill":
    o = name_of("so-restart", "r")
    check("after kill -9: the name between what was saved and what was "
          "acked", isinstance(o, dict) and 40 <= o["offset"] <= 45, o)
    f = first_offset("so-restart", named("r", "first"))
    check("after kill -9: it resumes there, never past an unacked message",
          f is not None and 40 <= f <= 45, f)
    done()
if args.phase == "retention":
    fresh("so-ret", 5)
    c = Consumer("so-ret", named("old", "first"))
    c.wait(5)
    c.ack(range(5))
    c.close()
    check("retention: a name is kept while fresh",
          isinstance(name_of("so-ret", "old"), dict))
    time.sleep(2.5)
    check("retention: unused past stream.offset_retention, it is forgotten",
          name_of("so-ret", "old") == 404, name_of("so-ret", "old"))
    check("retention: a forgotten name starts where x-stream-offset says",
          first_offset("so-ret", named("old", "first")) == 0)
    done()
if args.phase == "cleanup":
    c = connect()
    ch = c.channel()
    for q in ("so-restart", "so-ret"):
        ch.queue_delete(q)
    c.close()
    sys.exit(0)

# ---- a name resumes at its ack watermark ----
fresh("so-a", 100)
c = Consumer("so-a", named("n1", "first"), prefetch=10)
check("a new name starts where x-stream-offset says", c.wait(10) ==
      list(range(10)), c.got[:3])
c.ack(range(10))
c.wait(20)
c.ack(range(10, 20))
c.wait(30)
c.ack(range(20, 30))
o = name_of("so-a", "n1")
check("committed offset = one past the acked while attached",
      isinstance(o, dict) and (o["offset"], o["consumers"]) == (30, 1), o)
c.close()
o = name_of("so-a", "n1")
check("the name stays after its consumer left, lag counted",
      isinstance(o, dict) and (o["offset"], o["lag"], o["consumers"]) ==
      (30, 70, 0) and o["updated_at"] > 1e12, o)
check("a stored name resumes there; x-stream-offset does not count",
      first_offset("so-a", named("n1", "first")) == 30)

c = Consumer("so-a", named("n1"), prefetch=10)
c.wait(10)
c.ack([30, 31, 32, 33, 34, 36, 37, 38, 39])
o = name_of("so-a", "n1")
check("an unacked delivery holds the watermark",
      isinstance(o, dict) and o["offset"] == 35, o)
c.close()
check("and the next consumer of the name starts at it",
      first_offset("so-a", named("n1")) == 35)

c = Consumer("so-a", named("n1"), prefetch=2)
c.wait(2)
c.ch.basic_nack(c.tag_of(35), requeue=True)
c.wait(3)
check("nack with requeue: redelivered, the watermark stays",
      c.got[2][0] == 35 and c.got[2][2] and
      name_of("so-a", "n1")["offset"] == 35, (c.got, name_of("so-a", "n1")))
c.ch.basic_reject(c.tag_of(35), requeue=False)
c.ack([36])
c.c.process_data_events(time_limit=0.1)
check("reject without requeue moves past it",
      name_of("so-a", "n1")["offset"] == 37, name_of("so-a", "n1"))

# ---- while attached, the API refuses; after, it sets and forgets ----
st, o = http("PUT", "/queues/%2F/so-a/offsets/n1", {"offset": 90})
check("PUT while a consumer of the name is attached: 409",
      st == 409 and o["error"] == "conflict", (st, o))
st, o = http("DELETE", "/queues/%2F/so-a/offsets/n1")
check("DELETE while attached: 409", st == 409, (st, o))
c.close()
st, _ = http("PUT", "/queues/%2F/so-a/offsets/n1", {"offset": 90})
check("PUT {offset: 90}: 204, and the name resumes there",
      st == 204 and first_offset("so-a", named("n1")) == 90, st)
http("PUT", "/queues/%2F/so-a/offsets/n1", {"offset": "first"})
check("PUT {offset: first}", name_of("so-a", "n1")["offset"] == 0)
http("PUT", "/queues/%2F/so-a/offsets/n1", {"offset": "last"})
check("PUT {offset: last}: the last message",
      name_of("so-a", "n1")["offset"] == 99)
http("PUT", "/queues/%2F/so-a/offsets/n1", {"offset": 10 ** 9})
check("PUT past the end: the end", name_of("so-a", "n1")["offset"] == 100)
http("PUT", "/queues/%2F/so-a/offsets/n1",
     {"timestamp": int(time.time() * 1000) - 3600 * 1000})
check("PUT {timestamp: an hour ago}: the first message",
      name_of("so-a", "n1")["offset"] == 0)
st, _ = http("PUT", "/queues/%2F/so-a/offsets/new", {"offset": 5})
check("PUT makes a new name", st == 204 and
      first_offset("so-a", named("new", "first")) == 5)
for body in ({}, {"offset": -1}, {"offset": "FIRST"}, {"timestamp": "x"},
             {"offset": 1, "timestamp": 1}):
    st, o = http("PUT", "/queues/%2F/so-a/offsets/n1", body)
    check("PUT %s: 400" % json.dumps(body), st == 400, (st, o))
st, q = http("GET", "/queues/%2F/so-a")
names = sorted((n["name"], n["offset"]) for n in q.get("consumer_offsets",
                                                        []))
check("the queue object lists its names", names == [("n1", 0), ("new", 5)],
      names)
st, _ = http("DELETE", "/queues/%2F/so-a/offsets/n1")
check("DELETE forgets a name: 204, then 404",
      st == 204 and name_of("so-a", "n1") == 404, st)
check("DELETE of an unknown name: 404",
      http("DELETE", "/queues/%2F/so-a/offsets/n1")[0] == 404)
c = connect()
c.channel().queue_declare("so-classic", durable=True)
c.close()
st, o = http("PUT", "/queues/%2F/so-classic/offsets/n1", {"offset": 1})
check("offsets of a classic queue: 400", st == 400 and "not a stream" in
      o.get("reason", ""), (st, o))
check("offsets of a missing queue: 404",
      http("GET", "/queues/%2F/so-none/offsets/n1")[0] == 404)
st, q = http("GET", "/queues/%2F/so-classic")
check("a classic queue has no consumer_offsets",
      "consumer_offsets" not in q, list(q)[:5])

# ---- a filtering name moves past what its filter leaves out ----
fresh("so-f")
c = connect()
ch = c.channel()
ch.confirm_delivery()
for i in range(10):
    ch.basic_publish("", "so-f", b"m%d" % i, pika.BasicProperties(headers={
        "x-stream-filter-value": "red" if i in (0, 5) else "blue"}))
c.close()
c = Consumer("so-f", dict(named("fr", "first"), **{"x-stream-filter": "red"}))
got = c.wait(2)
c.ack(got)
c.wait(3, secs=0.3)
o = name_of("so-f", "fr")
check("a filtering name: its messages, then the watermark past the "
      "filtered-out rest", got == [0, 5] and isinstance(o, dict) and
      o["offset"] == 10, (got, o))
c.close()

# ---- two consumers of one name: the slower holds it ----
fresh("so-two", 20)
a = Consumer("so-two", named("pair", "first"), prefetch=20)
b = Consumer("so-two", named("pair", "first"), prefetch=20)
a.wait(20)
b.wait(20)
a.ack(range(20))
b.ack(range(5))
check("two consumers of a name: the watermark is the slower's",
      name_of("so-two", "pair")["offset"] == 5 and
      name_of("so-two", "pair")["consumers"] == 2,
      name_of("so-two", "pair"))
b.ack(range(5, 20))
check("and moves when it catches up",
      name_of("so-two", "pair")["offset"] == 20, name_of("so-two", "pair"))
a.close()
b.close()

# ---- LavinMQ's alias, and bad names ----
fresh("so-auto", 3)
c = Consumer("so-auto", {"x-stream-automatic-offset-tracking": True,
                         "x-stream-offset": "first"}, tag="tag-a")
c.wait(3)
c.ack(range(3))
c.close()
o = name_of("so-auto", "tag-a")
check("x-stream-automatic-offset-tracking names it by its tag",
      isinstance(o, dict) and o["offset"] == 3, o)
c = Consumer("so-auto", {"x-stream-offset": "first"}, tag="tag-b")
c.wait(3)
c.ack(range(3))
c.close()
check("a consumer without a name is not tracked",
      name_of("so-auto", "tag-b") == 404)
E = ("invalid arg 'x-stream-consumer-name' for queue 'so-auto' in vhost "
     "'/': {invalid_stream_consumer_name,")
for label, v, want in [("empty", "", "{longstr,<<\"\">>}}"),
                       ("256 bytes", "x" * 256, None),
                       ("an integer", 5, "{signedint,_}}")]:
    def fn(ch, v=v):
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume("so-auto", nothing,
                         arguments={"x-stream-consumer-name": v})
    r = refusal(fn)
    check("x-stream-consumer-name %s: 406" % label,
          r[0] == 406 and r[1].startswith(PF + E) and
          (want is None or r[1].endswith(want)), r)

# ---- the bound on names (the broker runs with consumer_names_max=8) ----
fresh("so-many")
for i in range(8):
    http("PUT", "/queues/%%2F/so-many/offsets/k%d" % i, {"offset": 0})


def fn(ch):
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume("so-many", nothing,
                     arguments={"x-stream-consumer-name": "k8"})


r = refusal(fn)
check("a ninth name over stream.consumer_names_max=8: 406",
      r[0] == 406 and "stream.consumer_names_max" in r[1], r)
st, o = http("PUT", "/queues/%2F/so-many/offsets/k8", {"offset": 0})
check("and over the API: 400", st == 400, (st, o))
check("a kept name still attaches at the bound",
      refusal(lambda ch: (ch.basic_qos(prefetch_count=1),
                          ch.basic_consume("so-many", nothing, arguments={
                              "x-stream-consumer-name": "k3"}))) ==
      "no error")

# ---- roostctl and Prometheus ----
if args.ctl:
    def ctl(*a):
        r = subprocess.run([args.ctl, "--port", str(args.http), "-q"] +
                           list(a), capture_output=True, text=True,
                           timeout=30)
        return r.returncode, r.stdout + r.stderr

    fresh("so-tools", 5)
    c = Consumer("so-tools", named("t", "first"), prefetch=5)
    c.wait(5)
    c.ack(range(3))
    rc, out = ctl("set_stream_offset", "so-tools", "t", "1")
    check("roostctl set_stream_offset while attached fails, saying why",
          rc != 0 and "has a consumer attached" in out, (rc, out))
    c.close()
    rc, out = ctl("list_stream_offsets", "so-tools")
    rows = [ln.split("\t") for ln in out.splitlines()]
    check("roostctl list_stream_offsets", rc == 0 and
          rows[0] == ["name", "offset", "lag", "consumers", "updated_at"] and
          rows[1][:4] == ["t", "3", "2", "0"], (rc, out))
    if args.prom:
        req = urllib.request.Request("http://127.0.0.1:%d/metrics/per-object"
                                     % args.prom)
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        want = 'roost_stream_consumer_lag{vhost="/",queue="so-tools",' \
               'name="t"} 2'
        check("Prometheus: roost_stream_consumer_lag per name",
              want in text.splitlines(),
              [ln for ln in text.splitlines() if "stream" in ln][:4])
    rc, out = ctl("stream_status", "so-tools")
    rows = [ln.split("\t") for ln in out.splitlines()]
    check("roostctl stream_status", rc == 0 and rows[0] == [
        "role", "node", "offset", "committed_offset", "first_offset",
        "readers", "segments", "messages", "bytes"] and
        rows[1][0] == "writer" and
        rows[1][2:] == ["4", "4", "0", "0", "1", "5", "10"], (rc, out))
    st, q = http("GET", "/queues/%2F/so-tools")
    s = q.get("stream", {})
    now = time.time() * 1000
    check("the queue object's stream: offsets, times, bytes",
          (s.get("first_offset"), s.get("last_offset"), s.get("next_offset"),
           s.get("bytes"), s.get("consumer_names")) == (0, 4, 5, 10, 1) and
          now - 60000 < s["first_timestamp"] <= s["last_timestamp"] <=
          now + 1000, s)
    c = Consumer("so-tools", {"x-stream-offset": 2}, prefetch=1)
    c.wait(1)
    st, q = http("GET", "/queues/%2F/so-tools")
    cd = q.get("consumer_details", [{}])[0]
    check("a stream consumer's offset (next to deliver) and lag",
          (cd.get("offset"), cd.get("lag")) == (3, 2), cd)
    check("and its basic.consume arguments, as RabbitMQ shows them",
          cd.get("arguments") == {"x-stream-offset": 2}, cd.get("arguments"))
    c.close()
    if args.prom:
        for want in ('roost_stream_first_offset{vhost="/",queue="so-tools"} 0',
                     'roost_stream_last_offset{vhost="/",queue="so-tools"} 4',
                     'roost_stream_bytes{vhost="/",queue="so-tools"} 10',
                     'roost_stream_retention_dropped_total{vhost="/",'
                     'queue="so-tools"} 0'):
            check("Prometheus: " + want.split("{")[0], want in
                  text.splitlines())
        check("Prometheus: no stream series for a classic queue",
              'queue="so-classic"' not in
              "".join(ln for ln in text.splitlines()
                      if ln.startswith("roost_stream_")))
    rc, out = ctl("set_stream_offset", "so-tools", "t", "first")
    check("roostctl set_stream_offset first", rc == 0 and
          name_of("so-tools", "t")["offset"] == 0, (rc, out))
    rc, out = ctl("set_stream_offset", "so-tools", "t", "4")
    check("roostctl set_stream_offset 4", rc == 0 and
          name_of("so-tools", "t")["offset"] == 4, (rc, out))
    rc, out = ctl("delete_stream_offset", "so-tools", "t")
    check("roostctl delete_stream_offset", rc == 0 and
          name_of("so-tools", "t") == 404, (rc, out))
    rc, out = ctl("delete_stream_offset", "so-tools", "t")
    check("roostctl delete_stream_offset of a name not there fails",
          rc != 0 and "not found" in out, (rc, out))
    rc, out = ctl("list_stream_offsets", "so-classic")
    check("roostctl list_stream_offsets of a classic queue fails",
          rc != 0 and "not a stream" in out, (rc, out))
    c = connect()
    c.channel().queue_delete("so-tools")
    c.close()

# ---- a deleted stream takes its names ----
c = connect()
ch = c.channel()
ch.queue_delete("so-two")
ch.queue_declare("so-two", durable=True, arguments=S)
c.close()
check("a stream declared again under a deleted one's name has no names",
      name_of("so-two", "pair") == 404)
for q in ("so-a", "so-two", "so-auto", "so-many", "so-classic", "so-f"):
    c = connect()
    c.channel().queue_delete(q)
    c.close()
done()
