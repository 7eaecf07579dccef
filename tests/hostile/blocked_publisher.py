# SPDX-License-Identifier: Apache-2.0
"""A heartbeat-0 client holding a blocked publisher (issue 22, point
16). Under a disk alarm a publisher that negotiated heartbeat 0 and never
reads is blocked mid-publish with its content unfinished; it must cost
nothing while it waits (a consumer is served, a control client within
100 ms, RSS under its bound), and once the alarm clears (the limit is
lowered and roostd reloaded with SIGHUP) what it sent is published and
every other publisher goes on."""
import os
import signal
import time

from hostile import (Broker, check, check_healthy, connect, declare_queue,
                     frame, header, method, publish, queue_depth, run,
                     shortstr, struct)


def main():
    b = Broker()
    conf = os.path.join(b.tmp, "roost.conf")
    with open(conf, "w") as f:
        f.write("disk_free_limit.absolute = 1000000GB\n")
    b.args += ["-c", conf]
    b.start()
    c = connect(b.port)
    declare_queue(c, 1, "q")
    s = connect(b.port, heartbeat=0, rcvbuf=4096)
    s.sendall(method(1, 60, 40, struct.pack(">H", 0) + shortstr("") +
                     shortstr("q") + b"\x00") + header(1, 2000) +
              frame(3, 1, b"z" * 1000))
    time.sleep(1.0)
    check("blocked: the publish waits", queue_depth(c, 1, "q") == 0,
          b.tail())
    check_healthy("blocked", b, 64 * 1024)
    with open(conf, "w") as f:
        f.write("disk_free_limit.absolute = 1\n")
    b.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and \
            "disk resource limit alarm cleared" not in b.log_text():
        time.sleep(0.1)
    s.sendall(frame(3, 1, b"z" * 1000))
    publish(c, 1, "q", b"other")
    deadline = time.monotonic() + 5
    depth = None
    while time.monotonic() < deadline:
        depth = queue_depth(c, 1, "q")
        if depth == 2:
            break
        time.sleep(0.1)
    check("unblocked: both publishes arrive", depth == 2,
          "q holds %s; %s" % (depth, b.tail()))
    check_healthy("unblocked", b, 64 * 1024)
    s.close()
    c.close()
    b.stop()


run(main)
