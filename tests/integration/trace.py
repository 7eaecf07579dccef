# SPDX-License-Identifier: Apache-2.0
"""Tracing (pika): RabbitMQ's firehose, switched through the management
API, and W3C trace context headers kept intact on every path a message
takes. Run by trace.sh:

  trace.py --amqp P --http H firehose --dump FILE   # both brokers
  trace.py --amqp P --http H w3c-before             # roostd: publish
  trace.py --amqp P --http H w3c-after              # after a restart
  trace.py --amqp P --http H off-after-restart      # tracing is off
  trace.py --amqp P --http H jsonlog --log FILE     # one JSON a line
  trace.py compare ROOST.json REFERENCE.json

'firehose' with --reference runs against RabbitMQ 3.10 (its own vhost,
deleted at the end) and writes the copies it saw, normalised, to the
dump that 'compare' holds against roostd's. Prints one "PASS name" or
"FAIL name: why" per check; exit 1 on a FAIL.
"""
import argparse
import json
import re
import sys
import time

import pika

from checks import Api, check, done, q, until

VH = "rt-trace"
REFERENCE = False
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TS = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

# rabbit_trace.erl's header order.
PUBLISH_KEYS = ["exchange_name", "routing_keys", "properties", "node",
                "vhost", "connection", "channel", "user", "routed_queues"]
DELIVER_KEYS = ["exchange_name", "routing_keys", "properties", "node",
                "redelivered", "vhost", "connection", "channel", "user"]


def connect(port, vhost=VH):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, virtual_host=vhost, connection_attempts=1,
        blocked_connection_timeout=10))


def drain(ch, queue, want, timeout=5.0):
    """basic.get 'queue' until 'want' messages came (or the time is up):
    [(method, properties, body)]."""
    got = []
    end = time.time() + timeout
    while len(got) < want and time.time() < end:
        m = ch.basic_get(queue, auto_ack=True)
        if m[0] is None:
            time.sleep(0.05)
            continue
        got.append(m)
    # Anything more that is on its way.
    time.sleep(0.2 if REFERENCE else 0.05)
    while True:
        m = ch.basic_get(queue, auto_ack=True)
        if m[0] is None:
            return got
        got.append(m)


def w3c(extra=None):
    h = {"traceparent": TP, "tracestate": TS}
    h.update(extra or {})
    return h


def same_w3c(props, tp=TP):
    h = props.headers or {}
    return h.get("traceparent") == tp and h.get("tracestate") == TS


def setup_vhost(api):
    api.call("DELETE", "vhosts/" + q(VH))
    st, _ = api.call("PUT", "vhosts/" + q(VH), {"description": "tracing",
                                               "tags": "t1,t2"})
    check("the test vhost is made", st in (201, 204), st)
    api.call("PUT", "permissions/%s/guest" % q(VH),
             {"configure": ".*", "write": ".*", "read": ".*"})


def vhost_tracing(api):
    st, v = api.call("GET", "vhosts/" + q(VH))
    return v.get("tracing") if st == 200 else st


# ---- the firehose ----

def normalise(m):
    """A copy as the dump keeps it: what both brokers must agree on."""
    method, props, body = m
    h = json.loads(json.dumps(props.headers, default=repr))
    h["connection"] = re.sub(r":\d+", ":PORT", h.get("connection", ""))
    h["node"] = "NODE"
    ph = h.get("properties", {}).get("headers") or {}
    for d in ph.get("x-death", []):
        d["time"] = "TIME"
    own = {k: v for k, v in vars(props).items() if k != "headers"}
    return {"routing_key": method.routing_key, "exchange": method.exchange,
            "keys": list(props.headers.keys()), "headers": h,
            "props": own, "body": body.decode("latin-1")}


