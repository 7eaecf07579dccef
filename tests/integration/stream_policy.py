# SPDX-License-Identifier: Apache-2.0
"""Policies on streams (streams-spec.md 1.10, P4; issue 24) and
queue.delete's flags on a stream (1.12, P12), with pika and the
management API: which policy applies to a stream (a policy or operator
policy holding a key streams do not take does not, and the next one
may), the policy's value winning over the stream's argument, retention
acting at once when a policy is set, changed or cleared, and
queue.delete with if_empty or if_unused refused as for any queue.

    stream_policy.py --port PORT --http HTTP_PORT [--reference]
    stream_policy.py --port PORT --http HTTP_PORT --phase before-restart
    stream_policy.py --port PORT --http HTTP_PORT --phase after-restart

--reference runs the cases RabbitMQ 3.10.8 answers as Roost does against
the reference node, and checks that it deletes a stream whatever the
flags (Roost's deliberate differences: docs/compatibility.md,
"Streams"). The restart phases check that a policy's max-age, not the
deadline the message came with, applies after a restart. Prints
"PASS name" / "FAIL name: why".
"""
import argparse
import time

import pika

from checks import Api, check, done, drain, q, until

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--http", type=int, required=True)
ap.add_argument("--reference", action="store_true")
ap.add_argument("--phase")
args = ap.parse_args()

api = Api(args.http)
S = {"x-queue-type": "stream"}
PF = "PRECONDITION_FAILED - "


def connect():
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", args.port, blocked_connection_timeout=30))


def fresh(name, arguments=None, n=0, body=b"m%d"):
    """A new stream 'name' with 'n' messages, one at a time with confirms
    (one chunk each on RabbitMQ)."""
    c = connect()
    ch = c.channel()
    ch.queue_delete(name)
    ch.queue_declare(name, durable=True,
                     arguments=dict(S, **(arguments or {})))
    ch.confirm_delivery()
    for i in range(n):
        ch.basic_publish("", name, body % i if b"%d" in body else body)
    c.close()


def classic(name):
    c = connect()
    ch = c.channel()
    ch.queue_delete(name)
    ch.queue_declare(name)
    c.close()


def offsets(name, want=None, wait=0.7):
    """The offsets a consumer of 'name' from "first" gets."""
    c = connect()
    ch = c.channel()
    ch.basic_qos(prefetch_count=200)
    got = []

    def on(chx, m, p, b):
        got.append((p.headers or {}).get("x-stream-offset"))
        chx.basic_ack(m.delivery_tag)
    ch.basic_consume(name, on, arguments={"x-stream-offset": "first"})
    drain(c, got, want, wait)
    c.close()
    return got


def put(name, pattern, definition, priority=0, kind="policies"):
    st, got = api.call("PUT", "%s/%%2F/%s" % (kind, q(name)), {
        "pattern": pattern, "definition": definition, "priority": priority,
        "apply-to": "queues"})
    if st not in (201, 204):
        raise RuntimeError("PUT %s %s: %s %s" % (kind, name, st, got))


def clear(name, kind="policies"):
    api.call("DELETE", "%s/%%2F/%s" % (kind, q(name)))


def queue(name):
    st, got = api.call("GET", "queues/%2F/" + q(name))
    return got if st == 200 else {}


def applied(name, want, key="policy"):
    """Whether the API shows 'want' as the queue's (operator) policy,
    polled: RabbitMQ shows a classic queue's with its stats, every 5 s."""
    return until(lambda: queue(name).get(key) == want, 12.0)


def messages(name):
    return queue(name).get("messages")


def refusal(fn):
    """The (code, text) a channel close gives 'fn(ch)', or "no error"."""
    c = connect()
    ch = c.channel()
    try:
        fn(ch)
        r = "no error"
    except pika.exceptions.ChannelClosedByBroker as e:
        r = (e.reply_code, e.reply_text)
    if c.is_open:
        c.close()
    return r


if args.phase != "after-restart":
    for kind in ("policies", "operator-policies"):
        st, got = api.call("GET", kind + "/%2F")
        for p in got if st == 200 else []:
            if p["name"].startswith("sp-"):
                clear(p["name"], kind)
if args.phase == "before-restart":
    # a message that came under x-max-age 1s, then a policy of 1h
    fresh("sp-restart", {"x-max-age": "1s"}, n=5)
    put("sp-restart", "^sp-restart$", {"max-age": "1h"})
    time.sleep(1.3)
    check("before restart: max-age 1h by policy over x-max-age 1s",
          messages("sp-restart") == 5, messages("sp-restart"))
    done()
if args.phase == "after-restart":
    time.sleep(0.3)
    check("after restart: the policy's max-age, not the deadline stored",
          messages("sp-restart") == 5 and
          offsets("sp-restart", want=5) == list(range(5)),
          messages("sp-restart"))
    clear("sp-restart")
    check("after restart: the policy cleared, x-max-age 1s lets them go",
          messages("sp-restart") == 0, messages("sp-restart"))
    done()

