#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of the fuzz targets in tests/fuzz/.

Each target gets a small set of meaningful inputs: the frames a real client
session sends (pika and rabbitmq-c style), every method argument layout,
tables with every field type RabbitMQ uses, content headers with every
property, and a few malformed inputs that must be rejected. The output is
deterministic and committed; run this again after changing it:

    python3 tests/fuzz/make_corpus.py            # rewrite tests/fuzz/corpus/
    python3 tests/fuzz/make_corpus.py --check    # fail if it is out of date

Input layouts (see the comment at the top of each target):
  fuzz_frame   mode, frame_max selector (u16), then the byte stream
  fuzz_method  a method frame payload
  fuzz_table   key length, key, then table entries or array values
  fuzz_props   a content header frame payload
"""

import argparse
import os
import struct
import sys

# ---- wire primitives (0-9-1 section 4.2.5) ----


def u8(v):
    return struct.pack(">B", v)


def u16(v):
    return struct.pack(">H", v)


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


def raw(s):
    return s.encode() if isinstance(s, str) else bytes(s)


def shortstr(s):
    b = raw(s)
    assert len(b) <= 255
    return u8(len(b)) + b


def longstr(s):
    return u32(len(raw(s))) + raw(s)


def bits(*flags):
    """Consecutive bit arguments share an octet, first in the lowest bit."""
    assert len(flags) <= 8
    return u8(sum(1 << i for i, f in enumerate(flags) if f))


# ---- field tables and arrays, with RabbitMQ's type octets ----


def value(kind, v):
    if kind == "t":
        return u8(1 if v else 0)
    if kind in "bBsuIilfdT":
        fmt = {"b": ">b", "B": ">B", "s": ">h", "u": ">H", "I": ">i",
               "i": ">I", "l": ">q", "f": ">f", "d": ">d", "T": ">Q"}[kind]
        return struct.pack(fmt, v)
    if kind == "D":
        scale, unscaled = v
        return u8(scale) + u32(unscaled)
    if kind in "Sx":
        return longstr(v)
    if kind == "A":
        return longstr(array_body(v))
    if kind == "F":
        return longstr(table_body(v))
    if kind == "V":
        return b""
    raise ValueError(kind)


def table_body(entries):
    """entries: (key, kind, value) triples, in order (keys may repeat)."""
    return b"".join(shortstr(k) + raw(kind) + value(kind, v)
                    for k, kind, v in entries)


def array_body(values):
    """values: (kind, value) pairs."""
    return b"".join(raw(kind) + value(kind, v) for kind, v in values)


def table(entries):
    return longstr(table_body(entries))


# ---- frames (0-9-1 section 4.2.3) ----

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8


def frame(ftype, channel, payload, end=0xCE):
    return u8(ftype) + u16(channel) + u32(len(payload)) + payload + u8(end)


def method(cls, meth, *args):
    return u16(cls) + u16(meth) + b"".join(args)


def heartbeat():
    return frame(FRAME_HEARTBEAT, 0, b"")


# ---- content properties (section 4.2.6.1) ----

PROPS = [  # name, flag, encoder
    ("content-type", 15, shortstr),
    ("content-encoding", 14, shortstr),
    ("headers", 13, table),
    ("delivery-mode", 12, u8),
    ("priority", 11, u8),
    ("correlation-id", 10, shortstr),
    ("reply-to", 9, shortstr),
    ("expiration", 8, shortstr),
    ("message-id", 7, shortstr),
    ("timestamp", 6, u64),
    ("type", 5, shortstr),
    ("user-id", 4, shortstr),
    ("app-id", 3, shortstr),
    ("cluster-id", 2, shortstr),
]


def content_header(body_size, props, cls=60, weight=0, extra_words=(),
                   flag_bits=0):
    """A content header payload; props maps property names to values.
    extra_words are continuation flag words; flag_bits is or-ed into the
    first word."""
    flags, fields = flag_bits, b""
    for name, bit, enc in PROPS:
        if name in props:
            flags |= 1 << bit
            fields += enc(props[name])
    if extra_words:
        flags |= 1
    return (u16(cls) + u16(weight) + u64(body_size) + u16(flags) +
            b"".join(u16(w) for w in extra_words) + fields)


# ---- realistic values ----

PIKA_CLIENT_PROPERTIES = [
    ("product", "S", "Pika Python Client Library"),
    ("platform", "S", "Python 3.11.2"),
    ("capabilities", "F", [
        ("authentication_failure_close", "t", True),
        ("basic.nack", "t", True),
        ("connection.blocked", "t", True),
        ("consumer_cancel_notify", "t", True),
        ("publisher_confirms", "t", True),
    ]),
    ("information", "S", "See http://pika.rtfd.org"),
    ("version", "S", "1.3.2"),
    ("connection_name", "S", "worker-7"),
]

RABBITMQ_C_CLIENT_PROPERTIES = [
    ("product", "S", "rabbitmq-c"),
    ("version", "S", "0.13.0"),
    ("platform", "S", "Linux"),
    ("copyright", "S", "Copyright (c) 2007-2014 VMWare Inc, "
     "Tony Garnock-Jones, and Alan Antonuk."),
    ("information", "S", "See https://github.com/alanxz/rabbitmq-c"),
    ("capabilities", "F", [
        ("authentication_failure_close", "t", True),
        ("exchange_exchange_bindings", "t", True),
        ("connection.blocked", "t", True),
        ("consumer_cancel_notify", "t", True),
    ]),
]

SERVER_PROPERTIES = [
    ("capabilities", "F", [
        ("publisher_confirms", "t", True),
        ("exchange_exchange_bindings", "t", True),
        ("basic.nack", "t", True),
        ("consumer_cancel_notify", "t", True),
        ("connection.blocked", "t", True),
        ("consumer_priorities", "t", True),
        ("authentication_failure_close", "t", True),
        ("per_consumer_qos", "t", True),
        ("direct_reply_to", "t", True),
    ]),
    ("cluster_name", "S", "roost@localhost"),
    ("copyright", "S", "Copyright (c) the Roost authors"),
    ("information", "S", "Licensed under the MPL 2.0"),
    ("platform", "S", "C / libevent"),
    ("product", "S", "Roost"),
    ("version", "S", "0.1.0"),
]

QUEUE_ARGUMENTS = [
    ("x-message-ttl", "I", 60000),
    ("x-expires", "I", 1800000),
    ("x-max-length", "l", 10000),
    ("x-max-length-bytes", "l", 1 << 30),
    ("x-overflow", "S", "reject-publish"),
    ("x-dead-letter-exchange", "S", "dlx"),
    ("x-dead-letter-routing-key", "S", "tasks.dead"),
    ("x-max-priority", "B", 10),
    ("x-queue-type", "S", "classic"),
    ("x-single-active-consumer", "t", True),
]

# One of each of the 17 types, in table.h's order.
EVERY_TYPE = [
    ("bool", "t", True),
    ("int8", "b", -128),
    ("uint8", "B", 255),
    ("int16", "s", -32768),
    ("uint16", "u", 65535),
    ("int32", "I", -2147483648),
    ("uint32", "i", 4294967295),
    ("int64", "l", -(1 << 63)),
    ("float", "f", 1.5),
    ("double", "d", -2.25),
    ("decimal", "D", (2, 31415)),
    ("longstr", "S", "hello, world"),
    ("bytes", "x", b"\x00\x01\xfe\xff"),
    ("array", "A", [("I", 1), ("S", "two"), ("t", False)]),
    ("timestamp", "T", 1700000000),
    ("table", "F", [("inner", "S", "yes"), ("n", "l", 42)]),
    ("void", "V", None),
]

EVERY_TYPE_ARRAY = [(kind, v) for _, kind, v in EVERY_TYPE]

NESTED = [
    ("x-match", "S", "all"),
    ("matrix", "A", [
        ("A", [("I", 1), ("I", 2)]),
        ("A", []),
        ("F", [("deep", "A", [("F", EVERY_TYPE), ("V", None)])]),
    ]),
    ("config", "F", [
        ("limits", "F", [("rate", "d", 0.5), ("burst", "u", 100)]),
        ("tags", "A", [("S", "a"), ("S", "b"), ("x", b"\xff")]),
        ("empty", "F", []),
    ]),
]

ALL_PROPS = {
    "content-type": "application/json",
    "content-encoding": "utf-8",
    "headers": [
        ("x-retry-count", "l", 3),
        ("x-first-death-reason", "S", "rejected"),
        ("trace", "F", [("span", "S", "5f2b"), ("sampled", "t", True)]),
        ("x-death", "A", [("F", [("count", "l", 1),
                                 ("queue", "S", "tasks"),
                                 ("time", "T", 1700000000)])]),
    ],
    "delivery-mode": 2,
    "priority": 5,
    "correlation-id": "c0ffee-42",
    "reply-to": "amq.rabbitmq.reply-to",
    "expiration": "60000",
    "message-id": "msg-0001",
    "timestamp": 1700000000,
    "type": "order.created",
    "user-id": "guest",
    "app-id": "roost-tests",
    "cluster-id": "cluster-a",
}

BODY = b'{"order": 1234, "items": ["apple", "pear"], "total": 7.5}\n'


def nested_tables(levels):
    """A table whose entries nest 'levels' levels deep in all."""
    t = [("leaf", "t", True)]
    for i in range(levels - 1):
        t = [("l%d" % (levels - 1 - i), "F", t)]
    return t


# ---- method payloads (client methods first, then server ones) ----

M = {}  # name -> payload
M["connection.start-ok"] = method(
    10, 11, table(PIKA_CLIENT_PROPERTIES), shortstr("PLAIN"),
    longstr(b"\x00guest\x00guest"), shortstr("en_US"))
M["connection.start-ok-amqplain"] = method(
    10, 11, table(RABBITMQ_C_CLIENT_PROPERTIES), shortstr("AMQPLAIN"),
    longstr(table_body([("LOGIN", "S", "guest"),
                        ("PASSWORD", "S", "guest")])),
    shortstr("en_US"))
M["connection.secure-ok"] = method(10, 21, longstr(b"\x00guest\x00guest"))
M["connection.tune-ok"] = method(10, 31, u16(2047), u32(131072), u16(60))
M["connection.open"] = method(10, 40, shortstr("/"), shortstr(""),
                              bits(False))
M["connection.close"] = method(10, 50, u16(200), shortstr("Normal shutdown"),
                               u16(0), u16(0))
M["connection.close-ok"] = method(10, 51)
M["connection.update-secret-ok"] = method(10, 71)
M["channel.open"] = method(20, 10, shortstr(""))
M["channel.flow"] = method(20, 20, bits(True))
M["channel.flow-ok"] = method(20, 21, bits(True))
M["channel.close"] = method(20, 40, u16(406),
                            shortstr("PRECONDITION_FAILED - unknown "
                                     "delivery tag 7"), u16(60), u16(80))
M["channel.close-ok"] = method(20, 41)
M["access.request"] = method(30, 10, shortstr("/data"),
                             bits(False, False, True, True, True))
M["exchange.declare"] = method(
    40, 10, u16(0), shortstr("logs"), shortstr("topic"),
    bits(False, True, False, False, False),
    table([("alternate-exchange", "S", "unrouted")]))
M["exchange.delete"] = method(40, 20, u16(0), shortstr("logs"),
                              bits(True, False))
M["exchange.bind"] = method(
    40, 30, u16(0), shortstr("audit"), shortstr("logs"), shortstr("#"),
    bits(False), table([("x-match", "S", "any"), ("level", "S", "error")]))
M["exchange.unbind"] = method(40, 40, u16(0), shortstr("audit"),
                              shortstr("logs"), shortstr("#"), bits(True),
                              table([]))
M["queue.declare"] = method(50, 10, u16(0), shortstr("tasks"),
                            bits(False, True, False, False, False),
                            table(QUEUE_ARGUMENTS))
M["queue.declare-server-named"] = method(50, 10, u16(0), shortstr(""),
                                         bits(False, False, True, True,
                                              False), table([]))
M["queue.bind"] = method(50, 20, u16(0), shortstr("tasks"), shortstr("logs"),
                         shortstr("*.error"), bits(False), table([]))
M["queue.purge"] = method(50, 30, u16(0), shortstr("tasks"), bits(False))
M["queue.delete"] = method(50, 40, u16(0), shortstr("tasks"),
                           bits(True, True, False))
M["queue.unbind"] = method(50, 50, u16(0), shortstr("tasks"),
                           shortstr("logs"), shortstr("*.error"), table([]))
M["basic.qos"] = method(60, 10, u32(0), u16(10), bits(False))
M["basic.consume"] = method(60, 20, u16(0), shortstr("tasks"),
                            shortstr("ctag-1"),
                            bits(False, False, False, False),
                            table([("x-priority", "I", 5),
                                   ("x-cancel-on-ha-failover", "t", True)]))
M["basic.cancel"] = method(60, 30, shortstr("ctag-1"), bits(False))
M["basic.publish"] = method(60, 40, u16(0), shortstr("logs"),
                            shortstr("app.error"), bits(True, False))
M["basic.get"] = method(60, 70, u16(0), shortstr("tasks"), bits(True))
M["basic.ack"] = method(60, 80, u64(1), bits(False))
M["basic.ack-multiple"] = method(60, 80, u64(0xFFFFFFFFFFFFFFFF), bits(True))
M["basic.reject"] = method(60, 90, u64(3), bits(False))
M["basic.recover-async"] = method(60, 100, bits(True))
M["basic.recover"] = method(60, 110, bits(True))
M["basic.nack"] = method(60, 120, u64(2), bits(True, True))
M["tx.select"] = method(90, 10)
M["tx.commit"] = method(90, 20)
M["tx.rollback"] = method(90, 30)
M["confirm.select"] = method(85, 10, bits(False))
# What a server sends; the codec decodes them all the same.
M["connection.start"] = method(10, 10, u8(0), u8(9), table(SERVER_PROPERTIES),
                               longstr("PLAIN AMQPLAIN"), longstr("en_US"))
M["connection.tune"] = method(10, 30, u16(2047), u32(131072), u16(60))
M["connection.open-ok"] = method(10, 41, shortstr(""))
M["connection.blocked"] = method(10, 60, shortstr("low on memory"))
M["connection.update-secret"] = method(10, 70, longstr("new-token"),
                                       shortstr("refresh"))
M["queue.declare-ok"] = method(50, 11, shortstr("amq.gen-JzTY20BRgKO"),
                               u32(12), u32(1))
M["basic.consume-ok"] = method(60, 21, shortstr("amq.ctag-5X1v"))
M["basic.deliver"] = method(60, 60, shortstr("ctag-1"), u64(1), bits(True),
                            shortstr("logs"), shortstr("app.error"))
M["basic.get-ok"] = method(60, 71, u64(9), bits(False), shortstr(""),
                           shortstr("tasks"), u32(41))
M["basic.get-empty"] = method(60, 72, shortstr(""))
M["basic.return"] = method(60, 50, u16(312), shortstr("NO_ROUTE"),
                           shortstr("logs"), shortstr("nowhere"))

# Malformed method payloads, each with the error it must give.
M_BAD = {
    "bad-short": b"\x00\x3c\x00",                       # METHOD_SHORT
    "bad-unknown-class": method(99, 10),                # UNKNOWN_CLASS
    "bad-unknown-method": method(60, 200),              # UNKNOWN_METHOD
    "bad-trailing": M["basic.ack"] + b"\x00",           # TRAILING
    "bad-truncated-shortstr": method(60, 40, u16(0), b"\x10logs"),
    "bad-table-type": method(50, 10, u16(0), shortstr("q"), bits(False),
                             longstr(b"\x01kU\x00\x00\x00\x00")),
    "bad-table-too-deep": method(50, 10, u16(0), shortstr("q"), bits(False),
                                 table(nested_tables(17))),
    "bad-table-length": method(40, 10, u16(0), shortstr("x"),
                               shortstr("direct"), bits(False),
                               u32(1000) + table_body(QUEUE_ARGUMENTS)),
    "unused-bits-set": method(60, 40, u16(0), shortstr("logs"),
                              shortstr("k"), u8(0xFD)),
}


# ---- fuzz_frame: byte streams ----

def frame_input(stream, header=True, frame_max=131072, raw_frame_max=None):
    """Prefix a stream with fuzz_frame's mode and frame_max selector."""
    mode = 0x01 if header else 0x00
    if raw_frame_max is not None:
        mode |= 0x02
        sel = raw_frame_max
    elif frame_max == 0:
        sel = 0
    else:
        assert frame_max % 4 == 0 and 4096 <= frame_max <= 131072
        sel = frame_max // 4
    return u8(mode) + u16(sel) + (PROTOCOL_HEADER if header else b"") + stream


