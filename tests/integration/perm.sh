#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The permission matrix: roostd loads perm_matrix.py's definitions (users
# with SHA-256 password hashes, vhosts pm-a and pm-b, permissions) with
# load_definitions, perm_matrix.py runs every operation as every user, and
# each answer (ok, or reply code and text) must be the one the reference
# RabbitMQ 3.10.8 gave, recorded in perm_matrix.expected (regenerate it
# with: perm_matrix.py --port 5699 --setup-http 15699 --cleanup, on a
# RabbitMQ with the management plugin). One PASS/FAIL per case; a FAIL
# shows what the reference said and what roostd said.
# Talks AMQP with pika (Debian's python3). Prints "perm: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "perm: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi

$py "$here/perm_matrix.py" --print-definitions > "$tmp/defs.json" ||
    { echo "perm: perm_matrix.py --print-definitions failed"; exit 1; }

if start "$tmp/data" "$tmp/log" --set load_definitions="$tmp/defs.json"; then
    ok starts
    timeout 900 $py "$here/perm_matrix.py" --port "$port" \
        > "$tmp/got" 2> "$tmp/matrix.err"
    rc=$?
    [ $rc -eq 0 ] && ok matrix-runs ||
        bad matrix-runs "exit $rc: $(tail -20 "$tmp/matrix.err")"
    stop && ok stops || bad stops "$(tail -20 "$tmp/stderr")"
else
    bad starts "$(cat "$tmp/stderr" "$tmp/log" 2>/dev/null)"
    : > "$tmp/got"
fi

# Compare by case: "<case-id>: <answer>", in the expected file's order;
# lines roostd's run has that the reference's has not (a setup or
# before/after step that failed) fail as well.
declare -A got=() seen=()
while IFS= read -r line; do
    got[${line%%: *}]=${line#*: }
done < "$tmp/got"
while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    id=${line%%: *} want=${line#*: }
    seen[$id]=1
    if [ -z "${got[$id]+x}" ]; then
        bad "$id" "want '$want', got nothing"
    elif [ "${got[$id]}" = "$want" ]; then
        ok "$id"
    else
        bad "$id" "want '$want', got '${got[$id]}'"
    fi
done < "$here/perm_matrix.expected"
while IFS= read -r line; do
    id=${line%%: *}
    [ -n "${seen[$id]+x}" ] || bad "$id" "not in perm_matrix.expected: '${line#*: }'"
done < "$tmp/got"

echo "perm: $pass passed, $fail failed"
[ $fail -eq 0 ]
