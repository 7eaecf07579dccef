#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The man pages the build writes (man/roostd.8, man/roost.conf.5,
# man/roostctl.8, man/roost-perf.1): each is well-formed roff (groff -ww
# gives no warning, man -l renders it), also with the configuration
# file's path under a long prefix, and each names every entry of the
# table it is made from: every key roostd --dump-config prints, every
# option of roostd's, roostctl's and roost-perf's getopt tables (read from
# the sources), every roostctl command. Prints "manpages: N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
need manpages groff groff groff --version
srcdir=${srcdir:-$here/../..}
build=$(cd "$(dirname "$roostd")/.." && pwd)
ctl=$build/tools/roostctl/roostctl
perf=$build/tools/roost-perf

# Each page as the build wrote it, and as the programs print it now.
for page in roostd.8 roost.conf.5 roostctl.8 roost-perf.1; do
    f=$build/man/$page
    if [ ! -s "$f" ]; then
        bad "$page-built" "no $f"
        continue
    fi
    case $page in
        roostctl.8) "$ctl" --man-page > "$tmp/$page" ;;
        roost-perf.1) "$perf" --man-page > "$tmp/$page" ;;
        *) "$roostd" --man-page "$page" > "$tmp/$page" ;;
    esac
    cmp -s "$f" "$tmp/$page" && ok "$page-current" ||
        bad "$page-current" "$f differs from what the program prints"
    sect=${page##*.} name=${page%.*}
    head -3 "$f" | grep -q "^\.TH ${name^^} $sect " && ok "$page-th" ||
        bad "$page-th" "$(head -3 "$f")"
    warn=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$f" 2>&1)
    [ -z "$warn" ] && ok "$page-groff-clean" || bad "$page-groff-clean" "$warn"
    if command -v man >/dev/null; then
        out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$f" 2>&1)
        [[ $out == *NAME* && $out == *"$name"* ]] && ok "$page-man-l" ||
            bad "$page-man-l" "$(echo "$out" | head -5)"
    fi
done

# Under any prefix: roostd.8 and roost.conf.5 name the installed
# configuration file, and one under a long configure prefix (a distcheck
# in a deep directory) must still render clean and whole. Each page with
# that path put under a prefix of over 120 characters (roff-escaped, as
# roff_request writes it).
long=/tmp/roost-long-prefix-$(printf 'p%.0s' {1..60})/and-$(printf 'q%.0s' {1..40})/etc
for page in roostd.8 roost.conf.5; do
    "$roostd" --man-page "$page" |
        LONGCONF="${long//-/\\-}/roost/roost.conf" awk '
            index($0, ".I \"") == 1 && /\/roost\/roost\.conf"$/ {
                print ".I \"" ENVIRON["LONGCONF"] "\""; n++; next }
            { print }
            END { exit n == 0 }' > "$tmp/long-$page" ||
        { bad "$page-long-prefix" "no .I line naming .../roost/roost.conf"; continue; }
    warn=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$tmp/long-$page" 2>&1)
    out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$tmp/long-$page" 2>&1)
    [ -z "$warn" ] && [[ $out == *"$long/roost/roost.conf"* ]] &&
        ok "$page-long-prefix(${#long})" || bad "$page-long-prefix" "${warn:-the path is not whole in man -l}"
done

# missing NAME FILE PATTERN...: the patterns that FILE lacks (fixed
# strings), one a line.
missing() {
    local f=$1 p
    shift
    for p in "$@"; do grep -qF -- "$p" "$f" || echo "$p"; done
}

# roost.conf(5): every key, as ".B key" (lists: ".B key\fB.\fINAME").
keys=$("$roostd" --dump-config | sed -n 's/^# \([^ ]*\) =.*/\1/p')
nkeys=$(echo "$keys" | wc -l)
[ "$nkeys" -gt 50 ] && ok "dump-config-keys($nkeys)" || bad dump-config-keys "$nkeys"
m=$(missing "$build/man/roost.conf.5" $(for k in $keys; do echo ".B ${k//-/\\-}"; done))
[ -z "$m" ] && ok "roost.conf.5-every-key" || bad "roost.conf.5-every-key" "$m"
# Every default too, on the key's own entry.
awk '/^# type:/ {next} /^# [^ ]+ =/ {k=$2; sub(/^# [^ ]+ = ?/, ""); print k "\t" $0}' \
    <("$roostd" --dump-config) > "$tmp/defaults"
