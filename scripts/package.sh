#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build Roost's Debian package (debian/) from a clean copy of the tree and
# print the .deb's path on the last line.
#   scripts/package.sh [OUT_DIR]     (default: build-deb in the tree)
# The copy holds what git tracks plus new files it does not ignore (in a
# git checkout), or the tree without build directories (in an unpacked
# make dist), so no build directory is packaged. The build is
# dpkg-buildpackage -us -uc -b, without the test suite (DEB_BUILD_OPTIONS
# nocheck) and with at most two jobs.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/build-deb}

command -v dpkg-buildpackage >/dev/null ||
    { echo "package: dpkg-buildpackage is missing (apt-get install dpkg-dev debhelper)" >&2; exit 1; }
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tree=$out/roost-$version
rm -rf "$tree"
mkdir -p "$tree"
# (A make dist tree unpacked inside a checkout, as distcheck's, is not
# the checkout's top and is copied as it is.)
if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
        tar --null -T - -cf -) | tar -C "$tree" -xf -
else
    # make dist's tree: what it shipped, not the builds made in it
    # (distcheck's _build and _inst, build*/).
    tar -C "$src" --exclude=./_build --exclude=./_inst --exclude='./build*' \
        --exclude=./autom4te.cache -cf - . | tar -C "$tree" -xf -
fi
chmod -R u+w "$tree"

cd "$tree"
# Not a part of any make that runs this (make check): no jobserver or
# flags of its.
unset MAKEFLAGS MFLAGS MAKELEVEL
DEB_BUILD_OPTIONS="nocheck parallel=${PACKAGE_JOBS:-2}" \
    dpkg-buildpackage -us -uc -b > "$out/build.log" 2>&1 || {
    tail -n 40 "$out/build.log" >&2
    echo "package: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
    exit 1
}
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=$out/roost_${version}_${arch}.deb
[ -f "$deb" ] || { echo "package: no $deb" >&2; exit 1; }
echo "$deb"
