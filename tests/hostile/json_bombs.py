# SPDX-License-Identifier: Apache-2.0
"""Huge and deeply nested JSON (issue 22, point 16) on the management
API: arrays nested 100,000 deep, objects nested 100,000 deep, a string
of 10 MB of backslash escapes, and a 15 MB definitions document of
200,000 empty queue objects. Each answers an error (400 for what is
malformed, never a 5xx or a dropped connection) within 5 s, and the
broker stays up, serves a control client within 100 ms and stays under
its RSS bound."""
import time

from hostile import Api, Broker, check, check_healthy, run


def post(api, name, path, raw):
    t0 = time.monotonic()
    try:
        st, body = api.call("POST", path, raw=raw)
    except OSError as e:
        st, body = None, str(e)
    took = time.monotonic() - t0
    check(name + ": refused with 400", st == 400, "%s %s" % (st, body))
    check(name + ": within 5 s", took < 5, "%.2f s" % took)


def main():
    b = Broker(mgmt=True).start()
    api = Api(b.mgmt_port)
    deep = 100000
    post(api, "nested arrays", "definitions",
         b"[" * deep + b"]" * deep)
    post(api, "nested objects", "definitions",
         b'{"a":' * deep + b"1" + b"}" * deep)
    post(api, "escaped string", "definitions",
         b'{"vhosts":"' + b"\\\\" * (5 * 1000 * 1000) + b'"}')
    queues = b",".join([b"{}"] * 200000)
    post(api, "200,000 empty queues", "definitions",
         b'{"queues":[' + queues + b"]}")
    check_healthy("json", b, 160 * 1024)
    st, _ = api.call("GET", "overview")
    check("json: the API still answers", st == 200, str(st))
    b.stop()


run(main)
