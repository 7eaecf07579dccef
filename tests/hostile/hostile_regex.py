# SPDX-License-Identifier: Apache-2.0
"""Regular expressions that backtrack without end (issue 22, point 4):
^(a|aa)+$ over names "aaa...ab" takes PCRE2's default ten million steps
a name. A list filter with use_regex on every list route, a policy's
pattern at PUT and on a queue declared after it, and a permission's
pattern on a declare: each answers within 500 ms (the list filter 400
where the pattern gave up, the policy refused at PUT with a reason that
says so, the permission refused), while a control client is served
within 100 ms throughout, and the broker stays under its RSS bound."""
import threading
import time
import urllib.parse

import pika

from hostile import Api, Broker, check, check_healthy, control_ms, run

EVIL = "^(a|aa)+$"
NAMES = ["a" * (36 + i) + "b" for i in range(20)]
ROUTES = ["queues", "queues/%2F", "exchanges", "exchanges/%2F",
          "connections", "channels", "vhosts", "users", "bindings"]


class Watch(threading.Thread):
    """A control client every 20 ms; the slowest answer, in ms."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.worst, self.stop = port, 0.0, False

    def run(self):
        while not self.stop:
            ms = control_ms(self.port)
            self.worst = max(self.worst, 1e9 if ms is None else ms)
            time.sleep(0.02)


def timed(api, method, path, body=None):
    t0 = time.monotonic()
    st, out = api.call(method, path, body)
    return st, out, (time.monotonic() - t0) * 1000


def main():
    b = Broker(mgmt=True).start()
    api = Api(b.mgmt_port)
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, connection_attempts=1))
    ch = c.channel()
    for n in NAMES:
        ch.queue_declare(n)
        ch.exchange_declare(n)
    w = Watch(b.port)
    w.start()

    filt = "page=1&page_size=100&use_regex=true&name=" + \
        urllib.parse.quote(EVIL, safe="")
    for route in ROUTES:
        st, out, ms = timed(api, "GET", route + "?" + filt)
        named = route.startswith(("queues", "exchanges"))
        check("GET /api/%s filtered by %s: %s" % (
              route, EVIL, "400" if named else "answered"),
              st == 400 if named else st in (200, 400),
              "%s %s" % (st, str(out)[:200]))
        if named:
            check("GET /api/%s: the reason says the match limit" % route,
                  "match limit" in str(out), str(out)[:200])
        check("GET /api/%s: within 500 ms" % route, ms < 500, "%.0f ms" % ms)

    st, out, ms = timed(api, "PUT", "policies/%2F/evil",
                        {"pattern": EVIL, "apply-to": "queues",
                         "definition": {"max-length": 1}})
    check("PUT a policy with %s: refused with 400" % EVIL, st == 400,
          "%s %s" % (st, str(out)[:200]))
    check("PUT the policy: the reason names the match limit and a queue",
          "match limit" in str(out) and NAMES[0] in str(out), str(out)[:300])
    check("PUT the policy: within 500 ms", ms < 500, "%.0f ms" % ms)
    st, _, _ = timed(api, "GET", "policies/%2F/evil")
    check("the refused policy is not there", st == 404, str(st))

    # A policy set before the names it gives up on: not applied there,
    # logged once, and the declares stay quick.
    st, out, _ = timed(api, "PUT", "policies/%2F/late",
                       {"pattern": "^(c|cc)+$", "apply-to": "queues",
                        "definition": {"max-length": 1}})
    check("PUT a policy before its names exist: accepted", st in (201, 204),
          "%s %s" % (st, out))
    t0 = time.monotonic()
    for i in range(20):
        ch.queue_declare("c" * (36 + i) + "d")
    ms = (time.monotonic() - t0) * 1000
    check("20 declares the late policy gives up on: within 500 ms",
          ms < 500, "%.0f ms" % ms)
    check("the late policy's limit is logged once",
          b.log_text().count("exceeds the match limit") == 1,
          b.tail())
    st, out = api.call("GET", "queues/%2F/" + urllib.parse.quote(
        "c" * 36 + "d", safe=""))
    check("the late policy is not applied where it gave up",
          st == 200 and out.get("policy") in (None, ""), str(out)[:200])

    # A permission whose pattern gives up: refused, quickly.
    api.call("PUT", "users/evil", {"password": "evil", "tags": ""})
    api.call("PUT", "permissions/%2F/evil",
             {"configure": EVIL, "write": ".*", "read": ".*"})
    e = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, credentials=pika.PlainCredentials(
            "evil", "evil"), connection_attempts=1))
    ech = e.channel()
    t0 = time.monotonic()
    code = None
    try:
        ech.queue_declare("a" * 60 + "b")
    except pika.exceptions.ChannelClosedByBroker as ex:
        code = ex.reply_code
    ms = (time.monotonic() - t0) * 1000
    check("a declare its configure pattern gives up on: 403", code == 403,
          str(code))
    check("that declare: within 500 ms", ms < 500, "%.0f ms" % ms)
    e.close()

    w.stop = True
    w.join()
    check("a control client within 100 ms throughout", w.worst <= 100,
          "worst %.0f ms" % w.worst)
    c.close()
    check_healthy("regex", b, 64 * 1024)
    b.stop()


run(main)
