#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Declare N queues fast over one raw AMQP 0-9-1 connection (queue.declare
with no-wait, written in batches), for tests/integration/prometheus.sh and bench/prom-stall.sh.
Usage: declare_queues.py PORT N [PREFIX] [--messages M] [--vhost V]
[--delete]: M messages are published to each of the first 1,000 queues
so their families are not all zero; --delete deletes the N queues
instead."""
import socket
import struct
import sys


def frame(ftype, channel, payload):
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def method(cls, meth, args):
    return frame(1, cls_ch[0], struct.pack(">HH", cls, meth) + args)


def shortstr(s):
    return bytes([len(s)]) + s


def longstr(s):
    return struct.pack(">I", len(s)) + s


def read_frame(sock, buf):
    while True:
        if len(buf) >= 7:
            ftype, ch, size = struct.unpack(">BHI", buf[:7])
            if len(buf) >= size + 8:
                payload = bytes(buf[7:7 + size])
                del buf[:size + 8]
                return ftype, ch, payload
        data = sock.recv(65536)
        if not data:
            raise SystemExit("connection closed")
        buf += data


def expect(sock, buf, cls, meth):
    while True:
        ftype, ch, payload = read_frame(sock, buf)
        if ftype != 1:
            continue
        c, m = struct.unpack(">HH", payload[:4])
        if (c, m) == (cls, meth):
            return payload
        raise SystemExit("expected %d.%d, got %d.%d: %r" % (cls, meth, c, m,
                                                            payload[:80]))


cls_ch = [0]
port, n = int(sys.argv[1]), int(sys.argv[2])
prefix = (sys.argv[3] if len(sys.argv) > 3 and not sys.argv[3].startswith("--")
          else "bench-q-").encode()
messages = int(sys.argv[sys.argv.index("--messages") + 1]) \
    if "--messages" in sys.argv else 0
vhost = sys.argv[sys.argv.index("--vhost") + 1].encode() \
    if "--vhost" in sys.argv else b"/"
delete = "--delete" in sys.argv
s = socket.create_connection(("127.0.0.1", port))
buf = bytearray()
s.sendall(b"AMQP\x00\x00\x09\x01")
expect(s, buf, 10, 10)
s.sendall(method(10, 11, struct.pack(">I", 0) + shortstr(b"PLAIN") +
                 longstr(b"\x00guest\x00guest") + shortstr(b"en_US")))
tune = expect(s, buf, 10, 30)
ch_max, fmax, hb = struct.unpack(">HIH", tune[4:12])
s.sendall(method(10, 31, struct.pack(">HIH", ch_max, fmax, 0)))
s.sendall(method(10, 40, shortstr(vhost) + shortstr(b"") + b"\x00"))
expect(s, buf, 10, 41)
cls_ch[0] = 1
s.sendall(method(20, 10, shortstr(b"")))
expect(s, buf, 20, 11)
batch = []
for i in range(n):
    name = prefix + str(i).encode()
    if delete:
        # queue.delete: reserved short, queue, bits: no-wait (bit 2)
        batch.append(method(50, 40, struct.pack(">H", 0) + shortstr(name) +
                            b"\x04"))
    else:
        # reserved short, queue, bits: no-wait (bit 4), no arguments
        batch.append(method(50, 10, struct.pack(">H", 0) + shortstr(name) +
                            b"\x10" + struct.pack(">I", 0)))
    if len(batch) == 2000:
        s.sendall(b"".join(batch))
        batch = []
if batch:
    s.sendall(b"".join(batch))
for i in range(min(n, 1000) if messages and not delete else 0):
    name = prefix + str(i).encode()
    out = []
    for _ in range(messages):
        out.append(method(60, 40, struct.pack(">H", 0) + shortstr(b"") +
                          shortstr(name) + b"\x00"))
        out.append(frame(2, 1, struct.pack(">HHQH", 60, 0, 2, 0)))
        out.append(frame(3, 1, b"hi"))
    s.sendall(b"".join(out))
# a synchronous method so that every method above has been handled
s.sendall(method(50, 10, struct.pack(">H", 0) + shortstr(b"sync") +
                 b"\x00" + struct.pack(">I", 0)))
expect(s, buf, 50, 11)
s.sendall(method(50, 40, struct.pack(">H", 0) + shortstr(b"sync") + b"\x00"))
expect(s, buf, 50, 41)
s.sendall(method(20, 40, struct.pack(">H", 200) + shortstr(b"bye") +
                 struct.pack(">HH", 0, 0)))
expect(s, buf, 20, 41)
cls_ch[0] = 0
s.sendall(method(10, 50, struct.pack(">H", 200) + shortstr(b"bye") +
                 struct.pack(">HH", 0, 0)))
expect(s, buf, 10, 51)
print("%s %d queues" % ("deleted" if delete else "declared", n))
