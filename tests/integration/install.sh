#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make install into a DESTDIR, from the build directory: every file in
# its place (programs, roost.conf, man pages, the systemd unit, which
# systemd-analyze verify accepts), a changed roost.conf kept by a second
# install, the INSTALLED roostd started from there with its installed
# configuration and the installed roostctl (and pika) talking to it,
# then make uninstall leaving no program behind. Prints
# "install: N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
srcdir=${srcdir:-$here/../..}
build=$(cd "$(dirname "$roostd")/.." && pwd)
root=$tmp/root

# The sub-make is not part of the make running the tests: no jobserver,
# no inherited flags.
submake() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$build" "$@"; }

# The installation directories, as the build's Makefile expands them.
eval "$(printf 'dirs:\n\t@echo sbindir=$(sbindir) bindir=$(bindir) sysconfdir=$(sysconfdir) mandir=$(mandir) unitdir=$(systemdsystemunitdir)\n' |
    submake -s -f Makefile -f - dirs)"
[ -n "${sbindir:-}" ] && [ -n "${unitdir:-}" ] && ok "dirs($sbindir, $unitdir)" ||
    bad dirs "cannot read the installation directories"

if submake -s install DESTDIR="$root" > "$tmp/install.out" 2>&1; then
    ok make-install
else
    bad make-install "$(tail -5 "$tmp/install.out")"
fi
conf=$root$sysconfdir/roost/roost.conf
for f in "$sbindir/roostd" "$bindir/roostctl" "$bindir/roost-perf"; do
    [ -x "$root$f" ] && ok "installed:$f" || bad "installed:$f" "missing or not executable"
done
for f in "$sysconfdir/roost/roost.conf" "$mandir/man8/roostd.8" \
         "$mandir/man8/roostctl.8" "$mandir/man5/roost.conf.5" \
         "$mandir/man1/roost-perf.1" \
         "$unitdir/roost.service"; do
    [ -s "$root$f" ] && ok "installed:$f" || bad "installed:$f" "missing or empty"
done
cmp -s "$conf" "$srcdir/conf/roost.conf" && ok conf-is-dump ||
    bad conf-is-dump "$conf differs from conf/roost.conf"
# Nothing for the web page: it is built into roostd.
n=$(find "$root" -type f | wc -l)
[ "$n" -eq 9 ] && ok "nine-files" || bad "nine-files" "$(find "$root" -type f)"

# The unit: the installed paths in it, and systemd-analyze verify
# silent on it (it checks ExecStart's program and that each
# Documentation= man page opens, so they point into the DESTDIR).
unit=$root$unitdir/roost.service
grep -qx "ExecStart=$sbindir/roostd -c $sysconfdir/roost/roost.conf --set data_dir=/var/lib/roost" "$unit" &&
    ok unit-execstart || bad unit-execstart "$(grep ExecStart "$unit")"
for line in Type=notify NotifyAccess=main User=roost Group=roost \
            StateDirectory=roost 'ExecReload=/bin/kill -HUP $MAINPID' \
            WatchdogSec=30 TimeoutStartSec=90 Restart=on-failure \
            ProtectSystem=strict NoNewPrivileges=yes; do
    grep -qxF "$line" "$unit" && ok "unit:$line" || bad "unit:$line" "missing"
done
nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
cmax=$("$roostd" --dump-config | sed -n 's/^# connection_max = //p')
[ -n "$nofile" ] && [ "$nofile" -gt "$cmax" ] && ok "unit-nofile($nofile>$cmax)" ||
    bad unit-nofile "LimitNOFILE=$nofile, connection_max $cmax"
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$tmp/unit"
    sed "s|$sbindir/roostd|$root$sbindir/roostd|" "$unit" > "$tmp/unit/roost.service"
    out=$(MANPATH=$root$mandir systemd-analyze verify "$tmp/unit/roost.service" 2>&1); rc=$?
    [ $rc -eq 0 ] && [ -z "$out" ] && ok unit-verify || bad unit-verify "exit $rc: $out"
    # The check can fail: a misspelt key is reported.
    sed 's/^ProtectHome=/ProtectHme=/' "$tmp/unit/roost.service" > "$tmp/unit/bad.service"
    out=$(MANPATH=$root$mandir systemd-analyze verify "$tmp/unit/bad.service" 2>&1)
    [[ $out == *"Unknown key 'ProtectHme'"* ]] && ok unit-verify-catches ||
        bad unit-verify-catches "$out"
