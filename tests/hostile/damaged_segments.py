# SPDX-License-Identifier: Apache-2.0
"""Damaged message segments and an open data directory at start (issue
22, point 12). A segment that was emptied (truncated to nothing) or
zeroed loses its messages: the start says which segment, not nothing.
`msgs` or `scratch` as a plain file stops the start with exit 1 and a
line that says what is wrong. A new data directory is made 0700, and a
start on one its group or others can reach warns."""
import os
import shutil
import stat

import pika

from hostile import Broker, check, check_healthy, publish_confirmed, run

NMSGS = 20


def make_store():
    """A stopped broker's data directory: 'kept' holds NMSGS confirmed
    persistent messages in segment 1."""
    b = Broker().start()
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, connection_attempts=1))
    publish_confirmed(c.channel(), "kept", NMSGS)
    c.close()
    b.stop()
    return b


def copy(base):
    b = Broker()
    shutil.copytree(base.data, b.data)
    os.chmod(b.data, 0o700)
    return b


def seg1(b):
    return os.path.join(b.data, "msgs", "0000000001.seg")


def emptied_segment(base, name, damage):
    b = copy(base)
    damage(seg1(b))
    b.start()
    log = b.log_text()
    check(name + ": the start names the segment",
          "0000000001.seg holds no record" in log, b.tail())
    check(name + ": and says its messages are lost",
          "messages it held are lost" in log, b.tail())
    check_healthy(name, b, 64 * 1024)
    b.stop()


def refused(base, sub):
    b = copy(base)
    path = os.path.join(b.data, sub)
    shutil.rmtree(path, ignore_errors=True)
    with open(path, "w") as f:
        f.write("not a directory\n")
    rc = b.start_refused()
    check("%s as a plain file: exit 1" % sub, rc == 1,
          "exit %s: %s" % (rc, b.tail()))
    check("%s as a plain file: the log says so" % sub,
          "%s is not a directory (a plain file)" % path in b.log_text(),
          b.tail())


def main():
    os.umask(0o022)
    base = make_store()
    mode = stat.S_IMODE(os.stat(base.data).st_mode)
    check("a new data directory is 0700", mode == 0o700, oct(mode))
    check("a 0700 data directory: no warning",
          "accessible by its group or others" not in base.log_text(),
          base.tail())

    emptied_segment(base, "segment truncated to 0",
                    lambda p: open(p, "r+b").truncate(0))

    def zero(p):
        n = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.write(b"\0" * n)
    emptied_segment(base, "segment zeroed", zero)

    refused(base, "msgs")
    refused(base, "scratch")

    b = copy(base)
    os.chmod(b.data, 0o755)
    b.start()
    check("a 0755 data directory: a warning names it",
          "data directory %s is accessible by its group or others "
          "(mode 0755)" % b.data in b.log_text(), b.tail())
    b.stop()


run(main)
