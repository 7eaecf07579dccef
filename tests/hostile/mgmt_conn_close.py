# SPDX-License-Identifier: Apache-2.0
"""Closing someone else's connection over the management API (issue 22,
point 6). A monitoring user sees every connection but, as in RabbitMQ
(rabbit_mgmt_util:is_authorized_user), may not close one it does not
own: DELETE /api/connections/NAME answers 401 not_authorised "User not
authorised to access object" and the client's connection stays open.
Its own user (a plain management user) may close it, and so may an
administrator: 204, and the client gets connection.close 320."""
import json
import time

import pika

from hostile import Api, Broker, check, check_healthy, q, run, until


def user(api, name, tags):
    api.call("PUT", "users/" + name, {"password": "p", "tags": tags})
    api.call("PUT", "permissions/%2F/" + name,
             {"configure": ".*", "write": ".*", "read": ".*"})


def open_as(b, api, name):
    """A pika connection as 'name' and its name in the API."""
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, credentials=pika.PlainCredentials(name, "p")))
    found = []

    def listed():
        st, conns = api.call("GET", "connections")
        found[:] = [x["name"] for x in conns or [] if x["user"] == name]
        return st == 200 and found
    if not until(listed, 10):
        raise RuntimeError("%s's connection is not listed" % name)
    return c, found[0]


def closed_by_broker(c, timeout=5):
    """The reply code of the connection.close 'c' got, or None."""
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            c.process_data_events(time_limit=0.1)
    except pika.exceptions.ConnectionClosedByBroker as e:
        return e.reply_code
    return None


def still_works(c):
    try:
        ch = c.channel()
        ch.queue_declare("", exclusive=True)
        ch.close()
        return True
    except pika.exceptions.AMQPError:
        return False


def main():
    b = Broker(mgmt=True).start()
    admin = Api(b.mgmt_port)
    user(admin, "mon", "monitoring")
    user(admin, "alice", "management")
    mon, alice = Api(b.mgmt_port, "mon", "p"), Api(b.mgmt_port, "alice", "p")

    c, name = open_as(b, admin, "alice")
    st, body = mon.call("DELETE", "connections/" + q(name))
    check("monitor: DELETE of another user's connection is 401", st == 401,
          "%s %s" % (st, body))
    try:
        parsed = json.loads(body) if isinstance(body, str) else body
    except ValueError:
        parsed = body
    check("monitor: RabbitMQ's not_authorised body",
          parsed == {"error": "not_authorised",
                     "reason": "User not authorised to access object"},
          repr(body))
    check("monitor: the connection is still open",
          closed_by_broker(c, 0.5) is None and still_works(c))
    st, _ = mon.call("GET", "connections/" + q(name))
    check("monitor: may still see it", st == 200, str(st))

    st, body = alice.call("DELETE", "connections/" + q(name))
    check("own user: DELETE is 204", st == 204, "%s %s" % (st, body))
    code = closed_by_broker(c)
    check("own user: the client gets connection.close 320", code == 320,
          str(code))

    c, name = open_as(b, admin, "alice")
    st, body = admin.call("DELETE", "connections/" + q(name))
    check("administrator: DELETE is 204", st == 204, "%s %s" % (st, body))
    code = closed_by_broker(c)
    check("administrator: the client gets connection.close 320",
          code == 320, str(code))

    check_healthy("conn_close", b, 64 * 1024)
    b.stop()


run(main)
