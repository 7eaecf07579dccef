# SPDX-License-Identifier: Apache-2.0
"""The management API's queues, exchanges, bindings, consumers,
connections, channels, nodes and health checks (issue 12, point 8), seen
after a scenario made with pika: an exchange, a queue bound to it,
publishes with confirms, a consumer with a prefetch that acks some, a
second connection. Every endpoint is read; each answer's key structure
is written to a shapes file (`--reference`, against RabbitMQ 3.10) or
compared with the one RabbitMQ wrote (against roostd): every key
RabbitMQ has must be there, except those in ALLOWED below. The status of
each refusal is compared the same way. Then the values: counts and
message_stats, declare/delete/purge/get/publish/bind/close and their
refusals, bad input to every endpoint.

  api.py --amqp PORT --http PORT --shapes FILE [--reference]

Prints one "PASS name" or "FAIL name: why" per check; exit 1 on a FAIL.
"""
import argparse
import base64
import fnmatch
import json
import time
import urllib.error
import urllib.request

import pika

from checks import Api, check, done, q

REFERENCE = False
P = "apit-"                     # every object the test makes
X, Q, DLX, DLQ, GQ = P + "x", P + "q", P + "dlx", P + "dead", P + "g"
PUBLISHED, ACKED, DELIVERED = 6, 3, 5

# Keys RabbitMQ has that Roost cannot give (docs/compatibility.md,
# "Management HTTP API"), as fnmatch patterns over a shape's paths.
ALLOWED = [
    # Erlang's: the process' garbage collector, its reductions, its
    # mailbox, its pid
    "*garbage_collection*", "*reductions*", "*reductions_details*",
    "*.pid", "pid", "*owner_pid*", "*exclusive_consumer_pid*",
    "*.channel_pid", "*.connection_pid",
    # the classic queue's backing queue (its internal state and its
    # lazy/paged mode), the mirrors' and quorum members' lists
    "*backing_queue_status*", "*slave_nodes*", "*synchronised_slave_nodes*",
    "*recoverable_slaves*", "*members*", "*online*", "*leader*",
    # the Erlang VM: run queue, schedulers, processes, atoms, the
    # distribution, the mnesia and message store file handles,
    # the persister, the log files, the applications and the
    # authentication back ends, the config files and the db dir
    "*run_queue*", "*proc_*", "*processors*", "*io_*", "*mnesia_*",
    "*msg_store_*", "*queue_index_*", "*connection_created*",
    "*connection_closed*", "*channel_created*", "*channel_closed*",
    "*queue_declared*", "*queue_created*", "*queue_deleted*",
    "*gc_num*", "*gc_bytes_reclaimed*", "*context_switches*",
    "applications", "applications.*", "auth_mechanisms", "auth_mechanisms.*",
    "cluster_links", "cluster_links.*", "config_files", "config_files.*",
    "db_dir", "enabled_plugins", "log_files", "log_files.*",
    "erlang_version", "erlang_full_version", "os_pid", "sockets_total", "sockets_used",
    "mem_calculation_strategy", "metrics_gc_queue_length*",
    "net_ticktime", "partitions", "ra_open_file_metrics*",
    "being_drained", "contexts.*", "exchange_types.*",
    "statistics_db_event_queue", "statistics_db_node",
    # the memory breakdown by Erlang's kinds (Roost gives its own kinds)
    "memory.*",
    # RabbitMQ 3.10's node-local stream and quorum metrics
    "*stream*", "*quorum*",
    # Raft's (RabbitMQ's quorum queues; Roost's are not Raft)
    "*pending_raft_commands*",
    # the client's TLS details of a connection that used none
    "ssl_cipher", "ssl_hash", "ssl_key_exchange", "ssl_protocol",
    # RabbitMQ's channel garbage and its own idle marker
    "idle_since", "*.idle_since",
    # the overview's churn rates (the object totals have them)
    "churn_rates*",
]
# at any depth: "[].applications" as "applications"
ALLOWED = [a if a.startswith("*") else "*" + a for a in ALLOWED]

# Objects whose keys are data (arguments, headers, ...), not shape.
DATA = {"arguments", "client_properties", "properties", "headers",
        "effective_policy_definition", "capabilities", "memory",
        "exchange_types", "contexts", "listeners", "sample_retention_policies",
        "applications", "auth_mechanisms", "log_files", "config_files",
        "cluster_links", "metrics_gc_queue_length", "object_totals"}


def shape(v, pre=""):
    """The key paths of a JSON value: "a", "a.b", "a[].c"."""
    out = set()
    if isinstance(v, dict):
        for k, sub in v.items():
            path = pre + k
            out.add(path)
            if k not in DATA:
                out |= shape(sub, path + ".")
    elif isinstance(v, list):
        for item in v:
            out |= shape(item, pre.rstrip(".") + "[].")
    return out


class Shapes:
    """What RabbitMQ answered (written with --reference), and the
    comparison of Roost's answers with it."""

    def __init__(self, path):
        self.path = path
        self.mine = {}
        self.ref = None
        if not REFERENCE:
            try:
                with open(path) as f:
                    self.ref = json.load(f)
            except (OSError, ValueError):
                print("(no reference shapes in %s: comparison skipped)" % path)

    def keys(self, label, value):
        self.mine[label] = sorted(shape(value))
        if self.ref is None or label not in self.ref:
            return
        have = set(self.mine[label])
        missing = [k for k in self.ref[label] if k not in have and
                   not any(fnmatch.fnmatchcase(k, a) for a in ALLOWED)]
        check("shape of %s as RabbitMQ's" % label, not missing,
              "missing " + ", ".join(missing))

    def status(self, label, st):
        """A status that must be RabbitMQ's."""
        self.mine["status " + label] = st
        if self.ref is None:
            return
        want = self.ref.get("status " + label)
        if want is not None:
            check("%s: %s as RabbitMQ" % (label, want), st == want,
                  "got %s" % st)

    def write(self):
        if REFERENCE:
            with open(self.path, "w") as f:
                json.dump(self.mine, f, indent=1, sort_keys=True)


