#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# roostctl's list_queues, list_exchanges, list_bindings, list_connections,
# list_channels, list_consumers (default columns, chosen ones, "a,b",
# -s, --formatter json, unknown columns refused with 64, a vhost that
# does not exist listed as empty), purge_queue, delete_queue (--if-empty,
# --if-unused, the count of ready messages) and close_connection, with
# their effects checked over AMQP (pika): in a vhost of its own, with a
# user of its own whose connection (2 channels, a consumer with
# prefetch 2) roostctl_lists.py holds.
#
# Targets: roostd, started here with -s management.tcp.port=0; or, with
# ROOSTCTL_TEST_PORT=15699, only the management API on that port
# (AMQP on ROOSTCTL_TEST_AMQP_PORT, default 5699: the reference RabbitMQ).
# With ROOSTCTL_REF_PORT=15699 (and ROOSTCTL_REF_AMQP_PORT) it also runs
# against that broker after roostd and compares every listing between
# the two, once names of connections and channels, pids and row order are
# normalised. With RABBITMQCTL set to a command that runs the real
# rabbitmqctl against the reference (/work/shared/tools/rabbitmq-ref ctl),
# each listing on the reference is also compared with rabbitmqctl's.
# The expectations were checked against RabbitMQ 3.10.8 both ways.
# Prints "roostctl_lists: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

. "$here/roostctl_lib.sh"
need_pika roostctl_lists
helper=$here/roostctl_lists.py

V=ctl-lists-v$$
U=ctl-lists-u$$
PW=ctl-lists-pw
nobody=ctl-lists-nobody$$
t=$'\t'
holder=
api=
peer=

