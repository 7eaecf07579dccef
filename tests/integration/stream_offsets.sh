#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Named stream consumers (stream_offsets.py, pika and the management
# API): resuming at the ack watermark, the API's names, then a clean
# restart (exact), a kill -9 (never past what was acked), a short
# stream.offset_retention, and deleted streams' files gone from
# data/offsets. Prints "stream_offsets: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_offsets "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
ctl_bin=${ROOSTCTL_BIN:-$(dirname "$roostd")/../tools/roostctl/roostctl}
opts=(-s management.tcp.port=0 -s prometheus.tcp.port=0
      -s stream.consumer_names_max=8)
checks() {
    local label=$1 phase=$2 log=$3 http
    shift 3
    http=$(sed -n 's|.*management API listening on http://[^:]*:\([0-9]*\)/.*|\1|p' "$log")
    run_checks "$label" $py "$here/stream_offsets.py" --port "$port" \
        --http "$http" --phase "$phase" "$@"
}
if start "$tmp/data" "$tmp/log" "${opts[@]}"; then
    prom=$(sed -n 's|.*Prometheus metrics on http://[^:]*:\([0-9]*\)/.*|\1|p' "$tmp/log" | tail -1)
    checks "stream_offsets.py" main "$tmp/log" --prom "$prom" --ctl "$ctl_bin"
    checks "before a clean restart" before-restart "$tmp/log"
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
    if start "$tmp/data" "$tmp/log2" "${opts[@]}"; then
        checks "after a clean restart" after-restart "$tmp/log2"
        checks "before kill -9" before-kill "$tmp/log2"
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        pid=
        if start "$tmp/data" "$tmp/log3" "${opts[@]}"; then
            checks "after kill -9" after-kill "$tmp/log3"
            stop || bad "clean stop" "$(tail -3 "$tmp/log3")"
        else
            bad "roostd starts after kill -9" "$(tail -3 "$tmp/log3")"
        fi
        # --check-data reads the names' files; damage to one is named,
        # and a start skips it, logged
        "$roostd" --check-data "$tmp/data" >"$tmp/check.out" 2>&1; rc=$?
        if [ $rc -eq 0 ] && grep -q '^offsets/[0-9]*: 1 record (1 consumer offset)' "$tmp/check.out"; then
            ok "--check-data reads a stream's consumer offsets"
        else
            bad "--check-data reads a stream's consumer offsets" "rc $rc: $(cat "$tmp/check.out")"
        fi
        f=$(ls "$tmp/data/offsets" | head -1)
        printf 'XXXX' | dd of="$tmp/data/offsets/$f" bs=1 seek=20 conv=notrunc 2>/dev/null
        "$roostd" --check-data "$tmp/data" >"$tmp/check.out" 2>&1; rc=$?
        if [ $rc -eq 1 ] && grep -q 'record at offset 0 (.*), skipped' "$tmp/check.out"; then
            ok "--check-data: a damaged offsets file is corrupt (exit 1)"
        else
            bad "--check-data: a damaged offsets file is corrupt (exit 1)" "rc $rc: $(cat "$tmp/check.out")"
        fi
        if start "$tmp/data" "$tmp/log4" "${opts[@]}" \
                -s stream.offset_retention=1500; then
            if grep -q "offsets/$f: .* do not check out" "$tmp/log4"; then
                ok "a start skips a damaged offsets file, saying so"
            else
                bad "a start skips a damaged offsets file, saying so" "$(grep offsets "$tmp/log4")"
            fi
            checks "retention" retention "$tmp/log4"
            checks "cleanup" cleanup "$tmp/log4"
            sleep 0.5
            left=$(ls "$tmp/data/offsets")
            if [ -z "$left" ]; then
                ok "deleted streams' offset files are gone"
            else
                bad "deleted streams' offset files are gone" "$left"
            fi
            stop || bad "clean stop" "$(tail -3 "$tmp/log4")"
        else
            bad "roostd starts after kill -9" "$(tail -3 "$tmp/log3")"
        fi
    else
        bad "roostd starts again" "$(tail -3 "$tmp/log2")"
    fi
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "stream_offsets: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
