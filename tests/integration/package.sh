#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package: scripts/package.sh builds it from a clean copy of
# the tree; its files (dpkg-deb -c), control fields and conffiles
# (dpkg-deb -I), the unit and the maintainer scripts in it (sh -n, what
# they do), lintian without errors, the packaged roostd runnable, and
# roost-port-check naming a process that holds the AMQP port. Skipped
# only where dpkg-buildpackage is missing. Prints
# "package: N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
srcdir=${srcdir:-$here/../..}
need package dpkg-buildpackage dpkg-dev command -v dpkg-buildpackage

out=$("$srcdir/scripts/package.sh" "$tmp/out" 2>"$tmp/package.err"); rc=$?
deb=$(echo "$out" | tail -n 1)
if [ $rc -eq 0 ] && [[ $deb == *.deb ]] && [ -f "$deb" ]; then
    ok "package-built($(basename "$deb"))"
else
    bad package-built "exit $rc: $(tail -5 "$tmp/package.err")"
    echo "package: $pass passed, $fail failed"
    exit 1
fi

# The files: every program, page, the unit, the configuration, the port
# check; nothing from a build directory or the test suite.
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$tmp/files"
for f in /usr/sbin/roostd /usr/bin/roostctl /usr/bin/roost-perf \
         /etc/roost/roost.conf /lib/systemd/system/roost.service \
         /usr/share/man/man8/roostd.8.gz /usr/share/man/man8/roostctl.8.gz \
         /usr/share/man/man5/roost.conf.5.gz \
         /usr/share/man/man1/roost-perf.1.gz \
         /usr/libexec/roost/roost-port-check \
         /usr/share/doc/roost/copyright /usr/share/doc/roost/changelog.gz; do
    grep -qx "$f" "$tmp/files" && ok "file:$f" || bad "file:$f" "not in the package"
done
stray=$(grep -E 'build|/tests?/|\.o$|\.log$|check_' "$tmp/files")
[ -z "$stray" ] && ok no-stray-files || bad no-stray-files "$stray"

# The control fields and conffiles.
dpkg-deb -I "$deb" > "$tmp/info"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = roost ] && ok control-package || bad control-package "$(field Package)"
[ "$(field Version)" = "$(dpkg-parsechangelog -l "$srcdir/debian/changelog" -S Version)" ] &&
    ok control-version || bad control-version "$(field Version)"
deps=$(field Depends)
# (iproute2: ss for roost-port-check; procps: the unit's /bin/kill.)
for d in adduser iproute2 procps libevent-2.1 libssl3 libjansson4 libpcre2-8 \
         librabbitmq4 libsystemd0; do
    [[ $deps == *"$d"* ]] && ok "depends:$d" || bad "depends:$d" "$deps"
done
mkdir -p "$tmp/control"
dpkg-deb -e "$deb" "$tmp/control"
grep -qx /etc/roost/roost.conf "$tmp/control/conffiles" && ok conffile ||
    bad conffile "$(cat "$tmp/control/conffiles" 2>/dev/null)"

# The maintainer scripts: valid sh, and what they are for.
for s in preinst postinst prerm postrm; do
    [ -f "$tmp/control/$s" ] || continue
    sh -n "$tmp/control/$s" 2>"$tmp/shn" && ok "sh-n:$s" || bad "sh-n:$s" "$(cat "$tmp/shn")"
done
p=$tmp/control/postinst
grep -q 'adduser --system --group' "$p" && ok postinst-adduser || bad postinst-adduser "no adduser"
grep -q 'deb-systemd-helper.* enable' "$p" && ok postinst-enables ||
    bad postinst-enables "roost.service is not enabled"
grep -q 'deb-systemd-invoke "$action" roost.service' "$p" && ok postinst-starts ||
    bad postinst-starts "roost.service is not started"
grep -q 'roost-port-check' "$p" && ok postinst-checks-port || bad postinst-checks-port "no port check"
grep -q 'deb-systemd-invoke stop roost.service' "$tmp/control/prerm" 2>/dev/null &&
    ok prerm-stops || bad prerm-stops "roost.service is not stopped on remove"
grep -q 'deluser --system' "$tmp/control/postrm" && ok postrm-deluser ||
    bad postrm-deluser "the user is not removed on purge"

# The shipped files themselves: the unit with the package's paths, and
# roostd runs with the shipped configuration.
mkdir -p "$tmp/x"
dpkg-deb -x "$deb" "$tmp/x"
grep -qx 'ExecStart=/usr/sbin/roostd -c /etc/roost/roost.conf --set data_dir=/var/lib/roost' \
    "$tmp/x/lib/systemd/system/roost.service" && ok unit-paths ||
    bad unit-paths "$(grep ExecStart "$tmp/x/lib/systemd/system/roost.service")"
out=$("$tmp/x/usr/sbin/roostd" -t -c "$tmp/x/etc/roost/roost.conf" 2>&1) &&
    [ "$out" = "configuration ok" ] && ok packaged-roostd-runs || bad packaged-roostd-runs "$out"
cmp -s "$tmp/x/etc/roost/roost.conf" "$srcdir/conf/roost.conf" && ok packaged-conf ||
    bad packaged-conf "differs from conf/roost.conf"

# roost-port-check (the postinst's): a port held by another process is
# named with that process, an AMQP one with exit 1.
check=$tmp/x/usr/libexec/roost/roost-port-check
if command -v ss >/dev/null; then
    $py -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(30)' > "$tmp/holder.port" &
    holder=$!
    for _ in $(seq 1 100); do [ -s "$tmp/holder.port" ] && break; sleep 0.05; done
    hport=$(cat "$tmp/holder.port")
    printf 'listeners.tcp.default = 127.0.0.1:%s\nmanagement.tcp.port = 0\nprometheus.tcp.port = -1\n' \
        "$hport" > "$tmp/busy.conf"
    out=$("$check" "$tmp/busy.conf"); rc=$?
    [ $rc -eq 1 ] && [[ $out == "amqp $hport python3 $holder" ]] && ok port-check-busy ||
        bad port-check-busy "exit $rc: $out (holder pid $holder, port $hport)"
    printf 'management.tcp.port = %s\nport = 0\n' "$hport" > "$tmp/mgmt.conf"
    out=$("$check" "$tmp/mgmt.conf"); rc=$?
    [ $rc -eq 2 ] && [[ $out == "management $hport python3 $holder"* ]] && ok port-check-mgmt ||
        bad port-check-mgmt "exit $rc: $out"
    out=$("$check" "$tmp/busy.conf" "$holder"); rc=$?
    [ $rc -eq 0 ] && [ -z "$out" ] && ok port-check-own-pid ||
        bad port-check-own-pid "exit $rc: $out"
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    out=$("$check" "$tmp/busy.conf"); rc=$?
    [ $rc -eq 0 ] && [ -z "$out" ] && ok port-check-free || bad port-check-free "exit $rc: $out"
else
    bad port-check "ss is missing (apt-get install iproute2)"
fi

# lintian: no errors on the .deb or the .changes (warnings are listed in
# the log).
changes=${deb%.deb}.changes
if command -v lintian >/dev/null; then
    lintian "$deb" "$changes" > "$tmp/lintian" 2>&1
    cat "$tmp/lintian"
    errs=$(grep '^E: ' "$tmp/lintian")
    [ -z "$errs" ] && ok "lintian-no-errors($(grep -c '^W: ' "$tmp/lintian") warnings)" ||
        bad lintian-no-errors "$errs"
else
    bad lintian "lintian is missing (apt-get install lintian)"
fi

echo "package: $pass passed, $fail failed"
[ $fail -eq 0 ]
