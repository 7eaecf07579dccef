#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# roostctl against a management API, with RabbitMQ's expectations (they
# were checked against rabbitmqctl 3.10.8): add_user, then list_users
# shows the user and it authenticates over AMQP; change_password (the old
# one fails, the new works); set_user_tags (the password is kept);
# add_vhost/list_vhosts/delete_vhost; set_permissions/list_permissions/
# list_user_permissions/clear_permissions (AMQP access to the vhost comes
# and goes); set_policy/list_policies/clear_policy and the operator
# policy ones; export_definitions, then import_definitions into a second
# broker; status; -q, -s, --formatter json; and the errors with
# rabbitmqctl's exit codes: usage 64, missing user 67 (69 for
# list_user_permissions), missing vhost 65 (69 for set_permissions), no
# broker 69, credentials refused 69, time-out 75.
#
# By default it starts roostd with -s management.tcp.port=0 (and a second
# one to import into). With ROOSTCTL_TEST_PORT=15699 it uses that API on
# 127.0.0.1 instead and starts nothing (AMQP on ROOSTCTL_TEST_AMQP_PORT,
# default 5699): that is how the expectations are checked against
# RabbitMQ. It makes only ctl-test-* users and vhosts and deletes them.
# Talks AMQP with pika (Debian's python3). Prints "roostctl: N passed,
# M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

. "$here/roostctl_lib.sh"
need_pika roostctl

u=ctl-test-u$$
v=ctl-test-v$$
nobody=ctl-test-nobody$$
ref=${ROOSTCTL_TEST_PORT:+yes}
pid2=

cleanup() {
    if [ -n "$ref" ]; then
        ctl -q delete_user "$u" >/dev/null 2>&1
        ctl -q delete_vhost "$v" >/dev/null 2>&1
    fi
    [ -n "$pid2" ] && kill "$pid2" 2>/dev/null
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

summary() {
    echo "roostctl: $pass passed, $fail failed"
    [ $fail -eq 0 ]
    exit
}

if [ -n "$ref" ]; then
    api=$ROOSTCTL_TEST_PORT
    amqp=${ROOSTCTL_TEST_AMQP_PORT:-5699}
else
    start_api "$tmp/data" "$tmp/log" || summary
fi

# expect NAME CODE ARGS...: the exit status is CODE.
expect() {
    local name=$1 code=$2
    shift 2
    run "$@"
    [ "$rc" -eq "$code" ] && ok "$name" ||
        bad "$name" "exit $rc, want $code: $(head -c 400 "$tmp/err")"
}
has_line() { grep -qxF -- "$2" <<<"$1"; }

cat > "$tmp/login.py" <<'EOF'
# login.py PORT USER PASSWORD VHOST: 0 logged in, 1 authentication
# refused, 3 authenticated but the vhost refused, 2 anything else.
import sys
import pika
port, user, pw, vhost = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
try:
    pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, vhost, pika.PlainCredentials(user, pw),
        connection_attempts=1, socket_timeout=10)).close()
except pika.exceptions.ProbableAuthenticationError:
    sys.exit(1)
except pika.exceptions.ProbableAccessDeniedError:
    sys.exit(3)
except pika.exceptions.ConnectionClosedByBroker as e:
    sys.exit(3 if e.reply_code == 530 else 2)
except Exception as e:
    print(e, file=sys.stderr)
    sys.exit(2)
EOF
# login NAME WANT USER PASSWORD VHOST [PORT]
login() {
    $py "$tmp/login.py" "${6:-$amqp}" "$3" "$4" "$5" 2>>"$tmp/stderr"
    local got=$?
    [ $got -eq "$2" ] && ok "$1" || bad "$1" "login.py exit $got, want $2"
}

# ---- status ----
expect status 0 status
[[ $out == "Status of node "*" ..."* && $out == *Listeners* ]] &&
    ok status-output || bad status-output "$out"
run status --formatter json
$py -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if isinstance(d.get("listeners"), list) else 1)' "$out" 2>/dev/null &&
    ok status-json || bad status-json "$out"

# ---- users ----
expect list-users 0 list_users
[ "$(sed -n 1p <<<"$out")" = "Listing users ..." ] && [ "$(sed -n 2p <<<"$out")" = "$(printf 'user\ttags')" ] &&
    has_line "$out" "$(printf 'guest\t[administrator]')" &&
    ok list-users-table || bad list-users-table "$out"

