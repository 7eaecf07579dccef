# SPDX-License-Identifier: Apache-2.0
"""A stream under kill -9 (issue 24, point 10): a publisher with confirms
and a named consumer (x-stream-consumer-name, acking each delivery)
work on one stream while roostd is killed with SIGKILL at a random
moment, six rounds. After each restart: every confirmed message is in
the stream, once, at offsets 0..N-1 in order with nothing missing; and
the named consumer resumes at or before its first unacked offset (it
never skips a message), never before where it resumed the round
before.

    stream_crash.py --roostd ROOSTD --dir DIR [--rounds N]

Prints "PASS name" / "FAIL name: why".
"""
import argparse
import os
import random
import signal
import threading
import time

import pika

from checks import Roostd, check, connect, done, read_stream

ap = argparse.ArgumentParser()
ap.add_argument("--roostd", required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--rounds", type=int, default=6)
args = ap.parse_args()

Q = "sx"
rd = Roostd(args.roostd, args.dir,
            sets=["management.tcp.port=0", "prometheus.tcp.port=-1",
                  "paging.window=64"],
            env={"ROOST_TEST_SYNC_DELAY_US": "1000"})
start = rd.start


def read_all(port):
    """[(offset, body)] of the whole stream, from first."""
    return read_stream(port, Q)


port = start()
c = connect(port)
c.channel().queue_declare(Q, durable=True,
                          arguments={"x-queue-type": "stream"})
c.close()
confirmed = set()
seq = 0
resumed_before = 0
random.seed(int(os.environ.get("STREAM_CRASH_SEED", time.time())))
for rnd in range(1, args.rounds + 1):
    acked = []                  # offsets acked this round, in order
    resumed = []

    def on(chx, m, p, b):
        off = (p.headers or {}).get("x-stream-offset")
        if not resumed:
            resumed.append(off)
        chx.basic_ack(m.delivery_tag)
        acked.append(off)
    killer = threading.Timer(random.uniform(0.4, 2.0),
                             lambda: rd.proc.send_signal(signal.SIGKILL))
    try:
        pc = connect(port)
        pch = pc.channel()
        pch.confirm_delivery()
        cc = connect(port)
        cch = cc.channel()
        cch.basic_qos(prefetch_count=50)
        cch.basic_consume(Q, on, arguments={
            "x-stream-consumer-name": "cx", "x-stream-offset": "first"})
        killer.start()
        while True:
            seq += 1
            pch.basic_publish("", Q, b"p%d" % seq)
            confirmed.add(b"p%d" % seq)
            cc.process_data_events(time_limit=0)
    except (pika.exceptions.AMQPError, OSError):
        pass
    killer.cancel()
    rd.proc.wait()
    port = start()
    got = read_all(port)
    offs = [g[0] for g in got]
    bodies = [g[1] for g in got]
    check("round %d: offsets 0..%d in order, none missing" % (rnd, len(got)
                                                              - 1),
          offs == list(range(len(got))), offs[:3] + offs[-3:])
    missing = confirmed - set(bodies)
    check("round %d: all %d confirmed messages there" % (rnd, len(confirmed)),
          not missing, sorted(missing)[:5])
    check("round %d: each message once" % rnd,
          len(bodies) == len(set(bodies)), len(bodies) - len(set(bodies)))
    if rnd > 1:
        check("round %d: the named consumer resumed at or after its last "
              "resume (%s >= %d)" % (rnd, resumed[:1], resumed_before),
              resumed and resumed[0] >= resumed_before, resumed)
    # where it resumes now: at or before the first offset it did not ack
    c = connect(port)
    ch = c.channel()
    ch.basic_qos(prefetch_count=1)
    first = []
    ch.basic_consume(Q, lambda chx, m, p, b: first.append(
        (p.headers or {}).get("x-stream-offset")), arguments={
            "x-stream-consumer-name": "cx"})
    end = time.time() + 3
    while not first and time.time() < end:
        c.process_data_events(time_limit=0.05)
    c.close()
    unacked = acked[-1] + 1 if acked else (resumed[0] if resumed else 0)
    check("round %d: resumes at %s, at or before the first unacked %d "
          "(%d acked this round)" % (rnd, first[:1], unacked, len(acked)),
          first and first[0] <= unacked, first)
    resumed_before = first[0] if first else 0
rd.proc.send_signal(signal.SIGTERM)
rd.proc.wait()
done()
