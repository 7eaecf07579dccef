#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pika BlockingConnection against an AMQP 0-9-1 broker on 127.0.0.1:PORT.

Declares one exchange of each type with queues and bindings, publishes to
each, consumes with manual acks under basic.qos prefetch and checks that
every queue gets exactly its messages once and in order; then basic.get,
nack with requeue (redelivered), properties and a multi-frame body round
trip, a mandatory publish that comes back as basic.return, refused logins,
unacked messages requeued when their connection closes, basic.cancel for
the consumer of a deleted queue, and channel errors with RabbitMQ's reply
codes and texts.
Usage: pika_blocking.py PORT
"""
import os
import time

import pika

from interop_plan import compare, make_plan, port_arg, prefix, run_main, summary

PREFETCH = 10
failures = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    failures.append(msg)


def ok(msg):
    print("ok: " + msg, flush=True)


def wait_for(conn, cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return cond()


def consume_all(conn, ch, queue, want, check_window=False):
    """Consume `queue` with manual acks, acking in batches of PREFETCH with
    multiple=True, and check the broker never has more than PREFETCH
    unacknowledged deliveries out to us."""
    got, pending = [], []
    problems = []

    def on_msg(c, method, props, body):
        got.append(body.decode())
        pending.append(method.delivery_tag)
        if method.redelivered:
            problems.append("redelivered=True on first delivery of %r" % body)
        if len(pending) > PREFETCH:
            problems.append("%d unacked deliveries with prefetch %d"
                            % (len(pending), PREFETCH))
        if not check_window and (len(pending) == PREFETCH or len(got) == len(want)):
            c.basic_ack(pending[-1], multiple=True)
            del pending[:]

    tag = ch.basic_consume(queue, on_msg, auto_ack=False)
    if check_window:
        # Do not ack: the broker must stop at exactly PREFETCH deliveries.
        wait_for(conn, lambda: len(got) >= PREFETCH)
        conn.process_data_events(time_limit=0.3)
        if len(got) != PREFETCH:
            fail("%s: %d deliveries without acks, prefetch is %d"
                 % (queue, len(got), PREFETCH))
        else:
            ok("%s: prefetch %d holds back deliveries until acked" % (queue, PREFETCH))
        ch.basic_ack(pending[-1], multiple=True)
        del pending[:]
        check_window = False
    wait_for(conn, lambda: len(got) >= len(want))
    conn.process_data_events(time_limit=0.1)  # anything extra shows up here
    ch.basic_cancel(tag)
    if pending:
        ch.basic_ack(pending[-1], multiple=True)
    for p in problems[:3]:
        fail("%s: %s" % (queue, p))
    diff = compare(queue, got, want)
    if diff:
        fail(diff)
    elif not problems:
        ok("%s: %d messages once and in order" % (queue, len(got)))


def login_refused(port):
    """A wrong password and an unknown vhost: pika's exceptions and
    RabbitMQ's codes and texts."""
    cases = [
        ("wrong password", {"credentials": pika.PlainCredentials("guest", "wrong")},
         pika.exceptions.ProbableAuthenticationError, 403,
         "ACCESS_REFUSED - Login was refused using authentication mechanism "
         "PLAIN. For details see the broker logfile."),
        ("unknown vhost", {"virtual_host": "no-such-vhost"},
         pika.exceptions.ProbableAccessDeniedError, 530,
         "NOT_ALLOWED - vhost no-such-vhost not found"),
    ]
    bad = 0
    for name, kw, exc, code, text in cases:
        try:
            pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", port, connection_attempts=1, **kw)).close()
            fail("%s: connected" % name)
            bad += 1
        except exc as e:
            # pika keeps only the text of the ConnectionClosedByBroker
            got = str(e.args[0]) if e.args else ""
            want = "ConnectionClosedByBroker: (%d) %r" % (code, text)
            if got != want:
                fail("%s: %s, RabbitMQ gives %s" % (name, got, want))
                bad += 1
        except Exception as e:
            fail("%s: %s %s, RabbitMQ gives %s with %d %r"
                 % (name, type(e).__name__, e, exc.__name__, code, text))
            bad += 1
    if not bad:
        ok("wrong password (403) and unknown vhost (530) refused as by RabbitMQ")


