# SPDX-License-Identifier: Apache-2.0
"""Declaring a stream (x-queue-type: stream), as RabbitMQ 3.10.8 answers
it (streams-spec.md 1.1 and 1.2; issue 24, point 2): properties,
server-named streams, every argument's grammar and refusal, the order in
which they are checked, and the stream keys on classic and quorum queues.

    stream_declare.py --port PORT --http HTTP_PORT [--reference]

Each case is one queue.declare on a fresh pika connection; its answer
(reply code and text, or declare-ok) must be RabbitMQ's; --reference
runs the same table against the reference node. Then the stream keys of a policy (1.10), as PUT
/api/policies validates them, with RabbitMQ's texts (400 where RabbitMQ
answers 500), and an operator policy refusing them. Prints "PASS name" /
"FAIL name: why".
"""
import argparse
import base64
import json
import sys
import urllib.error
import urllib.request

import pika

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--http", type=int, required=True)
ap.add_argument("--reference", action="store_true")
args = ap.parse_args()

PF = "PRECONDITION_FAILED - "
S = {"x-queue-type": "stream"}
D = dict(durable=True)


def arg(q, key, why, kind=""):
    """RabbitMQ's "invalid arg" text for queue 'q'."""
    return (406, PF + "invalid arg '%s' for queue '%s' in vhost '/'%s" %
            (key, q, ": " + why if why else kind))


def refused(q, key, qtype):
    return arg(q, key, None, " of queue type " + qtype)


def accepted():
    return "ok"


def prop(q, p):
    return (406, PF + "invalid property '%s' for queue '%s' in vhost '/'" %
            (p, q))


# (queue name, declare flags, arguments, the answer)
CASES = [
    ("sd-ok", D, S, accepted()),
    ("sd-nondurable", {}, S, prop("sd-nondurable", "non-durable")),
    ("sd-exclusive", dict(durable=True, exclusive=True), S,
     prop("sd-exclusive", "exclusive-owner")),
    ("sd-autodelete", dict(durable=True, auto_delete=True), S,
     prop("sd-autodelete", "auto-delete")),
    ("sd-excl-nondurable", dict(exclusive=True), S,
     prop("sd-excl-nondurable", "exclusive-owner")),
    ("sd-all", dict(exclusive=True, auto_delete=True), S,
     prop("sd-all", "auto-delete")),
    ("", D, S, (406, PF + "Cannot declare a server-named queue for type "
                "rabbit_stream_queue")),
    ("", D, dict(S, **{"x-max-age": "1x"}),
     (406, PF + "Cannot declare a server-named queue for type "
      "rabbit_stream_queue")),
    ("sd-case", D, {"x-queue-type": "Stream"},
     arg("sd-case", "x-queue-type", "\"unsupported queue type 'Stream'\"")),
    # unknown arguments are kept and ignored (1.2)
    ("sd-unknown", D, dict(S, **{"x-unknown-foo": 1, "x-credit": "a"}),
     "ok"),
]
# x-max-age's grammar
for i, age in enumerate(["1h", "30m", "10s", "7D", "1M", "1Y",
                         "100000000000Y"]):
    CASES.append(("sd-age-ok%d" % i, D, dict(S, **{"x-max-age": age}),
                  accepted()))
# one past INT64_MAX, and more: saturates (checked under UBSan; not
# sent to the reference node)
if not args.reference:
    CASES.append(("sd-age-huge", D,
                  dict(S, **{"x-max-age": "9223372036854775808Y"}),
                  accepted()))
# '', 'h' and '-1h' crash RabbitMQ 3.10.8's channel (541; P12): Roost
# answers invalid_max_age, so they are not in the reference's table
bad_ages = ["1h30m", "0s", "1x", "1d", "1y", "1S", "1H"]
if not args.reference:
    bad_ages += ["", "h", "-1h"]
for i, age in enumerate(bad_ages):
    q = "sd-age-bad%d" % i
    CASES.append((q, D, dict(S, **{"x-max-age": age}),
                  arg(q, "x-max-age", "invalid_max_age")))