cleanup() {
    [ -n "$holder" ] && kill "$holder" 2>/dev/null
    if [ -n "$api" ]; then
        ctl -q delete_vhost "$V" >/dev/null 2>&1
        ctl -q delete_user "$U" >/dev/null 2>&1
    fi
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

summary() {
    echo "roostctl_lists: $pass passed, $fail failed"
    [ $fail -eq 0 ]
    exit
}

expect() {
    local name=$tag-$1 code=$2
    shift 2
    run "$@"
    [ "$rc" -eq "$code" ] && ok "$name" ||
        bad "$name" "exit $rc, want $code: $(head -c 400 "$tmp/err")"
}
amqp_py() { $py "$helper" "$1" "$amqp" "$V" "$U" "$PW" "${@:2}"; }

# norm ROWS [-s]: normalise stdin (roostctl_lists.py norm), keeping the
# rows that match the regex ROWS ('' all) and the banners and header.
norm() {
    local rows=$1
    shift
    awk -v re="$rows" 'NR <= 3 && /^(Timeout: |Listing )/ { print; next }
        re == "" || $0 ~ re || (!hdr++ && !silent) { print }' \
        silent="$([ "${1:-}" = -s ] && echo 1)" |
        $py "$helper" norm "$@"
}

# see NAME ROWS WANT ARGS...: roostctl ARGS (with -t 60, as rabbitmqctl's
# default), normalised with ROWS, must be WANT; polled for up to
# $patience s, since RabbitMQ's API reports counts up to 5 s late. Kept in
# $tmp/TAG/NAME for the comparison, and compared with rabbitmqctl's.
see() {
    local name=$1 rows=$2 want=$3 got s=
    shift 3
    [ "${1:-}" = -s ] && s=-s
    local end=$((SECONDS + patience))
    while :; do
        got=$(ctl -t 60 "$@" 2>&1 | norm "$rows" $s)
        [ "$got" = "$want" ] && break
        [ $SECONDS -ge $end ] && break
        sleep 0.3
    done
    # the holder's port differs between brokers
    printf '%s\n' "$got" | sed "s/$t${peer:-none}$t/${t}PORT$t/g" >"$tmp/$tag/$name"
    [ "$got" = "$want" ] && ok "$tag-$name" ||
        bad "$tag-$name" "$(diff <(echo "$want") <(echo "$got") | head -20)"
    if [ "$tag" = ref ] && [ -n "${RABBITMQCTL:-}" ] && [ -z "${unlike:-}" ]; then
        local real
        real=$($RABBITMQCTL "$@" 2>&1 | norm "$rows" $s)
        [ "$real" = "$got" ] && ok "$tag-$name-as-rabbitmqctl" ||
            bad "$tag-$name-as-rabbitmqctl" "$(diff <(echo "$real") <(echo "$got") | head -20)"
    fi
}

# scenario TAG: every check against the broker at $api / $amqp.
scenario() {
    tag=$1
    mkdir -p "$tmp/$tag"
    ctl -q delete_vhost "$V" >/dev/null 2>&1
    expect add-vhost 0 add_vhost "$V"
    expect add-user 0 add_user "$U" "$PW"
    expect set-permissions 0 set_permissions -p "$V" "$U" '.*' '.*' '.*'

    rm -f "$tmp/status"
    amqp_py hold "$tmp/status" 2>>"$tmp/stderr" &
    holder=$!
    for _ in $(seq 1 200); do
        [ -s "$tmp/status" ] && break
        sleep 0.05
    done
    if [ "$(cat "$tmp/status" 2>/dev/null)" = ready ]; then
        ok "$tag-amqp-objects-declared"
    else
        bad "$tag-amqp-objects-declared" "$(tail -3 "$tmp/stderr")"
        return
    fi

    # ---- list_queues ----
    see list-queues '' "Timeout: 60.0 seconds ...
Listing queues for vhost $V ...
name${t}messages
lq1${t}3
lq2${t}4" list_queues -p "$V"
    see list-queues-columns '' "Timeout: 60.0 seconds ...
Listing queues for vhost $V ...
name${t}messages_ready${t}messages_unacknowledged${t}consumers${t}durable${t}auto_delete${t}exclusive${t}arguments${t}policy${t}state${t}type
lq1${t}3${t}0${t}0${t}true${t}false${t}false${t}[{\"x-max-length\",10},{\"x-message-ttl\",600000}]${t}${t}running${t}classic
lq2${t}2${t}2${t}1${t}false${t}true${t}false${t}[]${t}${t}running${t}classic" \
        list_queues -p "$V" name messages_ready messages_unacknowledged consumers durable auto_delete exclusive arguments policy state type
    see list-queues-commas '' "Timeout: 60.0 seconds ...
Listing queues for vhost $V ...
name${t}messages${t}durable
lq1${t}3${t}true
lq2${t}4${t}false" list_queues -p "$V" name,messages, durable name
    see list-queues-silent '' "lq1
lq2" -s list_queues -p "$V" name
    run list_queues -p "$V" --formatter json name arguments
    $py -c '
import json, sys
rows = sorted(json.loads(sys.argv[1]), key=lambda r: r["name"])
sys.exit(0 if rows == [
    {"name": "lq1", "arguments": [["x-max-length", "signedint", 10],
                                  ["x-message-ttl", "signedint", 600000]]},
    {"name": "lq2", "arguments": []}] else 1)' "$out" 2>/dev/null &&
        ok "$tag-list-queues-json" || bad "$tag-list-queues-json" "$out"
    run list_queues
    [ "$(sed -n 1p <<<"$out")" = "Timeout: 30.0 seconds ..." ] &&
        [ "$(sed -n 2p <<<"$out")" = "Listing queues for vhost / ..." ] &&
        ok "$tag-list-queues-default-vhost" || bad "$tag-list-queues-default-vhost" "$out"
    see list-queues-no-vhost '' "Timeout: 60.0 seconds ...
Listing queues for vhost $nobody ..." list_queues -p "$nobody"

    # ---- list_exchanges ----
    local ex="^(lx|amq\\.direct)?$t"
    see list-exchanges "$ex" "Listing exchanges for vhost $V ...
name${t}type
${t}direct
amq.direct${t}direct
lx${t}topic" list_exchanges -p "$V"
    see list-exchanges-columns "$ex" "Listing exchanges for vhost $V ...
name${t}type${t}durable${t}auto_delete${t}internal${t}arguments${t}policy
${t}direct${t}true${t}false${t}false${t}[]${t}
amq.direct${t}direct${t}true${t}false${t}false${t}[]${t}
lx${t}topic${t}true${t}false${t}false${t}[{\"alternate-exchange\",\"amq.fanout\"}]${t}" \
        list_exchanges -p "$V" name type durable auto_delete internal arguments policy

    # ---- list_bindings ----
    see list-bindings '' "Listing bindings for vhost $V...
source_name${t}source_kind${t}destination_name${t}destination_kind${t}routing_key${t}arguments
${t}exchange${t}lq1${t}queue${t}lq1${t}[]
${t}exchange${t}lq2${t}queue${t}lq2${t}[]
lx${t}exchange${t}lq1${t}queue${t}a.#${t}[{\"x-foo\",\"bar\"}]" list_bindings -p "$V"
    see list-bindings-columns '' "Listing bindings for vhost $V...
routing_key${t}source_name
a.#${t}lx
lq1${t}
lq2${t}" list_bindings -p "$V" routing_key source_name

    # ---- list_connections, list_channels: all vhosts, our user's ----
    peer=$(cat "$tmp/status.port")
    # The default adds name, which close_connection takes (rabbitmqctl's
    # has none: docs/compatibility.md); its own columns are compared.
    unlike=1 see list-connections "^[^$t]*$t$U$t" "Listing connections ...
name${t}user${t}peer_host${t}peer_port${t}state
OBJ${t}$U${t}127.0.0.1${t}$peer${t}running" list_connections
    # Roost's columns (RabbitMQ 3.10 has neither as an info key).
    if [ "$tag" != ref ]; then
        expect list-connections-user-provided-name 0 list_connections user_provided_name
        expect list-queues-head-message-age 0 list_queues -p "$V" name head_message_age
    fi
    see list-connections-default-columns "^$U$t" "Listing connections ...
user${t}peer_host${t}peer_port${t}state
$U${t}127.0.0.1${t}$peer${t}running" list_connections user peer_host peer_port state
    see list-connections-columns "^$U$t" "Listing connections ...
user${t}vhost${t}peer_host${t}state${t}channels${t}protocol${t}auth_mechanism${t}ssl${t}name${t}pid${t}peer_cert_subject
$U${t}$V${t}127.0.0.1${t}running${t}2${t}{0,9,1}${t}PLAIN${t}false${t}OBJ${t}OBJ${t}" \
        list_connections user vhost peer_host state channels protocol auth_mechanism ssl name pid peer_cert_subject
    see list-channels "^[^$t]*$t$U$t" "Listing channels ...
pid${t}user${t}consumer_count${t}messages_unacknowledged
OBJ${t}$U${t}0${t}0
OBJ${t}$U${t}1${t}2" list_channels
    see list-channels-columns "^$U$t" "Listing channels ...
user${t}vhost${t}number${t}consumer_count${t}messages_unacknowledged${t}prefetch_count${t}transactional${t}confirm
$U${t}$V${t}1${t}0${t}0${t}0${t}false${t}false
$U${t}$V${t}2${t}1${t}2${t}2${t}false${t}false" \
        list_channels user vhost number consumer_count messages_unacknowledged prefetch_count transactional confirm

    # ---- list_consumers (rabbitmqctl keeps its own column order) ----
    see list-consumers '' "Listing consumers in vhost $V ...
queue_name${t}channel_pid${t}consumer_tag${t}ack_required${t}prefetch_count${t}active${t}arguments
lq2${t}OBJ${t}ltag${t}true${t}2${t}true${t}[{\"x-priority\",5}]" list_consumers -p "$V"
    see list-consumers-order '' "Listing consumers in vhost $V ...
queue_name${t}arguments
lq2${t}[{\"x-priority\",5}]" list_consumers -p "$V" arguments queue_name queue_name

    # The pid columns join: consumer -> channel -> connection.
    local chan conn name
    chan=$(ctl -s list_consumers -p "$V" channel_pid)
    conn=$(ctl -s list_channels pid connection | awk -F'\t' -v p="$chan" '$1 == p { print $2 }')
    name=$(ctl -s list_connections user name | awk -F'\t' -v u="$U" '$1 == u { print $2 }')
    [ -n "$chan" ] && [ -n "$name" ] && [ "$conn" = "$name" ] &&
        ok "$tag-pid-columns-join" || bad "$tag-pid-columns-join" "channel '$chan' connection '$conn' name '$name'"

    # ---- unknown columns ----
    local cmd col
    for cmd in list_queues:name list_exchanges:name list_bindings:routing_key \
               list_connections:user list_channels:user list_consumers:active; do
        col=${cmd#*:} cmd=${cmd%:*}
        expect "$cmd-unknown-column" 64 $cmd $col nosuch zzz aaa
        [ "$(head -1 <<<"$err")" = "Error (argument validation): Info key(s) aaa,nosuch,zzz are not supported" ] &&
            ok "$tag-$cmd-unknown-column-message" || bad "$tag-$cmd-unknown-column-message" "$err"
        if [ "$tag" = ref ] && [ -n "${RABBITMQCTL:-}" ]; then
            [ "$($RABBITMQCTL $cmd $col nosuch zzz aaa 2>&1 | head -1)" = "$(head -1 <<<"$err")" ] &&
                ok "$tag-$cmd-unknown-column-as-rabbitmqctl" || bad "$tag-$cmd-unknown-column-as-rabbitmqctl" "$err"
        fi
    done

    # ---- delete_queue refused, purge_queue ----
    expect delete-queue-if-empty 64 delete_queue -p "$V" lq1 --if-empty
    [ "$out" = "Deleting queue 'lq1' on vhost '$V' if queue is empty ..." ] &&
        [ "$err" = $'Error:\nQueue is not empty' ] &&
        ok "$tag-delete-queue-if-empty-message" || bad "$tag-delete-queue-if-empty-message" "$out / $err"
    expect delete-queue-if-unused 64 delete_queue -p "$V" lq2 -u
    [ "$err" = $'Error:\nQueue is in use' ] &&
        ok "$tag-delete-queue-if-unused-message" || bad "$tag-delete-queue-if-unused-message" "$err"
    [ "$(amqp_py count lq1)" = 3 ] && ok "$tag-refused-delete-keeps-messages" ||
        bad "$tag-refused-delete-keeps-messages" "count $(amqp_py count lq1)"

    expect purge-queue 0 purge_queue -p "$V" lq1
    [ "$out" = "Purging queue 'lq1' in vhost '$V' ..." ] &&
        ok "$tag-purge-queue-banner" || bad "$tag-purge-queue-banner" "$out"
    [ "$(amqp_py count lq1)" = 0 ] && ok "$tag-purged-over-amqp" ||
        bad "$tag-purged-over-amqp" "count $(amqp_py count lq1)"
    expect purge-unknown-queue 69 purge_queue -p "$V" nosuch
    [ "$err" = $'Error:\nnot_found' ] && ok "$tag-purge-unknown-queue-message" ||
        bad "$tag-purge-unknown-queue-message" "$err"

    # ---- delete_queue ----
    amqp_py publish lq1 2
    see list-queues-republished '^lq1' "Timeout: 60.0 seconds ...
Listing queues for vhost $V ...
name${t}messages_ready
lq1${t}2" list_queues -p "$V" name messages_ready
    expect delete-queue 0 delete_queue -p "$V" lq1
    [ "$out" = "Deleting queue 'lq1' on vhost '$V' ...
Queue was successfully deleted with 2 ready messages" ] &&
        ok "$tag-delete-queue-output" || bad "$tag-delete-queue-output" "$out"
    [ "$(amqp_py count lq1)" = absent ] && ok "$tag-deleted-over-amqp" ||
        bad "$tag-deleted-over-amqp" "count $(amqp_py count lq1)"
    expect delete-unknown-queue 64 delete_queue -p "$V" lq1
    [ "$err" = $'Error:\nQueue not found' ] && ok "$tag-delete-unknown-queue-message" ||
        bad "$tag-delete-unknown-queue-message" "$err"

    # ---- close_connection ----
    expect close-connection 0 close_connection "$name" "ctl test closing"
    [ "$out" = "Closing connection $name, reason: ctl test closing..." ] &&
        ok "$tag-close-connection-banner" || bad "$tag-close-connection-banner" "$out"
    for _ in $(seq 1 100); do
        grep -q '^closed' "$tmp/status" && break
        sleep 0.05
    done
    [ "$(cat "$tmp/status")" = "closed 320 CONNECTION_FORCED - ctl test closing" ] &&
        ok "$tag-connection-closed-over-amqp" || bad "$tag-connection-closed-over-amqp" "$(cat "$tmp/status")"
    wait "$holder" 2>/dev/null
    holder=
    see list-connections-closed "^$U\$" "" -s list_connections user
    expect close-unknown-connection 65 close_connection "$name" again
    [ "$err" = $'Error:\nConnection \''"$name"$'\' does not exist' ] &&
        ok "$tag-close-unknown-connection-message" || bad "$tag-close-unknown-connection-message" "$err"

    expect help-list-queues 0 help list_queues
    [[ $out == *"must be one of arguments, auto_delete,"* ]] &&
        ok "$tag-help-list-queues-columns" || bad "$tag-help-list-queues-columns" "$out"

    expect delete-vhost 0 delete_vhost "$V"
    expect delete-user 0 delete_user "$U"
}

if [ -n "${ROOSTCTL_TEST_PORT:-}" ]; then
    api=$ROOSTCTL_TEST_PORT amqp=${ROOSTCTL_TEST_AMQP_PORT:-5699} patience=12
    scenario ref
    summary
fi

start_api "$tmp/data" "$tmp/log" || summary
patience=2
scenario roostd
stop && ok stops || bad stops "$(tail -5 "$tmp/stderr")"

if [ -n "${ROOSTCTL_REF_PORT:-}" ]; then
    api=$ROOSTCTL_REF_PORT amqp=${ROOSTCTL_REF_AMQP_PORT:-5699} patience=12
    scenario ref
    for f in "$tmp"/roostd/*; do
        n=$(basename "$f")
        if [ ! -f "$tmp/ref/$n" ]; then
            bad "same-as-reference-$n" "not run against the reference"
        elif cmp -s "$f" "$tmp/ref/$n"; then
            ok "same-as-reference-$n"
        else
            bad "same-as-reference-$n" "$(diff "$tmp/ref/$n" "$f" | head -20)"
        fi
    done
fi
summary
