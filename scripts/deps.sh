#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what Roost needs to build and test, from Debian's packages, and
# only what is missing. Run as root (or with sudo available).
#   scripts/deps.sh            build and test dependencies
#   scripts/deps.sh --build    only what building roostd needs
set -euo pipefail

build_pkgs=(gcc make autoconf automake libtool pkg-config
            libevent-dev libssl-dev libjansson-dev libpcre2-dev check
            librabbitmq-dev libsystemd-dev)
test_pkgs=(clang libclang-rt-14-dev python3 gcovr openssl curl chromium
           prometheus
           # the man pages (groff -ww, man -l) and the unit
           # (systemd-analyze verify)
           groff-base man-db systemd
           # the Debian package: dpkg-buildpackage, dh, lintian
           dpkg-dev debhelper fakeroot lintian)

pkgs=("${build_pkgs[@]}")
[ "${1:-}" = "--build" ] || pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The client libraries the interop tests drive (pika, kombu, bunny,
# amqp-tools, php-amqplib, amqplib from npm).
if [ "${1:-}" != "--build" ]; then
    "$(dirname "$0")/../tests/interop/deps.sh"
fi
