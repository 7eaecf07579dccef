# SPDX-License-Identifier: Apache-2.0
"""Policies and operator policies, set through the management API and
seen by AMQP clients (pika): the API's answers and its refusals, matching
and priority, apply-to, each key's effect on a real queue or exchange,
arguments against policies against operator policies, changes applied
to existing queues, definitions export and import. Run by policy.sh
against roostd; `--reference` runs the same checks against RabbitMQ 3.10
(no restart there), to keep the expectations its own.

  policy.py --amqp PORT --http PORT before   # everything, leaves some
  policy.py --amqp PORT --http PORT after    # after a restart: still set

Prints one "PASS name" or "FAIL name: why" per check; exit 1 on a FAIL.
"""
import argparse
import time

import pika

from checks import Api, check, done, q, until

VH = "rt-pol"
REFERENCE = False


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, virtual_host=VH, connection_attempts=1,
        blocked_connection_timeout=10))


def put(api, name, body, kind="policies"):
    return api.call("PUT", "%s/%s/%s" % (kind, q(VH), q(name)), body)


def delete(api, name, kind="policies"):
    return api.call("DELETE", "%s/%s/%s" % (kind, q(VH), q(name)))


def count(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


def fill(ch, queue, n, prefix=b"m"):
    for i in range(n):
        ch.basic_publish("", queue, prefix + b"%d" % i)


def bodies(ch, queue):
    out = []
    while True:
        m = ch.basic_get(queue, auto_ack=True)
        if m[0] is None:
            return out
        out.append(m[2])


def validation(text):
    """A policy refusal as RabbitMQ's policy resource words it."""
    return {"error": "bad_request",
            "reason": "Validation failed\n\n" + text + "\n"}


def api_checks(api):
    body = {"pattern": "^api", "definition": {"max-length": 5},
            "priority": 1, "apply-to": "queues"}
    st, _ = put(api, "p1", body)
    check("PUT a new policy: 201", st == 201, st)
    st, _ = put(api, "p1", body)
    check("PUT it again: 204", st == 204, st)
    st, got = api.call("GET", "policies/%s/p1" % q(VH))
    want = {"vhost": VH, "name": "p1", "pattern": "^api",
            "apply-to": "queues", "definition": {"max-length": 5},
            "priority": 1}
    check("GET it: RabbitMQ's shape", st == 200 and got == want, got)
    st, got = api.call("GET", "policies/%s" % q(VH))
    check("listed in its vhost", st == 200 and got == [want], got)
    st, got = api.call("GET", "policies")
    check("listed in /api/policies", st == 200 and want in got, got)
    st, _ = put(api, "p2", {"pattern": "", "definition": {"expires": 5000}})
    st, got = api.call("GET", "policies/%s/p2" % q(VH))
    check("apply-to all and priority 0 by default",
          isinstance(got, dict) and got.get("apply-to") == "all" and
          got.get("priority") == 0, got)
    st, _ = delete(api, "p2")
    check("DELETE: 204", st == 204, st)
    st, _ = delete(api, "p2")
    check("DELETE again: 404", st == 404, st)
    st, _ = api.call("GET", "policies/%s/p2" % q(VH))
    check("GET a missing one: 404", st == 404, st)
    st, _ = api.call("GET", "policies/rt-no-such-vhost")
    check("a missing vhost's list: 404", st == 404, st)
    st, got = api.call("PUT", "policies/rt-no-such-vhost/p",
                       {"pattern": "a", "definition": {"max-length": 1}})
    check("PUT in a missing vhost: 404 vhost_not_found",
          st == 404 and '"vhost_not_found"' in got, "%s %s" % (st, got))
    delete(api, "p1")

    # Operator policies: the same shape at their own path.
    st, _ = put(api, "o1", {"pattern": "^api", "definition":
                            {"max-length": 3, "message-ttl": 100}},
                "operator-policies")
    check("PUT an operator policy: 201", st == 201, st)
    st, got = api.call("GET", "operator-policies/%s/o1" % q(VH))
    check("GET it", st == 200 and got == {
        "vhost": VH, "name": "o1", "pattern": "^api", "apply-to": "all",
        "definition": {"max-length": 3, "message-ttl": 100},
        "priority": 0}, got)
    st, got = api.call("GET", "operator-policies/%s" % q(VH))
    check("operator policies are listed apart",
          st == 200 and len(got) == 1 and
          api.call("GET", "policies/%s" % q(VH))[1] == [], got)
    delete(api, "o1", "operator-policies")


def who_may(api):
    """A management user reads the lists; a policy itself wants a
    policymaker, an operator policy an administrator."""
    user = "rt-pol-user"
    for tags in ("management", "policymaker"):
        api.call("PUT", "users/" + user, {"password": "pw", "tags": tags})
        api.call("PUT", "permissions/%s/%s" % (q(VH), user),
                 {"configure": ".*", "write": ".*", "read": ".*"})
        other = Api(api.port, user, "pw")
        st, _ = other.call("GET", "policies/%s" % q(VH))
        check("%s: lists the policies" % tags, st == 200, st)
        st, got = other.call("PUT", "policies/%s/w" % q(VH),
                             {"pattern": "^w", "definition":
                              {"max-length": 1}})
        if tags == "management":
            check("management: may not set a policy",
                  st == 401 and "User not authorised to access object" in got,
                  "%s %s" % (st, got))
        else:
            check("policymaker: sets a policy", st == 201, st)
        st, got = other.call("PUT", "operator-policies/%s/w" % q(VH),
                             {"pattern": "^w", "definition":
                              {"max-length": 1}})
        check("%s: may not set an operator policy" % tags,
              st == 401 and "Not administrator user" in got,
              "%s %s" % (st, got))
    delete(api, "w")
    api.call("DELETE", "users/" + user)


def refusals(api):
    import json

    def refused(name, body, want, kind="policies", raw=None):
        if raw is not None:
            st, got = api.call("PUT", "%s/%s/bad" % (kind, q(VH)), raw=raw)
        else:
            st, got = put(api, "bad", body, kind)
        try:
            got = json.loads(got)
        except (TypeError, ValueError):
            pass
        check(name, st == 400 and got == want, "%s %r" % (st, got))

    def d(definition, **extra):
        body = {"pattern": "a", "definition": definition}
        body.update(extra)
        return body

    refused("malformed JSON: 400 not_json", None,
            {"error": "bad_request", "reason": "not_json"}, raw=b"{nojson")
    refused("no pattern: key_missing", {"definition": {"max-length": 1}},
            {"error": "bad_request", "reason": "[{key_missing,pattern}]"})
    refused("no definition: key_missing", {"pattern": "a"},
            {"error": "bad_request", "reason": "[{key_missing,definition}]"})
    refused("a pattern that does not compile",
            {"pattern": "(", "definition": {"max-length": 1}},
            validation("pattern should be regular expression but is "
                       "invalid: {\"missing )\",1}"))
    refused("a pattern that is not a string",
            {"pattern": 5, "definition": {"max-length": 1}},
            validation("pattern should be a binary but was 5"))
    refused("unknown keys, sorted and HTML-escaped",
            d({"max-length": 5, "foo": 1, "bar": 2}),
            validation("[{&lt;&lt;\"bar\"&gt;&gt;,2},{&lt;&lt;\"foo\"&gt;&gt;"
                       ",1}] are not recognised policy settings"))
    refused("a string for a number", d({"max-length": "5"}),
            validation("&lt;&lt;\"5\"&gt;&gt; is not a valid maximum length"))
    refused("a float for a number", d({"max-length": 5.0}),
            validation("5.0 is not a valid maximum length"))
    refused("a negative TTL", d({"message-ttl": -1}),
            validation("-1 is not a valid message TTL"))
    refused("expires 0", d({"expires": 0}),
            validation("0 is not a valid queue expiry"))
    refused("an unknown overflow", d({"overflow": "foo"}),
            validation("&lt;&lt;\"foo\"&gt;&gt; is not a valid overflow "
                       "value"))
    refused("a number for an exchange name", d({"dead-letter-exchange": 5}),
            validation("5 is not a valid dead letter exchange name"))
    refused("a bad queue-mode", d({"queue-mode": "x"}),
            validation("&lt;&lt;\"x\"&gt;&gt; is not a valid queue-mode "
                       "value"))
    refused("an empty definition", d({}), validation("no policy provided"))
    refused("a bad apply-to", d({"max-length": 1}, **{"apply-to": "foo"}),
            validation("apply-to 'foo' unrecognised; should be 'queues', "
                       "'exchanges' or 'all'"))
    refused("a string priority", d({"max-length": 1}, priority="3"),
            validation("priority should be a number, actually was "
                       "&lt;&lt;\"3\"&gt;&gt;"))
    refused("every reason, one a line, in RabbitMQ's order",
            {"pattern": "(", "definition": {"max-lengthx": 1},
             "apply-to": "x", "priority": "x"},
            validation("[{&lt;&lt;\"max-lengthx\"&gt;&gt;,1}] are not "
                       "recognised policy settings\napply-to 'x' "
                       "unrecognised; should be 'queues', 'exchanges' or "
                       "'all'\npattern should be regular expression but is "
                       "invalid: {\"missing )\",1}\npriority should be a "
                       "number, actually was &lt;&lt;\"x\"&gt;&gt;"))
    # Operator policies: only their keys, and their reasons unescaped.
    refused("an operator policy refuses overflow",
            d({"overflow": "drop-head"}),
            {"error": "bad_request", "reason": "Validation failed\n\n"
             "[{<<\"overflow\">>,<<\"drop-head\">>}] are not recognised "
             "policy settings\n"}, "operator-policies")
    refused("an operator policy refuses dead-letter-exchange",
            d({"dead-letter-exchange": "x"}),
            {"error": "bad_request", "reason": "Validation failed\n\n"
             "[{<<\"dead-letter-exchange\">>,<<\"x\">>}] are not "
             "recognised policy settings\n"}, "operator-policies")
    refused("an operator policy's bad value",
            d({"max-length": "x"}),
            {"error": "bad_request", "reason": "Validation failed\n\n"
             "<<\"x\">> is not a valid maximum length\n"},
            "operator-policies")
    for key, value in [("expires", 1000), ("message-ttl", 100),
                       ("max-length", 1), ("max-length-bytes", 10),
                       ("delivery-limit", 3),
                       ("max-in-memory-length", 3)]:
        st, _ = put(api, "okey", d({key: value}), "operator-policies")
        check("an operator policy takes %s" % key, st in (201, 204), st)
    delete(api, "okey", "operator-policies")
    # RabbitMQ 3.12's consumer-timeout: 3.10 does not know it.
    st, _ = put(api, "ct", d({"consumer-timeout": 5000}))
    if REFERENCE:
        check("RabbitMQ 3.10 refuses consumer-timeout", st == 400, st)
    else:
        check("Roost takes consumer-timeout (RabbitMQ 3.12's)", st == 201,
              st)
    delete(api, "ct")
    st, _ = put(api, "rd", d({"requeue-delay": -1}))
    if not REFERENCE:
        check("a negative requeue-delay is refused", st == 400, st)
    st, _ = put(api, "rdl", d({"roost-delivery-limit": 1}))
    check("roost-delivery-limit is Roost's" if not REFERENCE else
          "RabbitMQ refuses roost-delivery-limit",
          st == (400 if REFERENCE else 201), st)
    delete(api, "rdl")


def matching(api, ch):
    # The highest priority wins; apply-to decides what it may match.
    put(api, "low", {"pattern": "^m-", "definition": {"max-length": 1},
                     "priority": 1, "apply-to": "queues"})
    put(api, "high", {"pattern": "prio", "definition": {"max-length": 3},
                      "priority": 5, "apply-to": "queues"})
    ch.queue_declare("m-prio")
    ch.queue_declare("m-other")
    fill(ch, "m-prio", 6)
    fill(ch, "m-other", 6)
    check("the higher priority wins", until(lambda: count(ch, "m-prio") == 3),
          count(ch, "m-prio"))
    check("a pattern matches unanchored",
          until(lambda: count(ch, "m-other") == 1), count(ch, "m-other"))
    delete(api, "high")
    delete(api, "low")
    # Equal priorities: Roost picks the first name; RabbitMQ's choice
    # follows the order of its table, which is not specified.
    if not REFERENCE:
        for first, second in (("tb", "ta"), ("ta", "tb")):
            ch.queue_delete("m-tie")
            put(api, first, {"pattern": "^m-tie$", "definition":
                             {"max-length": 2}, "apply-to": "queues"})
            put(api, second, {"pattern": "^m-tie$", "definition":
                              {"max-length": 4}, "apply-to": "queues"})
            ch.queue_declare("m-tie")
            fill(ch, "m-tie", 6)
            want = 2 if first == "ta" else 4
            check("a tie goes to the first name (%s set first)" % first,
                  until(lambda: count(ch, "m-tie") == want),
                  count(ch, "m-tie"))
            delete(api, "ta")
            delete(api, "tb")
    put(api, "ex", {"pattern": "^m-ex", "definition": {"max-length": 1},
                    "apply-to": "exchanges"})
    ch.queue_declare("m-ex")
    fill(ch, "m-ex", 3)
    check("an exchanges policy leaves queues alone",
          until(lambda: count(ch, "m-ex") == 3), count(ch, "m-ex"))
    delete(api, "ex")
    for name in ("m-prio", "m-other", "m-tie", "m-ex"):
        ch.queue_delete(name)


def keys(api, ch):
    # message-ttl
    put(api, "ttl", {"pattern": "^k-ttl$", "definition":
                     {"message-ttl": 100}, "apply-to": "queues"})
    ch.queue_declare("k-ttl")
    fill(ch, "k-ttl", 3)
    check("message-ttl expires messages",
          until(lambda: count(ch, "k-ttl") == 0), count(ch, "k-ttl"))
    delete(api, "ttl")
    # max-length with drop-head and with reject-publish
    put(api, "ml", {"pattern": "^k-ml", "definition": {"max-length": 2},
                    "apply-to": "queues"})
    put(api, "rp", {"pattern": "^k-mlr$", "definition":
                    {"max-length": 2, "overflow": "reject-publish"},
                    "apply-to": "queues", "priority": 1})
    ch.queue_declare("k-ml")
    ch.queue_declare("k-mlr")
    fill(ch, "k-ml", 5)
    fill(ch, "k-mlr", 5)
    until(lambda: count(ch, "k-ml") == 2 and count(ch, "k-mlr") == 2)
    check("max-length drops from the head", bodies(ch, "k-ml") ==
          [b"m3", b"m4"])
    check("overflow reject-publish keeps the first",
          bodies(ch, "k-mlr") == [b"m0", b"m1"])
    delete(api, "rp")
    delete(api, "ml")
    # max-length-bytes
    put(api, "mlb", {"pattern": "^k-mlb$", "definition":
                     {"max-length-bytes": 10}, "apply-to": "queues"})
    ch.queue_declare("k-mlb")
    fill(ch, "k-mlb", 4, b"12345-")
    check("max-length-bytes", until(lambda: count(ch, "k-mlb") == 1),
          count(ch, "k-mlb"))
    delete(api, "mlb")
    # dead-letter-exchange and -routing-key
    ch.queue_declare("k-dlq")
    put(api, "dlx", {"pattern": "^k-dl$", "definition":
                     {"dead-letter-exchange": "",
                      "dead-letter-routing-key": "k-dlq"},
                     "apply-to": "queues"})
    ch.queue_declare("k-dl")
    ch.basic_publish("", "k-dl", b"dead")
    until(lambda: count(ch, "k-dl") == 1)
    m = ch.basic_get("k-dl")
    ch.basic_reject(m[0].delivery_tag, requeue=False)
    check("dead-letter-exchange and -routing-key",
          until(lambda: count(ch, "k-dlq") == 1) and
          bodies(ch, "k-dlq") == [b"dead"])
    delete(api, "dlx")
    # expires
    put(api, "exp", {"pattern": "^k-exp$", "definition": {"expires": 300},
                     "apply-to": "queues"})
    ch.queue_declare("k-exp")

    def gone():
        c = ch.connection.channel()
        try:
            c.queue_declare("k-exp", passive=True)
            c.close()
            return False
        except pika.exceptions.ChannelClosedByBroker:
            return True
    # A passive declare is a use (it renews the lease): look once.
    time.sleep(1.0)
    check("expires deletes an unused queue", gone())
    delete(api, "exp")
    # delivery-limit: quorum queues only; roost-delivery-limit: any
    put(api, "dl", {"pattern": "^k-lim", "definition": {"delivery-limit": 1},
                    "apply-to": "queues"})
    ch.queue_declare("k-lim-c")
    ch.queue_declare("k-lim-q", durable=True,
                     arguments={"x-queue-type": "quorum"})

    def deliveries(queue):
        ch.basic_publish("", queue, b"z")
        until(lambda: count(ch, queue) == 1)
        n = 0
        for _ in range(4):
            m = ch.basic_get(queue)
            if m[0] is None:
                break
            n += 1
            ch.basic_nack(m[0].delivery_tag, requeue=True)
        bodies(ch, queue)
        return n
    check("delivery-limit applies to a quorum queue",
          deliveries("k-lim-q") == 2)
    check("delivery-limit changes nothing for a classic queue",
          deliveries("k-lim-c") == 4)
    delete(api, "dl")
    if not REFERENCE:
        put(api, "rdl", {"pattern": "^k-lim-c$", "definition":
                         {"roost-delivery-limit": 1}, "apply-to": "queues"})
        check("roost-delivery-limit applies to a classic queue",
              deliveries("k-lim-c") == 2)
        delete(api, "rdl")
    if not REFERENCE:
        # consumer-timeout (RabbitMQ 3.12's): an unacked delivery older
        # than it closes its channel with 406.
        put(api, "cto", {"pattern": "^k-cto$", "definition":
                         {"consumer-timeout": 200}, "apply-to": "queues"})
        c2 = ch.connection.channel()
        c2.queue_declare("k-cto")
        c2.basic_publish("", "k-cto", b"slow")
        c2.basic_consume("k-cto", lambda *a: None)
        ch.connection.call_later(5, c2.stop_consuming)
        why = None
        try:
            c2.start_consuming()
        except pika.exceptions.ChannelClosedByBroker as e:
            why = e.reply_code
        check("consumer-timeout closes a slow consumer's channel (406)",
              why == 406, why)
        delete(api, "cto")
        ch.queue_delete("k-cto")
        # requeue-delay (Roost's back-off): a nacked message waits; a
        # queue's own x-requeue-delay wins, even 0.
        put(api, "rd", {"pattern": "^k-rd", "definition":
                        {"requeue-delay": 400, "requeue-delay-max": 400},
                        "apply-to": "queues"})
        ch.queue_declare("k-rd")
        ch.queue_declare("k-rd0", arguments={"x-requeue-delay": 0})
        for name in ("k-rd", "k-rd0"):
            ch.basic_publish("", name, b"again")
            until(lambda: count(ch, name) == 1)
            m = ch.basic_get(name)
            ch.basic_nack(m[0].delivery_tag, requeue=True)
        check("requeue-delay holds a nacked message back",
              ch.basic_get("k-rd")[0] is None)
        check("and lets it go after the delay",
              until(lambda: count(ch, "k-rd") == 1))
        check("the queue's own x-requeue-delay wins",
              ch.basic_get("k-rd0", auto_ack=True)[2] == b"again")
        delete(api, "rd")
        ch.queue_delete("k-rd")
        ch.queue_delete("k-rd0")
    else:
        st, _ = put(api, "rd", {"pattern": "^k-rd", "definition":
                                {"requeue-delay": 400}})
        check("RabbitMQ refuses requeue-delay", st == 400, st)
    # alternate-exchange, on exchanges; the argument wins
    ch.exchange_declare("k-x", "direct")
    ch.exchange_declare("k-xa", "direct",
                        arguments={"alternate-exchange": "amq.direct"})
    ch.queue_declare("k-ae")
    ch.queue_bind("k-ae", "amq.fanout")
    put(api, "ae", {"pattern": "^k-x", "definition":
                    {"alternate-exchange": "amq.fanout"},
                    "apply-to": "exchanges"})
    ch.basic_publish("k-x", "nowhere", b"a")
    check("alternate-exchange takes the unroutable",
          until(lambda: count(ch, "k-ae") == 1))
    ch.basic_publish("k-xa", "nowhere", b"b")
    time.sleep(0.3)
    check("an exchange's own alternate-exchange wins",
          count(ch, "k-ae") == 1, count(ch, "k-ae"))
    put(api, "ae", {"pattern": "^k-x", "definition":
                    {"alternate-exchange": "amq.fanout"},
                    "apply-to": "queues"})
    ch.basic_publish("k-x", "nowhere", b"c")
    time.sleep(0.3)
    check("a queues policy is no exchange's", count(ch, "k-ae") == 1,
          count(ch, "k-ae"))
    delete(api, "ae")
    for name in ("k-ttl", "k-ml", "k-mlr", "k-mlb", "k-dlq", "k-dl",
                 "k-lim-c", "k-lim-q", "k-ae"):
        ch.queue_delete(name)
    ch.exchange_delete("k-x")
    ch.exchange_delete("k-xa")


def precedence(api, ch):
    put(api, "pp", {"pattern": "^pr-", "definition": {"max-length": 5},
                    "apply-to": "queues"})
    ch.queue_declare("pr-arg10", arguments={"x-max-length": 10})
    ch.queue_declare("pr-arg2", arguments={"x-max-length": 2})
    fill(ch, "pr-arg10", 12)
    fill(ch, "pr-arg2", 12)
    check("a policy below the argument wins",
          until(lambda: count(ch, "pr-arg10") == 5), count(ch, "pr-arg10"))
    check("an argument below the policy wins",
          until(lambda: count(ch, "pr-arg2") == 2), count(ch, "pr-arg2"))
    put(api, "op", {"pattern": "^pr-", "definition": {"max-length": 3},
                    "apply-to": "queues"}, "operator-policies")
    check("an operator policy below both wins at once",
          until(lambda: count(ch, "pr-arg10") == 3), count(ch, "pr-arg10"))
    fill(ch, "pr-arg10", 5)
    time.sleep(0.2)
    check("and keeps applying", count(ch, "pr-arg10") == 3,
          count(ch, "pr-arg10"))
    check("the argument still wins where it is lower",
          count(ch, "pr-arg2") == 2, count(ch, "pr-arg2"))
    delete(api, "op", "operator-policies")
    # Arguments win for overflow and dead-lettering.
    ch.queue_delete("pr-arg2")
    ch.queue_declare("pr-ov", arguments={"x-overflow": "reject-publish"})
    put(api, "pp", {"pattern": "^pr-", "definition":
                    {"max-length": 2, "overflow": "drop-head"},
                    "apply-to": "queues"})
    fill(ch, "pr-ov", 4)
    until(lambda: count(ch, "pr-ov") == 2)
    check("the argument's overflow wins", bodies(ch, "pr-ov") ==
          [b"m0", b"m1"])
    # Cleared: the limit goes, the argument stays.
    delete(api, "pp")
    fill(ch, "pr-arg10", 12)
    check("a cleared policy stops applying",
          until(lambda: count(ch, "pr-arg10") == 10), count(ch, "pr-arg10"))
    for name in ("pr-arg10", "pr-ov"):
        ch.queue_delete(name)


def existing(api, ch):
    ch.queue_declare("ex-q")
    fill(ch, "ex-q", 10)
    until(lambda: count(ch, "ex-q") == 10)
    put(api, "low", {"pattern": "^ex-q$", "definition": {"max-length": 4},
                     "apply-to": "queues"})
    check("a lower max-length drops at once",
          until(lambda: count(ch, "ex-q") == 4), count(ch, "ex-q"))
    check("from the head", bodies(ch, "ex-q") ==
          [b"m6", b"m7", b"m8", b"m9"])
    delete(api, "low")
    fill(ch, "ex-q", 3)
    until(lambda: count(ch, "ex-q") == 3)
    put(api, "ttl", {"pattern": "^ex-q$", "definition": {"message-ttl": 50},
                     "apply-to": "queues"})
    time.sleep(0.5)
    check("a new message-ttl leaves queued messages as they are",
          count(ch, "ex-q") == 3, count(ch, "ex-q"))
    bodies(ch, "ex-q")
    ch.basic_publish("", "ex-q", b"new")
    check("and applies to new ones", until(lambda: count(ch, "ex-q") == 0))
    delete(api, "ttl")
    ch.queue_delete("ex-q")


def definitions(api, ch):
    put(api, "dp", {"pattern": "^d-", "definition": {"max-length": 2},
                    "apply-to": "queues", "priority": 2})
    put(api, "dop", {"pattern": "^d-", "definition": {"max-length": 1}},
        "operator-policies")
    st, defs = api.call("GET", "definitions")
    mine = [p for p in defs.get("policies", []) if p.get("vhost") == VH]
    check("export: policies in RabbitMQ's shape", mine == [{
        "vhost": VH, "name": "dp", "pattern": "^d-", "apply-to": "queues",
        "definition": {"max-length": 2}, "priority": 2}], mine)
    ops = [p for p in defs.get("parameters", []) if p.get("vhost") == VH]
    check("export: operator policies as parameters", ops == [{
        "value": {"pattern": "^d-", "definition": {"max-length": 1},
                  "priority": 0, "apply-to": "all"},
        "vhost": VH, "component": "operator_policy", "name": "dop"}], ops)
    delete(api, "dp")
    delete(api, "dop", "operator-policies")
    st, _ = api.call("POST", "definitions", {"policies": mine,
                                             "parameters": ops})
    check("import: accepted", st in (200, 201, 204), st)
    st, got = api.call("GET", "policies/%s/dp" % q(VH))
    check("import: the policy is back", st == 200 and got == mine[0], got)
    st, got = api.call("GET", "operator-policies/%s/dop" % q(VH))
    check("import: the operator policy is back",
          st == 200 and got.get("definition") == {"max-length": 1}, got)
    # Kept for the restart: a durable queue they apply to.
    ch.queue_declare("d-kept", durable=True)


def before(amqp, api):
    api.call("DELETE", "vhosts/" + q(VH))
    api.call("PUT", "vhosts/" + q(VH), {})
    api.call("PUT", "permissions/%s/guest" % q(VH),
             {"configure": ".*", "write": ".*", "read": ".*"})
    api_checks(api)
    who_may(api)
    refusals(api)
    c = connect(amqp)
    ch = c.channel()
    matching(api, ch)
    keys(api, ch)
    precedence(api, ch)
    existing(api, ch)
    definitions(api, ch)
    c.close()
    if REFERENCE:
        api.call("DELETE", "vhosts/" + q(VH))
        return
    # Enough changes that the store compacts its definitions into a
    # snapshot (policy.sh checks there is one): the policies kept above
    # must come back from it.
    for _ in range(700):
        put(api, "churn", {"pattern": "^churn", "definition":
                           {"max-length": 1}})
        delete(api, "churn")


def after(amqp, api):
    st, got = api.call("GET", "policies/%s/dp" % q(VH))
    check("after a restart the policy is there",
          st == 200 and got.get("definition") == {"max-length": 2}, got)
    st, got = api.call("GET", "operator-policies/%s/dop" % q(VH))
    check("and the operator policy", st == 200, got)
    ch = connect(amqp).channel()
    fill(ch, "d-kept", 4)
    check("and they apply to the recovered queue",
          until(lambda: count(ch, "d-kept") == 1), count(ch, "d-kept"))
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
