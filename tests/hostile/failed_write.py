# SPDX-License-Identifier: Apache-2.0
"""A disk that refuses writes with no free-space limit (issue 22, point
14): with disk_free_limit 0, writes failing with EIO (the
ROOST_TEST_IO_FAIL hook) raise the disk alarm, and its line says what
failed (the error and the file), not "free space below 0 bytes"; once
the disk takes writes again the publish is confirmed."""
import os
import struct
import time

from hostile import (Broker, check, check_healthy, connect, declare_queue,
                     method, publish, run, shortstr, until, until_method)


def main():
    b0 = Broker()
    fail = os.path.join(b0.tmp, "io-fail")
    b = Broker(args=["-s", "disk_free_limit.absolute=0"],
               env={"ROOST_TEST_IO_FAIL": fail})
    b.start()
    s = connect(b.port)
    s.sendall(method(1, 85, 10, b"\x00"))        # confirm.select
    if until_method(s, 85, 11) is None:
        raise RuntimeError("no confirm.select-ok")
    declare_queue(s, 1, "dq", durable=True)
    open(fail, "w").close()
    # delivery-mode 2: property flag bit 12, then the octet.
    publish(s, 1, "dq", b"hello", props=struct.pack(">HB", 0x1000, 2))
    mark = "disk resource limit alarm set"
    until(lambda: mark in b.log_text(), 10)
    line = next((x for x in b.log_text().splitlines() if mark in x), "")
    check("the alarm is raised", line != "", b.tail())
    check("its line does not blame free space",
          "free space below 0 bytes" not in line, line)
    check("its line names the error", "Input/output error" in line, line)
    check("its line names the file",
          os.path.join(b.data, "msgs", "") in line, line)
    os.unlink(fail)
    t0 = time.monotonic()
    ack = until_method(s, 60, 80, timeout=10)
    check("the publish is confirmed once writes succeed", ack is not None,
          "no basic.ack after %.1f s" % (time.monotonic() - t0))
    s.sendall(method(0, 10, 50, struct.pack(">H", 200) + shortstr("bye") +
                     struct.pack(">HH", 0, 0)))
    check_healthy("failed write", b, 64 * 1024)
    b.stop()


run(main)
