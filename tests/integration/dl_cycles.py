# SPDX-License-Identifier: Apache-2.0
"""Dead-letter cycles as RabbitMQ 3.10 judges them (dl_cycles.sh): a
dead-lettered message is dropped for a queue only when reaching it would
close a fully automatic cycle (x-death names that queue, and no death
since, nor that one, was a rejection). A message published again with
its x-death (a replay) that fails again goes back to the dead-letter
queue; an expiry loop of a queue into itself ends at once; a rejection
loop and a reject-then-expire retry loop go on. --reference runs the
same against RabbitMQ (rabbitmq-ref, port 5699); without it, a drop is
also checked in the queue's counters (--http)."""
import argparse
import time

import pika

from checks import Api, check, done, wait_replay

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--http", type=int, default=0)
ap.add_argument("--log", default="", help="roostd's log file")
ap.add_argument("--reference", action="store_true")
args = ap.parse_args()
conn = pika.BlockingConnection(pika.ConnectionParameters(
    "127.0.0.1", args.port, heartbeat=0))
ch = conn.channel()


def fresh(name, **arguments):
    ch.queue_delete(name)
    ch.queue_declare(name, durable=True, arguments=arguments or None)


def depth(name):
    return ch.queue_declare(name, passive=True).method.message_count


def fail_all(queue):
    """Nack with requeue every message of 'queue' until it is empty
    (its delivery limit dead-letters them)."""
    for _ in range(100):
        m, _, _ = ch.basic_get(queue)
        if m is None:
            return
        ch.basic_nack(m.delivery_tag, requeue=True)


def publish_and_fail_jobs():
    for i in range(3):
        ch.basic_publish("", "dlc.jobs", b"job%d" % i,
                         pika.BasicProperties(delivery_mode=2))
    time.sleep(0.3)
    fail_all("dlc.jobs")
    time.sleep(0.3)


def reject_rounds(queue, n, wait):
    """Get and reject (no requeue) the message of 'queue' 'n' times,
    'wait' seconds after each; then its x-death, taken (None: gone)."""
    for _ in range(n):
        time.sleep(0.1)
        m, _, _ = ch.basic_get(queue)
        ch.basic_reject(m.delivery_tag, requeue=False)
        time.sleep(wait)
    m, props, _ = ch.basic_get(queue, auto_ack=True)
    return deaths(props) if m is not None else None


def deaths(props):
    return [(d["queue"], d["reason"], d["count"])
            for d in (props.headers or {}).get("x-death", [])]


# 1. fail, replay, fail again: back in the dead-letter queue
fresh("dlc.dlq")
fresh("dlc.jobs", **{"x-queue-type": "quorum", "x-delivery-limit": 1,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "dlc.dlq"})
publish_and_fail_jobs()
check("replay: the three failed jobs are dead-lettered",
      depth("dlc.dlq") == 3, "dlq holds %d" % depth("dlc.dlq"))
for _ in range(3):
    m, props, body = ch.basic_get("dlc.dlq")
    ch.basic_publish("", "dlc.jobs", body, props)
    ch.basic_ack(m.delivery_tag)
time.sleep(0.3)
fail_all("dlc.jobs")
time.sleep(0.3)
check("replay: failing again, they are back in the dead-letter queue",
      depth("dlc.dlq") == 3 and depth("dlc.jobs") == 0,
      "dlq %d, jobs %d" % (depth("dlc.dlq"), depth("dlc.jobs")))
m, props, _ = ch.basic_get("dlc.dlq", auto_ack=True)
check("replay: x-death counts the second death in the same entry",
      m is not None and deaths(props)[:1] == [("dlc.jobs", "delivery_limit",
                                               2)], str(deaths(props)))

# 1b. the same through Roost's own replay (POST .../replay): a new
# publish, which failing again dead-letters again
if not args.reference:
    api = Api(args.http)
    ch.queue_purge("dlc.dlq")
    publish_and_fail_jobs()
    for rnd in (1, 2):
        st, r = api.call("POST", "queues/%2F/dlc.dlq/replay", {"rate": 0})
        r = wait_replay(api, r["id"]) if st in (200, 201, 202) else r
        check("replay API, round %d: the three jobs moved" % rnd,
              isinstance(r, dict) and r.get("moved") == 3, str((st, r)))
        time.sleep(0.3)
        fail_all("dlc.jobs")
        time.sleep(0.3)
        check("replay API, round %d: failing again, back in the "
              "dead-letter queue" % rnd, depth("dlc.dlq") == 3,
              "dlq %d, jobs %d" % (depth("dlc.dlq"), depth("dlc.jobs")))

