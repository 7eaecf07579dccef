# SPDX-License-Identifier: Apache-2.0
"""The memory alarm end to end, with pika and publisher confirms.

A publisher confirms 1 KiB messages into a queue until roostd's memory
high watermark (set low by alarm.sh) blocks it: connection.blocked must
arrive; a second connection then drains the queue, which clears the alarm:
connection.unblocked must arrive, the publisher finishes, and every
confirmed message is received exactly once, in order.
Usage: alarm_test.py PORT
"""
import sys
import threading
import time

import pika

PORT = int(sys.argv[1])
TOTAL = 8000
params = pika.ConnectionParameters('127.0.0.1', PORT)
events = []

pub = pika.BlockingConnection(params)
pub.add_on_connection_blocked_callback(
    lambda conn, m: events.append(('blocked', m.method.reason)))
pub.add_on_connection_unblocked_callback(
    lambda conn, m: events.append(('unblocked',)))
ch = pub.channel()
ch.confirm_delivery()
ch.queue_declare('alarm-q')
ch.queue_purge('alarm-q')
got = []


def drain():
    c = pika.BlockingConnection(params)
    dch = c.channel()
    # Wait until the queue holds more than the watermark allows, then a
    # little longer, so that the publisher is blocked for certain.
    deadline = time.monotonic() + 30
    while dch.queue_declare('alarm-q', passive=True).method.message_count < 4000:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    time.sleep(1)
    deadline = time.monotonic() + 60
    while len(got) < TOTAL and time.monotonic() < deadline:
        m = dch.basic_get('alarm-q', auto_ack=True)
        if m[0] is None:
            time.sleep(0.01)
            continue
        got.append(int(m[2].split(b':')[0]))
    c.close()


t = threading.Thread(target=drain)
t.start()
for i in range(TOTAL):
    ch.basic_publish('', 'alarm-q', b'%d:' % i + b'x' * 1024)  # confirmed
pub.process_data_events(1)
t.join()
pub.close()

fails = []
if ('blocked', 'low on memory') not in events:
    fails.append('no connection.blocked "low on memory": %r' % events)
if ('unblocked',) not in events:
    fails.append('no connection.unblocked: %r' % events)
if got != list(range(TOTAL)):
    fails.append('received %d of %d confirmed messages, in order: %s'
                 % (len(got), TOTAL, got == sorted(got)))
for f in fails:
    print('FAIL', f)
print('alarm: %d passed, %d failed' % (3 - len(fails), len(fails)))
sys.exit(1 if fails else 0)
