# SPDX-License-Identifier: Apache-2.0
"""roostd as a systemd service would run it, without systemd: the notify
protocol against a socket this script listens on ($NOTIFY_SOCKET), and
SIGHUP reloads while clients stay connected.

- READY=1 (with MAINPID and STATUS) only once the AMQP port accepts
  connections; WATCHDOG=1 at half of $WATCHDOG_USEC;
  EXTEND_TIMEOUT_USEC while recovery runs, before READY=1;
- SIGHUP: RELOADING=1 then READY=1; the log level and the memory
  watermark change at once (the memory alarm blocks a connected
  publisher, /api/nodes shows the new mem_limit), a changed port is
  logged as needing a restart and kept; a file with an error, or a
  certificate that does not load, changes nothing at all (a watermark
  changed in the same file stays as it was); the certificates are
  loaded again (a new one is served to the next handshake);
- SIGTERM: STOPPING=1; stop, restart and reload keep every confirmed
  message (checked one by one after the restart).

Usage: service.py ROOSTD CERTDIR WORKDIR   (prints PASS/FAIL lines)
"""
import base64
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import pika

ROOSTD, CERTS, WORK = sys.argv[1:4]
fails = 0


def check(name, cond, why=""):
    global fails
    if cond:
        print("PASS %s" % name)
    else:
        fails += 1
        print("FAIL %s: %s" % (name, why))
    sys.stdout.flush()
    return cond


sock_path = os.path.join(WORK, "notify.sock")
nsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
nsock.bind(sock_path)
log_path = os.path.join(WORK, "roostd.log")
conf_path = os.path.join(WORK, "roost.conf")
data_dir = os.path.join(WORK, "data")


def write_conf(**over):
    base = {
        "listeners.tcp.default": "127.0.0.1:0",
        "listeners.ssl.default": "127.0.0.1:0",
        "ssl_options.certfile": os.path.join(WORK, "live.crt"),
        "ssl_options.keyfile": os.path.join(CERTS, "server.key"),
        "management.tcp.port": "0",
        "prometheus.tcp.port": "-1",
        "log.level": "info",
        "vm_memory_high_watermark.absolute": "2000000000",
        "data_dir": data_dir,
        "log.file": log_path,
    }
    base.update(over)
    with open(conf_path + ".tmp", "w") as f:
        for k, v in base.items():
            if v is not None:
                f.write("%s = %s\n" % (k, v))
    os.rename(conf_path + ".tmp", conf_path)


def messages(timeout):
    """Every datagram that arrives within 'timeout' seconds."""
    out, end = [], time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return out
        nsock.settimeout(left)
        try:
            out.append(nsock.recv(4096).decode())
        except socket.timeout:
            return out


def wait_for(key, timeout=30):
    """Datagrams up to and including the first with line 'key'."""
    seen, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        nsock.settimeout(max(0.01, end - time.monotonic()))
        try:
            m = nsock.recv(4096).decode()
        except socket.timeout:
            break
        seen.append(m)
        if key in m.split("\n"):
            return seen
    return seen + [None]


def fields(msg):
    return dict(l.split("=", 1) for l in msg.split("\n") if "=" in l)


def log_text():
    with open(log_path) as f:
        return f.read()


def log_since(mark):
    return log_text()[mark:]


def start():
    env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="400000")
    env.pop("WATCHDOG_PID", None)
    return subprocess.Popen([ROOSTD, "-c", conf_path], env=env,
                            stderr=open(os.path.join(WORK, "stderr"), "ab"))


def ports():
    t = log_text()
    return (int(re.findall(r"ready for connections on port (\d+)", t)[-1]),
            int(re.findall(r"management API listening on "
                           r"http://127\.0\.0\.1:(\d+)/", t)[-1]))


def api(http, path):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (http, path))
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def tls_ports():
    return [int(p) for p in re.findall(
        r"listening for AMQP over TLS on \S+ \(port (\d+)\)", log_text())]


def served_cert(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s) as t:
            return t.getpeercert(binary_form=True)