def firehose(api, amqp, dump):
    setup_vhost(api)
    check("tracing is off in a new vhost", vhost_tracing(api) is False,
          vhost_tracing(api))
    c = connect(amqp)
    ch = c.channel()
    # amq.rabbitmq.trace: topic, durable, internal.
    ch.exchange_declare("amq.rabbitmq.trace", "topic", passive=True)
    ch.exchange_declare("amq.rabbitmq.trace", "topic", durable=True,
                        internal=True)
    check("amq.rabbitmq.trace is a durable internal topic exchange", True)
    ch.queue_declare("tq", exclusive=True)
    ch.queue_bind("tq", "amq.rabbitmq.trace", "#")
    ch.queue_declare("work")
    ch.queue_declare("work2")
    ch.queue_declare("unread")
    ch.queue_declare("unread2")
    ch.exchange_declare("fx", "fanout")
    ch.queue_bind("work", "fx")
    ch.queue_bind("work2", "fx")
    ch.exchange_declare("dx", "direct")
    ch.queue_declare("dl-dst")
    ch.queue_declare("dl-src", arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dl-dst"})

    ch.basic_publish("", "work", b"before")
    check("off: nothing is traced", drain(ch, "tq", 0, 0.3) == [])

    st, _ = api.call("PUT", "vhosts/" + q(VH), {"tracing": "maybe"})
    check("a tracing value that is not a boolean: 400", st == 400, st)
    st, _ = api.call("PUT", "vhosts/" + q(VH),
                     {"tracing": True, "description": "tracing",
                      "tags": "t1,t2"})
    check("PUT tracing: true", st == 204, st)
    check("GET shows tracing: true", vhost_tracing(api) is True,
          vhost_tracing(api))
    ch.queue_purge("work")

    full = pika.BasicProperties(
        content_type="text/plain", content_encoding="gzip",
        headers=w3c({"n": 5, "CC": ["work2", "nope"]}), delivery_mode=2,
        priority=3, correlation_id="cid", reply_to="rt", expiration="60000",
        message_id="mid", timestamp=1764600000, type="ty", user_id="guest",
        app_id="app")
    ch.basic_publish("", "work", b"full", full)                   # 1 copy
    ch.basic_publish("fx", "k", b"fan")                           # 1
    ch.basic_publish("", "missing", b"nowhere")                   # 1
    ch.basic_publish("dx", "none", b"unroutable", mandatory=True)  # 1
    ch.basic_publish("", "unread", b"bcc", pika.BasicProperties(
        headers={"BCC": ["unread2"]}))                             # 1
    m = ch.basic_get("work", auto_ack=False)                       # 1
    ch.basic_nack(m[0].delivery_tag, requeue=True)
    m = ch.basic_get("work", auto_ack=True)                        # 1: again
    ch.basic_publish("", "dl-src", b"dead", pika.BasicProperties(
        message_id="d1", headers=w3c()))                           # 1
    m = ch.basic_get("dl-src", auto_ack=False)                     # 1
    ch.basic_reject(m[0].delivery_tag, requeue=False)
    until(lambda: ch.queue_declare("dl-dst", passive=True)
          .method.message_count == 1)   # RabbitMQ dead-letters later
    m = ch.basic_get("dl-dst", auto_ack=True)                      # 1
    # A consumer: basic.deliver.
    got = []
    tag = ch.basic_consume("work2", lambda c_, m_, p_, b_: got.append(b_),
                           auto_ack=True)                          # 2 (fan,
    until(lambda: (c.process_data_events(0.05), len(got) >= 2)[1], 3)
    ch.basic_cancel(tag)                                           # full CC)
    # A transaction: traced at basic.publish, even when rolled back.
    tx = c.channel()
    tx.tx_select()
    tx.basic_publish("", "work", b"rolled back")                   # 1
    tx.tx_rollback()
    tx.basic_publish("", "work", b"committed")                     # 1
    tx.tx_commit()
    tx.close()
    want = 14
    copies = drain(ch, "tq", want)
    check("every publish and delivery made one copy (%d)" % want,
          len(copies) == want, "%d: %s" % (len(copies), [
              (x[0].routing_key, x[2]) for x in copies]))
    for mth, props, body in copies:
        what = "%s %r" % (mth.routing_key, body)
        h = props.headers or {}
        kind = mth.routing_key.split(".")[0]
        check("%s: exchange amq.rabbitmq.trace" % what,
              mth.exchange == "amq.rabbitmq.trace", mth.exchange)
        check("%s: RabbitMQ's headers, in its order" % what,
              list(h) == (PUBLISH_KEYS if kind == "publish"
                          else DELIVER_KEYS), list(h))
        check("%s: no property but the headers" % what,
              props.delivery_mode is None and props.content_type is None
              and props.message_id is None, props)
        check("%s: connection named as RabbitMQ names it" % what,
              re.match(r"^127\.0\.0\.1:\d+ -> 127\.0\.0\.1:%d$" % amqp,
                       h.get("connection", "")), h.get("connection"))
        check("%s: vhost, user, channel" % what,
              h.get("vhost") == VH and h.get("user") == "guest" and
              h.get("channel") in (1, 2), h)
    by = {(x[0].routing_key, x[2]): x[1].headers for x in copies}
    p = by.get(("publish.", b"full"), {})
    check("publish.: routing keys with CC, routed_queues sorted",
          p.get("routing_keys") == ["work", "work2", "nope"] and
          p.get("routed_queues") == ["nope", "work", "work2"], p)
    pp = p.get("properties", {})
    check("publish.: every property, last first",
          list(pp) == ["app_id", "user_id", "type", "timestamp",
                       "message_id", "expiration", "reply_to",
                       "correlation_id", "priority", "delivery_mode",
                       "headers", "content_encoding", "content_type"] and
          pp.get("timestamp") == 1764600000 and pp.get("priority") == 3,
          pp)
    check("publish.: traceparent and tracestate in the properties",
          pp.get("headers", {}).get("traceparent") == TP and
          pp.get("headers", {}).get("tracestate") == TS, pp)
    b = by.get(("publish.", b"bcc"), {})
    check("publish.: BCC among the routing keys, not in the headers",
          b.get("routing_keys") == ["unread", "unread2"] and
          b.get("routed_queues") == ["unread", "unread2"] and
          "BCC" not in b.get("properties", {}).get("headers", {}), b)
    check("publish.fx: routed_queues of a fanout",
          by.get(("publish.fx", b"fan"), {}).get("routed_queues") ==
          ["work", "work2"], by.get(("publish.fx", b"fan")))
    check("publish.dx: unroutable, routed_queues empty",
          by.get(("publish.dx", b"unroutable"), {}).get("routed_queues")
          == [], by.get(("publish.dx", b"unroutable")))
    reds = sorted(x[1].headers.get("redelivered") for x in copies
                  if x[0].routing_key == "deliver.work")
    check("deliver.work: basic.get-ok, then redelivered 1", reds == [0, 1],
          reds)
    d = by.get(("deliver.dl-dst", b"dead"), {})
    dh = d.get("properties", {}).get("headers", {})
    check("deliver. of a dead-lettered copy: its exchange, key, x-death "
          "and trace context", d.get("exchange_name") == "" and
          d.get("routing_keys") == ["dl-dst"] and
          dh.get("x-death", [{}])[0].get("reason") == "rejected" and
          dh.get("traceparent") == TP, d)
    check("a rolled back publish was traced, at basic.publish",
          ("publish.", b"rolled back") in by and
          ("publish.", b"committed") in by, sorted(by))

    # Off again: nothing more.
    st, _ = api.call("PUT", "vhosts/" + q(VH), {"tracing": False,
                                                "description": "tracing"})
    ch.basic_publish("", "work", b"after")
    ch.basic_get("work", auto_ack=True)
    check("tracing: false stops the copies",
          st == 204 and vhost_tracing(api) is False and
          drain(ch, "tq", 0, 0.3) == [], st)
    # Publishing to the firehose is refused: it is internal.
    x = c.channel()
    try:
        x.basic_publish("amq.rabbitmq.trace", "publish.x", b"no")
        x.queue_declare("work", passive=True)
        check("publish to amq.rabbitmq.trace refused", False, "accepted")
    except pika.exceptions.ChannelClosedByBroker as e:
        check("publish to amq.rabbitmq.trace refused (403)",
              e.reply_code == 403, e)
    c.close()
    with open(dump, "w") as f:
        json.dump(sorted((normalise(m) for m in copies),
                         key=lambda r: (r["routing_key"], r["body"],
                                        json.dumps(r, sort_keys=True))),
                  f, indent=1, sort_keys=True)
    if REFERENCE:
        api.call("DELETE", "vhosts/" + q(VH))


def compare(ours, theirs):
    a, b = json.load(open(ours)), json.load(open(theirs))
    check("as many copies as RabbitMQ's (%d)" % len(b), len(a) == len(b),
          "%d against %d" % (len(a), len(b)))
    for x, y in zip(a, b):
        what = "%s %r" % (y["routing_key"], y["body"])
        for k in x:
            check("%s: %s as RabbitMQ's" % (what, k), x[k] == y[k],
                  "%s\n   against %s" % (json.dumps(x[k], sort_keys=True),
                                         json.dumps(y[k], sort_keys=True)))


# ---- W3C trace context, end to end ----

def w3c_before(api, amqp):
    setup_vhost(api)
    c = connect(amqp)
    ch = c.channel()
    props = pika.BasicProperties(headers=w3c({"k": "v"}))
    # Plain delivery, and requeue.
    ch.queue_declare("w-plain")
    ch.basic_publish("", "w-plain", b"x", props)
    m = ch.basic_get("w-plain")
    check("delivery keeps traceparent and tracestate", same_w3c(m[1]),
          m[1].headers)
    ch.basic_nack(m[0].delivery_tag, requeue=True)
    m = ch.basic_get("w-plain", auto_ack=True)
    check("a requeued delivery keeps them", m[0].redelivered and
          same_w3c(m[1]), m[1].headers)
    # Dead-lettering: the dead-lettered copy.
    ch.queue_declare("w-dst")
    ch.queue_declare("w-src", arguments={"x-dead-letter-exchange": "",
                                         "x-dead-letter-routing-key": "w-dst",
                                         "x-message-ttl": 50})
    ch.basic_publish("", "w-src", b"x", props)
    ok = until(lambda: ch.queue_declare("w-dst", passive=True)
               .method.message_count == 1)
    m = ch.basic_get("w-dst", auto_ack=True)
    check("the dead-lettered copy keeps them (expired)", ok and
          same_w3c(m[1]) and "x-death" in m[1].headers, m[1].headers)
    # A delivery limit re-encodes the header (x-delivery-count).
    ch.queue_declare("w-limit", arguments={"x-delivery-limit": 5})
    ch.basic_publish("", "w-limit", b"x", props)
    m = ch.basic_get("w-limit", auto_ack=True)
    check("with a delivery count added they stay",
          same_w3c(m[1]) and "x-delivery-count" in m[1].headers,
          m[1].headers)
    # BCC removed at publish re-encodes the header too.
    ch.basic_publish("", "w-plain", b"x", pika.BasicProperties(
        headers=w3c({"BCC": ["w-plain"]})))
    m = ch.basic_get("w-plain", auto_ack=True)
    check("with BCC removed they stay", same_w3c(m[1]) and
          "BCC" not in m[1].headers, m[1].headers)
    # The delayed exchange.
    ch.exchange_declare("w-delay", "x-delayed-message",
                        arguments={"x-delayed-type": "direct"})
    ch.queue_declare("w-delayed")
    ch.queue_bind("w-delayed", "w-delay", "k")
    ch.basic_publish("w-delay", "k", b"x", pika.BasicProperties(
        headers=w3c({"x-delay": 100})))
    ok = until(lambda: ch.queue_declare("w-delayed", passive=True)
               .method.message_count == 1)
    m = ch.basic_get("w-delayed", auto_ack=True)
    check("a delayed message keeps them", ok and same_w3c(m[1]),
          m[1].headers if ok else "never came")
    # Direct reply-to: the request's reply_to is rewritten (the header
    # re-encoded), the reply goes straight to the requester.
    ch.queue_declare("w-rpc")
    replies = []
    ch.basic_consume("amq.rabbitmq.reply-to",
                     lambda c_, m_, p_, b_: replies.append(p_), auto_ack=True)
    ch.basic_publish("", "w-rpc", b"req", pika.BasicProperties(
        reply_to="amq.rabbitmq.reply-to", headers=w3c()))
    m = ch.basic_get("w-rpc", auto_ack=True)
    check("a request with direct reply-to keeps them",
          same_w3c(m[1]) and m[1].reply_to.startswith(
              "amq.rabbitmq.reply-to."), m[1])
    tp2 = TP.replace("b7ad", "c8be")
    ch.basic_publish("", m[1].reply_to, b"rep", pika.BasicProperties(
        headers={"traceparent": tp2, "tracestate": TS}))
    until(lambda: (c.process_data_events(0.05), replies)[1], 3)
    check("the reply keeps them", replies and same_w3c(replies[0], tp2),
          replies)
    # Paged to disk, and (w3c-after) recovered after a restart: each
    # message its own traceparent.
    ch.queue_declare("w-durable", durable=True)
    for i in range(300):
        ch.basic_publish("", "w-durable", b"p%d" % i, pika.BasicProperties(
            delivery_mode=2, headers=w3c({"traceparent": tp_of(i)})))
    c.close()


def tp_of(i):
    return "00-%032x-%016x-01" % (i + 1, i + 1)


def w3c_after(api, amqp):
    c = connect(amqp)
    ch = c.channel()
    n = ch.queue_declare("w-durable", durable=True,
                         passive=True).method.message_count
    bad = []
    for i in range(n):
        m = ch.basic_get("w-durable", auto_ack=True)
        if m[0] is None or not same_w3c(m[1], tp_of(i)) or \
                m[1].headers.get("traceparent") != tp_of(i):
            bad.append((i, m[1].headers if m[0] else None))
    check("300 persistent messages, paged and recovered after a restart, "
          "keep each its own traceparent and tracestate",
          n == 300 and not bad, "%d messages, wrong: %s" % (n, bad[:3]))
    c.close()


def off_after_restart(api, amqp):
    check("after a restart tracing is off, as in RabbitMQ",
          vhost_tracing(api) is False, vhost_tracing(api))
    st, v = api.call("GET", "vhosts/" + q(VH))
    check("the PUT that switched tracing kept description and tags",
          st == 200 and v.get("description") == "tracing" and
          v.get("tags") == ["t1", "t2"], v)


# ---- JSON log lines ----

def jsonlog(api, amqp, log):
    setup_vhost(api)
    c = connect(amqp)
    ch = c.channel()
    ch.queue_declare("j-limit", arguments={"x-delivery-limit": 0})
    ch.basic_publish("", "j-limit", b"poison",
                     pika.BasicProperties(message_id="poison-1"))
    m = ch.basic_get("j-limit")
    ch.basic_nack(m[0].delivery_tag, requeue=True)
    # Its own channel: the consumer timer of one is armed for its oldest
    # delivery (j-limit's, under the default 30 minutes).
    slow = c.channel()
    slow.queue_declare("j-slow", arguments={"x-consumer-timeout": 200})
    slow.basic_publish("", "j-slow", b"slow",
                       pika.BasicProperties(message_id="slow-1"))
    slow.basic_consume("j-slow", lambda *a: None)
    end = time.time() + 5
    try:
        while time.time() < end:
            c.process_data_events(0.05)
            slow.queue_declare("j-slow", passive=True)
    except (pika.exceptions.ChannelClosedByBroker,
            pika.exceptions.ChannelWrongStateError):
        pass
    ch2 = c.channel()
    numbers = (slow.channel_number, ch2.channel_number)
    try:
        ch2.queue_declare("j-missing", passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        pass
    c.close()
    lines, bad = [], []

    def read():
        del lines[:], bad[:]
        for raw in open(log, encoding="utf-8", errors="replace"):
            try:
                lines.append(json.loads(raw))
            except ValueError:
                bad.append(raw)
        return any("client closed the connection" in x.get("msg", "")
                   for x in lines)
    until(read, 3)
    check("every log line is one JSON object (%d lines)" % len(lines),
          lines and not bad and all(isinstance(x, dict) for x in lines),
          bad[:2])
    check("each has time, level and msg", all(
        re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\+00:00$",
                 x.get("time", "")) and
        x.get("level") in ("debug", "info", "warning", "error") and
        isinstance(x.get("msg"), str) for x in lines), lines[:2])
    name = re.compile(r"^127\.0\.0\.1:\d+ -> 127\.0\.0\.1:%d$" % amqp)

    def find(text):
        return [x for x in lines if text in x.get("msg", "")]
    for text, what, keys in [
            ("accepted from", "connection accepted", {}),
            ("opened vhost", "connection opened", {"vhost": VH,
                                                   "user": "guest"}),
            ("client closed the connection", "connection closed",
             {"vhost": VH}),
            ("NOT_FOUND - no queue 'j-missing'", "channel error",
             {"channel": numbers[1], "vhost": VH, "user": "guest"}),
            ("timed out waiting for delivery acknowledgement",
             "consumer timeout", {"channel": numbers[0], "queue": "j-slow",
                                  "message_id": "slow-1"}),
            ("(delivery_limit, after 1 deliveries)", "delivery limit",
             {"queue": "j-limit", "vhost": VH, "message_id": "poison-1"})]:
        got = find(text)
        x = got[0] if got else {}
        ok = got and all(x.get(k) == v for k, v in keys.items())
        if what != "delivery limit":
            ok = ok and name.match(x.get("connection", ""))
        check("JSON log: %s carries its ids" % what, ok,
              x or "no line with %r" % text)


def main():
    global REFERENCE
    ap = argparse.ArgumentParser()
    ap.add_argument("--amqp", type=int)
    ap.add_argument("--http", type=int)
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--dump")
    ap.add_argument("--log")
    ap.add_argument("what")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    REFERENCE = a.reference
    if a.what == "compare":
        compare(*a.files)
        done()
    api = Api(a.http)
    {"firehose": lambda: firehose(api, a.amqp, a.dump),
     "w3c-before": lambda: w3c_before(api, a.amqp),
     "w3c-after": lambda: w3c_after(api, a.amqp),
     "off-after-restart": lambda: off_after_restart(api, a.amqp),
     "jsonlog": lambda: jsonlog(api, a.amqp, a.log)}[a.what]()
    done()


if __name__ == "__main__":
    main()
