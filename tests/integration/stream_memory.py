# SPDX-License-Identifier: Apache-2.0
"""A stream's memory bound (issue 24, point 10): 1 GiB in one stream
(262,144 x 4 KiB, published with roost-perf, confirms), then 20
consumers at `first` with prefetch 100 reading slowly (each acks a few
messages a turn) for 8 s: roostd's RSS grows by less than 100 MiB over
what it held with the stream at rest (doubled plus 64 MiB under
AddressSanitizer), and each consumer read its messages in order from
offset 0, bodies intact (read back from disk: paging.window is 1,000).

    stream_memory.py --roostd ROOSTD --perf ROOST_PERF --dir DIR
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

import pika

from checks import check, done

ap = argparse.ArgumentParser()
ap.add_argument("--roostd", required=True)
ap.add_argument("--perf", required=True)
ap.add_argument("--dir", required=True)
args = ap.parse_args()

N, SIZE, CONSUMERS, PREFETCH = 262144, 4096, 20, 100
BOUND_MIB = 100



with open(args.roostd, "rb") as f:
    sanitized = b"__asan_init" in f.read()
bound = BOUND_MIB * 2 + 64 if sanitized else BOUND_MIB

log = os.path.join(args.dir, "log")
env = dict(os.environ, ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") +
                                     ":quarantine_size_mb=16").lstrip(":"))
proc = subprocess.Popen(
    [args.roostd, "--port", "0", "--data-dir", os.path.join(args.dir, "data"),
     "--log-file", log, "--set", "management.tcp.port=0", "--set",
     "prometheus.tcp.port=-1", "--set", "paging.window=1000"],
    env=env, stderr=open(os.path.join(args.dir, "stderr"), "a"))
port = None
for _ in range(600):
    m = re.search(r"ready for connections on port (\d+)",
                  open(log).read() if os.path.exists(log) else "")
    if m:
        port = int(m.group(1))
        break
    time.sleep(0.05)
if port is None:
    sys.exit("roostd did not start")


def rss_mib():
    with open("/proc/%d/status" % proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


try:
    r = subprocess.run([args.perf, "--port", str(port), "--queue-type",
                        "stream", "--persistent", "--confirm", "100",
                        "--publish-only", "--count", str(N), "--size",
                        str(SIZE), "--queue-prefix", "sm-", "--quiet"],
                       capture_output=True, text=True, timeout=600)
    check("1 GiB published into the stream with confirms", r.returncode == 0,
          r.stderr[-300:])
    time.sleep(1.0)
    rest = rss_mib()
    conns = []
    for i in range(CONSUMERS):
        c = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", port))
        ch = c.channel()
        ch.basic_qos(prefetch_count=PREFETCH)
        got = []
        ch.basic_consume("sm-0", lambda chx, m, p, b, got=got: got.append(
            ((p.headers or {}).get("x-stream-offset"), m.delivery_tag,
             len(b))), arguments={"x-stream-offset": "first"})
        conns.append((c, ch, got, [0]))
    peak = rest
    end = time.time() + 8
    while time.time() < end:
        for c, ch, got, acked in conns:
            c.process_data_events(time_limit=0)
            # slow: at most 5 acks a turn
            for k in range(acked[0], min(len(got), acked[0] + 5)):
                ch.basic_ack(got[k][1])
            acked[0] = min(len(got), acked[0] + 5)
        peak = max(peak, rss_mib())
        time.sleep(0.01)
    reads = [len(g) for _, _, g, _ in conns]
    check("20 slow consumers at first: RSS grew %.1f MiB (%.1f at rest, %.1f "
          "at most), under %d MiB" % (peak - rest, rest, peak, bound),
          peak - rest < bound)
    check("each consumer read in order from offset 0, bodies whole (%d to "
          "%d messages each)" % (min(reads), max(reads)),
          all(len(g) >= PREFETCH and
              [x[0] for x in g] == list(range(len(g))) and
              all(x[2] == SIZE for x in g) for _, _, g, _ in conns),
          reads)
    for c, _, _, _ in conns:
        c.close()
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait()
done()