else
    bad unit-verify "systemd-analyze is missing (apt-get install systemd)"
fi

# A second install keeps the operator's roost.conf.
echo "heartbeat = 17" >> "$conf"
submake -s install DESTDIR="$root" > "$tmp/install2.out" 2>&1 &&
    ok make-install-again || bad make-install-again "$(tail -5 "$tmp/install2.out")"
tail -1 "$conf" | grep -qx "heartbeat = 17" && ok conf-kept ||
    bad conf-kept "roost.conf was overwritten"
grep -q "roost.conf exists: kept" "$tmp/install2.out" && ok conf-kept-said ||
    bad conf-kept-said "$(cat "$tmp/install2.out")"

# The installed roostd with the installed (changed) configuration, a
# data directory here, the API on a free port.
roostd=$root$sbindir/roostd
if start "$tmp/data" "$tmp/roost.log" -c "$conf" -s management.tcp.port=0; then
    ok installed-roostd-starts
    api=$(sed -n 's|.*management API listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$tmp/roost.log" | head -1)
    out=$("$root$bindir/roostctl" --host 127.0.0.1 --port "$api" status 2>&1); rc=$?
    [ $rc -eq 0 ] && [[ $out == *"Status of node"* ]] && ok installed-roostctl-status ||
        bad installed-roostctl-status "exit $rc: $out"
    # heartbeat = 17 from the installed file is what the broker offers.
    if $py -c 'import pika' 2>/dev/null; then
        out=$($py - "$port" <<'PY' 2>&1
import sys, pika
c = pika.BlockingConnection(pika.ConnectionParameters(
    "127.0.0.1", int(sys.argv[1]), heartbeat=None))
ch = c.channel()
ch.queue_declare("install-check")
ch.basic_publish("", "install-check", b"from the installed roostd")
m, _, body = ch.basic_get("install-check", auto_ack=True)
print(body.decode(), c._impl.params.heartbeat)
c.close()
PY
)
        [ "$out" = "from the installed roostd 17" ] && ok installed-publish-get ||
            bad installed-publish-get "$out"
    fi
    stop && ok installed-roostd-stops || bad installed-roostd-stops "exit $?"
else
    bad installed-roostd-starts "$(tail -5 "$tmp/stderr" "$tmp/roost.log" 2>/dev/null)"
fi

# Uninstall: no program, page or unit left; the changed roost.conf stays
# (and is said to).
submake -s uninstall DESTDIR="$root" > "$tmp/uninstall.out" 2>&1 &&
    ok make-uninstall || bad make-uninstall "$(tail -5 "$tmp/uninstall.out")"
left=$(find "$root" -type f)
[ "$left" = "$conf" ] && ok uninstall-leaves-only-changed-conf ||
    bad uninstall-leaves-only-changed-conf "$left"
grep -q "roost.conf was changed: left in place" "$tmp/uninstall.out" &&
    ok uninstall-says-conf-kept || bad uninstall-says-conf-kept "$(cat "$tmp/uninstall.out")"
# An unchanged roost.conf goes with the rest.
rm -rf "$root"
submake -s install DESTDIR="$root" >/dev/null 2>&1 &&
    submake -s uninstall DESTDIR="$root" >/dev/null 2>&1
left=$(find "$root" -type f)
[ -z "$left" ] && ok uninstall-clean || bad uninstall-clean "$left"

echo "install: $pass passed, $fail failed"
[ $fail -eq 0 ]
