#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Celery job queue against a broker on 127.0.0.1:PORT (issue 5).

Celery is the most common reason a Python shop runs RabbitMQ, and it leans
on broker behaviour that simple clients never touch: basic.qos changed
while a consumer runs, acks_late with redelivery after a worker dies,
requeue position, the redelivered flag, rpc:// replies on the default
exchange, queues with x-expires/x-message-ttl (pidbox, replies). Every
worker here is a real `celery worker` subprocess (prefork pool,
--concurrency 1) with the app in celery_tasks.py; each execution of a task
is written to a file by the task itself, so executions are counted without
trusting the broker, and results also come back through rpc://.

1. End to end: 50 tasks with arguments, every result right, each task
   executed exactly once, never flagged redelivered.
2. Retries: a task fails and calls self.retry twice (countdown 0 and a small
   countdown, which is an ETA message) and succeeds the third time: exactly
   3 attempts, retries 0, 1, 2, the right result.
3. acks_late, worker SIGKILLed mid-task: the task runs again in a new
   worker with delivery_info['redelivered'] True, first (requeued at the
   head of the queue), and completes; the tasks queued behind it run
   exactly once each, not flagged. The only duplicate is the flagged one.
4. Prefetch: worker_prefetch_multiplier 1 with --concurrency 1 takes exactly
   one acks_late task (passive queue.declare shows K-1 ready while it
   runs); multiplier 4 takes exactly 4 (K-4 ready). Celery asks for
   prefetch = multiplier x concurrency.
5. ETA and basic.qos after consuming: multiplier 1, a task with a 6 s
   countdown then an ordinary task; the ordinary one completes long before
   the ETA. Celery holds the ETA message unacked and raises the prefetch
   with basic.qos on the running consumer's channel; that only helps if the
   new limit applies to the running consumer, which is RabbitMQ's
   global=True meaning, and kombu sends global=True when connection.start
   says product "RabbitMQ" version >= 3.3. The announced product, version
   and roost_version are printed.
6. A job queue (Roost only: x-delivery-limit on a classic queue and
   x-requeue-delay are its own): a priority queue with a delivery limit of
   2, a dead-letter queue and a requeue delay of 400 ms, acks_late tasks
   that reject with requeue when they fail. Twelve tasks with priorities
   sent before the worker starts run highest priority first, in sending
   order within one; a poison task that always fails runs three times,
   each return waiting out its growing delay, and is dead-lettered with
   x-death reason delivery_limit; a task that fails twice waits 200-400
   ms, then 400-800 ms, and its third attempt's result comes back.
Queues and exchanges are named per run and deleted at the end; workers are
killed by process group whatever happens (and kill themselves if this
script disappears).
Usage: celery_test.py PORT
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from interop_plan import port_arg, prefix  # noqa: E402

PY = "/usr/bin/python3"
START = time.monotonic()
DEADLINE = START + 200  # every wait is capped so the script ends by then
failures = []
workers = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    failures.append(msg)


def ok(msg):
    print("ok: " + msg, flush=True)


def note(msg):
    print("note: " + msg, flush=True)


def left(limit):
    return max(0.1, min(limit, DEADLINE - time.monotonic()))


def poll(cond, limit, step=0.05):
    deadline = time.monotonic() + left(limit)
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(step)


def on_sigterm(signum, frame):
    raise KeyboardInterrupt("SIGTERM (timed out?)")


