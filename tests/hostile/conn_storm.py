# SPDX-License-Identifier: Apache-2.0
"""10,000 connections opened and dropped at once (issue 22, point 16):
half send the protocol header, half nothing; all are closed together.
The broker stays up, serves a control client within 100 ms right after,
gives every descriptor back within 5 s, and its RSS stays under its
bound."""
import resource
import socket
import time

from hostile import Broker, check, check_healthy, control_ms, run

N = 10000


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < N + 200:
        print("conn_storm: needs %d descriptors, the hard limit is %d; "
              "skipped" % (N + 200, hard))
        raise SystemExit(77)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    b = Broker(nofile=(hard, hard)).start()
    base = b.open_fds()
    socks = []
    t0 = time.monotonic()
    for i in range(N):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", b.port))
        except BlockingIOError:
            pass
        socks.append(s)
    time.sleep(0.5)
    for i, s in enumerate(socks):
        if i % 2 == 0:
            try:
                s.send(b"AMQP\x00\x00\x09\x01")
            except OSError:
                pass
    opened = time.monotonic() - t0
    for s in socks:
        s.close()
    ms = control_ms(b.port)
    check("control client within 100 ms right after",
          ms is not None and ms <= 100, "%s ms (opening took %.1f s)" %
          (ms, opened))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and b.open_fds() > base + 2:
        time.sleep(0.1)
    check("every descriptor back within 5 s", b.open_fds() <= base + 2,
          "%d open, %d before" % (b.open_fds(), base))
    check_healthy("connection storm", b, 128 * 1024)
    b.stop()


run(main)
