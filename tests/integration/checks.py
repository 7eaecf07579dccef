# SPDX-License-Identifier: Apache-2.0
"""What the Python check scripts share (poison.py, vhosts.py, policy.py,
the stream ones):
one "PASS name" or "FAIL name: why" line per check, for lib.sh's
run_checks, the exit status they add up to, and a client of the
management API."""
import base64
import json
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
