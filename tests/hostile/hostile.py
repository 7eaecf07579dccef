# SPDX-License-Identifier: Apache-2.0
"""What the hostile-peer cases share (tests/hostile/*.py): a real roostd
on a free port in a fresh data directory (with a descriptor limit if a
case wants one), raw AMQP over a socket (frames built by hand, so that a
case can lie, stall or stop at any byte), the broker's resident memory,
and the three things every case asserts at its end: the broker is still
up, a control client gets its connection.start within 100 ms, and its
RSS stayed under the case's bound.

A case prints "PASS name" and "FAIL name: why" lines (checks.py's
format), then "CASE: N passed, N failed" (which scripts/summary.sh adds
up), and exits 1 if any failed, 77 if it cannot run here."""
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from checks import (check, done, until, Api, q,  # noqa: E402,F401
                    wait_replay)

ROOSTD = os.environ.get("ROOSTD") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "broker",
    "roostd")
CONTROL_MS = 100          # a control client's connection.start, at most


def _sanitized():
    try:
        with open(ROOSTD, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


# Under AddressSanitizer every allocation has red zones and freed memory
# waits in a quarantine (kept to 16 MiB here): a case's RSS bound, stated
# for a release build, is doubled plus 64 MiB there.
SANITIZED = _sanitized()


def rss_bound_kib(kib):
    return kib * 2 + 64 * 1024 if SANITIZED else kib


# Every Broker's directory (data and log): removed when the case passes,
# kept for a look when it fails.
_tmp_dirs = []


class Broker:
    """roostd on port 0 (its log names the port), killed at exit."""

    def __init__(self, args=(), nofile=None, data_dir=None, mgmt=False,
                 env=None):
        self.tmp = tempfile.mkdtemp(prefix="hostile.")
        _tmp_dirs.append(self.tmp)
        self.data = data_dir or os.path.join(self.tmp, "data")
        self.log = os.path.join(self.tmp, "roostd.log")
        self.args = list(args)
        self.nofile = nofile
        self.mgmt = mgmt
        self.env = env
        self.proc = None
        self.port = self.mgmt_port = None

    def start(self, extra=(), wait=True):
        argv = [ROOSTD, "--port", "0", "--data-dir", self.data,
                "--log-file", self.log, "-s", "prometheus.tcp.port=-1",
                "-s", "management.tcp.port=0"]
        argv += self.args + list(extra)
        nofile = self.nofile

        def limits():
            if nofile is not None:     # N, or (soft, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE,
                                   nofile if isinstance(nofile, tuple)
                                   else (nofile, nofile))
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                               ":quarantine_size_mb=16").lstrip(":")
        env.update(self.env or {})
        open(self.log, "a").close()
        self.proc = subprocess.Popen(argv, preexec_fn=limits, env=env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.log + ".stderr", "a"))
        if wait and not until(self._ready, 20):
            raise RuntimeError("roostd did not start: " + self.tail())
        return self

    def start_refused(self, timeout=20):
        """Start a roostd that ought to refuse: its exit status, or None
        (then it is killed) if it got ready or ran on past 'timeout'."""
        self.start(wait=False)
        until(lambda: self.proc.poll() is not None or
              "ready for connections" in self.log_text(), timeout)
        rc = self.proc.poll()
        if rc is None:
            self.kill9()
        return rc

    def _ready(self):
        text = self.log_text()
        if self.proc.poll() is not None:
            raise RuntimeError("roostd exited %d: %s" % (self.proc.returncode,
                                                         self.tail()))
        if "ready for connections on port " not in text:
            return False
        self.port = int(text.split("ready for connections on port ")[1]
                        .split()[0].rstrip(",."))
        if self.mgmt:
            mark = "management API listening on "
            if mark not in text:
                return False
            self.mgmt_port = int(text.split(mark)[1].split()[0]
                                 .rsplit(":", 1)[1].rstrip("/,."))
        return True

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def log_bytes(self):
        try:
            return os.path.getsize(self.log)
        except FileNotFoundError:
            return 0

    def tail(self, n=5):
        return " | ".join(self.log_text().splitlines()[-n:])

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def open_fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill9(self):
        self.proc.kill()
        self.proc.wait()