class Worker:
    """A `celery worker` subprocess in its own session."""

    def __init__(self, name, queue, multiplier=None):
        self.name = "%s.%d" % (name, os.getpid())
        self.queue = queue
        self.log = os.path.join(RECORDS, "worker.%s.log" % name)
        cmd = [PY, "-m", "celery", "-A", "celery_tasks", "worker",
               "-Q", queue, "--concurrency", "1", "--without-gossip",
               "--without-mingle", "--without-heartbeat", "-l", "info",
               "-n", self.name + "@%h"]
        if multiplier is not None:
            cmd += ["--prefetch-multiplier", str(multiplier)]
        env = dict(os.environ, PYTHONPATH=HERE, CELERY_TEST_PORT=str(PORT),
                   CELERY_TEST_RECORDS=RECORDS,
                   CELERY_TEST_PARENT=str(os.getpid()))
        env.pop("PYTHONHOME", None)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=out,
                                         stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.pgid = self.proc.pid
        self.stop_sent = self.stopped = None
        workers.append(self)

    def text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_ready(self, limit=60):
        t0 = time.monotonic()
        ready = poll(lambda: " ready." in self.text()
                     or self.proc.poll() is not None, limit, 0.1)
        if not ready or self.proc.poll() is not None:
            self.dump("did not become ready (exit %s)" % self.proc.poll())
            raise RuntimeError("worker %s did not start" % self.name)
        return time.monotonic() - t0

    def dump(self, why):
        fail("worker %s %s; its log ends:" % (self.name, why))
        for line in self.text().splitlines()[-25:]:
            print("    | " + line, flush=True)

    def kill(self):
        """SIGKILL the whole process group (main process and pool child)."""
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def stop(self):
        """Warm shutdown (SIGTERM), as an init system would do it. Celery
        takes seconds to stop its pool, so finish_stop() waits for it
        later, while the next part runs.

        It waits first (up to 10 s) until the pool has logged the end of
        every task the worker received: a result comes back before the
        pool child is done with its task, and a SIGTERM in that window
        once left Celery 5.2's warm shutdown hanging (the broker saw
        nothing; the main process waited on its pool). Shutting down in
        the middle of a task is not what these parts test."""
        def idle():
            text = self.text()
            got = set(re.findall(r"MainProcess\] Task \S+\[([0-9a-f-]+)\] "
                                 r"received", text))
            ended = set(re.findall(r"ForkPoolWorker-\d+\] Task \S+"
                                   r"\[([0-9a-f-]+)\] ", text))
            return got <= ended
        poll(idle, 10, 0.05)
        self.stop_sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)

        def wait():
            self.proc.wait()
            self.stopped = time.monotonic()
        self.waiter = threading.Thread(target=wait, daemon=True)
        self.waiter.start()

    def finish_stop(self, limit=30):
        self.waiter.join(left(self.stop_sent + limit - time.monotonic()))
        if self.stopped is None:
            self.dump("still running %ds after SIGTERM" % limit)
            self.kill()
            return
        rc = self.proc.returncode
        self.kill()  # the pool child, should it have outlived its parent
        if rc != 0:
            self.dump("exited with status %s after SIGTERM" % rc)
        else:
            ok("worker %s: warm shutdown (SIGTERM), exit status 0 after "
               "%.1fs" % (self.name, self.stopped - self.stop_sent))
        self.check_log()

    def check_log(self):
        # Celery 5.2 logs a task's Reject as an error, with its traceback:
        # expected of the jobs part's failing tasks, and skipped here.
        entries = re.split(r"\n(?=\[\d{4}-)", self.text())
        text = "\n".join(e for e in entries
                         if "\ncelery.exceptions.Reject: (" not in e)
        bad = [line for line in text.splitlines()
               if ": ERROR/" in line or ": CRITICAL/" in line
               or "Traceback" in line]
        if bad:
            fail("worker %s logged errors: %s" % (self.name, bad[:5]))
        for line in self.text().splitlines():
            if ": WARNING/" in line and "superuser privileges" not in line:
                note("worker %s: %s" % (self.name, line.strip()[:200]))


