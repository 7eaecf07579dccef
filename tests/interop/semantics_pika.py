#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Queue semantics from issue 11 with pika, against a broker on
127.0.0.1:PORT (roostd, or the reference RabbitMQ: the same expectations,
recorded from it).

Priority queues (x-max-priority): higher priorities first and FIFO within
one, no priority counting as 0 and one above the maximum as the maximum,
the property delivered as published; requeue back to its place within its
priority; a consumer with prefetch 1 taking a higher priority published
meanwhile first; x-max-length across priorities (drop-head drops the
highest priority's head); per-level TTL.

Delayed messages (x-delayed-message, x-delayed-type topic, x-delay):
routed when due, in due order, none early, with x-delay negated; the
inner type's routing; no basic.return for a held mandatory publish (one
that routes at once is returned as usual). The reference RabbitMQ has no
delayed-message plugin: against a broker this script did not get from
run.sh (no ROOSTD_LOG), that section is skipped, and says so.
Usage: semantics_pika.py PORT
"""
import os
import sys
import time

import pika

from interop_plan import prefix

failures = []


def check(name, cond, why=""):
    if cond:
        print("ok: " + name, flush=True)
    else:
        print("FAIL: %s: %s" % (name, why), flush=True)
        failures.append(name)


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, connection_attempts=3, retry_delay=0.2))


def publish(ch, q, body, prio=None, expiration=None):
    ch.basic_publish("", q, body.encode(), pika.BasicProperties(
        priority=prio, expiration=expiration))


def drain(ch, q):
    """basic.get with no-ack until empty: [(body, priority)]."""
    out = []
    while True:
        m, p, b = ch.basic_get(q, auto_ack=True)
        if m is None:
            return out
        out.append((b.decode(), p.priority))


def fresh(ch, q, **args):
    ch.queue_delete(q)
    ch.queue_declare(q, arguments=args)
    return q


def priorities(conn):
    ch = conn.channel()
    q = fresh(ch, prefix("prio"), **{"x-max-priority": 5})
    for i, pr in enumerate([None, 1, 9, 5, 0, 3, 5, 1, None, 7]):
        publish(ch, q, "m%d" % i, pr)
    got = drain(ch, q)
    check("priority: higher first, FIFO within, above the maximum as the "
          "maximum, none as 0, the property as published",
          got == [("m2", 9), ("m3", 5), ("m6", 5), ("m9", 7), ("m5", 3),
                  ("m1", 1), ("m7", 1), ("m0", None), ("m4", 0),
                  ("m8", None)], got)

    for i, pr in enumerate([1, 1, 2, 2]):
        publish(ch, q, "s%d" % i, pr)
    taken = [ch.basic_get(q) for _ in range(3)]
    ch.basic_nack(taken[0][0].delivery_tag, requeue=True)
    got = drain(ch, q)
    check("priority: requeue goes back to its place within its priority",
          [b for b, _ in got] == ["s2", "s1"] and
          [t[2] for t in taken] == [b"s2", b"s3", b"s0"], (got, taken))
    for t in taken[1:]:
        ch.basic_ack(t[0].delivery_tag)

    # A consumer with prefetch 1: a higher priority published while it
    # holds one comes next.
    for i, pr in enumerate([0, 3, 1]):
        publish(ch, q, "c%d" % i, pr)
    ch.queue_declare(q, passive=True)   # they are in
    cch = conn.channel()
    cch.basic_qos(prefetch_count=1)
    seen = []

    def on_msg(c, method, props, body):
        seen.append(body.decode())
        if len(seen) == 1:
            publish(ch, q, "hi", 4)
            ch.queue_declare(q, passive=True)   # it is in
        c.basic_ack(method.delivery_tag)

    cch.basic_consume(q, on_msg)
    deadline = time.monotonic() + 5
    while len(seen) < 4 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    check("priority: a consumer gets priority order, a higher one "
          "published meanwhile next", seen == ["c1", "hi", "c2", "c0"], seen)
    cch.close()

    for overflow, want in (("drop-head", ["d0", "d2", "d4"]),
                           ("reject-publish", ["d1", "d0", "d2"])):
        q2 = fresh(ch, prefix("prio-len"), **{
            "x-max-priority": 5, "x-max-length": 3, "x-overflow": overflow})
        for i, pr in enumerate([1, 5, 1, 3, 0]):
            publish(ch, q2, "d%d" % i, pr)
        got = [b for b, _ in drain(ch, q2)]
        check("priority: x-max-length 3 across priorities, " + overflow,
              got == want, got)
        ch.queue_delete(q2)

    q3 = fresh(ch, prefix("prio-ttl"), **{"x-max-priority": 5})
    publish(ch, q3, "u0", 5)
    publish(ch, q3, "u1", 1, "200")
    publish(ch, q3, "u2", 5, "5000")
    time.sleep(0.5)
    got = [b for b, _ in drain(ch, q3)]
    check("priority: a low one expires at the head of its level",
          got == ["u0", "u2"], got)
    for n in (q, q3):
        ch.queue_delete(n)
    ch.close()


def delayed(conn):
    if not os.environ.get("ROOSTD_LOG"):
        print("skip: delayed messages: the reference RabbitMQ has no "
              "delayed-message plugin", flush=True)
        return
    ch = conn.channel()
    x = prefix("delayed")
    ch.exchange_declare(x, "x-delayed-message",
                        arguments={"x-delayed-type": "topic"})
    q = fresh(ch, prefix("delayed-q"))
    ch.queue_bind(q, x, "a.*")
    ch.confirm_delivery()
    t0 = time.monotonic()
    for body, key, delay in (("d600", "a.x", 600), ("d200", "a.y", 200),
                             ("nope", "b.x", 100), ("d400", "a.z", 400),
                             ("now", "a.w", None)):
        headers = {"x-delay": delay} if delay is not None else None
        ch.basic_publish(x, key, body.encode(),
                         pika.BasicProperties(headers=headers))
    # Held, mandatory, with no route: no basic.return (the route is not
    # known yet), so the publish is confirmed, not returned.
    try:
        ch.basic_publish(x, "none.here", b"held",
                         pika.BasicProperties(headers={"x-delay": 100}),
                         mandatory=True)
        returned = False
    except pika.exceptions.UnroutableError:
        returned = True
    check("delayed: no basic.return for a held mandatory publish",
          not returned)
    try:
        ch.basic_publish(x, "none.here", b"now", mandatory=True)
        returned = False
    except pika.exceptions.UnroutableError:
        returned = True
    check("delayed: one that routes at once is returned as usual", returned)
    got = []
    for m, p, body in ch.consume(q, auto_ack=True, inactivity_timeout=1.0):
        if m is None:
            break
        got.append((body.decode(), time.monotonic() - t0,
                    (p.headers or {}).get("x-delay")))
    ch.cancel()
    check("delayed: routed when due through the inner type (topic), in due "
          "order, x-delay negated",
          [(b, d) for b, _, d in got] ==
          [("now", None), ("d200", -200), ("d400", -400), ("d600", -600)],
          got)
    check("delayed: none early",
          all(at * 1000 >= int(b[1:]) for b, at, _ in got if b != "now"),
          got)
    ch.queue_delete(q)
    ch.exchange_delete(x)
    ch.close()


def main():
    port = int(sys.argv[1])
    conn = connect(port)
    priorities(conn)
    delayed(conn)
    conn.close()
    print("%d failed" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
