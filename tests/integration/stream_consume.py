# SPDX-License-Identifier: Apache-2.0
"""Publishing to and consuming from a stream (x-queue-type: stream) over
AMQP 0-9-1 with pika (streams-spec.md 1.5-1.9; issue 24, points 3-5):
x-stream-offset in each of its forms, credit exactly the prefetch count,
the x-stream-offset header on each delivery, headers kept byte for byte,
the operations a stream refuses with RabbitMQ 3.10.8's codes and texts,
retention at message granularity, paged messages read back in order.

    stream_consume.py --port PORT --http HTTP_PORT [--reference]
    stream_consume.py --port PORT --phase before-restart|after-restart

--reference runs the cases RabbitMQ 3.10.8 answers as Roost does against
the reference node (the others are Roost's deliberate differences:
docs/compatibility.md, "Streams"). The two restart phases publish, then
(after the caller restarts the broker) check every message is there at
its offset. Prints "PASS name" / "FAIL name: why".
"""
import argparse
import base64
import datetime
import json
import sys
import time
import urllib.error
import urllib.request

import pika

from checks import drain

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--http", type=int)
ap.add_argument("--reference", action="store_true")
ap.add_argument("--phase")
args = ap.parse_args()

PF = "PRECONDITION_FAILED - "
NI = "NOT_IMPLEMENTED - "
S = {"x-queue-type": "stream"}
failed = 0


def check(name, ok, why=""):
    global failed
    if ok:
        print("PASS " + name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, why))


def connect():
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", args.port, blocked_connection_timeout=30))


def fresh(q, arguments=None, n=0, body=b"m%d", props=None):
    """A new stream 'q' with 'n' messages published one at a time with
    confirms (so that RabbitMQ writes one chunk each)."""
    c = connect()
    ch = c.channel()
    ch.queue_delete(q)
    ch.queue_declare(q, durable=True, arguments=dict(S, **(arguments or {})))
    ch.confirm_delivery()
    for i in range(n):
        ch.basic_publish("", q, body % i if b"%d" in body else body,
                         props or pika.BasicProperties())
    c.close()


def consume(q, offset=None, prefetch=100, want=None, ack=True, wait=1.0,
            extra=None):
    """What a consumer of 'q' at 'offset' gets: [(offset header, body,
    redelivered)], until 'want' arrived or 'wait' s passed without one."""
    c = connect()
    ch = c.channel()
    ch.basic_qos(prefetch_count=prefetch)
    got = []

    def on(chx, m, p, b):
        got.append(((p.headers or {}).get("x-stream-offset"), b,
                    m.redelivered, p.headers))
        if ack:
            chx.basic_ack(m.delivery_tag)
    a = dict(extra or {})
    if offset is not None:
        a["x-stream-offset"] = offset
    ch.basic_consume(q, on, arguments=a)
    drain(c, got, want, wait)
    c.close()
    return got


def offsets(got):
    return [g[0] for g in got]


def refusal(fn):
    """The (code, text) a channel or connection close gives 'fn(ch)'."""
    c = connect()
    ch = c.channel()
    closed = []
    ch._impl.add_on_close_callback(lambda _ch, why: closed.append(why))
    try:
        fn(ch)
        c.process_data_events(time_limit=0.5)
        ch.queue_declare("amq.gen-never-there-%d" % time.time_ns(),
                         passive=True)
    except (pika.exceptions.ChannelClosedByBroker,
            pika.exceptions.ConnectionClosedByBroker) as e:
        # the passive declare's 404: 'fn' passed
        r = "no error" if "never-there" in str(e.reply_text) else \
            (e.reply_code, e.reply_text)
    except pika.exceptions.ChannelWrongStateError:
        e = closed[0] if closed else None
        r = (e.reply_code, e.reply_text) if hasattr(e, "reply_code") \
            else repr(e)
    else:
        r = "no error"
    if c.is_open:
        c.close()
    return r


def http(method, path):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (args.http, path),
                                 method=method)
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