bad_defaults=
while IFS=$'\t' read -r k d; do
    [ -z "$d" ] && continue
    entry=$(awk -v k=".B ${k//-/\\\\-}" 'index($0, k) == 1 {on=1; next}
        on && /^\.TP/ {exit} on {print}' "$build/man/roost.conf.5")
    [[ $entry == *"Default: \\fB${d//-/\\-}\\fR"* ]] || bad_defaults+="$k=$d "
done < "$tmp/defaults"
[ -z "$bad_defaults" ] && ok "roost.conf.5-defaults" ||
    bad "roost.conf.5-defaults" "$bad_defaults"

# roostd(8): every long option of broker/proc/cmdline.c's table, and --help
# shows the same set.
opts=$(sed -n 's/^ *{ "\([a-z-]*\)", .*/\1/p' "$srcdir/broker/proc/cmdline.c")
nopts=$(echo "$opts" | wc -l)
[ "$nopts" -ge 10 ] && ok "roostd-table($nopts)" || bad roostd-table "$nopts"
m=$(missing "$build/man/roostd.8" $(for o in $opts; do echo "\\fB\\-\\-${o//-/\\-}\\fR"; done))
[ -z "$m" ] && ok "roostd.8-every-option" || bad "roostd.8-every-option" "$m"
help=$("$roostd" --help | grep -o -- '--[a-z-]*' | sort -u)
[ "$help" = "$(echo "$opts" | sed 's/^/--/' | sort -u)" ] && ok "roostd-help-is-table" ||
    bad "roostd-help-is-table" "$(diff <(echo "$help") <(echo "$opts" | sed 's/^/--/' | sort -u))"
# And every option works as the table says (a long one with getopt_long).
"$roostd" --man-page roost.conf.5 >/dev/null && ok man-page-option || bad man-page-option "exit $?"
"$roostd" --man-page nosuch.1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && grep -q "no man page 'nosuch.1'" "$tmp/err" && ok man-page-unknown ||
    bad man-page-unknown "exit $rc: $(cat "$tmp/err")"

# roostctl(8): every option of tools/roostctl/roostctl.c's table and
# every command roostctl help lists.
copts=$(sed -n '/^} options\[\] = {/,/^};/s/^ *{ "\([a-z-]*\)", .*/\1/p' \
    "$srcdir/tools/roostctl/roostctl.c" | sort -u)
ncopts=$(echo "$copts" | wc -l)
[ "$ncopts" -ge 20 ] && ok "roostctl-table($ncopts)" || bad roostctl-table "$ncopts"
m=$(missing "$build/man/roostctl.8" $(for o in $copts; do echo "\\fB\\-\\-${o//-/\\-}\\fR"; done))
[ -z "$m" ] && ok "roostctl.8-every-option" || bad "roostctl.8-every-option" "$m"
cmds=$("$ctl" help | sed -n 's/^   \([a-z_]*\) .*/\1/p')
ncmds=$(echo "$cmds" | wc -l)
[ "$ncmds" -ge 30 ] && ok "roostctl-commands($ncmds)" || bad roostctl-commands "$ncmds"
m=$(missing "$build/man/roostctl.8" $(for c in $cmds; do echo "\\fB${c}\\fR"; done))
[ -z "$m" ] && ok "roostctl.8-every-command" || bad "roostctl.8-every-command" "$m"

# roost-perf(1): its --help text, which must name every option of its
# getopt table.
popts=$(sed -n '/static const struct option long_options\[\] = {/,/};/p' "$srcdir/tools/perf/options.c" |
    grep -o '{ "[a-z-]*"' | sed 's/{ "//; s/"//' | sort -u)
npopts=$(echo "$popts" | wc -l)
[ "$npopts" -ge 30 ] && ok "roost-perf-table($npopts)" || bad roost-perf-table "$npopts"
m=$(missing "$build/man/roost-perf.1" $(for o in $popts; do echo "\\-\\-${o//-/\\-} "; done))
[ -z "$m" ] && ok "roost-perf.1-every-option" || bad "roost-perf.1-every-option" "$m"

echo "manpages: $pass passed, $fail failed"
[ $fail -eq 0 ]
