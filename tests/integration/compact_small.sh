#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A journal whose records are all live does not compact: 60,000 paged
# persistent 16-byte messages in a durable queue, and 60,000 in a stream
# (1 MiB segments, paging.window 16). Their bodies are a fraction of
# their records, and compaction once weighed paged entries by their
# bodies alone: the wholly live front segment looked dead and was
# copied forward without end (a 10,000,000-message stream never
# finished publishing). Prints "compact_small: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

perf=${ROOST_PERF:-$(dirname "$roostd")/../tools/roost-perf}
opts=(-s store.segment_size=1048576 -s paging.window=16
      -s management.tcp.port=0 -s prometheus.tcp.port=-1)
if start "$tmp/data" "$tmp/log" "${opts[@]}"; then
    for t in classic stream; do
        if "$perf" --port "$port" --queue-type "$t" --persistent \
               --confirm 500 --publish-only --count 60000 --size 16 \
               --queue-prefix "cs-$t-" --quiet >"$tmp/perf.out" 2>&1; then
            ok "60,000 x 16 B published into a $t queue"
        else
            bad "60,000 x 16 B published into a $t queue" "$(tail -3 "$tmp/perf.out")"
        fi
    done
    sleep 3       # a sparse front segment waits a second before it is copied
    stop || bad "clean stop" "$(tail -3 "$tmp/log")"
    line=$(grep "store: closed after" "$tmp/log" | tail -1)
    n=$(sed -n 's/.* \([0-9]*\) compactions.*/\1/p' <<<"$line")
    if [ "${n:-x}" = 0 ]; then
        ok "no compaction of a journal that is all live"
    else
        bad "no compaction of a journal that is all live" "$line"
    fi
else
    bad "roostd starts" "$(tail -3 "$tmp/log")"
fi
echo "compact_small: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
