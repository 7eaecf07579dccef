#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Rate and depth history in the management API (history.sh runs this
against a roostd whose stats tick is 1 s, so a queue's rings are 5 s,
30 s and 240 s apart and the broker's 1 s, 12 s and 120 s).

A burst of 700 publishes, then 300 gets with ack, then 3 rejects without
requeue (dropped: no dead-letter exchange) must show in the queue's and
the overview's samples: cumulative counts for message_stats, depths for
the lengths, newest first, spaced by the ring's resolution, with avg and
avg_rate as RabbitMQ computes them. Prints PASS/FAIL lines.
"""
import argparse
import base64
import json
import sys
import time
import urllib.error
import urllib.request

import pika

Q = "history-burst"


def check(name, cond, detail=""):
    print("%s %s%s" % ("PASS" if cond else "FAIL", name,
                       "" if cond else ": %s" % detail), flush=True)


def get(http, path, user="guest", password="guest"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (http, path))
    cred = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    req.add_header("Authorization", "Basic " + cred)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode())


def put(http, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (http, path),
                                 data=json.dumps(body).encode(),
                                 method="PUT")
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"guest:guest").decode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def samples(details):
    return [(s["sample"], s["timestamp"]) for s in details.get("samples", [])]


def spaced(ss, ms):
    return all(a[1] - b[1] == ms for a, b in zip(ss, ss[1:]))


def newest_first(ss):
    return all(a[1] > b[1] for a, b in zip(ss, ss[1:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--http", type=int, required=True)
    a = ap.parse_args()

    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=a.port))
    ch = conn.channel()
    ch.queue_declare(Q)
    ch.confirm_delivery()

    q = get(a.http, "/api/queues/%2F/" + Q +
            "?lengths_age=60&lengths_incr=5&msg_rates_age=60&msg_rates_incr=5")
    check("an idle queue has no samples yet, in RabbitMQ's shape",
          q["messages_ready_details"].get("samples") == [] and
          q["message_stats"]["publish_details"].get("samples") == [],
          json.dumps(q["messages_ready_details"]))
    plain = get(a.http, "/api/queues/%2F/" + Q)
    check("without the parameters: no samples (RabbitMQ's plain answer)",
          "samples" not in plain["messages_ready_details"] and
          "dead_letter" not in plain["message_stats"],
          json.dumps(plain["messages_ready_details"]))

    # Let the broker's and the queue's rings start before the burst, so
    # that the samples straddle it.
    for i in range(5):
        ch.basic_publish("", Q, b"warm %d" % i)
    time.sleep(6)
    t0 = time.time()
    for i in range(700):
        ch.basic_publish("", Q, b"burst %d" % i)
    time.sleep(6)
    for i in range(300):
        m, _, _ = ch.basic_get(Q)
        ch.basic_ack(m.delivery_tag)
    for i in range(3):
        m, _, _ = ch.basic_get(Q)
        ch.basic_reject(m.delivery_tag, requeue=False)
    time.sleep(6)

    # ---- the queue's page ----
    q = get(a.http, "/api/queues/%2F/" + Q +
            "?lengths_age=60&lengths_incr=5&msg_rates_age=60&msg_rates_incr=5")
    ready = samples(q["messages_ready_details"])
    pub = samples(q["message_stats"]["publish_details"])
    dg = samples(q["message_stats"]["deliver_get_details"])
    ack = samples(q["message_stats"]["ack_details"])
    dead = samples(q["message_stats"]["dead_letter_details"])
    check("queue: samples newest first, 5 s apart (its 10-minute ring)",
          len(pub) >= 3 and newest_first(pub) and spaced(pub, 5000),
          pub)
    check("queue: the newest sample is at most 5 s old and on the wall "
          "clock", pub and 0 <= time.time() * 1000 - pub[0][1] <= 6000,
          pub[:1])
    check("queue: publish samples are cumulative, 705 in the newest",
          pub and pub[0][0] == 705 and pub[-1][0] < 705, pub)
    burst = max(x[0] - y[0] for x, y in zip(pub, pub[1:])) if pub else 0
    check("queue: the burst shows as a rate of at least 350 in 5 s "
          "between two samples", burst >= 350, pub)
    check("queue: deliver_get and ack count the 303 gets and 300 acks",
          dg and dg[0][0] == 303 and ack and ack[0][0] == 300, (dg, ack))
    check("queue: dead_letter counts the 3 dropped rejects",
          dead and dead[0][0] == 3 and dead[-1][0] == 0, dead)
    check("queue: the ready depth rose to 705 and fell to 402",
          ready and ready[0][0] == 402 and
          705 in [s for s, _ in ready], ready)
    msgs = samples(q["messages_details"])
    unacked = samples(q["messages_unacknowledged_details"])
    check("queue: messages = ready + unacknowledged at every sample",
          len(msgs) == len(ready) == len(unacked) and
          all(m[0] == r[0] + u[0] for m, r, u in zip(msgs, ready, unacked)),
          (msgs, ready, unacked))
    d = q["message_stats"]["publish_details"]
    span = (pub[0][1] - pub[-1][1]) / 1000.0
    check("queue: avg and avg_rate as RabbitMQ's (mean of the samples; "
          "first minus last over the span)",
          abs(d["avg"] - sum(s for s, _ in pub) / len(pub)) < 1e-6 and
          abs(d["avg_rate"] - (pub[0][0] - pub[-1][0]) / span) < 1e-6,
          d)
    q = get(a.http, "/api/queues/%2F/" + Q +
            "?lengths_age=60&lengths_incr=7&msg_rates_age=60&"
            "msg_rates_incr=7")
    pub = samples(q["message_stats"]["publish_details"])
    check("queue: an increment of 7 s is rounded up to the ring's 5 s "
          "steps (10 s)", len(pub) >= 2 and spaced(pub, 10000), pub)
    q = get(a.http, "/api/queues/%2F/" + Q +
            "?lengths_age=10&lengths_incr=5")
    ready = samples(q["messages_ready_details"])
    check("queue: lengths_age=10 gives the samples of the last 10 s and "
          "msg rates none", len(ready) <= 3 and
          "samples" not in q["message_stats"]["publish_details"], ready)

    # ---- the overview ----
    o = get(a.http, "/api/overview?lengths_age=30&lengths_incr=1&"
            "msg_rates_age=30&msg_rates_incr=1")
    opub = samples(o["message_stats"]["publish_details"])
    oready = samples(o["queue_totals"]["messages_ready_details"])
    check("overview: the broker's samples are 1 s apart (5 s at the "
          "default interval)", len(opub) >= 15 and spaced(opub, 1000) and
          newest_first(opub), opub[:4])
    check("overview: publish counts every channel's, 705 in the newest",
          opub and opub[0][0] == 705, opub[:2])
    check("overview: the ready depth of every queue, 402 in the newest",
          oready and oready[0][0] == 402, oready[:2])
    odead = samples(o["message_stats"]["dead_letter_details"])
    check("overview: dead_letter counts the drops", odead and
          odead[0][0] == 3, odead[:2])
    o = get(a.http, "/api/overview?msg_rates_age=600&msg_rates_incr=60")
    opub = samples(o["message_stats"]["publish_details"])
    check("overview: the hour's ring for age=600 (12 s steps, 60 s "
          "apart)", opub and spaced(opub, 60000), opub)
    check("overview: sample_retention_policies name how far each ring "
          "reaches (121, 732, 5880 s at 1 s; 605, 3660, 29400 at 5 s)",
          o["sample_retention_policies"]["global"] == [121, 732, 5880] and
          o["sample_retention_policies"]["basic"] == [120, 720, 5760],
          o["sample_retention_policies"])
    check("overview: roost_version beside the announced rabbitmq_version",
          o.get("roost_version") and
          o["roost_version"] != o["rabbitmq_version"],
          (o.get("roost_version"), o["rabbitmq_version"]))

    # a management user who is not a monitor sees its own totals, and
    # no history of the whole broker
    put(a.http, "/api/users/hist-mgmt",
        {"password": "pw", "tags": "management"})
    put(a.http, "/api/permissions/%2F/hist-mgmt",
        {"configure": ".*", "write": ".*", "read": ".*"})
    o = get(a.http, "/api/overview?msg_rates_age=60&msg_rates_incr=5",
            "hist-mgmt", "pw")
    check("overview: a user who is not a monitor gets no broker samples",
          "samples" not in o["message_stats"].get("publish_details", {}),
          o["message_stats"].get("publish_details"))
    q = get(a.http, "/api/queues/%2F/" + Q +
            "?msg_rates_age=60&msg_rates_incr=5", "hist-mgmt", "pw")
    check("a queue of its vhost: its samples",
          len(samples(q["message_stats"]["publish_details"])) >= 3)
    conn.close()


if __name__ == "__main__":
    main()
