#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Celery tasks survive kill -9 of roostd (the durable store, end to end).

Run by celery_durable.sh with Debian's python3 (python3-celery,
python3-kombu). Starts its own roostd on a free port (--port 0, then the
same port again on every restart) with a fresh data directory, and a Celery
app configured for durability: broker_transport_options confirm_publish
(py-amqp puts the channel in confirm mode and every publish waits for
basic.ack, raising on a nack or a lost connection), task_acks_late,
task_default_delivery_mode 'persistent', a unique default queue (Celery
declares it durable), and task_publish_retry off, so that a failed send
raises instead of being resent. Every worker is a real `celery worker`
subprocess (prefork pool, --concurrency 1, prefetch multiplier 4) with the
app in this very file (-A celery_durable); each task execution appends a
JSON line (start, done) with the worker pid, delivery_info['redelivered']
and the message's delivery_mode to a file, so executions are counted
without trusting the broker.

1. 200 tasks are sent, each confirmed, with no worker running; roostd is
   killed with SIGKILL and restarted on the same data directory and port:
   the queue holds the 200 messages, a worker then executes each exactly
   once, every one with delivery_mode 2, and every one flagged redelivered:
   after an unclean stop Roost marks every recovered message so, as a
   delivery in the last moments may not have been recorded
   (docs/compatibility.md, "Durability").
2. 100 more tasks that sleep 0.1 s; a worker starts on them and roostd is
   killed with SIGKILL once 30 have completed, while the worker holds
   unacked (acks_late, prefetched) tasks, and restarted at once. The same
   worker reconnects (kombu) and completes the rest; should it not within
   a bound, it is killed and a new worker started (the output says which
   happened). Every task is executed at least once; a task executed more
   than once first started before the kill and every later execution is
   flagged redelivered; every task started after the restart is flagged
   redelivered (an unclean stop), none started before it is.
3. roostd is stopped with SIGTERM (exit status 0), started again: the queue
   is there, empty (no acked task comes back after a clean stop), and
   SIGTERM again exits 0. A non-zero exit (an ASan build reports leaks that
   way) prints roostd's standard error.

kill -9 leaves the page cache, so part 1 shows that a confirm comes after
the write, not that it comes after fdatasync (check_confirm_tx covers
that). Every wait is bounded (the script ends within about 160 s); roostd
and the workers run in their own process groups, killed whatever happens,
and their group ids are listed in TMP/pgids for celery_durable.sh to kill
should this script itself be killed. Prints "celery_durable: N passed, M
failed"; exits 77 when celery is not importable.
Usage: celery_durable.py ROOSTD TMPDIR
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
PHASE1_TASKS = 200
PHASE2_TASKS = 100
PHASE2_SLEEP = 0.1
PHASE2_KILL_AFTER = 30
PREFETCH = 4  # Celery's default worker_prefetch_multiplier x concurrency 1


# --- the Celery app: this module is also the workers' -A celery_durable ----

def _make_app():
    from celery import Celery

    port = int(os.environ.get("CELERY_DURABLE_PORT", "5672"))
    records = os.environ.get("CELERY_DURABLE_RECORDS", "/nonexistent")
    queue = os.environ.get("CELERY_DURABLE_QUEUE", "celery-durable-unused")
    app = Celery("celery_durable",
                 broker="amqp://guest:guest@127.0.0.1:%d//" % port)
    app.conf.update(
        broker_transport_options={"confirm_publish": True},
        broker_connection_timeout=10,
        task_acks_late=True,
        task_default_queue=queue,
        task_default_delivery_mode="persistent",
        task_publish_retry=False,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=True,
        worker_send_task_events=False,
    )

    def record(event, task, key):
        req = task.request
        di = req.delivery_info or {}
        props = getattr(req, "properties", None) or {}
        line = dict(event=event, key=key, id=req.id, pid=os.getpid(),
                    t=time.time(), redelivered=di.get("redelivered"),
                    delivery_mode=props.get("delivery_mode"),
                    routing_key=di.get("routing_key"))
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        # One O_APPEND write per line: lines of several processes never mix.
        fd = os.open(os.path.join(records, "executions.jsonl"),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    @app.task(bind=True, name="celery_durable.work")
    def work(self, key, sleep=0.0):
        record("start", self, key)
        if sleep:
            time.sleep(sleep)
        record("done", self, key)
        return key

    return app, work


def _orphan_guard(parent):
    """In a worker started by this script: should the script go away
    without stopping us, kill our whole process group."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="orphan-guard", daemon=True).start()


if __name__ != "__main__":
    app, work = _make_app()
    if os.environ.get("CELERY_DURABLE_PARENT", "").isdigit():
        _parent = int(os.environ.pop("CELERY_DURABLE_PARENT"))
        if os.getppid() == _parent:
            _orphan_guard(_parent)


# --- the test ----------------------------------------------------------------

START = time.monotonic()
DEADLINE = START + 160  # every wait is capped so that the script ends by then
passed = 0
failures = []
procs = []  # every Popen started (roostd instances, workers)


def ok(msg):
    global passed
    passed += 1
    print("PASS " + msg, flush=True)


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg, flush=True)


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


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tail(path, n=20, prefix="    | "):
    for line in read(path).splitlines()[-n:]:
        print(prefix + line, flush=True)


def spawn(cmd, out, **kw):
    """Popen in a new session (its own process group), its group id
    written to TMP/pgids for the shell wrapper's last-resort cleanup."""
    with open(out, "wb") as f:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT,
                             start_new_session=True, **kw)
    procs.append(p)
    with open(os.path.join(TMP, "pgids"), "a") as f:
        f.write("%d\n" % p.pid)
    return p