def pem_der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def copy(src, dst):
    with open(src, "rb") as f, open(dst + ".tmp", "wb") as g:
        g.write(f.read())
    os.rename(dst + ".tmp", dst)


def hup_and_wait(d):
    """SIGHUP; the datagrams up to the READY=1 that ends the reload."""
    mark = len(log_text())
    d.send_signal(signal.SIGHUP)
    got = wait_for("READY=1", 15)
    time.sleep(0.1)
    return got, log_since(mark)


# ---- start: READY only with the listeners up; the watchdog ----
copy(os.path.join(CERTS, "server.pem"), os.path.join(WORK, "live.crt"))
write_conf()
d = start()
got = wait_for("READY=1")
ready = got[-1]
check("READY=1 arrives", ready is not None, repr(got))
amqp, http = ports()
try:
    socket.create_connection(("127.0.0.1", amqp), timeout=2).close()
    up = True
except OSError as e:
    up = str(e)
check("the AMQP port accepts connections when READY=1 comes", up is True,
      up)
f = fields(ready or "")
check("READY=1 names the main pid", f.get("MAINPID") == str(d.pid),
      repr(ready))
check("READY=1 has a STATUS", "ready for connections on port %d" % amqp in
      f.get("STATUS", ""), repr(ready))
check("nothing says READY=1 before", all("READY=1" not in m.split("\n")
                                         for m in got[:-1]), repr(got))
wd = [m for m in messages(1.5) if m == "WATCHDOG=1"]
check("WATCHDOG=1 every 200 ms (WATCHDOG_USEC=400000)",
      5 <= len(wd) <= 9, "%d in 1.5 s" % len(wd))

# ---- confirmed messages, kept through reloads and a restart ----
params = pika.ConnectionParameters("127.0.0.1", amqp)
pub = pika.BlockingConnection(params)
blocked = []
pub.add_on_connection_blocked_callback(lambda c, m: blocked.append(1))
pub.add_on_connection_unblocked_callback(lambda c, m: blocked.append(0))
ch = pub.channel()
ch.confirm_delivery()
ch.queue_declare("svc-q", durable=True)
sent = 0


def publish(n):
    global sent
    for _ in range(n):
        ch.basic_publish("", "svc-q", b"m%06d" % sent,
                         pika.BasicProperties(delivery_mode=2))
        sent += 1


publish(300)

# ---- reload: log level and watermark at once, port needs a restart ----
write_conf(**{"log.level": "debug",
              "vm_memory_high_watermark.absolute": "1000",
              "listeners.tcp.default": "127.0.0.1:1"})
got, text = hup_and_wait(d)
check("SIGHUP: RELOADING=1 then READY=1",
      len(got) >= 2 and got[-1] is not None and
      any("RELOADING=1" in m.split("\n") for m in got[:-1]), repr(got))
check("reload: the log level changed",
      "reload: log.level changed from info to debug" in text, text[-800:])
check("reload: the watermark changed",
      "vm_memory_high_watermark.absolute changed from 2000000000 to 1000"
      in text, text[-800:])
check("reload: a changed listener needs a restart, and is kept",
      re.search(r"listeners\.tcp changed .*needs a restart", text) and
      ports()[0] == amqp, text[-800:])
check("reload: says how many applied",
      "reload: done: 2 settings applied, 1 needs a restart" in text,
      text[-800:])
check("reload: the memory alarm goes off at the new watermark",
      "memory resource limit alarm set" in text, text[-800:])
nodes = api(http, "/api/nodes")
check("/api/nodes: the new mem_limit", nodes[0].get("mem_limit") == 1000,
      nodes[0].get("mem_limit"))
# As RabbitMQ, a connection is blocked when it next publishes.
ch_plain = pub.channel()
ch_plain.basic_publish("", "svc-other", b"x")
pub.process_data_events(0.5)
check("the connected publisher is blocked, and still connected",
      blocked[-1:] == [1] and pub.is_open, repr(blocked))