if args.phase == "before-restart":
    fresh("sc-restart", n=300)
    got = consume("sc-restart", "first", want=300)
    check("before restart: 300 messages", offsets(got) == list(range(300)),
          offsets(got)[:5])
    sys.exit(1 if failed else 0)
if args.phase == "after-restart":
    got = consume("sc-restart", "first", want=300)
    check("after restart: the same 300 at the same offsets",
          offsets(got) == list(range(300)) and
          [g[1] for g in got] == [b"m%d" % i for i in range(300)],
          offsets(got)[:5])
    c = connect()
    ch = c.channel()
    ch.confirm_delivery()
    ch.basic_publish("", "sc-restart", b"after")
    c.close()
    got = consume("sc-restart", "last", want=1)
    check("after restart: the next append takes offset 300",
          [g[:2] for g in got] == [(300, b"after")], got)
    sys.exit(1 if failed else 0)

# ---- redeclaring (1.3) ----
RD = "inequivalent arg '%s' for queue 'sc-re' in vhost '/': received "
fresh("sc-re", {"x-max-age": "1h", "x-initial-cluster-size": 1,
                "x-foo": 1})
base = dict(S, **{"x-max-age": "1h", "x-initial-cluster-size": 1})
for name, flags, a, want in [
        ("identical, x-foo dropped", {}, base, "ok"),
        ("without x-queue-type", {}, {"x-max-age": "1h",
                                      "x-initial-cluster-size": 1},
         (406, PF + RD % "x-queue-type" + "none but current is the value "
          "'stream' of type 'longstr'")),
        ("x-queue-type classic", {}, dict(base, **{"x-queue-type":
                                                   "classic"}),
         (406, PF + RD % "x-queue-type" + "'classic' but current is "
          "'stream'")),
        ("x-max-age 1h to 2h", {}, dict(base, **{"x-max-age": "2h"}),
         (406, PF + RD % "x-max-age" + "'2h' but current is '1h'")),
        ("adds x-max-length-bytes", {}, dict(base, **{
            "x-max-length-bytes": 1000}),
         (406, PF + RD % "x-max-length-bytes" + "the value '1000' of type "
          "'signedint' but current is none")),
        ("drops x-initial-cluster-size", {}, dict(S, **{"x-max-age": "1h"}),
         (406, PF + RD % "x-initial-cluster-size" + "none but current is "
          "the value '1' of type 'signedint'")),
        ("auto_delete", {"auto_delete": True}, base,
         (406, PF + RD % "auto_delete" + "'true' but current is 'false'")),
]:
    r = refusal(lambda ch: ch.queue_declare("sc-re", durable=True,
                                            arguments=a, **flags))
    check("redeclare: " + name, r == ("no error" if want == "ok" else want),
          r)

# ---- offsets (1.6, P2) ----
fresh("sc-off", n=10)
got = consume("sc-off", "first", want=10)
check("first: offsets 0..9 with their bodies, never redelivered",
      [g[:3] for g in got] == [(i, b"m%d" % i, False) for i in range(10)],
      got)
check("no offset means next: nothing old",
      consume("sc-off", None, wait=0.5) == [])
got = consume("sc-off", "next", wait=0.5)
check("next: nothing old", got == [], got)
got = consume("sc-off", 4, want=6)
check("integer 4: from 4", offsets(got) == list(range(4, 10)), offsets(got))
got = consume("sc-off", "last", want=1, wait=0.5)
check("last (one message per chunk): the last message",
      offsets(got) == [9], offsets(got))
got = consume("sc-off", 0, want=10)
check("integer 0", offsets(got) == list(range(10)), offsets(got))
got = consume("sc-off", "1h", want=10)
check("interval 1h: everything", offsets(got) == list(range(10)),
      offsets(got))
