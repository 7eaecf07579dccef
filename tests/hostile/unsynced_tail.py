# SPDX-License-Identifier: Apache-2.0
"""--check-data after a power cut (issue 22, point 14). The I/O thread
syncs each write before the next, so a power cut that reordered
unsynced writes can damage only the newest segment's last write, which
was never confirmed: --check-data calls that an unsynced tail (exit 0)
and recovery starts over it, and it stays so after later starts wrote
newer segments (recovery marked the segment); the same damage after a clean stop, or
damage with more than one write (16 MiB) after it, is damage to synced
data: CORRUPT (exit 1)."""
import os
import shutil
import subprocess

import pika

from hostile import ROOSTD, Broker, check, publish_confirmed, run

SEG = os.path.join("msgs", "0000000001.seg")


def store(n, size, clean):
    """A data directory with n confirmed messages of 'size' bytes, left
    by a clean stop or by kill -9."""
    b = Broker().start()
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, connection_attempts=1))
    ch = c.channel()
    publish_confirmed(ch, "q", 0)
    for i in range(n):
        ch.basic_publish("", "q", bytes([65 + i % 26]) * size,
                         pika.BasicProperties(delivery_mode=2))
    c.close()
    if clean:
        b.stop()
    else:
        b.kill9()
    return b.data


def data_end(path):
    with open(path, "rb") as f:
        data = f.read()
    return len(data.rstrip(b"\0"))


def damaged(base, start, length):
    """A copy of 'base' with 'length' bytes zeroed at 'start' (negative:
    from the end of the written data) in segment 1."""
    b = Broker()
    shutil.copytree(base, b.data)
    path = os.path.join(b.data, SEG)
    at = start if start >= 0 else data_end(path) + start
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"\0" * length)
    return b


def check_data(b):
    r = subprocess.run([ROOSTD, "--check-data", b.data],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout


def main():
    crashed = store(20, 100, clean=False)
    b = damaged(crashed, -300, 100)
    rc, out = check_data(b)
    check("crash, damage in the last write: --check-data exit 0",
          rc == 0, "exit %d: %s" % (rc, out[-600:]))
    check("crash, damage in the last write: called an unsynced tail",
          "an unsynced tail, not corruption" in out, out[-600:])
    b.start()
    check("crash, damage in the last write: recovery starts over it",
          b.alive(), b.tail())
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, connection_attempts=1))
    ch = c.channel()
    for i in range(5):
        ch.basic_publish("", "q", b"after", pika.BasicProperties(
            delivery_mode=2))
    c.close()
    b.stop()
    segs = sorted(f for f in os.listdir(os.path.join(b.data, "msgs"))
                  if f.endswith(".seg"))
    check("after recovery, newer writes went to a newer segment",
          len(segs) >= 2 and segs[0] == "0000000001.seg", str(segs))
    rc, out = check_data(b)
    check("a clean stop later: the old segment's tail is still an "
          "unsynced tail (exit 0)", rc == 0 and
          "an unsynced tail, not corruption" in out,
          "exit %d: %s" % (rc, out[-600:]))

    cleanly = store(20, 100, clean=True)
    b = damaged(cleanly, -300, 100)
    rc, out = check_data(b)
    check("clean stop, the same damage: CORRUPT (exit 1)",
          rc == 1 and "CORRUPT" in out, "exit %d: %s" % (rc, out[-600:]))

    big = store(20, 1024 * 1024, clean=False)
    b = damaged(big, 200, 100)
    rc, out = check_data(b)
    check("crash, damage with 20 MiB written after it: CORRUPT (exit 1)",
          rc == 1 and "damage to synced data" in out,
          "exit %d: %s" % (rc, out[-600:]))


run(main)
