#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The crash loop of tests/integration/check_store.c for many rounds, not
# in CI: roostd is killed with SIGKILL at a random moment while producers
# publish persistent messages with confirms and a consumer acks, then
# restarted on the same data directory, and after each restart every
# confirmed message must be there exactly once, nothing settled may come
# back unmarked, and the order must hold.
#
#   scripts/crash-soak.sh [ROUNDS [SEED]]    (default 1000 rounds)
#
# Uses the sanitizer build in build-test/ (scripts/test.sh makes it), or
# BUILD_DIR. Prints the seed; rerun with it to repeat a failure.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-test}
rounds=${1:-1000}
seed=${2:-$(date +%s)}

if [ ! -x "$build/tests/integration/check_store" ]; then
    "$src/scripts/build.sh" "$build" --enable-werror --enable-sanitizers
    make -C "$build" -j"$(nproc)" tests/integration/check_store >/dev/null
fi
echo "crash-soak: $rounds rounds, seed $seed"
cd "$build"
# About 0.5 s a round: let check's timeout grow with the rounds.
ROOST_CRASH_ROUNDS=$rounds ROOST_TEST_SEED=$seed CK_INCLUDE_TAGS=crash \
CK_DEFAULT_TIMEOUT=$((rounds * 3 + 60)) CK_TIMEOUT_MULTIPLIER=$((rounds / 20 + 1)) \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
ROOSTD="$build/broker/roostd" ./tests/integration/check_store
