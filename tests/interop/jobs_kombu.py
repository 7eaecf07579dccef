#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A job queue whose worker dies, with kombu (py-amqp transport), against a
broker on 127.0.0.1:PORT.

A Producer on a Connection with transport_options confirm_publish=True
publishes 2000 transient JSON jobs to a durable Queue; every publish must
be confirmed with basic.ack (py-amqp raises MessageNacked on basic.nack);
a mandatory publish nobody takes reaches the Producer's on_return with 312
NO_ROUTE and is still acked. A persistent message for a durable queue is
acked once it is on disk, by RabbitMQ and Roost alike. A worker process (this script with --worker) consumes with a
Consumer under prefetch 50, acks 100 jobs, holds the next 50 unacked and is
killed with SIGKILL: the broker requeues those 50. A second Consumer takes
the rest: every job is acked exactly once, the dead worker's jobs come back
first, in order, with redelivered=true, then the others in order; the queue
ends empty.
Usage: jobs_kombu.py PORT
"""
import json
import socket
import time

from amqp.exceptions import MessageNacked
from kombu import Connection, Consumer, Exchange, Producer, Queue

import jobs_common as jc
from interop_plan import run_main, summary
from jobs_common import N, PREFETCH


def url(port):
    return "amqp://guest:guest@127.0.0.1:%d//" % port


def pump(conn, seconds):
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            conn.drain_events(timeout=min(left, 0.05))
        except socket.timeout:
            pass


def worker(port, queue):
    """The worker that dies: see jobs_common.DyingWorker."""
    with Connection(url(port), connect_timeout=10) as conn:
        ch = conn.channel()
        w = jc.DyingWorker()

        def on_message(body, message):
            if w.on_delivery(jc.job_id(body),
                             bool(message.delivery_info.get("redelivered"))):
                message.ack()

        c = Consumer(ch, queues=[Queue(queue, durable=True, no_declare=True)],
                     callbacks=[on_message], accept=["json"])
        c.qos(prefetch_count=PREFETCH)
        c.consume()
        w.run(lambda s: pump(conn, s))
    return 0


class Confirms:
    """basic.ack and basic.nack from the broker, by delivery tag."""

    def __init__(self, ch):
        self.acked, self.nacked, self.top = set(), set(), 0
        ch.events["basic_ack"].add(lambda tag, multiple: self.add(self.acked, tag, multiple))
        ch.events["basic_nack"].add(lambda tag, multiple: self.add(self.nacked, tag, multiple))

    def add(self, into, tag, multiple):
        into.update(range(self.top + 1, tag + 1) if multiple else [tag])
        self.top = max(self.top, tag)


def publish_jobs(c, producer, confirms, queue, q):
    nacked, t0 = [], time.monotonic()
    for i in range(N):
        try:
            producer.publish({"job": i}, routing_key=q, serializer="json",
                             delivery_mode=1, retry=False)
        except MessageNacked:
            nacked.append(i)
    want = set(range(1, N + 1))
    if nacked or confirms.acked != want or confirms.nacked:
        c.fail("%d jobs published with confirm_publish: MessageNacked for %s; "
               "basic.ack for %d tags, basic.nack for %d"
               % (N, jc.ranges(nacked) or "none", len(confirms.acked),
                  len(confirms.nacked)))
    else:
        c.ok("%d transient jobs published, each confirmed with basic.ack (%.1f s)"
             % (N, time.monotonic() - t0))
    _, n, _ = queue.queue_declare(passive=True)
    if n != N:
        c.fail("%s holds %d messages after publishing, expected %d" % (q, n, N))


def unroutable(c, producer, confirms, returned, q):
    """mandatory, routed nowhere: basic.return, then basic.ack."""
    tag = confirms.top + 1
    try:
        producer.publish({"lost": True}, routing_key=q + ".nowhere",
                         serializer="json", delivery_mode=1, mandatory=True,
                         retry=False)
    except MessageNacked:
        c.fail("mandatory unroutable publish was nacked; RabbitMQ returns it and acks")
        return
    got = [(getattr(e, "reply_code", None), getattr(e, "reply_text", None), rk,
            json.loads(m.body)) for e, rk, m in returned]
    want = [(312, "NO_ROUTE", q + ".nowhere", {"lost": True})]
    if got != want or tag not in confirms.acked:
        c.fail("mandatory unroutable publish: returned %r, acked %s; expected %r, "
               "acked" % (got, tag in confirms.acked, want))
    else:
        c.ok("mandatory unroutable publish: on_return got 312 NO_ROUTE, then acked")


def persistent(c, ch, producer, q, roost):
    """RabbitMQ acks a persistent message for a durable queue once it is on
    disk; Roost, which has no disk store yet, nacks it and drops it."""
    pq = Queue(q + ".persistent", exchange=Exchange(""), durable=True)(ch)
    pq.declare()
    try:
        producer.publish({"persistent": True}, routing_key=pq.name,
                         serializer="json", delivery_mode=2, retry=False)
        result = "acked"
    except MessageNacked:
        result = "nacked"
    _, n, _ = pq.queue_declare(passive=True)
    # Both store it and ack it once it is on disk (docs/storage.md).
    want = ("acked", 1)
    who = "Roost" if roost else "RabbitMQ"
    if (result, n) != want:
        c.fail("persistent message to a durable queue: %s, queue holds %d; "
               "expected from %s: %s, %d" % (result, n, who, want[0], want[1]))
    else:
        c.ok("persistent message to a durable queue %s by %s%s"
             % (result, who, ""))
    pq.delete()


def second_worker(conn, q, first_acked):
    ch = conn.channel()
    got, pending = [], set(range(N)) - set(first_acked)

    def on_message(body, message):
        j = jc.job_id(body)
        got.append((j, bool(message.delivery_info.get("redelivered"))))
        pending.discard(j)
        message.ack()

    c = Consumer(ch, queues=[Queue(q, durable=True, no_declare=True)],
                 callbacks=[on_message], accept=["json"])
    c.qos(prefetch_count=PREFETCH)
    c.consume()
    deadline = time.monotonic() + 15
    while pending and time.monotonic() < deadline:
        pump(conn, 0.05)
    pump(conn, 0.2)  # anything extra shows up here
    c.cancel()
    ch.close()
    return got


def main():
    port, worker_queue = jc.args()
    if worker_queue:
        return worker(port, worker_queue)
    c = jc.Checks()
    q = jc.prefix("jobs-kombu") + ".jobs"
    with Connection(url(port), connect_timeout=10,
                    transport_options={"confirm_publish": True}) as conn:
        conn.connect()
        props = conn.connection.server_properties
        roost = jc.is_roost(props)
        c.ok("connected to %s %s%s" % (props.get("product"), props.get("version"),
                                       " (Roost %s)" % props.get("roost_version")
                                       if roost else ""))
        ch = conn.channel()
        confirms = Confirms(ch)
        returned = []
        producer = Producer(ch, exchange=Exchange(""),
                            on_return=lambda e, ex, rk, m: returned.append((e, rk, m)))
        queue = Queue(q, exchange=Exchange(""), routing_key=q, durable=True)(ch)
        queue.declare()
        publish_jobs(c, producer, confirms, queue, q)
        unroutable(c, producer, confirms, returned, q)
        persistent(c, ch, producer, q, roost)

        # The worker that dies.
        proc = jc.start_worker(__file__, port, q)
        report = jc.WorkerReport()
        try:
            jc.wait_holding(c, proc, report)
        finally:
            jc.kill_worker(c, proc, report)
        held = len(report.held) + len(report.extra)
        t0 = time.monotonic()
        want = N - len(report.acked)
        counts = jc.wait_requeued(lambda: tuple(queue.queue_declare(passive=True)[1:]),
                                  want)
        if counts != (want, 0):
            c.fail("after SIGKILL of a worker holding %d unacked: %d ready, %d "
                   "consumers, expected %d and 0" % (held, counts[0], counts[1], want))
        else:
            c.ok("after SIGKILL the %d unacked jobs are back in the queue (%.2f s)"
                 % (held, time.monotonic() - t0))

        second = second_worker(conn, q, [j for j, _ in report.acked])
        jc.check_jobs(c, report, second)
        _, n, consumers = queue.queue_declare(passive=True)
        if (n, consumers) != (0, 0):
            c.fail("at the end %s has %d messages, %d consumers, expected none"
                   % (q, n, consumers))
        else:
            c.ok("queue empty at the end")
        queue.delete()
    return summary("jobs-kombu", c.failures)


if __name__ == "__main__":
    run_main(main)
