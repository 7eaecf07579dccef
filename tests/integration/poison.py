# SPDX-License-Identifier: Apache-2.0
"""Poison messages: x-delivery-limit with the semantics of RabbitMQ's
quorum queues, on Roost's classic queues, and retry back-off
(x-requeue-delay, Roost's own; not with --reference) (pika). Run by poison.sh against
roostd; `--reference` runs the same checks against RabbitMQ on quorum
queues (3.10 refuses the argument on classic ones), so that the
expectations are RabbitMQ's.

  poison.py --port PORT [--reference] before   # everything, then a
                                               # message returned once
                                               # left in a durable queue
  poison.py --port PORT [--reference] after    # after a restart: its
                                               # count kept

Prints one "PASS name" or "FAIL name: why" per check; exit 1 on a FAIL.
"""
import argparse
import time

import pika

from checks import check, done

REFERENCE = False


def qargs(limit, dlx=None):
    a = {"x-delivery-limit": limit}
    if dlx is not None:
        a["x-dead-letter-exchange"] = dlx
    if REFERENCE:
        a["x-queue-type"] = "quorum"
    return a


def get(ch, q, timeout=5.0, ack=False):
    """basic.get until a message comes (quorum queues settle late)."""
    deadline = time.monotonic() + timeout
    while True:
        m, p, b = ch.basic_get(q, auto_ack=ack)
        if m is not None or time.monotonic() > deadline:
            return m, p, b
        time.sleep(0.02)


def fresh(ch, *names):
    for n in names:
        ch.queue_delete(n)


def before(port):
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, connection_attempts=1))
    ch = c.channel()
    fresh(ch, "pz-q", "pz-dead", "pz-drop", "pz-gone", "pz-durable", "pz-qq")
    ch.exchange_declare("pz-dlx", "fanout", durable=True)
    ch.queue_declare("pz-dead", durable=True)
    ch.queue_bind("pz-dead", "pz-dlx")

    # A limit of 2 allows three deliveries, each showing the returns so
    # far; other headers come back as they were sent.
    ch.queue_declare("pz-q", durable=True, arguments=qargs(2, "pz-dlx"))
    hdrs = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "n": 7, "flag": True}
    ch.basic_publish("", "pz-q", b"job", pika.BasicProperties(headers=hdrs))
    counts, others = [], []
    for _ in range(4):
        m, p, b = get(ch, "pz-q", 1.0 if counts else 5.0)
        if m is None:
            break
        h = dict(p.headers or {})
        counts.append((h.pop("x-delivery-count", None), m.redelivered))
        others.append(h)
        ch.basic_nack(m.delivery_tag, requeue=True)
    check("limit 2: three deliveries with x-delivery-count 0, 1, 2",
          counts == [(0, False), (1, True), (2, True)], counts)
    check("... every other header as it was sent",
          all(o == hdrs for o in others), others)
    m, p, b = get(ch, "pz-dead", ack=True)
    death = (p.headers or {}).get("x-death", [{}])[0] if m else {}
    check("... then dead-lettered with reason delivery_limit",
          m is not None and b == b"job" and
          death.get("reason") == "delivery_limit" and
          death.get("queue") == "pz-q" and
          "x-delivery-count" not in p.headers, (b, p and p.headers))

    # Without a dead-letter exchange it is dropped.
    ch.queue_declare("pz-drop", durable=True, arguments=qargs(0))
    ch.basic_publish("", "pz-drop", b"once")
    m, _, _ = get(ch, "pz-drop")
    ch.basic_reject(m.delivery_tag, requeue=True)
    m, _, _ = get(ch, "pz-drop", 1.0)
    check("limit 0 without a DLX: dropped at the first return", m is None,
          m)

    # A consumer that goes with the message unacked returns it too.
    ch.queue_declare("pz-gone", durable=True, arguments=qargs(1, "pz-dlx"))
    ch.basic_publish("", "pz-gone", b"held")
    for i in range(2):
        ch2 = c.channel()
        m, _, _ = get(ch2, "pz-gone")
        check("consumer gone: delivery %d" % (i + 1), m is not None)
        ch2.close()
    m, _, b = get(ch, "pz-dead", ack=True)
    check("two channels closed holding it: dead-lettered", b == b"held", b)

    # A negative limit lets no return through (RabbitMQ 3.10's reading);
    # one that is not an integer is refused.
    ch.queue_declare("pz-neg", durable=True, arguments=qargs(-1))
    ch.basic_publish("", "pz-neg", b"neg")
    m, _, _ = get(ch, "pz-neg")
    ch.basic_nack(m.delivery_tag, requeue=True)
    m, _, _ = get(ch, "pz-neg", 1.0)
    check("limit -1: dropped at the first return", m is None, m)
    ch.queue_delete("pz-neg")
    # RabbitMQ 3.10.8 takes "two" and ignores it; Roost refuses it
    # (docs/compatibility.md).
    if not REFERENCE:
        why = refused(c, "pz-bad", "two")
        check("a limit that is not an integer is refused",
              why == "(406) PRECONDITION_FAILED - invalid arg "
              "'x-delivery-limit' for queue 'pz-bad' in vhost '/': "
              "\"expected integer, got longstr\"", why)

    # A quorum queue keeps even a transient message across a restart.
    ch.queue_declare("pz-qq", durable=True,
                     arguments={"x-queue-type": "quorum"})
    ch.basic_publish("", "pz-qq", b"transient", pika.BasicProperties(
        delivery_mode=1))

    if not REFERENCE:
        backoff_before(c)

    # Left for after the restart: a persistent message returned once.
    ch = c.channel()
    ch.queue_declare("pz-durable", durable=True, arguments=qargs(2, "pz-dlx"))
    ch.confirm_delivery()
    ch.basic_publish("", "pz-durable", b"kept",
                     pika.BasicProperties(delivery_mode=2))
    m, _, _ = get(ch, "pz-durable")
    ch.basic_nack(m.delivery_tag, requeue=True)
    m, p, _ = get(ch, "pz-durable")
    check("before the restart: returned once",
          m is not None and p.headers.get("x-delivery-count") == 1,
          p and p.headers)
    ch.basic_nack(m.delivery_tag, requeue=True)
    c.close()