expect add-user 0 add_user "$u" pw1
[ "$(sed -n 1p <<<"$out")" = "Adding user \"$u\" ..." ] && [[ $out == *"Done. Don't forget to grant"* ]] &&
    ok add-user-banner || bad add-user-banner "$out"
run -s list_users
has_line "$out" "$(printf '%s\t[]' "$u")" && ! has_line "$out" "$(printf 'user\ttags')" &&
    ok add-user-listed || bad add-user-listed "$out"
run list_users --formatter json
$py -c '
import json, sys
rows = json.loads(sys.argv[1])
sys.exit(0 if {"user": sys.argv[2], "tags": []} in rows else 1)' "$out" "$u" 2>/dev/null &&
    ok list-users-json || bad list-users-json "$out"
run -q list_users
[ "$(sed -n 1p <<<"$out")" = "$(printf 'user\ttags')" ] && ok quiet-keeps-header || bad quiet-keeps-header "$out"
expect add-user-exists 70 add_user "$u" pw1
[[ $err == *"User \"$u\" already exists"* ]] && ok add-user-exists-message || bad add-user-exists-message "$err"
# No permissions yet: the password is right, the vhost refused.
login user-authenticates 3 "$u" pw1 /
login wrong-password-refused 1 "$u" nope /

expect change-password 0 change_password "$u" pw2
login old-password-fails 1 "$u" pw1 /
login new-password-works 3 "$u" pw2 /

expect set-user-tags 0 set_user_tags "$u" management monitoring
[ "$out" = "Setting tags for user \"$u\" to [management, monitoring] ..." ] &&
    ok set-user-tags-banner || bad set-user-tags-banner "$out"
run -s list_users
has_line "$out" "$(printf '%s\t[management, monitoring]' "$u")" &&
    ok set-user-tags-listed || bad set-user-tags-listed "$out"
login set-user-tags-keeps-password 3 "$u" pw2 /
expect clear-user-tags 0 set_user_tags "$u"
run -s list_users
has_line "$out" "$(printf '%s\t[]' "$u")" && ok clear-user-tags-listed || bad clear-user-tags-listed "$out"

# ---- vhosts ----
expect add-vhost 0 add_vhost "$v" --description "ctl test" --tags "a,b"
[ "$out" = "Adding vhost \"$v\" ..." ] && ok add-vhost-banner || bad add-vhost-banner "$out"
expect add-vhost-again 0 add_vhost "$v"
run -s list_vhosts
has_line "$out" "$v" && has_line "$out" / && ok list-vhosts || bad list-vhosts "$out"
run list_vhosts name description tags
[ "$(sed -n 2p <<<"$out")" = "$(printf 'name\tdescription\ttags')" ] &&
    has_line "$out" "$(printf '%s\tctl test\t[a, b]' "$v")" &&
    ok list-vhosts-columns || bad list-vhosts-columns "$out"
expect list-vhosts-bad-column 64 list_vhosts nosuch

# ---- permissions ----
expect set-permissions 0 set_permissions -p "$v" "$u" '^ctl' '.*' '.*'
[ "$out" = "Setting permissions for user \"$u\" in vhost \"$v\" ..." ] &&
    ok set-permissions-banner || bad set-permissions-banner "$out"
run list_permissions -p "$v"
[ "$(sed -n 1p <<<"$out")" = "Listing permissions for vhost \"$v\" ..." ] &&
    [ "$(sed -n 2p <<<"$out")" = "$(printf 'user\tconfigure\twrite\tread')" ] &&
    has_line "$out" "$(printf '%s\t^ctl\t.*\t.*' "$u")" &&
    ok list-permissions || bad list-permissions "$out"
run list_user_permissions "$u"
[ "$(sed -n 2p <<<"$out")" = "$(printf 'vhost\tconfigure\twrite\tread')" ] &&
    has_line "$out" "$(printf '%s\t^ctl\t.*\t.*' "$v")" &&
    ok list-user-permissions || bad list-user-permissions "$out"