CASES += [
    ("sd-age-int", D, dict(S, **{"x-max-age": 3600}),
     arg("sd-age-int", "x-max-age", "{unacceptable_type,signedint}")),
    ("sd-mlb0", D, dict(S, **{"x-max-length-bytes": 0}), accepted()),
    ("sd-mlb-big", D, dict(S, **{"x-max-length-bytes": 20000000000}),
     accepted()),
    ("sd-mlb-neg", D, dict(S, **{"x-max-length-bytes": -1}),
     arg("sd-mlb-neg", "x-max-length-bytes", "{value_negative,-1}")),
    ("sd-mlb-str", D, dict(S, **{"x-max-length-bytes": "1000"}),
     arg("sd-mlb-str", "x-max-length-bytes",
         "\"expected integer, got longstr\"")),
    ("sd-seg0", D, dict(S, **{"x-stream-max-segment-size-bytes": 0}),
     accepted()),
    ("sd-seg-max", D,
     dict(S, **{"x-stream-max-segment-size-bytes": 3000000000}), accepted()),
    ("sd-seg-over", D,
     dict(S, **{"x-stream-max-segment-size-bytes": 3000000001}),
     (406, PF + "Exceeded max value for x-stream-max-segment-size-bytes")),
    ("sd-seg-neg", D, dict(S, **{"x-stream-max-segment-size-bytes": -5}),
     arg("sd-seg-neg", "x-stream-max-segment-size-bytes",
         "{value_negative,-5}")),
    ("sd-seg-str", D, dict(S, **{"x-stream-max-segment-size-bytes": "big"}),
     arg("sd-seg-str", "x-stream-max-segment-size-bytes",
         "\"expected integer, got longstr\"")),
    ("sd-loc-bogus", D, dict(S, **{"x-queue-leader-locator": "bogus"}),
     arg("sd-loc-bogus", "x-queue-leader-locator",
         "invalid_queue_locator_arg")),
    ("sd-loc-int", D, dict(S, **{"x-queue-leader-locator": 1}),
     arg("sd-loc-int", "x-queue-leader-locator",
         "{unacceptable_type,signedint}")),
    ("sd-ics0", D, dict(S, **{"x-initial-cluster-size": 0}),
     arg("sd-ics0", "x-initial-cluster-size", "{value_zero,0}")),
    ("sd-ics-neg", D, dict(S, **{"x-initial-cluster-size": -1}),
     arg("sd-ics-neg", "x-initial-cluster-size", "{value_negative,-1}")),
    ("sd-ics-str", D, dict(S, **{"x-initial-cluster-size": "2"}),
     arg("sd-ics-str", "x-initial-cluster-size",
         "\"expected integer, got longstr\"")),
    ("sd-all-args", D, dict(S, **{
        "x-max-age": "7D", "x-max-length-bytes": 0,
        "x-stream-max-segment-size-bytes": 0,
        "x-queue-leader-locator": "random", "x-initial-cluster-size": 3}),
     accepted()),
    # the order: the others' values, then what streams refuse (whatever
    # its value), then the properties
    ("sd-order1", D, dict(S, **{"x-max-age": "1x", "x-max-length": 1}),
     arg("sd-order1", "x-max-age", "invalid_max_age")),
    ("sd-order2", dict(durable=True, exclusive=True),
     dict(S, **{"x-max-length": 1}),
     refused("sd-order2", "x-max-length", "rabbit_stream_queue")),
    ("sd-order3", dict(durable=True, auto_delete=True),
     dict(S, **{"x-max-age": "1x"}),
     arg("sd-order3", "x-max-age", "invalid_max_age")),
    ("sd-ttl-bad", D, dict(S, **{"x-message-ttl": "abc"}),
     refused("sd-ttl-bad", "x-message-ttl", "rabbit_stream_queue")),
    # the stream keys on the other types
    ("sd-classic-age", D, {"x-max-age": "1h"},
     refused("sd-classic-age", "x-max-age", "rabbit_classic_queue")),
    ("sd-classic-ics", D, {"x-initial-cluster-size": 3},
     refused("sd-classic-ics", "x-initial-cluster-size",
             "rabbit_classic_queue")),
    ("sd-classic-seg", D, {"x-stream-max-segment-size-bytes": 1000},
     refused("sd-classic-seg", "x-stream-max-segment-size-bytes",
             "rabbit_classic_queue")),
    ("sd-classic-loc", D, {"x-queue-leader-locator": "balanced"},
     refused("sd-classic-loc", "x-queue-leader-locator",
             "rabbit_classic_queue")),
    ("sd-quorum-loc", D, {"x-queue-type": "quorum",
                          "x-queue-leader-locator": "balanced"}, "ok"),
    ("sd-quorum-loc-bad", D, {"x-queue-type": "quorum",
                              "x-queue-leader-locator": "bogus"},
     arg("sd-quorum-loc-bad", "x-queue-leader-locator",
         "invalid_queue_locator_arg")),
    ("sd-quorum-age", D, {"x-queue-type": "quorum", "x-max-age": "1h"},
     refused("sd-quorum-age", "x-max-age", "rabbit_quorum_queue")),
    ("sd-quorum-ics", D, {"x-queue-type": "quorum",
                          "x-initial-cluster-size": 3},
     refused("sd-quorum-ics", "x-initial-cluster-size",
             "rabbit_quorum_queue")),
]
# every argument streams refuse, each with a valid value
for key, val in [
        ("x-max-length", 1), ("x-message-ttl", 1000), ("x-expires", 1000),
        ("x-dead-letter-exchange", "dlx"),
        ("x-dead-letter-routing-key", "k"), ("x-overflow", "drop-head"),
        ("x-max-priority", 5), ("x-single-active-consumer", True),
        ("x-single-active-consumer", False), ("x-queue-mode", "lazy"),
        ("x-queue-master-locator", "client-local"),
        ("x-delivery-limit", 3), ("x-quorum-initial-group-size", 3),
        ("x-max-in-memory-length", 10), ("x-max-in-memory-bytes", 10),
        ("x-dead-letter-strategy", "at-most-once"), ("x-queue-version", 2)]:
    q = "sd-no-%s-%s" % (key[2:], str(val).lower())
    CASES.append((q, D, dict(S, **{key: val}),
                  refused(q, key, "rabbit_stream_queue")))


