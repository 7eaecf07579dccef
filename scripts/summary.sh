#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Add up the results of a `make check` run in BUILD_DIR: check programs
# count their checks (from check's "N%: Checks: X, Failures: Y, Errors: Z"
# lines), scripts that print "N passed, N failed" count those, and any
# other test counts as one. EXTRA_PASS/EXTRA_FAIL add whole steps
# (distcheck, fuzzing). Prints "roost: N passed, N failed" and fails if
# anything failed or nothing ran.
#   scripts/summary.sh BUILD_DIR [EXTRA_PASS EXTRA_FAIL]
set -uo pipefail
dir=$1
pass=${2:-0}
fail=${3:-0}

while IFS= read -r trs; do
    log=${trs%.trs}.log
    result=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
    checks=$(grep -E '^[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$log" 2>/dev/null |
             awk -F'[:,] *' '{c+=$3; f+=$5; e+=$7} END {if (NR) print c, f + e}')
    plain=$(grep -E '^([A-Za-z_-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" 2>/dev/null | tail -n 1 |
            sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2 \3/')
    p=0 f=0
    if [ -n "$checks" ]; then
        set -- $checks; p=$(($1 - $2)); f=$2
    elif [ -n "$plain" ]; then
        set -- $plain; p=$1; f=$2
    elif [ "$result" = PASS ] || [ "$result" = SKIP ]; then
        p=1
    fi
    # A program that failed without counting a failure still failed.
    if [ "$result" != PASS ] && [ "$result" != SKIP ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    pass=$((pass + p)); fail=$((fail + f))
done < <(find "$dir" -name '*.trs' ! -path '*/_build/*' | sort)

echo "roost: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