def executions():
    try:
        with open(os.path.join(RECORDS, "executions.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def by_key(keys, event="start"):
    recs = {k: [] for k in keys}
    for r in executions():
        if r["event"] == event and r["key"] in recs:
            recs[r["key"]].append(r)
    return recs


def get_results(pairs, limit):
    """pairs: [(AsyncResult, expected)] -> list of problems."""
    deadline = time.monotonic() + left(limit)
    problems = []
    for r, want in pairs:
        try:
            got = r.get(timeout=max(0.1, deadline - time.monotonic()),
                        propagate=True, interval=0.05)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            problems.append("%s: %s: %s" % (r.id, type(e).__name__, e))
            continue
        if got != want:
            problems.append("%s: result %r, expected %r" % (r.id, got, want))
    return problems


def check_once(what, keys, allow_redelivered=()):
    """Every key started exactly once and finished exactly once, and only
    the allowed ones were flagged redelivered."""
    starts, dones = by_key(keys), by_key(keys, "done")
    bad = []
    for k in keys:
        if len(starts[k]) != 1 or len(dones[k]) != 1:
            bad.append("%s started %d times, finished %d times"
                       % (k, len(starts[k]), len(dones[k])))
        elif starts[k][0]["redelivered"] and k not in allow_redelivered:
            bad.append("%s flagged redelivered on its only delivery" % k)
    if bad:
        fail("%s: %s" % (what, "; ".join(bad[:5])))
        return False
    return True


class Probe:
    """A kombu connection of the test's own for passive queue.declare."""

    def __init__(self, url):
        from kombu import Connection
        self.conn = Connection(url, connect_timeout=10)
        self.conn.connect()
        self.ch = self.conn.channel()

    def counts(self, queue):
        """(messages ready, consumers) of queue."""
        ok_ = self.ch.queue_declare(queue=queue, passive=True)
        return ok_.message_count, ok_.consumer_count

    def delete(self, queue=None, exchange=None):
        ch = self.conn.channel()
        try:
            if queue:
                ch.queue_delete(queue=queue)
            if exchange:
                ch.exchange_delete(exchange=exchange)
        except Exception as e:  # noqa: BLE001
            note("cleanup of %s: %s" % (queue or exchange, e))
        finally:
            try:
                ch.close()
            except Exception:  # noqa: BLE001
                pass


def expect_ready(probe, queue, want, what, hold=1.0, limit=10):
    """The queue reaches `want` ready messages and stays there for `hold`
    seconds (polled); returns True if so."""
    seen = []

    def at_want():
        n, _ = probe.counts(queue)
        seen.append(n)
        return n == want
    if not poll(at_want, limit, 0.05):
        fail("%s: %d messages ready, expected %d (seen %s)"
             % (what, seen[-1], want, sorted(set(seen))))
        return False
    t_end = time.monotonic() + hold
    while time.monotonic() < t_end:
        n, _ = probe.counts(queue)
        if n != want:
            fail("%s: ready count went from %d to %d" % (what, want, n))
            return False
        time.sleep(0.1)
    return True


# --- the five parts --------------------------------------------------------

def part_end_to_end(probe, q):
    w = Worker("e2e", q)
    ok("worker e2e ready in %.1fs" % w.wait_ready())
    pairs, keys = [], []
    for i in range(50):
        key = "e2e-%d" % i
        keys.append(key)
        r = tasks.compute.apply_async(args=(key, i, i + 3),
                                      kwargs={"scale": 7}, queue=q)
        pairs.append((r, i * (i + 3) + 7))
    problems = get_results(pairs, 60)
    if problems:
        fail("end to end: %d of 50 results wrong: %s"
             % (len(problems), problems[:3]))
    else:
        ok("end to end: 50 tasks, 50 right results through rpc://")
    if check_once("end to end", keys):
        ok("end to end: each of the 50 tasks executed exactly once, "
           "none flagged redelivered")
    return w


def part_retries(probe, q, w):
    cases = [("retry-a", 21, (0, 0)), ("retry-b", 50, (0, 0.4))]
    pairs = []
    for key, value, countdowns in cases:
        r = tasks.flaky.apply_async(args=(key, value),
                                    kwargs={"countdowns": countdowns},
                                    queue=q)
        pairs.append((r, value * 2))
    problems = get_results(pairs, 40)
    if problems:
        fail("retries: %s" % problems)
    else:
        ok("retries: both tasks returned the right result")
    starts = by_key([c[0] for c in cases])
    dones = by_key([c[0] for c in cases], "done")
    for key, value, countdowns in cases:
        attempts = [r["retries"] for r in starts[key]]
        flagged = [r["redelivered"] for r in starts[key] if r["redelivered"]]
        if attempts != [0, 1, 2] or len(dones[key]) != 1 or flagged:
            fail("retries %s (countdowns %s): attempts with retries=%s, "
                 "finished %d times, redelivered flags %s"
                 % (key, countdowns, attempts, len(dones[key]), flagged))
        else:
            ok("retries %s (countdowns %s): exactly 3 attempts (retries 0, "
               "1, 2), finished once" % (key, countdowns))
    n, _ = probe.counts(q)
    if n != 0:
        fail("end to end/retries: %d messages left in %s" % (n, q))
    w.stop()


def part_acks_late_kill(probe, q):
    gate = os.path.join(RECORDS, "gate.late")
    victim = "late-victim"
    others = ["late-%d" % i for i in range(5)]
    w1 = Worker("late1", q, multiplier=1)
    ok("worker late1 ready in %.1fs" % w1.wait_ready())
    pairs = [(tasks.gated.apply_async(args=(victim, gate, 5), queue=q), 1005)]
    for i, key in enumerate(others):
        pairs.append((tasks.compute.apply_async(args=(key, i, 2), queue=q),
                      i * 2 + 1))
    started = poll(lambda: glob.glob(os.path.join(
        RECORDS, "started.%s.*" % victim)), 30)
    if not started:
        w1.dump("never started the acks_late task")
        return
    # Multiplier 1: the worker holds just the running task.
    expect_ready(probe, q, 5, "acks_late: while the task runs", hold=0.3)
    w1.kill()
    ok("acks_late: task started; worker late1 SIGKILLed (process group)")
    # The broker sees the connection drop and requeues the unacked task.
    if not expect_ready(probe, q, 6, "acks_late: after the kill", hold=0.3,
                        limit=15):
        return
    ok("acks_late: the unacked task is back in the queue (6 ready)")
    open(gate, "w").close()
    w2 = Worker("late2", q, multiplier=1)
    ok("worker late2 ready in %.1fs" % w2.wait_ready())
    problems = get_results(pairs, 40)
    if problems:
        fail("acks_late: %s" % problems[:3])
    else:
        ok("acks_late: all 6 results right")
    starts = by_key([victim] + others)
    dones = by_key([victim] + others, "done")
    vs = starts[victim]
    flags = [bool(r["redelivered"]) for r in vs]
    if flags != [False, True] or len(dones[victim]) != 1 \
            or not dones[victim][0]["redelivered"] \
            or vs[0]["pid"] == vs[1]["pid"]:
        fail("acks_late: the killed task started %d times with redelivered "
             "%s, finished %d times" % (len(vs), [r["redelivered"] for r in vs],
                                        len(dones[victim])))
    else:
        ok("acks_late: killed task ran again in the new worker with "
           "redelivered=True and completed once")
    if check_once("acks_late (tasks behind it)", others):
        ok("acks_late: the 5 tasks queued behind it ran exactly once each, "
           "not flagged redelivered")
        if len(vs) == 2:
            later = [k for k in others if starts[k][0]["t"] < vs[1]["t"]]
            if later:
                fail("acks_late: %s ran before the requeued task: requeue "
                     "did not put it back at the head of the queue" % later)
            else:
                ok("acks_late: the requeued task was delivered first "
                   "(back at the head of the queue)")
    n, _ = probe.counts(q)
    if n != 0:
        fail("acks_late: %d messages left in %s" % (n, q))
    w2.stop()
    w1.check_log()


def part_prefetch(probe, q, multiplier, k=6):
    gate = os.path.join(RECORDS, "gate.pf%d" % multiplier)
    keys = ["pf%d-%d" % (multiplier, i) for i in range(k)]
    w = Worker("pf%d" % multiplier, q, multiplier=multiplier)
    ok("worker pf%d ready in %.1fs" % (multiplier, w.wait_ready()))
    pairs = [(tasks.gated.apply_async(args=(key, gate, i), queue=q), i + 1000)
             for i, key in enumerate(keys)]
    what = "prefetch multiplier %d" % multiplier
    if not poll(lambda: glob.glob(os.path.join(
            RECORDS, "started.%s.*" % keys[0])), 30):
        w.dump("never started the first task")
    elif expect_ready(probe, q, k - multiplier, what, hold=1.5):
        n, consumers = probe.counts(q)
        running = glob.glob(os.path.join(RECORDS, "started.pf%d-*"
                                         % multiplier))
        if consumers != 1 or len(running) != 1:
            fail("%s: %d consumers, %d tasks started" % (what, consumers,
                                                           len(running)))
        else:
            ok("%s, concurrency 1: %d of %d messages ready while the first "
               "runs (the worker holds exactly %d)"
               % (what, k - multiplier, k, multiplier))
    open(gate, "w").close()
    problems = get_results(pairs, 40)
    if problems:
        fail("%s: %s" % (what, problems[:3]))
    elif check_once(what, keys):
        order = sorted(keys, key=lambda key: by_key([key])[key][0]["t"])
        if order != keys:
            fail("%s: executed in order %s" % (what, order))
        else:
            ok("%s: all %d tasks ran exactly once, in order, right results"
               % (what, k))
    n, _ = probe.counts(q)
    if n != 0:
        fail("%s: %d messages left in %s" % (what, n, q))
    w.stop()


def part_eta(probe, q):
    countdown = 6.0
    w = Worker("eta", q, multiplier=1)
    ok("worker eta ready in %.1fs" % w.wait_ready())
    t0 = time.time()
    r_eta = tasks.compute.apply_async(args=("eta-later", 6, 7), queue=q,
                                      countdown=countdown)
    eta = t0 + countdown
    r_now = tasks.compute.apply_async(args=("eta-now", 3, 4), queue=q)
    problems = get_results([(r_now, 13)], countdown + 20)
    done = by_key(["eta-now"], "done")["eta-now"]
    if problems or not done:
        fail("eta: the ordinary task: %s" % (problems or "no record"))
    elif done[0]["t"] > eta - 1.0:
        fail("eta: the ordinary task completed %.1fs after sending, the ETA "
             "task is due at %.1fs: it waited behind the ETA task (the "
             "prefetch increase by basic.qos did not apply to the running "
             "consumer)" % (done[0]["t"] - t0, countdown))
    else:
        ok("eta: ordinary task completed %.2fs after sending, before the "
           "ETA task due at %.0fs" % (done[0]["t"] - t0, countdown))
    problems = get_results([(r_eta, 43)], countdown + 30)
    start = by_key(["eta-later"])["eta-later"]
    if problems or not start:
        fail("eta: the ETA task: %s" % (problems or "no record"))
    elif start[0]["t"] < eta - 0.5:
        fail("eta: the ETA task ran %.1fs after sending, before its ETA "
             "(%.0fs)" % (start[0]["t"] - t0, countdown))
    else:
        ok("eta: ETA task ran %.2fs after sending (ETA %.0fs), right result"
           % (start[0]["t"] - t0, countdown))
    if check_once("eta", ["eta-later", "eta-now"]):
        ok("eta: both tasks executed exactly once, none flagged redelivered")
    n, _ = probe.counts(q)
    if n != 0:
        fail("eta: %d messages left in %s" % (n, q))
    w.stop()


def gaps(recs):
    """The seconds between successive starts."""
    ts = [r["t"] for r in recs]
    return [round(b - a, 3) for a, b in zip(ts, ts[1:])]


def part_jobs(probe, q):
    delay = tasks.JOBS_DELAY / 1000.0
    dead = q + ".dead"
    probe.ch.queue_declare(queue=dead, durable=True)
    # Sent before any worker consumes: it declares the queue.
    prios = [1, 5, 0, 9, 5, 1, None, 9, 3, 0, 5, 7]
    keys, pairs = [], []
    for i, p in enumerate(prios):
        key = "prio-%02d-%s" % (i, p)
        keys.append(key)
        pairs.append((tasks.job.apply_async(args=(key,), queue=q,
                                            priority=p), key))
    expect_ready(probe, q, len(prios), "jobs: sent", hold=0.2)
    w = Worker("jobs", q, multiplier=1)
    ok("worker jobs ready in %.1fs" % w.wait_ready())
    problems = get_results(pairs, 60)
    if problems:
        fail("jobs: priorities: %s" % problems[:3])
    order = [r["key"] for r in executions()
             if r["event"] == "start" and r["key"] in keys]
    want = [k for _, _, k in sorted(
        (-(p or 0), i, keys[i]) for i, p in enumerate(prios))]
    if order == want:
        ok("jobs: 12 tasks sent with priorities ran highest first, in "
           "sending order within one")
    else:
        fail("jobs: priority order %s, expected %s" % (order, want))
    check_once("jobs: priorities", keys)

    poison = tasks.job.apply_async(args=("poison",), kwargs={"fail_times": -1},
                                   queue=q)
    retried = tasks.job.apply_async(args=("retried",),
                                    kwargs={"fail_times": 2}, queue=q)
    problems = get_results([(retried, "retried")], 30)
    if problems:
        fail("jobs: the retried task: %s" % problems)

    # The poison task's third attempt may still run: its dead letter
    # comes after it.
    def dead_letter():
        return probe.ch.basic_get(queue=dead, no_ack=True)
    m = poll(dead_letter, 15)
    death = ((m.headers or {}).get("x-death") or [{}])[0] if m else {}
    if m is None:
        fail("jobs: the poison task never reached %s" % dead)
    elif death.get("reason") != "delivery_limit" or death.get("queue") != q:
        fail("jobs: the poison task's x-death: %r" % death)
    else:
        ok("jobs: the poison task, after 3 attempts, dead-lettered with "
           "reason delivery_limit")
    recs = by_key(["poison", "retried"])
    for key in ("poison", "retried"):
        g = gaps(recs[key])
        # The first return waits 200-400 ms, the second 400-800 ms.
        low = [delay / 2 - 0.02, delay - 0.02]
        if len(recs[key]) != 3:
            fail("jobs: %s ran %d times, expected 3" % (key, len(recs[key])))
        elif g[0] < low[0] or g[1] < low[1]:
            fail("jobs: %s: %s s between attempts, expected at least %s"
                 % (key, g, low))
        else:
            ok("jobs: %s ran 3 times, %s s apart (back-off from %.1f s, "
               "doubling, with jitter)" % (key, g, delay))
    if by_key(["retried"], "done")["retried"]:
        ok("jobs: the retried task's third attempt returned its result")
    time.sleep(delay * 4)
    if len(by_key(["poison"])["poison"]) != 3:
        fail("jobs: poison ran again after its dead-lettering")
    expect_ready(probe, q, 0, "jobs: at the end", hold=0.2)
    w.stop()
    probe.delete(queue=dead)


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    pfx = PFX
    url = "amqp://guest:guest@127.0.0.1:%d//" % PORT
    probe = Probe(url)
    props = probe.conn.connection.server_properties
    ok("server announced product %r version %r roost_version %r"
       % (props.get("product"), props.get("version"),
          props.get("roost_version")))
    qms = probe.conn.qos_semantics_matches_spec
    if qms:
        fail("kombu sees qos_semantics_matches_spec=True: Celery would send "
             "basic.qos with global=False (product %r, version %r)"
             % (props.get("product"), props.get("version")))
    else:
        ok("kombu picks RabbitMQ's qos semantics: Celery sends basic.qos "
           "with global=True")
    queues = {part: "%s.%s" % (pfx, part)
              for part in ("e2e", "late", "pf1", "pf4", "eta")}
    roost = bool(props.get("roost_version"))
    if roost:
        queues["jobs"] = JOBS
    try:
        w = part_end_to_end(probe, queues["e2e"])
        part_retries(probe, queues["e2e"], w)
        part_acks_late_kill(probe, queues["late"])
        part_prefetch(probe, queues["pf1"], 1)
        part_prefetch(probe, queues["pf4"], 4)
        part_eta(probe, queues["eta"])
        if roost:
            part_jobs(probe, queues["jobs"])
        else:
            note("jobs: part 6 skipped: x-delivery-limit on a classic queue "
                 "and x-requeue-delay are Roost's own")
        for w in workers:
            if w.stop_sent is not None:
                w.finish_stop()
    finally:
        for w in workers:
            w.kill()
        try:
            reply = tasks.app.backend.oid
            tasks.app.close()
        except Exception:  # noqa: BLE001
            reply = None
        for q in queues.values():
            probe.delete(queue=q, exchange=q)
        if reply:
            probe.delete(queue=reply)
        probe.conn.release()
    return 0


if __name__ == "__main__":
    PORT = port_arg()
    RECORDS = tempfile.mkdtemp(prefix="celery-test.")
    PFX = prefix("celery")
    JOBS = PFX + ".jobs"
    os.environ["CELERY_TEST_JOBS"] = JOBS
    os.environ["CELERY_TEST_PORT"] = str(PORT)
    os.environ["CELERY_TEST_RECORDS"] = RECORDS
    import celery_tasks as tasks  # noqa: E402 - reads the two above
    rc = 1
    try:
        main()
        rc = 0
    except (Exception, KeyboardInterrupt) as e:
        print("FAIL: %s: %s" % (type(e).__name__, str(e) or repr(e)),
              flush=True)
    finally:
        for w in workers:
            w.kill()
        left_over = [w.name for w in workers if w.proc.poll() is None]
        if left_over:
            print("FAIL: workers still running: %s" % left_over, flush=True)
            rc = 1
    print("celery: %.1fs" % (time.monotonic() - START))
    if failures or rc:
        print("celery: %d problem(s); records and worker logs in %s"
              % (max(len(failures), 1), RECORDS))
        sys.exit(1)
    if os.environ.get("CELERY_TEST_KEEP"):
        print("celery: records and worker logs kept in %s" % RECORDS)
    else:
        import shutil
        shutil.rmtree(RECORDS, ignore_errors=True)
    print("celery: all checks passed")
    sys.exit(0)
