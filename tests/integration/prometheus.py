# SPDX-License-Identifier: Apache-2.0
"""The checks of tests/integration/prometheus.sh that want Python: pika
traffic, parsing the text exposition format, hostile HTTP clients, the
Prometheus server's HTTP API and the comparison of family names with the
reference RabbitMQ's. Each check prints "PASS name" or "FAIL name: why".

  prometheus.py traffic AMQP_PORT READY STOP
  prometheus.py aggregated FILE
  prometheus.py per-object FILE
  prometheus.py bound FILE ALLOWED OMITTED
  prometheus.py hostile PROM_PORT AMQP_PORT
  prometheus.py server PROMETHEUS_URL
  prometheus.py families ROOST_FILE REFERENCE_FILE
"""
import json
import os
import re
import socket
import sys
import time
import urllib.parse
import urllib.request

ODD = 'prom "odd"\\name\n'


def ok(name):
    print("PASS " + name)


def bad(name, why):
    print("FAIL %s: %s" % (name, why))


def check(name, cond, why=""):
    if cond:
        ok(name)
    else:
        bad(name, why)


# ---- traffic ----

def traffic(port, ready, stop):
    """Queues, confirmed publishes, gets, acks, a reject to a dead-letter
    exchange, a requeue (a redelivery) and an empty get; then hold the
    connection open until 'stop' appears."""
    import pika
    c = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=int(port), connection_attempts=3))
    ch = c.channel()
    ch.exchange_declare("prom.dlx", "fanout")
    ch.queue_declare("prom.dead")
    ch.queue_bind("prom.dead", "prom.dlx")
    ch.queue_declare("prom.work",
                     arguments={"x-dead-letter-exchange": "prom.dlx"})
    ch.queue_declare(ODD)
    ch.confirm_delivery()
    for i in range(10):
        ch.basic_publish("", "prom.work", b"m%d" % i)
    ch.basic_publish("", ODD, b"x")
    got = []
    for _ in range(10):
        m, _p, _b = ch.basic_get("prom.work")
        got.append(m)
    for m in got[:8]:
        ch.basic_ack(m.delivery_tag)
    ch.basic_reject(got[8].delivery_tag, requeue=False)
    ch.basic_nack(got[9].delivery_tag, requeue=True)
    m, _p, _b = ch.basic_get("prom.work")
    assert m.redelivered
    ch.basic_ack(m.delivery_tag)
    m, _p, _b = ch.basic_get("prom.work")
    assert m is None
    open(ready, "w").close()
    while not os.path.exists(stop):
        c.process_data_events(0.05)
    c.close()


# ---- the exposition format ----

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n"
                  else m.group(1), v)


