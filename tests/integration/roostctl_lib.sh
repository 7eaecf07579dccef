# SPDX-License-Identifier: Apache-2.0
# Shared by roostctl.sh and roostctl_lists.sh (sourced after lib.sh):
# which roostctl to run, the API port a roostd logs, starting roostd with
# its API on a free port, and running roostctl against $api.
if [ -n "${ROOSTCTL_BIN:-}" ]; then
    ctl_bin=$ROOSTCTL_BIN
elif [ -n "${ROOSTD:-}" ]; then
    ctl_bin=$(dirname "$ROOSTD")/../tools/roostctl/roostctl
else
    ctl_bin=$here/../../tools/roostctl/roostctl
fi
# The connection comes from the options below, never from the caller.
unset ROOSTCTL_HOST ROOSTCTL_PORT ROOSTCTL_USER ROOSTCTL_PASSWORD

# need_pika NAME: exit 77 (skipped) without pika for /usr/bin/python3.
need_pika() {
    if ! $py -c 'import pika' 2>/dev/null; then
        echo "$1: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
        exit 77
    fi
}

# mgmt_port LOG: the API port roostd logged, polling up to 10 s.
mgmt_port() {
    local p
    for _ in $(seq 1 200); do
        p=$(sed -n 's|.*management API listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$1" | head -1)
        [ -n "$p" ] && { echo "$p"; return 0; }
        sleep 0.05
    done
    return 1
}

# start_api DATA_DIR LOG: start roostd with management.tcp.port=0; set
# $pid, $amqp and $api. 1, after a FAIL line, if it did not come up.
start_api() {
    if ! start "$1" "$2" -s management.tcp.port=0; then
        bad roostd-starts "$(tail -3 "$tmp/stderr"; tail -3 "$2" 2>/dev/null)"
        return 1
    fi
    amqp=$port
    if api=$(mgmt_port "$2"); then
        ok mgmt-api-listening
    else
        bad mgmt-api-listening "no 'management API listening on' line: $(tail -3 "$2")"
        return 1
    fi
}

ctl() { "$ctl_bin" --host 127.0.0.1 --port "$api" "$@"; }

# run ARGS...: roostctl's stdout in $out, stderr in $err, status in $rc.
run() {
    ctl "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}
