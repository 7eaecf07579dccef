#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stream under kill -9 at random moments (stream_crash.py): publishing
# with confirms and consuming with a name; after each of six restarts
# no confirmed message is lost, offsets are contiguous and the named
# consumer never skips. Prints "stream_crash: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_crash "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
run_checks "stream_crash.py" $py "$here/stream_crash.py" --roostd "$roostd" \
    --dir "$tmp"
if grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/stderr" 2>/dev/null; then
    bad "sanitizers" "$(head -20 "$tmp/stderr")"
fi
echo "stream_crash: $pass passed, $fail failed"
[ $fail -eq 0 ]
