#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the dependencies, build Roost with AddressSanitizer and
# UndefinedBehaviorSanitizer and -Werror, run the whole test suite
# (make check), check that the distribution builds and passes (make
# distcheck), run each fuzz target for a bounded time, and print one
# summary line "N passed, N failed".
#   FUZZ_SECONDS (default 20) time per fuzz target; 0 skips fuzzing
#   DISTCHECK=0 skips make distcheck
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-test}
fuzz_seconds=${FUZZ_SECONDS:-20}
rc=0

"$src/scripts/deps.sh" || exit 1
# Where deps.sh put RabbitMQ's rabbitmqadmin if rabbitmq-server is not
# installed (the copy of the tree that distcheck tests has none).
[ -x "$src/tests/interop/.rabbitmqadmin/rabbitmqadmin" ] &&
    export RABBITMQADMIN=$src/tests/interop/.rabbitmqadmin/rabbitmqadmin
"$src/scripts/build.sh" "$build" --enable-werror --enable-sanitizers || exit 1

cd "$build"
if ! make -j"$(nproc)" check; then
    rc=1
    for log in $(find . -name '*.log' ! -name config.log ! -name test-suite.log); do
        trs=${log%.log}.trs
        if [ -f "$trs" ] && grep -qE '^:test-result: (FAIL|ERROR)' "$trs"; then
            echo "==== $log"
            tail -n 60 "$log"
        fi
    done
fi

extra_pass=0 extra_fail=0
if [ "${DISTCHECK:-1}" != 0 ]; then
    if make -j"$(nproc)" distcheck >distcheck.out 2>&1; then
        echo "distcheck: ok"
        extra_pass=$((extra_pass + 1))
    else
        tail -n 40 distcheck.out
        echo "distcheck: FAILED"
        extra_fail=$((extra_fail + 1))
        rc=1
    fi
fi

if [ "$fuzz_seconds" != 0 ]; then
    if BUILD_DIR="$src/build-fuzz" "$src/scripts/fuzz.sh" "$fuzz_seconds"; then
        extra_pass=$((extra_pass + 1))
    else
        extra_fail=$((extra_fail + 1))
        rc=1
    fi
fi

"$src/scripts/summary.sh" "$build" "$extra_pass" "$extra_fail" || rc=1
exit $rc