for bad in ["1x", "0s"]:
    r = refusal(lambda ch: (ch.basic_qos(prefetch_count=5), ch.basic_consume(
        "sc-off", lambda *a: None, arguments={"x-stream-offset": bad})))
    check("x-stream-offset %r: 406" % bad, r == (406, PF + (
        "invalid arg 'x-stream-offset' for queue 'sc-off' in vhost '/': "
        "{invalid_stream_offset_arg,{longstr,<<\"%s\">>}}" % bad)), r)

if not args.reference:
    # Roost's offsets where RabbitMQ's differ (streams-spec.md, P2)
    got = consume("sc-off", -3, want=3)
    check("negative -3: the last 3 messages", offsets(got) == [7, 8, 9],
          offsets(got))
    got = consume("sc-off", 1000, wait=0.5)
    check("past the end: next (nothing old)", got == [], got)
    got = consume("sc-off", -(2 ** 63), want=10)
    check("the most negative offset: from the first",
          offsets(got) == list(range(10)), offsets(got))
    for bad in ["FIRST", "foo", "", True]:
        r = refusal(lambda ch: (ch.basic_qos(prefetch_count=5),
                                ch.basic_consume("sc-off", lambda *a: None,
                                                 arguments={
                                                     "x-stream-offset": bad})))
        check("x-stream-offset %r: 406, not RabbitMQ's 541" % (bad,),
              r[0] == 406 and "invalid_stream_offset_arg" in r[1], r)
    # a consumer at 'next' gets exactly what comes after it
    c = connect()
    ch = c.channel()
    ch.basic_qos(prefetch_count=10)
    seen = []
    ch.basic_consume("sc-off", lambda chx, m, p, b: (
        seen.append(p.headers["x-stream-offset"]),
        chx.basic_ack(m.delivery_tag)), arguments={"x-stream-offset": 1000})
    c.process_data_events(time_limit=0.3)
    p = connect()
    pch = p.channel()
    pch.confirm_delivery()
    for i in range(3):
        pch.basic_publish("", "sc-off", b"late%d" % i)
    p.close()
    deadline = time.time() + 5
    while len(seen) < 3 and time.time() < deadline:
        c.process_data_events(time_limit=0.1)
    c.close()
    check("past the end, then 3 published: offsets 10, 11, 12",
          seen == [10, 11, 12], seen)

# timestamps (seconds)
fresh("sc-ts", n=5)
now = int(time.time())
c = connect()
ch = c.channel()
ch.basic_qos(prefetch_count=10)
res = {}
for name, t in (("an hour ago", now - 3600), ("an hour ahead", now + 3600)):
    seen = []
    tag = ch.basic_consume(
        "sc-ts", lambda chx, m, p, b, seen=seen: (
            seen.append(p.headers["x-stream-offset"]),
            chx.basic_ack(m.delivery_tag)),
        arguments={"x-stream-offset":
                   datetime.datetime.utcfromtimestamp(t)})
    c.process_data_events(time_limit=0.7)
    ch.basic_cancel(tag)
    res[name] = seen
c.close()
check("timestamp an hour ago: everything", res["an hour ago"] ==
      list(range(5)), res)
check("timestamp an hour ahead: nothing old", res["an hour ahead"] == [],
      res)

# ---- credit (1.7, P3) ----
fresh("sc-credit", n=20)
got = consume("sc-credit", "first", prefetch=3, ack=False, wait=0.7)
check("prefetch 3, no acks: exactly 3 deliveries", offsets(got) == [0, 1, 2],
      offsets(got))
c = connect()
ch = c.channel()
ch.basic_qos(prefetch_count=2)
tags = []
ch.basic_consume("sc-credit", lambda chx, m, p, b: tags.append(
    m.delivery_tag), arguments={"x-stream-offset": "first"})
c.process_data_events(time_limit=0.5)
n0 = len(tags)
ch.basic_ack(tags[-1], multiple=True)
c.process_data_events(time_limit=0.5)
n1 = len(tags)
ch.basic_ack(0, multiple=True)
c.process_data_events(time_limit=0.5)
n2 = len(tags)
c.close()
check("credit: 2, a multiple ack of 2 gives 2 more, ack-all 2 more",
      (n0, n1, n2) == (2, 4, 6), (n0, n1, n2))
