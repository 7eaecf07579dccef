# SPDX-License-Identifier: Apache-2.0
"""A replay of dead letters killed midway (deadletters_crash.sh): 5,000
persistent messages with unique ids dead-lettered into a durable queue
(expired at once in a queue with x-message-ttl 0), replayed to a durable
target at a rate; roostd is killed with SIGKILL at a random moment, a few
rounds, and after each restart every id is exactly once in the
dead-letter queue or the target (read with browse, which changes
nothing). Each kill is made a power cut: the newest segment keeps what
was synced (ROOST_TEST_SYNC_LOG) and a random part of what was written
after it, so that a cut may fall between the records of one move: only
its transaction keeps the move whole. Then roostctl replay_dead_letters is killed while it follows a
replay: the replay goes on in the broker to its end. Finally the target
is consumed: every id once, in order. One PASS/FAIL line per check."""
import argparse
import os
import random
import signal
import subprocess
import sys
import time

import pika

from checks import Api, Roostd, check, done, wait_replay

ap = argparse.ArgumentParser()
ap.add_argument("--roostd", required=True)
ap.add_argument("--roostctl", required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--messages", type=int, default=5000)
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()
N = args.messages
IDS = ["id-%05d" % i for i in range(N)]
random.seed(os.getpid())
rd = Roostd(args.roostd, args.dir,
            sets=["management.tcp.port=0", "paging.window=512"],
            env={"ROOST_TEST_SYNC_DELAY_US": "2000",
                 "ROOST_TEST_SYNC_LOG": os.path.join(args.dir, "synced")})


def start():
    """Start roostd on free ports: (amqp port, http port)."""
    rd.start()
    return rd.port, rd.http


kill9 = rd.kill9


def power_cut():
    """What a power cut could leave of the newest segment: what was
    synced, and a random prefix of what was written after. Returns the
    bytes cut."""
    msgs = os.path.join(args.dir, "data", "msgs")
    seg = max(f for f in os.listdir(msgs) if f.endswith(".seg"))
    synced = 0
    for line in open(os.path.join(args.dir, "synced")):
        name, _, length = line.rpartition(" ")
        if os.path.basename(name) == seg:
            synced = max(synced, int(length))
    path = os.path.join(msgs, seg)
    data = open(path, "rb").read()
    end = len(data.rstrip(b"\0"))
    if end <= synced:
        return 0
    cut = random.randint(synced, end)
    with open(path, "r+b") as f:
        f.seek(cut)
        f.write(b"\0" * (end - cut))
    return end - cut


def ids_in(api, queue):
    """The message ids of 'queue', in order, read with browse."""
    out, offset = [], 0
    while True:
        s, b = api.call("GET", "queues/%%2F/%s/browse?offset=%d&count=1000"
                        "&truncate=0" % (queue, offset))
        if s != 200:
            sys.exit("browse %s: %s %s" % (queue, s, b))
        out += [e["properties"].get("message_id") for e in b]
        if len(b) < 1000:
            return out
        offset += len(b)


def exactly_once(api, name):
    dlq, target = ids_in(api, "dlq"), ids_in(api, "target")
    both = dlq + target
    check(name + ": every id once in the DLQ or the target",
          sorted(both) == IDS and len(set(both)) == N,
          "dlq %d, target %d, distinct %d, missing %s, doubled %s" % (
              len(dlq), len(target), len(set(both)),
              sorted(set(IDS) - set(both))[:5],
              sorted(i for i in set(both) if both.count(i) > 1)[:5]))
    check(name + ": both in order", dlq == sorted(dlq) and
          target == sorted(target) and (not dlq or not target or
                                        target[-1] < dlq[0]),
          (dlq[:3], target[-3:]))
    return len(target)


amqp, http = start()
api = Api(http)
c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp))
ch = c.channel()
ch.queue_declare("dlq", durable=True)
ch.queue_declare("target", durable=True)
ch.queue_declare("src", durable=True, arguments={
    "x-message-ttl": 0, "x-dead-letter-exchange": "",
    "x-dead-letter-routing-key": "dlq"})
ch.confirm_delivery()
for i in IDS:
    ch.basic_publish("", "src", b"body of " + i.encode(),
                     pika.BasicProperties(message_id=i, delivery_mode=2))
end = time.time() + 30
while ch.queue_declare("dlq", passive=True).method.message_count < N and \
        time.time() < end:
    time.sleep(0.05)
check("dead-lettered", ch.queue_declare("dlq", passive=True).method
      .message_count == N)
c.close()
time.sleep(0.5)     # the dead-lettered copies' batches synced
exactly_once(api, "before")
# A clean restart: from now on the newest segment holds only replays.
rd.proc.send_signal(signal.SIGTERM)
check("clean stop before the rounds", rd.proc.wait() == 0)
amqp, http = start()
api = Api(http)

moved = 0
cuts = 0
for rnd in range(args.rounds):
    s, r = api.call("POST", "queues/%2F/dlq/replay",
                    {"rate": 1000, "exchange": "", "routing_key": "target"})
    check("round %d: replay started" % rnd, s == 201, (s, r))
    time.sleep(random.uniform(0.1, 0.7))
    kill9()
    cuts += power_cut() > 0
    amqp, http = start()
    api = Api(http)
    now = exactly_once(api, "round %d after kill -9" % rnd)
    check("round %d: the replay had moved some" % rnd, now > moved,
          (moved, now))
    moved = now

print("power cuts that lost written bytes: %d of %d" % (cuts, args.rounds))

# roostctl follows a replay and is killed: the broker goes on.
# A rate at which what is left takes about two seconds.
rate = str(max(1, (N - moved) // 2))
ctl = subprocess.Popen([args.roostctl, "--port", str(http),
                        "replay_dead_letters", "dlq", "--rate", rate,
                        "--exchange", "", "--routing-key", "target"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
time.sleep(0.6)
ctl.send_signal(signal.SIGKILL)
ctl.wait()
s, lst = api.call("GET", "replays")
running = [x for x in lst if x["state"] == "running"] if s == 200 else []
check("roostctl killed: its replay still running", len(running) == 1,
      (s, lst))
if running:
    r = wait_replay(api, running[0]["id"])
    check("the replay went on to its end", r["state"] == "done" and
          r["moved"] == N - moved and r["skipped"] == 0, r)
exactly_once(api, "after the roostctl round")
check("all moved", ids_in(api, "dlq") == [])

c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp))
ch = c.channel()
got = []
while True:
    m, p, b = ch.basic_get("target", auto_ack=True)
    if m is None:
        break
    got.append(p.message_id)
check("target consumed: every id once, in order", got == IDS,
      (len(got), got[:3]))
c.close()
rd.proc.send_signal(signal.SIGTERM)
check("clean stop", rd.proc.wait() == 0)
done()
