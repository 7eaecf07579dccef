#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One command for the side-by-side benchmark: install what is missing,
# build roostd and roost-perf without sanitizers in build-bench/, and run
# bench/compare against RabbitMQ (which it installs from Debian when
# missing). Arguments go to bench/compare, e.g. --quick.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/deps.sh" --build
"$src/scripts/build.sh" "$src/build-bench"
ROOSTD="$src/build-bench/broker/roostd" \
ROOST_PERF="$src/build-bench/tools/roost-perf" \
    exec "$src/bench/compare" "$@"
