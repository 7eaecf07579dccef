# SPDX-License-Identifier: Apache-2.0
"""HTTP peers that hoard (issue 22, points 7 and 8, and point 16's HTTP
slow-loris): on the management API and on Prometheus.

- Eight unauthenticated sockets each sending a 15 MB body to an ordinary
  route get 413 after 1 MiB (only the definitions routes read up to
  management.http.max_body_size), and the broker's RSS stays under its
  bound; a 3 MB definitions file is still taken.
- A request's bytes still arriving count in the memory figure
  (/api/nodes/NAME?memory=true: http_requests).
- Headers or a body trickled a byte every 100 ms are cut at
  management.tcp.request_timeout (2 s here) from the request's first
  byte, on both listeners, though each byte comes well inside the idle
  timeout.
- At management.http.max_connections (20 here) a listener stops
  accepting, says so once, and takes connections again as soon as some
  close."""
import json
import re
import socket
import time

from hostile import (Api, Broker, check, check_healthy, control_ms,
                     rss_bound_kib, run, until)

CAP = 20


def raw(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def status_of(s, timeout=10):
    """The status of the answer on 's', or None if it closed first."""
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    return int(m.group(1)) if m else None


def send_all(s, data, step=65536):
    try:
        for i in range(0, len(data), step):
            s.sendall(data[i:i + step])
        return True
    except OSError:
        return False


def closed_by_peer(s, timeout):
    """Whether the broker closed 's' within 'timeout' seconds."""
    s.settimeout(timeout)
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def trickle_closed(port, data, seconds):
    """A socket trickling 'data' a byte every 100 ms: the time it was
    closed after, or None if it was not within 'seconds'."""
    s = raw(port)
    t0 = time.monotonic()
    s.setblocking(False)
    i = 0
    while time.monotonic() - t0 < seconds:
        try:
            s.send(data[i % len(data):i % len(data) + 1])
            i += 1
        except OSError:
            return time.monotonic() - t0
        try:
            if s.recv(4096) == b"":
                return time.monotonic() - t0
        except BlockingIOError:
            pass
        except OSError:
            return time.monotonic() - t0
        time.sleep(0.1)
    s.close()
    return None


def main():
    b = Broker(["-s", "management.tcp.request_timeout=2000",
                "-s", "management.http.max_connections=%d" % CAP,
                "-s", "prometheus.tcp.port=0"], mgmt=True).start()
    prom = int(re.search(r"Prometheus metrics on http://[^ ]*:(\d+)/",
                         b.log_text()).group(1))
    api = Api(b.mgmt_port)

    # Bodies before authentication.
    big = 15 * 1000 * 1000
    socks = []
    for _ in range(8):
        s = raw(b.mgmt_port)
        s.sendall(b"PUT /api/queues/%2F/x HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: " + str(big).encode() + b"\r\n\r\n")
        socks.append(s)
    chunk = b"x" * (1000 * 1000)
    for s in socks:
        for _ in range(14):
            send_all(s, chunk)
        send_all(s, chunk[:-1])
    time.sleep(0.3)
    rss = b.rss_kib()
    check("8 bodies of 15 MB all but their last byte: RSS under 64 MiB",
          rss < rss_bound_kib(64 * 1024), "RSS %d KiB" % rss)
    st, nodes = api.call("GET", "nodes")
    st, node = api.call("GET", "nodes/%s?memory=true" % nodes[0]["name"])
    counted = node["memory"].get("http_requests", -1) if st == 200 else -1
    check("the memory figure counts what is kept of them (under 10 MB), "
          "not all that came", 0 <= counted < 10 * 1000 * 1000, str(counted))
    for s in socks:
        send_all(s, b"x")
    codes = [status_of(s) for s in socks]
    check("8 unauthenticated 15 MB bodies: 413 after 1 MiB",
          codes == [413] * 8, str(codes))
    for s in socks:
        s.close()
    check_healthy("bodies", b, 64 * 1024)
    defs = {"queues": [{"name": "q%d-%s" % (i, "p" * 200), "vhost": "/",
                        "durable": True, "auto_delete": False,
                        "arguments": {}} for i in range(12000)]}
    body = json.dumps(defs).encode()
    check("the definitions file is over 1 MiB", len(body) > 2 * 1024 * 1024,
          str(len(body)))
    st, out = api.call("POST", "definitions", raw=body)
    check("a %d-byte definitions file is taken" % len(body),
          st in (200, 201, 204), "%s %s" % (st, str(out)[:200]))

    # The memory figure counts a request still arriving.
    s = raw(b.mgmt_port)
    s.sendall(b"POST /api/definitions HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Length: 10000000\r\n\r\n" + b" " * (5 * 1000 * 1000))
    node = None

    def counted():
        nonlocal node
        st, nodes = api.call("GET", "nodes")
        if st != 200:
            return False
        st, node = api.call("GET", "nodes/%s?memory=true" % nodes[0]["name"])
        return st == 200 and node["memory"].get("http_requests", 0) >= \
            5 * 1000 * 1000
    check("a request half arrived counts in the memory figure",
          until(counted, 5), str(node and node.get("memory")))
    s.close()

    # Slow-loris: headers and bodies trickled.
    head = (b"GET /api/overview HTTP/1.1\r\nHost: localhost\r\n"
            b"X-Slow: " + b"y" * 200 + b"\r\n\r\n")
    post = (b"PUT /api/queues/%2F/slow HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Length: 1000\r\n\r\n" + b"{" * 1000)
    for name, port, data in (("management API headers", b.mgmt_port, head),
                             ("management API body", b.mgmt_port, post),
                             ("Prometheus headers", prom,
                              head.replace(b"/api/overview", b"/metrics"))):
        took = trickle_closed(port, data, 6)
        check("%s trickled: cut at request_timeout (2 s)" % name,
              took is not None and 1.8 <= took <= 3.5, "after %s s" % took)
    check("the cut is logged", "management.tcp.request_timeout"
          in b.log_text(), b.tail())

    # The connection cap, on each listener.
    for name, port in (("management API", b.mgmt_port),
                       ("Prometheus", prom)):
        held = [raw(port) for _ in range(CAP + 10)]
        time.sleep(0.5)
        late = raw(port)
        late.sendall(b"GET /api/overview HTTP/1.1\r\nHost: localhost\r\n"
                     b"Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n")
        late.settimeout(0.5)
        try:
            early = late.recv(100)
        except socket.timeout:
            early = b""
        check("%s at its cap: a connection past it waits" % name,
              early == b"", repr(early[:40]))
        for s in held:
            s.close()
        st = status_of(late, timeout=5)
        check("%s: answered once connections closed" % name,
              st in (200, 404), str(st))
        late.close()
    text = b.log_text()
    check("the cap is logged, once a listener",
          text.count("management.http.max_connections") == 2,
          str(text.count("management.http.max_connections")))
    check("the API answers after", api.call("GET", "overview")[0] == 200,
          b.tail())
    check("control client", control_ms(b.port) is not None, b.tail())
    check_healthy("http", b, 96 * 1024)
    b.stop()


run(main)
