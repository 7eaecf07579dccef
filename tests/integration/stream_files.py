# SPDX-License-Identifier: Apache-2.0
"""A stream's own segment log (data/streams/<queue store id>/
NNNNNNNNNN.seg), seen from its files, the management API and a
consumer: the messages split over files of the stream's segment size
(x-stream-max-segment-size-bytes, floored at 65536) and none of them in
the journal (data/msgs); each synced before its confirm
(ROOST_TEST_SYNC_LOG); x-max-length-bytes and x-max-age freeing whole
files, the latter with no traffic, and what they dropped not coming
back after a clean restart or a kill -9; queue.delete taking the
directory, a start taking an orphan's; the .crashed mark on the newest
segment after a kill -9; roostd --check-data on the files, whole and
with a damaged record in an old segment, and a start skipping that
record only.

    stream_files.py --roostd ROOSTD --dir DIR

Prints "PASS name" / "FAIL name: why".
"""
import argparse
import os
import re
import shutil
import subprocess
import time

import pika

from checks import (Api, Roostd, check, connect, done, q, read_stream,
                    until)

ap = argparse.ArgumentParser()
ap.add_argument("--roostd", required=True)
ap.add_argument("--dir", required=True)
args = ap.parse_args()

DATA = os.path.join(args.dir, "data")
STREAMS = os.path.join(DATA, "streams")
SYNC_LOG = os.path.join(args.dir, "synclog")
SEG = 65536
rd = Roostd(args.roostd, args.dir, data=DATA,
            sets=["management.tcp.port=0", "prometheus.tcp.port=-1"])
api = None


def start(env_extra=None):
    """Start roostd; its AMQP port (and 'api' on its management port)."""
    global api
    port = rd.start(env_extra)
    api = Api(rd.http)
    return port


stop, kill9, log_text = rd.stop, rd.kill9, rd.log_text


def declare(port, name, **a):
    c = connect(port)
    c.channel().queue_declare(name, durable=True,
                              arguments=dict({"x-queue-type": "stream"}, **a))
    c.close()


def body(tag, seq):
    """1 KiB, with a marker no other stream's bodies have."""
    b = b"SFMK-%s:%08d:" % (tag.encode(), seq)
    return b + b"." * (1024 - len(b))


def seq_of(b):
    return int(b.split(b":")[1])


def publish(port, name, tag, first, n):
    c = connect(port)
    ch = c.channel()
    ch.confirm_delivery()
    for i in range(first, first + n):
        ch.basic_publish("", name, body(tag, i))
    c.close()


def read_all(port, name, want=None):
    """[(offset, body)] from first, acking each."""
    return read_stream(port, name, want, wait=3.0)


def info(name):
    s, r = api.call("GET", "queues/%2F/" + q(name))
    return r if s == 200 else {}


def stream(name):
    return info(name).get("stream") or {}


def sids():
    try:
        return set(x for x in os.listdir(STREAMS)
                   if os.path.isdir(os.path.join(STREAMS, x)))
    except FileNotFoundError:
        return set()


def new_sid(before):
    """The one directory under data/streams that was not in 'before'."""
    until(lambda: len(sids() - before) == 1, 20)
    new = sids() - before
    return new.pop() if len(new) == 1 else None


def segs(sid):
    """{segment number: size} of a stream's .seg files."""
    d = os.path.join(STREAMS, sid or "none")
    try:
        return {int(f[:-4]): os.stat(os.path.join(d, f)).st_size
                for f in os.listdir(d) if re.match(r"^\d{10}\.seg$", f)}
    except FileNotFoundError:
        return {}


def seg_path(sid, n):
    return os.path.join(STREAMS, sid, "%010d.seg" % n)