def killpg(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    # What the group leader left behind (a pool child) dies too.
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Roostd:
    """roostd on one data directory; restarted on the same port."""

    def __init__(self, binary):
        self.binary = binary
        self.data = os.path.join(TMP, "data")
        self.port = 0
        self.n = 0
        self.proc = None

    def start(self, limit=20):
        self.n += 1
        self.log = os.path.join(TMP, "roostd.%d.log" % self.n)
        self.err = os.path.join(TMP, "roostd.%d.stderr" % self.n)
        cmd = [self.binary, "--port", str(self.port), "--data-dir",
               self.data, "--log-file", self.log]
        t0 = time.monotonic()
        self.proc = spawn(cmd, self.err)
        pat = re.compile(r"ready for connections on port (\d+)")
        m = poll(lambda: pat.search(read(self.log))
                 or self.proc.poll() is not None, limit)
        if not isinstance(m, re.Match):
            print("roostd did not start (exit %s); stderr and log:"
                  % self.proc.poll(), flush=True)
            tail(self.err)
            tail(self.log)
            raise RuntimeError("roostd start %d failed" % self.n)
        if self.port == 0:
            self.port = int(m.group(1))
        elif int(m.group(1)) != self.port:
            raise RuntimeError("roostd listens on %s, not %d"
                               % (m.group(1), self.port))
        return time.monotonic() - t0

    def recovered(self):
        m = re.search(r"store: recovered .*", read(self.log))
        return m.group(0) if m else "(no 'store: recovered' line)"

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        killpg(self.proc)

    def term(self, what, limit=30):
        """SIGTERM; the exit status must be 0."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=left(limit))
        except subprocess.TimeoutExpired:
            rc = None
        killpg(self.proc)
        if rc == 0:
            ok("%s: roostd exited 0 on SIGTERM (%.1fs)"
               % (what, time.monotonic() - t0))
        else:
            fail("%s: roostd exit status %s after SIGTERM (%s); its stderr:"
                 % (what, rc, "still running" if rc is None else "exited"))
            tail(self.err, 60)
        return rc == 0


class Worker:
    """A `celery worker` subprocess (prefork, --concurrency 1)."""

    def __init__(self, name):
        self.name = "%s.%d" % (name, os.getpid())
        self.log = os.path.join(TMP, "worker.%s.log" % name)
        cmd = [PY, "-m", "celery", "-A", "celery_durable", "worker",
               "-Q", QUEUE, "--concurrency", "1", "--without-gossip",
               "--without-mingle", "--without-heartbeat", "-l", "info",
               "-n", self.name + "@%h"]
        env = dict(os.environ, PYTHONPATH=HERE,
                   CELERY_DURABLE_PARENT=str(os.getpid()))
        env.pop("PYTHONHOME", None)
        self.proc = spawn(cmd, self.log, cwd=TMP, env=env)

    def text(self):
        return read(self.log)

    def connects(self):
        return self.text().count("Connected to amqp://")

    def wait_ready(self, limit=30):
        t0 = time.monotonic()
        poll(lambda: " ready." in self.text()
             or self.proc.poll() is not None, limit, 0.1)
        if " ready." not in self.text() or self.proc.poll() is not None:
            self.dump("did not become ready (exit %s)" % self.proc.poll())
            raise RuntimeError("worker %s did not start" % self.name)
        return time.monotonic() - t0

    def dump(self, why):
        fail("worker %s %s; its log ends:" % (self.name, why))
        tail(self.log, 25)

    def problems(self):
        return [line.strip()[:200] for line in self.text().splitlines()
                if ": ERROR/" in line or ": CRITICAL/" in line
                or "Traceback" in line]

    def stop(self, limit=45):
        """Warm shutdown (SIGTERM): exit status 0."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=left(limit))
        except subprocess.TimeoutExpired:
            rc = None
        killpg(self.proc)
        if rc != 0:
            self.dump("exit status %s after SIGTERM" % rc)
        else:
            ok("worker %s: warm shutdown, exit status 0 (%.1fs)"
               % (self.name, time.monotonic() - t0))

    def kill(self):
        killpg(self.proc)


def executions():
    try:
        with open(os.path.join(TMP, "executions.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def by_key(keys, event):
    recs = {k: [] for k in keys}
    for r in executions():
        if r["event"] == event and r["key"] in recs:
            recs[r["key"]].append(r)
    return recs


def all_done(keys):
    d = by_key(keys, "done")
    return all(d[k] for k in keys)


def n_done(keys):
    d = by_key(keys, "done")
    return sum(1 for k in keys if d[k])


class Probe:
    """The test's own connection, for passive queue.declare."""

    def __init__(self):
        from kombu import Connection
        self.conn = Connection("amqp://guest:guest@127.0.0.1:%d//"
                               % BROKER.port, connect_timeout=10)
        self.conn.connect()
        self.ch = self.conn.channel()

    def counts(self):
        """(messages ready, consumers) of the queue."""
        r = self.ch.queue_declare(queue=QUEUE, passive=True)
        return r.message_count, r.consumer_count

    def close(self):
        try:
            self.conn.release()
        except Exception:  # noqa: BLE001 - the broker may be gone
            pass


def send(keys, sleep=0.0):
    """apply_async each key on a fresh connection (the pooled one of an
    earlier phase died with its roostd); every call returns only once the
    broker confirmed the message."""
    t0 = time.monotonic()
    with tasks.app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
        with conn.Producer() as producer:
            for key in keys:
                tasks.work.apply_async(args=(key, sleep), producer=producer,
                                       retry=False)
            ch = producer.channel
            confirmed = (getattr(ch.connection, "confirm_publish", False)
                         and getattr(ch, "_confirm_selected", False))
    return time.monotonic() - t0, confirmed


def check_modes(what, keys):
    starts = by_key(keys, "start")
    modes = sorted({r["delivery_mode"] for k in keys for r in starts[k]},
                   key=repr)
    if modes != [2]:
        fail("%s: delivery_mode of the delivered messages: %s, expected 2"
             % (what, modes))
    else:
        ok("%s: every delivered message has delivery_mode 2 (persistent)"
           % what)


def expect_empty(probe, what, hold=0.5, limit=10):
    seen = []

    def empty():
        n, _ = probe.counts()
        seen.append(n)
        return n == 0
    if not poll(empty, limit):
        fail("%s: %d messages ready in %s, expected 0" % (what, seen[-1],
                                                           QUEUE))
        return False
    t_end = time.monotonic() + hold
    while time.monotonic() < t_end:
        n, _ = probe.counts()
        if n != 0:
            fail("%s: %d messages came back to %s" % (what, n, QUEUE))
            return False
        time.sleep(0.1)
    return True


def phase1():
    keys = ["p1-%d" % i for i in range(PHASE1_TASKS)]
    q = tasks.app.amqp.queues[QUEUE]
    if not q.durable or tasks.app.conf.task_default_delivery_mode not in (
            2, "persistent"):
        fail("app: queue durable=%s, default delivery mode %r"
             % (q.durable, tasks.app.conf.task_default_delivery_mode))
    secs, confirmed = send(keys)
    if not confirmed:
        fail("phase 1: the publishing channel is not in confirm mode")
        return
    ok("phase 1: %d tasks sent to durable queue %s, each confirmed "
       "(%.1fs, %.1f ms a send)" % (len(keys), QUEUE, secs,
                                    1000 * secs / len(keys)))
    BROKER.kill9()
    note("phase 1: roostd SIGKILLed, no worker had run")
    t = BROKER.start()
    note("phase 1: roostd restarted on port %d in %.1fs: %s"
         % (BROKER.port, t, BROKER.recovered()))
    probe = Probe()
    n, consumers = probe.counts()
    if n != len(keys) or consumers != 0:
        fail("phase 1: after the restart %s holds %d messages (%d "
             "consumers), expected %d" % (QUEUE, n, consumers, len(keys)))
    else:
        ok("phase 1: after kill -9 and restart the queue holds all %d "
           "confirmed messages" % n)
    w = Worker("p1")
    ok("phase 1: worker p1 ready in %.1fs" % w.wait_ready())
    if not poll(lambda: all_done(keys), 40, 0.1):
        w.dump("completed %d of %d tasks" % (n_done(keys), len(keys)))
    starts, dones = by_key(keys, "start"), by_key(keys, "done")
    bad = ["%s started %d times, done %d times"
           % (k, len(starts[k]), len(dones[k])) for k in keys
           if len(starts[k]) != 1 or len(dones[k]) != 1]
    flagged = [k for k in keys if any(r["redelivered"] for r in starts[k])]
    if bad:
        fail("phase 1: %d of %d tasks not executed exactly once: %s"
             % (len(bad), len(keys), bad[:5]))
    else:
        ok("phase 1: all %d tasks executed exactly once, none lost"
           % len(keys))
    unflagged = [k for k in keys if k not in flagged]
    if unflagged:
        fail("phase 1: after the unclean stop, tasks not flagged "
             "redelivered: %s" % unflagged[:5])
    else:
        ok("phase 1: all flagged redelivered (recovered after an unclean "
           "stop)")
    check_modes("phase 1", keys)
    if expect_empty(probe, "phase 1"):
        ok("phase 1: queue empty afterwards")
    w.stop()
    problems = w.problems()
    if problems:
        fail("phase 1: worker logged errors: %s" % problems[:5])
    poll(lambda: probe.counts()[1] == 0, 10)
    probe.close()


def phase2():
    keys = ["p2-%d" % i for i in range(PHASE2_TASKS)]
    secs, confirmed = send(keys, PHASE2_SLEEP)
    if not confirmed:
        fail("phase 2: the publishing channel is not in confirm mode")
        return
    ok("phase 2: %d tasks (each sleeps %.1fs) sent, each confirmed (%.1fs)"
       % (len(keys), PHASE2_SLEEP, secs))
    w = Worker("p2")
    ok("phase 2: worker p2 ready in %.1fs" % w.wait_ready())
    if not poll(lambda: n_done(keys) >= PHASE2_KILL_AFTER, 40, 0.02):
        w.dump("completed only %d tasks" % n_done(keys))
        return
    t_kill = time.time()
    done_before = n_done(keys)
    BROKER.kill9()
    started_before = sum(1 for k, v in by_key(keys, "start").items() if v)
    note("phase 2: roostd SIGKILLed with %d tasks done, %d started"
         % (done_before, started_before))
    t_restart = time.time()  # whatever started before was delivered before
    t = BROKER.start()
    note("phase 2: roostd restarted in %.1fs: %s" % (t, BROKER.recovered()))
    probe = Probe()
    n, consumers = probe.counts()
    note("phase 2: after the restart %d messages ready, %d consumers"
         % (n, consumers))
    # The worker may reconnect and take some before the probe counts:
    # what the store recovered is what the broker held.
    m = re.search(r"store: recovered \d+ definitions, (\d+) messages",
                  BROKER.recovered())
    held = int(m.group(1)) if m else -1
    if held < len(keys) - done_before:
        fail("phase 2: only %d messages recovered after the restart, %d "
             "tasks had not completed before the kill"
             % (held, len(keys) - done_before))
    else:
        ok("phase 2: %d messages recovered, every task not completed before "
           "the kill (%d)" % (held, len(keys) - done_before))
    how = None
    t0 = time.monotonic()
    if poll(lambda: w.connects() >= 2 or w.proc.poll() is not None, 30, 0.1) \
            and w.proc.poll() is None:
        note("phase 2: the same worker reconnected %.1fs after the restart"
             % (time.monotonic() - t0))
        if poll(lambda: all_done(keys), 40, 0.1):
            how = "the worker that was running reconnected and completed"
        else:
            note("phase 2: reconnected worker completed %d of %d tasks"
                 % (n_done(keys), len(keys)))
    else:
        note("phase 2: worker p2 did not reconnect within 30s (exit %s)"
             % w.proc.poll())
    if how is None:
        note("phase 2: worker p2's log ends:")
        tail(w.log, 15)
        w.kill()
        w = Worker("p2b")
        ok("phase 2: replacement worker p2b ready in %.1fs" % w.wait_ready())
        if poll(lambda: all_done(keys), 40, 0.1):
            how = "a new worker, started after the broker was back, completed"
    if how is None:
        w.dump("completed %d of %d tasks" % (n_done(keys), len(keys)))
        return
    starts, dones = by_key(keys, "start"), by_key(keys, "done")
    ok("phase 2: all %d tasks executed at least once (%s)"
       % (len(keys), how))
    dups = [k for k in keys if len(starts[k]) > 1]
    bad = []
    for k in dups:
        first, later = starts[k][0], starts[k][1:]
        if first["t"] >= t_restart:
            bad.append("%s first started %.2fs after the restart (%.2fs "
                       "after the kill)" % (k, first["t"] - t_restart,
                                            first["t"] - t_kill))
        if not all(r["redelivered"] for r in later):
            bad.append("%s executed %d times, redelivered flags %s"
                       % (k, len(starts[k]),
                          [r["redelivered"] for r in starts[k]]))
    if bad:
        fail("phase 2: duplicate executions not explained by the crash: %s"
             % bad[:5])
    else:
        ok("phase 2: %d task(s) executed twice (%s), each first started "
           "before the restart and flagged redelivered the second time"
           % (len(dups), ", ".join(dups) or "none"))
    runs = [r for k in keys for r in starts[k]]
    early = [r for r in runs if r["t"] < t_restart and r["redelivered"]]
    late = [r for r in runs if r["t"] >= t_restart and not r["redelivered"]]
    if early or late:
        fail("phase 2: %d run(s) before the restart flagged redelivered, %d "
             "after it not flagged (after an unclean stop every recovered "
             "message is)" % (len(early), len(late)))
    else:
        ok("phase 2: no run before the restart flagged redelivered, every "
           "run after it flagged (%d)" % sum(1 for r in runs
                                             if r["t"] >= t_restart))
    check_modes("phase 2", keys)
    if expect_empty(probe, "phase 2"):
        ok("phase 2: queue empty afterwards")
    errs = w.problems()
    if errs:
        note("phase 2: worker %s logged (expected around the crash: acks "
             "on the lost connection): %s" % (w.name, errs[:3]))
    w.stop()
    poll(lambda: probe.counts()[1] == 0, 10)
    if expect_empty(probe, "phase 2, after the worker stopped", hold=1):
        ok("phase 2: nothing came back when the worker stopped (all acked)")
    probe.close()


def phase3():
    if not BROKER.term("end"):
        return
    BROKER.start()
    note("clean restart: %s" % BROKER.recovered())
    probe = Probe()
    n, _ = probe.counts()
    probe.close()
    if n != 0:
        fail("clean restart: %d acked messages came back to %s" % (n, QUEUE))
    else:
        ok("clean restart: the durable queue is there and empty")
    BROKER.term("final")


def on_sigterm(signum, frame):
    raise KeyboardInterrupt("SIGTERM (timed out?)")


def main():
    global TMP, QUEUE, BROKER, tasks
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1])
        return 2
    try:
        import celery  # noqa: F401
        import kombu  # noqa: F401
    except ImportError as e:
        print("celery_durable: skipped: %s" % e)
        return 77
    signal.signal(signal.SIGTERM, on_sigterm)
    # No __pycache__ in the source tree, from us or from the workers.
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    TMP = os.path.abspath(sys.argv[2])
    QUEUE = "celery-durable.%d.%d" % (os.getpid(), int(time.time()))
    BROKER = Roostd(os.path.abspath(sys.argv[1]))
    rc = 1
    try:
        t = BROKER.start()
        note("roostd on port %d, data dir %s, started in %.1fs"
             % (BROKER.port, BROKER.data, t))
        os.environ.update(CELERY_DURABLE_PORT=str(BROKER.port),
                          CELERY_DURABLE_RECORDS=TMP,
                          CELERY_DURABLE_QUEUE=QUEUE)
        sys.path.insert(0, HERE)
        import celery_durable as tasks  # the app, configured from the above
        phase1()
        if not failures:
            phase2()
        if BROKER.proc.poll() is None:
            phase3()
        rc = 0
    except (Exception, KeyboardInterrupt) as e:
        fail("%s: %s" % (type(e).__name__, str(e) or repr(e)))
    finally:
        for p in procs:
            killpg(p)
        alive = [p.pid for p in procs if p.poll() is None]
        if alive:
            fail("processes still running: %s" % alive)
    if failures and BROKER.n:
        print("roostd log (instance %d) ends:" % BROKER.n)
        tail(BROKER.log, 15)
    print("celery_durable: %.1fs" % (time.monotonic() - START))
    print("celery_durable: %d passed, %d failed" % (passed, len(failures)))
    return 1 if failures or rc else 0


if __name__ == "__main__":
    sys.exit(main())