def redeclare_locator():
    """A quorum queue's x-queue-leader-locator is compared on redeclare."""
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", args.port))
    ch = c.channel()
    q = {"x-queue-type": "quorum"}
    ch.queue_declare("sd-qloc", durable=True,
                     arguments=dict(q, **{"x-queue-leader-locator": "balanced"}))
    try:
        ch.queue_declare("sd-qloc", durable=True, arguments=dict(
            q, **{"x-queue-leader-locator": "random"}))
        got = "ok"
    except pika.exceptions.ChannelClosedByBroker as e:
        got = (e.reply_code, e.reply_text)
    c.channel().queue_delete("sd-qloc")
    c.close()
    return got


def declare(name, flags, arguments):
    """The broker's answer: "ok", or (code, text)."""
    c = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", args.port, connection_attempts=3, retry_delay=0.5))
    try:
        ch = c.channel()
        ch.queue_declare(name, arguments=arguments, **flags)
        if name:
            ch.queue_delete(name)
        return "ok"
    except (pika.exceptions.ChannelClosedByBroker,
            pika.exceptions.ConnectionClosedByBroker) as e:
        return (e.reply_code, e.reply_text)
    finally:
        if c.is_open:
            c.close()


failed = 0
for name, flags, arguments, want in CASES:
    got = declare(name, flags, arguments)
    label = "%s %s %s" % (name or "(server-named)",
                          ",".join(k for k in flags if flags[k]) or "-",
                          arguments)
    if got == want:
        print("PASS %s: %s" % (label, want if want == "ok" else want[0]))
    else:
        failed += 1
        print("FAIL %s: got %r, want %r" % (label, got, want))