# debug lines appear now
mark = len(log_text())
c2 = pika.BlockingConnection(params)
c2.close()
check("debug lines are logged after the reload",
      " debug " in log_since(mark), log_since(mark)[-300:])

# ---- a bad file changes nothing, a cert that does not load neither ----
write_conf(**{"log.level": "info",
              "vm_memory_high_watermark.absolute": "3000000000",
              "listeners.tcp.default": "127.0.0.1:1",
              "frame_max": "12"})
got, text = hup_and_wait(d)
check("a file with an error: nothing changed",
      "nothing changed" in text and "frame_max" in text and
      api(http, "/api/nodes")[0].get("mem_limit") == 1000, text[-600:])
write_conf(**{"log.level": "info",
              "vm_memory_high_watermark.absolute": "3000000000",
              "listeners.tcp.default": "127.0.0.1:1",
              "ssl_options.certfile": os.path.join(WORK, "missing.crt")})
got, text = hup_and_wait(d)
check("a certificate that does not load: nothing changed, the "
      "watermark in the same file neither",
      "nothing changed" in text and "missing.crt" in text and
      api(http, "/api/nodes")[0].get("mem_limit") == 1000 and
      "log.level changed" not in text, text[-600:])
check("READY=1 after a refused reload too", got[-1] is not None, repr(got))

# ---- certificates reloaded: the next handshake gets the new one ----
tls_port = tls_ports()[0]
before = served_cert(tls_port)
check("TLS: serves the certificate it started with",
      before == pem_der(os.path.join(CERTS, "server.pem")), "")
copy(os.path.join(CERTS, "server-rsa.pem"), os.path.join(WORK, "live.crt"))
write_conf(**{"ssl_options.keyfile": os.path.join(CERTS, "server-rsa.key"),
              "listeners.tcp.default": "127.0.0.1:1"})
got, text = hup_and_wait(d)
check("reload: certificates loaded again",
      "TLS certificates and key loaded again" in text and
      api(http, "/api/nodes")[0].get("mem_limit") == 2000000000, text[-600:])
check("TLS: the next handshake gets the new certificate",
      served_cert(tls_port) == pem_der(os.path.join(CERTS, "server-rsa.pem")),
      "")
pub.process_data_events(0.5)
check("the publisher is unblocked (watermark back up)",
      blocked[-1:] == [0], repr(blocked))
publish(200)
check("the publisher's connection survived every reload", pub.is_open, "")
pub.close()

# ---- stop: STOPPING=1; restart: EXTEND_TIMEOUT_USEC before READY ----
d.send_signal(signal.SIGTERM)
got = wait_for("STOPPING=1", 10)
check("SIGTERM: STOPPING=1", got[-1] is not None, repr(got))
rc = d.wait(30)
check("roostd stops cleanly", rc == 0, "exit %d" % rc)
write_conf(**{"ssl_options.keyfile": os.path.join(CERTS, "server-rsa.key")})
d = start()
got = wait_for("READY=1")
ext = [m for m in got[:-1] if m and "EXTEND_TIMEOUT_USEC" in m]
check("restart: EXTEND_TIMEOUT_USEC while recovering, before READY=1",
      got[-1] is not None and ext and
      fields(ext[0]).get("EXTEND_TIMEOUT_USEC") == "30000000" and
      fields(ext[0]).get("STATUS", "").startswith("recovering"), repr(got))
amqp = ports()[0]
c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp))
ch = c.channel()
n = ch.queue_declare("svc-q", durable=True, passive=True).method.message_count
bodies = []
while True:
    m = ch.basic_get("svc-q", auto_ack=True)
    if m[0] is None:
        break
    bodies.append(m[2])
c.close()
check("every confirmed message kept, in order, through reloads, a stop "
      "and a restart",
      n == sent and bodies == [b"m%06d" % i for i in range(sent)],
      "%d in the queue, %d confirmed" % (n, sent))
d.send_signal(signal.SIGTERM)
d.wait(30)
sys.exit(1 if fails else 0)
