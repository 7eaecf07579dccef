# SPDX-License-Identifier: Apache-2.0
"""GET /api/aliveness-test/VHOST as the user who asks (issue 22, point
10). RabbitMQ 3.10.8 runs it over AMQP as that user (queue.declare of
"aliveness-test", a publish of "test_message" through the default
exchange, a basic.get), so every permission and limit applies; Roost
does the same on its internal AMQP session. Answers compared with the
reference node:

- no permissions in the vhost: 401 "User not authorised to access
  virtual host";
- permissions that do not cover the queue ("^$"): 401 not_authorised
  "ACCESS_REFUSED - access to queue 'aliveness-test' in vhost 'V'
  refused for user 'U'"; and no queue is made;
- the vhost's max-queues reached: 400 bad_request "406
  PRECONDITION_FAILED - cannot declare queue 'aliveness-test': queue
  limit in vhost 'V' (N) is reached";
- an administrator: 200 {"status":"ok"}, the queue left empty.

And an application's message already in a queue named aliveness-test
is not taken (a deliberate difference: RabbitMQ's no_ack get takes
it, docs/compatibility.md): the test answers 200 and the message is
still there, with its body and properties."""
import json

import pika

from hostile import Api, Broker, check, check_healthy, run


def parsed(body):
    try:
        return json.loads(body) if isinstance(body, str) else body
    except ValueError:
        return body


def expect(name, got, status, body):
    st, b = got
    check(name + ": %d" % status, st == status, "%s %s" % (st, b))
    check(name + ": its body", parsed(b) == body, repr(b))


def main():
    b = Broker(mgmt=True).start()
    admin = Api(b.mgmt_port)
    admin.call("PUT", "vhosts/alv", {})
    admin.call("PUT", "permissions/alv/guest",
               {"configure": ".*", "write": ".*", "read": ".*"})
    for name in ("nobody", "narrow"):
        admin.call("PUT", "users/" + name,
                   {"password": "p", "tags": "management"})
    admin.call("PUT", "permissions/alv/narrow",
               {"configure": "^$", "write": "^$", "read": "^$"})

    expect("no permissions in the vhost",
           Api(b.mgmt_port, "nobody", "p").call("GET", "aliveness-test/alv"),
           401, {"error": "not_authorised",
                 "reason": "User not authorised to access virtual host"})
    expect("permissions that miss the queue",
           Api(b.mgmt_port, "narrow", "p").call("GET", "aliveness-test/alv"),
           401, {"error": "not_authorised",
                 "reason": "ACCESS_REFUSED - access to queue "
                           "'aliveness-test' in vhost 'alv' refused for "
                           "user 'narrow'"})
    st, _ = admin.call("GET", "queues/alv/aliveness-test")
    check("refused: no queue made", st == 404, str(st))

    admin.call("PUT", "vhost-limits/alv/max-queues", {"value": 1})
    admin.call("PUT", "queues/alv/other", {})
    expect("queue limit reached", admin.call("GET", "aliveness-test/alv"),
           400, {"error": "bad_request",
                 "reason": "406 PRECONDITION_FAILED - cannot declare queue "
                           "'aliveness-test': queue limit in vhost 'alv' "
                           "(1) is reached"})
    admin.call("DELETE", "vhost-limits/alv/max-queues")

    expect("administrator", admin.call("GET", "aliveness-test/alv"), 200,
           {"status": "ok"})
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, virtual_host="alv"))
    ch = c.channel()
    decl = ch.queue_declare("aliveness-test", passive=True).method
    check("administrator: the queue is left empty",
          decl.message_count == 0, str(decl.message_count))

    # An application's message in a queue named aliveness-test.
    ch.confirm_delivery()
    ch.basic_publish("", "aliveness-test", b"the application's",
                     pika.BasicProperties(message_id="app-1"))
    expect("with an application's message",
           admin.call("GET", "aliveness-test/alv"), 200, {"status": "ok"})
    expect("again", admin.call("GET", "aliveness-test/alv"), 200,
           {"status": "ok"})
    got = []
    while True:
        m, props, body = ch.basic_get("aliveness-test", auto_ack=True)
        if m is None:
            break
        got.append((body, props.message_id))
    check("the application's message is not taken",
          (b"the application's", "app-1") in got, repr(got))
    check("no test message piles up behind it",
          [x for x in got if x[0] == b"test_message"] == [], repr(got))
    c.close()

    check_healthy("aliveness", b, 64 * 1024)
    b.stop()


run(main)