BACKOFF_LONG = 6000   # ms: the wait across the restart, 3 to 6 s


def backoff_before(c):
    """Retry back-off (x-requeue-delay, Roost's own): a nack waits,
    doubling, then the message is back at its place; a waiting one is
    not counted as ready. Leaves pz-wait with a message waiting 3-6 s."""
    ch = c.channel()
    ch.queue_declare("pz-back", arguments={"x-requeue-delay": 300,
                                           "x-requeue-delay-max": 600})
    ch.basic_publish("", "pz-back", b"retry")
    waits, ready, other = [], [], None
    m, _, _ = get(ch, "pz-back")
    for i in range(3):
        t0 = time.monotonic()
        ch.basic_nack(m.delivery_tag, requeue=True)
        ready.append(ch.queue_declare("pz-back", passive=True)
                     .method.message_count)
        if i == 0:
            ch.basic_publish("", "pz-back", b"other")
            _, _, other = get(ch, "pz-back", ack=True)
        m, _, b = get(ch, "pz-back")
        waits.append(round(time.monotonic() - t0, 3))
    ch.basic_ack(m.delivery_tag)
    check("back-off: while it waits it is not counted as ready, and one "
          "published behind it is handed out", ready == [0, 0, 0] and
          other == b"other", (ready, other))
    check("back-off: 150-300 ms, 300-600, then 300-600 (the maximum)",
          waits[0] >= 0.14 and waits[1] >= 0.29 and waits[2] >= 0.29 and
          all(w < 3 for w in waits), waits)
    ch.queue_delete("pz-back")

    ch.queue_declare("pz-wait", durable=True,
                     arguments={"x-requeue-delay": BACKOFF_LONG})
    ch.confirm_delivery()
    ch.basic_publish("", "pz-wait", b"later",
                     pika.BasicProperties(delivery_mode=2))
    m, _, _ = get(ch, "pz-wait")
    ch.basic_nack(m.delivery_tag, requeue=True)
    ch.queue_declare("pz-wait", durable=True, passive=True)
    ch.close()


def backoff_after(ch):
    """The message nacked before the restart waits out the rest of its
    3-6 s, then comes back."""
    t0 = time.monotonic()
    m, _, _ = ch.basic_get("pz-wait", auto_ack=True)
    check("back-off: after the restart, still waiting", m is None, m)
    m, _, b = get(ch, "pz-wait", BACKOFF_LONG / 1000.0 + 2, ack=True)
    check("back-off: ... then back, within its delay",
          b == b"later", (b, round(time.monotonic() - t0, 2)))
    ch.queue_delete("pz-wait")


def refused(c, name, limit):
    ch = c.channel()
    try:
        ch.queue_declare(name, durable=True, arguments=qargs(limit))
    except pika.exceptions.ChannelClosedByBroker as e:
        return "(%d) %s" % (e.reply_code, e.reply_text)
    ch.queue_delete(name)
    return None


def after(port):
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, connection_attempts=1))
    ch = c.channel()
    m, p, b = get(ch, "pz-durable")
    check("after the restart: the count kept (2 returns)",
          m is not None and b == b"kept" and
          p.headers.get("x-delivery-count") == 2, p and p.headers)
    if m is not None:
        ch.basic_nack(m.delivery_tag, requeue=True)
    m, _, _ = get(ch, "pz-durable", 1.0)
    check("... and the third return dead-letters it", m is None, m)
    m, _, b = get(ch, "pz-dead", ack=True)
    check("... into the DLX's queue", b == b"kept", b)
    m, p, b = get(ch, "pz-qq", ack=True)
    check("a quorum queue's transient message is kept, with its count",
          b == b"transient" and p.headers.get("x-delivery-count") == 0,
          (b, p and p.headers))
    if not REFERENCE:
        backoff_after(ch)
    fresh(ch, "pz-q", "pz-dead", "pz-drop", "pz-gone", "pz-durable", "pz-qq")
    ch.exchange_delete("pz-dlx")
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--reference", action="store_true",
                    help="the broker is RabbitMQ: quorum queues")
    ap.add_argument("phase", choices=["before", "after"])
    a = ap.parse_args()
    global REFERENCE
    REFERENCE = a.reference
    (before if a.phase == "before" else after)(a.port)
    done()


if __name__ == "__main__":
    main()
