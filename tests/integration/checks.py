# SPDX-License-Identifier: Apache-2.0
"""What the Python check scripts share (poison.py, vhosts.py, policy.py,
the stream ones):
one "PASS name" or "FAIL name: why" line per check, for lib.sh's
run_checks, the exit status they add up to, and a client of the
management API."""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

fails = 0
passes = 0


def check(name, cond, why=""):
    global fails, passes
    if cond:
        passes += 1
        print("PASS " + name)
    else:
        fails += 1
        print("FAIL %s: %s" % (name, why))


def done():
    sys.exit(1 if fails else 0)


def until(cond, timeout=5.0):
    """Poll cond() until it holds or 'timeout' seconds pass."""
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def drain(conn, got, want=None, wait=1.0):
    """Let pika connection 'conn' dispatch until 'got' holds 'want' items,
    or 'wait' seconds pass without a new one: one process_data_events
    call returns after its first batch (streams-spec.md, the first
    trap)."""
    deadline = time.time() + wait
    while time.time() < deadline and (want is None or len(got) < want):
        n = len(got)
        conn.process_data_events(time_limit=0.1)
        if len(got) > n:
            deadline = time.time() + wait


def connect(port):
    """A pika connection to roostd on 'port' as guest."""
    import pika
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, blocked_connection_timeout=30))


def read_stream(port, name, want=None, wait=1.5):
    """[(offset, body)] of stream 'name' from first, acking each: until
    'want' arrived (or 'wait' s pass without one), then nothing more."""
    c = connect(port)
    ch = c.channel()
    ch.basic_qos(prefetch_count=500)
    got = []

    def on(chx, m, p, b):
        got.append(((p.headers or {}).get("x-stream-offset"), b))
        chx.basic_ack(m.delivery_tag)
    ch.basic_consume(name, on, arguments={"x-stream-offset": "first"})
    drain(c, got, want, wait=wait)
    if want is not None:
        drain(c, got, None, wait=0.3)
    c.close()
    return got


class Api:
    """The management API as guest (or 'user'): call() returns (status,
    JSON body or None), or (status, the body's text) for an error."""

    def __init__(self, port, user="guest", password="guest"):
        self.port = port
        self.base = "http://127.0.0.1:%d/api/" % port
        self.auth = "Basic " + base64.b64encode(
            ("%s:%s" % (user, password)).encode()).decode()

    def call(self, method, path, body=None, raw=None):
        data = raw if raw is not None else (
            None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data,
                                     method=method)
        req.add_header("Authorization", self.auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read().decode()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


class Roostd:
    """A roostd of the script's own on free ports ("--port 0", its log
    naming them), its data in 'data', its logs log1, log2, ... and its
    stderr in 'dir'; 'sets' are --set options, 'env' extra environment."""

    def __init__(self, binary, dir, data=None, sets=(), env=None):
        self.binary, self.dir = binary, dir
        self.data = data or os.path.join(dir, "data")
        self.sets, self.env = list(sets), dict(env or {})
        self.proc = self.log = self.port = self.http = None
        self.logn = 0

    def start(self, env_extra=None):
        """Start it: its AMQP port ('http' is the management API's, when
        'sets' opens it). Exits the script if it does not start."""
        self.logn += 1
        self.log = os.path.join(self.dir, "log%d" % self.logn)
        argv = [self.binary, "--port", "0", "--data-dir", self.data,
                "--log-file", self.log]
        for kv in self.sets:
            argv += ["--set", kv]
        env = dict(os.environ, **self.env)
        env.update(env_extra or {})
        self.proc = subprocess.Popen(
            argv, env=env, stderr=open(os.path.join(self.dir, "stderr"), "a"))
        wants_http = "management.tcp.port=0" in self.sets
        end = time.time() + 60
        text = ""
        while time.time() < end:
            text = self.log_text() if os.path.exists(self.log) else ""
            a = re.search(r"ready for connections on port (\d+)", text)
            h = re.search(r"management API listening on https?://\S*:(\d+)/",
                          text)
            if a and (h or not wants_http):
                self.port = int(a.group(1))
                self.http = int(h.group(1)) if h else None
                return self.port
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        sys.exit("roostd did not start: " + text[-500:])

    def stop(self):
        """SIGTERM; its exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def log_text(self):
        return open(self.log, errors="replace").read()


def wait_replay(api, rid, timeout=60):
    """Replay 'rid' (deadletters.py) once it no longer runs, or as it
    is after 'timeout' seconds."""
    end = time.time() + timeout
    while True:
        s, r = api.call("GET", "replays/" + rid)
        if s != 200 or r["state"] != "running" or time.time() > end:
            return r
        time.sleep(0.02)


def q(name):
    """A name as one path segment."""
    return urllib.parse.quote(name, safe="")