r = refusal(lambda ch: ch.basic_ack(999))
check("ack of an unknown tag: 406", r == (406, PF + "unknown delivery tag "
                                          "999"), r)
# two consumers on one channel: each its own reader and credit (Roost
# only: RabbitMQ sends more than the credit, and pika nacks what it
# buffered at close, which RabbitMQ answers with 540)
c = connect() if not args.reference else None
if c:
    ch = c.channel()
    ch.basic_qos(prefetch_count=5)
    a, b = [], []
    ch.basic_consume("sc-credit", lambda chx, m, p, body: a.append(
        p.headers["x-stream-offset"]), arguments={"x-stream-offset": "first"})
    ch.basic_consume("sc-credit", lambda chx, m, p, body: b.append(
        p.headers["x-stream-offset"]), arguments={"x-stream-offset": 10})
    c.process_data_events(time_limit=0.7)
    c.close()
    check("two consumers on one channel read on their own",
          a == [0, 1, 2, 3, 4] and b == [10, 11, 12, 13, 14], (a, b))

# ---- what a stream refuses (1.5, 1.7, 1.8) ----
where = "queue 'sc-credit' in vhost '/'"
r = refusal(lambda ch: ch.basic_consume("sc-credit", lambda *a: None))
check("consume without qos: 406",
      r == (406, PF + "consumer prefetch count is not set for '%s'" % where),
      r)
r = refusal(lambda ch: (ch.basic_qos(prefetch_count=5),
                        ch.basic_consume("sc-credit", lambda *a: None,
                                         auto_ack=True)))
check("no_ack: 540", r == (540, NI + "automatic acknowledgement not "
                           "supported by stream queues " + where), r)
r = refusal(lambda ch: (ch.basic_qos(prefetch_count=5),
                        ch.basic_consume("sc-credit", lambda *a: None,
                                         arguments={"x-priority": 3})))
check("x-priority: 406", r == (406, PF + "invalid arg 'x-priority' for %s "
                               "of queue type rabbit_stream_queue" % where),
      r)
r = refusal(lambda ch: ch.basic_get("sc-credit"))
check("basic.get: 540", r == (540, NI + "basic.get not supported by stream "
                              "queues " + where), r)
r = refusal(lambda ch: ch.queue_purge("sc-credit"))
check("queue.purge: 540", r == (540, NI + "queue.purge not supported by "
                                "stream queues " + where), r)


def nack(ch):
    ch.basic_qos(prefetch_count=5)
    ch.basic_consume("sc-credit", lambda chx, m, p, b: chx.basic_nack(
        m.delivery_tag, requeue=True), arguments={"x-stream-offset": "first"})


if args.reference:
    r = refusal(nack)
    check("nack: 540", r == (540, NI + "basic.nack and basic.reject not "
                             "supported by stream queues " + where), r)
else:
    # Roost (P9): a nack or reject with requeue comes back to the same
    # consumer, redelivered; without requeue it is settled
    c = connect()
    ch = c.channel()
    ch.basic_qos(prefetch_count=1)
    seen = []

    def on(chx, m, p, b):
        o = p.headers["x-stream-offset"]
        seen.append((o, m.redelivered))
        if o == 1 and not m.redelivered:
            chx.basic_nack(m.delivery_tag, requeue=True)
        elif o == 2:
            chx.basic_reject(m.delivery_tag, requeue=False)
        else:
            chx.basic_ack(m.delivery_tag)
    ch.basic_consume("sc-credit", on, arguments={"x-stream-offset": "first"})
    deadline = time.time() + 5
    while len(seen) < 5 and time.time() < deadline:
        c.process_data_events(time_limit=0.1)
    c.close()
    check("nack with requeue: redelivered to it; reject: settled",
          seen[:5] == [(0, False), (1, False), (1, True), (2, False),
                       (3, False)], seen[:5])
