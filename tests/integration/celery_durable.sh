#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run celery_durable.py (Debian's python3, python3-celery): confirmed,
# persistent Celery tasks survive kill -9 of roostd, before any worker ran
# and while a worker holds acks_late tasks; roostd exits 0 on SIGTERM.
# The script starts, kills and restarts its own roostd ($ROOSTD) on a free
# port with a fresh data dir. Prints "celery_durable: N passed, M failed";
# exits 77 (skip) only when celery is not importable.
set -u
here=$(cd "$(dirname "$0")" && pwd)
roostd=${ROOSTD:-$here/../../broker/roostd}
tmp=$(mktemp -d)
# The script kills its processes (each in its own process group) itself;
# this is for when it is killed: every group it started is in $tmp/pgids.
cleanup() {
    if [ -f "$tmp/pgids" ]; then
        while read -r g; do
            kill -KILL -- "-$g" 2>/dev/null
        done < "$tmp/pgids"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
py() { env -u PYTHONHOME -u PYTHONPATH /usr/bin/python3 "$@"; }

if ! out=$(py -c 'import celery, kombu' 2>&1); then
    echo "celery_durable: skipped: celery is not importable by /usr/bin/python3:" \
        "$(echo "$out" | tail -1)"
    exit 77
fi
timeout -k 10 200 env -u PYTHONHOME -u PYTHONPATH /usr/bin/python3 \
    "$here/celery_durable.py" "$roostd" "$tmp"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "celery_durable: timed out after 150 s"
    echo "celery_durable: 0 passed, 1 failed"
    rc=1
elif [ $rc -eq 77 ]; then
    rc=1  # celery imported above: a skip now would hide a failure
fi
exit $rc
