#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# roostd as systemd runs it, without systemd (service.py, pika): the
# notify protocol (READY, RELOADING, STOPPING, WATCHDOG,
# EXTEND_TIMEOUT_USEC) against a socket the test listens on, and SIGHUP
# reloads of the log level, a watermark and the certificates while
# clients stay connected, all or nothing; every confirmed message kept
# through reloads, a stop and a restart. Prints "service: N passed, M
# failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "service: pika for /usr/bin/python3 is missing; skipped"
    exit 77
fi
sh "$here/tls-certs.sh" "$tmp/certs" >/dev/null
mkdir -p "$tmp/work"
run_checks "service.py" $py "$here/service.py" "$roostd" "$tmp/certs" \
    "$tmp/work"
if grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/work/stderr" \
        2>/dev/null; then
    bad "sanitizers" "$(head -20 "$tmp/work/stderr")"
fi
echo "service: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