def roost(name, cond, why=""):
    """A check of Roost's own rule where RabbitMQ 3.10 answers worse (a
    500, a 200 for what is not there, a name AMQP cannot carry): checked
    against roostd only; the reference pass records its status."""
    if not REFERENCE:
        check(name, cond, why)


def until(cond, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if cond():
                return True
        except (KeyError, TypeError, IndexError, AttributeError):
            pass
        time.sleep(0.2)
    try:
        return cond()
    except (KeyError, TypeError, IndexError, AttributeError):
        return False


def http(port, method, path, data=None, headers=None, auth="guest:guest"):
    """(status, headers, text) of a raw request."""
    req = urllib.request.Request("http://127.0.0.1:%d/api/%s" % (port, path),
                                 data=data, method=method)
    if auth is not None:
        req.add_header("Authorization", "Basic " +
                       base64.b64encode(auth.encode()).decode())
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def reason(body):
    try:
        return json.loads(body).get("reason")
    except (ValueError, AttributeError):
        return body


def connect(port, name):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, connection_attempts=1, heartbeat=0,
        client_properties={"connection_name": name},
        blocked_connection_timeout=10))


def count(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


# ---- the scenario ----

class Scenario:
    def __init__(self, amqp):
        for name in (Q, GQ, DLQ):
            self.cleanup_queue(amqp, name)
        self.c1 = connect(amqp, P + "c1")
        ch = self.c1.channel()
        ch.exchange_declare(X, "direct")
        ch.queue_declare(Q)
        ch.queue_bind(Q, X, "k")
        ch.confirm_delivery()
        for i in range(PUBLISHED):
            ch.basic_publish(X, "k", b"m%d" % i)
        self.pub = ch
        self.c2 = connect(amqp, P + "c2")
        cch = self.c2.channel()
        cch.basic_qos(prefetch_count=2)
        self.got = []

        def on(c, m, props, body):
            self.got.append(m.delivery_tag)
            if len(self.got) <= ACKED:
                c.basic_ack(m.delivery_tag)
        cch.basic_consume(Q, on, consumer_tag=P + "ctag")
        end = time.time() + 10
        while len(self.got) < DELIVERED and time.time() < end:
            self.c2.process_data_events(time_limit=0.1)
        self.cons = cch

    @staticmethod
    def cleanup_queue(amqp, name):
        c = connect(amqp, P + "clean")
        c.channel().queue_delete(name)
        c.close()


def conn_named(api, name):
    st, cs = api.call("GET", "connections")
    for c in cs if st == 200 else []:
        cp = c.get("client_properties", {})
        if cp.get("connection_name") == name:
            return c
    return None


def endpoints(api, sh, amqp, http_port):
    """GET every endpoint; their shapes and what the scenario left."""
    def get(label, path, keys=True):
        st, j = api.call("GET", path)
        check("GET %s: 200" % label, st == 200, "%s %s" % (st, j))
        if keys and st == 200:
            sh.keys(label, j)
        return j if st == 200 else None

    # RabbitMQ's stats come every 5 s: wait for the counts
    def queue_settled():
        st, j = api.call("GET", "queues/%2F/" + Q)
        ms = j.get("message_stats", {})
        return (j["messages"] == PUBLISHED - ACKED and
                ms.get("ack") == ACKED and ms.get("publish") == PUBLISHED and
                ms.get("deliver") == DELIVERED)
    check("the queue's counts arrive", until(queue_settled, 20),
          api.call("GET", "queues/%2F/" + Q))
    c1 = [None]
    check("the connections are listed",
          until(lambda: conn_named(api, P + "c1") and
                conn_named(api, P + "c2")), "")
    c1 = conn_named(api, P + "c1") or {}
    c2 = conn_named(api, P + "c2") or {}
    n1, n2 = c1.get("name", "?"), c2.get("name", "?")
    ch1 = n1 + " (1)"

    def chan_settled():
        st, j = api.call("GET", "channels/" + q(ch1))
        return j["message_stats"]["confirm"] == PUBLISHED
    check("the connection's channel is counted", until(
        lambda: api.call("GET", "connections/" + q(n1))[1]["channels"] == 1),
        "")
    check("the channel's counts arrive", until(chan_settled, 15),
          api.call("GET", "channels/" + q(ch1)))

    ov = get("overview", "overview")
    if ov:
        check("overview: message_stats publish >= what we sent",
              ov.get("message_stats", {}).get("publish", 0) >= PUBLISHED,
              ov.get("message_stats"))
        check("overview: object_totals has our objects",
              ov["object_totals"]["queues"] >= 1 and
              ov["object_totals"]["connections"] >= 2, ov["object_totals"])
    nodes = get("nodes", "nodes")
    node = nodes[0]["name"] if nodes else "?"
    get("node", "nodes/" + q(node))
    nm = get("node?memory=true", "nodes/%s?memory=true" % q(node), False)
    check("node?memory=true has memory", nm is not None and
          isinstance(nm.get("memory"), dict), nm and nm.get("memory"))
    st, _ = api.call("GET", "nodes/rabbit@nosuchhost")
    roost("GET an unknown node: 404 (RabbitMQ 3.10: 500)", st == 404, st)

    cs = get("connections", "connections", False)
    mine = [c for c in cs or [] if c.get("client_properties", {})
            .get("connection_name", "").startswith(P)]
    sh.keys("connections", mine)
    c = get("connection", "connections/" + q(n1))
    if c:
        check("connection: user, vhost, channels",
              c["user"] == "guest" and c["vhost"] == "/" and
              c["channels"] == 1, c)
        check("connection: peer_port is an integer",
              isinstance(c.get("peer_port"), int), c.get("peer_port"))
    chans = get("connection's channels", "connections/%s/channels" % q(n1))
    check("connection's channels: one", chans is not None and
          len(chans) == 1 and chans[0]["name"] == ch1, chans)
    allch = get("channels", "channels", False)
    sh.keys("channels", [x for x in allch or [] if
                         x["name"] in (ch1, n2 + " (1)")])
    chj = get("channel", "channels/" + q(ch1))
    if chj:
        ms = chj.get("message_stats", {})
        check("channel: publish and confirm counts",
              ms.get("publish") == PUBLISHED and
              ms.get("confirm") == PUBLISHED, ms)
        check("channel: confirm mode", chj["confirm"] is True, chj)
        check("channel: a rate is a number",
              isinstance(ms.get("publish_details", {}).get("rate"),
                         (int, float)), ms.get("publish_details"))
    chc = get("consumer's channel", "channels/" + q(n2 + " (1)"))
    if chc:
        ms = chc.get("message_stats", {})
        check("consumer's channel: deliver, ack, deliver_get",
              ms.get("deliver") == DELIVERED and ms.get("ack") == ACKED and
              ms.get("deliver_get") == DELIVERED, ms)
        check("consumer's channel: prefetch and unacked",
              chc["prefetch_count"] == 2 and
              chc["messages_unacknowledged"] == DELIVERED - ACKED, chc)
        check("consumer's channel: consumer_details",
              [d["consumer_tag"] for d in chc["consumer_details"]] ==
              [P + "ctag"], chc["consumer_details"])

    def mycons(path):
        st, j = api.call("GET", path)
        return [x for x in j if x["queue"]["name"] == Q] if st == 200 else []
    check("consumers: ours appears", until(lambda: mycons("consumers")), "")
    get("consumers", "consumers", False)
    cons = mycons("consumers")
    sh.keys("consumers", cons)
    check("consumer: tag, prefetch, ack_required, channel",
          len(cons) == 1 and cons[0]["consumer_tag"] == P + "ctag" and
          cons[0]["prefetch_count"] == 2 and cons[0]["ack_required"] and
          cons[0]["channel_details"]["connection_name"] == n2, cons)
    get("consumers of /", "consumers/%2F", False)
    check("consumers of /: ours", len(mycons("consumers/%2F")) == 1, "")

    xs = get("exchanges", "exchanges", False)
    sh.keys("exchanges", [x for x in xs or [] if x["name"] == X])
    get("exchanges of /", "exchanges/%2F", False)
    xj = get("exchange", "exchanges/%2F/" + X)
    if xj:
        ms = xj.get("message_stats", {})
        check("exchange: publish_in and publish_out",
              ms.get("publish_in") == PUBLISHED and
              ms.get("publish_out") == PUBLISHED, ms)
        check("exchange: type direct", xj["type"] == "direct", xj)
    src = get("exchange's source bindings",
              "exchanges/%2F/" + X + "/bindings/source")
    check("exchange's source bindings: to the queue with k",
          src is not None and [(b["destination"], b["routing_key"])
                               for b in src] == [(Q, "k")], src)
    dst = get("exchange's destination bindings",
              "exchanges/%2F/" + X + "/bindings/destination")
    check("exchange's destination bindings: none", dst == [], dst)
    dx = get("default exchange as amq.default", "exchanges/%2F/amq.default")
    check("amq.default in a path is the default exchange",
          dx is not None and dx["name"] == "", dx)

    qs = get("queues", "queues", False)
    sh.keys("queues", [x for x in qs or [] if x["name"] == Q])
    get("queues of /", "queues/%2F", False)
    qj = get("queue", "queues/%2F/" + Q)
    if qj:
        check("queue: messages, ready, unacked",
              (qj["messages"], qj["messages_ready"],
               qj["messages_unacknowledged"]) ==
              (PUBLISHED - ACKED, PUBLISHED - DELIVERED,
               DELIVERED - ACKED), qj)
        ms = qj.get("message_stats", {})
        check("queue: message_stats publish, deliver, ack, deliver_get",
              (ms.get("publish"), ms.get("deliver"), ms.get("ack"),
               ms.get("deliver_get")) ==
              (PUBLISHED, DELIVERED, ACKED, DELIVERED), ms)
        check("queue: a rate in *_details is a number",
              isinstance(ms.get("ack_details", {}).get("rate"),
                         (int, float)) and
              isinstance(qj.get("messages_details", {}).get("rate"),
                         (int, float)), ms)
        check("queue: consumers 1 and its details",
              qj["consumers"] == 1 and
              qj["consumer_details"][0]["consumer_tag"] == P + "ctag", qj)
    qb = get("queue's bindings", "queues/%2F/" + Q + "/bindings")
    check("queue's bindings: the default one and k",
          qb is not None and sorted((b["source"], b["routing_key"])
                                    for b in qb) == [("", Q), (X, "k")], qb)
    bs = get("bindings", "bindings", False)
    sh.keys("bindings", [b for b in bs or [] if b["destination"] == Q])
    get("bindings of /", "bindings/%2F", False)
    bl = get("bindings X to Q", "bindings/%2F/e/" + X + "/q/" + Q)
    check("bindings X to Q: k", bl is not None and
          [b["properties_key"] for b in bl] == ["k"], bl)
    get("binding X to Q k", "bindings/%2F/e/" + X + "/q/" + Q + "/k")
    vc = get("vhost's connections", "vhosts/%2F/connections", False)
    check("vhost's connections: both", vc is not None and
          {n1, n2} <= {x["name"] for x in vc}, vc)
    vch = get("vhost's channels", "vhosts/%2F/channels", False)
    check("vhost's channels: both", vch is not None and
          {ch1, n2 + " (1)"} <= {x["name"] for x in vch}, vch)

    for h in ("alarms", "local-alarms", "virtual-hosts",
              "port-listener/%d" % amqp, "protocol-listener/amqp"):
        st, j = api.call("GET", "health/checks/" + h)
        check("health %s: 200 ok" % h, st == 200 and j["status"] == "ok",
              "%s %s" % (st, j))
        if st == 200:
            sh.keys("health " + h.split("/")[0], j)
    st, j = api.call("GET", "health/checks/port-listener/1")
    check("health port-listener on a closed port: 503 failed",
          st == 503 and "failed" in str(j), "%s %s" % (st, j))
    sh.status("health port-listener on a closed port", st)
    st, j = api.call("GET", "health/checks/protocol-listener/stomp")
    sh.status("health protocol-listener stomp (none)", st)
    return n1, n2


def pagination(api, sh):
    for i in range(3):
        api.call("PUT", "queues/%2F/" + P + "page%d" % i, {})
    st, j = api.call("GET", "queues?page=1&page_size=2&name=" + P + "page")
    check("a page of queues: 2 of 3", st == 200 and len(j["items"]) == 2 and
          j["filtered_count"] == 3 and j["page_count"] == 2 and
          j["page_size"] == 2, "%s %s" % (st, j))
    if st == 200:
        sh.keys("page of queues", j)
    st, j = api.call("GET", "queues?page=2&page_size=2&name=" + P + "page")
    check("page 2: the last one", st == 200 and
          [x["name"] for x in j["items"]] == [P + "page2"], j)
    st, j = api.call("GET", "queues?page=1&name=%5Eapit-page%5B02%5D%24"
                     "&use_regex=true")
    check("use_regex=true", st == 200 and
          [x["name"] for x in j["items"]] == [P + "page0", P + "page2"], j)
    st, j = api.call("GET", "queues?page=1&page_size=5&name=" + P +
                     "page&sort=name&sort_reverse=true")
    check("sort=name&sort_reverse=true", st == 200 and
          [x["name"] for x in j["items"]] ==
          [P + "page2", P + "page1", P + "page0"], j)
    st, j = api.call("GET", "exchanges/%2F?page=1&page_size=3&name=amq."
                     "&sort=name")
    check("a page of exchanges, sorted",
          st == 200 and [x["name"] for x in j["items"]] ==
          ["amq.direct", "amq.fanout", "amq.headers"], j)
    st, j = api.call("GET", "queues?page=1&page_size=5&name=" + P +
                     "page&columns=name,durable")
    check("columns on a page", st == 200 and
          all(set(x) == {"name", "durable"} for x in j["items"]), j)
    st, j = api.call("GET", "queues/%2F?columns=name")
    check("columns on a list", st == 200 and
          all(set(x) == {"name"} for x in j), j if st != 200 else j[:2])
    st, j = api.call("GET", "queues/%2F/" + Q + "?columns=name,vhost")
    check("columns on an object", st == 200 and set(j) == {"name", "vhost"},
          j)
    for label, query in (("page=0", "page=0"),
                         ("page_size=1000", "page=1&page_size=1000"),
                         ("page=abc", "page=abc"),
                         ("page_size=-1", "page=1&page_size=-1"),
                         ("page out of range", "page=99&name=" + P + "page"),
                         ("bad regex", "page=1&name=%28&use_regex=true")):
        st, j = api.call("GET", "queues?" + query)
        check("pagination %s: 400" % label, st == 400, "%s %s" % (st, j))
        sh.status("pagination " + label, st)
    for i in range(3):
        api.call("DELETE", "queues/%2F/" + P + "page%d" % i)


def behaviour(api, sh, amqp, sc, http_port):
    ch = sc.pub
    # declare
    st, _ = api.call("PUT", "queues/%2F/" + P + "new", {"durable": True})
    check("PUT a new queue: 201", st == 201, st)
    st, _ = api.call("PUT", "queues/%2F/" + P + "new", {"durable": True})
    check("PUT it again: 204", st == 204, st)
    st, j = api.call("PUT", "queues/%2F/" + P + "new", {"durable": False})
    check("PUT it inequivalent: 400 with RabbitMQ's text", st == 400 and
          reason(j) == "inequivalent arg 'durable' for "
          "queue '%snew' in vhost '/': received 'false' but current is "
          "'true'" % P, "%s %s" % (st, j))
    # delete
    ch.basic_publish("", P + "new", b"x")
    st, j = api.call("DELETE", "queues/%2F/" + P + "new?if-empty=true")
    check("DELETE ?if-empty=true of a non-empty queue: 400", st == 400,
          "%s %s" % (st, j))
    sh.status("DELETE ?if-empty=true of a non-empty queue", st)
    if st == 400:
        sh.keys("error body", json.loads(j))
    st, _ = api.call("DELETE", "queues/%2F/" + P + "new")
    check("DELETE queue: 204", st == 204, st)
    st, _ = api.call("DELETE", "queues/%2F/" + P + "new")
    check("DELETE it again: 404", st == 404, st)
    # purge
    api.call("PUT", "queues/%2F/" + P + "purge", {})
    for _ in range(3):
        ch.basic_publish("", P + "purge", b"p")
    st, _ = api.call("DELETE", "queues/%2F/" + P + "purge/contents")
    check("DELETE contents: 204", st == 204, st)
    check("... and the queue is empty over AMQP",
          count(ch, P + "purge") == 0, count(ch, P + "purge"))
    api.call("DELETE", "queues/%2F/" + P + "purge")

    # get, with each ackmode
    ch.exchange_declare(DLX, "fanout")
    ch.queue_declare(DLQ)
    ch.queue_bind(DLQ, DLX)
    ch.queue_declare(GQ, arguments={"x-dead-letter-exchange": DLX})
    ch.basic_publish("", GQ, "héllo".encode(),
                     pika.BasicProperties(message_id="m1",
                                          headers={"h": "v"}))
    path = "queues/%2F/" + GQ + "/get"
    st, j = api.call("POST", path, {"count": 1, "ackmode": "ack_requeue_true",
                                    "encoding": "auto"})
    ok = st == 200 and len(j) == 1
    check("get ack_requeue_true: the message", ok and
          j[0]["payload"] == "héllo" and j[0]["payload_encoding"] == "string"
          and j[0]["redelivered"] is False and
          j[0]["properties"].get("message_id") == "m1" and
          j[0]["properties"].get("headers") == {"h": "v"}, "%s %s" % (st, j))
    if ok:
        sh.keys("get", j)
    check("... and it stays", count(ch, GQ) == 1, count(ch, GQ))
    st, j = api.call("POST", path, {"count": 1, "ackmode": "ack_requeue_true",
                                    "encoding": "base64", "truncate": 2})
    check("get again: redelivered, base64, truncated", st == 200 and
          j[0]["redelivered"] is True and j[0]["payload_encoding"] == "base64"
          and base64.b64decode(j[0]["payload"]) == "héllo".encode()[:2] and
          j[0]["payload_bytes"] == len("héllo".encode()), "%s %s" % (st, j))
    ch.basic_publish("", GQ, b"\xff\xfe binary")
    st, j = api.call("POST", path, {"count": 5, "ackmode": "ack_requeue_true",
                                    "encoding": "auto"})
    check("encoding auto: a binary payload as base64", st == 200 and
          len(j) == 2 and j[1]["payload_encoding"] == "base64" and
          base64.b64decode(j[1]["payload"]) == b"\xff\xfe binary",
          "%s %s" % (st, j))
    st, j = api.call("POST", path, {"count": 1,
                                    "ackmode": "ack_requeue_false",
                                    "encoding": "auto"})
    check("get ack_requeue_false: the first", st == 200 and
          j[0]["payload"] == "héllo", "%s %s" % (st, j))
    check("... and it is gone", count(ch, GQ) == 1, count(ch, GQ))
    st, j = api.call("POST", path, {"count": 1,
                                    "ackmode": "reject_requeue_false",
                                    "encoding": "auto"})
    check("get reject_requeue_false: 200", st == 200 and len(j) == 1,
          "%s %s" % (st, j))
    check("... it is dead-lettered to the DLX's queue",
          until(lambda: count(ch, DLQ) == 1, 5) and count(ch, GQ) == 0,
          (count(ch, GQ), count(ch, DLQ)))
    st, j = api.call("POST", path, {"count": 1, "ackmode": "ack_requeue_true",
                                    "encoding": "auto"})
    check("get of an empty queue: []", st == 200 and j == [], j)
    st, j = api.call("POST", path, {"count": 1, "encoding": "auto"})
    check("get without ackmode: 400 [{key_missing,ackmode}]", st == 400 and
          reason(j) == "[{key_missing,ackmode}]", "%s %s" % (st, j))
    st, j = api.call("POST", path, {"count": 1})
    check("get without ackmode and encoding: both missing", st == 400 and
          "key_missing,ackmode" in reason(j) and
          "key_missing,encoding" in reason(j), "%s %s" % (st, j))
    sh.status("get without ackmode", st)
    st, j = api.call("POST", path, {"count": 1, "ackmode": "bogus",
                                    "encoding": "auto"})
    roost("get with a bad ackmode: 400 (RabbitMQ 3.10: 500)", st == 400,
          "%s %s" % (st, j))
    st, j = api.call("POST", path, {"count": 1, "ackmode": "ack_requeue_true",
                                    "encoding": "utf9"})
    sh.status("get with a bad encoding", st)

    # publish
    pub = "exchanges/%2F/" + X + "/publish"
    props = {"content_type": "text/plain", "correlation_id": "c-1",
             "message_id": "id-1", "delivery_mode": 2, "priority": 3,
             "reply_to": "rt", "type": "t", "app_id": "a",
             "timestamp": 1700000000, "headers": {"s": "str", "n": 42,
                                                  "b": True}}
    ch.queue_declare(P + "pub")
    ch.queue_bind(P + "pub", X, "pk")
    st, j = api.call("POST", pub, {"routing_key": "pk", "payload": "hi",
                                   "payload_encoding": "string",
                                   "properties": props})
    check("publish routed: true", st == 200 and j == {"routed": True},
          "%s %s" % (st, j))
    m, p, body = ch.basic_get(P + "pub", auto_ack=True)
    check("... it arrives with its body, properties and headers",
          m is not None and body == b"hi" and
          p.content_type == "text/plain" and p.correlation_id == "c-1" and
          p.message_id == "id-1" and p.delivery_mode == 2 and
          p.priority == 3 and p.reply_to == "rt" and p.type == "t" and
          p.app_id == "a" and p.timestamp == 1700000000 and
          {k: v.decode() if isinstance(v, bytes) else v
           for k, v in (p.headers or {}).items()} ==
          {"s": "str", "n": 42, "b": True}, (m, p, body))
    st, j = api.call("POST", pub, {"routing_key": "nowhere", "payload": "hi",
                                   "payload_encoding": "string",
                                   "properties": {}})
    check("publish unrouted: false", st == 200 and j == {"routed": False},
          "%s %s" % (st, j))
    st, j = api.call("POST", pub, {"routing_key": "pk",
                                   "payload": base64.b64encode(
                                       b"\x00\x01").decode(),
                                   "payload_encoding": "base64",
                                   "properties": {}})
    m, p, body = ch.basic_get(P + "pub", auto_ack=True)
    check("publish base64: the bytes", st == 200 and body == b"\x00\x01",
          (st, body))
    st, j = api.call("POST", "exchanges/%2F/amq.default/publish",
                     {"routing_key": P + "pub", "payload": "d",
                      "payload_encoding": "string", "properties": {}})
    check("publish through amq.default: routed to the queue by name",
          st == 200 and j == {"routed": True}, "%s %s" % (st, j))
    m, p, body = ch.basic_get(P + "pub", auto_ack=True)
    check("... it arrives", body == b"d", body)
    st, j = api.call("POST", pub, {"routing_key": "pk", "payload": "x"})
    check("publish without payload_encoding and properties: 400",
          st == 400 and "key_missing" in reason(j), "%s %s" % (st, j))
    sh.status("publish without payload_encoding", st)
    c = connect(amqp, P + "amqdef")
    xch = c.channel()
    xch.confirm_delivery()
    try:
        xch.basic_publish("amq.default", P + "pub", b"z")
        check("AMQP publish to amq.default: 404 NOT_FOUND", False,
              "no error")
    except pika.exceptions.ChannelClosedByBroker as e:
        check("AMQP publish to amq.default: 404 NOT_FOUND",
              e.reply_code == 404 and "amq.default" in e.reply_text,
              "%s %s" % (e.reply_code, e.reply_text))
    c.close()

    # bindings by properties_key
    bpath = "bindings/%2F/e/" + X + "/q/" + P + "pub"
    st, hdrs, text = http(http_port, "POST", bpath,
                          json.dumps({"routing_key": "bk", "arguments":
                                      {"a": 1}}).encode(),
                          {"Content-Type": "application/json"})
    loc = hdrs.get("Location", "")
    check("POST binding: 201 with a Location", st == 201 and
          loc.startswith(P + "pub/bk~"), "%s %s %s" % (st, loc, text))
    pk = loc.split("/")[-1]
    st, j = api.call("GET", bpath + "/" + q(pk))
    check("GET binding by its properties_key", st == 200 and
          j["routing_key"] == "bk" and j["arguments"] == {"a": 1},
          "%s %s" % (st, j))
    st, _ = api.call("POST", bpath, {"routing_key": "bk2"})
    st, j = api.call("GET", bpath + "/bk2")
    check("a binding without arguments: properties_key is the key",
          st == 200 and j["properties_key"] == "bk2", "%s %s" % (st, j))
    st, _ = api.call("DELETE", bpath + "/" + q(pk))
    check("DELETE binding: 204", st == 204, st)
    st, _ = api.call("DELETE", bpath + "/" + q(pk))
    check("DELETE it again: 404", st == 404, st)
    st, _ = api.call("GET", bpath + "/nosuch")
    check("GET an unknown binding: 404", st == 404, st)
    api.call("DELETE", "queues/%2F/" + P + "pub")

    # users: a management-only one, one without permissions
    api.call("PUT", "users/" + P + "mgr", {"password": "p",
                                          "tags": "management"})
    mgr = Api(http_port, P + "mgr", "p")
    st, j = mgr.call("GET", "nodes")
    check("/api/nodes as a management user: 401 Not monitor user",
          st == 401 and reason(j) == "Not monitor user", "%s %s" % (st, j))
    st, j = mgr.call("PUT", "queues/%2F/" + P + "noperm", {})
    check("a user without permissions on / cannot declare there: 401",
          st == 401, "%s %s" % (st, j))
    sh.status("declare without permissions", st)
    mgr_reason = reason(j)
    check("... with RabbitMQ's reason",
          mgr_reason == "User not authorised to access virtual host",
          mgr_reason)
    st, j = mgr.call("GET", "queues/%2F/" + Q)
    sh.status("GET a queue without permissions", st)
    api.call("PUT", "users/" + P + "mon", {"password": "p",
                                          "tags": "monitoring"})
    st, j = Api(http_port, P + "mon", "p").call("GET", "nodes")
    check("/api/nodes as a monitoring user: 200", st == 200, st)
    api.call("DELETE", "users/" + P + "mgr")
    api.call("DELETE", "users/" + P + "mon")


def close_connection(api, amqp):
    c = connect(amqp, P + "victim")
    check("the victim is listed",
          until(lambda: conn_named(api, P + "victim") is not None), "")
    v = conn_named(api, P + "victim")
    name = v["name"] if v else "?"
    st, _, _ = http(api.port, "DELETE", "connections/" + q(name),
                    headers={"X-Reason": "api test says bye"})
    check("DELETE connection: 204", st == 204, st)
    try:
        end = time.time() + 5
        while time.time() < end:
            c.process_data_events(time_limit=0.2)
        check("the connection is closed with 320", False, "still open")
    except pika.exceptions.ConnectionClosedByBroker as e:
        check("the connection is closed with 320 CONNECTION_FORCED and "
              "the reason", e.reply_code == 320 and
              "api test says bye" in e.reply_text,
              "%s %s" % (e.reply_code, e.reply_text))
    except pika.exceptions.AMQPConnectionError as e:
        check("the connection is closed with 320", False, repr(e))
    check("it is gone from the list",
          until(lambda: conn_named(api, P + "victim") is None), "")


def big_get(api, amqp):
    """A get whose messages take more than the session's bound (64 MiB):
    400, and nothing taken (Roost's bound; RabbitMQ has none)."""
    if REFERENCE:
        return
    name = P + "big"
    c = connect(amqp, P + "big")
    ch = c.channel()
    ch.queue_declare(name)
    body = b"x" * (1 << 20)
    for _ in range(70):
        ch.basic_publish("", name, body)
    # pika's publish returns once the frames are written, not routed: wait
    # for all 70, or a get of the first 64 (exactly the bound) answers 200.
    check("the 70 MiB are queued", until(lambda: count(ch, name) == 70),
          "%d queued" % count(ch, name))
    st, body_text = api.call("POST", "queues/%2F/" + name + "/get",
                             {"count": 70, "ackmode": "ack_requeue_false",
                              "encoding": "auto"})
    check("a get of 70 MiB: 400 (the 64 MiB bound)", st == 400 and
          "64 MiB" in str(body_text), "%s %s" % (st, str(body_text)[:200]))
    check("a get over the bound takes nothing",
          until(lambda: count(ch, name) == 70), "%d left" % count(ch, name))
    st, got = api.call("POST", "queues/%2F/" + name + "/get",
                       {"count": 2, "ackmode": "ack_requeue_true",
                        "encoding": "auto", "truncate": 10})
    check("a get under the bound still answers", st == 200 and
          len(got) == 2 and got[0]["payload_bytes"] == 1 << 20,
          "%s %s" % (st, str(got)[:200]))
    ch.queue_delete(name)
    c.close()


def bad_input(api, sh, amqp, sc, n1):
    port = api.port
    js = {"Content-Type": "application/json"}
    paths = {
        "queue": "queues/%2F/" + P + "bad",
        "exchange": "exchanges/%2F/" + P + "badx",
        "get": "queues/%2F/" + Q + "/get",
        "publish": "exchanges/%2F/" + X + "/publish",
        "binding": "bindings/%2F/e/" + X + "/q/" + Q,
    }
    for what, path in paths.items():
        method = "PUT" if what in ("queue", "exchange") else "POST"
        st, _, text = http(port, method, path, b"{bad json", js)
        # RabbitMQ: 400, but 500 for a binding
        roost("%s: malformed JSON: 400" % what, st == 400, "%s %s" %
              (st, text))
        st, _, text = http(port, method, path, b'{"a":1}',
                           {"Content-Type": "text/plain"})
        # RabbitMQ 3.10 takes a queue, an exchange or a binding whatever
        # the content type says (201), and reads a get or a publish as
        # an empty body (400 key_missing)
        roost("%s: wrong content type: 415" % what, st == 415,
              "%s %s" % (st, text))
        st, _, text = http(port, method, path, b"{}", js, auth=None)
        check("%s: no credentials: 401" % what, st == 401, st)
        st, _, text = http(port, method, path, b"{}", js,
                           auth="guest:wrong")
        check("%s: bad credentials: 401" % what, st == 401, st)
    for label, method, path in (
            ("queues", "POST", "queues"),
            ("queue contents", "GET", "queues/%2F/" + Q + "/contents"),
            ("get", "GET", "queues/%2F/" + Q + "/get"),
            ("publish", "GET", "exchanges/%2F/" + X + "/publish"),
            ("bindings", "PUT", "bindings"),
            ("connections", "POST", "connections"),
            ("channel", "DELETE", "channels/x"),
            ("nodes", "PUT", "nodes"),
            ("consumers", "POST", "consumers"),
            ("health", "POST", "health/checks/alarms")):
        st, hdrs, _ = http(port, method, path, b"{}" if method in
                           ("POST", "PUT") else None, js)
        check("%s %s: 405 with Allow" % (method, label),
              st == 405 and hdrs.get("Allow"), "%s %s" % (st, hdrs.get(
                  "Allow")))
        sh.status("%s %s" % (method, label), st)
    for label, path in (
            ("vhost's queues", "queues/nosuchvh"),
            ("queue in an unknown vhost", "queues/nosuchvh/x"),
            ("queue", "queues/%2F/" + P + "nosuch"),
            ("exchange", "exchanges/%2F/" + P + "nosuch"),
            ("connection", "connections/nosuch"),
            ("channel", "channels/nosuch%20(1)"),
            ("binding's key", "bindings/%2F/e/" + X + "/q/" + Q + "/zz"),
            ("vhost's consumers", "consumers/nosuchvh"),
            ("vhost's connections", "vhosts/nosuchvh/connections")):
        st, j = api.call("GET", path)
        check("unknown %s: 404" % label, st == 404, "%s %s" % (st, j))
        sh.status("unknown " + label, st)
    # RabbitMQ 3.10 answers these with a 200 (a default binding of a
    # queue that is not there, an empty list) or a 500 (the channels of
    # a connection that is not there); Roost says 404
    for label, path in (
            ("queue's bindings", "queues/%2F/" + P + "nosuch/bindings"),
            ("exchange's bindings", "exchanges/%2F/" + P +
             "nosuch/bindings/source"),
            ("connection's channels", "connections/nosuch/channels"),
            ("binding", "bindings/%2F/e/" + X + "/q/" + P + "nosuch")):
        st, j = api.call("GET", path)
        roost("unknown %s: 404" % label, st == 404, "%s %s" % (st, j))
    st, _ = api.call("DELETE", "connections/nosuch")
    check("DELETE an unknown connection: 404", st == 404, st)
    st, j = api.call("POST", "queues/%2F/" + P + "nosuch/get",
                     {"count": 1, "ackmode": "ack_requeue_true",
                      "encoding": "auto"})
    check("get from an unknown queue: 404", st == 404, "%s %s" % (st, j))
    sh.status("get from an unknown queue", st)
    st, j = api.call("POST", "exchanges/%2F/" + P + "nosuch/publish",
                     {"routing_key": "", "payload": "", "properties": {},
                      "payload_encoding": "string"})
    check("publish to an unknown exchange: 400 404 NOT_FOUND", st == 400 and
          reason(j) == "404 NOT_FOUND - no exchange '%snosuch' in vhost "
          "'/'" % P, "%s %s" % (st, j))
    sh.status("publish to an unknown exchange", st)
    st, j = api.call("DELETE", "queues/%2F/" + P + "nosuch/contents")
    check("purge an unknown queue: 404", st == 404, st)

    long = "a" * 300
    st, j = api.call("PUT", "queues/%2F/" + long, {})
    check("a 300-byte queue name: 400", st == 400, "%s %s" % (st, j))
    sh.status("a 300-byte queue name", st)
    st, j = api.call("PUT", "exchanges/%2F/" + long, {"type": "direct"})
    # RabbitMQ 3.10 makes an exchange (and a binding) AMQP cannot name
    roost("a 300-byte exchange name: 400", st == 400, "%s %s" % (st, j))
    st, j = api.call("POST", "bindings/%2F/e/" + X + "/q/" + Q,
                     {"routing_key": long})
    roost("a binding with a 300-byte routing key: 400", st == 400,
          "%s %s" % (st, j))
    st, j = api.call("PUT", "queues/%2F/" + P + "bad", {"durable": "maybe"})
    check("durable not a boolean: 400", st == 400, "%s %s" % (st, j))
    sh.status("durable not a boolean", st)
    st, j = api.call("PUT", "queues/%2F/" + P + "bad", {"arguments": [1]})
    # RabbitMQ 3.10: 204 (ignored), and a 500 for an exchange
    roost("arguments not an object: 400", st == 400, "%s %s" % (st, j))
    st, j = api.call("PUT", "exchanges/%2F/" + P + "badx",
                     {"type": "direct", "arguments": "x"})
    roost("exchange arguments not an object: 400", st == 400,
          "%s %s" % (st, j))
    st, j = api.call("PUT", "exchanges/%2F/" + P + "badx",
                     {"type": "nosuchtype"})
    check("an unknown exchange type: 4xx", 400 <= st < 500, "%s %s" % (st, j))
    sh.status("an unknown exchange type", st)
    gp = "queues/%2F/" + Q + "/get"
    for label, body in (("huge count", {"count": 10 ** 12}),
                        ("negative count", {"count": -1}),
                        ("count not a number", {"count": "x"}),
                        ("huge truncate", {"count": 1, "truncate": 10 ** 15}),
                        ("negative truncate", {"count": 1, "truncate": -5})):
        body.update({"ackmode": "ack_requeue_true", "encoding": "auto"})
        st, j = api.call("POST", gp, body)
        # RabbitMQ 3.10: a 500 for a negative truncate
        roost("get with a %s: answered" % label, st in (200, 400),
              "%s %s" % (st, j))
    st, j = api.call("POST", "exchanges/%2F/" + X + "/publish",
                     {"routing_key": "k", "payload": "!!not base64!!",
                      "payload_encoding": "base64", "properties": {}})
    check("publish with a payload that is not base64: 400", st == 400,
          "%s %s" % (st, j))
    sh.status("publish with a payload that is not base64", st)
    st, j = api.call("POST", "exchanges/%2F/" + X + "/publish",
                     {"routing_key": "k", "payload": "x",
                      "payload_encoding": "string", "properties": "x"})
    roost("publish with properties not an object: 400 (RabbitMQ 3.10: 500)",
          st == 400, "%s %s" % (st, j))
    # an exclusive queue of another connection
    ech = sc.c1.channel()
    ech.queue_declare(P + "excl", exclusive=True)
    ech.basic_publish("", P + "excl", b"e")
    st, j = api.call("POST", "queues/%2F/" + P + "excl/get",
                     {"count": 1, "ackmode": "ack_requeue_true",
                      "encoding": "auto"})
    check("get on another connection's exclusive queue: 400 "
          "RESOURCE_LOCKED", st == 400 and "exclusive" in str(reason(j)),
          "%s %s" % (st, j))
    sh.status("get on another connection's exclusive queue", st)
    st, j = api.call("DELETE", "queues/%2F/" + P + "excl")
    sh.status("DELETE another connection's exclusive queue", st)

    # still serving
    c = connect(amqp, P + "after")
    ch = c.channel()
    ch.queue_declare(P + "after", auto_delete=True)
    c.close()
    check("after the bad input, AMQP still works", True)
    st, _ = api.call("GET", "overview")
    check("after the bad input, HTTP still works", st == 200, st)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--amqp", type=int, required=True)
    ap.add_argument("--http", type=int, required=True)
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--reference", action="store_true",
                    help="the broker is RabbitMQ: write the shapes")
    a = ap.parse_args()
    global REFERENCE
    REFERENCE = a.reference
    api = Api(a.http)
    sh = Shapes(a.shapes)
    sc = Scenario(a.amqp)
    try:
        n1, _ = endpoints(api, sh, a.amqp, a.http)
        pagination(api, sh)
        behaviour(api, sh, a.amqp, sc, a.http)
        close_connection(api, a.amqp)
        bad_input(api, sh, a.amqp, sc, n1)
        big_get(api, a.amqp)
    finally:
        sh.write()
        for c in (sc.c1, sc.c2):
            try:
                c.close()
            except Exception:
                pass
        for name in (Q, GQ, DLQ, P + "pub", P + "new", P + "bad"):
            api.call("DELETE", "queues/%2F/" + q(name))
        for name in (X, DLX, P + "badx", "a" * 300):
            api.call("DELETE", "exchanges/%2F/" + q(name))
    done()


if __name__ == "__main__":
    main()
