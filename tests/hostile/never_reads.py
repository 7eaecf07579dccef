# SPDX-License-Identifier: Apache-2.0
"""Clients that never read (issue 22, point 3). With a 4 KiB receive
buffer and nothing read: 3,000 basic.get + basic.reject requeue of one
1 MiB message; 200 mandatory publishes of 256 KiB bodies that return;
a consumer with no prefetch limit on 200 messages of 256 KiB. Each
connection's output stays under the hard bound (4 x
consumer_output_high_watermark, 16 MiB, plus the one reply that crossed
it) because the broker stops reading it, no memory alarm is raised (a
body referenced many times by one output counts once, in its message),
and another publisher's confirms still come."""
import time

from hostile import (Api, Broker, basic_get, basic_reject, check,
                     check_healthy, confirm_select, connect, declare_queue,
                     frame, header, method, publish, run, shortstr, struct,
                     until_method)

MIB = 1024 * 1024
BOUND = 16 * MIB + 2 * MIB


def send_pend(api):
    st, conns = api.call("GET", "connections")
    return max((c.get("send_pend", 0) for c in conns), default=0) \
        if st == 200 else None


def healthy(name, b, api):
    time.sleep(1.5)
    pend = send_pend(api)
    check(name + ": output under the hard bound",
          pend is not None and pend <= BOUND, "send_pend %s" % pend)
    check(name + ": no memory alarm",
          "memory resource limit alarm set" not in b.log_text(), b.tail())
    c = connect(b.port)
    confirm_select(c, 1)
    publish(c, 1, "control", b"x")
    check(name + ": a publisher's confirm still comes",
          until_method(c, 60, 80, timeout=3) is not None, b.tail())
    c.close()
    check_healthy(name, b, 128 * 1024)


def get_reject(b, api):
    s = connect(b.port)
    declare_queue(s, 1, "big")
    publish(s, 1, "big", b"b" * MIB)
    time.sleep(0.3)
    s.close()
    s = connect(b.port, rcvbuf=4096)
    batch = b"".join(basic_get(1, "big") + basic_reject(1, tag)
                     for tag in range(1, 3001))
    pipeline(s, batch)
    healthy("get and reject", b, api)
    s.close()


def pipeline(s, data, seconds=5):
    """Send what the broker takes of 'data' within 'seconds'."""
    s.setblocking(False)
    sent = 0
    deadline = time.monotonic() + seconds
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += s.send(data[sent:])
        except BlockingIOError:
            time.sleep(0.05)
    return sent


def returns(b, api):
    s = connect(b.port, rcvbuf=4096)
    body = b"r" * 256 * 1024
    one = method(1, 60, 40, struct.pack(">H", 0) + shortstr("") +
                 shortstr("nowhere") + b"\x01") + header(1, len(body))
    for i in range(0, len(body), 128 * 1024 - 8):
        one += frame(3, 1, body[i:i + 128 * 1024 - 8])
    pipeline(s, one * 200)
    healthy("mandatory returns", b, api)
    s.close()


def consumer(b, api):
    p = connect(b.port)
    declare_queue(p, 1, "many")
    for _ in range(200):
        publish(p, 1, "many", b"m" * 256 * 1024)
    time.sleep(0.5)
    p.close()
    s = connect(b.port, rcvbuf=4096)
    s.sendall(method(1, 60, 20, struct.pack(">H", 0) + shortstr("many") +
                     shortstr("") + b"\x02" + struct.pack(">I", 0)))
    healthy("consumer", b, api)
    s.close()


def main():
    b = Broker(["-s", "vm_memory_high_watermark.absolute=268435456"],
               mgmt=True).start()
    api = Api(b.mgmt_port)
    get_reject(b, api)
    returns(b, api)
    consumer(b, api)
    b.stop()


run(main)
