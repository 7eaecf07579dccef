# SPDX-License-Identifier: Apache-2.0
"""Damaged definitions at start (issue 22, point 5). A data directory
whose operator made a user of their own and deleted guest holds a
durable queue with confirmed persistent messages; then defs.log is
replaced with random bytes, emptied, deleted, or cut in the middle of
its last record, and roostd starts on it.

Random bytes, empty, zeroed and deleted: the start stops with exit 1
and a log line naming --check-data, every segment still on disk,
nothing written; --check-data says CORRUPT.
A torn tail after good records: the start goes on and keeps what was
synced (the queue and its messages). In no case is guest made again.
With --accept-data-loss the damaged directory starts, as asked.
"""
import os
import shutil
import subprocess
import time

import pika

from hostile import (ROOSTD, Broker, Api, check, check_healthy,
                     publish_confirmed, run)

NMSGS = 50
OPS = ("ops", "ops-secret")


def segments(data):
    d = os.path.join(data, "msgs")
    return sorted(f for f in os.listdir(d) if f.endswith(".seg"))


def conn(port, user, password):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials(user, password),
        connection_attempts=1))


def can_login(port, user, password):
    try:
        conn(port, user, password).close()
        return True
    except pika.exceptions.AMQPError:
        return False


def make_store():
    """A stopped broker's data directory: user ops (administrator), no
    guest, queue 'kept' with NMSGS confirmed persistent messages, and a
    last definition (queue 'late') at the end of defs.log. Returns the
    directory."""
    b = Broker(mgmt=True).start()
    api = Api(b.mgmt_port)
    s, _ = api.call("PUT", "users/ops", {"password": OPS[1],
                                         "tags": "administrator"})
    assert s in (201, 204), s
    s, _ = api.call("PUT", "permissions/%2F/ops",
                    {"configure": ".*", "write": ".*", "read": ".*"})
    assert s in (201, 204), s
    api = Api(b.mgmt_port, *OPS)
    s, _ = api.call("DELETE", "users/guest")
    assert s == 204, s
    c = conn(b.port, *OPS)
    ch = c.channel()
    publish_confirmed(ch, "kept", NMSGS)
    ch.queue_declare("late", durable=True)
    c.close()
    b.stop()
    return b.data


def count(port, queue):
    c = conn(port, *OPS)
    n = c.channel().queue_declare(queue, passive=True).method.message_count
    c.close()
    return n


def refused(name, base, damage):
    """Damage a copy of 'base'; the start must stop, naming --check-data,
    and leave every segment where it was."""
    b = Broker()
    shutil.copytree(base, b.data)
    segs = segments(b.data)
    damage(os.path.join(b.data, "defs.log"))
    rc = b.start_refused()
    check(name + ": the start stops with exit 1", rc == 1,
          "exit %s: %s" % (rc, b.tail()))
    log = b.log_text()
    check(name + ": the log names --check-data", "--check-data" in log,
          b.tail())
    check(name + ": the log names defs.log", "defs.log" in log, b.tail())
    check(name + ": every segment still on disk",
          segs and segments(b.data) == segs,
          "before %s, after %s" % (segs, segments(b.data)))
    check(name + ": nothing recovered over it",
          "recovered 0 definitions" not in log, b.tail())
    r = subprocess.run([ROOSTD, "--check-data", b.data],
                       capture_output=True, text=True, timeout=30)
    check(name + ": --check-data says CORRUPT (exit 1)",
          r.returncode == 1 and "CORRUPT" in r.stdout,
          "exit %d: %s" % (r.returncode, r.stdout.strip()[-300:]))
    return b


def random_bytes(path):
    with open(path, "wb") as f:
        f.write(os.urandom(212))


def emptied(path):
    open(path, "wb").close()


def zeroed(path):
    n = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(b"\0" * n)


def deleted(path):
    os.unlink(path)


def torn(base):
    """defs.log cut in the middle of its last record (queue 'late')."""
    b = Broker()
    shutil.copytree(base, b.data)
    path = os.path.join(b.data, "defs.log")
    data = open(path, "rb").read()
    last = data.rfind(b"RSR1")
    with open(path, "r+b") as f:
        f.truncate(last + 20)
    b.start()
    check("torn tail: the log says the tail was cut",
          "torn record at offset %d cut" % last in b.log_text(), b.tail())
    check("torn tail: ops still logs in", can_login(b.port, *OPS), b.tail())
    check("torn tail: guest is not made again",
          not can_login(b.port, "guest", "guest"), b.tail())
    n = count(b.port, "kept")
    check("torn tail: the confirmed messages are kept", n == NMSGS,
          "%d of %d" % (n, NMSGS))
    check_healthy("torn tail", b, 64 * 1024)
    b.stop()


def accepted(base):
    """--accept-data-loss: the operator's word, the start goes on."""
    b = Broker(args=["--accept-data-loss"])
    shutil.copytree(base, b.data)
    random_bytes(os.path.join(b.data, "defs.log"))
    b.start()
    check("--accept-data-loss: the start goes on, saying what is lost",
          "--accept-data-loss" in b.log_text(), b.tail())
    check("--accept-data-loss: guest is not made again",
          not can_login(b.port, "guest", "guest"), b.tail())
    check_healthy("--accept-data-loss", b, 64 * 1024)
    b.stop()


def main():
    t0 = time.monotonic()
    base = make_store()
    check("setup: segments on disk", len(segments(base)) > 0,
          str(segments(base)))
    refused("random bytes", base, random_bytes)
    refused("emptied", base, emptied)
    refused("zeroed", base, zeroed)
    refused("deleted", base, deleted)
    torn(base)
    accepted(base)
    check("the cases took under 60 s", time.monotonic() - t0 < 60, "%.1f s" % (time.monotonic() - t0))


run(main)
