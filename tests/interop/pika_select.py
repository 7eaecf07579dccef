#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pika SelectConnection (asynchronous) against a broker on 127.0.0.1:PORT.

Declares one exchange of each type, queues and bindings, publishes to each,
then consumes every queue at once on one channel with manual acks under
basic.qos prefetch (per consumer, global=false), acking in batches with
multiple=True, and checks that each queue gets exactly its messages once and
in order and that no consumer ever has more than the prefetch unacked;
then idles with a 1 s heartbeat and checks the broker sends heartbeats.
Usage: pika_select.py PORT
"""

import pika

from interop_plan import compare, make_plan, port_arg, prefix, run_main, summary

PREFETCH = 10
TIMEOUT = 30
HEARTBEAT = 1  # seconds; the broker must accept it and send heartbeats


class Test:
    def __init__(self, port):
        self.pfx = prefix("pika-select")
        (self.exchanges, self.queues, self.bindings, self.messages,
         self.expected) = make_plan(self.pfx)
        self.failures = []
        self.got = {q: [] for q in self.queues}
        self.pending = {q: [] for q in self.queues}
        self.tags = {}
        self.step = None
        self.finished = False
        params = pika.ConnectionParameters(
            host="127.0.0.1", port=port,
            credentials=pika.PlainCredentials("guest", "guest"),
            connection_attempts=1, socket_timeout=10, heartbeat=HEARTBEAT)
        self.conn = pika.SelectConnection(
            params, on_open_callback=self.on_open,
            on_open_error_callback=self.on_open_error,
            on_close_callback=self.on_conn_closed)

    # -- helpers -----------------------------------------------------------
    def fail(self, msg):
        print("FAIL: " + msg, flush=True)
        self.failures.append(msg)

    def ok(self, msg):
        print("ok: " + msg, flush=True)

    def run_steps(self, gen):
        """Drive a generator that yields functions taking a callback: each
        asynchronous operation resumes the generator with its result."""
        self.step = gen

        def resume(result=None):
            try:
                op = self.step.send(result)
            except StopIteration:
                return
            except Exception as e:
                self.fail("%s: %s" % (type(e).__name__, e))
                self.shutdown()
                return
            op(resume)
        resume()

    # -- connection --------------------------------------------------------
    def on_open(self, conn):
        p = conn.server_properties
        self.ok("connected to %s %s" % (p.get("product"), p.get("version")))
        self.timer = conn.ioloop.call_later(TIMEOUT, self.on_timeout)
        conn.channel(on_open_callback=self.on_channel)

    def on_open_error(self, conn, err):
        self.fail("connection failed: %r" % (err,))
        conn.ioloop.stop()

    def on_conn_closed(self, conn, reason):
        if not self.finished:
            self.fail("connection closed unexpectedly: %r" % (reason,))
        conn.ioloop.stop()

    def on_channel_closed(self, ch, reason):
        if not self.finished:
            self.fail("channel closed unexpectedly: %r" % (reason,))
            self.shutdown()

    def on_timeout(self):
        counts = ", ".join("%s %d/%d (unacked %d)"
                           % (q.rsplit(".", 1)[1], len(self.got[q]),
                              len(self.expected[q]), len(self.pending[q]))
                           for q in self.queues)
        self.fail("timed out after %ds: %s" % (TIMEOUT, counts))
        self.shutdown()

    def shutdown(self):
        if self.finished:
            return
        self.finished = True
        if self.conn.is_open:
            self.conn.close()
        else:
            self.conn.ioloop.stop()

    # -- the test ----------------------------------------------------------
    def on_channel(self, ch):
        self.ch = ch
        ch.add_on_close_callback(self.on_channel_closed)
        self.run_steps(self.setup(ch))

    def setup(self, ch):
        for name, typ in self.exchanges:
            yield lambda k, n=name, t=typ: ch.exchange_declare(
                n, exchange_type=t, durable=False, auto_delete=False, callback=k)
        for name in self.queues:
            frame = yield lambda k, n=name: ch.queue_declare(n, callback=k)
            if frame.method.queue != name:
                self.fail("declare-ok names %r, expected %r"
                          % (frame.method.queue, name))
        for queue, exchange, key, args in self.bindings:
            yield lambda k, q=queue, e=exchange, r=key, a=args: ch.queue_bind(
                q, e, routing_key=r, arguments=a, callback=k)
        self.ok("declared %d exchanges, %d queues, %d bindings"
                % (len(self.exchanges), len(self.queues), len(self.bindings)))
        yield lambda k: ch.basic_qos(prefetch_count=PREFETCH, callback=k)
        for exchange, key, headers, body in self.messages:
            ch.basic_publish(exchange, key, body.encode(),
                             pika.BasicProperties(headers=headers))
        self.ok("published %d messages" % len(self.messages))
        for name in self.queues:
            frame = yield lambda k, n=name: ch.basic_consume(
                n, lambda c, m, p, b, n=n: self.on_message(n, m, b),
                auto_ack=False, callback=k)
            self.tags[name] = frame.method.consumer_tag
        self.ok("%d consumers with prefetch %d" % (len(self.queues), PREFETCH))

    def on_message(self, queue, method, body):
        got, pending = self.got[queue], self.pending[queue]
        got.append(body.decode())
        pending.append(method.delivery_tag)
        if method.redelivered:
            self.fail("%s: redelivered=True on first delivery of %r" % (queue, body))
        if len(pending) > PREFETCH:
            self.fail("%s: %d unacked deliveries with prefetch %d"
                      % (queue, len(pending), PREFETCH))
        if len(pending) >= PREFETCH or len(got) >= len(self.expected[queue]):
            self.ch.basic_ack(pending[-1], multiple=True)
            del pending[:]
        if all(len(self.got[q]) >= len(self.expected[q]) for q in self.queues):
            if not getattr(self, "draining", False):
                self.draining = True
                # Give duplicates or strays a moment to show up.
                self.conn.ioloop.call_later(0.2, lambda: self.run_steps(self.finish()))

    def finish(self):
        ch = self.ch
        for name in self.queues:
            yield lambda k, n=name: ch.basic_cancel(self.tags[n], callback=k)
        bad = False
        for name in self.queues:
            diff = compare(name, self.got[name], self.expected[name])
            if diff:
                self.fail(diff)
                bad = True
        if not bad:
            self.ok("every queue got its %d messages once and in order"
                    % sum(len(v) for v in self.expected.values()))
        for name in self.queues:
            frame = yield lambda k, n=name: ch.queue_declare(n, passive=True, callback=k)
            m = frame.method
            if m.message_count or m.consumer_count:
                self.fail("%s after consuming: message_count %d consumer_count %d"
                          % (name, m.message_count, m.consumer_count))
        for name in self.queues:
            yield lambda k, n=name: ch.queue_delete(n, callback=k)
        for name, _ in self.exchanges:
            yield lambda k, n=name: ch.exchange_delete(n, callback=k)
        # Idle for a while: with a 1 s heartbeat, the broker sends heartbeat
        # frames (and accepts ours) and the connection stays up.
        hb = self.conn._heartbeat_checker
        before = hb._heartbeat_frames_received if hb else 0
        yield lambda k: self.conn.ioloop.call_later(3.0, k)
        if self.conn.params.heartbeat != HEARTBEAT or hb is None:
            self.fail("heartbeat negotiated to %r, asked for %d"
                      % (self.conn.params.heartbeat, HEARTBEAT))
        elif hb._heartbeat_frames_received - before < 2:
            self.fail("%d heartbeat frames from the broker in 3 s idle with a "
                      "%d s heartbeat" % (hb._heartbeat_frames_received - before,
                                           HEARTBEAT))
        elif not (self.conn.is_open and ch.is_open):
            self.fail("connection closed while idle with heartbeats")
        else:
            self.ok("%d s heartbeat: %d heartbeat frames from the broker in 3 s"
                    % (HEARTBEAT, hb._heartbeat_frames_received - before))
        self.conn.ioloop.remove_timeout(self.timer)
        self.finished = True
        ch.close()
        self.conn.close()


def main():
    t = Test(port_arg())
    t.conn.ioloop.start()
    return summary("pika_select", t.failures)


if __name__ == "__main__":
    run_main(main)