check("the stream is still there after the refusals",
      offsets(consume("sc-credit", "first", want=20)) == list(range(20)))

# ---- consumers of a deleted stream are cancelled (1.12) ----
fresh("sc-del", n=1)
c = connect()
ch = c.channel()
ch.basic_qos(prefetch_count=5)
cancelled = []
ch.add_on_cancel_callback(lambda m: cancelled.append(m))
ch.basic_consume("sc-del", lambda *a: None,
                 arguments={"x-stream-offset": "first"})
c.process_data_events(time_limit=0.3)
o = connect()
o.channel().queue_delete("sc-del")
o.close()
c.process_data_events(time_limit=0.5)
c.close()
check("deleting a stream cancels its consumers", len(cancelled) == 1,
      cancelled)

if not args.reference:
    # ---- Roost only: headers kept, exact counts, retention ----
    hdrs = {"a": 1, "arr": [1, "two"], "t": {"k": "v"}, "s": "x"}
    fresh("sc-hdr", n=1, props=pika.BasicProperties(
        headers=hdrs, content_type="text/plain", message_id="id1"))
    got = consume("sc-hdr", "first", want=1)
    want = dict(hdrs, **{"x-stream-offset": 0})
    check("array and table headers kept, x-stream-offset added",
          len(got) == 1 and got[0][3] == want, got)

    fresh("sc-count", n=7)
    c = connect()
    n = c.channel().queue_declare("sc-count", passive=True).method
    c.close()
    check("declare-ok message_count exact at once", n.message_count == 7,
          n.message_count)
    if args.http:
        qj = http("GET", "/api/queues/%2F/sc-count")
        check("the API: type stream, messages exact",
              qj.get("type") == "stream" and qj.get("messages") == 7 and
              qj.get("messages_ready") == 7, {k: qj.get(k) for k in (
                  "type", "messages", "messages_ready")})

    # dead-lettering into a stream (P10): stored, with its x-death
    fresh("sc-dlx")
    c = connect()
    ch = c.channel()
    ch.queue_delete("sc-dlx-src")
    ch.queue_declare("sc-dlx-src", arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "sc-dlx",
        "x-message-ttl": 0})
    ch.basic_publish("", "sc-dlx-src", b"dead")
    c.close()
    time.sleep(0.3)
    got = consume("sc-dlx", "first", want=1)
    check("a dead letter lands in a stream with its x-death",
          len(got) == 1 and got[0][1] == b"dead" and
          got[0][3].get("x-death", [{}])[0].get("reason") == "expired", got)
    if args.http:
        for method, path, reason in (
                ("POST", "/api/queues/%2F/sc-dlx/get",
                 "540 basic.get not supported by stream queues queue "
                 "'sc-dlx' in vhost '/'"),
                ("DELETE", "/api/queues/%2F/sc-dlx/contents",
                 "queue.purge not supported by stream queues queue 'sc-dlx' "
                 "in vhost '/'")):
            try:
                req = urllib.request.Request(
                    "http://127.0.0.1:%d%s" % (args.http, path),
                    method=method, data=b'{"count":1,"ackmode":'
                    b'"ack_requeue_true","encoding":"auto"}'
                    if method == "POST" else None)
                req.add_header("Authorization", "Basic " + base64.b64encode(
                    b"guest:guest").decode())
                req.add_header("content-type", "application/json")
                urllib.request.urlopen(req, timeout=10)
                r = "no error"
            except urllib.error.HTTPError as e:
                r = (e.code, json.loads(e.read()))
            check("the API: %s %s refused with 400" % (method, path),
                  r == (400, {"error": "bad_request", "reason": reason}), r)

    fresh("sc-bytes", {"x-max-length-bytes": 1000}, n=25, body=b"x" * 100)
    got = consume("sc-bytes", "first", want=10)
    check("x-max-length-bytes 1000, 25 x 100 bytes: the last 10 kept",
          offsets(got) == list(range(15, 25)), offsets(got))

    fresh("sc-age", {"x-max-age": "1s"}, n=5)
    time.sleep(1.6)
    c = connect()
    n = c.channel().queue_declare("sc-age", passive=True).method
    c.close()
    check("x-max-age 1s: an idle stream is empty 1.6 s later",
          n.message_count == 0, n.message_count)
    got = consume("sc-age", "first", wait=0.3)
    check("and a consumer at first gets nothing", got == [], got)

    # paged messages (the broker runs with a small paging.window)
    N = 3000
    fresh("sc-paged", n=N, body=b"p%d" + b"." * 200)
    time.sleep(0.5)
    for k in range(2):
        got = consume("sc-paged", "first", prefetch=37, want=N)
        check("paged: %d messages from first in order, bodies intact (%d)"
              % (N, k), offsets(got) == list(range(N)) and
              all(g[1] == b"p%d" % i + b"." * 200
                  for i, g in enumerate(got)), len(got))
    got = consume("sc-paged", 1234, prefetch=10, want=20)
    check("paged: from 1234", offsets(got)[:20] == list(range(1234, 1254)),
          offsets(got)[:5])