# ---- which policy applies (rabbit_queue_type:is_policy_applicable/2) ----
# Each case changes the API's answer, so that RabbitMQ's (its stats, every
# 5 s) cannot pass by being late.
fresh("sp-app-s")
classic("sp-app-c")
put("sp-app-lo", "^sp-app", {"max-age": "2h"}, priority=1)
check("a policy of max-age applies to a stream",
      applied("sp-app-s", "sp-app-lo"), queue("sp-app-s").get("policy"))


def holding(k, v):
    """Whether a higher policy that also holds k: v applies to sp-app-s
    (None: the higher one without it did not apply first)."""
    put("sp-app-hi", "^sp-app", {"max-age": "1h"}, priority=10)
    if not applied("sp-app-s", "sp-app-hi"):
        return None
    put("sp-app-hi", "^sp-app", {"max-age": "1h", k: v}, priority=10)
    return not applied("sp-app-s", "sp-app-lo")


# rabbit_stream_queue:capabilities/0's unsupported_policies (those
# Roost's policies take); a few against RabbitMQ, where each takes 10 s
UNSUPPORTED = [
    ("message-ttl", 60000), ("max-length", 10), ("overflow", "drop-head"),
    ("dead-letter-exchange", "dlx")]
if not args.reference:
    UNSUPPORTED += [
        ("expires", 60000), ("dead-letter-routing-key", "k"),
        ("queue-mode", "lazy"), ("delivery-limit", 3),
        ("queue-master-locator", "client-local"),
        ("dead-letter-strategy", "at-least-once"),
        ("max-in-memory-length", 5), ("max-in-memory-bytes", 5000),
        ("requeue-delay", 1000), ("requeue-delay-max", 1000),
        ("roost-delivery-limit", 3)]
for k, v in UNSUPPORTED:
    r = holding(k, v)
    check("a policy holding %s does not apply to a stream, the next does"
          % k, r is False, r)
check("and the next one's definition is the effective one",
      queue("sp-app-s").get("effective_policy_definition") ==
      {"max-age": "2h"}, queue("sp-app-s").get("effective_policy_definition"))
# what streams do not refuse applies, whether it means anything or not
for k, v in [("max-length-bytes", 1000000),
             ("stream-max-segment-size-bytes", 1000000),
             ("queue-leader-locator", "balanced"),
             ("initial-cluster-size", 1), ("queue-version", 2),
             ("alternate-exchange", "ae")]:
    put("sp-app-hi", "^sp-app", {"max-age": "1h", "message-ttl": 1},
        priority=10)
    applied("sp-app-s", "sp-app-lo")
    put("sp-app-hi", "^sp-app", {"max-age": "1h", k: v}, priority=10)
    check("a policy holding %s applies to a stream" % k,
          applied("sp-app-s", "sp-app-hi"), queue("sp-app-s").get("policy"))
clear("sp-app-hi")
clear("sp-app-lo")
check("no policy left: policy null", applied("sp-app-s", None),
      queue("sp-app-s").get("policy"))
put("sp-app-op", "^sp-app", {"max-length": 5}, kind="operator-policies")
check("an operator policy with max-length: not the stream's",
      applied("sp-app-c", "sp-app-op", "operator_policy") and
      queue("sp-app-s").get("operator_policy") is None,
      queue("sp-app-s").get("operator_policy"))
put("sp-app-op", "^sp-app", {"max-length-bytes": 1000000},
    kind="operator-policies")
check("an operator policy with max-length-bytes only: the stream's",
      applied("sp-app-s", "sp-app-op", "operator_policy"),
      queue("sp-app-s").get("operator_policy"))
clear("sp-app-op", "operator-policies")

# a policy that does not apply changes nothing: the stream keeps its
# messages under expires and max-length
fresh("sp-na", n=10)
put("sp-na", "^sp-na$", {"expires": 500, "max-length": 1,
                         "max-length-bytes": 10})
time.sleep(1.0)
got = offsets("sp-na", want=10)
check("expires 500 and max-length 1 in a policy: the stream stays, whole",
      got == list(range(10)), got)
clear("sp-na")

# ---- the policy's value wins over the argument (policy_precedence) ----
# 500-byte segments, so that RabbitMQ's retention has segments to drop
put("sp-win", "^sp-win$", {"max-length-bytes": 1000000})
fresh("sp-win", {"x-max-length-bytes": 1000,
                 "x-stream-max-segment-size-bytes": 500}, n=30,
      body=b"x" * 100)
# (RabbitMQ's offsets have gaps: messages are counted)
got = offsets("sp-win", want=30)
check("argument 1000 bytes, policy 1000000: all 30 kept", len(got) == 30,
      len(got))
