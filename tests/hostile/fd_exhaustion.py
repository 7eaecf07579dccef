# SPDX-License-Identifier: Apache-2.0
"""Out of file descriptors (issue 22, point 1). With a descriptor limit
of 64, idle sockets that never send a byte fill the table; the next
accept fails with EMFILE on every listener. Each must back off (no more
than two "reducing accept rate" lines and 64 KiB of log in 3 s, under
0.5 s of CPU), and once the idle sockets go, serve a control client
within 100 ms. At start the soft limit is raised to the hard one, and a
connection_max that does not fit it is lowered with a warning."""
import re
import socket
import time

from hostile import Broker, check, check_healthy, control_ms, run

LIMIT = 64
WATCH_S = 3.0


def flood(port, n):
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), 2))
        except OSError:
            break
    return socks


def exhaust(name, b, port):
    log0, cpu0 = b.log_bytes(), b.cpu_seconds()
    socks = flood(port, LIMIT + 16)
    time.sleep(0.5)
    check(name + ": the broker's table is full", b.open_fds() >= LIMIT - 1,
          "%d descriptors open" % b.open_fds())
    time.sleep(WATCH_S)
    grew = b.log_bytes() - log0
    cpu = b.cpu_seconds() - cpu0
    lines = b.log_text().count("reducing accept rate")
    check(name + ": log grows under 64 KiB in %g s" % WATCH_S,
          grew < 64 * 1024, "%d bytes" % grew)
    check(name + ": CPU under 0.5 s in %g s" % WATCH_S, cpu < 0.5,
          "%.2f s" % cpu)
    check(name + ": the back-off logged, at most twice", 1 <= lines <= 2,
          "%d lines" % lines)
    for s in socks:
        s.close()
    # The closed sockets still in the backlog are taken and dropped.
    deadline = time.monotonic() + 5
    ms = None
    while time.monotonic() < deadline:
        ms = control_ms(b.port)
        if ms is not None:
            break
        time.sleep(0.1)
    check(name + ": served again once the descriptors are back",
          ms is not None, b.tail())
    check_healthy(name, b, 64 * 1024)
    return lines


def main():
    b = Broker(nofile=LIMIT, mgmt=True).start()
    exhaust("AMQP listener", b, b.port)
    b.stop()

    b = Broker(nofile=LIMIT, mgmt=True).start()
    exhaust("management listener", b, b.mgmt_port)
    text = b.log_text()
    check("management listener: evhttp's own accept error never logged",
          "Error from accept() call" not in text, b.tail())
    b.stop()

    b = Broker(["-s", "prometheus.tcp.port=0"], nofile=LIMIT,
               mgmt=True).start()
    prom = int(re.search(r"Prometheus metrics on http://[^ ]*:(\d+)/",
                         b.log_text()).group(1))
    exhaust("Prometheus listener", b, prom)
    check("Prometheus listener: evhttp's own accept error never logged",
          "Error from accept() call" not in b.log_text(), b.tail())
    b.stop()

    b = Broker(nofile=(LIMIT, 4096)).start()
    with open("/proc/%d/limits" % b.proc.pid) as f:
        row = [line for line in f if line.startswith("Max open files")][0]
    check("soft limit raised to the hard one", row.split()[3] == "4096", row)
    text = b.log_text()
    check("connection_max lowered, naming both numbers",
          "connection_max 65536" in text and "open file limit of 4096" in text
          and "lowered to 3712" in text, b.tail())
    check_healthy("raised limit", b, 64 * 1024)
    b.stop()


run(main)