def requeue_on_close(conn, params, pfx):
    """Unacked deliveries go back to the queue, in order and redelivered,
    when the connection holding them closes."""
    ch = conn.channel()
    q = pfx + ".requeue"
    ch.queue_declare(q)
    for i in range(20):
        ch.basic_publish("", q, ("r:%d" % i).encode())
    other = pika.BlockingConnection(params)
    och = other.channel()
    och.basic_qos(prefetch_count=5)
    held = []
    och.basic_consume(q, lambda c, m, p, b: held.append(b.decode()), auto_ack=False)
    wait_for(other, lambda: len(held) >= 5)
    other.process_data_events(time_limit=0.1)
    other.close()  # 5 unacked deliveries
    got = []
    for _ in range(21):
        m, _, b = ch.basic_get(q, auto_ack=True)
        if m is None:
            break
        got.append((b.decode(), m.redelivered))
    want = [("r:%d" % i, i < 5) for i in range(20)]
    if got != want:
        fail("after a connection closed with 5 unacked: got %r, expected %r"
             % (got[:8], want[:8]))
    else:
        ok("unacked deliveries requeued in order, redelivered, on connection close")
    ch.queue_delete(q)
    ch.close()


def cancel_notify(conn, pfx):
    """Deleting a queue cancels its consumers with basic.cancel
    (consumer_cancel_notify)."""
    ch = conn.channel()
    q = pfx + ".cancel"
    ch.queue_declare(q)
    cancelled = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = ch.basic_consume(q, lambda *a: None)
    conn.channel().queue_delete(q)
    wait_for(conn, lambda: cancelled, timeout=5)
    if cancelled != [tag]:
        fail("deleting a queue with a consumer: basic.cancel for %r, expected [%r]"
             % (cancelled, tag))
    else:
        ok("deleting the queue sends basic.cancel to its consumer")
    if ch.is_open:
        ch.close()