want = (406, PF + "inequivalent arg 'x-queue-leader-locator' for queue "
        "'sd-qloc' in vhost '/': received 'random' but current is 'balanced'")
got = redeclare_locator()
if got == want:
    print("PASS a quorum queue's x-queue-leader-locator is compared on "
          "redeclare")
else:
    failed += 1
    print("FAIL a quorum queue's x-queue-leader-locator is compared on "
          "redeclare: got %r" % (got,))


def put_policy(kind, definition):
    """PUT a policy on ^sd-nothing$: (status, reason or None)."""
    req = urllib.request.Request(
        "http://127.0.0.1:%d/api/%s/%%2F/sd-pol" % (args.http, kind),
        method="PUT", data=json.dumps({"pattern": "^sd-nothing$",
                                       "definition": definition}).encode(),
        headers={"Content-Type": "application/json", "Authorization":
                 "Basic " + base64.b64encode(b"guest:guest").decode()})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return (r.status, None)
    except urllib.error.HTTPError as e:
        body = e.read()
        return (e.code, json.loads(body)["reason"] if body else None)


def bad(text):
    # RabbitMQ's reason, HTML-escaped as its management API sends it
    return (400, "Validation failed\n\n%s\n" % text.replace(
        "<", "&lt;").replace(">", "&gt;"))


POLICIES = [
    ({"max-age": "7D"}, "ok"), ({"max-age": "1x"},
                                bad('<<"1x">> is not a valid max age')),
    ({"max-length-bytes": "x"},
     bad('<<"x">> is not a valid maximum length in bytes')),
    ({"stream-max-segment-size-bytes": 0}, "ok"),
    ({"stream-max-segment-size-bytes": -1},
     bad("-1 is not a valid segment size")),
    ({"stream-max-segment-size-bytes": "x"},
     bad('<<"x">> is not a valid segment size')),
    ({"stream-max-segment-size-bytes": 3000000001},
     bad("3000000001 is not a valid segment size")),
    ({"queue-leader-locator": "balanced"}, "ok"),
    ({"queue-leader-locator": "bogus"},
     bad('<<"bogus">> is not a valid queue leader locator value')),
    ({"queue-leader-locator": 1},
     bad("1 is not a valid queue leader locator value")),
    ({"initial-cluster-size": 0}, "ok"),
    ({"initial-cluster-size": -1}, bad("-1 is not a valid cluster size")),
    ({"initial-cluster-size": "2"},
     bad('<<"2">> is not a valid cluster size')),
]
if not args.reference:
    # RabbitMQ 3.10.8 answers these with 500 and no reason
    POLICIES += [({"max-age": 3600}, bad("3600 is not a valid max age")),
                 ({"max-age": ""}, bad('<<"">> is not a valid max age'))]
for definition, want in POLICIES:
    got = put_policy("policies", definition)
    if want == "ok":
        ok = got[0] in (201, 204)
    else:
        ok = got == want
    if ok:
        print("PASS policy %s: %s" % (definition, got[0]))
    else:
        failed += 1
        print("FAIL policy %s: got %r, want %r" % (definition, got, want))
for definition in ({"max-age": "1h"}, {"stream-max-segment-size-bytes": 100},
                   {"queue-leader-locator": "balanced"},
                   {"initial-cluster-size": 3}):
    (k, v), = definition.items()
    # (this reason RabbitMQ sends unescaped)
    want = (400, "Validation failed\n\n[{<<\"%s\">>,%s}] are not "
            "recognised policy settings\n" %
            (k, '<<"%s">>' % v if isinstance(v, str) else v))
    got = put_policy("operator-policies", definition)
    if got == want:
        print("PASS operator policy %s: refused" % definition)
    else:
        failed += 1
        print("FAIL operator policy %s: got %r, want %r" %
              (definition, got, want))
sys.exit(1 if failed else 0)
