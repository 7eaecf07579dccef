# SPDX-License-Identifier: Apache-2.0
"""Checks for rabbitconf.sh over real sockets: what a roostd started with a
rabbitmq.conf does, as a RabbitMQ client and an operator see it.

    rabbitconf.py main AMQP AMQPS MGMT CERTS USER PASS
    rabbitconf.py limits MGMT USER PASS MEM DISK

Prints "PASS name" and "FAIL name: why" lines.
"""
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request

import pika


def check(name, cond, why=""):
    print("PASS %s" % name if cond else "FAIL %s: %s" % (name, why))


def api(port, path, user, password):
    req = urllib.request.Request("http://127.0.0.1:%d/api/%s" % (port, path))
    token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    req.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def connect(port, user, password, ctx=None):
    params = pika.ConnectionParameters(
        host="localhost" if ctx else "127.0.0.1", port=port, virtual_host="prod",
        credentials=pika.PlainCredentials(user, password),
        ssl_options=pika.SSLOptions(ctx, "localhost") if ctx else None,
        connection_attempts=1, socket_timeout=5, blocked_connection_timeout=5)
    return pika.BlockingConnection(params)


def tls_context(certs, client_cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
    if client_cert:
        ctx.load_cert_chain(os.path.join(certs, "client.pem"),
                            os.path.join(certs, "client.key"))
    return ctx


def refused(fn):
    try:
        fn().close()
        return "it connected"
    except Exception:
        return None


def main(amqp, amqps, mgmt, certs, user, password):
    # The default user logs in; guest was never made.
    try:
        c = connect(amqp, user, password)
        p = c._impl.params
        check("default_user logs in over listeners.tcp.default", True)
        check("heartbeat = 15 is offered", p.heartbeat == 15,
              "heartbeat %s" % p.heartbeat)
        check("frame_max = 64KB is 65536", p.frame_max == 65536,
              "frame_max %s" % p.frame_max)
        check("channel_max = 100", p.channel_max == 100,
              "channel_max %s" % p.channel_max)
        ch = c.channel()
        ch.queue_declare("rabbitconf-q")
        ch.basic_publish("", "rabbitconf-q", b"hello")
        ok, _, body = ch.basic_get("rabbitconf-q", auto_ack=True)[0:3]
        check("a message goes through", body == b"hello", repr(body))
        c.close()
    except Exception as e:
        check("default_user logs in over listeners.tcp.default", False,
              repr(e))
    why = refused(lambda: connect(amqp, "guest", "guest"))
    check("guest does not exist", why is None, why)
    why = refused(lambda: connect(amqp, user, "wrong"))
    check("a wrong password is refused", why is None, why)

    # TLS: verify_peer with fail_if_no_peer_cert.
    try:
        c = connect(amqps, user, password, tls_context(certs, True))
        sock = c._impl._transport._sock
        check("TLS with a client certificate", True)
        check("TLS 1.2 or 1.3", sock.version() in ("TLSv1.2", "TLSv1.3"),
              sock.version())
        c.close()
    except Exception as e:
        check("TLS with a client certificate", False, repr(e))
    why = refused(lambda: connect(amqps, user, password,
                                  tls_context(certs, False)))
    check("fail_if_no_peer_cert refuses a client without one", why is None,
          why)

    # The management API on management.tcp.port.
    st, ov = api(mgmt, "overview", user, password)
    check("/api/overview on management.tcp.port", st == 200 and
          isinstance(ov, dict) and "object_totals" in ov, "%s %s" % (st, ov))
    st, _ = api(mgmt, "overview", user, "wrong")
    check("/api/overview wants the password", st == 401, st)
    st, nodes = api(mgmt, "nodes", user, password)
    node = nodes[0] if st == 200 and nodes else {}
    check("mem_limit is 512MiB", node.get("mem_limit") == 512 * 1024 * 1024,
          node.get("mem_limit"))
    check("disk_free_limit is 1GB", node.get("disk_free_limit") == 10 ** 9,
          node.get("disk_free_limit"))
    st, me = api(mgmt, "whoami", user, password)
    tags = sorted(me.get("tags") or []) if st == 200 else None
    check("default_user_tags", tags == ["administrator", "monitoring"], tags)
    st, vhosts = api(mgmt, "vhosts", user, password)
    names = [v["name"] for v in vhosts or []]
    check("default_vhost made", names == ["prod"], names)
    st, perms = api(mgmt, "permissions/prod/%s" % user, user, password)
    check("default_permissions", st == 200 and perms.get("configure") ==
          "^rabbitconf-" and perms.get("write") == ".*", "%s %s" % (st, perms))


def limits(mgmt, user, password, mem, disk):
    st, nodes = api(mgmt, "nodes", user, password)
    node = nodes[0] if st == 200 and nodes else {}
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    want_mem = int(float(mem) * ram)
    want_disk = int(float(disk) * ram + 0.5)
    check("vm_memory_high_watermark.relative wins over .absolute",
          node.get("mem_limit") == want_mem,
          "%s, want %s" % (node.get("mem_limit"), want_mem))
    check("disk_free_limit.relative is of the RAM",
          node.get("disk_free_limit") == want_disk,
          "%s, want %s" % (node.get("disk_free_limit"), want_disk))


if __name__ == "__main__":
    if sys.argv[1] == "main":
        main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
             sys.argv[5], sys.argv[6], sys.argv[7])
    else:
        limits(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5],
               sys.argv[6])
