#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stream's own segment log, data/streams/<id> (stream_files.py): the
# messages split over files of the stream's segment size and none in
# the journal, synced before the confirm, retention by age and by bytes
# freeing whole files (and nothing it dropped coming back after a clean
# restart or a kill -9), the files going with the stream and an
# orphan's at startup, the .crashed mark, and --check-data and a start
# on a damaged segment. Prints "stream_files: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

need stream_files "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
run_checks "stream_files.py" $py "$here/stream_files.py" --roostd "$roostd" \
    --dir "$tmp"
if grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/stderr" 2>/dev/null; then
    bad "sanitizers" "$(head -20 "$tmp/stderr")"
fi
echo "stream_files: $pass passed, $fail failed"
[ $fail -eq 0 ]