def parse(path):
    """families: name -> (type, help); samples: [(name, labels, value)]."""
    types, helps, samples, errors = {}, {}, [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith("# TYPE "):
                _, _, name, t = line.split(" ", 3)
                types[name] = t
            elif line.startswith("# HELP "):
                name = line.split(" ")[2]
                helps[name] = line
            elif line.startswith("#") or not line:
                continue
            else:
                m = LINE.match(line)
                if not m:
                    errors.append("%d: %r" % (n, line))
                    continue
                labels = {}
                if m.group(3):
                    for k, v, _ in LABEL.findall(m.group(3)):
                        labels[k] = unescape(v)
                samples.append((m.group(1), labels, float(m.group(4))))
    return types, helps, samples, errors


def family_of(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in types:
            return name[:-len(suffix)]
    return name


def value(samples, name, **labels):
    for n, l, v in samples:
        if n == name and all(l.get(k) == w for k, w in labels.items()):
            return v
    return None


def common(path, what):
    types, helps, samples, errors = parse(path)
    check(what + ": every line parses", not errors, "; ".join(errors[:3]))
    missing = sorted({family_of(n, types) for n, _, _ in samples
                      if family_of(n, types) not in types or
                      family_of(n, types) not in helps})
    check(what + ": every family has # TYPE and # HELP", not missing,
          ", ".join(missing[:5]))
    check(what + ": rabbitmq_identity_info",
          value(samples, "rabbitmq_identity_info") == 1 and
          any(n == "rabbitmq_identity_info" and "rabbitmq_cluster" in l
              and "rabbitmq_node" in l for n, l, _ in samples))
    return types, samples


def check_hist(what, types, samples, name, labels, want_count):
    buckets = [(l["le"], v) for n, l, v in samples
               if n == name + "_bucket" and
               all(l.get(k) == w for k, w in labels.items())]
    count = value(samples, name + "_count", **labels)
    check("%s: %s is a histogram" % (what, name),
          types.get(name) == "histogram", types.get(name))
    vals = [v for _, v in buckets]
    check("%s: %s buckets cumulative, +Inf = count" % (what, name),
          len(buckets) == 15 and buckets[-1][0] == "+Inf" and
          vals == sorted(vals) and vals[-1] == count,
          "%r count %r" % (buckets, count))
    check("%s: %s count = %d" % (what, name, want_count), count == want_count,
          "count %r" % count)


def aggregated(path):
    what = "aggregated"
    types, samples = common(path, what)
    labelled = sorted({n for n, l, _ in samples if "queue" in l})
    check(what + ": no per-queue series", not labelled, ", ".join(labelled))
    want = {
        "rabbitmq_channel_messages_published_total": 11,
        "rabbitmq_channel_messages_confirmed_total": 11,
        "rabbitmq_channel_get_ack_total": 11,
        "rabbitmq_channel_messages_acked_total": 9,
        "rabbitmq_channel_messages_redelivered_total": 1,
        "rabbitmq_channel_get_empty_total": 1,
        "rabbitmq_queue_messages_published_total": 12,
        "rabbitmq_queue_messages_ready": 2,
        "rabbitmq_queues": 3,
        "rabbitmq_connections": 1,
        "rabbitmq_channels": 1,
        "rabbitmq_global_messages_received_total": 11,
        "roost_queue_messages_redelivered_total": 1,
    }
    for name, v in want.items():
        got = value(samples, name)
        check("%s: %s = %d" % (what, name, v), got == v, "got %r" % got)
    for name, t in (("rabbitmq_queue_messages", "gauge"),
                    ("rabbitmq_connections_opened_total", "counter"),
                    ("rabbitmq_build_info", "untyped")):
        check("%s: %s is %s" % (what, name, t), types.get(name) == t,
              types.get(name))
    got = value(samples, "roost_queue_messages_dead_lettered_total",
                reason="rejected")
    check(what + ": dead-lettered rejected = 1", got == 1, "got %r" % got)
    got = value(samples, "rabbitmq_global_messages_dead_lettered_rejected"
                "_total", dead_letter_strategy="at_most_once")
    check(what + ": global dead-lettered rejected = 1", got == 1,
          "got %r" % got)
    got = value(samples, "roost_queue_head_message_age_seconds")
    check(what + ": head message age > 0 (the max)", got and got > 0,
          "got %r" % got)
    check_hist(what, types, samples, "roost_queue_time_in_queue_seconds", {},
               10)
    check_hist(what, types, samples, "roost_queue_processing_time_seconds",
               {}, 9)


def per_object(path):
    what = "per-object"
    types, samples = common(path, what)
    q = {"vhost": "/", "queue": "prom.work"}
    for name, v in (("rabbitmq_queue_messages_published_total", 10),
                    ("rabbitmq_queue_messages_ready", 0),
                    ("roost_queue_messages_redelivered_total", 1)):
        got = value(samples, name, **q)
        check("%s: %s{prom.work} = %d" % (what, name, v), got == v,
              "got %r" % got)
    got = value(samples, "rabbitmq_queue_messages_ready", vhost="/",
                queue="prom.dead")
    check(what + ": the dead letter is ready in prom.dead", got == 1,
          "got %r" % got)
    got = value(samples, "rabbitmq_queue_messages_ready", vhost="/",
                queue=ODD)
    check(what + ": a queue name with quotes, a backslash and a newline",
          got == 1, "got %r" % got)
    for r in ("expired", "rejected", "maxlen", "delivery_limit"):
        got = value(samples, "roost_queue_messages_dead_lettered_total",
                    reason=r, **q)
        check("%s: dead-lettered{%s}" % (what, r),
              got == (1 if r == "rejected" else 0), "got %r" % got)
        got = value(samples, "roost_queue_messages_dropped_total", reason=r,
                    **q)
        check("%s: dropped{%s} = 0" % (what, r), got == 0, "got %r" % got)
    check_hist(what, types, samples, "roost_queue_time_in_queue_seconds", q,
               10)
    check_hist(what, types, samples, "roost_queue_processing_time_seconds",
               q, 9)
    check_hist(what, types, samples, "roost_queue_confirm_latency_seconds",
               {"vhost": "/", "queue": "prom.dead"}, 0)
    got = value(samples, "rabbitmq_channel_messages_published_total",
                vhost="/")
    check(what + ": channel counters per vhost", got == 11, "got %r" % got)
    got = value(samples, "roost_prometheus_objects_omitted")
    check(what + ": nothing omitted", got == 0, "got %r" % got)
    got = value(samples, "rabbitmq_global_messages_received_total")
    check(what + ": the global families too", got == 11, "got %r" % got)
    got = value(samples, "rabbitmq_global_messages_dead_lettered_rejected"
                "_total", dead_letter_strategy="at_most_once")
    check(what + ": global dead-lettered rejected = 1", got == 1,
          "got %r" % got)


def bound(path, allowed, omitted):
    types, _h, samples, errors = parse(path)
    queues = {l["queue"] for n, l, _ in samples if "queue" in l}
    check("bound: %s queues shown" % allowed, len(queues) == int(allowed),
          "%d shown" % len(queues))
    got = value(samples, "roost_prometheus_objects_omitted")
    check("bound: roost_prometheus_objects_omitted = %s" % omitted,
          got == int(omitted), "got %r" % got)
    text = open(path).read()
    check("bound: the comment says so",
          re.search(r"^# Roost: %s of \d+ queues left out: "
                    r"prometheus.max_series" % omitted, text, re.M),
          text[:300])
    check("bound: rabbitmq_queues still counts every queue",
          value(samples, "rabbitmq_queues") == int(allowed) + int(omitted))


# ---- hostile clients ----

def http_raw(port, data, read=True, timeout=5):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=timeout)
    s.sendall(data)
    out = b""
    if read:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
    s.close()
    return out


def status(port, method, path):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path),
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def amqp_works(port):
    import pika
    c = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=int(port), connection_attempts=2))
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"still")
    m, _p, body = ch.basic_get(q, auto_ack=True)
    c.close()
    return body == b"still"