# 2. an expiry loop of a queue into itself: dropped at the first expiry
fresh("dlc.self", **{"x-message-ttl": 50, "x-dead-letter-exchange": "",
                     "x-dead-letter-routing-key": "dlc.self"})
ch.basic_publish("", "dlc.self", b"loop")
time.sleep(0.6)
check("expiry into itself: dropped", depth("dlc.self") == 0,
      "holds %d" % depth("dlc.self"))
if not args.reference:
    st, info = api.call("GET", "queues/%2F/dlc.self")
    check("expiry into itself: counted as dropped (expired), not as "
          "dead-lettered", st == 200 and info["dropped"].get("expired") == 1
          and info["dead_lettered"].get("expired", 0) == 0,
          str(info if st != 200 else (info["dropped"],
                                      info["dead_lettered"])))

# 3. a rejection loop goes on, counting
fresh("dlc.rej", **{"x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "dlc.rej"})
ch.basic_publish("", "dlc.rej", b"again")
got = reject_rounds("dlc.rej", 3, 0.1)
check("rejection into itself: kept, counted",
      got == [("dlc.rej", "rejected", 3)], str(got))

# 4. reject, wait in a retry queue, come back: goes on
fresh("dlc.retry", **{"x-message-ttl": 50, "x-dead-letter-exchange": "",
                      "x-dead-letter-routing-key": "dlc.work"})
fresh("dlc.work", **{"x-dead-letter-exchange": "",
                     "x-dead-letter-routing-key": "dlc.retry"})
ch.basic_publish("", "dlc.work", b"retry me")
got = reject_rounds("dlc.work", 2, 0.4)
check("retry loop through a delay queue: back for a third try",
      got == [("dlc.retry", "expired", 2), ("dlc.work", "rejected", 2)],
      str(got))

# 5. ... but not when the failure is automatic (a delivery limit)
fresh("dlc.wait", **{"x-message-ttl": 50, "x-dead-letter-exchange": "",
                     "x-dead-letter-routing-key": "dlc.poison"})
fresh("dlc.poison", **{"x-queue-type": "quorum", "x-delivery-limit": 0,
                       "x-dead-letter-exchange": "",
                       "x-dead-letter-routing-key": "dlc.wait"})
ch.basic_publish("", "dlc.poison", b"poison",
                 pika.BasicProperties(delivery_mode=2))
for _ in range(3):
    time.sleep(0.2)
    fail_all("dlc.poison")
    time.sleep(0.3)
check("delivery limit through a delay queue: dropped when it comes round",
      depth("dlc.poison") == 0 and depth("dlc.wait") == 0,
      "poison %d, wait %d" % (depth("dlc.poison"), depth("dlc.wait")))

# 6. every drop counted, and said once per queue per interval
if not args.reference:
    fresh("dlc.ttl", **{"x-message-ttl": 10})
    for i in range(50):
        ch.basic_publish("", "dlc.ttl", b"t%d" % i)
    time.sleep(0.5)
    depth("dlc.ttl")            # expiry runs on the queue's next touch
    st, info = api.call("GET", "queues/%2F/dlc.ttl")
    check("drops without a dead-letter exchange counted",
          st == 200 and info["dropped"].get("expired") == 50, str(info))
    with open(args.log) as f:
        lines = [x for x in f if "queue 'dlc.ttl'" in x and "dropped" in x]
    check("and said once in the interval", len(lines) == 1, str(lines))
    ch.queue_delete("dlc.ttl")

for name in ("dlc.dlq", "dlc.jobs", "dlc.self", "dlc.rej", "dlc.retry",
             "dlc.work", "dlc.wait", "dlc.poison"):
    ch.queue_delete(name)
conn.close()
done()