run -s list_permissions
has_line "$out" "$(printf 'guest\t.*\t.*\t.*')" && ok list-permissions-default-vhost ||
    bad list-permissions-default-vhost "$out"
login permitted-vhost-opens 0 "$u" pw2 "$v"

expect clear-permissions 0 clear_permissions -p "$v" "$u"
run -s list_user_permissions "$u"
! grep -qF -- "$v" <<<"$out" && ok clear-permissions-listed || bad clear-permissions-listed "$out"
login cleared-vhost-refused 3 "$u" pw2 "$v"
expect clear-permissions-again 0 clear_permissions -p "$v" "$u"

# ---- policies ----
expect set-policy 0 set_policy -p "$v" --priority 3 --apply-to queues \
    ctl-pol '^ctl' '{"message-ttl":5, "max-length":3}'
[ "$out" = "Setting policy \"ctl-pol\" for pattern \"^ctl\" to \"{\"message-ttl\":5, \"max-length\":3}\" with priority \"3\" for vhost \"$v\" ..." ] &&
    ok set-policy-banner || bad set-policy-banner "$out"
run list_policies -p "$v"
[ "$out" = "Listing policies for vhost \"$v\" ...
$(printf 'vhost\tname\tpattern\tapply-to\tdefinition\tpriority')
$(printf '%s\tctl-pol\t^ctl\tqueues\t{"max-length":3,"message-ttl":5}\t3' "$v")" ] &&
    ok list-policies || bad list-policies "$out"
run list_policies -p "$v" --formatter json
[ "$out" = '[
{"vhost":"'"$v"'","name":"ctl-pol","pattern":"^ctl","apply-to":"queues","definition":"{\"max-length\":3,\"message-ttl\":5}","priority":3}
]' ] && ok list-policies-json || bad list-policies-json "$out"
expect set-policy-bad-pattern 69 set_policy -p "$v" ctl-bad '(' '{"max-length":1}'
[ "$err" = 'Error:
Validation failed

pattern should be regular expression but is invalid: {"missing )",1}' ] &&
    ok set-policy-bad-pattern-message || bad set-policy-bad-pattern-message "$err"
expect set-policy-unknown-key 69 set_policy -p "$v" ctl-bad a '{"max-lengthx":1}'
[[ $err == *'[{<<"max-lengthx">>,1}] are not recognised policy settings'* ]] &&
    ok set-policy-unknown-key-message || bad set-policy-unknown-key-message "$err"
expect set-policy-bad-json 69 set_policy -p "$v" ctl-bad a '{max-length:1}'
[ "$err" = $'Error:\nJSON decoding error. Reason: badarg' ] &&
    ok set-policy-bad-json-message || bad set-policy-bad-json-message "$err"
expect set-policy-bad-priority 64 set_policy --priority x ctl-bad a '{"max-length":1}'
expect set-policy-too-few 64 set_policy ctl-bad a
expect set-policy-unknown-vhost 65 set_policy -p "$nobody" ctl-bad a '{"max-length":1}'
[ "$err" = "Virtual host '$nobody' does not exist" ] &&
    ok set-policy-unknown-vhost-message || bad set-policy-unknown-vhost-message "$err"
expect list-policies-unknown-vhost 65 list_policies -p "$nobody"
expect set-operator-policy 0 set_operator_policy -p "$v" ctl-op '^ctl' '{"max-length":1}'
[ "$out" = "Setting operator policy override \"ctl-op\" for pattern \"^ctl\" to \"{\"max-length\":1}\" with priority \"0\" for vhost \"$v\" ..." ] &&
    ok set-operator-policy-banner || bad set-operator-policy-banner "$out"
expect set-operator-policy-refused-key 69 set_operator_policy -p "$v" ctl-op2 a '{"overflow":"drop-head"}'
[[ $err == *'[{<<"overflow">>,<<"drop-head">>}] are not recognised policy settings'* ]] &&
    ok set-operator-policy-refused-message || bad set-operator-policy-refused-message "$err"
run -s list_operator_policies -p "$v"
[ "$out" = "$(printf '%s\tctl-op\t^ctl\tall\t{"max-length":1}\t0' "$v")" ] &&
    ok list-operator-policies || bad list-operator-policies "$out"
expect clear-operator-policy 0 clear_operator_policy -p "$v" ctl-op
[ "$out" = "Clearing operator policy \"ctl-op\" on vhost \"$v\" ..." ] &&
    ok clear-operator-policy-banner || bad clear-operator-policy-banner "$out"
expect clear-policy 0 clear_policy -p "$v" ctl-pol
[ "$out" = "Clearing policy \"ctl-pol\" on vhost \"$v\" ..." ] &&
    ok clear-policy-banner || bad clear-policy-banner "$out"
expect clear-policy-again 69 clear_policy -p "$v" ctl-pol
[ "$err" = $'Error:\nParameter does not exist' ] &&
    ok clear-policy-again-message || bad clear-policy-again-message "$err"
run -s list_policies -p "$v"
[ -z "$out" ] && ok list-policies-empty || bad list-policies-empty "$out"

# ---- definitions ----
expect set-permissions-for-export 0 set_permissions -p "$v" "$u" '.*' '.*' '.*'
expect set-user-tags-for-export 0 set_user_tags "$u" monitoring
expect export 0 export_definitions "$tmp/defs.json"
[ "$out" = "Exporting definitions in JSON to a file at \"$tmp/defs.json\" ..." ] &&
    ok export-banner || bad export-banner "$out"
$py - "$tmp/defs.json" "$u" "$v" <<'EOF' && ok export-content || bad export-content "$(head -c 300 "$tmp/defs.json")"
import json, sys
d = json.load(open(sys.argv[1]))
users = [x["name"] for x in d["users"]]
vhosts = [x["name"] for x in d["vhosts"]]
perms = [(p["user"], p["vhost"]) for p in d["permissions"]]
sys.exit(0 if sys.argv[2] in users and sys.argv[3] in vhosts and
         (sys.argv[2], sys.argv[3]) in perms else 1)
EOF
run export_definitions -
$py -c 'import json, sys; json.loads(sys.argv[1])["users"]' "$out" 2>/dev/null &&
    ok export-stdout || bad export-stdout "$(head -c 300 <<<"$out")"

# Import into a second broker; against a shared reference broker, only
# our user, vhost and permission are imported back, after deleting them.
api1=$api amqp1=$amqp
if [ -n "$ref" ]; then
    $py - "$tmp/defs.json" "$tmp/import.json" "$u" "$v" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
u, v = sys.argv[3], sys.argv[4]
out = {"users": [x for x in d["users"] if x["name"] == u],
       "vhosts": [x for x in d["vhosts"] if x["name"] == v],
       "permissions": [p for p in d["permissions"] if p["user"] == u]}
json.dump(out, open(sys.argv[2], "w"))
EOF
    expect delete-before-import 0 delete_user "$u"
    expect delete-vhost-before-import 0 delete_vhost "$v"
else
    cp "$tmp/defs.json" "$tmp/import.json"
    pid1=$pid
    if start "$tmp/data2" "$tmp/log2" -s management.tcp.port=0 &&
       api2=$(mgmt_port "$tmp/log2"); then
        pid2=$pid amqp=$port api=$api2
        ok second-broker
    else
        pid2=$pid
        bad second-broker "$(tail -3 "$tmp/log2")"
        summary
    fi
    pid=$pid1
fi
expect import 0 import_definitions "$tmp/import.json"
[[ $out == "Importing definitions in JSON from a file at \"$tmp/import.json\" ..."* ]] &&
    ok import-banner || bad import-banner "$out"
run -s list_users
has_line "$out" "$(printf '%s\t[monitoring]' "$u")" && ok imported-user-listed || bad imported-user-listed "$out"
run -s list_user_permissions "$u"
has_line "$out" "$(printf '%s\t.*\t.*\t.*' "$v")" && ok imported-permissions || bad imported-permissions "$out"
login imported-user-logs-in 0 "$u" pw2 "$v"
# The same file again, from stdin: nothing changes.
ctl import_definitions - <"$tmp/import.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && grep -qxF "Importing definitions in JSON from standard input ..." "$tmp/out" &&
    ok import-stdin || bad import-stdin "exit $rc: $(cat "$tmp/out" "$tmp/err")"
if [ -z "$ref" ] && [ -n "$pid2" ]; then
    kill -TERM "$pid2"; wait "$pid2"; pid2=
fi
api=$api1 amqp=$amqp1

printf '{"users": [' >"$tmp/malformed.json"
expect import-malformed 65 import_definitions "$tmp/malformed.json"
[[ $err == *"Failed to deserialise input"* ]] && ok import-malformed-message || bad import-malformed-message "$err"
expect import-missing-file 65 import_definitions "$tmp/absent.json"
expect export-missing-dir 65 export_definitions "$tmp/absent/defs.json"

# ---- deleting ----
expect delete-vhost 0 delete_vhost "$v"
[ "$out" = "Deleting vhost \"$v\" ..." ] && ok delete-vhost-banner || bad delete-vhost-banner "$out"
run -s list_vhosts
! has_line "$out" "$v" && ok deleted-vhost-gone || bad deleted-vhost-gone "$out"
expect delete-vhost-missing 65 delete_vhost "$v"
expect delete-user 0 delete_user "$u"
run -s list_users
! grep -qF -- "$u" <<<"$out" && ok deleted-user-gone || bad deleted-user-gone "$out"
login deleted-user-refused 1 "$u" pw2 /

# ---- errors ----
expect unknown-command 64 no_such_command
[[ $err == *"Command 'no_such_command' not found"* ]] && ok unknown-command-message || bad unknown-command-message "$err"
expect missing-argument 64 delete_user
[[ $err == *"not enough arguments"* ]] && ok missing-argument-message || bad missing-argument-message "$err"
expect missing-permission-argument 64 set_permissions guest '.*' '.*'
expect extra-argument 64 list_users extra
expect unknown-option 64 list_users --no-such-option
expect option-of-another-command 64 list_users --description x
expect delete-unknown-user 67 delete_user "$nobody"
[[ $err == *"User \"$nobody\" does not exist"* ]] && ok unknown-user-message || bad unknown-user-message "$err"
expect change-password-unknown-user 67 change_password "$nobody" x
expect set-user-tags-unknown-user 67 set_user_tags "$nobody" x
expect set-permissions-unknown-user 67 set_permissions "$nobody" '.*' '.*' '.*'
expect clear-permissions-unknown-user 67 clear_permissions "$nobody"
expect list-user-permissions-unknown-user 69 list_user_permissions "$nobody"
expect set-permissions-unknown-vhost 69 set_permissions -p "$v" guest '.*' '.*' '.*'
expect list-permissions-unknown-vhost 65 list_permissions -p "$v"
expect help 0 help
expect help-command 0 help set_permissions
[[ $out == *"set_permissions [--vhost <vhost>] <username> <conf> <write> <read>"* ]] &&
    ok help-command-usage || bad help-command-usage "$out"

expect wrong-api-password 69 --password wrong-password list_users
[ -z "$out" ] && [[ $err == *"refused the credentials"* ]] &&
    ok wrong-api-password-message || bad wrong-api-password-message "out '$out' err '$err'"

# A port nothing listens on: no banner, 69.
closed=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$ctl_bin" --host 127.0.0.1 --port "$closed" list_users >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 69 ] && [ ! -s "$tmp/out" ] && grep -q "unable to perform an operation" "$tmp/err" &&
    ok broker-not-running || bad broker-not-running "exit $rc: $(cat "$tmp/out" "$tmp/err")"

# A server that accepts and never answers: 75 after --timeout.
$py -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
conns = []
end = time.time() + 20
s.settimeout(1)
while time.time() < end:
    try:
        conns.append(s.accept()[0])
    except socket.timeout:
        pass
' >"$tmp/mute.port" &
mute=$!
for _ in $(seq 1 100); do [ -s "$tmp/mute.port" ] && break; sleep 0.05; done
"$ctl_bin" --host 127.0.0.1 --port "$(cat "$tmp/mute.port")" --timeout 1 list_users >"$tmp/out" 2>"$tmp/err"; rc=$?
kill $mute 2>/dev/null; wait $mute 2>/dev/null
[ $rc -eq 75 ] && grep -q "timed out" "$tmp/err" && ok timeout ||
    bad timeout "exit $rc: $(cat "$tmp/err")"

if [ -z "$ref" ]; then
    stop && ok stops || bad stops "$(tail -5 "$tmp/stderr")"
fi
summary