def raw_stream(data):
    """A stream whose first 8 bytes are checked as the protocol header."""
    return u8(0x01) + u16(131072 // 4) + data


def mframe(channel, name):
    return frame(FRAME_METHOD, channel, M[name])


def publish(channel, body, props, frame_max=131072):
    """basic.publish, its content header and body frames split to fit."""
    out = mframe(channel, "basic.publish")
    out += frame(FRAME_HEADER, channel, content_header(len(body), props))
    room = frame_max - 8
    for i in range(0, len(body), room):
        out += frame(FRAME_BODY, channel, body[i:i + room])
    return out


def session_pika():
    s = mframe(0, "connection.start-ok") + mframe(0, "connection.tune-ok")
    s += mframe(0, "connection.open") + mframe(1, "channel.open")
    for name in ("exchange.declare", "queue.declare", "queue.bind",
                 "basic.qos", "basic.consume", "confirm.select"):
        s += mframe(1, name)
    s += publish(1, BODY, ALL_PROPS)
    s += publish(1, b"", {"delivery-mode": 1})
    s += heartbeat()
    for name in ("basic.ack", "basic.nack", "basic.reject", "basic.cancel",
                 "channel.close"):
        s += mframe(1, name)
    s += mframe(2, "channel.open")
    for name in ("tx.select", "basic.publish"):
        s += mframe(2, name)
    s += frame(FRAME_HEADER, 2,
               content_header(4, {"content-type": "text/plain"}))
    s += frame(FRAME_BODY, 2, b"ping")
    for name in ("tx.commit", "tx.rollback", "channel.close-ok"):
        s += mframe(2, name)
    s += mframe(0, "connection.close")
    return s


def session_rabbitmq_c():
    s = mframe(0, "connection.start-ok-amqplain")
    s += frame(FRAME_METHOD, 0, method(10, 31, u16(0), u32(4096), u16(0)))
    s += mframe(0, "connection.open") + mframe(1, "channel.open")
    s += mframe(1, "exchange.bind") + mframe(1, "queue.declare-server-named")
    s += mframe(1, "basic.get") + mframe(1, "basic.recover")
    s += publish(1, bytes(range(256)) * 20, {"content-type": "x/bin",
                                             "delivery-mode": 2},
                 frame_max=4096)
    s += mframe(1, "queue.purge") + mframe(1, "queue.unbind")
    s += mframe(1, "queue.delete") + mframe(1, "exchange.unbind")
    s += mframe(1, "exchange.delete") + mframe(1, "channel.flow")
    s += mframe(0, "connection.close") + mframe(0, "connection.close-ok")
    return s


def server_stream():
    s = mframe(0, "connection.start") + mframe(0, "connection.tune")
    s += mframe(0, "connection.open-ok") + mframe(1, "basic.consume-ok")
    s += mframe(1, "basic.deliver")
    s += frame(FRAME_HEADER, 1, content_header(len(BODY), ALL_PROPS))
    s += frame(FRAME_BODY, 1, BODY)
    s += mframe(1, "basic.get-ok") + mframe(1, "basic.get-empty")
    s += mframe(1, "basic.return") + mframe(0, "connection.blocked")
    return s


FRAME = {
    "session-pika": frame_input(session_pika()),
    "session-rabbitmq-c-4096": frame_input(session_rabbitmq_c(),
                                           frame_max=4096),
    "server-frames": frame_input(server_stream(), header=False, frame_max=0),
    "publish-no-header": frame_input(publish(3, BODY * 3, ALL_PROPS),
                                     header=False),
    "heartbeats": frame_input(heartbeat() * 3, header=False),
    "unused-bits": frame_input(frame(FRAME_METHOD, 1, M_BAD["unused-bits-set"])
                               + heartbeat()),
    "continuation-word": frame_input(
        mframe(1, "basic.publish")
        + frame(FRAME_HEADER, 1, content_header(2, {"priority": 1},
                                                extra_words=(1, 0)))
        + frame(FRAME_BODY, 1, b"hi")),
    "header-incomplete": raw_stream(b"AMQP\x00\x00"),
    # Each malformed stream must stop where a broker would close.
    "bad-protocol-version": raw_stream(b"AMQP\x00\x00\x09\x00" +
                                      mframe(0, "connection.start-ok")),
    "bad-protocol-amqp10": raw_stream(b"AMQP\x00\x01\x00\x00"),
    "bad-protocol-http": raw_stream(b"GET / HTTP/1.1\r\n\r\n"),
    "bad-frame-end": frame_input(frame(FRAME_METHOD, 0,
                                       M["connection.tune-ok"], end=0)),
    "bad-frame-type": frame_input(frame(4, 1, b"\x00\x01")),
    "bad-heartbeat-payload": frame_input(frame(FRAME_HEARTBEAT, 0, b"\x00")),
    "bad-heartbeat-channel": frame_input(frame(FRAME_HEARTBEAT, 1, b"")),
    "bad-frame-too-large": frame_input(
        frame(FRAME_BODY, 1, b"x" * 4089)[:24], frame_max=4096),
    "bad-frame-max-7": frame_input(heartbeat(), header=False,
                                   raw_frame_max=7),
    "frame-max-8": frame_input(heartbeat() * 2, header=False, raw_frame_max=8),
    "bad-truncated-frame": frame_input(mframe(0, "connection.start-ok")[:40]),
    "bad-method-trailing": frame_input(frame(FRAME_METHOD, 1,
                                             M_BAD["bad-trailing"])),
    "bad-method-unknown": frame_input(frame(FRAME_METHOD, 1,
                                            M_BAD["bad-unknown-method"])),
    "bad-header-weight": frame_input(
        mframe(1, "basic.publish")
        + frame(FRAME_HEADER, 1, content_header(0, {}, weight=1))),
    "bad-header-class": frame_input(
        frame(FRAME_HEADER, 1, content_header(0, {}, cls=50))),
}


# ---- fuzz_table: key, then entries or values ----

def table_input(key, body):
    k = raw(key)
    return u8(len(k)) + k + body


TABLE = {
    "every-type": table_input("decimal", table_body(EVERY_TYPE)),
    "every-type-array": table_input("", array_body(EVERY_TYPE_ARRAY)),
    "nested": table_input("config", table_body(NESTED)),
    "nested-array": table_input("", array_body(
        [("A", [("A", [("F", NESTED)])]), ("F", [])])),
    "client-properties-pika": table_input(
        "capabilities", table_body(PIKA_CLIENT_PROPERTIES)),
    "client-properties-rabbitmq-c": table_input(
        "product", table_body(RABBITMQ_C_CLIENT_PROPERTIES)),
    "server-properties": table_input("version",
                                     table_body(SERVER_PROPERTIES)),
    "queue-arguments": table_input("x-queue-type",
                                   table_body(QUEUE_ARGUMENTS)),
    "headers-binding": table_input("x-match", table_body(
        [("x-match", "S", "all"), ("format", "S", "pdf"),
         ("type", "S", "report")])),
    "message-headers": table_input("x-death",
                                   table_body(ALL_PROPS["headers"])),
    "duplicate-keys": table_input("k", table_body(
        [("k", "I", 1), ("j", "t", False), ("k", "S", "second")])),
    "empty-key": table_input("", table_body([("", "V", None),
                                             ("", "b", 1)])),
    "key-with-nul": table_input("a\x00b", table_body(
        [("a\x00b", "I", 1), ("a", "I", 2)])),
    "max-key": table_input("k" * 255,
                           table_body([("k" * 255, "S", "v" * 300)])),
    "empty": table_input("missing", b""),
    "deep-16": table_input("l1", table_body(nested_tables(16))),
    "array-deep-16": table_input("", array_body(
        [("A", [("A", [("A", [("A", [("A", [("A", [("A", [("A", [
            ("A", [("A", [("A", [("A", [("A", [("A", [("A", [("I", 7)])
            ])])])])])])])])])])])])])])])),
    "floats": table_input("nan", table_body(
        [("nan", "f", float("nan")), ("inf", "d", float("inf")),
         ("neg-zero", "d", -0.0), ("tiny", "f", 1e-40)]) +
        b"\x04snanf\x7f\x80\x00\x01"),  # a signalling NaN, bit for bit
    "bool-not-0-or-1": table_input("t", b"\x01tt\x02\x01ut\xff"),
    "decimal-scales": table_input("d", table_body(
        [("d", "D", (0, 0)), ("e", "D", (255, 0xFFFFFFFF))])),
    # Invalid: each must be refused by both validators.
    "bad-deep-17": table_input("l1", table_body(nested_tables(17))),
    "bad-type-U": table_input("", b"\x01kU\x00\x01"),
    "bad-type-L": table_input("", b"\x01kL" + u64(1)),
    "bad-truncated-longstr": table_input("", b"\x01kS" + u32(100) + b"abc"),
    "bad-nested-length": table_input("", b"\x01kF" + u32(50) +
                                     table_body([("a", "t", True)])),
    "bad-truncated-key": table_input("", b"\x10abc"),
    "bad-missing-value": table_input("", b"\x01kI\x00\x00"),
}


# ---- fuzz_props: content header payloads ----

PROPS_SEEDS = {
    "all-properties": content_header(len(BODY), ALL_PROPS),
    "no-properties": content_header(0, {}),
    "persistent-text": content_header(5, {"content-type": "text/plain",
                                          "delivery-mode": 2}),
    "headers-every-type": content_header(1, {"headers": EVERY_TYPE}),
    "headers-nested": content_header(1, {"headers": NESTED,
                                         "priority": 9}),
    "body-size-max": content_header(0xFFFFFFFFFFFFFFFF,
                                    {"timestamp": 0xFFFFFFFFFFFFFFFF,
                                     "expiration": "0"}),
    "odd-properties": content_header(
        1, {"content-encoding": "gzip", "reply-to": "replies",
            "message-id": "", "user-id": "guest", "cluster-id": "c"}),
    "continuation-word": content_header(3, {"app-id": "x"},
                                        extra_words=(0,)),
    "continuation-words": content_header(3, {"content-type": "a/b"},
                                         extra_words=(1, 1, 0)),
    "continuation-only": content_header(0, {}, extra_words=(0,)),
    # Invalid.
    "bad-short": content_header(0, {})[:13],
    "bad-class": content_header(0, {}, cls=50),
    "bad-weight": content_header(0, {}, weight=1),
    "bad-reserved-bit": content_header(0, {}, flag_bits=0x0002),
    "bad-continuation-property": content_header(0, {}, extra_words=(0x8000,)),
    "bad-continuation-truncated": content_header(0, {})[:12] + u16(1),
    "bad-trailing": content_header(0, {"priority": 1}) + b"\x00",
    "bad-truncated": content_header(0, ALL_PROPS)[:-3],
    "bad-headers-type": content_header(0, {})[:12] + u16(1 << 13) +
    longstr(b"\x01kZ"),
}


CORPUS = {
    "fuzz_frame": FRAME,
    "fuzz_method": dict(M, **M_BAD),
    "fuzz_table": TABLE,
    "fuzz_props": PROPS_SEEDS,
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "corpus"),
                    help="corpus directory (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="compare with the corpus instead of writing it")
    args = ap.parse_args()

    stale = []
    for target, seeds in CORPUS.items():
        d = os.path.join(args.out, target)
        if not args.check:
            os.makedirs(d, exist_ok=True)
        have = set(os.listdir(d)) if os.path.isdir(d) else set()
        for name in sorted(have - set(seeds)):
            if args.check:
                stale.append(os.path.join(d, name) + " (not generated)")
            else:
                os.remove(os.path.join(d, name))
        for name, data in sorted(seeds.items()):
            path = os.path.join(d, name)
            if args.check:
                try:
                    with open(path, "rb") as f:
                        same = f.read() == data
                except FileNotFoundError:
                    same = False
                if not same:
                    stale.append(path)
            else:
                with open(path, "wb") as f:
                    f.write(data)
    if stale:
        print("corpus out of date; run %s:\n  %s" %
              (sys.argv[0], "\n  ".join(stale)), file=sys.stderr)
        return 1
    if not args.check:
        for target, seeds in CORPUS.items():
            size = sum(len(v) for v in seeds.values())
            print("%s: %d seeds, %d bytes" % (target, len(seeds), size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
