# SPDX-License-Identifier: Apache-2.0
"""Slow-loris at every stage of AMQP (issue 22, point 16): 100 sockets
trickling one byte every 100 ms into the protocol header, and 100 open
connections each trickling a method frame, a content header and a body.
The handshake trickle is dropped at handshake_timeout (1 s here); the
others cost nothing: a control client is served within 100 ms while
they trickle, and the broker's RSS stays under its bound."""
import socket
import time

from hostile import (Broker, check, check_healthy, connect, control_ms,
                     method, header, frame, run, shortstr, struct)

N = 100


PORT = [0]           # where the control client goes


def trickle(socks, data, seconds):
    """One byte of 'data' to each socket every 100 ms for 'seconds';
    the sockets the broker closed."""
    closed = set()
    worst = 0.0
    for i in range(int(seconds * 10)):
        for k, s in enumerate(socks):
            if k in closed:
                continue
            try:
                s.send(data[i % len(data):i % len(data) + 1])
            except OSError:
                closed.add(k)
        ms = control_ms(PORT[0])
        worst = max(worst, ms if ms is not None else 1e9)
        time.sleep(0.1)
    return closed, worst


def main():
    b = Broker(["-s", "handshake_timeout=1000"]).start()
    PORT[0] = b.port
    socks = [socket.create_connection(("127.0.0.1", b.port))
             for _ in range(N)]
    closed, worst = trickle(socks, b"AMQP\x00\x00\x09\x01", 2.5)
    check("handshake trickle: dropped at handshake_timeout",
          len(closed) == N, "%d of %d dropped" % (len(closed), N))
    check("handshake trickle: control client within 100 ms throughout",
          worst <= 100, "worst %.1f ms" % worst)
    for s in socks:
        s.close()

    for stage, data in (
            ("method", method(1, 50, 10, struct.pack(">H", 0) +
                              shortstr("q" * 200) + b"\x00" +
                              struct.pack(">I", 0))),
            ("content header", header(1, 1000)),
            ("body", frame(3, 1, b"y" * 1000))):
        conns = [connect(b.port, heartbeat=0) for _ in range(N)]
        if stage != "method":
            for s in conns:
                s.sendall(method(1, 60, 40, struct.pack(">H", 0) +
                                 shortstr("") + shortstr("q") + b"\x00"))
            if stage == "body":
                for s in conns:
                    s.sendall(header(1, 1000))
        closed, worst = trickle(conns, data[:-1], 2.0)
        check(stage + " trickle: connections kept (they are not idle)",
              not closed, "%d closed" % len(closed))
        check(stage + " trickle: control client within 100 ms throughout",
              worst <= 100, "worst %.1f ms" % worst)
        check_healthy(stage + " trickle", b, 64 * 1024)
        for s in conns:
            s.close()
    b.stop()


run(main)