def hostile(port, amqp):
    code, headers, _ = status(port, "GET", "/nope")
    check("hostile: unknown path 404", code == 404, code)
    code, headers, _ = status(port, "GET", "/metrics/per-object/x")
    check("hostile: a path under /metrics/per-object 404", code == 404, code)
    code, headers, _ = status(port, "POST", "/metrics")
    check("hostile: POST 405 with Allow", code == 405 and
          "GET" in headers.get("Allow", ""), (code, headers))
    code, headers, _ = status(port, "DELETE", "/metrics/per-object")
    check("hostile: DELETE 405", code == 405, code)
    code, headers, body = status(port, "HEAD", "/metrics")
    check("hostile: HEAD 200 without a body", code == 200 and body == b"",
          (code, body[:50]))
    out = http_raw(port, os.urandom(4096) + b"\r\n\r\n")
    check("hostile: garbage bytes answered 400 or closed",
          out == b"" or out.startswith(b"HTTP/1.1 400"), out[:60])
    out = http_raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" +
                   b"X-Big: " + b"a" * 100000 + b"\r\n\r\n")
    check("hostile: oversized headers refused",
          out == b"" or out.split(b" ")[1] in (b"400", b"413", b"431"),
          out[:60])
    # half a request, then gone
    http_raw(port, b"GET /metrics/per-object HTTP/1.1\r\nHo", read=False)
    # a client that asks for a big answer and goes after its first bytes
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
        s.sendall(b"GET /metrics/per-object HTTP/1.1\r\n"
                  b"Host: localhost\r\n\r\n")
        first = s.recv(1024)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    check("hostile: the vanishing client got its first bytes",
          first.startswith(b"HTTP/1.1 200"), first[:60])
    # the same with the aggregated answer, gone before it is written
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    s.close()
    time.sleep(0.2)
    check("hostile: AMQP still works", amqp_works(amqp))
    code, headers, body = status(port, "GET", "/metrics/per-object")
    check("hostile: a whole per-object answer afterwards",
          code == 200 and body.rstrip().endswith(b"} 1") and
          b"rabbitmq_identity_info" in body, (code, body[-80:]))
    check("hostile: content type",
          headers.get("Content-Type") ==
          "text/plain; version=0.0.4; charset=utf-8", headers)


