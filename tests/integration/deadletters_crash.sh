#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A replay of dead letters killed midway (deadletters_crash.py): 5,000
# persistent dead letters replayed at a rate into a durable target,
# roostd killed with SIGKILL at random moments (three rounds): after each
# restart every message is in the dead-letter queue or the target,
# exactly once, both in order; roostctl replay_dead_letters killed while
# it follows: the replay goes on in the broker. Prints
# "deadletters_crash: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "deadletters_crash: pika for /usr/bin/python3 is missing; skipped"
    exit 77
fi
ctl_bin=${ROOSTCTL_BIN:-$(dirname "$roostd")/../tools/roostctl/roostctl}
run_checks "deadletters_crash.py" $py "$here/deadletters_crash.py" \
    --roostd "$roostd" --roostctl "$ctl_bin" --dir "$tmp"
if grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/stderr" 2>/dev/null; then
    bad "sanitizers" "$(head -20 "$tmp/stderr")"
fi
echo "deadletters_crash: $pass passed, $fail failed"
[ $fail -eq 0 ]
