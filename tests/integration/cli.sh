#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# roostd's command line and process behaviour: --version, --help, -t,
# configuration errors naming file and line, unknown options, --set,
# a config file applied, SIGHUP reopening the log file, SIGTERM exiting 0.
# Prints "cli: N passed, M failed".
set -u
roostd=${ROOSTD:-$(dirname "$0")/../../broker/roostd}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
pid=
pass=0 fail=0

ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

# wait_for FILE PATTERN: poll up to 10 s
wait_for() {
    for _ in $(seq 1 200); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

out=$("$roostd" --version 2>&1) && [[ $out == Roost\ * ]] &&
    ok version || bad version "$out"
out=$("$roostd" --help 2>&1) && [[ $out == *--set* && $out == *--data-dir* ]] &&
    ok help || bad help "$out"
"$roostd" --no-such-option >/dev/null 2>&1; rc=$?
[ $rc -ne 0 ] && ok unknown-option || bad unknown-option "exit $rc"

printf 'port = 5679\n# comment\n\nnosuchkey = 1\nheartbeat = many\n' > "$tmp/bad.conf"
out=$("$roostd" -t -c "$tmp/bad.conf" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ $out == *"bad.conf:4: unknown key 'nosuchkey'"* ]] &&
   [[ $out == *"bad.conf:5: heartbeat: 'many' is not an integer"* ]]; then
    ok config-errors-name-lines
else
    bad config-errors-name-lines "exit $rc: $out"
fi

printf 'heartbeat = 30\nframe_max = 65536\n' > "$tmp/good.conf"
out=$("$roostd" -t -c "$tmp/good.conf" 2>&1) && [[ $out == *"configuration ok"* ]] &&
    ok config-check || bad config-check "$out"
out=$("$roostd" -t --set frame_max=100 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == *"frame_max: 100 is outside"* ]] &&
    ok set-bounds || bad set-bounds "exit $rc: $out"
out=$("$roostd" -t --set nokey=1 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == *"unknown key 'nokey'"* ]] &&
    ok set-unknown || bad set-unknown "exit $rc: $out"

# A running broker: file settings apply, SIGHUP reopens the log, SIGTERM
# exits 0.
"$roostd" -c "$tmp/good.conf" --port 0 --data-dir "$tmp/data" \
    --log-file "$tmp/roost.log" --log-level debug 2>"$tmp/stderr" &
pid=$!
if wait_for "$tmp/roost.log" "ready for connections on port"; then
    ok started
else
    bad started "$(cat "$tmp/stderr" "$tmp/roost.log")"
fi
[ -d "$tmp/data" ] && ok data-dir-created || bad data-dir-created "no $tmp/data"
mv "$tmp/roost.log" "$tmp/roost.log.1"
kill -HUP "$pid"
if wait_for "$tmp/roost.log" "log file reopened"; then
    ok sighup-reopens-log
else
    bad sighup-reopens-log "no new log file"
fi
kill -TERM "$pid"
wait "$pid"; rc=$?
pid=
[ $rc -eq 0 ] && ok sigterm-exit-0 || bad sigterm-exit-0 "exit $rc: $(tail -5 "$tmp/stderr")"
grep -q "stopped" "$tmp/roost.log" && ok logs-stop || bad logs-stop "no 'stopped' line"

echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
