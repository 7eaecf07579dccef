#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the build dependencies, build Roost, and run roostd in the
# foreground on port 5672 with the embedded defaults (guest/guest from
# loopback, data under ./data). Extra arguments go to roostd.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/deps.sh" --build
"$src/scripts/build.sh" "$src/build"
mkdir -p "$src/data"
exec "$src/build/broker/roostd" --port 5672 --data-dir "$src/data" "$@"
