#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stream's memory bound (stream_memory.py): 1 GiB in one stream, 20
# slow consumers at first with prefetch 100; roostd's RSS grows by less
# than 100 MiB. Prints "stream_memory: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_memory "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
perf=${ROOST_PERF:-$(dirname "$roostd")/../tools/roost-perf}
run_checks "stream_memory.py" $py "$here/stream_memory.py" --roostd "$roostd" \
    --perf "$perf" --dir "$tmp"
if grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/stderr" 2>/dev/null; then
    bad "sanitizers" "$(head -20 "$tmp/stderr")"
fi
echo "stream_memory: $pass passed, $fail failed"
[ $fail -eq 0 ]