# ---- filtering (P11: RabbitMQ 3.13's interface, exact) ----
if not args.reference:
    c = connect()
    ch = c.channel()
    ch.queue_delete("sc-filter")
    ch.queue_declare("sc-filter", durable=True, arguments=S)
    ch.confirm_delivery()
    values = ["red", "blue", None, "green", "red", None, "blue", "red"] * 25
    for i, v in enumerate(values):
        ch.basic_publish("", "sc-filter", b"f%d" % i, pika.BasicProperties(
            headers={"x-stream-filter-value": v} if v else {}))
    c.close()

    def want(accept, unfiltered=False):
        return [i for i, v in enumerate(values)
                if (v in accept) or (v is None and unfiltered)]
    for label, extra, expect in [
            ("a string", {"x-stream-filter": "red"}, want({"red"})),
            ("an array (any of them)", {"x-stream-filter": ["red", "green"]},
             want({"red", "green"})),
            ("with x-stream-match-unfiltered",
             {"x-stream-filter": "blue", "x-stream-match-unfiltered": True},
             want({"blue"}, True)),
            ("a value no message has", {"x-stream-filter": "violet"}, []),
    ]:
        got = consume("sc-filter", "first", prefetch=7,
                      want=len(expect) or None, wait=0.5, extra=extra)
        check("x-stream-filter %s: exactly its messages, in order, credit "
              "not taken by the others" % label, offsets(got) == expect,
              offsets(got)[:8])
    # a paged stream is filtered the same (paging.window=16)
    got = consume("sc-filter", 150, prefetch=3, want=len(
        [i for i in want({"green"}) if i >= 150]),
        extra={"x-stream-filter": "green"})
    check("x-stream-filter over paged messages from offset 150",
          offsets(got) == [i for i in want({"green"}) if i >= 150],
          offsets(got))
    for label, extra in [("an integer", {"x-stream-filter": 5}),
                         ("an empty array", {"x-stream-filter": []}),
                         ("an array with an integer",
                          {"x-stream-filter": ["red", 1]}),
                         ("an array of 65 (64 at most)",
                          {"x-stream-filter": ["v%d" % i
                                               for i in range(65)]}),
                         ("x-stream-match-unfiltered not a bool",
                          {"x-stream-filter": "red",
                           "x-stream-match-unfiltered": "yes"})]:
        def fn(ch, extra=extra):
            ch.basic_qos(prefetch_count=1)
            ch.basic_consume("sc-filter", lambda *a: None, arguments=extra)
        r = refusal(fn)
        check("x-stream-filter refused: %s (406)" % label,
              isinstance(r, tuple) and r[0] == 406 and
              r[1].startswith(PF + "invalid arg 'x-stream-"), r)

print("%d failed" % failed)
sys.exit(1 if failed else 0)
