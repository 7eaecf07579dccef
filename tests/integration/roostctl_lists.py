# SPDX-License-Identifier: Apache-2.0
# The AMQP side of roostctl_lists.sh, with pika:
#
#   hold PORT VHOST USER PASSWORD STATUS_FILE
#       declare the listed objects (exchange lx, queues lq1 and lq2, a
#       binding with arguments), publish 3 messages to lq1 and 4 to lq2,
#       consume lq2 on a second channel with prefetch 2 (2 unacked), write
#       its port to STATUS_FILE.port and "ready" to STATUS_FILE, then hold the connection until the broker
#       closes it, and write "closed CODE TEXT".
#   publish PORT VHOST USER PASSWORD QUEUE N
#   count PORT VHOST USER PASSWORD QUEUE
#       print the queue's message count (a passive declare), or "absent"
#   norm [-s]
#       stdin to stdout for comparing outputs: names of connections and
#       channels and Erlang pids become OBJ; the banner lines and the
#       header (none with -s) stay first, the rows are sorted.
import re
import sys
import time


def params(port, vhost, user, password, name=None):
    import pika
    props = {"connection_name": name} if name else None
    return pika.ConnectionParameters(
        "127.0.0.1", int(port), vhost, pika.PlainCredentials(user, password),
        connection_attempts=1, socket_timeout=10, client_properties=props)


def hold(port, vhost, user, password, status):
    import pika
    c = pika.BlockingConnection(params(port, vhost, user, password,
                                       "ctl-lists"))
    ch = c.channel()
    ch.exchange_declare("lx", "topic", durable=True,
                        arguments={"alternate-exchange": "amq.fanout"})
    ch.queue_declare("lq1", durable=True,
                     arguments={"x-max-length": 10,
                                "x-message-ttl": 600000})
    ch.queue_declare("lq2", auto_delete=True)
    ch.queue_bind("lq1", "lx", "a.#", arguments={"x-foo": "bar"})
    for i in range(3):
        ch.basic_publish("", "lq1", b"m%d" % i)
    for i in range(4):
        ch.basic_publish("", "lq2", b"m%d" % i)
    ch2 = c.channel()
    ch2.basic_qos(prefetch_count=2)
    ch2.basic_consume("lq2", lambda *a: None, consumer_tag="ltag",
                      arguments={"x-priority": 5})
    c.process_data_events(0.2)
    # The peer_port the broker sees (pika keeps its socket private).
    with open(status + ".port", "w") as f:
        f.write("%d\n" % c._impl._transport._sock.getsockname()[1])
    with open(status, "w") as f:
        f.write("ready\n")
    end = time.time() + 120
    try:
        while time.time() < end:
            c.process_data_events(0.1)
    except pika.exceptions.ConnectionClosedByBroker as e:
        with open(status, "w") as f:
            f.write("closed %d %s\n" % (e.reply_code, e.reply_text))
        return
    with open(status, "w") as f:
        f.write("timed out\n")


def publish(port, vhost, user, password, queue, n):
    import pika
    c = pika.BlockingConnection(params(port, vhost, user, password))
    ch = c.channel()
    ch.confirm_delivery()
    for i in range(int(n)):
        ch.basic_publish("", queue, b"p%d" % i)
    c.close()


def count(port, vhost, user, password, queue):
    import pika
    c = pika.BlockingConnection(params(port, vhost, user, password))
    try:
        ok = c.channel().queue_declare(queue, passive=True)
        print(ok.method.message_count)
    except pika.exceptions.ChannelClosedByBroker as e:
        print("absent" if e.reply_code == 404 else "error %d" % e.reply_code)
    c.close()


OBJ = [re.compile(r"<[^<>\s]*>"),
       re.compile(r"\d+\.\d+\.\d+\.\d+:\d+ -> \d+\.\d+\.\d+\.\d+:\d+"
                  r"( \(\d+\))?")]


def norm(silent):
    lines = [ln.rstrip("\n") for ln in sys.stdin]
    for r in OBJ:
        lines = [r.sub("OBJ", ln) for ln in lines]
    head = 0
    while head < len(lines) and lines[head].startswith(("Timeout: ",
                                                        "Listing ")):
        head += 1
    if not silent and head < len(lines):
        head += 1
    for ln in lines[:head] + sorted(lines[head:]):
        print(ln)


mode, args = sys.argv[1], sys.argv[2:]
if mode == "hold":
    hold(*args)
elif mode == "publish":
    publish(*args)
elif mode == "count":
    count(*args)
elif mode == "norm":
    norm(args[:1] == ["-s"])
else:
    sys.exit("unknown mode " + mode)