put("sp-lose", "^sp-lose$", {"max-length-bytes": 1000})
fresh("sp-lose", {"x-max-length-bytes": 1000000,
                  "x-stream-max-segment-size-bytes": 500}, n=30,
      body=b"x" * 100)
got = offsets("sp-lose", want=30)
check("argument 1000000 bytes, policy 1000: the oldest let go",
      0 < len(got) < 30, len(got))
if not args.reference:
    check("and exactly the newest 10 of 100 bytes kept",
          got == list(range(20, 30)), got)
for name in ("sp-win", "sp-lose"):
    clear(name)

if not args.reference:
    # ---- applying at once (P4: message granularity, exact counts) ----
    fresh("sp-now", n=100, body=b"y" * 1000)
    put("sp-now", "^sp-now$", {"max-length-bytes": 10000})
    check("max-length-bytes 10000 set on a stream of 100 KB: 10 left at "
          "once", messages("sp-now") == 10, messages("sp-now"))
    got = offsets("sp-now", want=10)
    check("and they are the newest", got == list(range(90, 100)), got)
    put("sp-now", "^sp-now$", {"max-length-bytes": 5000})
    check("changed to 5000: 5 left at once", messages("sp-now") == 5,
          messages("sp-now"))
    put("sp-now-op", "^sp-now$", {"max-length-bytes": 2000},
        kind="operator-policies")
    check("an operator policy's smaller 2000 beside it: 2 left",
          messages("sp-now") == 2, messages("sp-now"))
    clear("sp-now-op", "operator-policies")
    clear("sp-now")
    c = connect()
    ch = c.channel()
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", "sp-now", b"y" * 1000)
    c.close()
    check("cleared: nothing comes back, nothing more is let go",
          messages("sp-now") == 22, messages("sp-now"))

    fresh("sp-age", n=5)
    time.sleep(1.1)
    put("sp-age", "^sp-age$", {"max-age": "1s"})
    check("max-age 1s set on messages 1.1 s old: gone at once",
          messages("sp-age") == 0, messages("sp-age"))
    clear("sp-age")

    fresh("sp-age2", {"x-max-age": "1s"}, n=5)
    put("sp-age2", "^sp-age2$", {"max-age": "1h"})
    time.sleep(1.3)
    check("x-max-age 1s, policy 1h: kept past 1 s",
          messages("sp-age2") == 5, messages("sp-age2"))
    put("sp-age2", "^sp-age2$", {"max-age": "1h", "message-ttl": 1000})
    check("the policy changed to one a stream does not take: x-max-age 1s "
          "again, and they go at once", messages("sp-age2") == 0,
          messages("sp-age2"))
    clear("sp-age2")

    fresh("sp-age3", n=3)
    put("sp-age3", "^sp-age3$", {"max-age": "1s"})
    c = connect()
    ch = c.channel()
    ch.confirm_delivery()
    ch.basic_publish("", "sp-age3", b"late")
    c.close()
    check("max-age 1s by policy: idle messages go on time",
          messages("sp-age3") == 4 and until(
              lambda: messages("sp-age3") == 0, 3.0),
          messages("sp-age3"))
    clear("sp-age3")

# ---- queue.delete's flags (P12) ----
fresh("sp-del", n=3)
c = connect()
ch = c.channel()
ch.basic_qos(prefetch_count=5)
ch.basic_consume("sp-del", lambda *a: None,
                 arguments={"x-stream-offset": "first"})
c.process_data_events(time_limit=0.3)
r_unused = refusal(lambda ch: ch.queue_delete("sp-del", if_unused=True))
c.close()
if args.reference:
    fresh("sp-del", n=3)    # RabbitMQ deleted it: a stream of 3 again
r_empty = refusal(lambda ch: ch.queue_delete("sp-del", if_empty=True))
if args.reference:
    # RabbitMQ 3.10.8 ignores both flags on a stream
    check("RabbitMQ: if_unused with a consumer deletes the stream anyway",
          r_unused == "no error", r_unused)
    check("RabbitMQ: if_empty on a stream deletes it anyway",
          r_empty == "no error", r_empty)
else:
    where = "queue 'sp-del' in vhost '/'"
    check("if_unused on a stream with a consumer: 406 in use",
          r_unused == (406, PF + where + " in use"), r_unused)
    check("if_empty on a stream of 3: 406 not empty",
          r_empty == (406, PF + where + " not empty"), r_empty)
    check("and the stream is still there, whole",
          offsets("sp-del", want=3) == [0, 1, 2])
    fresh("sp-del")
    r = refusal(lambda ch: ch.queue_delete("sp-del", if_empty=True,
                                           if_unused=True))
    check("if_empty and if_unused on an empty, unused stream: deleted",
          r == "no error" and queue("sp-del") == {}, r)

done()
