#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configure and build Roost in a build directory (default: build/).
#   scripts/build.sh [BUILD_DIR [configure options...]]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$src/build}
shift || true

cd "$src"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    autoreconf -fi >/dev/null
fi
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$src/configure" -nt config.status ] ||
   [ "$(cat .roost-configure-args 2>/dev/null)" != "$*" ]; then
    "$src/configure" -q "$@"
    printf '%s' "$*" > .roost-configure-args
fi
make -j"$(nproc)" >/dev/null
