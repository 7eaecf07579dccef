#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start roostd with a 5 MB memory high watermark and run alarm_test.py
# (pika, Debian's python3) against it: publishing with confirms until the
# alarm blocks the publisher, draining, unblocking, nothing confirmed lost.
# Paging is off (a paging ratio above 1, as in RabbitMQ), or the queue
# would page its messages out instead (paging.sh tests that).
set -u
here=$(cd "$(dirname "$0")" && pwd)
roostd=${ROOSTD:-$here/../../broker/roostd}
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

"$roostd" --port 0 --data-dir "$tmp/data" --log-file "$tmp/log" \
    --set vm_memory_high_watermark.absolute=5000000 \
    --set vm_memory_high_watermark_paging_ratio=1.5 2>"$tmp/stderr" &
pid=$!
for _ in $(seq 1 200); do
    grep -q "ready for connections" "$tmp/log" 2>/dev/null && break
    sleep 0.05
done
port=$(sed -n 's/.*ready for connections on port \([0-9]*\).*/\1/p' "$tmp/log")
if [ -z "$port" ]; then
    echo "alarm: roostd did not start"; cat "$tmp/stderr" "$tmp/log"
    echo "alarm: 0 passed, 1 failed"; exit 1
fi
env -u PYTHONHOME -u PYTHONPATH /usr/bin/python3 "$here/alarm_test.py" "$port"
rc=$?
grep -E "alarm|blocked" "$tmp/log"
kill -TERM "$pid"; wait "$pid"; src=$?; pid=
if [ $src -ne 0 ]; then
    echo "alarm: roostd exited $src"; tail -20 "$tmp/stderr"; rc=1
fi
exit $rc
