# SPDX-License-Identifier: Apache-2.0
"""The checks ../shared/streams-spec.md names for streams, each under its
name: R7 and R11 (RabbitMQ's behaviour: also run with --reference against
RabbitMQ 3.10.8), B1 and B14 (beyond it: Roost only). B13 is in
stream_policy.py.

    stream_named.py --port PORT [--http HTTP_PORT] [--reference]
                    [--phase all|publish|verify]

R7 is in two phases around a restart: "publish" stores a persistent and
a transient message, "verify" (after the broker restarted) finds both.
"""
import argparse
import datetime
import time

import pika

from checks import Api, check, connect, done, drain, q, read_stream, until

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--http", type=int)
ap.add_argument("--reference", action="store_true")
ap.add_argument("--phase", default="all",
                choices=["all", "publish", "verify"])
args = ap.parse_args()
S = {"x-queue-type": "stream"}


def fresh(name, arguments=None):
    c = connect(args.port)
    ch = c.channel()
    ch.queue_delete(name)
    ch.queue_declare(name, durable=True, arguments=dict(S, **(arguments or {})))
    ch.confirm_delivery()
    return c, ch


def seek(name, offset, want, prefetch=50):
    """[(offset, body)] from x-stream-offset 'offset', acking each."""
    c = connect(args.port)
    ch = c.channel()
    ch.basic_qos(prefetch_count=prefetch)
    got = []

    def on(chx, m, p, b):
        got.append(((p.headers or {}).get("x-stream-offset"), b))
        chx.basic_ack(m.delivery_tag)
    ch.basic_consume(name, on, arguments={"x-stream-offset": offset})
    drain(c, got, want, wait=1.5)
    # then to the end: pika nacks at close what it still buffers, and
    # RabbitMQ answers a nack on a stream with 540 (streams-spec.md)
    drain(c, got, None, wait=0.3)
    c.close()
    return got


# ---- R7: persistent and transient messages both stored ----
if args.phase in ("all", "publish"):
    c, ch = fresh("sn-r7")
    ch.basic_publish("", "sn-r7", b"persistent",
                     pika.BasicProperties(delivery_mode=2))
    ch.basic_publish("", "sn-r7", b"transient")
    c.close()
if args.phase in ("all", "verify"):
    got = [b for _, b in read_stream(args.port, "sn-r7", want=2)]
    check("R7: a persistent and a transient message are both stored%s" %
          (" (after a restart)" if args.phase == "verify" else ""),
          got == [b"persistent", b"transient"], got)
if args.phase != "all":
    done()

# ---- R11: a seek by offset or time lands where it should ----
# 300 messages of 1 KiB over 64 KiB segments (several segments, several
# index blocks): a seek to offset o delivers exactly what a read from
# first holds from the first offset at or after o. (RabbitMQ's offsets
# have gaps where a segment starts; Roost's are contiguous.)
c, ch = fresh("sn-r11", {"x-stream-max-segment-size-bytes": 65536})
for i in range(300):
    ch.basic_publish("", "sn-r11", b"%04d" % i + b"." * 1020)
c.close()
whole = read_stream(args.port, "sn-r11", want=300)
if not args.reference:
    check("R11: 300 messages at offsets 0..299",
          [o for o, _ in whole] == list(range(300)),
          [o for o, _ in whole][:5])
last = whole[-1][0] if whole else 0
for o in [0, 1, 63, 64, 65, 150, 255, 256, 257, last]:
    tail = [w for w in whole if w[0] >= o][:20]
    got = seek("sn-r11", o, len(tail))[:20]
    check("R11: a seek to offset %d delivers from the first message at or "
          "after it" % o, got == tail and got != [],
          (got[:2], tail[:2]))

# Time: 20 messages, 1.5 s, then 20 more: a timestamp between the two
# delivers the second batch from its first message.
c, ch = fresh("sn-r11t")
for i in range(20):
    ch.basic_publish("", "sn-r11t", b"a%d" % i)
time.sleep(1.5)
t = int(time.time())
time.sleep(1.1)
for i in range(20):
    ch.basic_publish("", "sn-r11t", b"b%d" % i)
c.close()
at = datetime.datetime.utcfromtimestamp
got = [b for _, b in seek("sn-r11t", at(t), 20)]
check("R11: a seek to a time between two batches delivers the second from "
      "its first message", got == [b"b%d" % i for i in range(20)], got[:3])
got = [b for _, b in seek("sn-r11t", at(t - 3600), 40)]
check("R11: a time before the first message delivers from the first",
      got[:1] == [b"a0"] and len(got) == 40, got[:3])

if args.reference:
    done()

# ---- B1: credit exactly the prefetch count, on a burst too ----
# RabbitMQ's credit is per chunk: a prefetch of 5 over a burst of 500
# unconfirmed publishes delivered 33.
c = connect(args.port)
ch = c.channel()
ch.queue_delete("sn-b1")
ch.queue_declare("sn-b1", durable=True, arguments=S)
for i in range(500):
    ch.basic_publish("", "sn-b1", b"burst%d" % i)
ch.confirm_delivery()   # the burst was sent unconfirmed; now wait
ch.basic_publish("", "sn-b1", b"end")
c.close()
c = connect(args.port)
ch = c.channel()
ch.basic_qos(prefetch_count=5)
got = []
ch.basic_consume("sn-b1", lambda chx, m, p, b: got.append(m.delivery_tag),
                 arguments={"x-stream-offset": "first"})
drain(c, got, None, wait=1.0)
check("B1: a prefetch of 5 over a burst of 500: exactly 5 deliveries",
      len(got) == 5, len(got))
c.close()

# ---- B14: filtering exact; what a filter passes over is not delivered,
# takes no credit, and is not counted as delivered ----
c, ch = fresh("sn-b14")
for i in range(40):
    v = "red" if i % 4 == 0 else "blue"
    ch.basic_publish("", "sn-b14", b"%s%d" % (v.encode(), i),
                     pika.BasicProperties(headers={"x-stream-filter-value": v}))
c.close()
c = connect(args.port)
ch = c.channel()
ch.basic_qos(prefetch_count=3)
got = []


def on_red(chx, m, p, b):
    got.append(b)
    chx.basic_ack(m.delivery_tag)


ch.basic_consume("sn-b14", on_red, arguments={"x-stream-offset": "first",
                                              "x-stream-filter": "red"})
drain(c, got, 10, wait=1.5)
drain(c, got, None, wait=0.3)
check("B14: x-stream-filter red: exactly the 10 red messages, in order, "
      "with a prefetch of 3", got == [b"red%d" % i for i in range(0, 40, 4)],
      got[:4])
if args.http:
    api = Api(args.http)

    def delivered():
        s, body = api.call("GET", "queues/%2F/" + q("sn-b14"))
        ms = body.get("message_stats", {}) if s == 200 else {}
        return ms.get("deliver", 0) + ms.get("deliver_no_ack", 0)
    until(lambda: delivered() >= 10, 10.0)
    n = delivered()
    time.sleep(0.5)
    check("B14: the queue's deliver count is the 10 delivered, not the 40 "
          "read", n == 10 and delivered() == 10, n)
c.close()

done()
