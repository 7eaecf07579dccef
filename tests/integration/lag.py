#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Lag that never goes blind (issue 23, point 1): the age of the oldest
ready message of a queue whose backlog is paged and read back, and of a
queue recovered after a restart, in the management API
(head_message_age), Prometheus (roost_queue_head_message_age_seconds,
per object) and the time-in-queue histogram.

Run by lag.sh, which starts roostd with a paging window of 16 and
kills (-9) and restarts it between the two parts (--part paged, then --part restarted).
Prints PASS/FAIL lines.
"""
import argparse
import base64
import json
import re
import sys
import time
import urllib.request

import pika

Q = "lag-backlog"
WAIT = 3.0          # seconds the backlog waits before it is looked at


def check(name, cond, detail=""):
    print("%s %s%s" % ("PASS" if cond else "FAIL", name,
                       "" if cond else ": %s" % detail), flush=True)


def get(port, path, auth=True):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if auth:
        req.add_header("Authorization", "Basic " +
                       base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def api_age(http):
    q = json.loads(get(http, "/api/queues/%2F/" + Q))
    return q.get("head_message_age"), q


def prom_age(prom):
    text = get(prom, "/metrics/per-object", auth=False)
    m = re.search(r'^roost_queue_head_message_age_seconds\{[^}]*queue="%s"'
                  r'[^}]*\} (\S+)$' % Q, text, re.M)
    return float(m.group(1)) if m else None, text


def in_queue_sum(text):
    m = re.search(r'^roost_queue_time_in_queue_seconds_sum\{[^}]*queue="%s"'
                  r'[^}]*\} (\S+)$' % Q, text, re.M)
    c = re.search(r'^roost_queue_time_in_queue_seconds_count\{[^}]*'
                  r'queue="%s"[^}]*\} (\S+)$' % Q, text, re.M)
    return (float(m.group(1)), float(c.group(1))) if m and c else (None, None)


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, heartbeat=0, connection_attempts=3,
        retry_delay=0.5))


def take(ch, n):
    """Consume and ack n messages with basic.get."""
    got = 0
    while got < n:
        mf, _, _ = ch.basic_get(Q)
        if mf is None:
            break
        ch.basic_ack(mf.delivery_tag)
        got += 1
    return got


def paged(a):
    c = connect(a.port)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare(Q, durable=True)
    props = pika.BasicProperties(delivery_mode=2)
    t0 = time.time()
    for i in range(400):
        ch.basic_publish("", Q, b"m%d" % i, props)
    time.sleep(WAIT)
    q = json.loads(get(a.http, "/api/queues/%2F/" + Q))
    check("the backlog of 400 is mostly paged (window 16)",
          q.get("messages_paged_out", 0) >= 300, json.dumps(q)[:300])
    # Past the window: every message now at the head was paged out and
    # read back after the wait.
    check("100 taken", take(ch, 100) == 100)
    age, q = api_age(a.http)
    waited = time.time() - t0
    check("a read-back head: head_message_age is its whole wait (%.1f s)"
          % waited, age is not None and WAIT <= age <= waited + 1, age)
    page, text = prom_age(a.prom)
    check("... and Prometheus says the same",
          page is not None and WAIT <= page <= waited + 1, page)
    s, n = in_queue_sum(text)
    check("the time-in-queue histogram counts the 100 with their waits",
          n == 100 and s is not None and s >= 100 * (WAIT - 0.5),
          "sum %s count %s" % (s, n))
    c.close()


def restarted(a):
    # The 300 left have waited since the first part published them
    # (a.since, the epoch time lag.sh noted before it started).
    age, q = api_age(a.http)
    waited = time.time() - a.since
    check("after a restart: %d recovered" % q.get("messages", -1),
          q.get("messages") == 300, q.get("messages"))
    check("a recovered head: head_message_age is its wait before and "
          "after the restart (%.1f s)" % waited,
          age is not None and WAIT <= age <= waited + 1, age)
    page, _ = prom_age(a.prom)
    check("... and Prometheus says the same",
          page is not None and WAIT <= page <= waited + 1, page)
    c = connect(a.port)
    ch = c.channel()
    check("250 more taken (the rest were paged at recovery)",
          take(ch, 250) == 250)
    age, _ = api_age(a.http)
    waited = time.time() - a.since
    check("a recovered head read back from disk keeps its age",
          age is not None and WAIT <= age <= waited + 1, age)
    # (The time-in-queue histogram times first deliveries; after a crash
    # every recovered message is a redelivery, so it has none to time.)
    ch.queue_delete(Q)
    c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--http", type=int, required=True)
    p.add_argument("--prom", type=int, required=True)
    p.add_argument("--part", choices=("paged", "restarted"), required=True)
    p.add_argument("--since", type=float, default=0)
    a = p.parse_args()
    try:
        (paged if a.part == "paged" else restarted)(a)
    except Exception as e:      # a check that could not run fails
        check("part %s ran" % a.part, False, repr(e))
        sys.exit(1)


if __name__ == "__main__":
    main()
