# SPDX-License-Identifier: Apache-2.0
"""Dead-letter replay into internal exchanges (issue 22, point 9). AMQP
refuses a publish to an internal exchange (ACCESS_REFUSED); a replay
(POST /api/queues/V/Q/replay) must not be a way round it, into
amq.rabbitmq.trace above all (forged firehose events). A replay to a
chosen internal exchange, amq.rabbitmq.trace or one declared
internal=true, answers 403 "cannot publish to internal exchange ..."
and publishes nothing; a replay to each message's x-death exchange
skips the messages whose x-death (forged here) names an internal one,
leaving them in the queue and counting them in "skipped", and moves
the others."""
import json
import time

import pika

from hostile import (Api, Broker, check, check_healthy, run, until,
                     wait_replay)


def forged(exchange, rkey):
    """Headers claiming a death after a publish to 'exchange'."""
    return pika.BasicProperties(headers={"x-death": [{
        "count": 1, "reason": "rejected", "queue": "work",
        "time": int(time.time()), "exchange": exchange,
        "routing-keys": [rkey]}]})


def depth(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


def refused(api, name, exchange):
    st, body = api.call("POST", "queues/%2F/dlq/replay",
                        {"exchange": exchange, "rate": 0})
    try:
        parsed = json.loads(body) if isinstance(body, str) else body
    except ValueError:
        parsed = body
    want = ("cannot publish to internal exchange '%s' in vhost '/'" %
            exchange)
    check(name + ": 403", st == 403, "%s %s" % (st, body))
    check(name + ": the reason is AMQP's",
          isinstance(parsed, dict) and parsed.get("reason") == want,
          repr(body))


def main():
    b = Broker(mgmt=True).start()
    api = Api(b.mgmt_port)
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port))
    ch = c.channel()
    for name in ("dlq", "spy", "intq", "okq"):
        ch.queue_declare(name)
    ch.exchange_declare("int", "topic", internal=True)
    ch.queue_bind("spy", "amq.rabbitmq.trace", "#")
    ch.queue_bind("intq", "int", "#")
    ch.queue_bind("okq", "amq.direct", "ok")
    ch.basic_publish("", "dlq", b"forged firehose event",
                     forged("amq.rabbitmq.trace", "publish.amq.direct"))
    ch.basic_publish("", "dlq", b"into an internal exchange",
                     forged("int", "x"))
    ch.basic_publish("", "dlq", b"an honest dead letter",
                     forged("amq.direct", "ok"))
    until(lambda: depth(ch, "dlq") == 3)

    refused(api, "exchange amq.rabbitmq.trace", "amq.rabbitmq.trace")
    refused(api, "exchange declared internal", "int")
    st, replays = api.call("GET", "replays")
    check("refused: no replay started", st == 200 and replays == [],
          "%s %s" % (st, replays))
    check("refused: nothing published or taken",
          (depth(ch, "spy"), depth(ch, "intq"), depth(ch, "dlq")) ==
          (0, 0, 3))

    st, r = api.call("POST", "queues/%2F/dlq/replay", {"rate": 0})
    check("x-death targets: the replay starts", st == 201,
          "%s %s" % (st, r))
    if st == 201:
        r = wait_replay(api, r["id"])
        check("x-death targets: done, 1 moved, 2 skipped",
              (r["state"], r["moved"], r["skipped"]) == ("done", 1, 2),
              repr(r))
    until(lambda: depth(ch, "okq") == 1)
    check("x-death targets: nothing reached an internal exchange",
          (depth(ch, "spy"), depth(ch, "intq")) == (0, 0))
    check("x-death targets: the honest one moved, the forged stay",
          (depth(ch, "okq"), depth(ch, "dlq")) == (1, 2))
    check("x-death targets: the skip is logged",
          "internal exchange 'amq.rabbitmq.trace'" in b.log_text(),
          b.tail())
    c.close()

    check_healthy("replay_internal", b, 64 * 1024)
    b.stop()


run(main)