# ---- the Prometheus server ----

def query(url, q):
    u = "%s/api/v1/query?%s" % (url, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(u, timeout=5) as r:
        return json.load(r)["data"]["result"]


def server(url):
    deadline = time.monotonic() + 30
    found = []
    while time.monotonic() < deadline:
        try:
            found = query(url, 'rabbitmq_identity_info{job="roost"}')
            hist = query(url, 'roost_queue_time_in_queue_seconds_count'
                         '{job="roost-per-object",queue="prom.work"}')
            if found and hist:
                break
        except OSError:
            pass
        time.sleep(0.5)
    check("prometheus server: found rabbitmq_identity_info", found,
          "no series after 30 s")
    if not found:
        return
    check("prometheus server: identity labels",
          found[0]["metric"].get("rabbitmq_cluster") and
          found[0]["metric"].get("rabbitmq_node"), found[0]["metric"])
    hist = query(url, 'roost_queue_time_in_queue_seconds_count'
                 '{job="roost-per-object",queue="prom.work"}')
    check("prometheus server: a roost_ histogram per queue",
          hist and float(hist[0]["value"][1]) == 10, hist)
    q = query(url, 'histogram_quantile(0.5, '
              'roost_queue_time_in_queue_seconds_bucket{job="roost"})')
    check("prometheus server: histogram_quantile over the buckets",
          q and float(q[0]["value"][1]) >= 0, q)
    # the Overview dashboard's join on rabbitmq_identity_info
    q = query(url, 'sum(rabbitmq_queue_messages_ready{job="roost"} * on(instance) '
              'group_left(rabbitmq_cluster) rabbitmq_identity_info'
              '{job="roost"})')
    check("prometheus server: the dashboards' join on identity_info",
          q and float(q[0]["value"][1]) == 2, q)
    up = query(url, "up")
    check("prometheus server: both scrapes up",
          len(up) == 2 and all(u["value"][1] == "1" for u in up), up)


# ---- family names against the reference ----

# Families Roost says it implements (docs/operations.md, "Metrics"): if
# the reference has one, Roost must too, with the same type.
IMPLEMENTED = """
rabbitmq_alarms_free_disk_space_watermark rabbitmq_alarms_memory_used_watermark
rabbitmq_connections_opened_total rabbitmq_connections_closed_total
rabbitmq_channels_opened_total rabbitmq_channels_closed_total
rabbitmq_queues_declared_total rabbitmq_queues_created_total
rabbitmq_queues_deleted_total rabbitmq_process_open_fds
rabbitmq_process_open_tcp_sockets rabbitmq_process_resident_memory_bytes
rabbitmq_disk_space_available_bytes rabbitmq_process_max_fds
rabbitmq_process_max_tcp_sockets rabbitmq_resident_memory_limit_bytes
rabbitmq_disk_space_available_limit_bytes rabbitmq_erlang_uptime_seconds
rabbitmq_queue_messages_ready rabbitmq_queue_messages_unacked
rabbitmq_queue_messages rabbitmq_queue_consumers
rabbitmq_queue_consumer_capacity rabbitmq_queue_consumer_utilisation
rabbitmq_queue_process_memory_bytes rabbitmq_queue_messages_ram
rabbitmq_queue_messages_ram_bytes rabbitmq_queue_messages_ready_ram
rabbitmq_queue_messages_unacked_ram rabbitmq_queue_messages_bytes
rabbitmq_queue_messages_ready_bytes rabbitmq_queue_messages_unacked_bytes
rabbitmq_queue_messages_paged_out rabbitmq_channel_consumers
rabbitmq_channel_messages_unacked rabbitmq_channel_messages_unconfirmed
rabbitmq_channel_messages_uncommitted rabbitmq_consumer_prefetch
rabbitmq_channel_prefetch rabbitmq_channel_messages_published_total
rabbitmq_channel_messages_confirmed_total
rabbitmq_channel_messages_unroutable_returned_total
rabbitmq_channel_messages_unroutable_dropped_total
rabbitmq_channel_get_ack_total rabbitmq_channel_get_total
rabbitmq_channel_messages_delivered_ack_total
rabbitmq_channel_messages_delivered_total
rabbitmq_channel_messages_redelivered_total
rabbitmq_channel_messages_acked_total rabbitmq_channel_get_empty_total
rabbitmq_connection_incoming_bytes_total
rabbitmq_connection_outgoing_bytes_total
rabbitmq_connection_incoming_packets_total
rabbitmq_connection_outgoing_packets_total rabbitmq_connection_channels
rabbitmq_queue_messages_published_total rabbitmq_connections
rabbitmq_channels rabbitmq_consumers rabbitmq_queues rabbitmq_build_info
rabbitmq_identity_info process_start_time_seconds
rabbitmq_global_consumers rabbitmq_global_messages_acknowledged_total
rabbitmq_global_messages_confirmed_total
rabbitmq_global_messages_dead_lettered_delivery_limit_total
rabbitmq_global_messages_dead_lettered_expired_total
rabbitmq_global_messages_dead_lettered_maxlen_total
rabbitmq_global_messages_dead_lettered_rejected_total
rabbitmq_global_messages_delivered_consume_auto_ack_total
rabbitmq_global_messages_delivered_consume_manual_ack_total
rabbitmq_global_messages_delivered_get_auto_ack_total
rabbitmq_global_messages_delivered_get_manual_ack_total
rabbitmq_global_messages_delivered_total
rabbitmq_global_messages_get_empty_total
rabbitmq_global_messages_received_confirm_total
rabbitmq_global_messages_received_total
rabbitmq_global_messages_redelivered_total
rabbitmq_global_messages_routed_total
rabbitmq_global_messages_unroutable_dropped_total
rabbitmq_global_messages_unroutable_returned_total
""".split()


def families(roost_path, ref_path):
    roost, _h, _s, _e = parse(roost_path)
    ref, _h, _s, _e = parse(ref_path)
    lacking = sorted(set(ref) - set(roost))
    print("reference families Roost lacks (%d): %s" % (len(lacking),
                                                       " ".join(lacking)))
    broken = [f for f in IMPLEMENTED if f in ref and f not in roost]
    check("families: every implemented family the reference has",
          not broken, ", ".join(broken))
    wrong = ["%s %s/%s" % (f, roost[f], ref[f]) for f in IMPLEMENTED
             if f in ref and f in roost and roost[f] != ref[f]]
    check("families: the same types as the reference", not wrong,
          ", ".join(wrong))
    unlisted = sorted(f for f in roost if f.startswith("rabbitmq_")
                      and f not in IMPLEMENTED)
    check("families: every rabbitmq_ family Roost writes is listed",
          not unlisted, ", ".join(unlisted))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"traffic": traffic, "aggregated": aggregated, "per-object": per_object,
     "bound": bound, "hostile": hostile, "server": server,
     "families": families}[cmd](*args)


if __name__ == "__main__":
    main()
