# SPDX-License-Identifier: Apache-2.0
"""The Celery app and tasks used by celery_test.py (issue 5).

Loaded both by the test process (to send tasks) and by the `celery worker`
subprocesses it starts (-A celery_tasks). Configured from the environment:
  CELERY_TEST_PORT     broker port on 127.0.0.1 (guest/guest, vhost /)
  CELERY_TEST_JOBS     the job queue of celery_test.py's part 6, declared
                       with the arguments in JOBS_ARGS (a priority queue
                       with a delivery limit, a dead-letter queue and
                       Roost's retry back-off)
  CELERY_TEST_RECORDS  directory for the execution record: every task
                       execution appends JSON lines to executions.jsonl
                       (one "start" line, one "done" line), with its key,
                       the worker pid, self.request.retries and
                       self.request.delivery_info['redelivered'], so the
                       test counts executions without trusting the broker.
Results also go back through the rpc:// backend (reply queue on the
default exchange), which the test reads with AsyncResult.get().
"""
import json
import os
import time

from celery import Celery
from celery.exceptions import Reject
from kombu import Exchange, Queue

PORT = int(os.environ.get("CELERY_TEST_PORT", "5672"))
RECORDS = os.environ.get("CELERY_TEST_RECORDS", "/nonexistent")

app = Celery("celery_tasks",
             broker="amqp://guest:guest@127.0.0.1:%d//" % PORT,
             backend="rpc://")
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # The reply queue gets x-expires from this: a reference broker that is
    # reused does not keep the queue of a run that died for a day.
    result_expires=120,
    worker_hijack_root_logger=True,
    broker_connection_timeout=10,
    # Nothing may go to the shared default queue "celery": every send
    # names its queue, this only catches mistakes.
    task_default_queue="celery-test-unused",
    worker_send_task_events=False,
)

JOBS = os.environ.get("CELERY_TEST_JOBS")
JOBS_DELAY = 400     # x-requeue-delay, ms
JOBS_ARGS = {
    "x-max-priority": 10,
    "x-delivery-limit": 2,
    "x-requeue-delay": JOBS_DELAY,
    "x-requeue-delay-max": 4 * JOBS_DELAY,
    "x-dead-letter-exchange": "",
    "x-dead-letter-routing-key": "%s.dead" % JOBS,
}
if JOBS:
    # The worker (-Q) and the sender declare it with its arguments.
    app.conf.task_queues = [Queue(JOBS, Exchange(""), routing_key=JOBS,
                                  queue_arguments=JOBS_ARGS)]


class RetryMe(Exception):
    pass


def record(event, task, key, **fields):
    req = task.request
    di = req.delivery_info or {}
    line = dict(event=event, task=task.name.rsplit(".", 1)[-1], key=key,
                id=req.id, pid=os.getpid(), t=time.time(),
                retries=req.retries, redelivered=di.get("redelivered"),
                routing_key=di.get("routing_key"), **fields)
    data = (json.dumps(line, sort_keys=True) + "\n").encode()
    # One O_APPEND write per line: lines from several processes never mix.
    fd = os.open(os.path.join(RECORDS, "executions.jsonl"),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def wait_for_file(path, limit=90.0):
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@app.task(bind=True)
def compute(self, key, x, y, scale=1):
    """An ordinary task (acked when it starts): x * y + scale."""
    record("start", self, key)
    result = x * y + scale
    record("done", self, key, result=result)
    return result


@app.task(bind=True, max_retries=5)
def flaky(self, key, value, countdowns=(0, 0.3)):
    """Fails twice (retrying with countdowns[retries]) then returns
    value * 2 on the third attempt."""
    record("start", self, key)
    if self.request.retries < 2:
        record("retrying", self, key)
        raise self.retry(exc=RetryMe("attempt %d of %s"
                                     % (self.request.retries + 1, key)),
                         countdown=countdowns[self.request.retries])
    record("done", self, key, result=value * 2)
    return value * 2


@app.task(bind=True, acks_late=True)
def gated(self, key, gate, value):
    """acks_late: acknowledged only when it returns. Marks that it has
    started (a file named after key and attempt), then waits for the gate
    file to exist and returns value + 1000."""
    record("start", self, key)
    marker = os.path.join(RECORDS, "started.%s.%d" % (key, os.getpid()))
    open(marker, "w").close()
    if not wait_for_file(gate):
        record("gate-timeout", self, key)
        raise RuntimeError("gate %s never opened" % gate)
    record("done", self, key, result=value + 1000)
    return value + 1000


def attempts(key):
    """How often a task with this key started before (the record)."""
    try:
        with open(os.path.join(RECORDS, "executions.jsonl")) as f:
            return sum(1 for line in f if '"event": "start"' in line
                       and json.loads(line)["key"] == key)
    except FileNotFoundError:
        return 0


@app.task(bind=True, acks_late=True)
def job(self, key, fail_times=0):
    """acks_late: fails (Reject with requeue: basic.reject, requeue=true)
    its first fail_times attempts, every one if fail_times < 0; then
    returns key."""
    before = attempts(key)
    record("start", self, key,
           priority=(self.request.delivery_info or {}).get("priority"))
    if fail_times < 0 or before < fail_times:
        record("rejected", self, key)
        raise Reject("attempt %d of %s fails" % (before + 1, key),
                     requeue=True)
    record("done", self, key, result=key)
    return key


def _orphan_guard(parent):
    """In a worker started by celery_test.py: if the test process goes
    away without stopping us (killed by a timeout), kill our whole process
    group, so no worker outlives the test."""
    import signal
    import threading

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="orphan-guard", daemon=True).start()


if os.environ.get("CELERY_TEST_PARENT", "").isdigit():
    _parent = int(os.environ.pop("CELERY_TEST_PARENT"))
    if os.getppid() == _parent:
        _orphan_guard(_parent)