def check_data():
    r = subprocess.run([args.roostd, "--check-data", DATA],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    with open(os.path.join(args.dir, "stderr"), "ab") as f:
        f.write(r.stderr)
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def offs_ok(got, first, last, why):
    """'got' is exactly offsets first..last in order, each body the
    message published as that offset."""
    offs = [g[0] for g in got]
    seqs = [seq_of(g[1]) for g in got]
    ok = (first is not None and last is not None
          and offs == list(range(first, last + 1)) and seqs == offs)
    return ok, "%s: %d got, offsets %s...%s, seqs %s...%s; API %s..%s" % (
        why, len(got), offs[:3], offs[-3:], seqs[:3], seqs[-3:], first,
        last)


port = start({"ROOST_TEST_SYNC_LOG": SYNC_LOG})

# ---- 1. the messages in the stream's own files, none in the journal
declare(port, "sf_split", **{"x-stream-max-segment-size-bytes": SEG})
publish(port, "sf_split", "split", 0, 500)
until(lambda: sids(), 20)
only = sorted(sids())
sid_split = only[0] if len(only) == 1 else None
check("one directory under data/streams after the first stream's "
      "messages", sid_split is not None, only)
files = segs(sid_split)
check("500 x 1 KiB at a 64 KiB segment size: several .seg files, "
      "numbered from 0000000001", len(files) >= 5
      and sorted(files) == list(range(1, len(files) + 1)), files)
# a persistent message on a classic queue, so the journal has a segment
c = connect(port)
ch = c.channel()
ch.queue_declare("sf_classic", durable=True)
ch.confirm_delivery()
ch.basic_publish("", "sf_classic", body("classic", 0),
                 pika.BasicProperties(delivery_mode=2))
c.close()
journal = b""
jfiles = []
for f in sorted(os.listdir(os.path.join(DATA, "msgs"))):
    if f.endswith(".seg"):
        jfiles.append(f)
        journal += open(os.path.join(DATA, "msgs", f), "rb").read()
instream = b"".join(open(seg_path(sid_split, n), "rb").read()
                    for n in sorted(files))
check("no stream body in the journal's segments (%s; a classic queue's "
      "message is there), all 500 in the stream's files" % " ".join(jfiles),
      b"SFMK-classic:" in journal and b"SFMK-split:" not in journal
      and instream.count(b"SFMK-split:") == 500,
      "%d classic and %d stream bodies in the journal, %d in the stream's "
      "files" % (journal.count(b"SFMK-classic:"),
                 journal.count(b"SFMK-split:"),
                 instream.count(b"SFMK-split:")))
nonempty = len([n for n in files if files[n] > 0])
st = stream("sf_split")
check("the API's stream.segments (%s) is the number of non-empty .seg "
      "files (%d), segment_size 65536" % (st.get("segments"), nonempty),
      st.get("segments") == nonempty and st.get("segment_size") == SEG, st)
check("the API's stream.disk_bytes is the files' bytes (%d)" %
      sum(files.values()), st.get("disk_bytes") == sum(files.values()), st)

# ---- 2. synced before the confirm
c = connect(port)
ch = c.channel()
ch.confirm_delivery()
before = open(SYNC_LOG).read() if os.path.exists(SYNC_LOG) else ""
ch.basic_publish("", "sf_split", body("split", 500))
lines = open(SYNC_LOG).read() if os.path.exists(SYNC_LOG) else ""
files = segs(sid_split)
c.close()
newest = max(files) if files else 0
name = "streams/%s/%010d.seg" % (sid_split, newest)
synced = [int(x.split()[1]) for x in lines.splitlines()
          if x.split()[:1] == [name]]
new_lines = [x for x in lines[len(before):].splitlines()
             if x.startswith("streams/%s/" % sid_split)]
check("at the confirm the sync log has %s synced to its size (%s >= %d), "
      "a line since the publish" % (name, synced[-1:], files.get(newest, 0)),
      synced and max(synced) >= files.get(newest, 0) and new_lines,
      "lines since the publish: %s; last lines: %s" % (
          new_lines, lines.splitlines()[-5:]))

# ---- 3. the floor
declare(port, "sf_floor", **{"x-stream-max-segment-size-bytes": 1000})
st = stream("sf_floor")
check("x-stream-max-segment-size-bytes 1000 shows segment_size 65536",
      st.get("segment_size") == SEG, st)

# ---- 4. x-max-length-bytes frees whole files
b0 = sids()
declare(port, "sf_ret", **{"x-stream-max-segment-size-bytes": SEG,
                           "x-max-length-bytes": 200000})
publish(port, "sf_ret", "ret", 0, 3000)
sid_ret = new_sid(b0)
until(lambda: len(segs(sid_ret)) <= 6, 20)
files = segs(sid_ret)
check("x-max-length-bytes 200000, 3000 x 1 KiB: at most 6 files (%d), "
      "the lowest numbered > 1 (%s)" % (len(files), min(files or [0])),
      sid_ret and 0 < len(files) <= 6 and min(files) > 1, sorted(files))
st = stream("sf_ret")
ret_first, ret_last = st.get("first_offset"), st.get("last_offset")
got = read_all(port, "sf_ret", None if ret_first is None or ret_last is None
               else ret_last - ret_first + 1)
ok, why = offs_ok(got, ret_first, ret_last, "from first")
check("a consumer from first gets offsets first_offset..last_offset "
      "(%s..%s) in order, each its own message" % (ret_first, ret_last),
      ok and ret_first > 0 and ret_last == 2999, why)

# ---- 5. x-max-age, with no traffic
b0 = sids()
declare(port, "sf_age", **{"x-stream-max-segment-size-bytes": SEG,
                           "x-max-age": "2s"})
publish(port, "sf_age", "age", 0, 400)
sid_age = new_sid(b0)
t0 = time.time()
many = len(segs(sid_age))


def aged():
    s = stream("sf_age")
    i = info("sf_age")
    return ((i.get("messages") == 0 or
             (s.get("first_offset") is not None
              and s.get("first_offset") == s.get("next_offset")))
            and len(segs(sid_age)) <= 1)


until(aged, 20)
st = stream("sf_age")
check("x-max-age 2s, 400 x 1 KiB (%d files), no traffic: no message and "
      "at most one file left (after %.1f s)" % (many, time.time() - t0),
      sid_age and many > 1 and aged(), "messages %s, %s, files %s" % (
          info("sf_age").get("messages"), st, sorted(segs(sid_age))))

# ---- 6. queue.delete takes the directory
b0 = sids()
declare(port, "sf_del", **{"x-stream-max-segment-size-bytes": SEG})
publish(port, "sf_del", "del", 0, 100)
sid_del = new_sid(b0)
c = connect(port)
c.channel().queue_delete("sf_del")
c.close()
check("queue.delete takes data/streams/%s" % sid_del, sid_del and until(
    lambda: not os.path.exists(os.path.join(STREAMS, sid_del)), 20),
    sorted(sids()))

# ---- 7. an orphan's directory goes at startup; a clean restart keeps
# what retention dropped dropped
n_split = info("sf_split").get("messages")
stop()
shutil.copytree(os.path.join(STREAMS, sid_split),
                os.path.join(STREAMS, "999999"))
port = start()
check("a start deletes data/streams/999999, a stream that is not there",
      until(lambda: not os.path.exists(os.path.join(STREAMS, "999999")),
            20), sorted(sids()))
check("the log says \"the log of a stream that no longer exists\"",
      "the log of a stream that no longer exists" in log_text(),
      [x for x in log_text().splitlines() if "streams" in x][-5:])
got = read_all(port, "sf_split", 501)
ok, why = offs_ok(got, 0, 500, "sf_split")
check("the real stream is intact after it (%s messages, 501 read)" %
      info("sf_split").get("messages"),
      ok and n_split == 501 and info("sf_split").get("messages") == 501,
      why)


def same_range(port, what):
    """sf_ret after a restart: the same first_offset, the same range."""
    st = stream("sf_ret")
    got = read_all(port, "sf_ret", ret_last - ret_first + 1
                   if ret_first is not None and ret_last is not None
                   else None)
    ok, why = offs_ok(got, ret_first, ret_last, what)
    check("%s first_offset is the same (%s, was %s) and a consumer from "
          "first sees the same range" % (what, st.get("first_offset"),
                                         ret_first),
          ok and st.get("first_offset") == ret_first, why)


same_range(port, "after a clean restart")

# ---- 8. kill -9: the same, and the .crashed mark
kill9()
port = start()
same_range(port, "after a kill -9")
for sid in (sid_split, sid_ret):
    files = segs(sid)
    newest = max(files) if files else 0
    mark = os.path.join(STREAMS, sid, "%010d.crashed" % newest)
    check("after a kill -9 the newest segment of streams/%s has %s beside "
          "it" % (sid, os.path.basename(mark)), os.path.exists(mark),
          sorted(os.listdir(os.path.join(STREAMS, sid))))
rc = stop()
check("a clean stop after the kill -9 restart (exit %s)" % rc, rc == 0,
      log_text()[-300:])
rc, out = check_data()
want_split = "streams/%s: 501 messages kept, offsets 0 to 500" % sid_split
want_ret = "streams/%s: %s messages kept, offsets %s to %s" % (
    sid_ret, ret_last - ret_first + 1 if ret_first is not None else "?",
    ret_first, ret_last)
lines = out.splitlines()
check("--check-data exits 0 and prints \"%s\"" % want_split,
      rc == 0 and want_split in lines,
      "rc %d: %s" % (rc, [x for x in lines if "streams/" in x][-8:]))
check("--check-data prints \"%s\"" % want_ret, want_ret in lines,
      [x for x in lines if x.startswith("streams/%s" % sid_ret)])

# a byte in the body of offset 1, in the oldest of sf_split's segments
oldest = seg_path(sid_split, min(segs(sid_split)))
data = bytearray(open(oldest, "rb").read())
at = data.find(b"SFMK-split:%08d:" % 1)
check("offset 1's body is in the oldest segment (at byte %d)" % at,
      0 < at < len(data) - 1024, at)
if at > 0:
    at += 500
    data[at] ^= 0x5A
    with open(oldest, "r+b") as f:
        f.seek(at)
        f.write(bytes([data[at]]))
rc, out = check_data()
check("--check-data on a flipped byte %d bytes into %s: exit 1, CORRUPT" %
      (at, os.path.basename(oldest)), rc == 1 and "CORRUPT" in out,
      "rc %d: %s" % (rc, out[-600:]))
port = start()
check("a start says \"corrupt record\"", "corrupt record" in log_text(),
      [x for x in log_text().splitlines() if "stream" in x][-5:])
got = read_all(port, "sf_split", 500)
offs = [g[0] for g in got]
seqs = [seq_of(g[1]) for g in got]
check("a consumer from first gets all but the damaged message, in order",
      offs == [0] + list(range(2, 501)) and seqs == offs,
      "%d got, offsets %s...%s, seqs %s...%s" % (
          len(got), offs[:4], offs[-3:], seqs[:4], seqs[-3:]))

# ---- 9. the filter index: a rare x-stream-filter-value skips blocks
# unread (a Bloom filter per 256 offsets), exactly, before and after a
# restart (rebuilt from the records)
RARE = 10000


def filtered(port, values, unfiltered=False):
    """What a consumer of sf_filter from first with x-stream-filter
    'values' gets, once it has reached the end, and filter_skipped."""
    c = connect(port)
    ch = c.channel()
    ch.basic_qos(prefetch_count=100)
    got = []

    def on(chx, m, p, b):
        got.append(int(b))
        chx.basic_ack(m.delivery_tag)
    ch.basic_consume("sf_filter", on, arguments={
        "x-stream-offset": "first", "x-stream-filter": values,
        "x-stream-match-unfiltered": unfiltered})

    def at_end():
        c.process_data_events(time_limit=0.05)
        ds = info("sf_filter").get("consumer_details", [])
        return ds and ds[0].get("lag") == 0
    until(at_end, 30)
    # lag 0 says the broker has sent the last one, not that it has come:
    # read on until nothing more comes for a while
    while True:
        n = len(got)
        c.process_data_events(time_limit=0.3)
        if len(got) == n:
            break
    skipped = stream("sf_filter").get("filter_skipped")
    c.close()
    return got, skipped


declare(port, "sf_filter")
c = connect(port)
ch = c.channel()
ch.confirm_delivery()
for i in range(20000):
    hd = {"x-stream-filter-value": "rare" if i == RARE else "common"}
    if i == 15000:
        hd = {}
    ch.basic_publish("", "sf_filter", b"%d" % i,
                     pika.BasicProperties(headers=hd))
c.close()
for when in ("", " after a restart"):
    got, skipped = filtered(port, "rare")
    # every block but the rare one's and the unfiltered one's passes
    # unread: 20000 - 256 messages, less the unfiltered one's block
    # which, without x-stream-match-unfiltered, is skipped too
    check("a filter on a rare value%s gets exactly it, and passes over "
          "every block without it unread (filter_skipped %s of %d)" %
          (when, skipped, 20000 - 256), got == [RARE] and
          skipped == 20000 - 256, (got[:5], skipped))
    got, skipped = filtered(port, ["rare"], unfiltered=True)
    # (filter_skipped counts on from the consumer before)
    check("with x-stream-match-unfiltered%s: the rare one and the one "
          "without a value, and the block holding that one is read" % when,
          got == [RARE, 15000] and
          skipped == (20000 - 256) + (20000 - 2 * 256),
          (got[:5], skipped))
    if not when:
        stop()
        port = start()

rc = stop()
check("a clean stop at the end (exit %s)" % rc, rc == 0, log_text()[-300:])
done()
