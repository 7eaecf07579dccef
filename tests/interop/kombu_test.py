#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kombu (py-amqp transport) against a broker on 127.0.0.1:PORT.

Exchange/Queue/Producer/Consumer with a topic and a direct exchange: JSON
messages published, consumed with acks under prefetch, each queue checked
for exactly its messages once and in order; requeue gives redelivered;
SimpleQueue put/get with ack.
Usage: kombu_test.py PORT
"""
import socket
import time

from kombu import Connection, Consumer, Exchange, Producer, Queue

from interop_plan import compare, port_arg, prefix, run_main, summary

N = 100
PREFETCH = 10
failures = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    failures.append(msg)


def ok(msg):
    print("ok: " + msg, flush=True)


def drain_until(conn, cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        try:
            conn.drain_events(timeout=0.1)
        except socket.timeout:
            pass
    return cond()


def drain_quiet(conn, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn.drain_events(timeout=0.05)
        except socket.timeout:
            pass


def main():
    port = port_arg()
    pfx = prefix("kombu")
    url = "amqp://guest:guest@127.0.0.1:%d//" % port
    with Connection(url, connect_timeout=10) as conn:
        conn.connect()
        props = conn.connection.server_properties
        ok("connected to %s %s (qos_semantics_matches_spec=%s)"
           % (props.get("product"), props.get("version"),
              conn.qos_semantics_matches_spec))
        ch = conn.channel()

        topic = Exchange(pfx + ".topic", type="topic", durable=False)
        direct = Exchange(pfx + ".direct", type="direct", durable=False)
        queues = {
            "t1": Queue(pfx + ".t1", exchange=topic, routing_key="*.orange.*",
                        durable=False),
            "t2": Queue(pfx + ".t2", exchange=topic, routing_key="lazy.#",
                        durable=False),
            "d1": Queue(pfx + ".d1", exchange=direct, routing_key="work",
                        durable=False),
        }
        for q in queues.values():
            q(ch).declare()  # the exchange, the queue and the binding
        # t2 also gets a second binding that overlaps the first.
        queues["t2"](ch).bind_to(exchange=topic, routing_key="*.*.rabbit")
        ok("declared topic and direct exchanges, 3 queues, 4 bindings")

        keys = ["quick.orange.rabbit", "lazy.orange.elephant", "quick.orange.fox",
                "lazy.brown.fox", "lazy.pink.rabbit", "quick.brown.fox",
                "quick.orange.male.rabbit", "lazy.orange.male.rabbit"]
        want = {"t1": [], "t2": [], "d1": []}
        producer = Producer(ch)
        for i in range(N):
            k = keys[i % len(keys)]
            body = {"seq": i, "key": k}
            producer.publish(body, exchange=topic, routing_key=k,
                             serializer="json", retry=False)
            parts = k.split(".")
            if len(parts) == 3 and parts[1] == "orange":
                want["t1"].append(body)
            if parts[0] == "lazy" or (len(parts) == 3 and parts[2] == "rabbit"):
                want["t2"].append(body)
        for i in range(N):
            body = {"seq": i, "job": "work-%d" % i}
            producer.publish(body, exchange=direct, routing_key="work",
                             serializer="json", retry=False)
            want["d1"].append(body)
        producer.publish({"seq": -1}, exchange=direct, routing_key="nobody",
                         serializer="json", retry=False)
        ok("published %d messages" % (2 * N + 1))

        # Prefetch: with nothing acked the broker stops at PREFETCH.
        got = {name: [] for name in queues}
        held = []

        def hold(body, message):
            got["d1"].append(body)
            held.append(message)

        c = Consumer(ch, queues=[queues["d1"]], callbacks=[hold], accept=["json"])
        c.qos(prefetch_count=PREFETCH)
        c.consume()
        drain_until(conn, lambda: len(held) >= PREFETCH)
        drain_quiet(conn, 0.3)
        if len(held) != PREFETCH:
            fail("d1: %d deliveries without acks, prefetch is %d"
                 % (len(held), PREFETCH))
        else:
            ok("d1: prefetch %d holds back deliveries until acked" % PREFETCH)
        c.cancel()  # nothing more can come: none acked yet
        # Ack all held but the last, and requeue that one: it goes back to
        # the head of the queue and comes again with redelivered=True.
        last = held.pop()
        got["d1"].pop()
        for m in held:
            m.ack()
        last.requeue()
        ch.basic_qos(0, PREFETCH, False)

        redelivered = []

        def on_message_for(name):
            def on_message(body, message):
                got[name].append(body)
                if message.delivery_info.get("redelivered"):
                    redelivered.append((name, body))
                message.ack()
            return on_message

        consumers = [Consumer(ch, queues=[queues[name]], accept=["json"],
                              callbacks=[on_message_for(name)])
                     for name in ("t1", "t2", "d1")]
        for c in consumers:
            c.consume()
        drain_until(conn, lambda: all(len(got[n]) >= len(want[n]) for n in want))
        drain_quiet(conn, 0.2)
        for c in consumers:
            c.cancel()
        for name in ("t1", "t2", "d1"):
            diff = compare(name, got[name], want[name])
            if diff:
                fail(diff)
            else:
                ok("%s: %d messages once and in order" % (name, len(got[name])))
        if redelivered != [("d1", want["d1"][PREFETCH - 1])]:
            fail("redelivered messages: %r, expected only the requeued %r"
                 % (redelivered, want["d1"][PREFETCH - 1]))
        else:
            ok("requeued message came back in place with redelivered=True")

        # SimpleQueue: put, get with ack, empty afterwards.
        sq = conn.SimpleQueue(pfx + ".simple", serializer="json",
                              queue_opts={"durable": False, "auto_delete": False},
                              exchange_opts={"durable": False})
        for i in range(5):
            sq.put({"n": i})
        out = []
        for _ in range(5):
            m = sq.get(block=True, timeout=5)
            out.append(m.payload["n"])
            m.ack()
        try:
            m = sq.get(block=True, timeout=0.3)
            fail("SimpleQueue: extra message %r" % (m.payload,))
        except sq.Empty:
            pass
        if out != list(range(5)):
            fail("SimpleQueue: got %r, expected %r" % (out, list(range(5))))
        else:
            ok("SimpleQueue: 5 messages once and in order")
        sq_queue = sq.queue
        sq.close()  # cancels its consumer; deleting first would cancel it
        sq_queue(ch).delete()

        for q in queues.values():
            q(ch).delete()
        topic(ch).delete()
        direct(ch).delete()
        Exchange(pfx + ".simple", type="direct")(ch).delete()
    return summary("kombu", failures)


if __name__ == "__main__":
    run_main(main)
