# SPDX-License-Identifier: Apache-2.0
"""Lying and hoarding publishers (issue 22, point 2). Content headers
that announce 128 MiB bodies and never send them cost nothing: ten of
them on a heartbeat-0 connection, against a 512 MiB memory watermark,
raise no alarm, and another publisher's confirms still come. Bodies that
do arrive but never finish are bounded per connection at twice
max_message_size: past it that connection is no longer read (a publish
it sends after is not routed), while every other client goes on."""
import time

from hostile import (Broker, check, check_healthy, confirm_select, connect,
                     declare_queue, frame, header, method, open_channel,
                     publish, queue_depth, run, shortstr, struct,
                     until_method)


def start_content(s, ch, size):
    s.sendall(method(ch, 60, 40, struct.pack(">H", 0) + shortstr("") +
                     shortstr("q") + b"\x00") + header(ch, size))


def confirmed(port):
    c = connect(port)
    confirm_select(c, 1)
    publish(c, 1, "q", b"control")
    ok = until_method(c, 60, 80, timeout=3) is not None
    c.close()
    return ok


def announced(b):
    s = connect(b.port, heartbeat=0)
    declare_queue(s, 1, "q")
    for ch in range(2, 12):
        open_channel(s, ch, wait=False)
        start_content(s, ch, 128 * 1024 * 1024)
    time.sleep(0.5)
    check("announced: a publisher's confirm still comes", confirmed(b.port),
          b.tail())
    check("announced: no memory alarm",
          "memory resource limit alarm set" not in b.log_text(), b.tail())
    check_healthy("announced", b, 64 * 1024)
    s.close()


def hoarded(b):
    s = connect(b.port, heartbeat=0)
    declare_queue(s, 1, "q")
    chunk = b"x" * (128 * 1024 - 8)
    for ch in (2, 3, 4):
        open_channel(s, ch)
        start_content(s, ch, 1024 * 1024)
        for _ in range(7):                 # 896 KiB of each 1 MiB body
            s.sendall(frame(3, ch, chunk))
    time.sleep(0.5)
    # Sent after the bound: not read, so not routed.
    publish(s, 1, "q", b"after")
    time.sleep(0.5)
    c = connect(b.port)
    depth = queue_depth(c, 1, "q")
    check("hoarded: past twice max_message_size the connection is not read",
          depth == 0, "q holds %s" % depth)
    check("hoarded: said once in the log",
          b.log_text().count("unfinished contents hold") == 1, b.tail())
    publish(c, 1, "q", b"control")
    time.sleep(0.2)
    check("hoarded: other clients go on", queue_depth(c, 1, "q") == 1,
          b.tail())
    check_healthy("hoarded", b, 96 * 1024)
    c.close()
    s.close()


def main():
    b = Broker(["-s", "vm_memory_high_watermark.absolute=536870912"]).start()
    announced(b)
    b.stop()
    b = Broker(["-s", "max_message_size=1048576"]).start()
    hoarded(b)
    b.stop()


run(main)
