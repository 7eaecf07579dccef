# SPDX-License-Identifier: Apache-2.0
"""The job-queue scenario shared by jobs_pika.py and jobs_kombu.py.

A producer publishes N jobs with publisher confirms to a durable queue; a
worker process takes them with manual acks under prefetch PREFETCH, acks
the first ACK_FIRST, holds the next ones unacked and is killed with
SIGKILL; a second worker then takes everything left. This module has what
does not depend on the client library: the worker's bookkeeping and its
report to the parent (lines on its stdout), starting and killing it, and
the checks on what both workers got.

The worker prints, each on one line,
    acked K IDS      after it has acked its first K (= ACK_FIRST) jobs
    holding K IDS    when it holds K jobs unacked and no more arrive
    extra K IDS      for any delivery after that (prefetch exceeded)
where IDS is a comma-separated list of job ids in delivery order, each
followed by "+" if that delivery had redelivered=true.
"""
import json
import os
import select
import signal
import subprocess
import sys
import time

from interop_plan import prefix  # noqa: F401  (re-exported for the scripts)

N = 2000          # jobs
ACK_FIRST = 100   # the worker that dies acks this many first
PREFETCH = 50     # basic.qos prefetch of both workers
WORKER_LIFETIME = 50.0  # a worker that was not killed gives up after this


class Checks:
    def __init__(self):
        self.failures = []

    def ok(self, msg):
        print("ok: " + msg, flush=True)

    def fail(self, msg):
        print("FAIL: " + msg, flush=True)
        self.failures.append(msg)


def args():
    """PORT, or PORT --worker QUEUE: returns (port, queue or None)."""
    a = sys.argv[1:]
    if len(a) == 1 and a[0].isdigit():
        return int(a[0]), None
    if len(a) == 3 and a[0].isdigit() and a[1] == "--worker":
        return int(a[0]), a[2]
    sys.stderr.write("usage: %s PORT\n" % sys.argv[0])
    sys.exit(2)


def job_body(i):
    return json.dumps({"job": i}).encode()


def job_id(body):
    if isinstance(body, (bytes, bytearray)):
        body = json.loads(body)
    return body["job"]


def is_roost(server_properties):
    """Roost announces product RabbitMQ (for kombu's sake) but adds
    roost_version to connection.start's server properties."""
    return any(k in ("roost_version", b"roost_version") for k in server_properties)


def fmt_ids(deliveries):
    return ",".join("%d%s" % (j, "+" if r else "") for j, r in deliveries)


def parse_ids(text):
    out = []
    for tok in text.split(","):
        if tok:
            out.append((int(tok.rstrip("+")), tok.endswith("+")))
    return out


def ranges(ids):
    """[3, 4, 5, 9] -> '3..5,9': short descriptions in failure messages."""
    out, start, prev = [], None, None
    for i in list(ids) + [None]:
        if start is not None and (i is None or i != prev + 1):
            out.append(str(start) if start == prev else "%d..%d" % (start, prev))
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    s = ",".join(out)
    return s if len(s) < 300 else s[:300] + "..."


# --- the worker that dies (runs in the child process) --------------------
class DyingWorker:
    """Call on_delivery for every delivery and ack the delivery if it
    returns True; run(pump) drives the event loop, where pump(seconds)
    processes the connection's events for about that long."""

    def __init__(self):
        self.acked, self.held = [], []
        self.reported = False

    def _say(self, kind, deliveries):
        print("%s %d %s" % (kind, len(deliveries), fmt_ids(deliveries)), flush=True)

    def on_delivery(self, job, redelivered):
        if len(self.acked) < ACK_FIRST:
            self.acked.append((job, redelivered))
            if len(self.acked) == ACK_FIRST:
                self._say("acked", self.acked)
            return True
        self.held.append((job, redelivered))
        if self.reported:
            self._say("extra", [(job, redelivered)])
        return False

    def run(self, pump):
        start = time.monotonic()
        # Wait until the broker has filled the prefetch window with jobs we
        # do not ack, then a little longer to see that no more come.
        while len(self.held) < PREFETCH and time.monotonic() < start + 15:
            pump(0.05)
        pump(0.3)
        self._say("holding", self.held)
        self.reported = True
        while time.monotonic() < start + WORKER_LIFETIME:
            pump(0.2)  # the parent kills us here
        print("not killed", flush=True)


# --- the parent's side ---------------------------------------------------
def start_worker(script, port, queue):
    return subprocess.Popen(
        [sys.executable, os.path.abspath(script), str(port), "--worker", queue],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        bufsize=0)


class WorkerReport:
    def __init__(self):
        self.acked, self.held, self.extra, self.other = [], [], [], []
        self.holding = False  # the "holding" line came
        self.buf = b""

    def feed(self, data):
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace")
            kind, _, rest = line.partition(" ")
            _, _, ids = rest.partition(" ")
            if kind == "acked":
                self.acked = parse_ids(ids)
            elif kind == "holding":
                self.held = parse_ids(ids)
                self.holding = True
            elif kind == "extra":
                self.extra += parse_ids(ids)
            elif line.strip():
                self.other.append(line)

    def deliveries(self):
        return self.acked + self.held + self.extra