def error_replies(conn, params, pfx):
    """Channel errors through pika: the reply code and RabbitMQ's text, the
    channel closed, the connection and its other channels still open."""
    ex, q = pfx + ".err-ex", pfx + ".err-q"
    excl = "ix.%d" % os.getpid()  # short: RabbitMQ's text for it is long
    long_name = (pfx + ".long-") .ljust(255, "z")
    setup = conn.channel()
    setup.exchange_declare(ex, "direct")
    setup.queue_declare(q)
    setup.queue_declare(excl, exclusive=True)
    other = pika.BlockingConnection(params)
    vh = "in vhost '/'"
    cases = [
        ("passive declare of a missing queue",
         lambda ch: ch.queue_declare(q + "-none", passive=True),
         404, "NOT_FOUND - no queue '%s-none' %s" % (q, vh)),
        ("passive declare of a missing exchange",
         lambda ch: ch.exchange_declare(ex + "-none", passive=True),
         404, "NOT_FOUND - no exchange '%s-none' %s" % (ex, vh)),
        ("redeclare exchange with another type",
         lambda ch: ch.exchange_declare(ex, "fanout"),
         406, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '%s' %s: "
              "received 'fanout' but current is 'direct'" % (ex, vh)),
        ("redeclare queue as durable",
         lambda ch: ch.queue_declare(q, durable=True),
         406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue '%s' %s: "
              "received 'true' but current is 'false'" % (q, vh)),
        ("declare exchange amq.*",
         lambda ch: ch.exchange_declare("amq.%s" % pfx, "direct"),
         403, "ACCESS_REFUSED - exchange name 'amq.%s' contains reserved prefix "
              "'amq.*'" % pfx),
        ("ack of an unknown delivery tag",
         lambda ch: ch.basic_ack(99),
         406, "PRECONDITION_FAILED - unknown delivery tag 99"),
        ("bind to a missing exchange",
         lambda ch: ch.queue_bind(q, ex + "-none", "k"),
         404, "NOT_FOUND - no exchange '%s-none' %s" % (ex, vh)),
        ("bind to the default exchange",
         lambda ch: ch.queue_bind(q, "", "k"),
         403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
        ("delete amq.direct",
         lambda ch: ch.exchange_delete("amq.direct"),
         403, "ACCESS_REFUSED - deletion of system exchange 'amq.direct' %s "
              "not allowed" % vh),
        ("publish to a missing exchange",
         lambda ch: ch.basic_publish(ex + "-none", "k", b"x"),
         404, "NOT_FOUND - no exchange '%s-none' %s" % (ex, vh)),
        ("exclusive queue from another connection",
         lambda ch: ch.queue_declare(excl, passive=True),
         405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue "
              "'%s' %s. It could be originally declared on another connection or "
              "the exclusive property value does not match that of the original "
              "declaration." % (excl, vh)),
        # A reply text is a shortstr: RabbitMQ cuts one longer than 255
        # bytes to 252 and appends "...".
        ("passive declare of a missing queue with a 255-byte name",
         lambda ch: ch.queue_declare(long_name, passive=True),
         404, ("NOT_FOUND - no queue '%s' %s" % (long_name, vh))[:252] + "..."),
        ("delete with if_unused while a consumer is on it",
         lambda ch: (ch.basic_consume(q, lambda *a: None),
                     conn.channel().queue_delete(q, if_unused=True)),
         406, "PRECONDITION_FAILED - queue '%s' %s in use" % (q, vh)),
    ]
    bad = 0
    for name, action, code, text in cases:
        c = other if "another connection" in name else conn
        ch = c.channel()
        try:
            action(ch)
            c.process_data_events(time_limit=0.2)
            ch.queue_declare(q, passive=True)  # a round trip on that channel
            fail("%s: no error" % name)
            bad += 1
        except pika.exceptions.ChannelClosedByBroker as e:
            if (e.reply_code, e.reply_text) != (code, text):
                fail("%s: got %d %r, RabbitMQ gives %d %r"
                     % (name, e.reply_code, e.reply_text, code, text))
                bad += 1
        except pika.exceptions.ConnectionClosedByBroker as e:
            fail("%s: connection closed with %d %r, RabbitMQ closes the channel "
                 "with %d %r" % (name, e.reply_code, e.reply_text, code, text))
            return
        if ch.is_open:
            ch.close()
        if not (conn.is_open and other.is_open and setup.is_open):
            fail("%s: the connection or another channel closed too" % name)
            return
    if not bad:
        ok("%d channel errors: RabbitMQ's codes and texts, other channels go on"
           % len(cases))
    setup.queue_delete(q)
    setup.exchange_delete(ex)
    setup.close()
    other.close()


def cc_bcc(conn, pfx):
    """CC and BCC headers route to more queues; BCC never reaches one."""
    ch = conn.channel()
    a, b, d = pfx + ".cc-a", pfx + ".cc-b", pfx + ".cc-d"
    for q in (a, b, d):
        ch.queue_declare(q, auto_delete=True)
    ch.confirm_delivery()
    ch.basic_publish("", a, b"sel", pika.BasicProperties(
        headers={"CC": [b], "BCC": [d], "traceparent": "00-abc-01"}))
    got = {}
    for q in (a, b, d):
        m, p, body = ch.basic_get(q, auto_ack=True)
        got[q] = (body, p.headers if m else None)
    want = (b"sel", {"CC": [b], "traceparent": "00-abc-01"})
    if any(v != want for v in got.values()):
        fail("CC/BCC: %r" % got)
    else:
        ok("CC and BCC route to their queues; BCC is removed, the rest kept")
    for q in (a, b, d):
        ch.queue_delete(q)
    ch.close()


def direct_reply_to(conn, params, pfx):
    """RPC over amq.rabbitmq.reply-to: the server's reply reaches the
    requester's no-ack consumer with the request's correlation id; a
    reply to a requester that is gone is dropped."""
    ch = conn.channel()
    srv = pfx + ".rpc"
    ch.queue_declare(srv, auto_delete=True)
    replies = []
    ch.basic_consume("amq.rabbitmq.reply-to",
                     lambda c, m, p, b: replies.append((p.correlation_id, b)),
                     auto_ack=True)
    ch.basic_publish("", srv, b"2+2", pika.BasicProperties(
        reply_to="amq.rabbitmq.reply-to", correlation_id="r1"))
    server = pika.BlockingConnection(params)
    sch = server.channel()
    m, p, b = None, None, None
    for _ in range(100):
        m, p, b = sch.basic_get(srv, auto_ack=True)
        if m is not None:
            break
        conn.process_data_events(0.02)
    if m is None or not p.reply_to.startswith("amq.rabbitmq.reply-to."):
        fail("direct reply-to: request %r reply_to %r" % (b, p and p.reply_to))
        return
    sch.basic_publish("", p.reply_to, b"4",
                      pika.BasicProperties(correlation_id=p.correlation_id))
    wait_for(conn, lambda: replies)
    if replies != [("r1", b"4")]:
        fail("direct reply-to: replies %r" % replies)
    else:
        ok("direct reply-to: the reply reaches the requester's consumer")
    address = p.reply_to
    ch.close()
    sch.confirm_delivery()
    sch.basic_publish("", address, b"late")   # the requester is gone
    ok("a reply to a closed requester is dropped (confirmed, no error)")
    server.close()


def priorities(conn, pfx):
    """x-priority: the higher consumer gets every message while it has
    room; x-single-active-consumer: one consumer gets them all, the next
    takes over when it cancels."""
    ch = conn.channel()
    q = pfx + ".prio"
    ch.queue_declare(q, auto_delete=True)
    got = {"hi": 0, "lo": 0}
    ch.basic_consume(q, lambda c, m, p, b: got.__setitem__("lo", got["lo"] + 1),
                     auto_ack=True)
    ch.basic_consume(q, lambda c, m, p, b: got.__setitem__("hi", got["hi"] + 1),
                     auto_ack=True, arguments={"x-priority": 10})
    for i in range(20):
        ch.basic_publish("", q, b"p%d" % i)
    wait_for(conn, lambda: got["hi"] + got["lo"] == 20)
    if got != {"hi": 20, "lo": 0}:
        fail("consumer priorities: %r" % got)
    else:
        ok("the consumer with x-priority 10 gets every message")
    sq = pfx + ".sac"
    ch.queue_declare(sq, auto_delete=True,
                     arguments={"x-single-active-consumer": True})
    seen = {"a": [], "b": []}
    ta = ch.basic_consume(sq, lambda c, m, p, b: seen["a"].append(b),
                          auto_ack=True)
    ch.basic_consume(sq, lambda c, m, p, b: seen["b"].append(b), auto_ack=True)
    for i in range(5):
        ch.basic_publish("", sq, b"s%d" % i)
    wait_for(conn, lambda: len(seen["a"]) == 5)
    ch.basic_cancel(ta)
    for i in range(5, 8):
        ch.basic_publish("", sq, b"s%d" % i)
    wait_for(conn, lambda: len(seen["b"]) == 3)
    if seen != {"a": [b"s%d" % i for i in range(5)],
                "b": [b"s%d" % i for i in range(5, 8)]}:
        fail("single active consumer: %r" % seen)
    else:
        ok("single active consumer: the first gets all, the next takes over")
    ch.close()


def main():
    port = port_arg()
    pfx = prefix("pika-blocking")
    global params
    params = pika.ConnectionParameters(
        host="127.0.0.1", port=port,
        credentials=pika.PlainCredentials("guest", "guest"),
        connection_attempts=1, socket_timeout=10, blocked_connection_timeout=30)
    conn = pika.BlockingConnection(params)
    props = conn._impl.server_properties
    ok("connected to %s %s" % (props.get("product"), props.get("version")))
    ch = conn.channel()

    exchanges, queues, bindings, messages, expected = make_plan(pfx)
    for name, typ in exchanges:
        ch.exchange_declare(name, exchange_type=typ, durable=False, auto_delete=False)
        ch.exchange_declare(name, exchange_type=typ, passive=True)
    for name in queues:
        r = ch.queue_declare(name, durable=False, exclusive=False, auto_delete=False)
        if r.method.queue != name or r.method.message_count != 0:
            fail("queue.declare-ok for %s: %r" % (name, r.method))
    for queue, exchange, key, args in bindings:
        ch.queue_bind(queue, exchange, routing_key=key, arguments=args)
    ok("declared %d exchanges, %d queues, %d bindings"
       % (len(exchanges), len(queues), len(bindings)))

    for exchange, key, headers, body in messages:
        ch.basic_publish(exchange, key, body.encode(),
                         pika.BasicProperties(headers=headers, delivery_mode=1))
    ok("published %d messages" % len(messages))

    # Everything routed is counted once the broker has processed the
    # publishes; a synchronous round trip on the same channel orders it.
    for name in queues:
        r = ch.queue_declare(name, passive=True)
        if r.method.message_count != len(expected[name]):
            fail("%s: message_count %d after publishing, expected %d"
                 % (name, r.method.message_count, len(expected[name])))

    ch.basic_qos(prefetch_count=PREFETCH)
    for i, name in enumerate(queues):
        consume_all(conn, ch, name, expected[name], check_window=(i == 0))
    for name in queues:
        r = ch.queue_declare(name, passive=True)
        if r.method.message_count != 0 or r.method.consumer_count != 0:
            fail("%s after consuming: message_count %d consumer_count %d"
                 % (name, r.method.message_count, r.method.consumer_count))

    # basic.get on a server-named exclusive queue, via the default exchange.
    r = ch.queue_declare("", exclusive=True)
    gq = r.method.queue
    if not gq.startswith("amq.gen-"):
        fail("server-named queue is %r, expected amq.gen-..." % gq)
    for i in range(3):
        ch.basic_publish("", gq, ("get:%d" % i).encode())
    for i in range(3):
        method, _, body = ch.basic_get(gq, auto_ack=False)
        if method is None:
            fail("basic_get %d: queue empty" % i)
            break
        if body != ("get:%d" % i).encode() or method.message_count != 2 - i \
                or method.redelivered:
            fail("basic_get %d: body %r message_count %d redelivered %r"
                 % (i, body, method.message_count, method.redelivered))
        ch.basic_ack(method.delivery_tag)
    method, _, _ = ch.basic_get(gq)
    if method is not None:
        fail("basic_get on empty queue returned %r" % method)
    else:
        ok("basic_get: 3 in order with message counts, then get-empty")

    # nack with requeue: the message goes back to its place, redelivered.
    ch.basic_publish("", gq, b"x")
    ch.basic_publish("", gq, b"y")
    m1, _, b1 = ch.basic_get(gq, auto_ack=False)
    ch.basic_nack(m1.delivery_tag, requeue=True)
    m2, _, b2 = ch.basic_get(gq, auto_ack=False)
    if (b1, m1.redelivered, b2, m2.redelivered) != (b"x", False, b"x", True):
        fail("nack requeue: first get %r redelivered=%r, second %r redelivered=%r"
             % (b1, m1.redelivered, b2, m2.redelivered))
    ch.basic_reject(m2.delivery_tag, requeue=False)  # dropped for good
    m3, _, b3 = ch.basic_get(gq, auto_ack=True)
    if m3 is None or b3 != b"y" or m3.redelivered:
        fail("after reject: got %r, expected b'y' not redelivered" % (b3,))
    m4, _, _ = ch.basic_get(gq)
    if m4 is not None:
        fail("queue not empty after reject requeue=False")
    if not any("nack" in f or "reject" in f for f in failures):
        ok("nack requeue gives redelivered=True in place; reject drops")

    # Properties and a body larger than frame_max.
    sent = pika.BasicProperties(
        content_type="application/octet-stream", content_encoding="identity",
        headers={"s": "str", "i": 42, "neg": -7, "f": True,
                 "l": [1, "two"], "t": {"k": "v"}},
        delivery_mode=2, priority=3, correlation_id="corr-1", reply_to="rq",
        message_id="mid-1", timestamp=1700000000, type="kind", app_id="interop")
    big = bytes(range(256)) * 1200  # 307200 bytes: three body frames or more
    ch.basic_publish("", gq, big, sent)
    m, p, b = ch.basic_get(gq, auto_ack=True)
    if b != big:
        fail("big body: got %s bytes, expected %d" % (None if b is None else len(b), len(big)))
    else:
        for attr in ("content_type", "content_encoding", "headers", "delivery_mode",
                     "priority", "correlation_id", "reply_to", "message_id",
                     "timestamp", "type", "app_id"):
            if getattr(p, attr) != getattr(sent, attr):
                fail("property %s: got %r, sent %r" % (attr, getattr(p, attr),
                                                       getattr(sent, attr)))
        ok("307200-byte body and all properties round-trip")

    # mandatory publish that no queue takes comes back as basic.return.
    returned = []
    ch.add_on_return_callback(lambda c, m, p, b: returned.append((m, b)))
    d_ex = exchanges[0][0]
    ch.basic_publish(d_ex, "nowhere", b"lost", mandatory=True)
    ch.basic_publish(d_ex, "red", b"kept", mandatory=True)
    wait_for(conn, lambda: len(returned) >= 1, timeout=5)
    conn.process_data_events(time_limit=0.2)
    if len(returned) != 1:
        fail("mandatory publish: %d basic.return, expected 1" % len(returned))
    else:
        m, b = returned[0]
        if (m.reply_code, m.reply_text, m.exchange, m.routing_key, b) != \
                (312, "NO_ROUTE", d_ex, "nowhere", b"lost"):
            fail("basic.return: %r %r %r %r body %r"
                 % (m.reply_code, m.reply_text, m.exchange, m.routing_key, b))
        else:
            ok("mandatory unroutable publish returned 312 NO_ROUTE")
    for qn in ("d1", "d2"):  # both are bound with "red"
        m, _, b = ch.basic_get("%s.q.%s" % (pfx, qn), auto_ack=True)
        if b != b"kept":
            fail("routable mandatory publish: got %r in %s, expected b'kept'"
                 % (b, qn))

    login_refused(port)
    requeue_on_close(conn, params, pfx)
    cancel_notify(conn, pfx)
    priorities(conn, pfx)
    direct_reply_to(conn, params, pfx)
    cc_bcc(conn, pfx)
    error_replies(conn, params, pfx)

    for name in queues:
        r = ch.queue_delete(name)
        if r.method.message_count != 0:
            fail("queue.delete-ok for %s: message_count %d"
                 % (name, r.method.message_count))
    for name, _ in exchanges:
        ch.exchange_delete(name)
    ch.close()
    conn.close()
    return summary("pika_blocking", failures)


if __name__ == "__main__":
    run_main(main)
