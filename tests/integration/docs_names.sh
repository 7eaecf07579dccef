#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every configuration key, roostd and roostctl option and roostctl
# command that docs/*.md, README.md and the man pages name exists in the
# programs (docs_names.py says how names are recognised). One FAIL per
# name that does not exist; prints "docs_names: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

srcdir=${srcdir:-$here/../..}
build=$(cd "$(dirname "$roostd")/.." && pwd)
out=$($py "$here/docs_names.py" "$roostd" "$build/tools/roostctl/roostctl" \
      "$build/tools/roost-perf" "$srcdir" 2>&1)
rc=$?
while IFS= read -r line; do
    case $line in
        MISSING*) bad "a name the docs use exists" "${line#MISSING }" ;;
    esac
done <<<"$out"
summary=$(printf '%s\n' "$out" | tail -1)
case $summary in
    "docs_names: "*" names checked, 0 missing")
        [ "$rc" -eq 0 ] && ok "every name the docs use exists (${summary#docs_names: })" ||
            bad "docs_names.py" "exit $rc" ;;
    "docs_names: "*) [ "$fail" -gt 0 ] || bad "docs_names.py" "$summary" ;;
    *) bad "docs_names.py runs" "$(printf '%s\n' "$out" | tail -3)" ;;
esac
echo "docs_names: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