def control_ms(port, host="127.0.0.1"):
    """Milliseconds from connect to a whole connection.start, or None."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, port), timeout=2)
        s.sendall(b"AMQP\x00\x00\x09\x01")
        f = read_frame(s, timeout=2)
        s.close()
    except OSError:
        return None
    if f is None or f[0] != 1 or f[2][:4] != b"\x00\x0a\x00\x0a":
        return None
    return (time.monotonic() - t0) * 1000


def check_healthy(name, b, rss_kib_max):
    """The three assertions that close every case."""
    check(name + ": broker still up", b.alive(), b.tail())
    ms = control_ms(b.port) if b.alive() else None
    check(name + ": control client served within %d ms" % CONTROL_MS,
          ms is not None and ms <= CONTROL_MS, "took %s ms" % ms)
    if b.alive():
        rss, bound = b.rss_kib(), rss_bound_kib(rss_kib_max)
        check(name + ": RSS under %d MiB" % (bound // 1024), rss <= bound,
              "RSS %d KiB" % rss)


# ---- raw AMQP 0-9-1 ----

def shortstr(s):
    s = s.encode() if isinstance(s, str) else s
    return bytes([len(s)]) + s


def longstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">I", len(s)) + s


def frame(ftype, channel, payload):
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + \
        b"\xce"


def method(channel, class_id, method_id, args=b""):
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


def header(channel, body_size, props=b"\x00\x00"):
    return frame(2, channel, struct.pack(">HHQ", 60, 0, body_size) + props)


def body(channel, data):
    return frame(3, channel, data)


def read_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def read_frame(s, timeout=5):
    """(type, channel, payload), or None at EOF or timeout."""
    s.settimeout(timeout)
    try:
        h = read_exact(s, 7)
        if h is None:
            return None
        ftype, ch, size = struct.unpack(">BHI", h)
        rest = read_exact(s, size + 1)
    except socket.timeout:
        return None
    if rest is None:
        return None
    return ftype, ch, rest[:-1]


def method_id(f):
    return struct.unpack(">HH", f[2][:4]) if f and f[0] == 1 else None


def until_method(s, cid, mid, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        f = read_frame(s, max(0.05, deadline - time.monotonic()))
        if f is None:
            return None
        if method_id(f) == (cid, mid):
            return f
    return None


def connect(port, user="guest", password="guest", heartbeat=0,
            frame_max=131072, rcvbuf=None, vhost="/"):
    """An open connection with channel 1 open, as a raw socket."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(b"AMQP\x00\x00\x09\x01")
    if until_method(s, 10, 10) is None:
        raise RuntimeError("no connection.start")
    resp = b"\x00" + user.encode() + b"\x00" + password.encode()
    s.sendall(method(0, 10, 11, struct.pack(">I", 0) + shortstr("PLAIN") +
                     longstr(resp) + shortstr("en_US")))
    if until_method(s, 10, 30) is None:
        raise RuntimeError("no connection.tune")
    s.sendall(method(0, 10, 31, struct.pack(">HIH", 2047, frame_max,
                                            heartbeat)))
    s.sendall(method(0, 10, 40, shortstr(vhost) + shortstr("") + b"\x00"))
    if until_method(s, 10, 41) is None:
        raise RuntimeError("no connection.open-ok")
    open_channel(s, 1)
    return s


def open_channel(s, ch, wait=True):
    s.sendall(method(ch, 20, 10, shortstr("")))
    if wait and until_method(s, 20, 11) is None:
        raise RuntimeError("no channel.open-ok")


def declare_queue(s, ch, name, durable=False, wait=True):
    s.sendall(method(ch, 50, 10, struct.pack(">H", 0) + shortstr(name) +
                     bytes([2 if durable else 0]) + struct.pack(">I", 0)))
    if wait and until_method(s, 50, 11) is None:
        raise RuntimeError("no queue.declare-ok")


def queue_depth(s, ch, name):
    """A passive queue.declare's message count, or None."""
    s.sendall(method(ch, 50, 10, struct.pack(">H", 0) + shortstr(name) +
                     b"\x01" + struct.pack(">I", 0)))
    f = until_method(s, 50, 11)
    if f is None:
        return None
    n = f[2][4]
    return struct.unpack(">I", f[2][5 + n:9 + n])[0]


def confirm_select(s, ch):
    s.sendall(method(ch, 85, 10, b"\x00"))
    if until_method(s, 85, 11) is None:
        raise RuntimeError("no confirm.select-ok")


def publish(s, ch, routing_key, data, exchange="", mandatory=False,
            frame_max=131072, props=b"\x00\x00"):
    out = method(ch, 60, 40, struct.pack(">H", 0) + shortstr(exchange) +
                 shortstr(routing_key) + bytes([1 if mandatory else 0]))
    out += header(ch, len(data), props)
    step = frame_max - 8
    for i in range(0, len(data), step):
        out += body(ch, data[i:i + step])
    s.sendall(out)


def basic_get(ch, queue, no_ack=False):
    return method(ch, 60, 70, struct.pack(">H", 0) + shortstr(queue) +
                  bytes([1 if no_ack else 0]))


def basic_reject(ch, tag, requeue=True):
    return method(ch, 60, 90, struct.pack(">QB", tag, 1 if requeue else 0))


def publish_confirmed(ch, queue, n):
    """Declare durable 'queue' on pika channel 'ch' and publish n
    persistent messages to it, each confirmed (b"m0", b"m1", ...)."""
    import pika
    ch.confirm_delivery()
    ch.queue_declare(queue, durable=True)
    for i in range(n):
        ch.basic_publish("", queue, b"m%d" % i,
                         pika.BasicProperties(delivery_mode=2))


def run(main):
    """Run a case's main(), turning an exception into a FAIL line."""
    try:
        main()
    except Exception as e:  # a case that stops half way fails
        check("ran to its end", False, "%s: %s" % (type(e).__name__, e))
    import checks   # the summary line scripts/summary.sh adds up
    print("%s: %d passed, %d failed" % (
        os.path.basename(sys.argv[0]).rsplit(".", 1)[0], checks.passes,
        checks.fails))
    if checks.fails == 0:
        for d in _tmp_dirs:
            shutil.rmtree(d, ignore_errors=True)
    elif _tmp_dirs:
        print("kept for a look: %s" % " ".join(_tmp_dirs))
    done()
