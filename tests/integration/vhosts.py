# SPDX-License-Identifier: Apache-2.0
"""Vhosts, limits and permissions changed at run time, through the
management API, seen by AMQP clients (pika). Run by vhosts.sh against
roostd; `--reference` runs the same checks against a RabbitMQ with the
management plugin (no restart there), to keep the expectations its own.

  vhosts.py --amqp PORT --http PORT before   # make, limit, use, delete
  vhosts.py --amqp PORT --http PORT after    # after a restart: all gone

Prints one "PASS name" or "FAIL name: why" per check; exit 1 on a FAIL.
"""
import argparse
import time

import pika

from checks import Api, check, done, q

VH = "rt-v1"
REFERENCE = False


def connect(port, vhost=VH):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, virtual_host=vhost, connection_attempts=1,
        blocked_connection_timeout=10))


def refusal(fn):
    """The text of the broker's refusal of fn(), or None if it passed."""
    try:
        fn()
    except pika.exceptions.ProbableAccessDeniedError as e:
        return str(e.args[0])
    except (pika.exceptions.ChannelClosedByBroker,
            pika.exceptions.ConnectionClosedByBroker) as e:
        return "(%d) %s" % (e.reply_code, e.reply_text)
    return None


def before(amqp, api):
    api.call("DELETE", "vhosts/" + q(VH))
    st, _ = api.call("PUT", "vhosts/" + q(VH), {"description": "run time"})
    check("vhost created (201)", st == 201, "status %s" % st)
    # As in RabbitMQ, the user who creates a vhost through the API gets
    # full permissions in it: setting them again is an update.
    st, body = api.call("GET", "vhosts/%s/permissions" % q(VH))
    check("its creator has full permissions in it",
          st == 200 and body == [{"vhost": VH, "user": "guest",
                                  "configure": ".*", "write": ".*",
                                  "read": ".*"}], "%s %s" % (st, body))
    st, _ = api.call("PUT", "permissions/%s/guest" % q(VH),
                     {"configure": ".*", "write": ".*", "read": ".*"})
    check("permissions set again (204)", st == 204, "status %s" % st)

    c = connect(amqp)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare("dq", durable=True)
    for i in range(10):
        ch.basic_publish("", "dq", b"m%d" % i,
                         pika.BasicProperties(delivery_mode=2))
    check("the new vhost takes durable messages",
          ch.queue_declare("dq", passive=True).method.message_count == 10)

    # In Roost a permission taken away applies to the open channel at
    # once, even to the exchange it just published to; RabbitMQ's channel
    # keeps what it has checked (docs/compatibility.md).
    ch.basic_publish("amq.direct", "k", b"x")
    api.call("PUT", "permissions/%s/guest" % q(VH),
             {"configure": ".*", "write": "^$", "read": ".*"})
    why = refusal(lambda: ch.basic_publish("amq.direct", "k", b"x"))
    if REFERENCE:
        check("RabbitMQ: the channel keeps its checked write", why is None,
              why)
    else:
        check("revoked write refuses the next publish",
              why == "(403) ACCESS_REFUSED - access to exchange "
              "'amq.direct' in vhost '%s' refused for user 'guest'" % VH,
              why)
    api.call("PUT", "permissions/%s/guest" % q(VH),
             {"configure": ".*", "write": ".*", "read": ".*"})
    ch = c.channel()
    ch.confirm_delivery()
    ch.basic_publish("amq.direct", "k", b"x")
    check("restored write lets it publish again", True)

    # Limits: max-queues, then max-connections.
    st, _ = api.call("PUT", "vhost-limits/%s/max-queues" % q(VH),
                     {"value": 2})
    check("max-queues set (204)", st == 204, "status %s" % st)
    ch.queue_declare("second")
    why = refusal(lambda: ch.queue_declare("third"))
    check("max-queues refuses one more queue",
          why == "(406) PRECONDITION_FAILED - cannot declare queue 'third': "
          "queue limit in vhost '%s' (2) is reached" % VH, why)
    ch = c.channel()
    ch.queue_delete("second")
    api.call("DELETE", "vhost-limits/%s/max-queues" % q(VH))
    api.call("PUT", "vhost-limits/%s/max-connections" % q(VH), {"value": 1})
    why = refusal(lambda: connect(amqp))
    check("max-connections refuses a second connection",
          why is not None and "NOT_ALLOWED - access to vhost '%s' refused "
          "for user 'guest': connection limit (1) is reached" % VH in why, why)
    st, body = api.call("GET", "vhost-limits/" + q(VH))
    check("the limits are listed",
          st == 200 and body == [{"vhost": VH,
                                  "value": {"max-connections": 1}}],
          "%s %s" % (st, body))
    api.call("DELETE", "vhost-limits/%s/max-connections" % q(VH))
    c2 = connect(amqp)
    check("without the limit it connects", c2.is_open)
    c2.close()

    # A user without permissions in it cannot open it.
    api.call("PUT", "users/rt-u", {"password": "pw", "tags": ""})
    why = refusal(lambda: pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", amqp, virtual_host=VH, connection_attempts=1,
        credentials=pika.PlainCredentials("rt-u", "pw"))))
    check("a user without permissions there cannot open it",
          why is not None and "NOT_ALLOWED - access to vhost '%s' refused "
          "for user 'rt-u'" % VH in why, why)
    # Deleting a user closes its connections, as in RabbitMQ.
    api.call("PUT", "permissions/%s/rt-u" % q(VH),
             {"configure": ".*", "write": ".*", "read": ".*"})
    cu = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", amqp, virtual_host=VH, connection_attempts=1,
        credentials=pika.PlainCredentials("rt-u", "pw")))
    api.call("DELETE", "users/rt-u")
    why = None
    try:
        for _ in range(50):
            cu.process_data_events(0.1)
    except pika.exceptions.ConnectionClosedByBroker as e:
        why = "(%d) %s" % (e.reply_code, e.reply_text)
    check("a deleted user's connections are closed",
          why == "(320) CONNECTION_FORCED - user 'rt-u' is deleted", why)

    # Deleting the vhost closes its connections, with RabbitMQ's text.
    st, _ = api.call("DELETE", "vhosts/" + q(VH))
    check("vhost deleted (204)", st == 204, "status %s" % st)
    why = None
    try:
        for _ in range(50):
            c.process_data_events(0.1)
    except pika.exceptions.ConnectionClosedByBroker as e:
        why = "(%d) %s" % (e.reply_code, e.reply_text)
    check("its connections are closed",
          why == "(320) CONNECTION_FORCED - vhost '%s' is deleted" % VH, why)
    st, _ = api.call("GET", "vhosts/" + q(VH))
    check("it is gone (404)", st == 404, "status %s" % st)
    st, body = api.call("GET", "permissions")
    check("its permissions are gone", st == 200 and not any(
        p["vhost"] == VH for p in body), body)


def after(amqp, api):
    st, _ = api.call("GET", "vhosts/" + q(VH))
    check("after a restart it is still gone (404)", st == 404,
          "status %s" % st)
    # Made again, it is empty: the old queue and its messages are gone.
    api.call("PUT", "vhosts/" + q(VH), {})
    api.call("PUT", "permissions/%s/guest" % q(VH),
             {"configure": ".*", "write": ".*", "read": ".*"})
    ch = connect(amqp).channel()
    why = refusal(lambda: ch.queue_declare("dq", passive=True))
    check("made again, its old queue is gone",
          why == "(404) NOT_FOUND - no queue 'dq' in vhost '%s'" % VH, why)
    api.call("DELETE", "vhosts/" + q(VH))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--amqp", type=int, required=True)
    ap.add_argument("--http", type=int, required=True)
    ap.add_argument("--reference", action="store_true",
                    help="the broker is RabbitMQ")
    ap.add_argument("phase", choices=["before", "after"])
    a = ap.parse_args()
    global REFERENCE
    REFERENCE = a.reference
    api = Api(a.http)
    (before if a.phase == "before" else after)(a.amqp, api)
    done()


if __name__ == "__main__":
    main()