def wait_holding(c, proc, report, timeout=20.0):
    """Read the worker's report until it says it holds jobs unacked."""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while not report.holding and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            data = os.read(fd, 65536)
            if not data:
                break
            report.feed(data)
    if not report.holding:
        c.fail("the worker did not report what it holds unacked (exit status %r); "
               "its output: %r" % (proc.poll(), report.other[-10:]))
        return False
    return True


def kill_worker(c, proc, report):
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    rest = proc.stdout.read()
    if rest:
        report.feed(rest)
    proc.stdout.close()
    if proc.returncode != -signal.SIGKILL:
        c.fail("worker exit status %r, expected death by SIGKILL" % proc.returncode)
    for line in report.other:
        c.fail("worker said: %s" % line)


def wait_requeued(queue_counts, want, timeout=10.0):
    """Poll (message_count, consumer_count) of the queue until the dead
    worker's jobs are back (want ready, no consumer). Returns the last."""
    deadline = time.monotonic() + timeout
    while True:
        counts = queue_counts()
        if counts == (want, 0) or time.monotonic() >= deadline:
            return counts
        time.sleep(0.02)


def check_jobs(c, report, second):
    """report: what the dead worker got; second: (job, redelivered) in
    delivery order for the second worker, which acked all of them."""
    first = report.deliveries()
    held = report.held + report.extra
    # The dead worker: jobs in queue order, first deliveries, ACK_FIRST
    # acked, then exactly PREFETCH unacked (basic.qos).
    ids = [j for j, _ in first]
    bad = False
    if ids != list(range(len(ids))):
        c.fail("dead worker got jobs %s, expected 0..%d in order"
               % (ranges(ids), len(ids) - 1))
        bad = True
    if any(r for _, r in first):
        c.fail("dead worker: redelivered=true on first deliveries of %s"
               % ranges(j for j, r in first if r))
        bad = True
    if len(report.acked) != ACK_FIRST or len(held) != PREFETCH:
        c.fail("dead worker acked %d and then held %d unacked with prefetch %d; "
               "expected %d and %d" % (len(report.acked), len(held), PREFETCH,
                                       ACK_FIRST, PREFETCH))
        bad = True
    if not bad:
        c.ok("dead worker acked jobs 0..%d, then held %d..%d unacked "
             "(prefetch %d) when killed" % (ACK_FIRST - 1, ACK_FIRST,
                                            ACK_FIRST + PREFETCH - 1, PREFETCH))

    # Every job acked exactly once over both workers.
    acked = [j for j, _ in report.acked] + [j for j, _ in second]
    counts = {}
    for j in acked:
        counts[j] = counts.get(j, 0) + 1
    dups = sorted(j for j, n in counts.items() if n > 1)
    missing = sorted(set(range(N)) - set(counts))
    unexpected = sorted(set(counts) - set(range(N)))
    if dups or missing or unexpected:
        c.fail("acked jobs: %d acks; acked twice: %s; never acked: %s; "
               "unexpected ids: %s" % (len(acked), ranges(dups) or "none",
                                       ranges(missing) or "none",
                                       ranges(unexpected) or "none"))
    else:
        c.ok("every job 0..%d acked exactly once over both workers" % (N - 1))

    # redelivered=false exactly on each job's first delivery.
    seen, again, wrong = set(), [], []
    for j, r in first + second:
        if j in seen and not r:
            again.append(j)
        if j not in seen and r:
            wrong.append(j)
        seen.add(j)
    if again or wrong:
        c.fail("delivered again with redelivered=false: %s; redelivered=true "
               "on a first delivery: %s" % (ranges(again) or "none",
                                            ranges(wrong) or "none"))
    else:
        c.ok("a job is delivered twice only with redelivered=true the second time")

    # The jobs the dead worker held come back first, in their original
    # order (RabbitMQ requeues them at their old place: the queue's head),
    # then the jobs nobody had, in order.
    held_ids = [j for j, _ in held]
    redelivered = [j for j, r in second if r]
    never = sorted(set(range(N)) - set(ids))
    want = [(j, True) for j in held_ids] + [(j, False) for j in never]
    if redelivered != held_ids:
        c.fail("second worker got %s redelivered; the dead worker held %s"
               % (ranges(redelivered) or "none", ranges(held_ids) or "none"))
    elif second != want:
        i = next((k for k, (a, b) in enumerate(zip(second, want)) if a != b),
                 min(len(second), len(want)))
        c.fail("second worker: %d deliveries, expected %d; at %d got %s, "
               "expected %s (the held jobs redelivered in order, then %s)"
               % (len(second), len(want), i,
                  second[i] if i < len(second) else "nothing",
                  want[i] if i < len(want) else "nothing", ranges(never)))
    else:
        c.ok("second worker got the dead worker's %d jobs first, in order, "
             "redelivered, then %d..%d in order" % (len(held_ids), never[0] if never else N,
                                                    N - 1))
