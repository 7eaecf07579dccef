# SPDX-License-Identifier: Apache-2.0
"""The routing plan shared by the Python interop scripts.

One exchange of each type, queues bound to them so that some messages reach
one queue, some several, some none, and the list of bodies every queue must
receive, exactly once and in publishing order.
"""
import os
import sys
import time

N = 100  # messages published to each exchange


def prefix(client):
    """Names unique to this run, so a reference broker can be reused."""
    return "interop.%s.%d.%d" % (client, os.getpid(), int(time.time()))


def make_plan(pfx, n=N):
    ex = {t: "%s.%s" % (pfx, t) for t in ("direct", "fanout", "topic", "headers")}
    q = lambda s: "%s.q.%s" % (pfx, s)  # noqa: E731
    exchanges = [(ex[t], t) for t in ("direct", "fanout", "topic", "headers")]
    bindings = [
        # (queue, exchange, routing key, arguments)
        (q("d1"), ex["direct"], "red", None),
        (q("d2"), ex["direct"], "red", None),
        (q("d2"), ex["direct"], "green", None),
        (q("f1"), ex["fanout"], "", None),
        (q("f2"), ex["fanout"], "ignored", None),
        (q("t1"), ex["topic"], "a.*.c", None),
        (q("t2"), ex["topic"], "a.#", None),
        (q("t2"), ex["topic"], "#.c", None),  # overlaps a.#: still one copy
        (q("h1"), ex["headers"], "", {"x-match": "all", "h1": "v1", "h2": "v2"}),
        (q("h2"), ex["headers"], "", {"x-match": "any", "h1": "v1", "h3": "v3"}),
    ]
    queues = []
    for b in bindings:
        if b[0] not in queues:
            queues.append(b[0])
    expected = {name: [] for name in queues}
    messages = []  # (exchange, routing key, headers, body)
    direct_keys = ["red", "green", "blue"]
    topic_keys = ["a.b.c", "a.x.y", "b.b.c", "z"]
    header_sets = [{"h1": "v1", "h2": "v2"}, {"h1": "v1"},
                   {"h3": "v3", "h2": "v2"}, {"h2": "v2"}]
    for i in range(n):
        k = direct_keys[i % 3]
        body = "direct:%d:%s" % (i, k)
        messages.append((ex["direct"], k, None, body))
        if k == "red":
            expected[q("d1")].append(body)
        if k in ("red", "green"):
            expected[q("d2")].append(body)
    for i in range(n):
        body = "fanout:%d" % i
        messages.append((ex["fanout"], "k%d" % i, None, body))
        expected[q("f1")].append(body)
        expected[q("f2")].append(body)
    for i in range(n):
        k = topic_keys[i % 4]
        body = "topic:%d:%s" % (i, k)
        messages.append((ex["topic"], k, None, body))
        if k == "a.b.c":
            expected[q("t1")].append(body)
        if k in ("a.b.c", "a.x.y", "b.b.c"):
            expected[q("t2")].append(body)
    for i in range(n):
        h = header_sets[i % 4]
        body = "headers:%d:%s" % (i, ",".join(sorted(h)))
        messages.append((ex["headers"], "", dict(h), body))
        if i % 4 == 0:
            expected[q("h1")].append(body)
        if i % 4 in (0, 1, 2):
            expected[q("h2")].append(body)
    return exchanges, queues, bindings, messages, expected


def compare(queue, got, want):
    """Return a description of how got differs from want, or None."""
    if got == want:
        return None
    seen = set()
    dups = sorted({repr(b) for b in got if repr(b) in seen or seen.add(repr(b))})
    missing = [b for b in want if b not in got]
    extra = [b for b in got if b not in want]
    msg = "queue %s: got %d messages, expected %d" % (queue, len(got), len(want))
    if dups:
        msg += "; duplicated: %s" % dups[:5]
    if missing:
        msg += "; missing: %s" % missing[:5]
    if extra:
        msg += "; unexpected: %s" % extra[:5]
    if not (dups or missing or extra):
        for i, (a, b) in enumerate(zip(got, want)):
            if a != b:
                msg += "; out of order at %d: got %r, expected %r" % (i, a, b)
                break
    return msg


def port_arg():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.stderr.write("usage: %s PORT\n" % sys.argv[0])
        sys.exit(2)
    return int(sys.argv[1])


def summary(name, failures):
    """Print the last line of a script and return its exit status."""
    if failures:
        print("%s: %d problem(s)" % (name, len(failures)))
        return 1
    print("%s: all checks passed" % name)
    return 0


def run_main(main):
    """Exit with main()'s status; an exception is one FAIL line."""
    try:
        sys.exit(main())
    except Exception as e:
        print("FAIL: %s: %s" % (type(e).__name__, str(e) or repr(e)), flush=True)
        sys.exit(1)
