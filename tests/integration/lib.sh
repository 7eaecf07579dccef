# SPDX-License-Identifier: Apache-2.0
# Shared by the shell integration tests (sourced): where roostd and
# Debian's python3 are, a temporary directory removed at exit with any
# roostd still running, PASS/FAIL counting, and starting and stopping
# roostd on a free port.
here=$(cd "$(dirname "$0")" && pwd)
roostd=${ROOSTD:-$here/../../broker/roostd}
py="env -u PYTHONHOME -u PYTHONPATH /usr/bin/python3"
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

# start DATA_DIR LOG [ARGS...]: start roostd, set $pid and $port; 1 if it
# did not get ready (or exited).
start() {
    local data=$1 log=$2
    shift 2
    port=
    "$roostd" --port 0 --data-dir "$data" --log-file "$log" "$@" \
        2>>"$tmp/stderr" &
    pid=$!
    for _ in $(seq 1 200); do
        grep -q "ready for connections" "$log" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    port=$(sed -n 's/.*ready for connections on port \([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ]
}

# stop: SIGTERM, and roostd's exit status.
stop() {
    kill -TERM "$pid"
    wait "$pid"
    local rc=$?
    pid=
    return $rc
}

# run_checks NAME COMMAND...: run a check script that prints "PASS name"
# and "FAIL name: why" lines; each counts. One that stops half way (an
# exception: a non-zero exit without a FAIL line) fails too.
run_checks() {
    local name=$1 rc line rest
    shift
    "$@" > "$tmp/checks.out" 2>&1
    rc=$?
    while IFS= read -r line; do
        case $line in
            "PASS "*) ok "${line#PASS }" ;;
            "FAIL "*) rest=${line#FAIL }; bad "${rest%%: *}" "${rest#*: }" ;;
        esac
    done < "$tmp/checks.out"
    grep -q '^FAIL ' "$tmp/checks.out" || [ $rc -eq 0 ] ||
        bad "$name ran to its end" "exit $rc: $(tail -5 "$tmp/checks.out")"
}

# need TEST WHAT PACKAGE COMMAND...: unless COMMAND succeeds, say that
# WHAT is missing and exit 77 (automake's "skipped").
need() {
    local name=$1 what=$2 pkg=$3
    shift 3
    "$@" >/dev/null 2>&1 && return 0
    echo "$name: $what is missing (apt-get install $pkg); skipped"
    exit 77
}

# find_chromium: prints $CHROMIUM, or Debian's chromium's path (nothing
# when there is none).
find_chromium() {
    local c
    [ -n "${CHROMIUM:-}" ] && { echo "$CHROMIUM"; return; }
    for c in chromium chromium-browser; do
        command -v "$c" && return
    done
    true
}
