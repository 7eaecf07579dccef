#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Build the libFuzzer targets of tests/fuzz/ with clang and run each one for
# a while, one after the other. Usable from CI: exits non-zero if a target
# crashes, leaks, times out or fails a check.
#
#   scripts/fuzz.sh [SECONDS]      # each target runs SECONDS (default 30)
#
# Environment:
#   BUILD_DIR     build directory (default: build-fuzz/ in the source tree)
#   FUZZ_TARGETS  targets to run (default: fuzz_frame fuzz_method
#                 fuzz_table fuzz_props fuzz_record fuzz_config)
#   MAX_LEN       libFuzzer -max_len (default 65536)
#   JOBS          make -j (default 2)
#   KEEP_CORPUS   1: keep the working corpora (default: removed at exit)
#
# Each target starts from a temporary copy of its committed seeds
# (tests/fuzz/corpus/<target>/), so the committed corpus never grows by
# itself; to keep what a run found, set KEEP_CORPUS=1 and merge by hand
# (fuzz_x -merge=1 NEW_DIR WORK_DIR). Crash reproducers go to
# $BUILD_DIR/fuzz-artifacts/ and full logs to $BUILD_DIR/fuzz-logs/.
set -euo pipefail

secs=${1:-30}
case $secs in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac

srcdir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$srcdir/build-fuzz}
targets=${FUZZ_TARGETS:-fuzz_frame fuzz_method fuzz_table fuzz_props fuzz_record fuzz_config}
max_len=${MAX_LEN:-65536}
jobs=${JOBS:-2}

if ! command -v clang >/dev/null 2>&1; then
    echo "$0: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
    exit 2
fi
if [ -e "$srcdir/config.status" ]; then
    echo "$0: $srcdir is configured in place; run 'make distclean' there" \
        "first, the fuzz build needs a separate directory" >&2
    exit 2
fi
if [ ! -x "$srcdir/configure" ]; then
    (cd "$srcdir" && autoreconf -fi)
fi

# --enable-fuzzing instruments every object (libamqp.a too) with
# -fsanitize=fuzzer-no-link and links the targets with -fsanitize=fuzzer.
cflags="-g -O1"
config_args="CC=clang CFLAGS=$cflags --enable-fuzzing --enable-sanitizers"

mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
cd "$build_dir"
# Configure once; again only if these options changed.
if [ ! -f Makefile ] || [ ! -f fuzz-configured ] ||
    [ "$(cat fuzz-configured)" != "$config_args" ]; then
    echo "configuring in $build_dir"
    rm -f fuzz-configured
    "$srcdir/configure" -q CC=clang CFLAGS="$cflags" --enable-fuzzing \
        --enable-sanitizers
    echo "$config_args" >fuzz-configured
fi

bins=
for t in $targets; do
    bins="$bins tests/fuzz/$t"
done
# shellcheck disable=SC2086 # word splitting of $bins is wanted
make -s -j"$jobs" $bins

artifacts=$build_dir/fuzz-artifacts
logs=$build_dir/fuzz-logs
work=$(mktemp -d "${TMPDIR:-/tmp}/roost-fuzz.XXXXXX")
if [ "${KEEP_CORPUS:-0}" = 1 ]; then
    trap 'echo "working corpora kept in $work"' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$artifacts" "$logs"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
count=0
start=$(date +%s)
for t in $targets; do
    count=$((count + 1))
    mkdir -p "$work/$t"
    cp "$srcdir/tests/fuzz/corpus/$t/"* "$work/$t/"
    log=$logs/$t.log
    rc=0
    "./tests/fuzz/$t" -max_total_time="$secs" -max_len="$max_len" \
        -rss_limit_mb=2048 -timeout=25 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$t-" "$work/$t" >"$log" 2>&1 || rc=$?

    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" |
        tail -n 1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1 || true)
    if [ "$rc" -eq 0 ]; then
        status=ok
    else
        failed=1
        unit=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
        status="FAILED (exit $rc${unit:+, reproducer $unit}; log $log)"
    fi
    printf '%-12s %10s execs  %-20s %s\n' "$t" "${execs:-?}" \
        "${cov:-cov: ?}" "$status"
done
end=$(date +%s)

echo "fuzzed $count targets for ${secs}s each in" \
    "$((end - start))s"
exit "$failed"
