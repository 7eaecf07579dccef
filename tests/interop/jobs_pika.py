#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A job queue whose worker dies, with pika's BlockingConnection, against a
broker on 127.0.0.1:PORT.

The producer publishes 2000 transient jobs to a durable queue in confirm
mode (confirm_delivery) and checks every one is acked; a mandatory publish
nobody takes raises UnroutableError (returned 312 NO_ROUTE, then acked). A
persistent message for a durable queue is acked once it is on disk, by
RabbitMQ and Roost alike, and is then in the queue. A worker process
(this script with --worker) takes jobs under prefetch 50 with manual acks,
acks 100, holds the next 50 unacked and is killed with SIGKILL: the broker
requeues those 50. A second worker takes the rest: every job is acked
exactly once, the dead worker's jobs come back first, in order, with
redelivered=true, then the others in order; the queue ends empty.
Usage: jobs_pika.py PORT
"""
import time

import pika

import jobs_common as jc
from interop_plan import run_main, summary
from jobs_common import N, PREFETCH


def params(port):
    return pika.ConnectionParameters(
        host="127.0.0.1", port=port,
        credentials=pika.PlainCredentials("guest", "guest"),
        connection_attempts=1, socket_timeout=10, blocked_connection_timeout=30)


def worker(port, queue):
    """The worker that dies: see jobs_common.DyingWorker."""
    conn = pika.BlockingConnection(params(port))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=PREFETCH)
    w = jc.DyingWorker()

    def on_msg(c, method, props, body):
        if w.on_delivery(jc.job_id(body), method.redelivered):
            c.basic_ack(method.delivery_tag)

    ch.basic_consume(queue, on_msg, auto_ack=False)
    w.run(lambda s: conn.process_data_events(time_limit=s))
    return 0


def publish_jobs(c, ch, q):
    acked, nacked, returned, t0 = 0, [], [], time.monotonic()
    for i in range(N):
        try:
            ch.basic_publish("", q, jc.job_body(i),
                             pika.BasicProperties(delivery_mode=1,
                                                  content_type="application/json"))
            acked += 1
        except pika.exceptions.NackError:
            nacked.append(i)
        except pika.exceptions.UnroutableError:
            returned.append(i)
    if acked != N or nacked or returned:
        c.fail("%d jobs published in confirm mode: %d acked, nacked: %s, returned: %s"
               % (N, acked, jc.ranges(nacked) or "none", jc.ranges(returned) or "none"))
    else:
        c.ok("%d transient jobs published, each confirmed with basic.ack (%.1f s)"
             % (N, time.monotonic() - t0))
    n = ch.queue_declare(q, durable=True, passive=True).method.message_count
    if n != N:
        c.fail("%s holds %d messages after publishing, expected %d" % (q, n, N))


def unroutable(c, ch, q):
    """mandatory, routed nowhere: basic.return, then basic.ack."""
    try:
        ch.basic_publish("", q + ".nowhere", b"lost", mandatory=True)
        c.fail("mandatory publish to an unroutable key: no UnroutableError")
    except pika.exceptions.UnroutableError as e:
        m = e.messages[0] if e.messages else None
        got = m and (m.method.reply_code, m.method.reply_text,
                     m.method.routing_key, m.body)
        want = (312, "NO_ROUTE", q + ".nowhere", b"lost")
        if len(e.messages) != 1 or got != want:
            c.fail("returned: %d messages, first %r, expected %r"
                   % (len(e.messages), got, want))
        else:
            c.ok("mandatory unroutable publish: returned 312 NO_ROUTE, then acked "
                 "(UnroutableError)")
    except pika.exceptions.NackError:
        c.fail("mandatory unroutable publish was nacked; RabbitMQ returns it and acks")


def persistent(c, ch, q, roost):
    """A persistent message for a durable queue is acked once it is on
    disk, and is in the queue."""
    pq = q + ".persistent"
    ch.queue_declare(pq, durable=True)
    try:
        ch.basic_publish("", pq, b"persistent", pika.BasicProperties(delivery_mode=2))
        result = "acked"
    except pika.exceptions.NackError:
        result = "nacked"
    except pika.exceptions.UnroutableError:
        result = "returned"
    n = ch.queue_declare(pq, durable=True, passive=True).method.message_count
    # Both store it and ack it once it is on disk (docs/storage.md).
    want = ("acked", 1)
    who = "Roost" if roost else "RabbitMQ"
    if (result, n) != want:
        c.fail("persistent message to a durable queue: %s, queue holds %d; "
               "expected from %s: %s, %d" % (result, n, who, want[0], want[1]))
    else:
        c.ok("persistent message to a durable queue %s by %s" % (result, who))
    ch.queue_delete(pq)


def second_worker(conn, q, first_acked):
    ch = conn.channel()
    ch.basic_qos(prefetch_count=PREFETCH)
    got, pending = [], set(range(N)) - set(first_acked)

    def on_msg(c, method, props, body):
        j = jc.job_id(body)
        got.append((j, method.redelivered))
        pending.discard(j)
        c.basic_ack(method.delivery_tag)

    tag = ch.basic_consume(q, on_msg, auto_ack=False)
    deadline = time.monotonic() + 15
    while pending and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.process_data_events(time_limit=0.2)  # anything extra shows up here
    ch.basic_cancel(tag)
    ch.close()
    return got


def main():
    port, worker_queue = jc.args()
    if worker_queue:
        return worker(port, worker_queue)
    c = jc.Checks()
    q = jc.prefix("jobs-pika") + ".jobs"
    conn = pika.BlockingConnection(params(port))
    props = conn._impl.server_properties
    roost = jc.is_roost(props)
    c.ok("connected to %s %s%s" % (props.get("product"), props.get("version"),
                                   " (Roost %s)" % props.get("roost_version")
                                   if roost else ""))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(q, durable=True)
    publish_jobs(c, ch, q)
    unroutable(c, ch, q)
    persistent(c, ch, q, roost)

    # The worker that dies.
    proc = jc.start_worker(__file__, port, q)
    report = jc.WorkerReport()
    try:
        jc.wait_holding(c, proc, report)
    finally:
        jc.kill_worker(c, proc, report)
    held = len(report.held) + len(report.extra)
    t0 = time.monotonic()
    counts = jc.wait_requeued(
        lambda: (lambda m: (m.message_count, m.consumer_count))(
            ch.queue_declare(q, durable=True, passive=True).method),
        N - len(report.acked))
    if counts != (N - len(report.acked), 0):
        c.fail("after SIGKILL of a worker holding %d unacked: %d ready, %d "
               "consumers, expected %d and 0" % (held, counts[0], counts[1],
                                                 N - len(report.acked)))
    else:
        c.ok("after SIGKILL the %d unacked jobs are back in the queue (%.2f s)"
             % (held, time.monotonic() - t0))

    second = second_worker(conn, q, [j for j, _ in report.acked])
    jc.check_jobs(c, report, second)
    m = ch.queue_declare(q, durable=True, passive=True).method
    if (m.message_count, m.consumer_count) != (0, 0):
        c.fail("at the end %s has %d messages, %d consumers, expected none"
               % (q, m.message_count, m.consumer_count))
    else:
        c.ok("queue empty at the end")
    ch.queue_delete(q)
    conn.close()
    return summary("jobs-pika", c.failures)


if __name__ == "__main__":
    run_main(main)
