# SPDX-License-Identifier: Apache-2.0
"""Issue 22, point 15: what the management API passes on, and the
Prometheus listener's Host.

- DELETE /api/connections/NAME with an X-Reason that is not UTF-8 is
  refused (400) and the connection stays open; a 600-byte reason of
  two-byte characters reaches the client cut at a character's start,
  as UTF-8 the client can decode; control bytes become spaces.
- The Prometheus listener refuses a Host that is not one of its names
  (DNS rebinding: 421), as the management listener does, and serves its
  own names and addresses."""
import http.client
import socket
import time
import re
import urllib.parse

from hostile import (Api, Broker, check, check_healthy, connect, run,
                     until, read_frame)


def delete_conn(port, name, reason):
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    h.putrequest("DELETE", "/api/connections/" +
                 urllib.parse.quote(name, safe=""))
    h.putheader("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")
    h.putheader("X-Reason", reason)
    h.endheaders()
    r = h.getresponse()
    body = r.read()
    h.close()
    return r.status, body


def close_text(s, timeout=5):
    """The reply-text of the connection.close that comes on 's'."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        f = read_frame(s, timeout=timeout)
        if f is None:
            return None
        if f[0] == 1 and f[2][:4] == b"\x00\x0a\x00\x32":
            n = f[2][6]
            return f[2][7:7 + n]
    return None


def conn_name(api, port_of):
    def find():
        st, conns = api.call("GET", "connections")
        for c in conns if st == 200 else []:
            if c["peer_port"] == port_of:
                return c["name"]
        return None
    name = [None]
    until(lambda: name.__setitem__(0, find()) or name[0] is not None, 5)
    return name[0]


def prom_get(port, host):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: " + host.encode() +
              b"\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1]) if data else None


def main():
    b = Broker(["-s", "prometheus.tcp.port=0"], mgmt=True).start()
    prom = int(re.search(r"Prometheus metrics on http://[^ ]*:(\d+)/",
                         b.log_text()).group(1))
    api = Api(b.mgmt_port)

    s = connect(b.port)
    name = conn_name(api, s.getsockname()[1])
    check("the connection is listed", name is not None, str(name))
    st, body = delete_conn(b.mgmt_port, name, b"bad \xff\xfe reason")
    check("X-Reason not UTF-8: 400", st == 400, "%s %s" % (st, body[:200]))
    check("X-Reason not UTF-8: the connection stays open",
          conn_name(api, s.getsockname()[1]) is not None, "gone")

    long = ("\u00e9" * 300 + "\x01end").encode()
    st, body = delete_conn(b.mgmt_port, name, long)
    check("a 600-byte reason: 204", st == 204, "%s %s" % (st, body[:200]))
    text = close_text(s)
    ok = False
    try:
        decoded = text.decode("utf-8")
        ok = True
    except (AttributeError, UnicodeDecodeError):
        decoded = repr(text)
    check("its reply-text is UTF-8 the client decodes", ok, decoded[:80])
    check("its reply-text is cut to fit (under 256 bytes)",
          text is not None and len(text) <= 255, str(text and len(text)))
    s.close()

    s = connect(b.port)
    name = conn_name(api, s.getsockname()[1])
    delete_conn(b.mgmt_port, name, b"line\x01two\x7fthree")
    text = close_text(s)
    check("control bytes become spaces",
          text is not None and b"\x01" not in text and b"\x7f" not in text
          and b"line two three" in text, repr(text))
    s.close()

    for host, want in (("evil.example", 421),
                       ("evil.example:%d" % prom, 421),
                       ("localhost:%d" % prom, 200),
                       ("127.0.0.1:%d" % prom, 200),
                       (socket.gethostname(), 200)):
        st = prom_get(prom, host)
        check("Prometheus with Host %s: %d" % (host, want), st == want,
              str(st))
    check_healthy("reason", b, 64 * 1024)
    b.stop()


run(main)
